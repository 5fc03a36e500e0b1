"""What autograder.term.similarity compares: the code a student wrote or
changed in a notebook (:func:`extract_answers`), a reference file's code,
each less the released notebook's provided lines.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.labs import Lab, get_lab
from autograder.term.similarity.records import Answers


def _lab(lab: Lab | str) -> Lab:
    return lab if isinstance(lab, Lab) else get_lab(lab)


def _read(notebook) -> nbformat.NotebookNode:
    if isinstance(notebook, (str, Path)):
        return nbformat.read(notebook, as_version=4)
    return nbformat.from_dict(notebook)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _grade_id(cell) -> str:
    nbgrader = cell.get("metadata", {}).get("nbgrader", {})
    grade_id = nbgrader.get("grade_id", "") if isinstance(nbgrader, dict) else ""
    return grade_id if isinstance(grade_id, str) else ""


@dataclass(frozen=True)
class _Provided:
    """The released notebook's code: its stripped lines, its cells' sources
    and grade ids."""

    lines: frozenset[str]
    sources: tuple[str, ...]
    grade_ids: frozenset[str]


@functools.cache
def _provided(student_path: Path) -> _Provided:
    try:
        blank = nbformat.read(student_path, as_version=4)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"The released blank notebook {student_path} could not be read ({error}); it holds "
            "the provided code that is not compared. Run `make labs` to build it.") from None
    cells = [cell for cell in blank.get("cells", []) if cell.get("cell_type") == "code"]
    sources = tuple(_source(cell) for cell in cells)
    return _Provided(frozenset(line.strip() for source in sources for line in source.splitlines()),
                     sources, frozenset(_grade_id(cell) for cell in cells) - {""})


def _definition(exercises) -> re.Pattern:
    return re.compile(r"\s*(?:def|class)\s+(" + "|".join(map(re.escape, exercises)) + r")\b")


def extract_answers(notebook, lab: Lab | str) -> Answers:
    """The code the student wrote or changed in ``notebook`` (a path or a
    notebook), with its origins.

    Every code cell, in notebook order, each line kept unless it is empty or
    (stripped) one of the lines of the released notebook
    (labs/<lab>/<notebook>.ipynb): the answer cells of ``lab``'s exercises,
    the cells the student added and the provided cells the student edited.

    Raises:
        ValueError: ``lab`` is not a lab, or its blank notebook cannot be read.
        OSError, nbformat's errors: ``notebook`` is a path that cannot be read.
    """
    lab = _lab(lab)
    provided = _provided(lab.student_path)
    definition = _definition(lab.exercises)
    kept = _Kept()
    answered: set[str] = set()
    section = ""
    for index, cell in enumerate(_read(notebook).get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        grade_id = _grade_id(cell)
        if grade_id in lab.exercises and grade_id not in answered:
            answered.add(grade_id)
            section, label = grade_id, ""
        elif grade_id in lab.exercises:
            label = f"cell {index}, a second {grade_id} cell"
        elif grade_id in provided.grade_ids:
            label = f"cell {index}, {grade_id} edited"
        else:
            label = f"cell {index}, added"
        kept.block()
        exercise = section
        for number, line in enumerate(_source(cell).splitlines(), start=1):
            found = definition.match(line) if label else None
            exercise = found.group(1) if found else exercise
            kept.line(line, exercise, number, label, provided.lines)
    return kept.answers()


class _Kept:
    """The lines extract_answers keeps, and where each block of them starts
    (a new cell, or a provided line left out in between)."""

    def __init__(self):
        self.lines, self.origins, self.cells, self.blocks = [], [], [], []
        self.number, self.new = 0, True

    def block(self) -> None:
        self.new = True

    def line(self, line: str, exercise: str, number: int, cell: str,
             provided: frozenset[str]) -> None:
        stripped = line.strip()
        if stripped and stripped in provided:
            self.new = True
        elif stripped:
            if self.new or (self.origins and self.origins[-1][0] != exercise):
                self.number, self.new = self.number + 1, False
            self.lines.append(line)
            self.origins.append((exercise, number))
            self.cells.append(cell)
            self.blocks.append(self.number)

    def answers(self, cells: bool = True) -> Answers:
        return Answers("\n".join(self.lines), tuple(self.origins),
                       tuple(self.cells) if cells else (), tuple(self.blocks))


def answer_code(notebook, lab: Lab | str) -> str:
    """The student's code only (see :func:`extract_answers`), as one text."""
    return extract_answers(notebook, lab).text


def _reference_answers(path: Path, lab: Lab) -> Answers:
    """A reference file's code: a notebook's (as a student's), or a whole .py
    file, less every provided line, each line carrying the exercise whose
    ``def``/``class`` precedes it."""
    if path.suffix == ".ipynb":
        return extract_answers(path, lab)
    source = path.read_text(encoding="utf-8", errors="replace")
    provided = _provided(lab.student_path).lines
    definition = _definition(lab.exercises)
    kept, exercise = _Kept(), ""
    for number, line in enumerate(source.splitlines(), start=1):
        found = definition.match(line)
        exercise = found.group(1) if found else exercise
        kept.line(line, exercise, number, "", provided)
    return kept.answers(cells=False)


def _truncated(answers: Answers, limit: int) -> Answers:
    kept = answers.text[:limit].rsplit("\n", 1)[0]
    count = kept.count("\n") + 1
    return Answers(kept, answers.origins[:count], answers.cells[:count],
                   answers.blocks[:count])
