"""An instructor's own scores and notes per exercise, kept across regrades.

OUT/overrides.csv (or ``grade --overrides FILE``) has the columns::

    student_id,exercise,score,note,by
    alice,dot_scores,1,"Right idea; the scale was applied twice, half marks",Dr Smith
    bob,causal_mask,,"See the comment on your mask",TA Lee

``score`` replaces the tests' score of that exercise (between 0 and its
points; empty: the tests' score stays and only the note is added);
``note`` is shown to the student in their feedback beside the exercise;
``by`` says who set it (shown in the report). The file is the instructor's:
grading never writes it, so a regrade (``--regrade``, ``--only``) keeps every
override, and the tests' own score stays in OUT/results/ beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from autograder.term.csvfile import read_rows

#: The file in OUT read when --overrides is not given.
DEFAULT_FILE = "overrides.csv"
COLUMNS = ("student_id", "exercise", "score", "note", "by")


@dataclass(frozen=True)
class Override:
    """One instructor's score (or None: note only) for one student's exercise."""

    student_id: str
    exercise: str
    score: float | None
    note: str
    by: str
    line: int


def read_overrides(path: Path, exercises: dict[str, float]) -> list[Override]:
    """The overrides in ``path`` (``exercises``: the lab's exercise -> points).

    Raises:
        ValueError: the file cannot be read, lacks a column, names an
            exercise the lab does not have, gives a score that is not a number
            between 0 and the exercise's points, or sets one exercise of one
            student twice; the message names the line.
    """
    path = Path(path)
    found: dict[tuple[str, str], int] = {}
    overrides = []
    for line, row in read_rows(path, ("student_id", "exercise", "score"), "overrides",
                               ",".join(COLUMNS) + " (note and by may be empty)"):
        where = f"{path}, line {line}"
        student, exercise = row.get("student_id", ""), row.get("exercise", "")
        if not student:
            raise ValueError(f"{where}: no student_id; give the student's id as in grades.csv.")
        if exercise not in exercises:
            raise ValueError(f"{where}: {exercise!r} is not an exercise of this lab; give one "
                             f"of {', '.join(exercises)}.")
        if (student, exercise) in found:
            raise ValueError(f"{where}: {student}'s {exercise} is overridden already on line "
                             f"{found[student, exercise]}; keep one line per exercise.")
        found[student, exercise] = line
        score = None
        if row.get("score"):
            try:
                score = float(row["score"])
            except ValueError:
                score = math.nan
            if not math.isfinite(score) or not 0 <= score <= exercises[exercise]:
                raise ValueError(f"{where}: score {row['score']!r} for {exercise} is not a "
                                 f"number from 0 to {exercises[exercise]:g} (its points); "
                                 f"leave it empty to keep the tests' score and add a note.")
        elif not row.get("note"):
            raise ValueError(f"{where}: neither a score nor a note; give one, or remove "
                             f"the line.")
        overrides.append(Override(student, exercise, score, row.get("note", ""),
                                  row.get("by", ""), line))
    return overrides
