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

import collections
import copy
import dataclasses
import datetime
import difflib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.grader.results import NO_SUBMISSION, SubmissionResult
from autograder.term import late
from autograder.term.model import ClassRow, Student
from autograder.term.overrides import DEFAULT_FILE, Override, read_overrides
from autograder.text import duration
from autograder.term import regrades as regrade_requests

if TYPE_CHECKING:
    from autograder.term.roster import Roster


@dataclass
class Term:
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

    def _moodle_statuses(self) -> None:
        """Extensions and drafts the Moodle grading worksheet's Status shows.

        Moodle writes "Extension granted until: <date>" in the Status of a
        student with an extension (mod/assign/gradingtable.php, col_status):
        it is that student's extension of this lab, unless the extensions
        file gives one (the file wins, with an error line if they differ).
        "Draft (not submitted)" marks a file the student never submitted for
        grading: it is graded, and its row says so.
        """
        self.drafts = set()
        self._moodle_extensions: dict[str, datetime.datetime] = {}
        if self.roster is None:
            return
        for student_id, (status, line) in getattr(self.roster, "statuses", {}).items():
            where = f"{self.roster.source}, line {line} (Status)"
            if status.casefold().startswith("draft"):
                self.drafts.add(student_id)
            marker = "extension granted until:"
            at = status.casefold().find(marker)
            if at < 0:
                continue
            text = status[at + len(marker):].split(" - ")[0].strip()
            try:
                due = self._sheet_time(text, where)
            except ValueError as error:
                self.errors.append(str(error))
                continue
            self._moodle_extensions[student_id] = due
            mine = late.extension_for(self.extensions, student_id, self.lab_id)
            if mine is None:
                self.extensions.append(late.Extension(student_id, self.lab_id, due=due,
                                                      line=line, source=self.roster.source.name))
            elif mine.due != due:
                self.errors.append(f"{where}: Moodle grants {student_id} an extension until "
                                   f"{due.isoformat(' ', 'minutes')}, the extensions file "
                                   f"another (line {mine.line}); the file's is applied")

    @property
    def _sheet_zone(self) -> datetime.tzinfo:
        """The zone the worksheet's dates are read in (the course's unless stated)."""
        return self.worksheet_zone or self.policy.timezone

    def _sheet_time(self, text: str, where: str) -> datetime.datetime:
        """A date of the worksheet, read in its zone, in the course's."""
        return late.parse_moodle_time(text, self._sheet_zone, where).astimezone(
            self.policy.timezone)

    def _zone_words(self) -> str:
        zone = getattr(self._sheet_zone, "key", str(self._sheet_zone))
        if self.worksheet_zone_source:
            return f"{zone} ({self.worksheet_zone_source})"
        return f"{zone} (the course's: [deadlines] timezone; no one stated the worksheet's)"

    def _moodle_dates(self) -> None:
        """Moodle's user and group overrides, from the worksheet's date columns.

        With overrides on the assignment (``$hasoverrides``) or relative dates,
        mod/assign/gradingtable.php adds "Allow submissions from", "Due date"
        and "Cut-off date" after Status: each row's own dates (the override's,
        else the assignment's; '' when not set, and where an override keeps
        the assignment's date), written by userdate() in the downloading
        user's zone (``worksheet_zone``). A row whose Due date is not course.toml's due
        date of the lab (to the minute) has an override: it is that student's
        due date, and an extension (the extensions file's, or Moodle's "Extension
        granted until") still beats it, as in Moodle. Where course.toml sets no
        last date for credit for the lab, a row's Cut-off date is the student's
        (Moodle accepts nothing later without an extension). "Allow submissions
        from" is not used: Moodle accepts nothing before it.

        Raises:
            ValueError: no row's Due date is course.toml's due date of the lab:
                the worksheet is read in another zone than it was written in, or
                Moodle's due date is not course.toml's.
        """
        self.own_dates, self.date_notes = {}, []
        self._moodle_due: dict[str, tuple[datetime.datetime, int]] = {}
        roster = self.roster
        if roster is None or not getattr(roster, "dates", None):
            return
        parsed: dict[str, tuple[datetime.datetime | None, datetime.datetime | None, int]] = {}
        for student_id, (due_text, cutoff_text, line) in roster.dates.items():
            where = f"{roster.source}, line {line}"
            try:
                due = (self._sheet_time(due_text, f"{where} (Due date)")
                       if due_text else None)
                cutoff = (self._sheet_time(cutoff_text, f"{where} (Cut-off date)")
                          if cutoff_text else None)
            except ValueError as error:
                self.errors.append(str(error))
                continue
            parsed[student_id] = (due, cutoff, line)
        self._moodle_due = {sid: (due, line) for sid, (due, _, line) in parsed.items() if due}
        deadline = self.policy.deadlines.get(self.lab_id)
        if deadline is None:
            if self._moodle_due:
                self.date_notes.append(
                    f"{roster.source}: Moodle's worksheet gives due dates for {self.lab_id} "
                    f"(Due date), but course.toml has no due date for {self.lab_id}: the kit "
                    f"takes no late penalty. To apply the late policy, add {self.lab_id} = "
                    f"\"<Moodle's due date>\" to course.toml's [deadlines].")
            return
        kit_due = _minute(deadline.due)
        dues = [(due, line, roster.dates[sid][0]) for sid, (due, line) in self._moodle_due.items()]
        if dues and all(_minute(due) != kit_due for due, _, _ in dues):
            raise ValueError(self._due_mismatch(deadline.due, dues))
        own_cutoff = deadline.no_credit_after is None and not self.policy.no_credit_after_days
        # An override leaves the dates it does not change empty (NULL in Moodle's
        # table): an empty Cut-off date is then the assignment's, the column's
        # most common one (most students have no override).
        cutoffs = collections.Counter(text for _, text, _ in roster.dates.values())
        cutoffs.update({"": len(roster) - len(roster.dates)})
        usual = cutoffs.most_common(1)[0][0]
        usual_cutoff = None
        if usual and own_cutoff:
            usual_cutoff = next((c for sid, (_, c, _) in parsed.items()
                                 if c is not None and roster.dates[sid][1] == usual), None)
        for student in roster.students:
            student_id = student.student_id
            if student_id in roster.dates and student_id not in parsed:
                continue   # a date that is not one (an error line says so)
            due, cutoff, line = parsed.get(student_id, (None, None, 0))
            mine = due if due is not None and _minute(due) != kit_due else None
            last = (cutoff or usual_cutoff) if own_cutoff else None
            if mine is not None or last is not None:
                self.own_dates[student_id] = late.OwnDates(student_id, mine, last, line,
                                                           roster.source.name)

    def _due_mismatch(self, kit_due: datetime.datetime,
                      dues: list[tuple[datetime.datetime, int, str]]) -> str:
        """Why no row's Due date is course.toml's, and what to do."""
        assert self.roster is not None   # called with the roster's dates
        counted = collections.Counter(_minute(due) for due, _, _ in dues)
        common_minute, count = counted.most_common(1)[0]
        common, _, text = next(d for d in dues if _minute(d[0]) == common_minute)
        lines = sorted(line for due, line, _ in dues if _minute(due) == common_minute)
        shown = ", ".join(map(str, lines[:8])) + (f" and {len(lines) - 8} more"
                                                  if len(lines) > 8 else "")
        apart = (common - kit_due).total_seconds()
        hours = (f" ({duration(abs(apart))} {'later' if apart > 0 else 'earlier'}, as far "
                 f"apart as two time zones: as when a user whose Moodle profile is in "
                 f"another zone downloaded the worksheet)"
                 if apart and apart % 900 == 0 and abs(apart) <= 26 * 3600 else "")
        return (f"{self.roster.source}: no row's Due date is course.toml's due date of "
                f"{self.lab_id}, {kit_due.isoformat(' ', 'minutes')}: the worksheet's Due "
                f"date is {text!r}, {common.isoformat(' ', 'minutes')}, on {count} of "
                f"{len(dues)} rows (lines {shown}){hours}, read in {self._zone_words()}. "
                f"Nothing was graded. Moodle writes the worksheet's dates in the time zone of "
                f"the Moodle profile of the user who downloaded it: give "
                f"{late.WORKSHEET_ZONE_FLAG} <that zone> (e.g. Europe/Berlin) to grade, or set "
                f"{late.WORKSHEET_ZONE_SETTING} in course.toml; if that zone is right, make "
                f"course.toml's [deadlines] {self.lab_id} the assignment's due date in Moodle.")

    def _check_moodle_lateness(self) -> None:
        """Check the kit's lateness against Moodle's own Status on every row.

        Moodle writes "<format_time> late" in the Status when the submission
        came after the student's due date (their extension, else their
        override's, else the assignment's: col_status), nothing when on time.
        The kit's lateness against that same due date must agree, within what
        Moodle's text leaves out (format_time keeps two units: "1 day 2
        hours" is 26 to 27 hours) and the worksheet's minutes (userdate drops
        the seconds): a worksheet read in another time zone than its
        downloader's, or a course.toml due date that is not Moodle's, is found
        here. The instructor's own extensions are not Moodle's business and are
        not part of the check; neither is the grace period.

        Raises:
            ValueError: the rows where they disagree (line, student, Moodle's
                text, the kit's lateness), and how to fix it.
        """
        roster = self.roster
        if roster is None or not getattr(roster, "statuses", None):
            return
        deadline = self.policy.deadlines.get(self.lab_id)
        marked = [sid for sid, (status, _) in roster.statuses.items()
                  if late.moodle_late(status) is not None]
        if deadline is None:
            if marked and not self.date_notes:
                self.date_notes.append(
                    f"{roster.source}: Moodle marks {len(marked)} submission(s) late, but "
                    f"course.toml has no due date for {self.lab_id}: the kit takes no late "
                    f"penalty. To apply the late policy, add {self.lab_id} = \"<Moodle's due "
                    f"date>\" to course.toml's [deadlines].")
            return
        moodle_due = self._moodle_due
        wrong = []
        for student_id, (status, line) in roster.statuses.items():
            if student_id not in self.times:
                continue
            when, source = self.times[student_id]
            if student_id in self._moodle_extensions:
                due, why = self._moodle_extensions[student_id], "Moodle's extension"
            elif student_id in moodle_due:
                due, why = moodle_due[student_id][0], "the row's Due date"
            else:
                due, why = deadline.due, f"course.toml's [deadlines] {self.lab_id}"
            seconds = (when - due).total_seconds()
            said = late.moodle_late(status)
            # the kit's time may lack up to a minute (userdate writes no seconds)
            agree = seconds <= 0 if said is None else \
                max(said[0], seconds) < min(said[1], seconds + 60)
            if agree:
                continue
            student = roster.by_id(student_id)
            name = f" ({student.name})" if student is not None and student.name else ""
            moodle = ("no \"late\": on time" if said is None
                      else f"{duration(said[0])} to {duration(said[1])} late")
            kit = f"{duration(seconds)} late" if seconds > 0 else "on time"
            wrong.append(f"{roster.source}, line {line}: {student_id}{name}: Moodle's Status "
                         f"{status!r} ({moodle}); the kit: submitted "
                         f"{when.isoformat(' ', 'minutes')} ({source}), due "
                         f"{due.isoformat(' ', 'minutes')} ({why}): {kit}")
        if not wrong:
            return
        if self.worksheet_zone_source:
            zone = self._sheet_zone
            fix = (f"Check that {getattr(zone, 'key', zone)} is the time zone of the Moodle "
                   f"profile of the user who downloaded the worksheet (else give "
                   f"{late.WORKSHEET_ZONE_FLAG} <that zone>), and that course.toml's "
                   f"[deadlines] {self.lab_id} is the assignment's due date in Moodle.")
        else:
            fix = (f"Moodle writes the worksheet's dates in the time zone of the Moodle profile "
                   f"of the user who downloaded it: give {late.WORKSHEET_ZONE_FLAG} <that "
                   f"zone> (e.g. Europe/Berlin), or set {late.WORKSHEET_ZONE_SETTING} in "
                   f"course.toml; if that zone is the course's, check course.toml's "
                   f"[deadlines] {self.lab_id} against the assignment's due date in Moodle.")
        raise ValueError(
            f"The kit's lateness disagrees with Moodle's own Status on {len(wrong)} row(s) of "
            f"the grading worksheet (its dates read in {self._zone_words()}):\n  "
            + "\n  ".join(wrong) + f"\nNothing was graded. {fix}")

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


#: The start of a row's note of a Moodle user or group override.
OVERRIDE_NOTE = "due date override: "


def _minute(when: datetime.datetime) -> int:
    """A time to the minute, as userdate() writes it (the seconds dropped)."""
    return int(when.timestamp() // 60)


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
