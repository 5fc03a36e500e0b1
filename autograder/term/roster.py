"""The class roster an LMS exports, and which enrolled student a submission is.

``read_roster(path)`` reads one of three CSV files, told apart by the header:

- **Canvas**: the gradebook export (Grades > Export). Its columns, as
  Canvas's ``lib/gradebook_exporter.rb`` writes them: ``Student`` (the
  sortable name "Doe, Jane"; ``LastName``, ``FirstName`` when the course
  shows first and last names), ``ID`` (the Canvas user id), ``SIS User ID``,
  ``SIS Login ID``, ``Integration ID`` and ``Root Account`` (optional),
  ``Section``, the custom columns, one column per assignment titled
  ``<title> (<assignment id>)``, then totals ("Current Score", ...). Before
  the students come an optional row of "Manual Posting" markers (older
  Canvas: "Muted") with no student, and the row ``    Points Possible``; the
  test student ("Student, Test", the Student View enrollment) comes last.
  Those rows are skipped (the test student with a note). A name starting
  with ``=`` is written ``="..."`` and read back as the name.
- **Moodle**: the assignment's offline grading worksheet (View all
  submissions > Download grading worksheet, ``mod/assign/gradingtable.php``):
  ``Identifier`` ("Participant 123456"), ``Full name``, the identity fields
  the site shows (``Email address``, ``ID number``, ``Username``...),
  ``Status``, then, with user or group overrides on the assignment,
  ``Allow submissions from``, ``Due date``, ``Cut-off date`` (each row's
  own dates, read by Term.check), ``Grade``, ``Maximum Grade``...; with
  blind marking only ``Identifier``. Or the gradebook export (Grades > Export > Plain text
  file): ``First name``, ``Last name``, the profile fields (``ID number``,
  ``Institution``, ``Department``, ``Email address``), one column per grade
  item ("Assignment: Lab 1 (Real)") and ``Last downloaded from this
  course``. Moodle writes comma, semicolon, tab or colon separated files
  (the ``csvdelimiter`` setting): the separator is found from the header.
- **csv**: a plain file with a ``student_id`` column and optional ``name``,
  ``email``, ``section``; other columns are kept (lower-cased) in
  ``Student.lms_ids``.

Text is UTF-8 (with or without BOM), UTF-16 with BOM (Excel's "Unicode
text") or, when it is not UTF-8, Windows-1252 (Excel's "CSV" on Windows),
with a note.

The kit's student id (``Student.student_id``, the row of grades.csv) is,
sanitized like a submission's id (``lms.sanitize_id``, ``lms.unique_ids``):
Canvas's SIS Login ID, else SIS User ID, else ``<name>_<ID>`` as Canvas
names bulk-download files ("doejane_12345"); Moodle's ID number, else the
username, else the email's local part, else ``<Full name>_<participant id>``
as Moodle names download folders ("Jane_Doe_123456"); the plain file's
``student_id``.

``Roster.match(identity)`` says which student a submission is (see
``Roster.resolve`` for the rules); it never guesses between two students.
"""

from __future__ import annotations

import codecs
import csv
import functools
import io
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from autograder.text import clean_text
from autograder.grader.submissions.lms import sanitize_id, unique_ids
from autograder.term.model import Identity, Student

__all__ = ["Roster", "read_roster", "IDENTITY_SOURCES"]

#: The separators tried, in this order, on the header line.
DELIMITERS = (",", ";", "\t", ":")
#: ``Identity.source`` values that ``Roster.match`` knows.
IDENTITY_SOURCES = ("canvas", "moodle", "gradescope", "folder", "file")

_CANVAS_ASSIGNMENT = re.compile(r"^.+ \(\d+\)$")  # "Lab 1 (12345)": title_with_id
_CANVAS_META_CELLS = {"", "muted", "manual posting"}
_CANVAS_TEST_STUDENT = "student, test"
_PARTICIPANT = re.compile(r"(\d+)\s*$")  # "Participant 123456"
_MOODLE_USER_FIELDS = {"first name", "last name", "full name", "identifier", "id number",
                       "institution", "department", "email address", "username", "phone",
                       "mobile phone", "address", "city", "country", "idnumber", "email",
                       "last downloaded from this course", "groups", "firstname", "lastname",
                       "id", "auth", "lang", "timezone", "description"}
