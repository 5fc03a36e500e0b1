"""One submission taken in: its notebook read and checked before it is graded.

Whatever a student uploads (an empty file, a PDF, JSON cut short, a cell
that is not a cell, another lab's notebook) becomes either a notebook that
nbgrader can grade or a status that says what is wrong and what to upload
instead. A submission that cannot be graded still gets its row (`failed`),
with every exercise at 0 and that status.
"""

from __future__ import annotations

import json

import nbformat

from autograder.grader import submissions
from autograder.grader.results import ExerciseResult, SubmissionResult
from autograder.labs import Lab
from autograder.limits import MAX_STATUS_CHARS


def take(submission: submissions.Submission, lab: Lab) -> tuple[nbformat.NotebookNode | None, str]:
    """The notebook of ``submission``, ready to grade for ``lab``; or None and why not.

    The file is read here, once, and not kept: only the parsed notebook
    leaves this function.
    """
    if submission.problem:
        return None, submission.problem
    data, problem = submission.read()
    if data is None:
        return None, problem
    notebook, problem = read_notebook(data)
    if notebook is None:
        return None, problem
    other = other_lab(notebook, lab)
    if other:
        return None, (f"wrong notebook: this is {other}'s notebook, not {lab.id}'s; "
                      f"submit {lab.notebook}.ipynb")
    return notebook, ""


def read_notebook(data: bytes) -> tuple[nbformat.NotebookNode | None, str]:
    """The notebook in ``data``, or None and why it cannot be read."""
    if not data or not data.strip():
        return None, "empty file: upload the .ipynb saved from Jupyter or Colab"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text; upload the .ipynb"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        return None, (
            f"invalid notebook: not complete JSON (line {error.lineno}, column "
            f"{error.colno}: {error.msg}); the file may be cut short: download the "
            f".ipynb again and resubmit"
        )
    if not isinstance(parsed, dict) or "cells" not in parsed:
        return None, ("invalid notebook: the file is JSON but not a notebook (no list of "
                      "cells); upload the .ipynb saved from Jupyter or Colab")
    try:
        notebook = nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file
        first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return None, f"invalid notebook (not readable as .ipynb JSON: {first_line})"
    if not isinstance(notebook.get("cells"), list):
        return None, "invalid notebook: it has no list of cells"
    for index, cell in enumerate(notebook.cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str) \
                or not isinstance(cell.get("source", ""), (str, list)):
            return None, (f"invalid notebook: cell {index + 1} is not a notebook cell (no "
                          f"cell_type and source); open the .ipynb in Jupyter, save it and "
                          f"resubmit")
    return notebook, ""


def other_lab(notebook, lab: Lab) -> str | None:
    """The id of another lab whose answer cells this notebook has, if it has none of ``lab``'s."""
    from autograder.labs import LABS

    ids = set()
    for cell in notebook.cells:
        nbgrader = cell.get("metadata", {}).get("nbgrader")
        if isinstance(nbgrader, dict) and isinstance(nbgrader.get("grade_id"), str):
            ids.add(nbgrader["grade_id"])
    if ids & set(lab.exercises):
        return None
    for other in LABS.values():
        if other.id != lab.id and len(ids & set(other.exercises)) >= 2:
            return other.id
    return None


def failed(student_id: str, lab: Lab, points: dict[str, float], status: str,
           source_name: str, notes=()) -> SubmissionResult:
    """The row of a submission that was not graded: every exercise at 0, and why."""
    exercises = [ExerciseResult(name, 0.0, points.get(name, 0.0), status)
                 for name in lab.exercises if name in points]
    return SubmissionResult(student_id, lab.id, 0.0, sum(points.values()), status,
                            source_name, exercises, list(notes))


def grader_error(reason: str) -> str:
    """The status of a student whom the grader, not the notebook, failed."""
    return f"grader error: {reason}"[:MAX_STATUS_CHARS]
