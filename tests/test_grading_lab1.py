"""Grade lab1 through the real CLI: solution, untouched notebook, samples, a hostile one.

One batch, graded once for the module (a notebook takes a few seconds: two
kernels and TensorFlow's import), then checked from every side.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import shutil

import nbformat
import pytest

from autograder.labs import LABS
from autograder.grader.source import build_source_notebook, write_notebook
from autograder.grader.sandbox import bubblewrap_works
from tests.conftest import (ROOT, assert_no_hidden_source_in_feedback,
                            assert_rows_follow_the_curriculum, assert_sample_scores, run_cli)

LAB = LABS["lab1"]
POINTS = {"dot_scores": 1, "softmax": 2, "attention_pool": 2, "bilinear_scores": 1,
          "additive_scores": 2, "scaled_dot_product_attention": 2}

HOSTILE = r'''
import os, socket
import numpy as np

findings = {}
for path in [%(paths)s]:
    try:
        findings[path] = os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(16)
    except Exception as error:
        findings[path] = type(error).__name__
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    findings["network"] = "open"
except OSError as error:
    findings["network"] = type(error).__name__
try:
    import autograder.references
    findings["references"] = "imported"
except ImportError as error:
    findings["references"] = type(error).__name__
print("FINDINGS", repr(findings))

# Forgery attempts: none of these may turn wrong answers into points.
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
import builtins
builtins.AssertionError = type("Harmless", (Exception,), {})
get_ipython().display_formatter.formatters["text/plain"].for_type(int, lambda *a: "1.0")

def dot_scores(query, keys):
    return np.zeros(np.asarray(keys).shape[:-1])   # wrong on purpose
'''


NOISE = r'''
import sys, warnings, logging
import tensorflow as tf            # TensorFlow's own start-up lines on stderr
print("a line on stderr", file=sys.stderr)
warnings.warn("a Python warning")
logging.getLogger("tensorflow").warning("a TensorFlow log line")
tf.get_logger().error("an error-level log line that is not an error")
'''


def _answered(correct):
    notebook = nbformat.read(LAB.student_path, as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in correct:
            cell.source = correct[grade_id]
    return notebook


def _write_damaged(batch, correct):
    """Correct answers in notebooks damaged the ways GRADING.md lists."""
    noisy = _answered(correct)
    for cell in noisy.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = NOISE + "\n" + cell.source
    nbformat.write(noisy, batch / "noisy.ipynb")

    deleted = _answered(correct)
    deleted.cells = [c for c in deleted.cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") != "test_softmax"]
    nbformat.write(deleted, batch / "deleted_tests.ipynb")

    duplicated = _answered(correct)
    position = next(i for i, c in enumerate(duplicated.cells)
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "test_dot_scores")
    duplicated.cells.insert(position, nbformat.from_dict(
        json.loads(json.dumps(duplicated.cells[position]))))
    duplicated.cells[position].id = "a-copy"
    nbformat.write(duplicated, batch / "duplicated_tests.ipynb")

    dying = _answered(correct)
    for cell in dying.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "attention_pool":
            cell.source = "import os\nos._exit(1)\n" + cell.source
    nbformat.write(dying, batch / "kernel_dies.ipynb")


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
    shutil.copytree(ROOT / "data" / "sample_submissions" / "lab1", batch, dirs_exist_ok=True)
    write_notebook(build_source_notebook(LAB), batch / "solution.ipynb")
    shutil.copy(LAB.student_path, batch / "untouched.ipynb")
    hostile = nbformat.read(LAB.student_path, as_version=4)
    correct = _load_build().LAB1_CORRECT
    secret_paths = [str(out), str(out / "nbgrader" / "gradebook.db"),
                    str(ROOT / "solutions"), str(ROOT / "autograder" / "references"),
                    str(batch)]
    for cell in hostile.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "dot_scores":
            cell.source = HOSTILE % {"paths": ", ".join(repr(p) for p in secret_paths)}
        elif grade_id in correct:
            cell.source = correct[grade_id]
    nbformat.write(hostile, batch / "mallory.ipynb")
    _write_damaged(batch, correct)
    result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                     "--seed", "tests")
    assert result.returncode == 0, result.stderr[-3000:]
    grades = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    exercises = {}
    for row in csv.DictReader(open(out / "exercises.csv")):
        exercises.setdefault(row["student_id"], {})[row["exercise"]] = row
    return {"out": out, "grades": grades, "exercises": exercises, "stdout": result.stdout}


def test_the_solution_scores_full_marks(graded):
    row = graded["grades"]["solution"]
    assert (float(row["score"]), float(row["max_score"]), row["status"]) == (10, 10, "graded")


def test_the_untouched_notebook_scores_zero_without_a_grader_failure(graded):
    row = graded["grades"]["untouched"]
    assert (float(row["score"]), row["status"]) == (0, "graded")
    messages = {r["message"] for r in graded["exercises"]["untouched"].values()}
    assert all("NotImplementedError" in message for message in messages), messages


def test_every_exercise_has_a_row_named_as_in_the_curriculum(graded):
    assert_rows_follow_the_curriculum(graded["exercises"], LAB, POINTS)


@pytest.mark.parametrize("sample", ["alice.ipynb", "bob.ipynb", "carol.ipynb",
                                    "dave.ipynb", "erin/Copy of lab1_attention.ipynb",
                                    "frank.ipynb"])
def test_samples_lose_points_exactly_where_they_are_wrong(graded, sample):
    expected = _load_build().build_expectations()[sample]
    student = sample.split("/")[0].removesuffix(".ipynb")
    assert_sample_scores(graded, student, expected, POINTS)


def test_an_unreadable_notebook_gets_a_row_with_the_reason(graded):
    row = graded["grades"]["heidi"]
    assert float(row["score"]) == 0
    assert row["status"].startswith("invalid notebook"), row["status"]


def test_a_hostile_notebook_cannot_forge_points_or_read_secrets(graded):
    rows = graded["exercises"]["mallory"]
    assert float(rows["dot_scores"]["score"]) == 0
    assert all(float(rows[e]["score"]) == POINTS[e] for e in POINTS if e != "dot_scores")
    if not bubblewrap_works():
        pytest.skip("bubblewrap is not available here: isolation is not enforced")
    autograded = graded["out"] / "nbgrader" / "autograded" / "mallory" / "lab1" / \
        "lab1_attention.ipynb"
    text = json.dumps(nbformat.read(autograded, as_version=4))
    findings = re.search(r"FINDINGS (\{.*?\})\\n", text).group(1)
    assert "open" not in findings and "imported" not in findings, findings
    assert findings.count("FileNotFoundError") == 5, findings


def test_feedback_never_shows_hidden_test_source(graded):
    assert_no_hidden_source_in_feedback(graded["out"], LAB)


def test_report_and_feedback_files_exist(graded):
    out = graded["out"]
    assert (out / "report.html").read_text().count("<svg") >= 2
    students = set(graded["grades"])
    assert {page.stem for page in (out / "feedback").glob("*.html")} == students


@pytest.mark.parametrize("student", ["noisy", "deleted_tests", "duplicated_tests"])
def test_logs_and_damaged_test_cells_do_not_cost_a_correct_notebook(graded, student):
    row = graded["grades"][student]
    assert (float(row["score"]), row["status"]) == (10, "graded"), row


def test_a_kernel_that_dies_keeps_the_points_earned_before(graded):
    row = graded["grades"]["kernel_dies"]
    # dot_scores (1) and softmax (2) were tested before the kernel died.
    assert float(row["score"]) == 3, row
    assert row["status"].startswith("partly graded") and "died" in row["status"], row
    rows = graded["exercises"]["kernel_dies"]
    assert "died" in rows["additive_scores"]["message"]
