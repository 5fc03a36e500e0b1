"""A lab's single source, read into nbgrader's source notebook.

solutions/<lab>/<notebook>.py is a jupytext "percent" file. Its code cells
carry one short marker on the `# %%` line, which this module turns into
nbgrader's cell metadata:

    # %% nbgrader="solution" grade_id="dot_scores"            the student's answer
    # %% nbgrader="tests" grade_id="test_dot_scores" points=1 hidden tests (graded)
    # %% nbgrader="locked" grade_id="check_dot_scores"        provided, read-only code

A provided cell that only demonstrates (a plot, decoding the test set with
the student's functions) may add `grading="skip"`: the grader does not run
it (autograder.grader.execute; `grade --run-demos` runs it). Nor does it run
the exercises' visible checks (`check_<exercise>`), which grade nothing
either: the hidden tests grade. No later provided cell may read what a
skipped cell defines (tests/grader/test_release.py checks this for every lab); a
submission whose own cells read it gets the skipped cells it needs run
(autograder.grader.cellnames). Students still run them all.

Every lab also ends with a "Ready to submit?" cell that this module appends
(READY_ID): no lab's source writes it, so a new lab gets it without a line of
its own. It calls `labkit.ready("<lab>")`, which runs the lab's visible checks
again (shipped inside labkit by `make labs`: autograder.grader.release) and
says how to submit; it is a demonstration to the grader, which skips it.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat

from autograder.labs import Lab, check_id, labkit_requirement

PLACEHOLDER = "{{LABKIT_REQUIREMENT}}"
KINDS = ("solution", "tests", "locked")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


#: Cell metadata of a demonstration the grader does not run (`grading="skip"`).
SKIP_KEY = "skip_when_grading"

#: grade_id of the "Ready to submit?" cell appended to every lab.
READY_ID = "ready_to_submit"

READY_MARKDOWN = """## Ready to submit?

