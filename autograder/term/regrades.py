"""Regrade requests: a student asks, the instructor decides, the record says why.

OUT/regrades.csv is the instructor's record of one lab's requests::

    student_id,exercise,asked,request,decision,score,reason,by
    aable,softmax,2026-10-12,"I subtract the max, the tests say overflow",granted,2,"The test fed a row of -inf; your answer is right",Dr Smith
    bbrown,,2026-10-13,"My late penalty is wrong",denied,,"Submitted 26 h after the deadline: one day counts",TA Lee
    cchen,causal_mask,2026-10-14,"Mask off by one?",pending,,,

- ``student_id``: the student, as in grades.csv (or any id the roster has
  for them: their Canvas user id, SIS id, Moodle ID number, email);
- ``exercise``: the exercise asked about (empty: the lab as a whole); it
  must be an exercise of the lab;
- ``asked``: when the student asked (``2026-10-12``; a time may follow);
- ``request``: the student's words, short (at most 300 characters: the
  record, not the correspondence);
- ``decision``: ``granted``, ``partly``, ``denied``, or ``pending`` (or
  empty) while the instructor has not decided;
- ``score``: with ``granted`` or ``partly``, the exercise's new score (from
  0 to its points). It is an override (autograder.term.overrides): it
  replaces the tests' score, the row's notes say "override of softmax: 2 of
  2 (the tests gave 0), by Dr Smith (regrades.csv, line 2)", and the report
  lists it with the overrides. A decision without a score changes nothing
  but the record (the instructor may have changed the score in
  overrides.csv);
- ``reason``: why, for the student (needed once decided);
- ``by``: who decided.

The student's feedback page shows "Your regrade request of 2026-10-12
(softmax): granted — The test fed ..."; report.html lists every request;
the term's gradebook (autograder.term.whole) lists them in term.csv's notes.
Grading never writes the file, so a regrade keeps it; the tests' own score
stays in OUT/results/.
"""

from __future__ import annotations

import datetime
import difflib
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from autograder.term.csvfile import read_rows
from autograder.term.overrides import Override

#: The file in OUT read for a lab's regrade requests.
DEFAULT_FILE = "regrades.csv"
COLUMNS = ("student_id", "exercise", "asked", "request", "decision", "score", "reason", "by")
#: The decisions; "pending" (or an empty cell) while none is made.
DECISIONS = ("granted", "partly", "denied", "pending")
#: The longest request kept (the student's words, short).
REQUEST_CHARACTERS = 300


@dataclass(frozen=True)
class Regrade:
    """One regrade request and the instructor's decision on it."""

    student_id: str
    exercise: str
    asked: str
    request: str
    decision: str
    score: float | None
    reason: str
    by: str
    line: int

    def override(self) -> Override:
        """The override a granted request with a score makes of its exercise."""
        assert self.score is not None and self.exercise
        return Override(self.student_id, self.exercise, self.score,
                        f"regrade request of {self.asked}: {self.reason}", self.by, self.line)

    def record(self) -> dict:
        """What a row keeps of it (SubmissionResult.regrades, class.json)."""
        return {k: v for k, v in asdict(self).items() if k != "student_id"}


def _asked(text: str, where: str) -> str:
    """The date of ``asked`` as YYYY-MM-DD (a time after it is allowed)."""
    try:
        if len(text) <= 10:
            return datetime.date.fromisoformat(text).isoformat()
        return datetime.datetime.fromisoformat(text).date().isoformat()
    except ValueError:
        raise ValueError(f"{where}: asked {text!r} is not a date; give the day the student "
                         f"asked as YYYY-MM-DD (e.g. 2026-10-12).") from None


def read_regrades(path: Path, exercises: dict[str, float]) -> list[Regrade]:
    """The regrade requests in ``path`` (``exercises``: the lab's exercise -> points).

    Raises:
        ValueError: the file cannot be read or lacks a column; a line names
            an exercise the lab does not have, gives no date or decision the
            kit knows, a decision without its reason, a score without an
            exercise, with a denied or pending request, or outside 0 to the
            exercise's points, a request over REQUEST_CHARACTERS, or scores
            the exercise of a student another line scores already. The
            message names the line.
    """
    path = Path(path)
    found: dict[tuple[str, str], int] = {}
    regrades = []
    for line, row in read_rows(path, ("student_id", "asked", "decision"), "regrades",
                               ",".join(COLUMNS) + " (exercise, request, score and by may "
                               "be empty)"):
        where = f"{path}, line {line}"
        student, exercise = row.get("student_id", ""), row.get("exercise", "")
        if not student:
            raise ValueError(f"{where}: no student_id; give the student's id as in grades.csv.")
        if exercise and exercise not in exercises:
            near = difflib.get_close_matches(exercise, list(exercises), n=1)
            raise ValueError(f"{where}: the request names {exercise!r}, which is not an "
                             f"exercise of this lab"
                             + (f" (did you mean {near[0]!r}?)" if near else "")
                             + f"; give one of {', '.join(exercises)}, or leave exercise empty "
                               f"for a request about the lab as a whole.")
        if not row.get("asked"):
            raise ValueError(f"{where}: no date in asked; give the day the student asked as "
                             f"YYYY-MM-DD.")
        asked = _asked(row["asked"], where)
        decision = (row.get("decision") or "pending").lower()
        if decision not in DECISIONS:
            raise ValueError(f"{where}: decision {row['decision']!r} is not one the kit knows; "
                             f"give granted, partly, denied or pending (or leave it empty "
                             f"while undecided).")
        request, reason = row.get("request", ""), row.get("reason", "")
        if len(request) > REQUEST_CHARACTERS:
            raise ValueError(f"{where}: the request is {len(request)} characters long; keep "
                             f"the student's words short (at most {REQUEST_CHARACTERS}) and the "
                             f"whole message elsewhere.")
        if decision != "pending" and not reason:
            raise ValueError(f"{where}: the request is {decision}, with no reason; write in "
                             f"reason why (the student reads it on their feedback page).")
        score = _score(row.get("score", ""), decision, exercise, exercises, where)
        if score is not None:
            if (student, exercise) in found:
                raise ValueError(f"{where}: {student}'s {exercise} is given a score already on "
                                 f"line {found[student, exercise]}; keep one score per "
                                 f"exercise (the later decision), the other line without one.")
            found[student, exercise] = line
        regrades.append(Regrade(student, exercise, asked, request, decision, score, reason,
                                row.get("by", ""), line))
    return regrades


