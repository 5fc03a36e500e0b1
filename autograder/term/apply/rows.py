"""The rows of record's parts that autograder.term.apply puts together: the
row of a student who sent nothing, an instructor's override put on a row,
the late policy in words, and what report.html shows of the term.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autograder.grader.results import NO_SUBMISSION, SubmissionResult
from autograder.term import late
from autograder.term import regrades as regrade_requests
from autograder.term.overrides import Override

if TYPE_CHECKING:
    from autograder.term.apply import Term


#: The start of a row's note of a Moodle user or group override.
OVERRIDE_NOTE = "due date override: "


def no_submission(student_id: str, lab_id: str, points: dict[str, float]) -> SubmissionResult:
    """The row of an enrolled student who submitted nothing: every exercise at 0
    (the row of a submission that was not graded, with that status)."""
    from autograder.grader.intake import failed
    from autograder.labs import get_lab

    return failed(student_id, get_lab(lab_id), points, NO_SUBMISSION, "")


def apply_override(row: SubmissionResult, override: Override,
                   source: Path | None = None) -> None:
    """Put the instructor's score and note on the row's exercise, and say so in
    the row's notes (``source``: the overrides file)."""
    for exercise in row.exercises:
        if exercise.exercise == override.exercise:
            what = "note"
            if override.score is not None:
                exercise.auto_score = exercise.score
                exercise.score = override.score
                what = (f"{override.score:g} of {exercise.max_score:g} (the tests gave "
                        f"{exercise.auto_score:g})")
            exercise.override_by = override.by or "instructor"
            exercise.override_note = override.note
            row.notes.append(f"override of {override.exercise}: {what}, by "
                             f"{exercise.override_by} ({source.name if source else 'overrides'}"
                             f", line {override.line})")
            return


def report_term(term: Term, rows: list[SubmissionResult], collected, notes: list[str]) -> dict:
    """What report.html shows of the term (autograder.grader.reports.report_html's ``term``)."""
    summary = {"roster": "", "enrolled": 0, "submitted": 0, "unmatched": [],
               "policy": policy_text(term.policy, term.lab_id),
               "overrides_file": str(term.overrides_file or ""), "notes": list(notes),
               "extensions": [{"student": r.student_id, "note": note} for r in rows
                              for note in r.notes
                              if note.startswith(("extension: ", OVERRIDE_NOTE))],
               "regrades": regrade_requests.summary(rows),
               "regrades_file": str(term.regrades_file or "")}
    if term.roster is not None:
        summary.update(
            roster=f"{term.roster.source.name} ({term.roster.kind or term.roster.lms})",
            enrolled=len(term.roster),
            submitted=sum(r.status != NO_SUBMISSION for r in rows),
            unmatched=[{"files": u.files, "who": _who(u.identity), "reason": u.reason}
                       for u in (collected.unmatched if collected else [])])
    return summary


def _who(identity) -> str:
    if identity is None:
        return "-"
    parts = [identity.source, identity.name, identity.user_id and f"id {identity.user_id}",
             identity.email]
    return ", ".join(part for part in parts if part)


def policy_text(policy: late.LatePolicy, lab_id: str) -> str:
    """The late policy of ``lab_id`` in one sentence ("" when it has no due date)."""
    deadline = policy.deadlines.get(lab_id)
    if deadline is None:
        return ""
    text = f"Due {deadline.due.isoformat(' ', 'minutes')}"
    if policy.grace_minutes:
        text += f", {policy.grace_minutes:g} minutes' grace"
    if policy.penalty_percent:
        text += (f"; {policy.penalty_percent:g}% of the points per {policy.per} late (a part "
                 f"counts whole), at most {policy.max_penalty_percent:g}%")
    if deadline.no_credit_after:
        text += f"; no credit after {deadline.no_credit_after.isoformat(' ', 'minutes')}"
    elif policy.no_credit_after_days:
        text += f"; no credit after {policy.no_credit_after_days:g} days late"
    return text + "."
