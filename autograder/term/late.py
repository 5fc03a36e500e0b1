"""Due dates, extensions and the late policy, and how late each submission was.

The course's settings live in course.toml (read by autograder.labs)::

    [deadlines]
    timezone = "Europe/London"          # due dates, zip times and times CSVs are read in it
    lab1 = "2026-10-05 23:59"           # a lab's due date
    lab2 = { due = "2026-10-19 23:59", no_credit_after = "2026-10-26 23:59" }

    [late]
    grace_minutes = 15                  # this late still counts as on time
    penalty_percent = 10                # of the lab's points, per period late
    per = "day"                         # or "hour"; a part of a period counts whole
    max_penalty_percent = 50            # the most a late submission loses (cap)
    no_credit_after_days = 7            # 0 points when later than this after the due date
    extensions = "extensions.csv"       # relative to course.toml (or --extensions)
    trust_file_times = false            # see below

    [moodle]
    worksheet_timezone = "Europe/Berlin"  # the Moodle profile zone of whoever downloaded
                                          # the grading worksheet (or --worksheet-timezone)

A lab without a due date has no late work. The penalty is Canvas's rule: a
share of the lab's points per period late (a part of a period counts as a
whole one, counted from the due date once past the grace period), at most
``max_penalty_percent``, never below 0 points; past ``no_credit_after`` (a
date per lab, or ``no_credit_after_days`` after the due date) the score is 0.

Extensions (``--extensions FILE`` or ``[late] extensions``) are a CSV with
the columns ``student_id,lab`` and either ``due`` (the student's own due
date) or ``days`` (days added to the lab's; fractions allowed); ``lab`` may
be ``*`` for every lab. A student's extension moves ``no_credit_after`` by
as much. Moodle's user and group overrides (the grading worksheet's "Due
date" and "Cut-off date": ``OwnDates``, read by Term.check) give a student
their own due date; an extension in days is added to it.

When a submission was made comes, best first, from a times file
(``--times FILE``: a CSV ``student_id,submitted_at``, or the JSON of
Canvas's submissions API, see ``read_times``), Moodle's grading worksheet
given as the roster (its "Last modified (submission)", written in the
downloading user's time zone: ``worksheet_zone``), Gradescope's
metadata (``:created_at:``). Never from an LMS zip's stamps: Canvas stamps
every entry with the time the zip was built, Moodle with when the file
reached its file pool (a draft). A zip's or a folder's file times are when
the files were zipped or copied, not submitted, so they are used only with
``trust_file_times = true`` (an LMS zip unpacked with its times kept), and
even then not when every file carries one stamp (autograder.grader.
submissions.collect). A submission whose time is not known takes no
penalty, and the report, the terminal and its row say so; Canvas's ``LATE``
marker without a time is said on the row (Canvas's own late policy applies
when the grades are imported: autograder.term.export).

Every line of the extensions, overrides and times files must name a
student of the class (Term.check): by their student_id or any id the
roster has for them.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from autograder.term.csvfile import read_rows
from autograder.text import duration

PERIODS = {"day": 86400, "hour": 3600}


@dataclass(frozen=True)
class Deadline:
    """One lab's due date and last date for credit (aware datetimes)."""

    due: datetime.datetime
    no_credit_after: datetime.datetime | None = None


