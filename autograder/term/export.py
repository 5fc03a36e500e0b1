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

``to="moodle"`` (``moodle_route="worksheet"``, the default)
    the assignment's own offline grading worksheet, the one ``grade`` read
    as its roster (``class.json``'s ``roster_file``), written back under its
    name with every cell as downloaded but ``Grade`` and ``Feedback
    comments`` (mod/assign/feedback/offline: "Upload grading worksheet"
    finds the row by ``Identifier``, "Participant <id>", and skips one whose
    ``Last modified (grade)`` is older than Moodle's grade unless told
    otherwise); the same separator, and a BOM when the download had one.
    Unlike a gradebook import, which Moodle keeps as a locked override of
    the assignment's grade, this is the assignment's own grading. And
    ``feedback.zip`` as below.

``to="moodle"``, ``moodle_route="gradebook"``
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

Who applies the late policy is said once (``late_notes``, printed first
and in ``README.txt`` beside the files): with ``late="kit"`` the scores are
after the kit's penalty and, when it took one, the instructor is told to
turn Canvas's automatic late deduction off (else Canvas takes it again);
with ``late="lms"`` they are the scores before it (``raw_score``) and the
LMS's policy decides (Moodle's assignments have none). Canvas's Student
cell never holds text its importer reads as the points row (a student
named "Points Possible" is written "Student <user id>"; Canvas finds
students by ID), and the default assignment column is the roster's "Name
(id)" column of the lab (``canvas_assignment``).

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
    "moodle-worksheet": [
        "the grading worksheet: the assignment > View all submissions > Grading action (in "
        "Moodle 4: the actions menu) > Upload grading worksheet; leave \"Allow updating "
        "records that have been modified more recently in Moodle than in the spreadsheet\" "
        "off unless you mean to replace grades changed in Moodle since the download, then "
        "Confirm. The feedback comments need the assignment's \"Feedback comments\" setting "
        "on.",
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
        notes: what the instructor must read before importing (who applies
            the late policy, a column Canvas will create, names written
            otherwise); printed first and kept in README.txt beside the files.
    """

    to: str
    dest: Path
    files: dict[str, Path] = field(default_factory=dict)
    grades: int = 0
    feedback: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------
# Who applies the late policy
# --------------------------------------------------------------------------

#: Where Canvas's automatic late deduction is turned off (Canvas Guides, "How
#: do I use the Late Policies in the Gradebook?": Gradebook > Settings (the
#: gear) > Late Policies > "Automatically apply deduction to late submissions").
CANVAS_LATE_POLICY = ("Canvas: Grades > the Gradebook's Settings (gear icon) > Late Policies > "
                      "\"Automatically apply deduction to late submissions\"")


def late_notes(to: str, late: str, info: dict) -> list[str]:
    """Who applies the late policy, said once: the kit (scores after its penalty)
    or the LMS (scores before it); never both without a word."""
    penalised, policy = int(info.get("late_penalised") or 0), info.get("late_policy") or ""
    taken = (f"The kit took a late penalty from {penalised} student(s) ({policy.rstrip('.')})"
             if penalised else "")
    if late == "lms":
        if to == "canvas":
            return ["Scores are exported BEFORE the kit's late penalty (raw_score): Canvas's own "
                    f"late policy decides ({CANVAS_LATE_POLICY}); it applies to the submissions "
                    "Canvas marks late when the grades are imported."]
        if to == "moodle":
            return ["Scores are exported BEFORE the kit's late penalty (raw_score): Moodle's "
                    "assignments take no late deduction of their own, so these scores carry "
                    "no late penalty at all."]
        return ["score is exported before the kit's late penalty (as raw_score)."]
    if to == "canvas":
        if penalised:
            return [f"{taken}: the scores exported have it. Turn Canvas's automatic late "
                    f"deduction OFF for this course before importing ({CANVAS_LATE_POLICY}), "
                    "or Canvas takes it a second time; or export with --late lms to leave the "
                    "late policy to Canvas."]
        if policy:
            return ["The kit took no late penalty (no submission time it knows is late): if "
                    f"Canvas's late policy is on ({CANVAS_LATE_POLICY}), Canvas applies it on "
                    "import to the submissions it marks late."]
        return []
    if to == "moodle" and penalised:
        return [f"{taken}: the scores exported have it. Moodle's assignments take no late "
                "deduction of their own, so it is taken once."]
    return []


def _write_readme(exported: Exported) -> None:
    lines = ["What `python -m autograder export` wrote here, and what to read first.", ""]
    lines += [f"READ FIRST: {note}" for note in exported.notes] + ([""] if exported.notes else [])
    lines += ["Upload:"] + [f"- {step}" for step in exported.steps]
    if exported.skipped:
        lines += ["", "Feedback not in the export:"]
        lines += [f"- {student}: {why}" for student, why in exported.skipped]
    path = exported.dest / "README.txt"
    path.write_text(clean_text("\n".join(lines)) + "\n", encoding="utf-8")
    exported.files["README.txt"] = path


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


#: What Canvas's importer reads in a row's first cell as not a student
#: (app/models/gradebook_importer.rb: a first cell matching /Points Possible/
#: is the points row); matched here in any case and spacing, to be safe.
CANVAS_HEADER_CELL = re.compile(r"points\s*possible", re.IGNORECASE)


def _canvas_student_cell(row: ClassRow, user_id: str, exported: Exported) -> str:
    """The Student cell of a row: the name, unless Canvas would read it as its
    points row; then "Student <user id>" (Canvas finds the student by ID)."""
    name = _csv_text(row.student.name)
    if CANVAS_HEADER_CELL.search(name) or not name.strip():
        exported.notes.append(
            f"{row.student.student_id}'s name ({row.student.name!r}) is written \"Student "
            f"{user_id}\" in the Student column: Canvas's importer would read "
            f"{'that name' if name.strip() else 'an empty cell'} as not a student; Canvas finds "
            f"the student by the ID column.")
        return f"Student {user_id}"
    return name


def canvas_assignment(info: dict, lab_id: str) -> tuple[str, str]:
    """The default assignment column for Canvas: the roster's "Name (id)" column
    of this lab, and a note ("" when it is sure).

    Raises:
        ValueError: the roster has several assignment columns and not exactly
            one is this lab's, naming them.
    """
    columns = [c for c in info.get("roster_assignments") or []
               if re.fullmatch(r".+ \(\d+\)", c)]
    title = info.get("lab_title") or lab_id
    if not columns:
        return title, (f"The roster has no assignment column (\"Name (id)\"): the grades go "
                       f"into a column named {title!r}, which Canvas imports as a NEW "
                       f"assignment. Give --assignment \"Name (id)\" of the assignment in "
                       f"Canvas to fill it instead.")
    number = re.search(r"\d+", lab_id)
    mine = [c for c in columns if number and re.search(
        rf"\blab\s*0*{number.group(0)}\b", c.rsplit(" (", 1)[0], re.IGNORECASE)]
    if len(mine) == 1:
        return mine[0], ""
    if len(columns) == 1 and not mine:
        return columns[0], (f"The roster's only assignment column is {columns[0]!r}: the "
                            f"grades of {lab_id} go there (give --assignment to choose another).")
    raise ValueError(
        f"The roster's assignment columns are {', '.join(repr(c) for c in columns)}; "
        f"{'several' if mine else 'none'} of them name{'' if mine else 's'} {lab_id}. "
        f"Give --assignment with the one for {lab_id} (\"Name (id)\", as in the roster).")


def _canvas(out_dir: Path, rows: list[ClassRow], assignment: str, dest: Path,
            exported: Exported, value) -> None:
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
        table.append([_canvas_student_cell(row, user_id, exported), _csv_text(user_id),
                      _csv_text(ids.get("sis_user_id", "")), _csv_text(ids.get("sis_login_id", "")),
                      _csv_text(row.student.section), _score(row, value(row))])
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
            exported: Exported, moodle_key: str, value) -> None:
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
    table = [[_csv_text(row.student.name), _csv_text(_moodle_key(row, moodle_key)),
              _score(row, value(row)), _csv_text(feedback_text(row))] for row in rows]
    members = _moodle_pages(out_dir, rows, exported)
    header = ["Full name", column, _csv_text(assignment), _csv_text(f"{assignment} (Feedback)")]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    _moodle_feedback(members, dest, exported, len(rows))


def _moodle_feedback(members, dest: Path, exported: Exported, grades: int) -> None:
    exported.files["feedback.zip"] = _zip(dest / "feedback.zip", members)
    exported.grades, exported.feedback = grades, len(members)


def _moodle_pages(out_dir: Path, rows: list[ClassRow], exported: Exported) -> list:
    members, used = [], set()
    for row in rows:
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
    return members


#: The grading worksheet's columns the kit fills in (mod/assign/gradingtable.php
#: writes them; mod/assign/feedback/offline reads them back on "Upload grading
#: worksheet": the row by "Identifier", the grade by "Grade", the comment by
#: "Feedback comments"; a row whose "Last modified (grade)" is older than the
#: grade in Moodle is skipped unless the upload's "Allow updating records that
#: have been modified more recently in Moodle than in the spreadsheet" is on).
WORKSHEET_GRADE, WORKSHEET_FEEDBACK, WORKSHEET_ID = "Grade", "Feedback comments", "Identifier"


def _moodle_worksheet(out_dir: Path, rows: list[ClassRow], info: dict, dest: Path,
                      exported: Exported, value) -> None:
    """The grading worksheet the roster was, Grade and Feedback comments filled in."""
    import io

    from autograder.term.roster import read_roster

    source = Path(info.get("roster_file") or "")
    if info.get("roster_kind") != "moodle worksheet" or not source.is_file():
        why = ("the class was graded without Moodle's grading worksheet as its roster"
               if info.get("roster_kind") != "moodle worksheet"
               else f"the worksheet it was graded with ({source}) is gone")
        raise ValueError(f"Moodle's grading worksheet cannot be written back: {why}. Grade "
                         f"again with --roster the worksheet (the assignment > View all "
                         f"submissions > Download grading worksheet), or export with "
                         f"--moodle-route gradebook for the gradebook's CSV import.")
    roster = read_roster(source)
    data = source.read_bytes()
    bom = data.startswith(b"\xef\xbb\xbf")
    text = data.decode("utf-8-sig", errors="replace")
    records = list(csv.reader(io.StringIO(text, newline=""), delimiter=roster.delimiter))
    header = records[0]
    lower = [h.strip().casefold() for h in header]
    for column in (WORKSHEET_GRADE, WORKSHEET_FEEDBACK):
        if column.casefold() not in lower:
            header.append(column)
            lower.append(column.casefold())
            for record in records[1:]:
                record.append("")
    at = {name: lower.index(name.casefold())
          for name in (WORKSHEET_ID, WORKSHEET_GRADE, WORKSHEET_FEEDBACK)}
    by_participant = {str(r.student.lms_ids.get("participant", "")): r for r in rows}
    filled = 0
    for record in records[1:]:
        if len(record) <= max(at.values()):
            record.extend([""] * (max(at.values()) + 1 - len(record)))
        number = re.search(r"(\d+)\s*$", record[at[WORKSHEET_ID]])
        row = by_participant.get(number.group(1)) if number else None
        if row is None:
            continue
        record[at[WORKSHEET_GRADE]] = _score(row, value(row))
        record[at[WORKSHEET_FEEDBACK]] = _csv_text(feedback_text(row))
        filled += 1
    path = dest / source.name
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        csv.writer(handle, delimiter=roster.delimiter).writerows(records)
    exported.files[source.name] = path
    missing = len(rows) - filled
    if missing:
        exported.notes.append(f"{missing} student(s) of the class have no row in the worksheet "
                              f"{source.name}: download it again and grade with it.")
    _moodle_feedback(_moodle_pages(out_dir, rows, exported), dest, exported, filled)


# --------------------------------------------------------------------------
# Plain CSV
# --------------------------------------------------------------------------

CSV_COLUMNS = ["student_id", "name", "email", "section", "lab", "score", "raw_score",
               "max_score", "late", "penalty", "status", "submitted_at"]


def _plain(out_dir: Path, rows: list[ClassRow], dest: Path, exported: Exported,
           value) -> None:
    table, used = [], set()
    for row in rows:
        s = row.student
        table.append([_csv_text(s.student_id), _csv_text(s.name), _csv_text(s.email),
                      _csv_text(s.section), _csv_text(row.lab), _score(row, value(row)),
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
           moodle_key: str = "email", lab: str | None = None, late: str = "kit",
           moodle_route: str = "worksheet") -> Exported:
    """Write a graded lab's grades and feedback in the files ``to`` imports.

    Args:
        out_dir: the ``--out`` folder of ``grade`` (holds class.json).
        to: "canvas", "moodle" or "csv".
        dest: where to write (default ``OUT/export/<to>/``; created).
        assignment: the grade column's header. For Canvas, "Name (id)"
            matches an existing assignment exactly; the default is the
            roster's column of this lab (``canvas_assignment``), else the
            lab's title (a new assignment, with a note). For Moodle's
            gradebook route, the default is the lab's title.
        moodle_key: "email" or "id_number": how Moodle's gradebook import
            finds each student.
        lab: when given, OUT's class.json must be this lab's.
        late: "kit": the scores after the kit's late penalty, with a note
            telling where to turn the LMS's own deduction off when the kit
            took one; "lms": the scores before it (raw_score), the LMS's
            policy deciding (``late_notes``).
        moodle_route: "worksheet": the assignment's grading worksheet (the
            roster ``grade`` read) with Grade and Feedback comments filled
            in; "gradebook": the gradebook's CSV import.

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
    if late not in ("kit", "lms"):
        raise ValueError(f"Unknown --late {late!r}: give kit (scores after the kit's late "
                         f"penalty) or lms (scores before it; the LMS's policy decides).")
    if moodle_route not in ("worksheet", "gradebook"):
        raise ValueError(f"Unknown --moodle-route {moodle_route!r}: give worksheet or "
                         f"gradebook.")
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
    notes = late_notes(to, late, info)
    if assignment is None and to == "canvas":
        assignment, note = canvas_assignment(info, info["lab"])
        notes += [note] if note else []
    assignment = (assignment or info["lab_title"] or info["lab"]).strip()
    dest = Path(dest) if dest is not None else out_dir / "export" / to
    dest.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r.student.student_id)
    route = "moodle-worksheet" if to == "moodle" and moodle_route == "worksheet" else to
    steps = [step.format(key=MOODLE_KEYS[moodle_key]) for step in UPLOAD_STEPS[route]]
    exported = Exported(to=to, dest=dest, steps=steps, notes=notes)

    def value(row: ClassRow) -> float:
        return row.score if late == "kit" else row.raw_score

    if to == "canvas":
        _canvas(out_dir, rows, assignment, dest, exported, value)
    elif route == "moodle-worksheet":
        _moodle_worksheet(out_dir, rows, info, dest, exported, value)
    elif to == "moodle":
        _moodle(out_dir, rows, assignment, dest, exported, moodle_key, value)
    else:
        _plain(out_dir, rows, dest, exported, value)
    _write_readme(exported)
    return exported
