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

from pathlib import Path

from autograder.grader.submissions.archives import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_MEMBERS,
    MAX_FILE_BYTES,
    open_entries,
)
from autograder.grader.submissions.choice import Submission, choose
from autograder.grader.submissions.lms import (
    group_entries,
    parse_gradescope_metadata,
    sanitize_id,
    unique_ids,
)

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_FILE_BYTES",
    "Submission",
    "collect_submissions",
    "parse_gradescope_metadata",
    "sanitize_id",
]


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