_HOW = ("Export the roster again (Canvas: Grades > Export; Moodle: Download grading "
        "worksheet or Grades > Export), or write a CSV with a student_id column.")


@dataclass
class Roster:
    """The students of a class, as one LMS file lists them.

    Attributes:
        lms: "canvas", "moodle" or "csv" (model.LMS_KINDS).
        students: in the file's order.
        source: the file read.
        notes: what the instructor should know (rows skipped, the encoding,
            how submissions will be matched).
        assignments: Canvas's assignment columns ("Lab 1 (12345)"), Moodle's
            grade columns (the worksheet's "Grade", the gradebook's "Assignment:
            Lab 1 (Real)"): where term/export/ writes grades.
        kind: which file: "canvas gradebook", "moodle worksheet", "moodle
            gradebook" or "csv".
        delimiter: the file's separator (export writes the same).
        columns: the header, as written.
    """

    lms: str
    students: list[Student]
    source: Path
    notes: list[str] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    kind: str = ""
    delimiter: str = ","
    columns: list[str] = field(default_factory=list)
    #: Moodle's grading worksheet: student_id -> (its "Last modified
    #: (submission)" as written, the line); only students who submitted.
    submitted: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Moodle's grading worksheet: student_id -> (its "Status" as written,
    #: the line): "Submitted for grading", "Draft (not submitted)", "... -
    #: Extension granted until: Wednesday, 7 October 2026, 11:59 PM".
    statuses: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Moodle's grading worksheet with user or group overrides on the
    #: assignment (or relative dates): student_id -> (its "Due date", its
    #: "Cut-off date" as written, "" when not set; the line). Only when the
    #: header has those columns (``date_columns``).
    dates: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    #: The worksheet has the "Due date" column (gradingtable.php ``$hasoverrides``).
    date_columns: bool = False

    def __len__(self) -> int:
        return len(self.students)

    def __iter__(self) -> Iterator[Student]:
        return iter(self.students)

    def by_id(self, student_id: str) -> Student | None:
        """The student whose ``student_id`` this is (exactly), None when nobody's."""
        found = self._index["exact"].get(student_id)
        return found[0] if found else None

    @functools.cached_property
    def _index(self) -> dict[str, dict[str, list[Student]]]:
        """The students by every key ``resolve`` compares, made once: a class of
        thousands is matched in one pass, not a scan of the roster per file."""
        index: dict[str, dict[str, list[Student]]] = {
            name: defaultdict(list) for name in ("exact", "id", "participant", "student_id",
                                                 "other", "sid", "email", "name")}
        for s in self.students:
            index["exact"][s.student_id].append(s)
            for key in ("id", "participant"):
                if s.lms_ids.get(key, ""):
                    index[key][s.lms_ids[key]].append(s)
            index["student_id"][_id_key(s.student_id)].append(s)
            for key in _other_keys(s):
                index["other"][key].append(s)
            for key in {_id_key(s.student_id), _id_key(s.lms_ids.get("sis_user_id", "")),
                        _id_key(s.lms_ids.get("id_number", ""))} - {""}:
                index["sid"][key].append(s)
            if s.email.strip():
                index["email"][s.email.strip().casefold()].append(s)
            index["name"][_name_key(s.name)].append(s)
        return index

    def match(self, identity: Identity) -> Student | None:
        """The enrolled student a submission is, None when nobody or not one for sure."""
        return self.resolve(identity)[0]

    def match_reason(self, identity: Identity) -> str:
        """Why ``match`` gives what it gives ("matches nobody", "matches 2 students: a, b")."""
        return self.resolve(identity)[1]

    def resolve(self, identity: Identity) -> tuple[Student | None, str]:
        """(the student or None, why), by ``identity.source``:

        - canvas: the roster's Canvas user id (``lms_ids["id"]``) equals
          ``user_id``; a roster without Canvas ids compares the name as for
          a folder.
        - moodle: the participant id (``lms_ids["participant"]``, from the
          worksheet) equals ``user_id``; a roster without participant ids
          (the gradebook export) compares the full name, case- and
          accent-insensitively, and takes it only when one student has it.
        - gradescope: the submitter's sid (``user_id``) against student_id,
          sis_user_id and id_number, else the email against the email.
        - folder, file: the name against student_id first, then against
          sis_login_id, username, id_number, the email and its local part
          (sanitized, case-insensitive).

        Raises:
            ValueError: ``identity.source`` is none of IDENTITY_SOURCES.
        """
        source = identity.source
        if source == "canvas":
            if any(s.lms_ids.get("id") for s in self.students):
                return _one(self._exact("id", identity.user_id), f"Canvas user id {identity.user_id!r}")
            student, why = self._by_name(identity.name)
            return student, why + " (the roster has no Canvas user ids)"
        if source == "moodle":
            if any(s.lms_ids.get("participant") for s in self.students):
                return _one(self._exact("participant", identity.user_id),
                            f"Moodle participant {identity.user_id!r}")
            found = self._index["name"].get(_name_key(identity.name), [])
            student, why = _one(found if _name_key(identity.name) else [],
                                f"the full name {identity.name!r}")
            return student, why + (" (the roster has no Moodle participant ids, so names are "
                                   "compared; a name two students share matches neither)")
        if source == "gradescope":
            return self._gradescope(identity)
        if source in ("folder", "file"):
            return self._by_name(identity.name)
        raise ValueError(f"Identity source {source!r} is unknown: expected one of "
                         f"{', '.join(IDENTITY_SOURCES)}. Build the Identity with one of them.")

    def _exact(self, key: str, value: str) -> list[Student]:
        value = value.strip()
        return list(self._index[key].get(value, [])) if value else []

    def _gradescope(self, identity: Identity) -> tuple[Student | None, str]:
        sid = _id_key(identity.user_id)
        if sid:
            found = self._index["sid"].get(sid, [])
            if found or not identity.email.strip():
                return _one(found, f"Gradescope sid {identity.user_id!r}")
        email = identity.email.strip().casefold()
        found = self._index["email"].get(email, []) if email else []
        what = f"Gradescope email {identity.email!r}" + (f" (the sid {identity.user_id!r} matches "
                                                          f"nobody)" if sid else "")
        return _one(found, what) if email else (None, "the Gradescope submission has no sid "
                                                      "and no email: matches nobody")

    def _by_name(self, name: str) -> tuple[Student | None, str]:
        key = _id_key(name)
        what = f"the name {name!r}"
        if not key:
            return None, f"{what} matches nobody"
        found = self._index["student_id"].get(key, [])
        if found:
            return _one(found, what)
        return _one(self._index["other"].get(key, []), what)


