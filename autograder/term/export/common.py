"""The grade table every export writes from: what ``export`` takes and writes
(its formats, modes and routes, where each file goes), ``Exported``, and the
helpers every format shares (score cells, who a row is, the feedback page, CSV,
zip, the LMS's grade cells and tables read back).

Part of autograder.term.export; the importers' rules are in docs/lms-import.md.
"""

from __future__ import annotations

import csv
import io
import math
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

from autograder.text import clean_text, format_score
from autograder.term.model import ClassRow, Student


#: What ``export`` writes (``--to``).
EXPORT_FORMATS = ("canvas", "moodle", "csv")
#: Who takes the late penalty (``--late``): the kit's score, or the raw score.
LATE_MODES = ("kit", "lms")
#: Moodle's routes (``--moodle-route``): the assignment's grading worksheet, or
#: the gradebook's CSV import.
MOODLE_ROUTES = ("worksheet", "gradebook")
#: moodle_key -> the grades.csv column that identifies a student.
MOODLE_KEYS = {"email": "Email address", "id_number": "ID number"}

#: Where the assignment's grading actions are in Moodle: "Submissions" and its
#: Actions menu in current releases (mod/assign/feedback/offline/tests/behat/
#: upload_worksheet.feature: 'I navigate to "Submissions"', 'I choose the
#: "Upload grading worksheet" item in the "Actions" action menu'), "View all
#: submissions" and its "Grading action" menu in older ones.
MOODLE_ACTIONS = ("the assignment > Submissions (older Moodle: View all submissions) > "
                  "Actions (older: the Grading action menu)")

#: Where each file goes in the LMS, for the instructor (printed by the CLI),
#: by route: "moodle" is the grading worksheet, "moodle gradebook" the CSV import.
UPLOAD_STEPS = {
    "canvas": [
        "grades.csv: Course > Grades > Import (or Actions > Import), choose the file, check "
        "the preview (the assignment column must be the existing assignment, not a new one) "
        "and Upload Data.",
        "feedback.zip: Course > Assignments > the assignment > Re-Upload Submissions (next "
        "to Download Submissions), choose the zip; each page becomes a comment on the "
        "student's submission.",
    ],
    "moodle": [
        "{worksheet}: " + MOODLE_ACTIONS + " > Upload grading worksheet; choose the file. "
        "Leave \"Allow updating records that have been modified more recently in Moodle "
        "than in the spreadsheet\" unticked: Moodle then keeps any grade changed in Moodle "
        "after the worksheet was downloaded, by its \"Last modified (grade)\" cell, and "
        "skips that row without a word (its preview lists only the changes it will make); "
        "tick it only to overwrite those too. Check the \"Set grade for ...\" lines (a "
        "student missing from them is skipped) and Confirm.",
        "feedback.zip: " + MOODLE_ACTIONS + " > Upload multiple feedback files in a zip "
        "(needs the assignment's \"Feedback files\" setting on).",
    ],
    "moodle gradebook": [
        "grades.csv: Course > Grades > Import > CSV file; on the next page set \"Identify "
        "user by\" Map from the key column to {key}, map the grade column to the "
        "assignment's grade item and the (Feedback) column to its feedback. Each grade "
        "becomes an override in the gradebook: grades given later in the assignment do not "
        "reach the gradebook until the override is removed.",
        "feedback.zip: " + MOODLE_ACTIONS + " > Upload multiple feedback files in a zip "
        "(needs the assignment's \"Feedback files\" setting on).",
    ],
    "csv": [
        "grades.csv: one row per student, for a spreadsheet or another system.",
        "feedback/<student_id>.zip: one zip per student, their feedback page inside.",
    ],
}

NO_SUBMISSION = "no submission"
#: The feedback page's name inside the zips (Moodle and csv).
FEEDBACK_NAME = "feedback.html"
#: An exercise message's longest line in Moodle's feedback text.
MESSAGE_WIDTH = 200
#: The instructor's notes beside the exported files.
README = "README.txt"


@dataclass
class Exported:
    """What `export` wrote.

    Attributes:
        to: "canvas", "moodle" or "csv".
        dest: the folder the files are in.
        files: each file written, by its path relative to ``dest``
            ("grades.csv", "feedback.zip", "feedback/<student_id>.zip", the
            worksheet's name, "README.txt").
        grades: rows (students) given a grade.
        feedback: feedback pages packed.
        skipped: (student_id, why) for each student whose feedback page is
            not in the export.
        steps: what to do in the LMS, in order (a step before the import
            when the LMS's own late deduction must be turned off, then where
            each file goes).
        notes: what the instructor must read before importing (who takes
            the late penalty, the assignment column, names written
            otherwise, grades the LMS will not set); the CLI prints them
            first, and README.txt beside the files keeps them with the steps.
        late: "kit" or "lms" (``export``'s ``late``).
        replaced: (student_id, the LMS's grade, the export's) for each student
            whose grade in the LMS (as the roster or worksheet says it) the
            export replaces with another; the notes list the first 10.
        max_grade: Moodle's Maximum grade as stated (``export``'s
            ``max_grade``; None: the lab's points, unscaled).
        lab_max: the lab's points.
    """

    to: str
    dest: Path
    files: dict[str, Path] = field(default_factory=dict)
    grades: int = 0
    feedback: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    late: str = "kit"
    replaced: list[tuple[str, str, str]] = field(default_factory=list)
    max_grade: float | None = None
    lab_max: float = 0.0


