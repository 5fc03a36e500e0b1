"""Grade lab3 through the real CLI: the solution, the untouched notebook, the samples.

One batch, graded once for the module (a notebook takes several seconds: two
kernels and TensorFlow's import), then checked from every side. The samples
come from data/sample_submissions/samples_lab3.py, which also says what each
must score.
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

LAB = LABS["lab3"]
# Each exercise is graded in parts (tests cells test_<exercise>__<property>):
# positional_encoding 2 + odd depth 0.5 + dtype 0.5; PositionalEmbedding 3 +
# mask 0.5 + config 0.5; LearnedPositionalEmbedding 2.5 + length limit 0.5 +
# mask 0.25 + config 0.25.
POINTS = {"positional_encoding": 3, "PositionalEmbedding": 4, "LearnedPositionalEmbedding": 3.5}


def _load_samples():
    spec = importlib.util.spec_from_file_location(
        "samples_lab3", ROOT / "data" / "sample_submissions" / "samples_lab3.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLES = _load_samples()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    batch = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("out")
    shutil.copytree(ROOT / "data" / "sample_submissions" / "lab3", batch, dirs_exist_ok=True)
    write_notebook(build_source_notebook(LAB), batch / "solution.ipynb")
    shutil.copy(LAB.student_path, batch / "untouched.ipynb")
    result = run_cli("grade", "lab3", str(batch), "--out", str(out), "--quiet",
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


def test_the_samples_know_the_tests_cells_and_their_points():
    from tests.verdicts import test_cell_points

    cells = test_cell_points("lab3")
    assert {cell: points for exercise in cells for cell, points in cells[exercise].items()} \
        == SAMPLES.CELL_POINTS
    assert {exercise: sum(points.values()) for exercise, points in cells.items()} == POINTS


def test_the_solution_scores_full_marks(graded):
    row = graded["grades"]["solution"]
    assert (float(row["score"]), float(row["max_score"]), row["status"]) == (10.5, 10.5, "graded")


def test_the_untouched_notebook_scores_zero_without_a_grader_failure(graded):
    for student in ("untouched", SAMPLES.UNTOUCHED.removesuffix(".ipynb")):
        row = graded["grades"][student]
        assert (float(row["score"]), row["status"]) == (0, "graded"), row
        messages = {r["message"] for r in graded["exercises"][student].values()}
        assert all("NotImplementedError" in message for message in messages), messages


def test_every_exercise_has_a_row_named_as_in_the_curriculum(graded):
    assert_rows_follow_the_curriculum(graded["exercises"], LAB, POINTS)


@pytest.mark.parametrize("sample", sorted(SAMPLES.expectations()))
def test_samples_lose_points_exactly_where_they_are_wrong(graded, sample):
    expected = SAMPLES.expectations()[sample]
    student = sample.removesuffix(".ipynb")
    assert_sample_scores(graded, student, expected, POINTS)


@pytest.mark.parametrize("student,exercise,words", [
    ("bob", "positional_encoding", "swapped"),
    ("carol", "positional_encoding", "2i / depth"),
    ("carol", "LearnedPositionalEmbedding", "ValueError"),
    ("erin", "PositionalEmbedding", "sqrt(d_model)"),
    ("frank", "PositionalEmbedding", "not a weight"),
    ("grace", "LearnedPositionalEmbedding", "unscaled"),
    ("heidi", "positional_encoding", "float32"),
    ("heidi", "PositionalEmbedding", "get_config()"),
])
def test_feedback_names_the_mistake(graded, student, exercise, words):
    assert words in graded["exercises"][student][exercise]["message"]


def test_feedback_never_shows_hidden_test_source(graded):
    assert_no_hidden_source_in_feedback(graded["out"], LAB)
