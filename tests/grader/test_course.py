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


def test_only_the_worker_s_own_gradebook_is_written_without_fsync(tmp_path):
    # A worker's gradebook is a scratch copy made again by every run; the
    # class's gradebook, which the instructor keeps, is written as SQLite does.
    from sqlalchemy import create_engine, text

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from autograder.grader import worker
    from autograder.grader.worker import unsynced_sqlite

    worker_db, class_db = tmp_path / "worker" / "gradebook.db", tmp_path / "gradebook.db"
    worker_db.parent.mkdir()
    unsynced_sqlite(worker_db)
    before = set(worker._UNSYNCED)
    unsynced_sqlite(worker_db)   # (a second worker setup adds nothing)
    assert worker._UNSYNCED == before and event.contains(Engine, "connect",
                                                         worker._unsynced_on_connect)
    settings = {}
    for name, path in (("worker", worker_db), ("class", class_db)):
        engine = create_engine(f"sqlite:///{path}")
        with engine.connect() as connection:
            settings[name] = (connection.execute(text("PRAGMA synchronous")).scalar(),
                              connection.execute(text("PRAGMA journal_mode")).scalar())
        engine.dispose()
    assert settings["worker"] == (0, "memory")            # OFF
    assert settings["class"] == (2, "delete")             # SQLite's defaults: FULL
