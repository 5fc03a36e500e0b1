"""A lab is its folder: tests/lab0/, copied into an empty kit as
solutions/lab0/, is released and graded with nothing else changed.

The kit here is a fresh folder with only course.toml and that one lab folder
(LABKIT_ROOT points the CLI, the grader, the test kernel and the reference
finder at it). The lab's list, its exercises and points, its references
(``autograder.references.lab0``) and its hints are all read from the folder:
if one of them were listed anywhere else in the kit, lab0 would not grade.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest

from tests.conftest import run_cli
from tests.verdicts import fill

LAB0 = Path(__file__).resolve().parents[1] / "lab0"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kit(tmp_path_factory, root):
    """An empty kit holding only course.toml and the lab0 folder, released."""
    kit = tmp_path_factory.mktemp("kit")
    shutil.copy(root / "course.toml", kit / "course.toml")
    shutil.copytree(LAB0, kit / "solutions" / "lab0")
    env = {"LABKIT_ROOT": str(kit)}
    result = run_cli("release", "lab0", env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return kit, env


def test_the_lab_folder_alone_is_released(kit):
    kit, _ = kit
    notebook = nbformat.read(kit / "labs" / "lab0" / "lab0_scaling.ipynb", as_version=4)
    text = nbformat.writes(notebook)
    assert "HIDDEN TESTS" not in text and "np.asarray(x) * factor" not in text
    assert {cell.metadata["nbgrader"]["grade_id"] for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("solution")} == {"scale", "Doubler"}


def test_the_lab_folder_alone_is_graded(kit, tmp_path):
    kit, env = kit
    student = nbformat.read(kit / "labs" / "lab0" / "lab0_scaling.ipynb", as_version=4)
    submissions = tmp_path / "in"
    submissions.mkdir()
    right = {"scale": "def scale(x, factor):\n    return [v * factor for v in x] "
                      "if isinstance(x, list) else x * factor\n",
             "Doubler": "class Doubler(keras.layers.Layer):\n    def call(self, x):\n"
                        "        return x + x\n"}
    wrong_scale = dict(right, scale="def scale(x, factor):\n    return x + factor\n")
    nbformat.write(fill(student, right), submissions / "ada.ipynb")
    nbformat.write(fill(student, wrong_scale), submissions / "bo.ipynb")
    nbformat.write(student, submissions / "cy.ipynb")
    out = tmp_path / "out"
    result = run_cli("grade", "lab0", str(submissions), "--out", str(out), "--quiet",
                     "--jobs", "1", env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    grades = {row["student_id"]: row for row in
              csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    scores = {student: float(row["score"]) for student, row in grades.items()}
    assert scores == {"ada": 3.0, "bo": 1.0, "cy": 0.0}, grades
    rows = list(csv.DictReader(open(out / "exercises.csv", encoding="utf-8")))
    assert {row["exercise"] for row in rows} == {"scale", "Doubler"}
    # The hint of the lab's hints.toml reaches the student who lost the points.
    page = next((out / "feedback").rglob("bo*.html")).read_text(encoding="utf-8")
    assert "multiply the array by the factor" in page
