"""Whose a submission is, as its path and the LMS's metadata say
(autograder.grader.submissions reads it; autograder.term.roster matches it to
the class list)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    """What a submission's path (and the LMS's metadata) says about whose it is.

    Attributes:
        source: where it was read from: "canvas" (a Canvas bulk-download
            name), "moodle" (a Moodle participant folder), "gradescope" (a
            Gradescope export's submission folder), "folder" (a folder per
            student) or "file" (a file per student).
        name: the name the LMS wrote ("doejane" for Canvas, "Jane Doe" for
            Moodle), or the folder or file stem for "folder" and "file".
        user_id: Canvas's user id, Moodle's participant id, Gradescope's
            submitter sid ("" when there is none).
        email: Gradescope's submitter email ("" otherwise).
        submission_id: Canvas's submission id, Gradescope's ``submission_<n>``,
            Moodle's participant folder name ("" otherwise).
    """

    source: str
    name: str = ""
    user_id: str = ""
    email: str = ""
    submission_id: str = ""
