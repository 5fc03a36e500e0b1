"""The nbgrader course folder's configuration (autograder.grader.course)."""

from __future__ import annotations

import copy

import jsonschema
import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator, common

from autograder.grader import course
from autograder.grader.source import build_source_notebook
from autograder.labs import get_lab


def _graded_cell(notebook):
    return next(cell for cell in notebook.cells
                if cell.metadata.get("nbgrader", {}).get("grade"))


def _broken(notebook, change):
    broken = copy.deepcopy(notebook)
    change(_graded_cell(broken).metadata["nbgrader"])
    return broken


#: Metadata nbgrader's schema refuses, each in its own way.
BREAKS = {
    "points not a number": lambda meta: meta.update(points="many"),
    "grade not a boolean": lambda meta: meta.update(grade="yes"),
    "grade_id missing": lambda meta: meta.pop("grade_id"),
    "an unknown key": lambda meta: meta.update(colour="red"),
}


@pytest.fixture(scope="module")
def notebook():
    return nbformat.from_dict(build_source_notebook(get_lab("lab1")))


@pytest.mark.parametrize("name", BREAKS)
def test_metadata_checked_with_the_schema_checked_once_gives_nbgrader_s_verdict(
        name, notebook, monkeypatch):
    broken = _broken(notebook, BREAKS[name])

    def verdict():
        try:
            MetadataValidator().validate_nb(broken)
        except Exception as error:  # noqa: BLE001 - compared below
            return type(error), str(error)
        return None

    monkeypatch.setattr(common, "jsonschema", jsonschema)
    expected = verdict()
    course._schema_checked_once()
    assert isinstance(common.jsonschema, course.SchemaCheckedOnce)
    assert verdict() == expected
    if name != "an unknown key":   # (allowed by nbgrader's schema)
        assert expected is not None
    MetadataValidator().validate_nb(notebook)   # the lab's own notebook passes


def test_the_schema_is_checked_once_for_all_cells(notebook, monkeypatch):
    monkeypatch.setattr(common, "jsonschema", course.SchemaCheckedOnce())
    checks = []
    validator_class = jsonschema.validators.validator_for(MetadataValidator().schema)
    original = validator_class.check_schema
    monkeypatch.setattr(validator_class, "check_schema",
                        classmethod(lambda cls, schema, *a, **k: (checks.append(1),
                                                                  original(schema, *a, **k))))
    for _ in range(3):
        MetadataValidator().validate_nb(notebook)
    graded = sum("nbgrader" in cell.metadata for cell in notebook.cells)
    assert graded > 10 and len(checks) == 1
