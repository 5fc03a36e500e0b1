"""Canvas: the Gradebook import's grades.csv and the Re-Upload Submissions'
feedback.zip (Canvas's importer: docs/lms-import.md, "Canvas").

Part of autograder.term.export.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from autograder.text import csv_text, format_score
from autograder.term.export.common import (Exported, _ascii_letters, _feedback_page,
                                           _refuse_duplicates, _refuse_missing, _score, _value,
                                           _who, _write_csv, _zip)
from autograder.term.model import ClassRow


CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
#: A first cell Canvas's importer reads as its points row (gradebook_importer.rb
#: ``check_for_non_student_row``: ``row[0]&.include?("Points Possible")``),
#: matched here in any case and spacing, to be safe.
CANVAS_POINTS_CELL = re.compile(r"points\s*possible", re.IGNORECASE)
#: Canvas's assignment column as its gradebook export writes it (title_with_id).
CANVAS_ASSIGNMENT = re.compile(r"^.+ \((\d+)\)$")


def _canvas_name(row: ClassRow) -> str:
    """The name part of a Canvas download's file name ("doejane"), never only digits."""
    identity = row.identity
    source = identity.name if identity is not None and identity.source == "canvas" else ""
    name = _ascii_letters(source or row.student.name)
    return name if name and not name.isdigit() else "student"


def _canvas_student_cell(row: ClassRow, user_id: str, exported: Exported) -> str:
    """The Student cell of a row: the name, unless Canvas would read that row as
    its points row (or the name is empty); then "Student <user id>", which
    Canvas never reads, finding the student by the ID column."""
    name = csv_text(row.student.name)
    if name.strip() and not CANVAS_POINTS_CELL.search(name):
        return name
    cell = f"Student {user_id}"
    why = ("Canvas's importer takes a row whose first cell holds \"Points Possible\" as its "
           "points row" if name.strip() else "the name is empty")
    exported.notes.append(f"The Student cell of {_who(row)} is written {cell!r}: {why}; "
                          f"Canvas finds the student by the ID column ({user_id}).")
    return cell


def _lab_key(text: str) -> str:
    """Lower-case words of ``text`` ("Lab 1: Attention" -> "lab 1 attention")."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return " ".join(re.sub(r"[^a-z0-9]+", " ", plain.lower()).split())


def _names_lab(column: str, lab_id: str, lab_title: str) -> bool:
    """Whether a "Name (id)" column is this lab's: its name is the lab's title (or
    the title's part before ":"), or says "Lab <n>" with the lab's number."""
    name = _lab_key(column.rsplit(" (", 1)[0])
    titles = {_lab_key(lab_title), _lab_key(lab_title.split(":")[0]), _lab_key(lab_id)} - {""}
    number = re.search(r"(\d+)$", lab_id)
    return name in titles or bool(number and re.search(
        rf"\blab\s*0*{int(number.group(1))}\b", name))


def canvas_assignment(info: dict, lab_id: str) -> tuple[str, str]:
    """The default assignment column for Canvas, and a note for the instructor.

    The roster's (class.json's ``roster_assignments``) "Name (id)" column of
    this lab when exactly one is (by the lab's number or title: "Lab 1
    (4321)" for lab1 "Lab 1: Attention"); the lab's title when the roster
    has no assignment column at all (Canvas then creates an assignment).

    Raises:
        ValueError: the roster has assignment columns and none, or several,
            are this lab's; the message lists them.
    """
    title = (info.get("lab_title") or lab_id).strip()
    columns = [c for c in info.get("roster_assignments") or [] if CANVAS_ASSIGNMENT.match(c)]
    if not columns:
        roster = ("the roster has no" if info.get("roster_lms") == "canvas"
                  else "the class was not graded with Canvas's gradebook export, so it has no")
        return title, (f"Assignment column: {title!r}, the lab's title: {roster} assignment "
                       f"column (\"Name (id)\"), and Canvas's import creates a NEW assignment "
                       f"{title!r}. To fill the assignment you made in Canvas, export with "
                       f"--assignment \"Name (id)\" as the gradebook's export heads its column.")
    mine = [c for c in columns if _names_lab(c, lab_id, title)]
    if len(mine) == 1:
        return mine[0], (f"Assignment column: {mine[0]!r}, the roster's column of {lab_id} "
                         f"(--assignment to choose another).")
    listed = ", ".join(repr(c) for c in columns)
    raise ValueError(
        f"The roster's assignment columns are {listed}: "
        f"{'several' if mine else 'none'} of them {'name' if mine else 'names'} {lab_id} "
        f"({title!r}). Give the assignment's column with --assignment \"Name (id)\", "
        f"e.g. --assignment {columns[0]!r}.")


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
        table.append([_canvas_student_cell(row, user_id, exported), csv_text(user_id),
                      csv_text(ids.get("sis_user_id", "")), csv_text(ids.get("sis_login_id", "")),
                      csv_text(row.student.section), _score(row, _value(row, exported.late))])
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
    header = CANVAS_COLUMNS + [csv_text(assignment)]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    exported.files["feedback.zip"] = _zip(dest / "feedback.zip", members)
    exported.grades, exported.feedback = len(rows), len(members)
