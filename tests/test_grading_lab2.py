"""Grade lab2 through the real CLI: the solution, the untouched notebook, the samples.

One batch, graded once for the module, then checked from every side. The
samples (data/sample_submissions/lab2, made by build.py) lose points exactly
in the exercise where they are wrong: a split_heads or merge_heads bug costs
nothing in a MultiHeadAttention that calls them (the grader's stand-ins), and
a MultiHeadAttention that wraps Keras's own layer scores 0 there and nowhere
else.
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

LAB = LABS["lab2"]
POINTS = {"mha_weight_shapes": 1, "SelfAttention": 2, "split_heads": 1, "merge_heads": 1,
          "MultiHeadAttention": 5}


def _load_build():
    spec = importlib.util.spec_from_file_location(
        "build_samples", ROOT / "data" / "sample_submissions" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    batch = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("out")
    shutil.copytree(ROOT / "data" / "sample_submissions" / "lab2", batch, dirs_exist_ok=True)
    write_notebook(build_source_notebook(LAB), batch / "solution.ipynb")
    shutil.copy(LAB.student_path, batch / "untouched.ipynb")
    result = run_cli("grade", "lab2", str(batch), "--out", str(out), "--quiet",
                     "--seed", "tests")
    assert result.returncode == 0, result.stderr[-3000:]
    grades = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    exercises = {}
    for row in csv.DictReader(open(out / "exercises.csv")):
        exercises.setdefault(row["student_id"], {})[row["exercise"]] = row
    return {"out": out, "grades": grades, "exercises": exercises, "stdout": result.stdout}


def test_the_points_add_up_to_10():
    assert list(POINTS) == list(LAB.exercises) and sum(POINTS.values()) == 10


def test_the_solution_scores_full_marks(graded):
    row = graded["grades"]["solution"]
    assert (float(row["score"]), float(row["max_score"]), row["status"]) == (10, 10, "graded"), \
        graded["exercises"]["solution"]


def test_the_untouched_notebook_scores_zero_without_a_grader_failure(graded):
    row = graded["grades"]["untouched"]
    assert (float(row["score"]), row["status"]) == (0, "graded")
    messages = {r["message"] for r in graded["exercises"]["untouched"].values()}
    assert all("NotImplementedError" in message for message in messages), messages


def test_every_exercise_has_a_row_named_as_in_the_curriculum(graded):
    assert_rows_follow_the_curriculum(graded["exercises"], LAB, POINTS)


@pytest.mark.parametrize("sample", sorted(_load_build().build_expectations_lab2()))
def test_samples_lose_points_exactly_where_they_are_wrong(graded, sample):
    expected = _load_build().build_expectations_lab2()[sample]
    student = sample.split("/")[0].removesuffix(".ipynb")
    assert_sample_scores(graded, student, expected, POINTS,
                         status=None if student == "heidi" else "graded")


def test_failure_messages_name_the_mistake(graded):
    rows = graded["exercises"]
    assert "each head holds whole tokens" in rows["bob"]["split_heads"]["message"]
    assert "heads back behind time" in rows["frank"]["merge_heads"]["message"]
    assert "softmax over the last axis" in rows["carol"]["SelfAttention"]["message"]
    assert "sqrt(d_model)" in rows["carol"]["MultiHeadAttention"]["message"]
    assert "output kernel" in rows["carol"]["mha_weight_shapes"]["message"]
    wrapped = rows["grace"]["MultiHeadAttention"]["message"]
    assert "keras.src.layers.attention.multi_head_attention.MultiHeadAttention" in wrapped
    assert "from scratch" in wrapped


def test_an_unreadable_notebook_gets_a_row_with_the_reason(graded):
    row = graded["grades"]["heidi"]
    assert float(row["score"]) == 0
    assert row["status"].startswith("invalid notebook"), row["status"]


def test_feedback_never_shows_hidden_test_source_and_gives_hints(graded):
    assert_no_hidden_source_in_feedback(graded["out"], LAB)
    carol = (graded["out"] / "feedback" / "carol.html").read_text()
    assert "class=\"hint\"" in carol and "sqrt(key_dim)" in carol


def test_report_and_feedback_files_exist(graded):
    out = graded["out"]
    assert (out / "report.html").read_text().count("<svg") >= 2
    students = set(graded["grades"])
    assert {page.stem for page in (out / "feedback").glob("*.html")} == students
