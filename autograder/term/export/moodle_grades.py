"""Moodle's names and numbers: a student's key and participant id, the grading
worksheet's columns, and the grade as Moodle takes it (its Maximum grade,
checked or stated; the grades scaled to it).

Part of autograder.term.export; Moodle's rules: docs/lms-import.md, "Moodle".
"""

from __future__ import annotations

import decimal
import re
from pathlib import Path

from autograder.text import clean_text, format_score
from autograder.term.export.common import (MOODLE_ACTIONS, NO_SUBMISSION, Exported, _number,
                                           _score, _value)
from autograder.term.model import ClassRow


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


#: The grading worksheet's columns Moodle's upload reads, by their English
#: names (mod/assign/lang/en/assign.php 'recordid', core 'gradenoun',
#: 'lastmodifiedgrade'; the comments plugin's 'pluginname'); "Participant " is
#: 'hiddenuser', stripped from the Identifier (importgradeslib.php ``next()``).
WORKSHEET_ID, WORKSHEET_GRADE = "Identifier", "Grade"
WORKSHEET_MODIFIED, WORKSHEET_FEEDBACK = "Last modified (grade)", "Feedback comments"
WORKSHEET_REQUIRED = (WORKSHEET_ID, WORKSHEET_GRADE, WORKSHEET_MODIFIED)
_WORKSHEET_PARTICIPANT = re.compile(r"(\d+)\s*$")
_GRADE_WORKSHEET_HOW = ("grade the lab with the assignment's grading worksheet as --roster (" +
                        MOODLE_ACTIONS + " > Download grading worksheet), or give it with "
                        "--worksheet FILE")


def _max_grade_source(info: dict, worksheet: Path | None) -> Path | None:
    """The grading worksheet that says the assignment's Maximum grade: ``worksheet``,
    else the roster when it was one (None when neither is there)."""
    if worksheet is not None and Path(worksheet).is_file():
        return Path(worksheet)
    if info.get("roster_kind") == "moodle worksheet":
        source = Path(info.get("roster_file") or "")
        return source if source.is_file() else None
    return None


def _worksheet_maximum(header: list[str], records: list[list[str]]) -> str | None:
    """The worksheet's "Maximum grade" cell (the same on every row), None when absent."""
    at = next((i for i, h in enumerate(header) if h.casefold() == "maximum grade"), None)
    if at is None:
        return None
    return next((r[at].strip() for r in records if at < len(r) and r[at].strip()), None)


#: Where an assignment's Maximum grade is set in Moodle (mod/assign/mod_form.php:
#: the "Grade" section's modgrade element, 'modgrademaxgrade' "Maximum grade").
MOODLE_MAX_SETTING = "the assignment > Settings > Grade > Maximum grade"


