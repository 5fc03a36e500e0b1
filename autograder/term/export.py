"""Grades and feedback of a graded lab in the files Canvas and Moodle import.

``export(out_dir, to)`` reads OUT/class.json (the final rows of the last
report, see model.py) and the feedback pages it names, and writes into
``dest`` (default ``OUT/export/<to>/``):

``to="canvas"``
    ``grades.csv`` for the Gradebook's "Import" (Grades > Import): the
    columns ``Student, ID, SIS User ID, SIS Login ID, Section`` and one
    assignment column headed ``assignment`` (default: the lab's title), then
    a ``Points Possible`` row and one row per student. What this relies on
    is Canvas's importer itself (instructure/canvas-lms,
    app/models/gradebook_importer.rb): the header must start with a column
    containing "Student" and one containing "ID", and the last student
    column must be "Section" ("SIS User ID" then "SIS Login ID" may sit
    between them); a row whose first cell contains "Points Possible" is read
    as the assignments' points, not as a student; a student is found by the
    ID column (Canvas's user id), then by SIS ids, then by name; an
    assignment column is matched by "Name (id)", then by its exact name, and
    a header that matches none creates a new assignment (with the Points
    Possible row's points; scores are in the lab's points, so an existing
    assignment should have the lab's points in Canvas too). A blank or ``-``
    cell means "no score" (it removes a score already there), so every row
    gets a number: a student without a submission gets 0. Canvas cannot
    import a row without its user id: a class graded without a Canvas roster
    is refused (grade it again with ``--roster`` the gradebook's export).

    ``feedback.zip`` for the assignment's "Re-Upload Submissions" (the
    counterpart of "Download Submissions"): Canvas attaches each file to
    the submission as a comment. Canvas reads a file name by its
    underscore-separated parts: the first two that are only digits are the
    user id and the id of a file the student submitted
    (``Assignment#infer_comment_context_from_filename``), and it ignores a
    file whose submitted file it cannot find. The pages are therefore named
    ``<name>_<user id>_<file id>_feedback.html`` as in Canvas's download
    (``doejane_12345_6789_feedback.html``); the file id comes from the
    submission's Canvas download name (``Identity.submission_id``). A student
    whose file did not come from a Canvas download (or who resubmitted since)
    has no file id to name: their page is listed in ``skipped`` and stays in
    OUT/feedback/.

``to="moodle"``
    ``grades.csv`` for the gradebook's "Import > CSV file": ``Full name``,
    the key (``Email address`` with ``moodle_key="email"``, ``ID number``
    with ``"id_number"``), a grade column headed ``assignment`` and a
    feedback column headed ``<assignment> (Feedback)`` (the header Moodle's
    own grade export gives a feedback column). On import, "Identify user
    by" maps the key column to "Email address" (useremail) or "ID number"
    (useridnumber) and the two columns to the grade item and its feedback
    (moodle/moodle, grade/import/csv/classes/load_data.php: a blank or
    ``-`` grade is "no grade", and one row whose user is not found stops
    the whole import, so a row without the key is refused here). The
    feedback text is plain text: the score, the late penalty and one line
    per exercise.

    ``feedback.zip`` for the assignment's "Upload multiple feedback files in
    a zip": one folder per participant, named as Moodle names them in its
    "Download all submissions", ``<Full name>_<participant id>_
    assignsubmission_file_``, holding ``feedback.html``. Moodle splits a
    folder name on ``_`` and takes the second part as the participant id
    (mod/assign/feedback/file/importziplib.php), so underscores in a name
    become spaces, as in Moodle's download. The participant id is the
    roster's ``lms_ids["participant"]``, else the Moodle download's
    (``Identity.user_id``); students without one are listed in ``skipped``.

``to="csv"``
    ``grades.csv`` with ``student_id, name, email, section, lab, score,
    raw_score, max_score, late, penalty, status, submitted_at`` (``late`` in
    hours with two decimals, "" when on time) and ``feedback/<student_id>.zip``,
    one zip per student holding their ``feedback.html``.

In every file, scores are written like reports.format_score (``7``,
``7.5``), every text cell passes through reports._csv_text (no spreadsheet
formula, no control character), a student with status "no submission" gets
0 and no feedback file, and a feedback page that is missing (or names a
path outside OUT) is listed in ``skipped`` instead.
"""

