"""Grade lab4 through the real CLI: the solution, the untouched notebook, the samples.

One batch, graded once for the module (a notebook takes some seconds: two
kernels, TensorFlow's import, a few small layers), then checked from every
side: full marks for the solution and for a correct answer written
differently, 0 for the untouched notebook, and each sample mistake loses
points in its own exercise only (the layers keep theirs when the student's
mask functions or FeedForward are wrong, thanks to the stand-ins), and in a
layer only the points of the properties it breaks (per-property tests cells:
`test_<X>`, `__padding`, `__training`, `__config`).
"""

from __future__ import annotations

import csv
import importlib.util
import shutil

import nbformat
import pytest

from autograder.labs import LABS
from autograder.grader.source import build_source_notebook, write_notebook
from tests.conftest import (ROOT, assert_no_hidden_source_in_feedback,
                            assert_rows_follow_the_curriculum, run_cli)

LAB = LABS["lab4"]
POINTS = {"causal_mask": 1, "padding_mask": 1, "combine_masks": 2, "masked_softmax": 2,
          "FeedForward": 2, "EncoderLayer": 4, "DecoderLayer": 4}
#: The layers' points, property by property (tests cell -> points).
CELLS = {
    "combine_masks": {"test_combine_masks": 1.5, "test_combine_masks__broadcast": 0.5},
    "FeedForward": {"test_FeedForward": 1.5, "test_FeedForward__training": 0.25,
                    "test_FeedForward__config": 0.25},
    "EncoderLayer": {"test_EncoderLayer": 2.75, "test_EncoderLayer__padding": 0.5,
                     "test_EncoderLayer__training": 0.25, "test_EncoderLayer__config": 0.5},
    "DecoderLayer": {"test_DecoderLayer": 2.75, "test_DecoderLayer__padding": 0.5,
                     "test_DecoderLayer__training": 0.25, "test_DecoderLayer__config": 0.5},
}
TOTAL = sum(POINTS.values())


def _load_samples():
    spec = importlib.util.spec_from_file_location(
        "samples_lab4", ROOT / "data" / "sample_submissions" / "samples_lab4.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    batch = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("out")
    shutil.copytree(ROOT / "data" / "sample_submissions" / "lab4", batch, dirs_exist_ok=True)
    write_notebook(build_source_notebook(LAB), batch / "solution.ipynb")
    result = run_cli("grade", "lab4", str(batch), "--out", str(out), "--quiet",
                     "--seed", "tests")
    assert result.returncode == 0, result.stderr[-3000:]
    grades = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    exercises = {}
    for row in csv.DictReader(open(out / "exercises.csv")):
        exercises.setdefault(row["student_id"], {})[row["exercise"]] = row
    return {"out": out, "grades": grades, "exercises": exercises}


def test_the_solution_scores_full_marks(graded):
    row = graded["grades"]["solution"]
    assert (float(row["score"]), float(row["max_score"]), row["status"]) == \
        (TOTAL, TOTAL, "graded"), graded["exercises"]["solution"]


def test_the_untouched_notebook_scores_zero_without_a_grader_failure(graded):
    untouched = _load_samples().UNTOUCHED
    assert nbformat.read(ROOT / "data" / "sample_submissions" / "lab4" / untouched,
                         as_version=4) == nbformat.read(LAB.student_path, as_version=4), \
        "the untouched sample is stale: run data/sample_submissions/samples_lab4.py"
    student = untouched.removesuffix(".ipynb")
    row = graded["grades"][student]
    assert (float(row["score"]), row["status"]) == (0, "graded")
    messages = {r["message"] for r in graded["exercises"][student].values()}
    assert all("NotImplementedError" in message for message in messages), messages


def test_every_exercise_has_a_row_named_as_in_the_curriculum(graded):
    assert_rows_follow_the_curriculum(graded["exercises"], LAB, POINTS)


def test_the_layers_give_credit_property_by_property():
    from tests.verdicts import test_cell_points

    cells = test_cell_points("lab4")
    for exercise, expected in CELLS.items():
        assert cells[exercise] == expected, (exercise, cells[exercise])
        assert sum(expected.values()) == POINTS[exercise]
        assert expected[f"test_{exercise}"] > 0.6 * POINTS[exercise], exercise


@pytest.mark.parametrize("sample", sorted(_load_samples().expectations()))
def test_samples_lose_points_exactly_where_they_are_wrong(graded, sample):
    """Each exercise gets full marks ("kept"), 0 ("lost") or the points the
    sample's expectations reason out (a layer that breaks some properties only)."""
    expected = _load_samples().expectations()[sample]
    student = sample.removesuffix(".ipynb")
    rows = graded["exercises"][student]
    for exercise, outcome in expected.items():
        want = {"kept": POINTS[exercise], "lost": 0.0}.get(outcome, outcome)
        score = float(rows[exercise]["score"])
        assert score == pytest.approx(want), (student, exercise, score, want,
                                              rows[exercise]["message"])
        if want < POINTS[exercise]:
            assert rows[exercise]["message"], (student, exercise)
    assert graded["grades"][student]["status"] == "graded"


@pytest.mark.parametrize("student, exercise, words", [
    ("bob", "causal_mask", "diagonal"),
    ("bob", "masked_softmax", "sum to 1"),
    ("carol", "FeedForward", "residual"),
    ("erin", "EncoderLayer", "padded"),
    ("frank", "DecoderLayer", "pre-norm"),
    ("grace", "DecoderLayer", "queries come from x"),
])
def test_feedback_says_what_is_wrong(graded, student, exercise, words):
    assert words in graded["exercises"][student][exercise]["message"]


def test_feedback_never_shows_hidden_test_source(graded):
    assert_no_hidden_source_in_feedback(graded["out"], LAB)


def test_report_and_feedback_files_exist(graded):
    out = graded["out"]
    assert (out / "report.html").read_text().count("<svg") >= 2
    assert {page.stem for page in (out / "feedback").glob("*.html")} == set(graded["grades"])
