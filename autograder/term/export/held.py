"""What the LMS holds already: the grades an export replaces, as the file the kit
has (the roster, the grading worksheet) says them, listed under "Read first".

Part of autograder.term.export; see docs/lms-import.md, "Grades the LMS holds
already".
"""

from __future__ import annotations

import re
from pathlib import Path

from autograder.text import clean_text
from autograder.term.export.canvas import _names_lab
from autograder.term.export.common import (Exported, _column, _differs, _holds_grade,
                                           _read_table, _who)
from autograder.term.export.moodle_grades import (_WORKSHEET_PARTICIPANT, WORKSHEET_GRADE,
                                                  WORKSHEET_ID, WORKSHEET_MODIFIED,
                                                  _participant)
from autograder.term.model import ClassRow


#: A grade item's column in Moodle's gradebook export (grade/export/lib.php
#: ``format_column_name``: the module's name, ``labelsep`` ": ", the item's name,
#: then " (Real)", " (Percentage)" or " (Letter)" by display type).
_MOODLE_ITEM_COLUMN = re.compile(r"^(?:[^:]+: )?(?P<name>.+) \((?P<kind>Real)\)$")


def _moodle_item_column(header: list[str], assignment: str, lab: str,
                        title: str) -> int | None:
    """The "(Real)" column of Moodle's gradebook export that is this lab's grade
    item: named ``assignment`` exactly, else the one naming the lab."""
    items = [(i, m.group("name")) for i, h in enumerate(header)
             if (m := _MOODLE_ITEM_COLUMN.match(h))]
    exact = [i for i, name in items if name.strip() == assignment.strip()]
    if len(exact) == 1:
        return exact[0]
    mine = [i for i, name in items if _names_lab(f"{name} (0)", lab, title)]
    return mine[0] if len(mine) == 1 else None


def _held_in(path: Path, kind: str, rows: list[ClassRow], column: str | None = None,
             lab: str = "", title: str = "") -> dict[int, tuple[str, str]]:
    """What an LMS file says each row's grade is: id(row) -> (grade cell, Moodle's
    "Last modified (grade)" or ""), for the rows it lists with a grade.

    ``kind`` is the roster kind: "canvas gradebook" (the student by the ID
    column, the grade in ``column``, the assignment's "Name (id)"), "moodle
    worksheet" (by "Participant N", the ``Grade`` column) or "moodle gradebook"
    (by email, ID number or username; the grade item's "(Real)" column named
    ``column`` or naming the lab).
    """
    header, records = _read_table(path)
    at: int | None
    if kind == "canvas gradebook":
        at = _column(header, column or "")
        key_at = _column(header, "ID")

        def keys(row: ClassRow) -> list[str]:
            return [str(row.student.lms_ids.get("id", "")).strip()]
    elif kind == "moodle worksheet":
        at, key_at = _column(header, WORKSHEET_GRADE), _column(header, WORKSHEET_ID)

        def keys(row: ClassRow) -> list[str]:
            return [f"Participant {_participant(row)[1]}"]
    elif kind == "moodle gradebook":
        at = _moodle_item_column(header, column or title, lab, title)
        found = [_column(header, name) for name in ("Email address", "ID number", "Username")]
        key_at = None
        if at is None:
            return {}
        by: dict[str, tuple[str, str]] = {}
        for record in records:
            for index in found:
                if index is not None and index < len(record) and record[index] and \
                        at < len(record):
                    by.setdefault(record[index].casefold(), (record[at], ""))
        held = {}
        for row in rows:
            for key in (row.student.email, row.student.lms_ids.get("id_number", ""),
                        row.student.lms_ids.get("username", "")):
                if key and key.casefold() in by and _holds_grade(by[key.casefold()][0]):
                    held[id(row)] = by[key.casefold()]
                    break
        return held
    else:
        return {}
    if at is None or key_at is None:
        return {}
    modified_at = _column(header, WORKSHEET_MODIFIED)
    by = {}
    for record in records:
        if max(at, key_at) < len(record):
            when = record[modified_at] if modified_at is not None and \
                modified_at < len(record) else ""
            key = record[key_at]
            if kind == "moodle worksheet":
                number = _WORKSHEET_PARTICIPANT.search(key)
                key = f"Participant {number.group(1)}" if number else key
            by.setdefault(key, (record[at], when))
    held = {}
    for row in rows:
        for key in keys(row):
            if key in by and _holds_grade(by[key][0]):
                held[id(row)] = by[key]
    return held


def _roster_held(info: dict, rows: list[ClassRow], column: str | None,
                 exported: Exported) -> tuple[dict[int, tuple[str, str]], str]:
    """The grades the roster ``grade`` read holds for this lab, and where they are
    ("" and nothing when the roster has no column of the lab, or is gone)."""
    kind, source = info.get("roster_kind") or "", Path(info.get("roster_file") or "")
    if kind not in ("canvas gradebook", "moodle worksheet", "moodle gradebook"):
        return {}, ""
    if not source.is_file():
        exported.notes.append(
            f"The roster the lab was graded with ({source}) is not there any more, so the "
            f"export cannot say which grades already in the LMS it replaces: check the "
            f"LMS's column for grades a TA entered before importing.")
        return {}, ""
    try:
        held = _held_in(source, kind, rows, column, info.get("lab", ""),
                        info.get("lab_title") or "")
    except (OSError, ValueError) as error:
        exported.notes.append(f"The roster {source} cannot be read again ({error}), so the "
                              f"export cannot say which grades already in the LMS it replaces.")
        return {}, ""
    where = {"canvas gradebook": f"Canvas (the roster {source.name}, column {column!r}, as "
                                 f"exported: grades entered since are not in it)",
             "moodle worksheet": f"Moodle (the grading worksheet {source.name}, as downloaded)",
             "moodle gradebook": f"Moodle's gradebook (the roster {source.name}, as "
                                 f"exported)"}[kind]
    return held, where


def _replaced_note(rows: list[ClassRow], held: dict[int, tuple[str, str]],
                   written: dict[int, str], where: str, exported: Exported,
                   what: str = "this export replaces", most: int = 10) -> None:
    """List, under "Read first", each student whose grade in the LMS the export
    replaces with another one (``Exported.replaced`` keeps them all)."""
    replaced = [(row, held[id(row)], written[id(row)]) for row in rows
                if id(row) in held and id(row) in written
                and _differs(held[id(row)][0], written[id(row)])]
    if not replaced:
        return
    exported.replaced = [(row.student.student_id, old, new) for row, (old, _), new in replaced]

    def item(row: ClassRow, old: str, when: str, new: str) -> str:
        since = f" (Last modified (grade): {when})" if when.strip() not in ("", "-") else ""
        return f"{_who(row)}: {clean_text(old, keep_lines=False)}{since} -> {new}"

    shown = "; ".join(item(row, old, when, new) for row, (old, when), new in replaced[:most])
    more = f"; and {len(replaced) - most} more" if len(replaced) > most else ""
    exported.notes.append(
        f"{len(replaced)} student(s) already have another grade in {where}, which {what} "
        f"(the LMS's grade -> the export's): {shown}{more}. A TA may have "
        f"entered them: check each before importing. Where the LMS's grade should stay, "
        f"write it into the file's cell (a blank cell removes a grade in Canvas), or put the "
        f"TA's scores in OUT/overrides.csv and grade again (--only the student).")