def _score(text: str, decision: str, exercise: str, exercises: dict[str, float],
           where: str) -> float | None:
    if not text:
        return None
    if decision not in ("granted", "partly"):
        raise ValueError(f"{where}: a score with a {decision} request; a score is the new "
                         f"score of a granted (or partly granted) request: leave it empty, or "
                         f"set decision.")
    if not exercise:
        raise ValueError(f"{where}: a score and no exercise; name the exercise whose score "
                         f"it replaces (one of {', '.join(exercises)}).")
    try:
        score = float(text)
    except ValueError:
        score = math.nan
    if not math.isfinite(score) or not 0 <= score <= exercises[exercise]:
        raise ValueError(f"{where}: score {text!r} for {exercise} is not a number from 0 to "
                         f"{exercises[exercise]:g} (its points).")
    return score


def resolve(regrades: list[Regrade], index: dict[str, set[str]], path: Path) -> list[Regrade]:
    """The requests with their student_id made the roster's (``index``: every id a
    student goes by -> their student_id(s), Term._index).

    Raises:
        ValueError: lines whose student is nobody of the roster, or two
            students, each named with the ids near it.
    """
    import dataclasses

    out, problems = [], []
    for regrade in regrades:
        key = regrade.student_id
        found = index.get(key) or index.get(key.strip().casefold()) or set()
        if len(found) == 1:
            out.append(dataclasses.replace(regrade, student_id=next(iter(found))))
            continue
        where = f"{path}, line {regrade.line}"
        if found:
            problems.append(f"{where}: {key!r} is the id of {len(found)} students "
                            f"({', '.join(sorted(found))}); give the student_id of grades.csv")
        else:
            near = difflib.get_close_matches(key, [k for k in index if k], n=3, cutoff=0.6)
            problems.append(f"{where}: {key!r} matches no student of the roster"
                            + (f" (did you mean {' or '.join(repr(n) for n in near)}?)"
                               if near else "")
                            + "; give the student_id of grades.csv")
    if problems:
        raise ValueError("The regrade requests name students who are not on the roster:\n  "
                         + "\n  ".join(problems) + "\nNothing was graded. Correct those lines.")
    return out


def refuse_double_scores(regrades: list[Regrade], overrides: list[Override],
                         regrades_file: Path, overrides_file: Path | None) -> None:
    """A granted request's score is an override: the same exercise of the same
    student may not be scored by both files.

    Raises:
        ValueError: naming both lines.
    """
    scored = {(o.student_id, o.exercise): o.line for o in overrides if o.score is not None}
    for regrade in regrades:
        line = scored.get((regrade.student_id, regrade.exercise))
        if regrade.score is not None and line is not None:
            raise ValueError(
                f"{regrades_file}, line {regrade.line} gives {regrade.student_id}'s "
                f"{regrade.exercise} a score, and {overrides_file}, line {line} another: a "
                f"granted regrade's score is an override of its own. Keep one: delete the "
                f"score of one of the two lines.")


def record(row, regrade: Regrade, source: Path | None) -> None:
    """Keep the request on the row (shown on the feedback page and in the report)
    and say it in the row's notes (grades.csv, the term's notes)."""
    row.regrades.append(regrade.record())
    about = f" ({regrade.exercise})" if regrade.exercise else ""
    said = (f"{regrade.decision} — {regrade.reason}" if regrade.decision != "pending"
            else "pending, not decided")
    name = source.name if source else DEFAULT_FILE
    row.notes.append(f"regrade request of {regrade.asked}{about}: {said} ({name}, line "
                     f"{regrade.line})")


def summary(rows) -> list[dict]:
    """Every request of the rows, for report.html (report_term's ``regrades``)."""
    return [{"student": r.student_id, **q} for r in rows for q in getattr(r, "regrades", [])]
