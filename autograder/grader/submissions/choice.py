"""Choosing the one file graded for each student, and the Submission made of it.

When a student has several files, the one graded is chosen by content
first, then by name: a file without a problem before one with a problem; the
notebook with the most of this lab's exercises answered (an answer cell, or
a cell defining the exercise, that no longer raises NotImplementedError);
a notebook named like the lab notebook (exact or a "Copy of"/"(1)"
duplicate) before another notebook; then the newest; the fewest duplicate
markers; the first by name. So a newer ``alice (1).ipynb`` that is the
blank notebook, or another lab's, does not replace alice's work. Grading
every file and keeping the best is not done: it would reward uploading many
guesses (and cost a grading per file). Which file was graded and why is
said in ``note`` (remarks for the instructor, in the student's row of
grades.csv), never in ``problem`` (reasons that stop grading).

"The newest" is what the LMS says, never the zip's times, in a Moodle or
Canvas download (lms/, Candidate.lms): Moodle 4.1+ stamps every entry
with the download's time and Moodle 4.0 with when the bytes reached its
file pool, so the times would grade one file from one zip and another from
the other. The LMS's naming says it instead: a later upload of a name the
student's files already have is ``lab1_attention (1).ipynb`` (Moodle),
``lab1_attention-1.ipynb`` (Canvas), and Canvas's attachment ids grow with
each upload: the same file is graded from every version of a download.
Files of different names that the LMS does not order are chosen by name
(the note says the download does not say which is newer). Elsewhere (a
folder of files, a plain zip) the newest file or zip time comes first.
When a file the LMS says is later is not graded (empty, cut short, fewer
exercises answered), the note says so and why.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field

from autograder.grader.submissions.archives import (TooLarge, read_origin, root_origin,
                                                    too_large_problem)
from autograder.grader.submissions.lms import (LAB_NOTEBOOK, LMS_NAMING, OTHER_LAB, Candidate,
                                               Group)
from autograder.grader.submissions.identity import Identity

_MAX_LISTED = 5
#: How the note on a student whose file was chosen among several begins
#: (reports.write_gradebook_table finds it): "3 files for this student: graded ...".
CHOICE_NOTE = re.compile(r"\b(\d+) files for this student: graded ")
#: What the note on a notebook graded from inside a student's zip says.
NESTED_NOTE = "from inside the student's zip"


@dataclass
class Submission:
    """One student's file, chosen for grading.

    Attributes:
        student_id: sanitized, unique id (see lms/ids.py, rule 7).
        source_name: the file's path relative to the folder or zip given,
            with ``/`` separators, as found there (U+FFFD for bytes of the
            name that are not UTF-8).
        origin: where the content is read from: ``("file", path)`` or
            ``("zip", zip_path, member_index)``; None when it is not read
            (too large, not a regular file). Plain values, so that a
            Submission travels to a worker process without its content.
        problem: "" when the file can be graded, else why not ("empty file",
            "not a notebook: .py uploaded; expected a .ipynb", ...).
        note: remarks for the instructor that do not stop grading (which
            file was graded and why, late submission...).
        identity: whose it is, as the download's names and metadata say
            (autograder.term.model.Identity); the roster matches it.
        submitted_at: when it was submitted, ISO 8601 ("" when unknown):
            Gradescope's ``:created_at:`` as written; a zip member's time
            as the zip stores it, local time without offset (the course's
            time zone says which: autograder.term.late); a file's
            modification time, in UTC.
        time_source: where ``submitted_at`` comes from: "Gradescope
            metadata (...)", "zip time" or "file time".
        marked_late: Canvas wrote LATE in the file's name.
        time_note: why ``submitted_at`` is empty although the download has
            a time ("" otherwise): a zip stamp that is not a submission time
            (Canvas's and Moodle's downloads, one stamp on every file, a
            stamp later than the zip itself).
        partners: the other members of a group submission (Gradescope):
            ``(student_id, Identity)``, each given this submission's row.
    """

    student_id: str
    source_name: str
    origin: tuple | None
    problem: str = ""
    note: str = ""
    identity: Identity | None = None
    submitted_at: str = ""
    time_source: str = ""
    marked_late: bool = False
    time_note: str = ""
    partners: list = field(default_factory=list)

    def read(self) -> tuple[bytes | None, str]:
        """The content (read now, never kept), or None and why it cannot be read."""
        if self.origin is None:
            return None, self.problem or "not read"
        try:
            return read_origin(self.origin), ""
        except TooLarge:
            return None, too_large_problem()
        except Exception as error:  # noqa: BLE001 - becomes the student's status
            return None, f"could not read the file: {type(error).__name__}: {error}"

    @property
    def data(self) -> bytes | None:
        """The content, or None when it cannot be read (see ``read``)."""
        return self.read()[0]


def choose(group: Group, exercises: tuple[str, ...]) -> Submission:
    """The submission graded for one student (its id still ""), and notes on the others.

    Several notebooks without a problem are read (one at a time, none
    kept) to count their answers to ``exercises``; a single file is not
    read here.
    """
    problems = {id(c): _problem_of(c) for c in group.candidates}
    readable = [c for c in group.candidates if not problems[id(c)] and c.kind < OTHER_LAB]
    answers = {id(c): answered(c.entry.data(), exercises) if len(readable) > 1 else 0
               for c in readable}
    # In an LMS's download the LMS's naming orders the uploads, not the zip's times.
    by_lms = all(c.lms for c in group.candidates)

    def rank(c: Candidate):
        newest = ((bool(_later_than(c, group.candidates)), -c.upload_id) if by_lms
                  else (-c.entry.mtime,))
        return (bool(problems[id(c)]), -answers.get(id(c), -1), c.kind, *newest,
                c.markers, c.entry.source_name)

    ordered = sorted(group.candidates, key=rank)
    best = ordered[0]
    notes = list(group.notes)
    if best.note:
        notes.append(best.note)
    if len(ordered) > 1:
        facts = _Facts(problems, answers, len(exercises), by_lms)
        notes.append(_choice_note(best, ordered[1:], facts))
        later = _later_than(best, group.candidates)
        if later:
            notes.append(_not_graded_note(later, best, facts))
    submitted_at, time_source = submission_time(group, best)
    return Submission(
        student_id="",
        source_name=best.entry.source_name,
        origin=None if best.entry.problem else best.entry.origin,
        problem=best.entry.problem or problems[id(best)],
        note="; ".join(notes),
        identity=group.identity,
        submitted_at=submitted_at,
        time_source=time_source,
        marked_late=group.marked_late,
    )


def submission_time(group: Group, best: Candidate) -> tuple[str, str]:
    """(when, where from) of the file graded: see Submission.submitted_at."""
    for folder in best.entry.parts:
        if folder in group.times:
            return group.times[folder]
    if not best.entry.mtime:
        return "", ""
    try:
        origin = root_origin(best.entry.origin)
        if origin and origin[0] == "zip":
            # The zip's date is a wall-clock time; archives.py read it as local.
            stamp = datetime.datetime.fromtimestamp(best.entry.mtime)
            return stamp.isoformat(timespec="seconds"), "zip time"
        stamp = datetime.datetime.fromtimestamp(best.entry.mtime, datetime.timezone.utc)
        return stamp.isoformat(timespec="seconds"), "file time"
    except (ValueError, OverflowError, OSError):
        return "", ""


def answered(data: bytes | None, exercises: tuple[str, ...]) -> int:
    """How many of ``exercises`` the notebook ``data`` answers; -1 if it is no notebook.

    An exercise is answered by a code cell that is its answer cell (by
    nbgrader's grade_id) or defines it (``def softmax``), and no longer
    raises NotImplementedError as the blank notebook does. Only the
    structure is read: a damaged notebook counts what can be seen.
    """
    if data is None:
        return -1
    try:
        cells = json.loads(data)["cells"]
    except Exception:  # noqa: BLE001 - anything unreadable is not a notebook
        return -1
    if not isinstance(cells, list):
        return -1
    found: set[str] = set()
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(map(str, source)) if isinstance(source, list) else str(source)
        if "NotImplementedError" in source:
            continue
        found.update(e for e in exercises if _answers(cell, source, e))
    return len(found)


def _answers(cell: dict, source: str, exercise: str) -> bool:
    """Is the code cell ``cell`` (its ``source`` joined) the answer to ``exercise``?"""
    metadata = cell.get("metadata")
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    return grade_id == exercise or re.search(
        rf"^(?:def|class)\s+{re.escape(exercise)}\b", source, re.MULTILINE) is not None


def _problem_of(candidate: Candidate) -> str:
    """The candidate's problem, reading it when needed to see it is empty."""
    entry = candidate.entry
    if entry.problem:
        return entry.problem
    if entry.is_empty():
        return f"empty file ({entry.size} bytes): nothing to grade"
    return candidate.problem


@dataclass
class _Facts:
    """What choose found of a student's files, for the notes."""

    problems: dict
    answers: dict
    exercises: int
    by_lms: bool


def _later_than(candidate: Candidate, others: list[Candidate]) -> Candidate | None:
    """The latest of ``others`` that the LMS's naming says was uploaded after
    ``candidate`` (None: none is): the same name with a higher number
    (Moodle's " (N)", Canvas's "-N"), or for Canvas a higher attachment id."""
    if not candidate.lms:
        return None
    later = [o for o in others if o is not candidate and o.lms == candidate.lms and (
        (o.family == candidate.family and o.number > candidate.number)
        or (o.lms == "canvas" and o.upload_id > candidate.upload_id))]
    return max(later, key=lambda o: (o.upload_id, o.number), default=None)


def _short(candidate: Candidate) -> str:
    """The student's own name of the file (from their zip on, for a file inside one)."""
    return repr(candidate.name or candidate.entry.source_name)


def _order_rule(newer: Candidate, older: Candidate) -> str:
    """Why the LMS says ``newer`` was uploaded after ``older``."""
    if newer.lms == "canvas" and newer.upload_id != older.upload_id:
        return (f"Canvas's attachment id {newer.upload_id} is after {older.upload_id}; ids grow "
                f"with each upload")
    if newer.lms == "canvas":
        return "Canvas names a later upload of a name '<name>-1', '-2'... " \
               "(Attachment.make_unique_filename)"
    return ("Moodle names a later upload of a name '<name> (1)', ' (2)'... "
            "(file_storage::get_unused_filename)")


def _choice_note(best: Candidate, others: list[Candidate], facts: _Facts) -> str:
    """Which of a student's files was graded and why, and which were not."""
    runner = others[0]
    problems, answers = facts.problems, facts.answers
    mine, theirs = answers.get(id(best), -1), answers.get(id(runner), -1)
    if problems[id(runner)] and not problems[id(best)]:
        why = "the only one without a problem"
    elif id(runner) in answers and mine != theirs:
        why = (f"the most exercises answered: {mine} of {facts.exercises}, against "
               f"{max(theirs, 0)} in {runner.entry.source_name!r}")
    elif runner.kind != best.kind:
        why = "named like the lab notebook" if best.kind == LAB_NOTEBOOK else "a notebook"
    elif facts.by_lms and _later_than(runner, [best]):
        why = f"the later upload: {_order_rule(best, runner)}"
    elif facts.by_lms:
        lms = LMS_NAMING.get(best.lms, best.lms)
        name = ("the closest name to the lab notebook" if runner.markers != best.markers
                else "the first by name")
        why = (f"{name}; {lms}'s download does not say which was uploaded later (its zip "
               f"times are not upload times)")
    elif runner.entry.mtime != best.entry.mtime:
        why = "the newest"
    else:
        why = "the closest name to the lab notebook"
    listed = [repr(c.entry.source_name) for c in others[:_MAX_LISTED]]
    if len(others) > _MAX_LISTED:
        listed.append(f"and {len(others) - _MAX_LISTED} more")
    return (f"{len(others) + 1} files for this student: graded {best.entry.source_name!r} "
            f"({why}); ignored {', '.join(listed)}")


def _not_graded_note(later: Candidate, best: Candidate, facts: _Facts) -> str:
    """Why the file the LMS says is later was not graded (the fair choice: a
    later upload that is empty, cut short or answers less does not replace
    the student's work; the instructor may decide otherwise)."""
    problem = facts.problems[id(later)]
    theirs, mine = facts.answers.get(id(later), -1), facts.answers.get(id(best), -1)
    if problem:
        why = problem
    elif id(later) in facts.answers and theirs < mine:
        why = (f"it answers fewer exercises ({max(theirs, 0)} of {facts.exercises}, against "
               f"{mine})" if theirs >= 0 else "it is not a notebook that can be read "
               "(cut short or damaged)")
    elif later.kind != best.kind:
        why = "it is not named like the lab notebook" if best.kind == LAB_NOTEBOOK \
            else "it is not a notebook of this lab"
    else:
        why = "it ranks below by name"
    return f"the later upload {_short(later)} was not graded: {why} ({_order_rule(later, best)})"
