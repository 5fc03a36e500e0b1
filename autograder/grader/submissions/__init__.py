"""Find the submissions in a folder or a zip, and the student each belongs to.

``collect_submissions(path, lab_id, notebook_stem)`` returns one
:class:`Submission` per student: never none for a student who uploaded
something (a ``.py``, an empty file, another lab's notebook all give a
Submission whose ``problem`` says why it cannot be graded), never two.

Three steps, one module each:

- archives.py: the folder or zip is listed, bounded (member count, sizes)
  and never extracted; each file is read only when asked, at most
  MAX_FILE_BYTES;
- lms.py: the LMS naming rules (Canvas, Moodle, Gradescope, a folder per
  student, a file per student) group the files by student and make the ids;
- choice.py: of a student's files, the one graded is chosen (most answers,
  the lab's name, the newest...), with a note saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.grader.submissions.archives import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_MEMBERS,
    MAX_FILE_BYTES,
    open_entries,
)
from autograder.grader.submissions.choice import Submission, choose
from autograder.grader.submissions.lms import (
    Group,
    group_entries,
    parse_gradescope_metadata,
    sanitize_id,
    unique_ids,
)
from autograder.term.model import Identity

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_FILE_BYTES",
    "Collected",
    "Submission",
    "Unmatched",
    "collect",
    "collect_submissions",
    "parse_gradescope_metadata",
    "sanitize_id",
]


@dataclass
class Unmatched:
    """Files of a download that match no enrolled student: listed, not graded.

    Attributes:
        files: their paths in the folder or zip.
        identity: whose the download says they are.
        reason: why the roster matches nobody ("matches nobody", "matches 2
            students: ...").
    """

    files: list[str]
    identity: Identity | None
    reason: str


@dataclass
class Collected:
    """What a folder or zip holds: one Submission per student, and files
    that match no one on the roster (none without a roster)."""

    submissions: list[Submission]
    unmatched: list[Unmatched] = field(default_factory=list)


def collect(path, lab_id: str, notebook_stem: str, roster=None) -> Collected:
    """The submissions in ``path``, matched to the ``roster`` when one is given.

    Without a roster this is ``collect_submissions``. With one
    (autograder.term.roster.Roster), every student's files are matched to an
    enrolled student by what the download says (``Roster.match``): a
    student's id is the roster's ``student_id``, the files of two downloads
    that match one student (a Canvas resubmission under another name, a
    folder and a file) are one student's files, of which one is graded
    (choice.py), and files that match nobody are returned in ``unmatched``
    instead of being graded.
    """
    from autograder.labs import LABS

    if roster is None:
        return Collected(collect_submissions(path, lab_id, notebook_stem))
    exercises = LABS[lab_id].exercises if lab_id in LABS else ()
    with open_entries(Path(path)) as entries:
        groups = group_entries(entries, lab_id, notebook_stem)
        merged: dict[str, Group] = {}
        unmatched = []
        for group in groups:
            student = roster.match(group.identity) if group.identity else None
            if student is None:
                unmatched.append(Unmatched(
                    [c.entry.source_name for c in group.candidates], group.identity,
                    roster.match_reason(group.identity) if group.identity else "no identity"))
                continue
            if student.student_id in merged:
                into = merged[student.student_id]
                into.note(f"the download has this student's files under several names "
                          f"({into.raw_id!r}, {group.raw_id!r}); one is graded")
                into.candidates.extend(group.candidates)
                into.times.update(group.times)
                into.marked_late |= group.marked_late
                for note in group.notes:
                    into.note(note)
            else:
                merged[student.student_id] = group
        submissions = []
        for student_id, group in merged.items():
            submission = choose(group, exercises)
            submission.student_id = student_id
            submissions.append(submission)
    return Collected(sorted(submissions, key=lambda s: s.student_id), unmatched)


def collect_submissions(path, lab_id: str, notebook_stem: str) -> list[Submission]:
    """One Submission per student found in the folder or zip ``path``.

    Args:
        path: a folder, or a ``.zip`` file, of submissions.
        lab_id: the lab being graded, e.g. ``"lab1"``.
        notebook_stem: the lab notebook's file stem, e.g. ``"lab1_attention"``.

    Returns:
        Submissions sorted by student id (empty when nothing was found).

    Raises:
        ValueError: ``path`` does not exist, is neither a folder nor a zip, is
            a broken zip, or a zip past MAX_ARCHIVE_MEMBERS or MAX_ARCHIVE_BYTES.
    """
    from autograder.labs import LABS

    exercises = LABS[lab_id].exercises if lab_id in LABS else ()
    with open_entries(Path(path)) as entries:
        groups = group_entries(entries, lab_id, notebook_stem)
        submissions = [choose(group, exercises) for group in groups]
    ids = unique_ids([(group.raw_id, group.fallback, submission.source_name)
                      for group, submission in zip(groups, submissions)])
    for submission, student_id in zip(submissions, ids):
        submission.student_id = student_id
    return sorted(submissions, key=lambda s: s.student_id)
