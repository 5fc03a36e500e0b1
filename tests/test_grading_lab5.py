"""Grade lab5 through the real CLI: the solution, the untouched notebook, the samples.

One batch, graded once for the module (a lab5 notebook takes a while: two
kernels and TensorFlow's import; the cells that train or only demonstrate are
skipped, so nothing is trained), then checked from every side. The
samples come from data/sample_submissions/samples_lab5.py, which also says
what each must score (full marks, or the points it keeps where it is wrong: an
exercise's points are split between its tests cells, one per property); its
dave.ipynb is the untouched notebook.
"""

from __future__ import annotations

import csv
import importlib.util
import shutil

import pytest

from autograder.labs import LABS
from autograder.grader.source import build_source_notebook, write_notebook
from tests.conftest import (ROOT, assert_no_hidden_source_in_feedback,
                            assert_rows_follow_the_curriculum, assert_sample_scores, run_cli)

LAB = LABS["lab5"]
POINTS = {"Encoder": 2.5, "Decoder": 2.5, "Transformer": 2.5, "masked_loss": 2,
          "masked_accuracy": 1, "greedy_decode": 2, "sample_with_temperature": 2,
          "beam_search": 3.5}
#: The tests cells of each exercise and their points (the main computation first).
CELLS = {
    "Encoder": {"test_Encoder": 1.5, "test_Encoder__training": 0.5, "test_Encoder__config": 0.5},
    "Decoder": {"test_Decoder": 1.5, "test_Decoder__training": 0.5, "test_Decoder__config": 0.5},
    "Transformer": {"test_Transformer": 1.5, "test_Transformer__training": 0.5,
                    "test_Transformer__config": 0.5},
    "beam_search": {"test_beam_search": 2.5, "test_beam_search__finished": 1},
}


def _load_samples():
    spec = importlib.util.spec_from_file_location(
        "samples_lab5", ROOT / "data" / "sample_submissions" / "samples_lab5.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLES = _load_samples()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    batch = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("out")
    shutil.copytree(ROOT / "data" / "sample_submissions" / "lab5", batch, dirs_exist_ok=True)
    write_notebook(build_source_notebook(LAB), batch / "solution.ipynb")
    result = run_cli("grade", "lab5", str(batch), "--out", str(out), "--quiet",
                     "--seed", "tests")
    assert result.returncode == 0, result.stderr[-3000:]
    grades = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    exercises = {}
    for row in csv.DictReader(open(out / "exercises.csv")):
        exercises.setdefault(row["student_id"], {})[row["exercise"]] = row
    return {"out": out, "grades": grades, "exercises": exercises}


def test_points_follow_the_curriculum():
    assert LAB.exercises == tuple(POINTS)
    assert tuple(SAMPLES.EXERCISES) == LAB.exercises
    cells = {}
    for cell in build_source_notebook(LAB).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            exercise = meta["grade_id"].removeprefix("test_").split("__")[0]
            cells.setdefault(exercise, {})[meta["grade_id"]] = meta["points"]
    assert {e: sum(c.values()) for e, c in cells.items()} == POINTS
    assert {e: c for e, c in cells.items() if len(c) > 1} == CELLS
    # The main computation is worth well over half of each exercise.
    assert all(c[f"test_{e}"] > 0.5 * POINTS[e] for e, c in cells.items())


def test_the_solution_scores_full_marks(graded):
    row = graded["grades"]["solution"]
    assert (float(row["score"]), float(row["max_score"]), row["status"]) == (18, 18, "graded")


def test_the_untouched_notebook_scores_zero_without_a_grader_failure(graded):
    student = SAMPLES.UNTOUCHED.removesuffix(".ipynb")
    row = graded["grades"][student]
    assert (float(row["score"]), row["status"]) == (0, "graded"), row
    messages = {r["message"] for r in graded["exercises"][student].values()}
    assert all("NotImplementedError" in message for message in messages), messages


def test_every_exercise_has_a_row_named_as_in_the_curriculum(graded):
    assert_rows_follow_the_curriculum(graded["exercises"], LAB, POINTS)


@pytest.mark.parametrize("sample", sorted(SAMPLES.expectations()))
def test_samples_lose_points_exactly_where_they_are_wrong(graded, sample):
    """Full marks where a sample is right; where it is wrong, exactly the points of
    the properties it gets right (0 when it gets none), with a message."""
    expected = SAMPLES.expectations()[sample]
    student = sample.removesuffix(".ipynb")
    assert_sample_scores(graded, student, expected, POINTS)


@pytest.mark.parametrize("student,exercise,words", [
    ("bob", "masked_loss", "padded positions count"),
    ("carol", "greedy_decode", "after the end id"),
    ("carol", "sample_with_temperature", "Divide the logits by the temperature"),
    ("erin", "greedy_decode", "starts with the start id"),
    ("erin", "beam_search", "TOTAL log-probability"),
    ("frank", "Encoder", "padding_mask"),
    ("frank", "masked_accuracy", "padded positions count"),
    ("grace", "Transformer", "context_padding_mask"),
    ("grace", "Decoder", "LAST layer"),
    ("heidi", "Decoder", "get_config()"),
    ("heidi", "beam_search", "finished or not"),
])
def test_feedback_names_the_mistake(graded, student, exercise, words):
    assert words in graded["exercises"][student][exercise]["message"]


def test_feedback_never_shows_hidden_test_source(graded):
    assert_no_hidden_source_in_feedback(graded["out"], LAB)