def _one(found: list[Student], what: str) -> tuple[Student | None, str]:
    if not found:
        return None, f"{what} matches nobody"
    if len(found) > 1:
        return None, (f"{what} matches {len(found)} students: "
                      f"{', '.join(s.student_id for s in found)}")
    return found[0], f"{what} matches {found[0].student_id}"


def _id_key(text: str) -> str:
    return sanitize_id(text or "").casefold()


def _other_keys(student: Student) -> set[str]:
    ids = student.lms_ids
    email = student.email.strip()
    keys = {_id_key(ids.get(k, "")) for k in ("sis_login_id", "username", "id_number")}
    keys |= {_id_key(email), _id_key(email.split("@")[0])}
    keys.discard("")
    return keys


def _name_key(name: str) -> str:
    """A name without accents, case or extra spaces ("José  María" -> "jose maria")."""
    text = unicodedata.normalize("NFKD", name or "")
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(text.replace("_", " ").split()).casefold()


# -- reading -------------------------------------------------------------------


def read_roster(path) -> Roster:
    """The roster in the CSV file ``path`` (Canvas, Moodle or plain; see the module).

    Raises:
        ValueError: the file cannot be read, is empty, has no header this
            recognizes, lacks a required column, or has a student without an
            id or twice; the message names the file, the line and the fix.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"{path}: the roster cannot be read ({error.strerror or error}); "
                         f"give the path of the CSV file the LMS exported.") from None
    notes: list[str] = []
    text = _decode(path, data, notes)
    if not text.strip():
        raise ValueError(f"{path}: the roster is empty. {_HOW}")
    kind, delimiter, rows = _detect(path, text)
    header = rows[0][1]
    reader = {"canvas gradebook": _canvas, "moodle worksheet": _moodle,
              "moodle gradebook": _moodle, "csv": _plain}[kind]
    found, assignments = reader(path, kind, header, rows[1:], notes)
    if not found:
        raise ValueError(f"{path}: the roster lists no students (only its header, line "
                         f"{rows[0][0]}). {_HOW}")
    students = _finish(path, kind, found, notes)
    lms = kind.split()[0]
    return Roster(lms=lms, students=students, source=path, notes=notes, assignments=assignments,
                  kind=kind, delimiter=delimiter, columns=header,
                  submitted={item.student.student_id: (item.submitted, item.line)
                             for item in found if item.submitted},
                  statuses={item.student.student_id: (item.status, item.line)
                            for item in found if item.status},
                  dates={item.student.student_id: (item.due, item.cutoff, item.line)
                         for item in found if item.due or item.cutoff},
                  date_columns=kind == "moodle worksheet"
                  and "due date" in {h.casefold() for h in header})


def _decode(path: Path, data: bytes, notes: list[str]) -> str:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: the roster starts like UTF-16 text but is not; save it "
                             f"as 'CSV UTF-8' and read it again.") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        where = data[: error.start].count(b"\n") + 1
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: line {where} is not UTF-8 text (byte "
                             f"0x{data[error.start]:02x}), nor Windows-1252; save the roster "
                             f"as 'CSV UTF-8' (Excel: Save As > CSV UTF-8) and read it again."
                             ) from None
        notes.append(f"the roster is not UTF-8 (line {where}); read as Windows-1252 (Excel's "
                     f"CSV): check the names with accents, or save it as 'CSV UTF-8'")
        return text


def _rows(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """The non-blank rows as (first line number, cleaned cells)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows, line = [], 1
    for record in reader:
        cells = [clean_text(cell, keep_lines=False).strip() for cell in record]
        if any(cells):
            rows.append((line, cells))
        line = reader.line_num + 1
    return rows