from __future__ import annotations

import csv
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grader.reports import (_csv_text, _safe_filename, _unique_name, clean_text,
                                       format_score)
from autograder.term.model import ClassRow, read_class

__all__ = ["Exported", "export", "feedback_text", "MOODLE_KEYS", "UPLOAD_STEPS"]

#: moodle_key -> the grades.csv column that identifies a student.
MOODLE_KEYS = {"email": "Email address", "id_number": "ID number"}

#: Where each file goes in the LMS, for the instructor (printed by the CLI).
UPLOAD_STEPS = {
    "canvas": [
        "grades.csv: Course > Grades > Import (or Actions > Import), choose the file, check "
        "the preview and Upload Data.",
        "feedback.zip: Course > Assignments > the assignment > Re-Upload Submissions (next "
        "to Download Submissions), choose the zip; each page becomes a comment on the "
        "student's submission.",
    ],
    "moodle": [
        "grades.csv: Course > Grades > Import > CSV file; on the next page set \"Identify "
        "user by\" Map from the key column to {key}, map the grade column to the "
        "assignment's grade item and the (Feedback) column to its feedback.",
        "feedback.zip: the assignment > View all submissions > Grading action (or Actions) "
        "> Upload multiple feedback files in a zip (needs the assignment's \"Feedback "
        "files\" setting on).",
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


@dataclass
class Exported:
    """What `export` wrote.

    Attributes:
        to: "canvas", "moodle" or "csv".
        dest: the folder the files are in.
        files: each file written, by its path relative to ``dest``
            ("grades.csv", "feedback.zip", "feedback/<student_id>.zip").
        grades: rows (students) in grades.csv.
        feedback: feedback pages packed.
        skipped: (student_id, why) for each student whose feedback page is
            not in the export.
        steps: where to upload each file in the LMS.
    """

    to: str
    dest: Path
    files: dict[str, Path] = field(default_factory=dict)
    grades: int = 0
    feedback: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------


def _score(row: ClassRow, value: float) -> str:
    """A score cell: 0 for a student who submitted nothing."""
    return "0" if row.status == NO_SUBMISSION else format_score(value)


def _late_hours(row: ClassRow) -> str:
    return f"{row.late_seconds / 3600:.2f}" if row.late_seconds and row.late_seconds > 0 else ""


def _who(row: ClassRow) -> str:
    name = clean_text(row.student.name, keep_lines=False).strip()
    return f"{row.student.student_id} ({name})" if name else row.student.student_id


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


def feedback_text(row: ClassRow) -> str:
    """The feedback comment of a row, as plain text (Moodle's feedback column).

    >>> r = ClassRow(student=None, lab="lab1", score=6, raw_score=7, max_score=10,
    ...              status="graded", late_seconds=7200, penalty=1,
    ...              exercises=[{"exercise": "ex1", "score": 2, "max_score": 2, "message": ""}])
    >>> print(feedback_text(r))
    Score: 6/10
    Late penalty: 1 (submitted 2.00 hours late)
    ex1: 2/2
    """
    if row.status == NO_SUBMISSION:
        return f"No submission: 0/{format_score(row.max_score)}"
    lines = [f"Score: {format_score(row.score)}/{format_score(row.max_score)}"]
    if row.status != "graded":
        lines.append(f"Status: {row.status}")
    if row.penalty:
        late = _late_hours(row)
        lines.append(f"Late penalty: {format_score(row.penalty)}"
                     + (f" (submitted {late} hours late)" if late else ""))
    for x in row.exercises:
        line = f"{x.get('exercise', '')}: {format_score(x.get('score'))}/" \
               f"{format_score(x.get('max_score'))}"
        message = (str(x.get("message") or "").strip().splitlines() or [""])[0]
        if message:
            line += " - " + (message if len(message) <= MESSAGE_WIDTH
                             else message[: MESSAGE_WIDTH - 3] + "...")
        lines.append(line)
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Canvas
# --------------------------------------------------------------------------

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def _canvas_name(row: ClassRow) -> str:
    """The name part of a Canvas download's file name ("doejane"), never only digits."""
    identity = row.identity
    source = identity.name if identity is not None and identity.source == "canvas" else ""
    name = _ascii_letters(source or row.student.name)
    return name if name and not name.isdigit() else "student"


def _canvas(out_dir: Path, rows: list[ClassRow], assignment: str, dest: Path,
            exported: Exported) -> None:
    _refuse_missing([r for r in rows if not str(r.student.lms_ids.get("id", "")).strip()],
                    "Canvas user id (ID)",
                    "Grade the lab with a Canvas roster (--roster the gradebook's export, "
                    "Grades > Export) so that every student has one.")
    _refuse_duplicates(rows, lambda r: str(r.student.lms_ids["id"]).strip(), "Canvas user id")
    max_score = max(r.max_score for r in rows)
    table = [["Points Possible", "", "", "", "", format_score(max_score)]]
    members: list[tuple[str, Path]] = []
    for row in rows:
        ids = row.student.lms_ids
        user_id = str(ids["id"]).strip()
        table.append([_csv_text(row.student.name), _csv_text(user_id),
                      _csv_text(ids.get("sis_user_id", "")), _csv_text(ids.get("sis_login_id", "")),
                      _csv_text(row.student.section), _score(row, row.score)])
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        identity = row.identity
        file_id = identity.submission_id if identity is not None and identity.source == "canvas" \
            else ""
        if not file_id.isdigit():
            exported.skipped.append((row.student.student_id,
                                     "no Canvas submission file id (the file did not come from "
                                     "Canvas's Download Submissions): upload its page by hand"))
            continue
        members.append((f"{_canvas_name(row)}_{user_id}_{file_id}_feedback.html", page))
    header = CANVAS_COLUMNS + [_csv_text(assignment)]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    exported.files["feedback.zip"] = _zip(dest / "feedback.zip", members)
    exported.grades, exported.feedback = len(rows), len(members)


# --------------------------------------------------------------------------
# Moodle
# --------------------------------------------------------------------------


def _moodle_key(row: ClassRow, moodle_key: str) -> str:
    if moodle_key == "email":
        return (row.student.email or "").strip()
    return str(row.student.lms_ids.get("id_number", "")).strip()


def _participant(row: ClassRow) -> tuple[str, str]:
    """(full name, participant id) of a row as Moodle's download names them."""
    identity = row.identity if row.identity is not None and row.identity.source == "moodle" \
        else None
    participant = str(row.student.lms_ids.get("participant", "")).strip()
    if not participant and identity is not None:
        participant = identity.user_id.strip()
    name = (identity.name if identity is not None and identity.name else row.student.name)
    # Moodle splits the folder name on "_" and reads the participant id second.
    name = re.sub(r"\s+", " ", re.sub(r"[_/\\:*?\"<>|]", " ",
                                      clean_text(name, keep_lines=False))).strip()
    return name or "Participant", participant


def _moodle(out_dir: Path, rows: list[ClassRow], assignment: str, dest: Path,
            exported: Exported, moodle_key: str) -> None:
    column = MOODLE_KEYS[moodle_key]
    _refuse_missing([r for r in rows if not _moodle_key(r, moodle_key)], column.lower(),
                    f"Moodle finds each student by their {column.lower()}: grade the lab with a "
                    f"Moodle roster that has it (--roster), or export with --moodle-key "
                    f"{'id_number' if moodle_key == 'email' else 'email'}.")
    mangled = [r for r in rows
               if _csv_text(_moodle_key(r, moodle_key)) != _moodle_key(r, moodle_key)]
    if mangled:
        raise ValueError(
            f"The {column.lower()} of {', '.join(_who(r) for r in mangled)} starts with a "
            f"character a spreadsheet runs as a formula (= + - @) or holds a control character: "
            f"written safely it would no longer match in Moodle. Export with --moodle-key "
            f"{'id_number' if moodle_key == 'email' else 'email'}, or correct it in the roster.")
    _refuse_duplicates(rows, lambda r: _moodle_key(r, moodle_key).lower(), column.lower())
    table, members, used = [], [], set()
    for row in rows:
        table.append([_csv_text(row.student.name), _csv_text(_moodle_key(row, moodle_key)),
                      _score(row, row.score), _csv_text(feedback_text(row))])
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        name, participant = _participant(row)
        if not participant.isdigit():
            exported.skipped.append((row.student.student_id,
                                     "no Moodle participant id (roster or Moodle download): "
                                     "upload its page by hand"))
            continue
        folder = _unique_name(f"{name}_{participant}_assignsubmission_file_", used)
        members.append((f"{folder}/{FEEDBACK_NAME}", page))
    header = ["Full name", column, _csv_text(assignment), _csv_text(f"{assignment} (Feedback)")]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    exported.files["feedback.zip"] = _zip(dest / "feedback.zip", members)
    exported.grades, exported.feedback = len(rows), len(members)


# --------------------------------------------------------------------------
# Plain CSV
# --------------------------------------------------------------------------

CSV_COLUMNS = ["student_id", "name", "email", "section", "lab", "score", "raw_score",
               "max_score", "late", "penalty", "status", "submitted_at"]


def _plain(out_dir: Path, rows: list[ClassRow], dest: Path, exported: Exported) -> None:
    table, used = [], set()
    for row in rows:
        s = row.student
        table.append([_csv_text(s.student_id), _csv_text(s.name), _csv_text(s.email),
                      _csv_text(s.section), _csv_text(row.lab), _score(row, row.score),
                      _score(row, row.raw_score), format_score(row.max_score), _late_hours(row),
                      format_score(row.penalty), _csv_text(row.status),
                      _csv_text(row.submitted_at)])
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        relative = f"feedback/{_unique_name(_safe_filename(s.student_id), used)}.zip"
        exported.files[relative] = _zip(dest / relative, [(FEEDBACK_NAME, page)])
        exported.feedback += 1
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", CSV_COLUMNS, table)
    exported.grades = len(rows)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def export(out_dir: Path, to: str, dest: Path | None = None, assignment: str | None = None,
           moodle_key: str = "email", lab: str | None = None) -> Exported:
    """Write a graded lab's grades and feedback in the files ``to`` imports.

    Args:
        out_dir: the ``--out`` folder of ``grade`` (holds class.json).
        to: "canvas", "moodle" or "csv".
        dest: where to write (default ``OUT/export/<to>/``; created).
        assignment: the grade column's header (default: the lab's title).
            For Canvas, "Name (id)" matches an existing assignment exactly.
        moodle_key: "email" or "id_number": how Moodle finds each student.
        lab: when given, OUT's class.json must be this lab's.

    Returns:
        Exported: the files written, the counts and the feedback pages left out.

    Raises:
        ValueError: an unknown ``to`` or ``moodle_key``, OUT not graded, a
            class.json of another lab or with no rows, or students the LMS
            could not find (listed).
    """
    if to not in UPLOAD_STEPS:
        raise ValueError(f"Unknown export format {to!r}: expected one of "
                         f"{', '.join(UPLOAD_STEPS)} (--to).")
    if moodle_key not in MOODLE_KEYS:
        raise ValueError(f"Unknown Moodle key {moodle_key!r}: expected one of "
                         f"{', '.join(MOODLE_KEYS)} (--moodle-key).")
    out_dir = Path(out_dir)
    info, rows = read_class(out_dir)
    if lab is not None and info["lab"] != lab:
        raise ValueError(f"{out_dir} holds the grades of {info['lab']!r}, not {lab!r}: give "
                         f"the --out folder where {lab} was graded (or the lab {info['lab']}).")
    if not rows:
        raise ValueError(f"{out_dir}/class.json has no students: there is nothing to export. "
                         f"Grade the lab's submissions (with the roster) first.")
    if assignment is not None and not assignment.strip():
        raise ValueError("The assignment name is empty: give the LMS's assignment name "
                         "(--assignment), or leave it out to use the lab's title.")
    assignment = (assignment or info["lab_title"] or info["lab"]).strip()
    dest = Path(dest) if dest is not None else out_dir / "export" / to
    dest.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r.student.student_id)
    steps = [step.format(key=MOODLE_KEYS[moodle_key]) for step in UPLOAD_STEPS[to]]
    exported = Exported(to=to, dest=dest, steps=steps)
    if to == "canvas":
        _canvas(out_dir, rows, assignment, dest, exported)
    elif to == "moodle":
        _moodle(out_dir, rows, assignment, dest, exported, moodle_key)
    else:
        _plain(out_dir, rows, dest, exported)
    return exported