def _score(row: ClassRow, value: float) -> str:
    """A score cell: 0 for a student who submitted nothing."""
    return "0" if row.status == NO_SUBMISSION else format_score(value)


def _value(row: ClassRow, late: str) -> float:
    """The score exported: after the kit's late penalty ("kit") or before it ("lms")."""
    return row.score if late == "kit" else row.raw_score


def _late_hours(row: ClassRow) -> str:
    return f"{row.late_seconds / 3600:.2f}" if row.late_seconds and row.late_seconds > 0 else ""


class _OfStudent(Protocol):
    """A row of one student: a lab's (ClassRow) or the whole term's (TermRow)."""

    @property
    def student(self) -> Student: ...


def _who(row: _OfStudent) -> str:
    """A student in a message: "id (name)"."""
    name = clean_text(row.student.name, keep_lines=False).strip()
    return f"{row.student.student_id} ({name})" if name else row.student.student_id


def _list(rows: Sequence[_OfStudent], most: int = 10) -> str:
    """The first ``most`` students of ``rows`` in a message, and how many more."""
    shown = ", ".join(_who(r) for r in rows[:most])
    return shown + (f" and {len(rows) - most} more" if len(rows) > most else "")


def _refuse_missing(rows: list[ClassRow], what: str, how: str) -> None:
    if rows:
        raise ValueError(f"{len(rows)} student(s) have no {what}, so the LMS cannot import "
                         f"their rows: {', '.join(_who(r) for r in rows)}. {how}")


def _refuse_duplicates(rows: list[ClassRow], key, what: str) -> None:
    seen: dict[str, ClassRow] = {}
    for row in rows:
        value = key(row)
        if value in seen:
            raise ValueError(f"{_who(seen[value])} and {_who(row)} have the same {what} "
                             f"{value!r}: the LMS would give both grades to one person. Fix the "
                             f"roster so that each student's {what} is their own, and grade again.")
        seen[value] = row


def _feedback_page(out_dir: Path, row: ClassRow, exported: Exported) -> Path | None:
    """The row's feedback page, or None (with the reason in ``skipped``) when it has none."""
    if row.status == NO_SUBMISSION:
        return None
    sid = row.student.student_id
    if not row.feedback:
        exported.skipped.append((sid, f"no feedback page (status: {row.status})"))
        return None
    root = out_dir.resolve()
    page = (root / row.feedback).resolve()
    if not page.is_relative_to(root):
        exported.skipped.append((sid, f"its feedback page {row.feedback!r} is outside {out_dir}"))
        return None
    if not page.is_file():
        exported.skipped.append((sid, f"its feedback page {row.feedback} is missing; grade "
                                      f"again to rewrite it"))
        return None
    return page


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _zip(path: Path, members: list[tuple[str, Path]]) -> Path:
    """Write ``members`` (name in the zip, file) into a new zip at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, source in members:
            archive.write(source, name)
    return path


def _ascii_letters(text: str) -> str:
    """Lower-case ASCII letters and digits of ``text`` (accents dropped)."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]", "", plain.lower())


def _number(cell: str) -> float | None:
    """A grade cell as a number ("9.00", "9,5", "7"), None when it is none."""
    text = cell.strip().replace("\u00a0", "").replace(" ", "")
    if text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")  # Moodle's format_float in a decimal-comma locale
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _holds_grade(cell: str) -> bool:
    """Whether an LMS's grade cell holds a grade: not blank, not "-" (no grade in
    Canvas's and Moodle's exports, and in their importers)."""
    return cell.strip() not in ("", "-")


def _differs(held: str, written: str) -> bool:
    """Whether writing ``written`` over the LMS's ``held`` changes the grade."""
    old, new = _number(held), _number(written)
    if old is not None and new is not None:
        return abs(old - new) > 0.005  # both LMSs keep two decimals
    return held.strip().casefold() != written.strip().casefold()  # "EX", a letter


def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a roster file as the LMS wrote it, cells stripped.

    Raises:
        ValueError: the file is not a roster read_roster reads.
    """
    from autograder.term.roster import _decode, read_roster

    roster = read_roster(path)
    text = _decode(path, path.read_bytes(), [])
    records = [[clean_text(cell, keep_lines=False).strip() for cell in record]
               for record in csv.reader(io.StringIO(text, newline=""),
                                        delimiter=roster.delimiter)]
    records = [r for r in records if any(r)]
    return records[0], records[1:]


def _column(header: list[str], name: str) -> int | None:
    lower = [h.casefold() for h in header]
    return lower.index(name.casefold()) if name.casefold() in lower else None