The cell below runs the visible check of every exercise again, on your answers
as they are now, and prints one line per exercise: passed, failed (with the
check's hint) or not answered yet. Then it says how to download and submit
this notebook. Run it after running every cell above (*Runtime → Run all* in
Colab).

Passing every check is necessary, not sufficient: hidden tests grade your
notebook on other inputs. The grader does not run this cell."""

READY_CODE = """# Ready to submit? Runs every visible check again, then says how to submit.
import labkit
labkit.ready("{lab_id}")"""


class SourceError(ValueError):
    """A lab source that breaks the authoring conventions."""


def _nbgrader_metadata(kind: str, grade_id: str, points) -> dict:
    metadata = {
        "grade": kind == "tests",
        "grade_id": grade_id,
        "locked": kind in ("tests", "locked"),
        "schema_version": 3,
        "solution": kind == "solution",
        "task": False,
    }
    if kind == "tests":
        metadata["points"] = points
    return metadata


def build_source_notebook(lab: Lab) -> nbformat.NotebookNode:
    """The nbgrader source notebook (solutions and hidden tests included)."""
    notebook = jupytext.read(lab.source_path, fmt="py:percent")
    seen: set[str] = set()
    for index, cell in enumerate(notebook.cells):
        marker = {key: cell.metadata.pop(key, None)
                  for key in ("nbgrader", "grade_id", "points", "grading")}
        cell.metadata.pop("lines_to_next_cell", None)
        cell.metadata.pop("jupyter", None)
        cell.source = cell.source.replace(PLACEHOLDER, labkit_requirement())
        if cell.cell_type != "code":
            cell.id = f"md-{index}"
            continue
        if marker["nbgrader"] == "tests" and not cell.source.strip():
            cell.source, marker["points"] = hidden_cell_source(lab, marker["grade_id"],
                                                               marker["points"])
        _check_marker(lab.source_path.name, index, cell.source, marker, seen)
        grade_id = marker["grade_id"]
        seen.add(grade_id)
        cell.metadata["nbgrader"] = _nbgrader_metadata(marker["nbgrader"], grade_id,
                                                       marker["points"])
        if marker["grading"]:
            cell.metadata[SKIP_KEY] = True
        cell.id = grade_id.replace("_", "-")
        cell.outputs = []
        cell.execution_count = None
    _check_contract(lab, notebook)
    _append_ready_cells(lab, notebook)
    notebook.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
    }
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    return notebook


def hidden_cell_source(lab: Lab, grade_id: str, points=None) -> tuple[str, float]:
    """The source of tests cell ``grade_id`` whose test is a function of the
    lab's hidden.py (autograder.hidden), and its points: the sentence the
    student reads, then one call of the function. A cell of the lab's source
    that is empty is such a cell; its points come from the function."""
    from autograder import hidden

    module = hidden.load(lab.id)
    function = hidden.tests_of(module).get(grade_id) if module else None
    where = lab.source_path.name
    if function is None:
        raise SourceError(
            f"{where}: tests cell {grade_id!r} is empty, but {lab.id}'s hidden.py has no "
            f"@graded function {grade_id}: write the test there (docs/authoring.md), or "
            "its code in the cell.")
    declared = hidden.declaration(function)
    if points is not None and float(points) != declared.points:
        raise SourceError(f"{where}: tests cell {grade_id!r} says points={points}, its "
                          f"function in hidden.py {declared.points:g}: give them once, in "
                          "hidden.py.")
    sentence = " ".join((function.__doc__ or "").split()).rstrip(".")
    if not sentence:
        raise SourceError(f"{lab.folder.name}/hidden.py: {grade_id} needs a docstring, the "
                          "sentence students read beside its cell.")
    unit = "point" if declared.points == 1 else "points"
    source = (f"# Hidden tests of `{declared.exercise}`: {sentence} "
              f"({declared.points:g} {unit}).\n### BEGIN HIDDEN TESTS\n"
              f"{hidden.call_source(lab.id, grade_id, function)}\n### END HIDDEN TESTS")
    return source, declared.points


def _append_ready_cells(lab: Lab, notebook) -> None:
    """Append the "Ready to submit?" markdown and its locked code cell, skipped
    when grading (it only re-runs the visible checks)."""
    if any(cell.metadata.get("nbgrader", {}).get("grade_id") == READY_ID
           for cell in notebook.cells):
        raise SourceError(f"{lab.source_path.name}: grade_id {READY_ID!r} is the release's own "
                          "last cell (appended to every lab); rename that cell.")
    markdown = nbformat.v4.new_markdown_cell(READY_MARKDOWN, id="md-ready")
    code = nbformat.v4.new_code_cell(READY_CODE.format(lab_id=lab.id), id=READY_ID.replace("_", "-"))
    code.metadata["nbgrader"] = _nbgrader_metadata("locked", READY_ID, None)
    code.metadata[SKIP_KEY] = True
    notebook.cells.extend([markdown, code])


def visible_checks(lab: Lab, notebook=None) -> list[dict[str, str]]:
    """[{"name": exercise, "check": its check cell's source}] in curriculum order:
    what labkit.ready() runs again. Every exercise needs a locked cell
    `check_<exercise>` after its answer cell (a SourceError otherwise)."""
    notebook = notebook or build_source_notebook(lab)
    position = {cell.metadata.get("nbgrader", {}).get("grade_id"): (index, cell)
                for index, cell in enumerate(notebook.cells)}
    checks = []
    for exercise in lab.exercises:
        found = position.get(check_id(exercise))
        if (found is None or not found[1].metadata["nbgrader"]["locked"]
                or found[0] < position[exercise][0]):
            raise SourceError(
                f"{lab.source_path.name}: exercise {exercise!r} needs a visible check: a cell "
                f'`# %% nbgrader="locked" grade_id="{check_id(exercise)}"` after its answer cell '
                "(labkit.ready() runs it again in the lab's last cell).")
        checks.append({"name": exercise, "check": found[1].source})
    return checks


def _check_marker(where: str, index: int, source: str, marker: dict, seen: set[str]) -> None:
    """A SourceError unless code cell ``index``'s `# %%` marker follows the conventions."""
    kind, grade_id = marker["nbgrader"], marker["grade_id"]
    points, grading = marker["points"], marker["grading"]
    if kind not in KINDS:
        raise SourceError(
            f"{where}: code cell {index} has nbgrader={kind!r}; every code cell "
            f"needs one of {KINDS} with a grade_id. Cell starts: {source[:60]!r}"
        )
    if not grade_id or grade_id in seen:
        raise SourceError(f"{where}: code cell {index} needs a unique grade_id (got {grade_id!r}).")
    if kind == "tests" and not (isinstance(points, (int, float)) and points > 0):
        raise SourceError(f"{where}: tests cell {grade_id!r} needs points=<positive number>.")
    if grading is not None and (grading != "skip" or kind != "locked"):
        raise SourceError(
            f"{where}: code cell {grade_id!r} has grading={grading!r}; only a "
            "provided cell (nbgrader=\"locked\") may be marked, with "
            "grading=\"skip\" (a demonstration the grader does not run)."
        )


def skipped_when_grading(lab: Lab) -> list[str]:
    """grade_ids of the provided cells of ``lab`` the grader does not run, in
    the notebook's order: the demonstrations marked `grading="skip"` (the
    "Ready to submit?" cell among them) and every exercise's visible check
    (`check_<exercise>`). Both grade nothing, and no provided cell reads
    what they define (tests/grader/test_release.py); a submission whose own cells
    read it gets the cells it needs run (autograder.grader.cellnames)."""
    checks = {check_id(exercise) for exercise in lab.exercises}
    return [cell.metadata["nbgrader"]["grade_id"] for cell in build_source_notebook(lab).cells
            if cell.metadata.get(SKIP_KEY)
            or cell.metadata.get("nbgrader", {}).get("grade_id") in checks]


def _check_contract(lab: Lab, notebook) -> None:
    """Each curriculum exercise has one solution cell and one tests cell."""
    grade_ids = [
        cell.metadata["nbgrader"]["grade_id"]
        for cell in notebook.cells
        if "nbgrader" in cell.metadata
    ]
    solutions = [
        cell.metadata["nbgrader"]["grade_id"]
        for cell in notebook.cells
        if cell.metadata.get("nbgrader", {}).get("solution")
    ]
    if sorted(solutions) != sorted(lab.exercises):
        raise SourceError(
            f"{lab.source_path.name}: solution cells are {solutions}, but the "
            f"curriculum's exercises of {lab.id} are {list(lab.exercises)}."
        )
    from autograder import hidden

    module = hidden.load(lab.id)
    orphans = sorted(set(hidden.tests_of(module)) - set(grade_ids)) if module else []
    if orphans:
        raise SourceError(f"{lab.folder.name}/hidden.py: {orphans} have no tests cell in "
                          f"{lab.source_path.name}: add an empty cell "
                          f'`# %% nbgrader="tests" grade_id="{orphans[0]}"` where it belongs.')
    for exercise in lab.exercises:
        if f"test_{exercise}" not in grade_ids:
            raise SourceError(
                f"{lab.source_path.name}: exercise {exercise!r} has no tests cell "
                f"(grade_id 'test_{exercise}')."
            )


def write_notebook(notebook, path: Path) -> None:
    """Write a notebook in a stable form (sorted keys, one trailing newline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(notebook, version=4) + "\n", encoding="utf-8")


def source_points(lab: Lab, notebook=None) -> dict[str, float]:
    """Points of each exercise of ``lab``, read from its source's tests cells
    (``test_<exercise>`` and ``test_<exercise>__<property>``), in curriculum order."""
    notebook = notebook or build_source_notebook(lab)
    points = {exercise: 0.0 for exercise in lab.exercises}
    for cell in notebook.cells:
        nbgrader = cell.metadata.get("nbgrader", {})
        if nbgrader.get("grade"):
            exercise = nbgrader["grade_id"].removeprefix("test_").split("__")[0]
            if exercise in points:
                points[exercise] += float(nbgrader["points"])
    return points