def _check_maximum(exported: Exported, moodle_max: str | None, where: str, lab_max: float,
                   route: str) -> None:
    """Say what Moodle will make of the grades given its Maximum grade.

    ``moodle_max`` is the Maximum grade a worksheet says (None when the kit has
    no way to know it); ``exported.max_grade`` the one stated with --max-grade
    (the grades are then scaled to it). The worksheet's upload skips a grade
    above the maximum (mod/assign/feedback/offline/locallib.php
    ``process_import_grades``: "Out of range"); the gradebook's CSV import stores
    the number as is (grade/import/csv/classes/load_data.php
    ``update_grade_item``: ``unformat_float``), clamped to the item's range
    (lib/grade/grade_item.php ``update_final_grade``: ``bounded_grade``), so
    14.5 into a 100-point item is 14.5 of 100 and nothing says so.
    """
    lab = format_score(lab_max)
    known = _number(moodle_max) if moodle_max is not None else None
    stated = exported.max_grade
    thing = ("the assignment's Maximum grade" if route == "worksheet"
             else "the grade item's Maximum grade (the assignment's, for its item)")
    if stated is not None:
        if known is not None and abs(known - stated) > 1e-9:
            exported.notes.append(
                f"Maximum grade: {where} says {moodle_max}, and --max-grade says "
                f"{format_score(stated)}: the grades are written for {format_score(stated)}, "
                f"as stated. If Moodle's is still {moodle_max} ({MOODLE_MAX_SETTING}), "
                f"export again with --max-grade {format_score(known)} or change it in Moodle.")
        if abs(stated - lab_max) > 1e-9:
            exported.notes.append(
                f"Grades scaled to Moodle's Maximum grade {format_score(stated)} "
                f"(--max-grade): each is the lab's score x {format_score(stated)} / {lab}, to "
                f"two decimals; the feedback keeps the lab's points (Score: .../{lab}).")
        return
    if known is not None:
        if abs(known - lab_max) <= 1e-9:
            return
        full = f"{lab} of {lab} here is {lab} of {format_score(known)} in Moodle"
        if route == "worksheet":
            verb = (f"stores each grade as is, with no warning ({full})" if known > lab_max
                    else "skips a grade above its maximum, without a word, and does not "
                         "rescale")
        else:
            verb = (f"stores each number as is, with no warning ({full})" if known > lab_max
                    else "stores each number as is, and a grade above the maximum as the "
                         "maximum")
        if route == "worksheet":
            exported.notes.append(
                f"Moodle's Maximum grade for this assignment is {moodle_max}, and the lab has "
                f"{lab} points: Moodle {verb}. Set the assignment's Maximum grade to {lab} "
                f"before uploading, or export again with --max-grade {format_score(known)} to "
                f"write the grades scaled to {format_score(known)}.")
        else:
            exported.notes.append(
                f"Moodle's Maximum grade for this assignment's grade item is {moodle_max} "
                f"({where}), and the lab has {lab} points: the gradebook's CSV import {verb}. "
                f"Set it to {lab} before importing, or export again with --max-grade "
                f"{format_score(known)} to write the grades scaled to {format_score(known)}.")
        exported.steps.insert(0, (
            f"BEFORE {'uploading' if route == 'worksheet' else 'importing'}: set {thing} to "
            f"{lab}, the lab's points ({MOODLE_MAX_SETTING}; it is {moodle_max} now), or "
            f"export again with --max-grade {format_score(known)} to scale the grades to it."))
        return
    if route == "gradebook":
        exported.notes.append(
            f"Maximum grade: the kit cannot see the grade item's (the lab has {lab} points; "
            f"Moodle's default is 100), and the gradebook's CSV import stores each number as "
            f"is: 14.5 into a 100-point item is 14.5 of 100. Check it before importing (step "
            f"1), or give the assignment's grading worksheet with --worksheet FILE (its "
            f"Maximum grade is read), or state it with --max-grade N.")
        exported.steps.insert(0, (
            f"BEFORE importing: check that {thing} is {lab}, the lab's points "
            f"({MOODLE_MAX_SETTING}, or Course > Grades > Gradebook setup > the item > Edit "
            f"grade item). If it is not, set it to {lab}, or export again with --max-grade N "
            f"(the item's maximum) to write the grades scaled to N."))


def _scaled(value: float, lab_max: float, max_grade: float) -> float:
    """``value`` of ``lab_max`` points as a grade of ``max_grade``, to two decimals
    (half up, as a person rounds: 14.5 of 16 is 90.63 of 100)."""
    if lab_max <= 0:
        return value
    exact = decimal.Decimal(repr(value)) * decimal.Decimal(repr(max_grade)) \
        / decimal.Decimal(repr(lab_max))
    return float(exact.quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP))


def _moodle_grade(row: ClassRow, exported: Exported) -> str:
    """A Moodle grade cell: the score, scaled to --max-grade when it is not the lab's points."""
    value = _value(row, exported.late)
    if exported.max_grade is not None and row.status != NO_SUBMISSION:
        value = _scaled(value, exported.lab_max, exported.max_grade)
    return _score(row, value)