@dataclass
class LatePolicy:
    """course.toml's ``[deadlines]`` and ``[late]``, checked."""

    timezone: datetime.tzinfo = datetime.timezone.utc
    deadlines: dict[str, Deadline] = field(default_factory=dict)
    grace_minutes: float = 0.0
    penalty_percent: float = 0.0
    per: str = "day"
    max_penalty_percent: float = 100.0
    no_credit_after_days: float | None = None
    extensions_file: Path | None = None
    trust_file_times: bool = False

    @classmethod
    def from_settings(cls, deadlines: dict, late: dict, base: Path) -> "LatePolicy":
        """The policy from course.toml's tables (``base``: course.toml's folder).

        Raises:
            ValueError: a setting that is not what it should be, saying which.
        """
        where = "course.toml"
        deadlines = dict(deadlines or {})
        late = dict(late or {})
        zone_name = deadlines.pop("timezone", "UTC")
        try:
            zone = ZoneInfo(str(zone_name))
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{where} [deadlines] timezone = {zone_name!r} is not a time zone: "
                             f"give an IANA name such as \"Europe/London\" or \"UTC\".") from None
        policy = cls(timezone=zone)
        for lab, value in deadlines.items():
            if isinstance(value, dict):
                unknown = set(value) - {"due", "no_credit_after"}
                if unknown or "due" not in value:
                    raise ValueError(
                        f"{where} [deadlines] {lab} = {value!r}: give a date "
                        f"(lab1 = \"2026-10-05 23:59\") or a table with due and, optionally, "
                        f"no_credit_after.")
                due = parse_time(value["due"], zone, f"{where} [deadlines] {lab}.due")
                last = (parse_time(value["no_credit_after"], zone,
                                   f"{where} [deadlines] {lab}.no_credit_after")
                        if value.get("no_credit_after") else None)
                policy.deadlines[lab] = Deadline(due, last)
            else:
                policy.deadlines[lab] = Deadline(parse_time(value, zone,
                                                            f"{where} [deadlines] {lab}"))
        numbers = {"grace_minutes": 0, "penalty_percent": 0, "max_penalty_percent": 0,
                   "no_credit_after_days": 0}
        known = set(numbers) | {"per", "extensions", "trust_file_times"}
        unknown_settings = sorted(set(late) - known)
        if unknown_settings:
            raise ValueError(f"{where} [late] has {', '.join(unknown_settings)}, which the kit "
                             f"does not know; the settings are {', '.join(sorted(known))}.")
        for name, low in numbers.items():
            if name in late:
                value = late[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not math.isfinite(value) or value < low:
                    raise ValueError(f"{where} [late] {name} = {value!r}: give a number, "
                                     f"{low} or more.")
                setattr(policy, name, float(value))
        if policy.max_penalty_percent > 100:
            raise ValueError(f"{where} [late] max_penalty_percent = "
                             f"{late['max_penalty_percent']!r}: give a percent, at most 100.")
        per = late.get("per", "day")
        if per not in PERIODS:
            raise ValueError(f"{where} [late] per = {per!r}: give \"day\" or \"hour\".")
        policy.per = per
        if "trust_file_times" in late:
            if not isinstance(late["trust_file_times"], bool):
                raise ValueError(f"{where} [late] trust_file_times: give true or false.")
            policy.trust_file_times = late["trust_file_times"]
        if late.get("extensions"):
            policy.extensions_file = (Path(base) / str(late["extensions"])).resolve()
        return policy


@dataclass(frozen=True)
class Lateness:
    """How late one submission was, and what it costs.

    Attributes:
        due: the due date that applied (None when the lab has none).
        submitted: when it was submitted (None when not known).
        seconds: how late, past the due date (0 when on time or unknown).
        percent: the share of the lab's points taken (0..100).
        note: for the instructor ("2 days 3 h late: -20%", "within the
            grace period", "Canvas marks it late; the time is not known").
    """

    due: datetime.datetime | None
    submitted: datetime.datetime | None
    seconds: float = 0.0
    percent: float = 0.0
    note: str = ""


def lateness(policy: LatePolicy, lab: str, submitted: datetime.datetime | None,
             extension: "Extension | None" = None, marked_late: bool = False,
             own: "OwnDates | None" = None) -> Lateness:
    """How late a submission of ``lab`` made at ``submitted`` was, under ``policy``.

    ``own``: the student's own dates in the LMS (Moodle's user or group
    override): its due date replaces the lab's; an ``extension`` with
    ``days`` adds them to it, one with a ``due`` replaces it (as Moodle's
    extension beats an override). The last date for credit moves with the
    due date; where the course sets none, ``own.cutoff`` (Moodle's Cut-off
    date) is it, or the extended due date when that is later.
    """
    deadline = policy.deadlines.get(lab)
    if deadline is None:
        return Lateness(None, submitted)
    due, last = deadline.due, deadline.no_credit_after
    if last is None and policy.no_credit_after_days:
        last = due + datetime.timedelta(days=policy.no_credit_after_days)
    base = own.due if own is not None and own.due is not None else due
    moved = extension.due_for(base) if extension is not None else base
    if last is not None:
        last = last + (moved - due)
    elif own is not None and own.cutoff is not None:
        last = max(own.cutoff, moved)
    due = moved
    if submitted is None:
        note = ("Canvas marks it late, and the time it was submitted is not known: no "
                "penalty taken (give --times to apply the policy)") if marked_late else ""
        return Lateness(due, None, 0.0, 0.0, note)
    seconds = (submitted - due).total_seconds()
    if seconds <= 0:
        return Lateness(due, submitted)
    if last is not None and submitted > last:
        return Lateness(due, submitted, seconds, 100.0,
                        f"{duration(seconds)} late, after the last date for credit "
                        f"({last.isoformat(' ', 'minutes')}): no credit")
    if seconds <= policy.grace_minutes * 60:
        return Lateness(due, submitted, seconds, 0.0,
                        f"{duration(seconds)} late, within the grace period")
    periods = math.ceil(seconds / PERIODS[policy.per])
    percent = min(policy.max_penalty_percent, periods * policy.penalty_percent)
    return Lateness(due, submitted, seconds, percent,
                    f"{duration(seconds)} late: {periods} {policy.per}{'s' * (periods > 1)} "
                    f"at {policy.penalty_percent:g}%, -{percent:g}%")


def penalty_points(raw: float, max_score: float, percent: float) -> float:
    """Points taken: ``percent`` of the lab's points, leaving at least 0."""
    return min(raw, max_score * percent / 100.0) if raw > 0 else 0.0




# -- times ----------------------------------------------------------------------

_NANOSECONDS = re.compile(r"(\.\d{6})\d+")
_SPACED_OFFSET = re.compile(r"\s+(?:UTC|GMT)?\s*([+-]\d{2}):?(\d{2})$")


def parse_time(value, zone: datetime.tzinfo, where: str) -> datetime.datetime:
    """An aware datetime from a TOML date or a text (read in ``zone`` without an offset).

    Accepts ISO 8601 (``2026-10-05T23:59``, ``2026-10-05 23:59:00+01:00``,
    ``...Z``), a date alone (the end of that day, 23:59:59), and
    Gradescope's ``2024-03-01 10:00:00.000000000 -08:00``.

    Raises:
        ValueError: naming ``where`` and the forms accepted.
    """
    if isinstance(value, datetime.datetime):
        stamp = value
    elif isinstance(value, datetime.date):
        stamp = datetime.datetime.combine(value, datetime.time(23, 59, 59))
    else:
        text = str(value).strip()
        text = _NANOSECONDS.sub(r"\1", text)
        text = _SPACED_OFFSET.sub(r"\1:\2", text)
        text = re.sub(r"\s*(?:Z|UTC|GMT)$", "+00:00", text)
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                stamp = datetime.datetime.combine(datetime.date.fromisoformat(text),
                                                  datetime.time(23, 59, 59))
            else:
                stamp = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{where}: {str(value)!r} is not a date and time; write it like "
                             f"2026-10-05 23:59 (in the course's time zone) or "
                             f"2026-10-05T23:59:00+01:00.") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=zone)


