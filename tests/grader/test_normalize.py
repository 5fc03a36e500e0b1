"""The repairs of a submission's nbgrader structure (autograder/grader/normalize.py)."""

from __future__ import annotations

import copy

import nbformat
import pytest

from autograder.grader import normalize as normalize_module
from autograder.grader.normalize import REPAIRS, normalize


def _cell(kind, source, grade_id=None, **flags):
    cell = nbformat.v4.new_code_cell(source) if kind == "code" else \
        nbformat.v4.new_markdown_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "schema_version": 3, "points": 0,
                                     "solution": False, "grade": False, "locked": False,
                                     **flags}
    return cell


def _release():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        _cell("markdown", "# Lab"),
        _cell("code", "import math", "setup", locked=True),
        _cell("code", "def softmax(x):\n    raise NotImplementedError()", "softmax",
              solution=True),
        _cell("code", "assert softmax(1) == 1", "test_softmax", grade=True, locked=True,
              points=2),
    ]
    return notebook


def _ids(notebook):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]


def test_the_release_itself_needs_no_repair():
    release = _release()
    repaired, notes = normalize(release, release)
    assert notes == []
    assert [c.source for c in repaired.cells] == [c.source for c in release.cells]
    assert len({c.id for c in repaired.cells}) == len(repaired.cells)


def _delete_test(cells):
    del cells[3]


def _duplicate_test(cells):
    cells.append(copy.deepcopy(cells[3]))


def _duplicate_answer(cells):
    cells.insert(2, copy.deepcopy(cells[2]))
    cells[3].source = "def softmax(x):\n    return x"


def _edit_points(cells):
    cells[3].metadata.nbgrader.points = 100


def _unknown_id(cells):
    cells[0].metadata["nbgrader"] = {"grade_id": "zz", "solution": True}


def _test_first(cells):
    cells.insert(0, cells.pop(3))


def _strip_answer(cells):
    cells[2].metadata = {}
    cells[2].source = "def softmax(x):\n    return x"


def _null_nbgrader(cells):
    cells[2].metadata["nbgrader"] = None
    cells[2].source = "def softmax(x):\n    return x"


_RESTORED = ("cell 'softmax': restored nbgrader metadata "
             "(grade, locked, points, schema_version, solution)")


@pytest.mark.parametrize("mutate, expected", [
    (_delete_test, ["cell 'test_softmax' was missing: put back"]),
    (_duplicate_test, ["removed a duplicate of cell 'test_softmax'"]),
    (_duplicate_answer, ["answer cell 'softmax' was duplicated: graded the last copy"]),
    (_edit_points, ["cell 'test_softmax': restored nbgrader metadata (points)"]),
    (_unknown_id, ["removed unknown nbgrader id 'zz'"]),
    (_test_first, ["cell 'test_softmax' was out of place: moved after its answer"]),
    # (a found answer's metadata is then restored, and said so: today's notes)
    (_strip_answer, ["answer cell 'softmax' had lost its metadata: found by its definition",
                     _RESTORED]),
    (_null_nbgrader, ["cell 3: its nbgrader metadata was null, not a dict: dropped",
                      "answer cell 'softmax' had lost its metadata: found by its definition",
                      _RESTORED]),
])
def test_each_repair_says_what_it_did_and_gives_the_release_structure(mutate, expected):
    release = _release()
    submission = copy.deepcopy(release)
    mutate(submission.cells)
    repaired, notes = normalize(submission, release)
    assert notes == expected
    graded = [gid for gid in _ids(repaired) if gid]
    assert graded == ["setup", "softmax", "test_softmax"]
    tests = next(c for c in repaired.cells if _ids_of(c) == "test_softmax")
    assert tests.source == "assert softmax(1) == 1" and tests.metadata.nbgrader.points == 2
    assert len({c.id for c in repaired.cells}) == len(repaired.cells)


def _ids_of(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def test_the_student_answer_is_kept():
    release = _release()
    submission = copy.deepcopy(release)
    _duplicate_answer(submission.cells)
    repaired, _ = normalize(submission, release)
    answer = next(c for c in repaired.cells if _ids_of(c) == "softmax")
    assert answer.source == "def softmax(x):\n    return x"


def test_every_repair_step_is_documented_in_order():
    listed = normalize_module.__doc__
    positions = [listed.find(f"``{step.__name__}``") for step in REPAIRS]
    assert -1 not in positions and positions == sorted(positions), positions
    assert all(step.__doc__ and len(step.__doc__.split()) > 20 for step in REPAIRS)
