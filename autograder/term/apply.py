"""The term's rules applied to a lab's graded results: the class's rows of record.

`Term.load` reads what the instructor keeps (course.toml's deadlines and
late policy, the roster, the extensions, the times CSV, the overrides) and
checks all of it before anything is graded. `Term.apply` takes the tests'
results (OUT/results/, never changed) and the submissions found, and gives
the rows the reports are written from:

1. every enrolled student has a row: one who sent nothing gets "no
   submission" and 0 (with a roster; without one, the rows are the
   submissions);
2. the instructor's overrides replace exercise scores and add notes
   (autograder.term.overrides);
3. the late policy takes its penalty from the total (autograder.term.late):
   ``raw_score`` keeps the total before it.

Applied afresh each time the reports are written, so a changed policy,
extension or override takes effect on the next `grade` into the same OUT
(which regrades no one whose file did not change).
"""

from __future__ import annotations

import copy
import datetime
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.grader.results import NO_SUBMISSION, SubmissionResult
from autograder.term import late
from autograder.term.model import ClassRow, Student
from autograder.term.overrides import DEFAULT_FILE, Override, read_overrides


@dataclass
class Term:
    """What the instructor keeps about the class, for one lab.

    Attributes:
        lab_id: the lab.
        roster: the class list (autograder.term.roster.Roster), or None.
        policy: deadlines and late policy (course.toml).
        extensions: per-student extensions.
        times: times CSV, student_id -> when submitted.
        overrides: the instructor's scores and notes.
        overrides_file: where they were read from (None: none).
    """

    lab_id: str
    roster: object | None = None
    policy: late.LatePolicy = field(default_factory=late.LatePolicy)
    extensions: list[late.Extension] = field(default_factory=list)
    times: dict[str, datetime.datetime] = field(default_factory=dict)
    overrides: list[Override] = field(default_factory=list)
    overrides_file: Path | None = None

    @classmethod
    def load(cls, lab_id: str, points: dict[str, float], out_dir: Path, *,
             course_file: Path | None = None, roster: Path | None = None,
             times: Path | None = None, extensions: Path | None = None,
             overrides: Path | None = None) -> "Term":
        """Read and check everything, before grading starts.

        ``points``: the lab's exercise -> points. ``course_file``: the
        course settings (default: the kit's course.toml). ``overrides``:
        default OUT/overrides.csv when it exists.

        Raises:
            ValueError: any file that is missing or malformed, saying which
                and how to fix it.
        """
        from autograder.labs import KIT_ROOT

        course_file = Path(course_file) if course_file else KIT_ROOT / "course.toml"
        try:
            with open(course_file, "rb") as handle:
                settings = tomllib.load(handle)
        except FileNotFoundError:
            raise ValueError(f"The course settings {course_file} do not exist; give the "
                             f"course.toml with the deadlines and late policy.") from None
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{course_file} is not valid TOML: {error}. Fix that line.") \
                from None
        policy = late.LatePolicy.from_settings(settings.get("deadlines", {}),
                                               settings.get("late", {}), course_file.parent)
        term = cls(lab_id, policy=policy)
        if roster:
            from autograder.term.roster import read_roster

            term.roster = read_roster(Path(roster))
        extensions = extensions or policy.extensions_file
        if extensions:
            term.extensions = late.read_extensions(Path(extensions), policy)
        if times:
            term.times = late.read_times(Path(times), policy)
        overrides_file = Path(overrides) if overrides else Path(out_dir) / DEFAULT_FILE
        if overrides or overrides_file.exists():
            term.overrides = read_overrides(overrides_file, points)
            term.overrides_file = overrides_file
        return term

    def apply(self, results: list[SubmissionResult], submissions: dict,
              points: dict[str, float], whole_class: bool = True
              ) -> tuple[list[SubmissionResult], list[str]]:
        """The rows of record, and notes for the report (overrides of unknown students...).

        ``submissions``: student_id -> its Submission (for times and the
        LMS's late marker); ``points``: exercise -> points of the lab;
        ``whole_class``: False for a shard (`grade --shard`), whose rows are
        only its own students' (the enrolled who sent nothing get theirs when
        the shards are joined). Results are copied, never changed.
        """
        rows = {r.student_id: copy.deepcopy(r) for r in results}
        notes = []
        if self.roster is not None and whole_class:
            for student in self.roster.students:
                row = rows.get(student.student_id)
                if row is None:
                    rows[student.student_id] = row = no_submission(student.student_id,
                                                                   self.lab_id, points)
                row.name = student.name
        for override in self.overrides:
            row = rows.get(override.student_id)
            if row is None:
                if whole_class:
                    notes.append(f"overrides line {override.line}: {override.student_id!r} has "
                                 f"no row in this lab's gradebook; check the id against "
                                 f"grades.csv")
                continue
            apply_override(row, override)
        for row in rows.values():
            row.raw_score = sum(x.score for x in row.exercises) if row.exercises else row.score
            row.score = row.raw_score
            if row.status != NO_SUBMISSION:
                self._apply_late(row, submissions.get(row.student_id))
        return [rows[k] for k in sorted(rows)], notes

    def class_rows(self, rows: list[SubmissionResult], submissions: dict,
                   feedback: dict[str, str]) -> list[ClassRow]:
        """The rows of OUT/class.json (what `export` reads) from the rows of record.

        ``feedback``: student_id -> the feedback page's path relative to OUT.
        """
        out = []
        for row in rows:
            student = self.roster.by_id(row.student_id) if self.roster is not None else None
            student = student or Student(row.student_id, row.name)
            submission = submissions.get(row.student_id)
            source = ""
            if row.submitted_at:
                source = ("times CSV" if row.student_id in self.times
                          else submission.time_source if submission else "")
            out.append(ClassRow(
                student=student, lab=row.lab, score=row.score,
                raw_score=row.raw_score if row.raw_score is not None else row.score,
                max_score=row.max_score, status=row.status, file=row.source_name,
                submitted_at=row.submitted_at, time_source=source,
                due=row.due, late_seconds=row.late_seconds, penalty=row.penalty,
                feedback=feedback.get(row.student_id, ""),
                identity=submission.identity if submission else None, notes=list(row.notes),
                exercises=[asdict(x) for x in row.exercises]))
        return out

    def _apply_late(self, row: SubmissionResult, submission) -> None:
        when = self.times.get(row.student_id)
        if when is not None:
            row.submitted_at = when.isoformat(timespec="seconds")
        elif submission is not None:
            when = late.submission_time(self.policy, submission.submitted_at,
                                        submission.time_source, row.student_id)
            if when is not None:
                row.submitted_at = when.isoformat(timespec="seconds")
        extension = late.extension_for(self.extensions, row.student_id, self.lab_id)
        found = late.lateness(self.policy, self.lab_id, when, extension,
                              marked_late=bool(submission and submission.marked_late))
        row.due = found.due.isoformat(timespec="minutes") if found.due else ""
        row.late_seconds = found.seconds
        if found.note:
            row.notes.append(found.note + (" (extended)" if extension else ""))
        if found.percent:
            row.penalty = late.penalty_points(row.raw_score, row.max_score, found.percent)
            row.score = row.raw_score - row.penalty


def no_submission(student_id: str, lab_id: str, points: dict[str, float]) -> SubmissionResult:
    """The row of an enrolled student who submitted nothing: every exercise at 0
    (the row of a submission that was not graded, with that status)."""
    from autograder.grader.intake import failed
    from autograder.labs import get_lab

    return failed(student_id, get_lab(lab_id), points, NO_SUBMISSION, "")


def apply_override(row: SubmissionResult, override: Override) -> None:
    """Put the instructor's score and note on the row's exercise."""
    for exercise in row.exercises:
        if exercise.exercise == override.exercise:
            if override.score is not None:
                exercise.auto_score = exercise.score
                exercise.score = override.score
            exercise.override_by = override.by or "instructor"
            exercise.override_note = override.note
            return


def report_term(term: Term, rows: list[SubmissionResult], collected, notes: list[str]) -> dict:
    """What report.html shows of the term (autograder.grader.reports.report_html's ``term``)."""
    summary = {"roster": "", "enrolled": 0, "submitted": 0, "unmatched": [],
               "policy": policy_text(term.policy, term.lab_id),
               "overrides_file": str(term.overrides_file or ""), "notes": list(notes)}
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