#: Time sources that are when a file was copied or zipped, not submitted:
#: used only with ``trust_file_times = true``.
FILE_TIMES = ("file time", "zip time")


def submission_time(policy: LatePolicy, submitted_at: str, time_source: str,
                    where: str) -> datetime.datetime | None:
    """When a submission was made, from what the download carried (None: not known
    or not trusted)."""
    if not submitted_at:
        return None
    if time_source in FILE_TIMES and not policy.trust_file_times:
        return None
    try:
        return parse_time(submitted_at, policy.timezone, where)
    except ValueError:
        return None


@dataclass(frozen=True)
class GivenTime:
    """One row of a times file, before it is matched to a student.

    Attributes:
        key: the student as the file names them: the kit's student_id, or
            any id the roster has for them (Canvas's user id, SIS login,
            Moodle's ID number, the email).
        when: when they submitted.
        line: the line (CSV) or the position, from 1 (JSON).
        source: "times CSV" or "Canvas submissions API".
    """

    key: str
    when: datetime.datetime
    line: int
    source: str


def read_times(path: Path, policy: LatePolicy) -> list[GivenTime]:
    """A times file (``--times``): a CSV ``student_id,submitted_at``, or the JSON of
    Canvas's submissions API.

    The JSON is what ``GET /api/v1/courses/:course_id/assignments/
    :assignment_id/submissions`` returns (a list of submissions, each with
    ``user_id`` and ``submitted_at``, ISO 8601 in UTC, null when the student
    has not submitted; canvas-lms lib/api/v1/submission.rb); those without a
    time are left out. Canvas's own gradebook shows the same times.

    Raises:
        ValueError: the file is missing, lacks a column, has a bad time or a
            student twice; the message names the line.
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        return _read_canvas_json(path, policy)
    rows = read_rows(path, ("student_id", "submitted_at"), "--times")
    times: list[GivenTime] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        student = row["student_id"].strip()
        if not student:
            raise ValueError(f"{path}, line {line}: no student_id; give the student's id (as "
                             f"in grades.csv or the roster) or delete the line.")
        if student in seen:
            raise ValueError(f"{path}, line {line}: {student!r} is listed twice (line "
                             f"{seen[student]} too); keep one time per student.")
        seen[student] = line
        times.append(GivenTime(student, parse_time(row["submitted_at"], policy.timezone,
                                                   f"{path}, line {line}"), line, "times CSV"))
    return times


def _read_canvas_json(path: Path, policy: LatePolicy) -> list[GivenTime]:
    import json

    how = ("give the JSON Canvas's submissions API returns (GET /api/v1/courses/<course>/"
           "assignments/<assignment>/submissions?per_page=100, every page joined into one "
           "list), or a CSV student_id,submitted_at")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ValueError(f"--times {path} does not exist; {how}.") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"--times {path} is not JSON ({error}); {how}.") from None
    if isinstance(data, dict) and isinstance(data.get("submissions"), list):
        data = data["submissions"]
    if not isinstance(data, list):
        raise ValueError(f"--times {path}: expected a list of submissions, found a "
                         f"{type(data).__name__}; {how}.")
    times: list[GivenTime] = []
    seen: dict[str, int] = {}
    for number, item in enumerate(data, 1):
        where = f"{path}, submission {number}"
        if not isinstance(item, dict) or "user_id" not in item:
            raise ValueError(f"{where}: not a Canvas submission (no user_id); {how}.")
        if not item.get("submitted_at"):
            continue  # not submitted
        user = str(item["user_id"]).strip()
        if user in seen:
            raise ValueError(f"{where}: the user {user} is listed twice (submission "
                             f"{seen[user]} too): give each user's latest submission once "
                             f"(the API's list without include[]=submission_history).")
        seen[user] = number
        times.append(GivenTime(user, parse_time(item["submitted_at"], policy.timezone, where),
                               number, "Canvas submissions API"))
    return times


_WEEKDAY = re.compile(r"^[A-Za-z]+,\s*")
_MOODLE_FORMATS = ("%d %B %Y, %I:%M %p", "%d %B %Y, %H:%M", "%d %b %Y, %I:%M %p",
                   "%d %b %Y, %H:%M", "%d %B %Y %I:%M %p", "%d %B %Y %H:%M")


def parse_moodle_time(text: str, zone: datetime.tzinfo, where: str) -> datetime.datetime:
    """A time as Moodle's grading worksheet writes it, read in ``zone``.

    Moodle writes "Last modified (submission)" with ``userdate()`` in the
    downloading user's time zone and language: in English
    ``strftimedaydatetime``, "Monday, 5 October 2026, 11:59 PM"
    (lang/en/langconfig.php). ISO 8601 is read too.

    Raises:
        ValueError: naming ``where`` and the form expected.
    """
    cleaned = _WEEKDAY.sub("", " ".join(str(text).split()))
    for form in _MOODLE_FORMATS:
        try:
            return datetime.datetime.strptime(cleaned, form).replace(tzinfo=zone)
        except ValueError:
            continue
    try:
        return parse_time(text, zone, where)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a time as Moodle's grading worksheet "
                         f"writes it in English (\"Monday, 5 October 2026, 11:59 PM\"); "
                         f"download the worksheet with the site's language set to English, "
                         f"or give the times with --times.") from None


#: Where the zone of Moodle's grading worksheet is stated: grade's flag, and
#: course.toml's setting (``[moodle] worksheet_timezone``).
WORKSHEET_ZONE_FLAG = "--worksheet-timezone"
WORKSHEET_ZONE_SETTING = "[moodle] worksheet_timezone"


def worksheet_zone(given: str | None, moodle: dict | None, policy: LatePolicy,
                   where: str = "course.toml") -> tuple[datetime.tzinfo, str]:
    """The time zone the dates of Moodle's grading worksheet are read in, and
    where it comes from ("" when no one stated it).

    Moodle writes them with ``userdate()`` in the DOWNLOADING user's profile
    zone, not the course's: ``given`` (``--worksheet-timezone``), else
    course.toml's ``[moodle] worksheet_timezone``, else the course's own zone
    (``[deadlines] timezone``), which Term.check then checks against
    Moodle's own Status.

    Raises:
        ValueError: a zone that is not an IANA name, or a ``[moodle]`` key
            that looks like a misspelt ``worksheet_timezone``.
    """
    moodle = dict(moodle or {})
    wrong = sorted(k for k in moodle if "zone" in str(k).lower() and k != "worksheet_timezone")
    if wrong:
        raise ValueError(f"{where} [moodle] has {', '.join(wrong)}, which the kit does not "
                         f"know; the zone of the grading worksheet is worksheet_timezone "
                         f"(e.g. worksheet_timezone = \"Europe/Berlin\").")
    for name, source in ((given, WORKSHEET_ZONE_FLAG),
                         (moodle.get("worksheet_timezone"), f"{where} {WORKSHEET_ZONE_SETTING}")):
        if name is None or name == "":
            continue
        try:
            return ZoneInfo(str(name)), f"{source} {name}"
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{source} {str(name)!r} is not a time zone: give the IANA name "
                             f"of the time zone in the Moodle profile of the user who "
                             f"downloaded the grading worksheet, such as \"Europe/Berlin\" "
                             f"or \"UTC\".") from None
    return policy.timezone, ""


#: format_time()'s English units (lib/moodlelib.php; lang/en/moodle.php: 'year',
#: 'years', 'day', 'days', 'hour', 'hours', 'min', 'mins', 'sec', 'secs').
_FORMAT_TIME_UNITS = {"year": 365 * 86400, "day": 86400, "hour": 3600, "min": 60, "sec": 1}
#: The largest unit format_time shows -> how much its text may leave out: it
#: shows two units from the first non-zero one and drops the rest.
_FORMAT_TIME_LEFT_OUT = {365 * 86400: 86400, 86400: 3600, 3600: 60, 60: 1, 1: 1}
_MOODLE_LATE = re.compile(r"^((?:\d+ (?:years?|days?|hours?|mins?|secs?)\s*){1,2})late$")


def moodle_late(status: str) -> tuple[float, float] | None:
    """How late Moodle's grading worksheet's Status says a submission was:
    (at least, less than) seconds; None when it says nothing late.

    mod/assign/gradingtable.php ``col_status`` writes ``get_string(
    'submittedlateshort', 'assign', format_time($timesubmitted - $due))``
    ("{$a} late") when ``$timesubmitted > $due``, ``$due`` being the
    student's extension, else their override's due date, else the
    assignment's; ``format_time`` (lib/moodlelib.php) writes the two largest
    units from the first non-zero one and drops the rest: "1 day 2 hours"
    is 26 to 27 hours, "10 mins 27 secs" 627 seconds.
    """
    for part in str(status).split(" - "):
        match = _MOODLE_LATE.match(" ".join(part.split()))
        if not match:
            continue
        words = match.group(1).split()
        pairs = [(int(words[i]), _FORMAT_TIME_UNITS[words[i + 1].rstrip("s")])
                 for i in range(0, len(words), 2)]
        low = sum(n * unit for n, unit in pairs)
        return float(low), float(low + _FORMAT_TIME_LEFT_OUT[pairs[0][1]])
    return None


@dataclass(frozen=True)
class Extension:
    """One student's extension of one lab (or of every lab: ``lab == "*"``)."""

    student_id: str
    lab: str
    due: datetime.datetime | None = None
    days: float = 0.0
    #: the line of the extensions file (0: not from a file), and the file's
    #: name when it is not the extensions file (Moodle's worksheet).
    line: int = 0
    source: str = ""

    def due_for(self, due: datetime.datetime) -> datetime.datetime:
        return self.due if self.due is not None else due + datetime.timedelta(days=self.days)