def _kind(header: list[str]) -> str:
    """Which file the header is ("" when none), from its columns."""
    names = {h.casefold() for h in header}
    if "id" in names and ("student" in names or {"lastname", "firstname"} <= names) \
            and names & {"sis login id", "sis user id", "section"}:
        return "canvas gradebook"
    if "identifier" in names and names & {"full name", "status", "grade"}:
        return "moodle worksheet"
    if {"first name", "last name"} <= names or {"firstname", "lastname", "username"} <= names:
        return "moodle gradebook"
    if names & {"student_id", "name", "email"}:
        return "csv"
    return ""


def _detect(path: Path, text: str) -> tuple[str, str, list[tuple[int, list[str]]]]:
    for delimiter in DELIMITERS:
        try:
            rows = _rows(text, delimiter)
        except csv.Error as error:
            raise ValueError(f"{path}: not a CSV file ({error}). {_HOW}") from None
        kind = _kind(rows[0][1]) if rows else ""
        if kind:
            return kind, delimiter, rows
    rows = _rows(text, ",")
    if not rows:
        raise ValueError(f"{path}: the roster has only empty cells. {_HOW}")
    header = rows[0][1]
    shown = ", ".join(repr(h) for h in header[:8]) + (", ..." if len(header) > 8 else "")
    raise ValueError(
        f"{path}: line 1: the header ({shown}) is not a roster this reads: expected Canvas's "
        f"gradebook export (Student, ID, SIS User ID, SIS Login ID, Section), Moodle's grading "
        f"worksheet (Identifier, Full name, ...) or gradebook export (First name, Last name, "
        f"...), or a CSV with a student_id column (optional: name, email, section). Moodle "
        f"exports in another language need the English column names. {_HOW}")


