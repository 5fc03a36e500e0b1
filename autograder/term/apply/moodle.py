"""Term's checks of Moodle's grading worksheet (autograder.term.apply), a
mixin of :class:`~autograder.term.apply.Term`: the extensions and drafts its
Status shows, each row's own due and cut-off dates (Moodle's user and group
overrides), read in the worksheet's time zone, and the kit's lateness checked
against Moodle's Status on every row.
"""

from __future__ import annotations

import collections
import datetime
from typing import TYPE_CHECKING

from autograder.term import late
from autograder.text import duration

if TYPE_CHECKING:
    from autograder.term.roster import Roster


class MoodleWorksheet:
    """What ``Term.check`` reads from Moodle's grading worksheet (the roster,
    when it is one); Term's own fields, that these methods read and set."""

    lab_id: str
    roster: Roster | None
    policy: late.LatePolicy
    extensions: list[late.Extension]
    times: dict[str, tuple[datetime.datetime, str]]
    errors: list[str]
    drafts: set[str]
    worksheet_zone: datetime.tzinfo | None
    worksheet_zone_source: str
    own_dates: dict[str, late.OwnDates]
    date_notes: list[str]

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


def _minute(when: datetime.datetime) -> int:
    """A time to the minute, as userdate() writes it (the seconds dropped)."""
    return int(when.timestamp() // 60)
