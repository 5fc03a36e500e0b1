"""The verdict suite: correct variants and seeded mistakes of every exercise.

Each lab has a module here, `tests/verdicts/<lab>.py`, with

- ``VARIANTS``: {exercise: [answer cell source, ...]}, at least three correct
  answers per exercise written differently from the solution and from each
  other (einsum vs reshape/transpose, loops vs vectorised, -1e9 vs -inf, ...);
- ``MISTAKES``: [Mistake(exercise, name, what, source), ...], at least five
  per exercise: the mistakes students really make. A mistake in a secondary
  property (no `get_config`, no argument check) names the tests cells it must
  fail in ``fails`` ("test_EncoderLayer__config"); it must keep the points of
  every other tests cell of its exercise;
- ``HIDDEN_ONLY``: {mistake name: reason}, the mistakes that the exercise's
  visible check may let through (inputs a student must not see, or what a
  check cannot afford); every other mistake must fail its visible check too.

`build(lab_id, folder)` turns them into submissions: one notebook per variant
index (variant k of every exercise that has one, the solution elsewhere: all
full marks), and one notebook per mistake (the solution everywhere but the
mistaken exercise: points lost there and nowhere else). tests/test_verdicts.py
grades them through `python -m autograder grade` and checks each exercise.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.labs import LABS
from autograder.grader.source import build_source_notebook

SOLUTION_BLOCK = re.compile(r"^[ \t]*### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION[^\n]*\n?",
                            re.S | re.M)


@dataclass(frozen=True)
class Mistake:
    exercise: str
    name: str
    what: str
    source: str
    #: For a secondary-property mistake: the grade ids of the tests cells it
    #: must fail; the exercise's other tests cells keep their points.
    fails: tuple[str, ...] = ()


def spec(lab_id: str):
    """The lab's module of variants and mistakes, or None when it has none."""
    try:
        return importlib.import_module(f"solutions.{lab_id}.verdicts")
    except ModuleNotFoundError:
        return None


def solution_answers(lab_id: str) -> dict[str, str]:
    """The solution of each exercise: its answer cell as a student would fill it."""
    answers = {}
    for cell in build_source_notebook(LABS[lab_id]).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in LABS[lab_id].exercises:
            answers[meta["grade_id"]] = SOLUTION_BLOCK.sub(lambda m: m.group(1), cell.source)
    return answers


def solution_notebook(lab_id: str):
    """The student notebook of ``lab_id`` with every answer cell filled with the solution."""
    return _fill(nbformat.read(LABS[lab_id].student_path, as_version=4), solution_answers(lab_id))


#: Appended to a solution to show what its student kernel really computed
#: with: the Keras backend and the device of a tensor made there.
DEVICE_CELL = """import keras
_t = keras.ops.ones((2, 2))
_d = getattr(_t, "device", None)
print("RAN ON:", keras.backend.backend(), _d() if callable(_d) else _d)"""


def solution_reporting_device(lab_id: str):
    """The solution notebook with DEVICE_CELL at the end."""
    notebook = solution_notebook(lab_id)
    notebook.cells.append(nbformat.v4.new_code_cell(DEVICE_CELL))
    return notebook


def device_reported(out: Path, lab_id: str, student: str = "solution") -> str:
    """What DEVICE_CELL printed in ``student``'s graded notebook under ``out``
    (`grade --out`), e.g. "torch cpu"; "(not graded)" or "(no output)" otherwise."""
    lab = LABS[lab_id]
    graded = Path(out) / "nbgrader" / "autograded" / student / lab_id / f"{lab.notebook}.ipynb"
    if not graded.exists():
        return "(not graded)"
    for output in nbformat.read(graded, as_version=4).cells[-1].get("outputs", []):
        text = output.get("text", "")
        if "RAN ON: " in text:
            return text.split("RAN ON: ", 1)[1].splitlines()[0].strip()
    return "(no output)"


def test_cell_points(lab_id: str) -> dict[str, dict[str, float]]:
    """{exercise: {tests cell grade id: points}} of the lab's source."""
    points: dict[str, dict[str, float]] = {}
    for cell in build_source_notebook(LABS[lab_id]).cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        if meta.get("grade") and not meta.get("solution") and grade_id.startswith("test_"):
            exercise = grade_id.removeprefix("test_").split("__")[0]
            points.setdefault(exercise, {})[grade_id] = float(meta.get("points", 0))
    return points


def failed_checks(out: Path, lab_id: str, student: str) -> set[str] | None:
    """The exercises whose visible check (the locked cell ``check_<exercise>``)
    raised in ``student``'s graded notebook under ``out``; None when not graded."""
    lab = LABS[lab_id]
    graded = Path(out) / "nbgrader" / "autograded" / student / lab_id / f"{lab.notebook}.ipynb"
    if not graded.exists():
        return None
    failed = set()
    for cell in nbformat.read(graded, as_version=4).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.startswith("check_") and any(
                output.get("output_type") == "error" for output in cell.get("outputs", [])):
            failed.add(grade_id.removeprefix("check_"))
    return failed


def _fill(notebook, answers: dict[str, str]):
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in answers:
            cell.source = answers[meta["grade_id"]].strip("\n")
    return notebook


def build(lab_id: str, folder: Path) -> dict[str, dict[str, str]]:
    """Write the lab's verdict submissions into ``folder``.

    Returns:
        {student id: {exercise: "kept" | "lost"}} for every notebook written.
    """
    lab, module = LABS[lab_id], spec(lab_id)
    solution = solution_answers(lab_id)
    missing = set(lab.exercises) - set(solution)
    assert not missing, f"{lab_id}: no solution cell found for {sorted(missing)}"
    folder.mkdir(parents=True, exist_ok=True)
    expected: dict[str, dict[str, str]] = {}

    def write(student_id: str, answers: dict[str, str], losing: str | None) -> None:
        notebook = _fill(nbformat.read(lab.student_path, as_version=4), {**solution, **answers})
        nbformat.write(notebook, folder / f"{student_id}.ipynb")
        expected[student_id] = {e: ("lost" if e == losing else "kept") for e in lab.exercises}

    most = max(len(v) for v in module.VARIANTS.values())
    for k in range(most):
        write(f"variant{k + 1}", {e: v[k] for e, v in module.VARIANTS.items() if k < len(v)}, None)
    for mistake in module.MISTAKES:
        write(mistake_id(mistake), {mistake.exercise: mistake.source}, mistake.exercise)
    return expected


def mistake_id(mistake: Mistake) -> str:
    return f"mistake-{mistake.exercise}-{mistake.name}"