def _cell(header: list[str], cells: list[str], *names: str) -> str:
    """The first non-empty cell of the columns ``names`` (case-insensitive)."""
    lower = [h.casefold() for h in header]
    for name in names:
        if name in lower:
            index = lower.index(name)
            if index < len(cells) and cells[index]:
                return cells[index]
    return ""


@dataclass
class _Found:
    """A student row before its id is made unique."""

    line: int
    raw_id: str
    fallback: str
    student: Student
    submitted: str = ""
    status: str = ""
    due: str = ""
    cutoff: str = ""


def _canvas(path, kind, header, rows, notes):
    assignments = [h for h in header if _CANVAS_ASSIGNMENT.match(h)]
    found = []
    for line, cells in rows:
        uid = _cell(header, cells, "id")
        sortable = re.sub(r'^="(.*)"$', r"\1", _cell(header, cells, "student"))
        last, given = _cell(header, cells, "lastname"), _cell(header, cells, "firstname")
        if sortable or not (last or given):
            last, comma, given = sortable.partition(", ")
            if not comma or "," in given:
                last, given = sortable, ""
        else:
            sortable = ", ".join(x for x in (last, given) if x)
        name = " ".join(x for x in (given, last) if x)
        if sortable.casefold() == "points possible" and not uid:
            continue  # Canvas's points row; a student so named has a Canvas ID
        if not sortable and not uid:
            if not all(c.casefold() in _CANVAS_META_CELLS or c.startswith("Manual Posting")
                       for c in cells):
                notes.append(f"line {line}: a row without a student name or ID skipped")
            continue  # the "Manual Posting" (older Canvas: "Muted") row
        if sortable.casefold() == _CANVAS_TEST_STUDENT:
            notes.append(f"line {line}: Canvas's test student ('Student, Test', Student View) "
                         f"skipped")
            continue
        if not uid:
            raise ValueError(f"{path}: line {line}: the student {sortable!r} has no Canvas ID "
                             f"(column 'ID'); export the gradebook again, or delete the row.")
        ids = {"id": uid, "sis_user_id": _cell(header, cells, "sis user id"),
               "sis_login_id": _cell(header, cells, "sis login id"),
               "integration_id": _cell(header, cells, "integration id")}
        ids = {k: v for k, v in ids.items() if v}
        # Canvas's bulk download names a file by the sortable name, lower case, letters only.
        download = re.sub(r"[^a-z0-9]", "", sanitize_id(sortable).lower())
        raw = ids.get("sis_login_id") or ids.get("sis_user_id") or ""
        found.append(_Found(line, raw, f"{download}_{uid}" if download else uid,
                            Student("", name, "", _cell(header, cells, "section"), ids)))
    _unique(path, found, ("id", "sis_user_id", "sis_login_id"))
    return found, assignments