def read_extensions(path: Path, policy: LatePolicy) -> list[Extension]:
    """An extensions CSV: ``student_id,lab`` and ``due`` or ``days`` per row.

    Raises:
        ValueError: the file is missing or malformed; the message names the line.
    """
    rows = read_rows(path, ("student_id", "lab"), "extensions",
                     "student_id,lab,due or student_id,lab,days")
    extensions = []
    seen: dict[tuple[str, str], int] = {}
    for line, row in rows:
        where = f"{path}, line {line}"
        student, lab = row["student_id"].strip(), row["lab"].strip()
        if not student or not lab:
            raise ValueError(f"{where}: no {'student_id' if not student else 'lab'}; give the "
                             f"student's id and the lab (lab1, or * for every lab), or delete "
                             f"the line.")
        if (student, lab) in seen:
            raise ValueError(f"{where}: {student}'s extension of {lab} is on line "
                             f"{seen[student, lab]} already; keep one line.")
        seen[student, lab] = line
        due, days = (row.get("due") or "").strip(), (row.get("days") or "").strip()
        if bool(due) == bool(days):
            raise ValueError(f"{where}: give either due (the student's due date) or days "
                             f"(days added to the lab's), not {'both' if due else 'neither'}.")
        if due:
            extensions.append(Extension(row["student_id"].strip(), row["lab"].strip(),
                                        due=parse_time(due, policy.timezone, where), line=line))
            continue
        try:
            value = float(days)
            if not math.isfinite(value) or value < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"{where}: days = {days!r} is not a number of days (0 or more, "
                             f"e.g. 2 or 0.5).") from None
        extensions.append(Extension(row["student_id"].strip(), row["lab"].strip(), days=value,
                                    line=line))
    return extensions


@dataclass(frozen=True)
class OwnDates:
    """One student's own dates of one lab in the LMS: a Moodle user or group
    override, read from the grading worksheet's "Due date" and "Cut-off date"
    columns (Term.check).

    Attributes:
        student_id: whose.
        due: their due date, where it is not the lab's (None: the lab's).
        cutoff: their last date for credit, used only where course.toml sets
            none for the lab (None: none).
        line: the worksheet's line.
        source: the worksheet's file name.
    """

    student_id: str
    due: datetime.datetime | None = None
    cutoff: datetime.datetime | None = None
    line: int = 0
    source: str = ""


def extension_for(extensions: list[Extension], student_id: str, lab: str) -> Extension | None:
    """The student's extension of ``lab``: one for the lab itself before one for every lab."""
    mine = [e for e in extensions if e.student_id == student_id and e.lab in (lab, "*")]
    mine.sort(key=lambda e: e.lab == "*")
    return mine[0] if mine else None
