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

The package: this module holds Term (reading the instructor's files,
matching them to the class, applying the rules); moodle.py its checks of
Moodle's grading worksheet (a mixin of Term); rows.py the rows' parts
(no_submission, apply_override, policy_text) and report_term.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import difflib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.grader.results import NO_SUBMISSION, SubmissionResult
from autograder.term import late
from autograder.term.apply.moodle import MoodleWorksheet
from autograder.term.apply.rows import (OVERRIDE_NOTE, apply_override, no_submission,
                                        policy_text, report_term)
from autograder.term.model import ClassRow, Student
from autograder.term.overrides import DEFAULT_FILE, Override, read_overrides
from autograder.term import regrades as regrade_requests

if TYPE_CHECKING:
    from autograder.term.roster import Roster

__all__ = ["OVERRIDE_NOTE", "Term", "apply_override", "no_submission", "policy_text",
           "report_term"]


@dataclass
class Term(MoodleWorksheet):
    """What the instructor keeps about the class, for one lab.

    Attributes:
        lab_id: the lab.
        roster: the class list (autograder.term.roster.Roster), or None.
        policy: deadlines and late policy (course.toml).
        extensions: per-student extensions (their ``student_id`` as the file
            gives it until ``check`` resolves it).
        times_given: the times file's rows, as given.
        times: student_id -> (when submitted, where the time comes from),
            made by ``check`` from ``times_given`` and, with Moodle's grading
            worksheet as the roster, its "Last modified (submission)".
        overrides: the instructor's scores and notes.
        overrides_file: where they were read from (None: none).
        errors: lines of the instructor's files that match nobody (without
            a roster; with one, ``check`` refuses them), for the terminal and
            the report.
    """

    lab_id: str
    roster: Roster | None = None
    policy: late.LatePolicy = field(default_factory=late.LatePolicy)
    extensions: list[late.Extension] = field(default_factory=list)
    times_given: list[late.GivenTime] = field(default_factory=list)
    times: dict[str, tuple[datetime.datetime, str]] = field(default_factory=dict)
    overrides: list[Override] = field(default_factory=list)
    overrides_file: Path | None = None
    extensions_file: Path | None = None
    times_file: Path | None = None
    errors: list[str] = field(default_factory=list)
    #: Notes on the download from collect (ids that clash, zip times).
    download_notes: list[str] = field(default_factory=list)
    #: Students whose file Moodle's worksheet shows as a draft, never submitted.
    drafts: set[str] = field(default_factory=set)
    #: The zone Moodle's grading worksheet's dates are read in, and who said
    #: so ("" when no one did: the course's, checked by ``check`` against
    #: Moodle's Status; late.worksheet_zone).
    worksheet_zone: datetime.tzinfo | None = None
    worksheet_zone_source: str = ""
    #: Moodle's user and group overrides of this lab (the worksheet's "Due
    #: date" and "Cut-off date"), by student_id.
    own_dates: dict[str, late.OwnDates] = field(default_factory=dict)
    #: What the worksheet's dates told ``check`` that the instructor should know.
    date_notes: list[str] = field(default_factory=list)
    #: The regrade requests (OUT/regrades.csv: autograder.term.regrades), and their file.
    regrades: list[regrade_requests.Regrade] = field(default_factory=list)
    regrades_file: Path | None = None

    @classmethod
    def load(cls, lab_id: str, points: dict[str, float], out_dir: Path, *,
             course_file: Path | None = None, roster: Path | None = None,
             times: Path | None = None, extensions: Path | None = None,
             overrides: Path | None = None, worksheet_timezone: str | None = None) -> "Term":
        """Read and check everything, before grading starts.

        ``points``: the lab's exercise -> points. ``course_file``: the
        course settings (default: the kit's course.toml). ``overrides``:
        default OUT/overrides.csv when it exists. ``worksheet_timezone``: the
        zone of Moodle's grading worksheet's dates (default: course.toml's
        ``[moodle] worksheet_timezone``, else the course's). Whose each line is is
        checked against the class by ``check``, once the download is read.

        Raises:
            ValueError: any file that is missing or malformed, saying which
                and how to fix it (an extension of a lab the kit does not
                have included).
        """
        from autograder.labs import KIT_ROOT, LABS, read_course_file

        course_file = Path(course_file) if course_file else KIT_ROOT / "course.toml"
        settings = read_course_file(course_file)
        policy = late.LatePolicy.from_settings(settings.get("deadlines", {}),
                                               settings.get("late", {}), course_file.parent)
        term = cls(lab_id, policy=policy)
        term.worksheet_zone, term.worksheet_zone_source = late.worksheet_zone(
            worksheet_timezone, settings.get("moodle"), policy, str(course_file))
        if roster:
            from autograder.term.roster import read_roster

            term.roster = read_roster(Path(roster))
        extensions = extensions or policy.extensions_file
        if extensions:
            term.extensions_file = Path(extensions)
            term.extensions = late.read_extensions(Path(extensions), policy)
            bad = [e for e in term.extensions if e.lab != "*" and e.lab not in LABS]
            if bad:
                raise ValueError(
                    f"{extensions}: " + "; ".join(
                        f"line {e.line}: the lab {e.lab!r} is not a lab of the kit"
                        for e in bad)
                    + f". Give one of {', '.join(LABS)}, or * for every lab.")
        if times:
            term.times_file = Path(times)
            term.times_given = late.read_times(Path(times), policy)
        overrides_file = Path(overrides) if overrides else Path(out_dir) / DEFAULT_FILE
        if overrides or overrides_file.exists():
            term.overrides = read_overrides(overrides_file, points)
            term.overrides_file = overrides_file
        term._load_regrades(Path(out_dir) / regrade_requests.DEFAULT_FILE, points)
        return term

    def _load_regrades(self, path: Path, points: dict[str, float]) -> None:
        """OUT/regrades.csv, when there is one: read, its students resolved against the
        roster (when there is one), its scores checked against the overrides'."""
        if not path.exists():
            return
        self.regrades_file = path
        self.regrades = regrade_requests.read_regrades(path, points)
        if self.roster is not None:
            self.regrades = regrade_requests.resolve(self.regrades, self._index(None), path)
        regrade_requests.refuse_double_scores(self.regrades, self.overrides, path,
                                              self.overrides_file)

    def check(self, collected=None) -> None:
        """Match every line of the instructor's files to a student of the class.

        The class is the roster's students (with a roster) or the download's
        submissions and group partners. A line matches a student by their
        student_id, else by any id the roster (or the download) has for them:
        Canvas's user id, SIS ids, Moodle's participant id, ID number,
        username, the email. Extensions and overrides are rewritten to the
        student_id; the times become ``times``.

        With a roster, an extension or override line that matches nobody, or
        two students, is refused (the roster is the whole class: the line is
        a typo, or the student left and the line should go). Without one, and
        for the times file, such a line is an error line in ``errors``, shown
        on the terminal and in the report, and applied to no one.

        With Moodle's grading worksheet as the roster, its dates are read in
        ``worksheet_zone`` (``_moodle_statuses``, ``_moodle_dates``) and the
        kit's lateness is checked against Moodle's Status on every row
        (``_check_moodle_lateness``).

        Raises:
            ValueError: with a roster, every extension or override line
                that matches nobody or two students, with the ids near it;
                with Moodle's worksheet, the rows where the kit's lateness and
                Moodle's Status disagree, or no row's Due date that is
                course.toml's (nothing is graded: a wrong zone or due date).
        """
        index = self._index(collected)
        refused = []

        def resolve(key: str, where: str) -> str | None:
            found = index.get(key) or index.get(key.strip().casefold()) or set()
            if len(found) == 1:
                return next(iter(found))
            if found:
                problem = (f"{where}: {key!r} is the id of {len(found)} students "
                           f"({', '.join(sorted(found))}); give the student_id of grades.csv")
            else:
                near = difflib.get_close_matches(key, [k for k in index if k], n=3, cutoff=0.6)
                problem = (f"{where}: {key!r} matches no student of the class"
                           + (f" (did you mean {' or '.join(repr(n) for n in near)}?)"
                              if near else "")
                           + "; give the student_id of grades.csv, or delete the line if the "
                             "student left")
            if self.roster is not None and not where.startswith("times"):
                refused.append(problem)
            else:
                self.errors.append(problem)
            return None

        def resolved(lines: list, what: str, path) -> list:
            """``lines`` (extensions or overrides) with their student_id resolved."""
            found = []
            for item in lines:
                student = resolve(item.student_id, f"{what} {path}, line {item.line}")
                if student is not None:
                    found.append(dataclasses.replace(item, student_id=student))
            return found

        extensions = resolved(self.extensions, "extensions", self.extensions_file)
        overrides = resolved(self.overrides, "overrides", self.overrides_file)
        if refused:
            assert self.roster is not None   # only lines checked against a roster are refused
            raise ValueError("The instructor's files name students who are not on the roster "
                             f"({self.roster.source}):\n  " + "\n  ".join(refused)
                             + "\nNothing was graded. Correct or delete those lines.")
        self.extensions, self.overrides = extensions, overrides
        if self.roster is not None:
            for student_id, (text, line) in getattr(self.roster, "submitted", {}).items():
                where = f"{self.roster.source}, line {line} (Last modified (submission))"
                try:
                    when = self._sheet_time(text, where)
                except ValueError as error:
                    self.errors.append(str(error))
                    continue
                self.times[student_id] = (when, "Moodle grading worksheet")
        for given in self.times_given:
            student = resolve(given.key, f"times {self.times_file}, "
                                         f"{'line' if given.source == 'times CSV' else 'submission'}"
                                         f" {given.line}")
            if student is not None:
                self.times[student] = (given.when, given.source)
        self._moodle_statuses()
        self._moodle_dates()
        self._check_moodle_lateness()
        if collected is not None:
            self.download_notes = list(collected.notes)

    def _index(self, collected) -> dict[str, set[str]]:
        """Every id a student of the class goes by -> their student_id(s); also
        case-folded."""
        index: dict[str, set[str]] = {}

        def add(key: str, student_id: str) -> None:
            key = (key or "").strip()
            if key:
                index.setdefault(key, set()).add(student_id)
                index.setdefault(key.casefold(), set()).add(student_id)

        if self.roster is not None:
            for student in self.roster.students:
                for key in (student.student_id, student.email, *student.lms_ids.values()):
                    add(key, student.student_id)
        elif collected is not None:
            for submission in collected.submissions:
                add(submission.student_id, submission.student_id)
                if submission.identity is not None:
                    add(submission.identity.user_id, submission.student_id)
                    add(submission.identity.email, submission.student_id)
                for partner, identity in submission.partners:
                    add(partner, partner)
                    add(identity.user_id, partner)
                    add(identity.email, partner)
        # A student's own id is theirs alone, whatever other keys say.
        for student_id in [k for k, v in index.items() if k in v]:
            index[student_id] = {student_id}
        return index

    def apply(self, results: list[SubmissionResult], submissions: dict,
              points: dict[str, float], whole_class: bool = True,
              held: dict[str, str] | None = None
              ) -> tuple[list[SubmissionResult], list[str]]:
        """The rows of record, and notes for the report (overrides of unknown students...).

        ``submissions``: student_id -> its Submission (for times, the LMS's
        late marker and group partners); ``points``: exercise -> points of
        the lab; ``whole_class``: False for a shard (`grade --shard`), whose
        rows are only its own students' (the enrolled who sent nothing get
        theirs when the shards are joined); ``held``: enrolled students
        whose files were not graded as theirs, and why (a row "no
        submission" with that note). Results are copied, never changed.
        """
        rows = {r.student_id: copy.deepcopy(r) for r in results}
        submissions = dict(submissions)
        notes = list(self.errors) + list(self.date_notes) + list(self.download_notes)
        self._share_groups(rows, submissions)
        if self.roster is not None and whole_class:
            for student in self.roster.students:
                row = rows.get(student.student_id)
                if row is None:
                    rows[student.student_id] = row = no_submission(student.student_id,
                                                                   self.lab_id, points)
                    if held and student.student_id in held:
                        row.notes.append(f"the download has files for this student that "
                                         f"were not graded as theirs: "
                                         f"{held[student.student_id]} (see unmatched.csv)")
                row.name = student.name
        for override in self.overrides:
            row = rows.get(override.student_id)
            if row is None:
                if whole_class:
                    notes.append(f"overrides line {override.line}: {override.student_id!r} has "
                                 f"no row in this lab's gradebook; check the id against "
                                 f"grades.csv")
                continue
            apply_override(row, override, self.overrides_file)
        notes += self._apply_regrades(rows, whole_class)
        for row in rows.values():
            row.raw_score = sum(x.score for x in row.exercises) if row.exercises else row.score
            row.score = row.raw_score
            if row.status != NO_SUBMISSION:
                self._apply_late(row, submissions.get(row.student_id))
                if row.student_id in self.drafts:
                    row.notes.append("Moodle: a draft, never submitted for grading (graded "
                                     "as it stands)")
            elif self.policy.deadlines.get(self.lab_id) is not None:
                extension = late.extension_for(self.extensions, row.student_id, self.lab_id)
                own = self.own_dates.get(row.student_id)
                if own is not None and own.due is not None:
                    row.notes.append(self._override_note(own))
                if extension is not None:
                    row.notes.append(self._extension_note(extension, None, own))
        times_note = self._times_summary(list(rows.values()), submissions)
        if times_note:
            notes.insert(0, times_note)
        return [rows[k] for k in sorted(rows)], notes

    def _apply_regrades(self, rows: dict, whole_class: bool) -> list[str]:
        """Each regrade request kept on its row; a granted one's score applied as an
        override (the row's notes say so). Notes for requests of no row."""
        notes = []
        for regrade in self.regrades:
            row = rows.get(regrade.student_id)
            if row is None:
                if whole_class:
                    notes.append(f"regrades line {regrade.line}: {regrade.student_id!r} has no "
                                 f"row in this lab's gradebook; check the id against grades.csv")
                continue
            scored = next((x for x in row.exercises if x.exercise == regrade.exercise
                           and x.auto_score is not None), None)
            if regrade.score is not None and scored is not None:
                notes.append(f"{self.regrades_file}, line {regrade.line}: {row.student_id}'s "
                             f"{regrade.exercise} has a score in {self.overrides_file} too; "
                             f"that one is kept. Delete the score of one of the two lines.")
            elif regrade.score is not None:
                apply_override(row, regrade.override(), self.regrades_file)
            regrade_requests.record(row, regrade, self.regrades_file)
        return notes

    def _share_groups(self, rows: dict, submissions: dict) -> None:
        """Give every partner of a group submission the group's row (Gradescope)."""
        for submission in list(submissions.values()):
            row = rows.get(submission.student_id)
            if row is None or not submission.partners:
                continue
            folder = submission.identity.submission_id if submission.identity else ""
            members = [submission.student_id] + [pid for pid, _ in submission.partners]
            note = (f"group submission (Gradescope {folder or submission.source_name}) of "
                    f"{', '.join(members)}: graded once, every member gets its score")
            row.notes.append(note)
            for partner, _ in submission.partners:
                if partner in rows:
                    continue
                shared = copy.deepcopy(row)
                shared.student_id = partner
                rows[partner] = shared
                submissions[partner] = submission

    def _times_summary(self, rows: list[SubmissionResult], submissions: dict) -> str:
        """One line on where the submission times came from, and those not known."""
        if self.policy.deadlines.get(self.lab_id) is None:
            return ""
        sent = [r for r in rows if r.status != NO_SUBMISSION]
        if not sent:
            return ""
        sources: dict[str, int] = {}
        unknown = []
        for row in sent:
            if row.submitted_at:
                source = self.time_source(row, submissions.get(row.student_id))
                sources[source] = sources.get(source, 0) + 1
            else:
                unknown.append(row)
        known = ", ".join(f"{count} from the {source}" for source, count in sources.items())
        text = f"Submission times of {len(sent)} submissions: {known or 'none known'}"
        if unknown:
            why = sorted({submissions[r.student_id].time_note for r in unknown
                          if r.student_id in submissions and submissions[r.student_id].time_note})
            text += (f"; UNKNOWN for {len(unknown)}" + (f" ({'; '.join(why)})" if why else
                                                          " (the download has no time)")
                     + ": no late penalty was taken from them. To apply the late policy, "
                       "give --times (Canvas: the submissions API's JSON; any LMS: a CSV "
                       "student_id,submitted_at) or, for Moodle, the grading worksheet as "
                       "--roster")
        return text + "."

    def time_source(self, row: SubmissionResult, submission) -> str:
        """Where ``row.submitted_at`` came from ("" when it has none)."""
        if not row.submitted_at:
            return ""
        if row.student_id in self.times:
            return self.times[row.student_id][1]
        return submission.time_source if submission is not None else ""

    def class_rows(self, rows: list[SubmissionResult], submissions: dict,
                   feedback: dict[str, str]) -> list[ClassRow]:
        """The rows of OUT/class.json (what `export` reads) from the rows of record.

        ``feedback``: student_id -> the feedback page's path relative to OUT.
        """
        submissions = dict(submissions)
        for submission in list(submissions.values()):
            for partner, _ in submission.partners:
                submissions.setdefault(partner, submission)
        out = []
        for row in rows:
            student = self.roster.by_id(row.student_id) if self.roster is not None else None
            student = student or Student(row.student_id, row.name)
            submission = submissions.get(row.student_id)
            identity = submission.identity if submission else None
            if submission is not None and row.student_id != submission.student_id:
                identity = next((i for p, i in submission.partners if p == row.student_id),
                                identity)
            out.append(ClassRow(
                student=student, lab=row.lab, score=row.score,
                raw_score=row.raw_score if row.raw_score is not None else row.score,
                max_score=row.max_score, status=row.status, file=row.source_name,
                submitted_at=row.submitted_at, time_source=self.time_source(row, submission),
                due=row.due, late_seconds=row.late_seconds, penalty=row.penalty,
                feedback=feedback.get(row.student_id, ""),
                identity=identity, notes=list(row.notes),
                # the pictures stay on the feedback pages and in OUT/results (a class
                # of them would weigh megabytes here)
                exercises=[{k: v for k, v in asdict(x).items() if k != "picture"}
                           for x in row.exercises],
                regrades=list(row.regrades)))
        return out

    def class_facts(self, rows: list[SubmissionResult]) -> dict:
        """What class.json keeps of the term besides its rows (model.TERM_FIELDS)."""
        roster = self.roster
        deadline = self.policy.deadlines.get(self.lab_id)
        penalises = deadline is not None and bool(
            self.policy.penalty_percent or deadline.no_credit_after
            or self.policy.no_credit_after_days)
        return {"roster_lms": roster.lms if roster is not None else "",
                "roster_kind": roster.kind if roster is not None else "",
                "roster_file": str(roster.source) if roster is not None else "",
                "roster_assignments": list(roster.assignments) if roster is not None else [],
                "late_policy": policy_text(self.policy, self.lab_id) if penalises else "",
                "late_penalised": sum(1 for r in rows if r.penalty)}

    def _extension_note(self, extension: late.Extension, due: datetime.datetime | None,
                        own: late.OwnDates | None = None) -> str:
        source = extension.source or (self.extensions_file.name if self.extensions_file
                                      else "extensions")
        where = f"{source}, line {extension.line}"
        if due is None:
            deadline = self.policy.deadlines[self.lab_id]
            due = extension.due_for(own.due if own is not None and own.due is not None
                                    else deadline.due)
        return f"extension: due {due.isoformat(' ', 'minutes')} ({where})"

    def _override_note(self, own: late.OwnDates) -> str:
        """The row's note of a Moodle user or group override (report.html lists it
        with the extensions)."""
        assert own.due is not None   # only overrides of the due date have a note
        due = own.due.astimezone(self.policy.timezone)
        return (f"{OVERRIDE_NOTE}due {due.isoformat(' ', 'minutes')} (Moodle user or group "
                f"override: the worksheet's Due date, {own.source}, line {own.line})")

    def _apply_late(self, row: SubmissionResult, submission) -> None:
        given = self.times.get(row.student_id)
        when = given[0] if given else None
        if when is None and submission is not None:
            when = late.submission_time(self.policy, submission.submitted_at,
                                        submission.time_source, row.student_id)
        if when is not None:  # shown in the course's time zone, as the due date is
            row.submitted_at = when.astimezone(self.policy.timezone).isoformat(
                timespec="seconds")
        extension = late.extension_for(self.extensions, row.student_id, self.lab_id)
        own = self.own_dates.get(row.student_id)
        marked = bool(submission and submission.marked_late)
        found = late.lateness(self.policy, self.lab_id, when, extension, marked_late=marked,
                              own=own)
        row.due = found.due.isoformat(timespec="minutes") if found.due else ""
        row.late_seconds = found.seconds
        overridden = own is not None and own.due is not None and found.due is not None
        if own is not None and overridden:
            row.notes.append(self._override_note(own))
        if extension is not None and found.due is not None:
            row.notes.append(self._extension_note(extension, found.due))
        if found.note:
            row.notes.append(found.note + (" (extended)" if extension else
                                           " (overridden)" if overridden else ""))
        elif when is None and found.due is not None:
            row.notes.append("submission time unknown: no late penalty taken")
        if found.percent:
            assert row.raw_score is not None   # set by apply before it calls this
            row.penalty = late.penalty_points(row.raw_score, row.max_score, found.percent)
            row.score = row.raw_score - row.penalty