def _moodle(path, kind, header, rows, notes):
    worksheet = kind == "moodle worksheet"
    if worksheet:
        assignments = [h for h in header if h.casefold() == "grade"]
    else:
        assignments = [h for h in header if h.casefold() not in _MOODLE_USER_FIELDS]
        notes.append("Moodle's gradebook export has no participant ids: Moodle submissions "
                     "are matched by full name (only a name one student has)")
    found = []
    for line, cells in rows:
        participant = ""
        if worksheet:
            identifier = _cell(header, cells, "identifier")
            number = _PARTICIPANT.search(identifier)
            if not number:
                what = f"the Identifier {identifier!r} is not" if identifier else "no Identifier:"
                raise ValueError(f"{path}: line {line}: {what} 'Participant <number>' as Moodle "
                                 f"writes it; download the grading worksheet again, or delete "
                                 f"the row.")
            participant = number.group(1)
            name = _cell(header, cells, "full name")
        else:
            name = " ".join(x for x in (_cell(header, cells, "first name", "firstname"),
                                        _cell(header, cells, "last name", "lastname")) if x)
        email = _cell(header, cells, "email address", "email")
        ids = {"participant": participant,
               "id_number": _cell(header, cells, "id number", "idnumber"),
               "username": _cell(header, cells, "username")}
        ids = {k: v for k, v in ids.items() if v}
        raw = ids.get("id_number") or ids.get("username") or email.split("@")[0]
        fallback = f"{name or 'Participant'}_{participant}" if participant else name
        if not raw and not fallback:
            raise ValueError(f"{path}: line {line}: the row has no name, ID number, username "
                             f"or email to identify the student; fill one in or delete the row.")
        submitted = _cell(header, cells, "last modified (submission)") if worksheet else ""
        # With overrides, gradingtable.php adds "Allow submissions from", "Due
        # date", "Cut-off date" after Status: each row's own dates, userdate()
        # or '' when not set (col_duedate, col_cutoffdate).
        due = _cell(header, cells, "due date") if worksheet else ""
        cutoff = _cell(header, cells, "cut-off date") if worksheet else ""
        found.append(_Found(line, raw, fallback, Student("", name, email, "", ids),
                            _date_cell(submitted), _cell(header, cells, "status")
                            if worksheet else "", _date_cell(due), _date_cell(cutoff)))
    _unique(path, found, ("participant", "id_number", "username"))
    return found, assignments


def _date_cell(text: str) -> str:
    """A worksheet's date as written, "" for none ('-' or empty)."""
    return "" if text.strip() in ("", "-") else text


def _plain(path, kind, header, rows, notes):
    lower = [h.casefold() for h in header]
    if "student_id" not in lower:
        raise ValueError(f"{path}: line 1: the roster has no 'student_id' column (its columns: "
                         f"{', '.join(header)}); add one, or rename the column of ids to "
                         f"student_id.")
    extras = [h for h in lower if h not in {"student_id", "name", "email", "section"} and h]
    found = []
    for line, cells in rows:
        raw = _cell(header, cells, "student_id")
        if not sanitize_id(raw):
            what = f"the student_id {raw!r} has no letter or digit" if raw else "no student_id"
            raise ValueError(f"{path}: line {line}: {what}; give every student an id "
                             f"([A-Za-z0-9_.-]), or delete the row.")
        ids = {h: _cell(header, cells, h) for h in extras}
        ids = {k: v for k, v in ids.items() if v}
        ids["student_id"] = raw
        found.append(_Found(line, raw, "", Student("", _cell(header, cells, "name"),
                                                   _cell(header, cells, "email"),
                                                   _cell(header, cells, "section"), ids)))
    _unique(path, found, ("student_id",))
    for item in found:
        del item.student.lms_ids["student_id"]
    return found, []


def _unique(path: Path, found: list[_Found], keys: tuple[str, ...]) -> None:
    """Raise on two rows with the same id in one of ``keys``, naming both lines."""
    for key in keys:
        seen: dict[str, int] = {}
        for item in found:
            value = item.student.lms_ids.get(key, "")
            if value and value.casefold() in seen:
                raise ValueError(f"{path}: lines {seen[value.casefold()]} and {item.line} have "
                                 f"the same {key} {value!r}: each student must be listed once; "
                                 f"delete one of the rows or correct its id.")
            seen.setdefault(value.casefold(), item.line)


def _finish(path: Path, kind: str, found: list[_Found], notes: list[str]) -> list[Student]:
    ids = unique_ids([(item.raw_id, item.fallback, f"{item.line:09d}") for item in found])
    for item, student_id in zip(found, ids):
        item.student.student_id = student_id
        wanted = sanitize_id(item.raw_id) or sanitize_id(item.fallback)
        if wanted != student_id:
            notes.append(f"line {item.line}: the id {wanted!r} is another student's too; this "
                         f"student is {student_id!r}")
        elif kind == "csv" and student_id != item.raw_id:
            notes.append(f"line {item.line}: the student_id {item.raw_id!r} is used as "
                         f"{student_id!r} (ids keep only A-Z, a-z, 0-9, _ . -)")
    return [item.student for item in found]
