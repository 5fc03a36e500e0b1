"""Moodle: the assignment's grading worksheet filled in (the default route), the
gradebook's CSV import (``moodle_route="gradebook"``), and feedback.zip for
"Upload multiple feedback files in a zip" (Moodle's importers:
docs/lms-import.md, "Moodle").

Part of autograder.term.export.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from pathlib import Path

from autograder.text import csv_text, unique_name
from autograder.term.export.common import (FEEDBACK_NAME, MOODLE_ACTIONS, MOODLE_KEYS, Exported,
                                           _column, _feedback_page, _holds_grade, _list,
                                           _read_table, _refuse_duplicates, _refuse_missing,
                                           _who, _write_csv, _zip)
from autograder.term.export.feedback import feedback_html, feedback_text
from autograder.term.export.held import _held_in, _replaced_note, _roster_held
from autograder.term.export.moodle_grades import (_GRADE_WORKSHEET_HOW, _WORKSHEET_PARTICIPANT,
                                                  WORKSHEET_FEEDBACK, WORKSHEET_GRADE,
                                                  WORKSHEET_ID, WORKSHEET_MODIFIED,
                                                  WORKSHEET_REQUIRED, _check_maximum,
                                                  _max_grade_source, _moodle_grade,
                                                  _moodle_key, _participant, _worksheet_maximum)
from autograder.term.export.moodle_record import _digest, _earlier_export, _record_export, \
    _second_upload
from autograder.term.model import ClassRow


def _moodle_pages(out_dir: Path, rows: list[ClassRow], exported: Exported) -> None:
    """feedback.zip: a folder per participant, as Moodle's "Download all submissions"."""
    members, used = [], set[str]()
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
        folder = unique_name(f"{name}_{participant}_assignsubmission_file_", used)
        members.append((f"{folder}/{FEEDBACK_NAME}", page))
    exported.files["feedback.zip"] = _zip(exported.dest / "feedback.zip", members)
    exported.feedback = len(members)


def _moodle_gradebook(out_dir: Path, rows: list[ClassRow], assignment: str, dest: Path,
                      exported: Exported, moodle_key: str) -> None:
    column = MOODLE_KEYS[moodle_key]
    _refuse_missing([r for r in rows if not _moodle_key(r, moodle_key)], column.lower(),
                    f"Moodle finds each student by their {column.lower()}: grade the lab with a "
                    f"Moodle roster that has it (--roster), or export with --moodle-key "
                    f"{'id_number' if moodle_key == 'email' else 'email'}.")
    mangled = [r for r in rows
               if csv_text(_moodle_key(r, moodle_key)) != _moodle_key(r, moodle_key)]
    if mangled:
        raise ValueError(
            f"The {column.lower()} of {', '.join(_who(r) for r in mangled)} starts with a "
            f"character a spreadsheet runs as a formula (= + - @) or holds a control character: "
            f"written safely it would no longer match in Moodle. Export with --moodle-key "
            f"{'id_number' if moodle_key == 'email' else 'email'}, or correct it in the roster.")
    _refuse_duplicates(rows, lambda r: _moodle_key(r, moodle_key).lower(), column.lower())
    table = [[csv_text(row.student.name), csv_text(_moodle_key(row, moodle_key)),
              _moodle_grade(row, exported),
              csv_text(feedback_text(row, exported.late))] for row in rows]
    header = ["Full name", column, csv_text(assignment), csv_text(f"{assignment} (Feedback)")]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    exported.grades = len(rows)
    _moodle_pages(out_dir, rows, exported)


def _gradebook_checks(info: dict, rows: list[ClassRow], assignment: str,
                      worksheet: Path | None, exported: Exported) -> None:
    """The gradebook route's Maximum grade and the grades it replaces: from the
    assignment's grading worksheet (``worksheet``, or the roster when it was
    one: its ``Maximum grade`` and ``Grade``), else from Moodle's gradebook
    export as roster (the item's "(Real)" column; it has no maximum)."""
    source = _max_grade_source(info, worksheet)
    if worksheet is not None and source is None:
        raise ValueError(f"The grading worksheet {worksheet} (--worksheet) is not a file: give "
                         f"the CSV that {MOODLE_ACTIONS} > Download grading worksheet wrote.")
    written = {id(row): _moodle_grade(row, exported) for row in rows}
    if source is None:
        _check_maximum(exported, None, "", exported.lab_max, "gradebook")
        held, where = _roster_held(info, rows, assignment, exported)
        _replaced_note(rows, held, written, where, exported)
        return
    try:
        header, records = _read_table(source)
    except (OSError, ValueError) as error:
        raise ValueError(f"{source}: the grading worksheet cannot be read ({error}); download "
                         f"it again ({MOODLE_ACTIONS} > Download grading worksheet) and give "
                         f"it with --worksheet.") from None
    if _column(header, WORKSHEET_ID) is None:
        raise ValueError(f"{source} is not Moodle's grading worksheet (no Identifier column): "
                         f"{_GRADE_WORKSHEET_HOW}.")
    _check_maximum(exported, _worksheet_maximum(header, records),
                   f"the grading worksheet {source.name}", exported.lab_max, "gradebook")
    held = _held_in(source, "moodle worksheet", rows)
    _replaced_note(rows, held, written, f"Moodle (the grading worksheet {source.name}, as "
                                        f"downloaded)", exported)


def _worksheet_source(info: dict, worksheet: Path | None) -> Path:
    if worksheet is not None:
        source = Path(worksheet)
        if not source.is_file():
            raise ValueError(f"The grading worksheet {source} (--worksheet) is not a file: give "
                             f"the CSV that {MOODLE_ACTIONS} > Download grading worksheet wrote.")
        return source
    if info.get("roster_kind") != "moodle worksheet":
        graded = (f"the roster was {info['roster_kind']!r} ({info.get('roster_file')})"
                  if info.get("roster_kind") else "the lab was graded without a roster")
        raise ValueError(
            f"Moodle's route is the assignment's grading worksheet, filled in, and {graded}: "
            f"{_GRADE_WORKSHEET_HOW}. Or export with --moodle-route gradebook for the "
            f"gradebook's CSV import (its grades become overrides in the gradebook).")
    source = Path(info.get("roster_file") or "")
    if not source.is_file():
        raise ValueError(f"The grading worksheet the lab was graded with ({source}) is not there "
                         f"any more: give it with --worksheet FILE (the same file, or one "
                         f"downloaded again).")
    return source


def _moodle_worksheet(out_dir: Path, rows: list[ClassRow], info: dict, dest: Path,
                      exported: Exported, worksheet: Path | None) -> None:
    """The assignment's grading worksheet, as downloaded, with Grade and Feedback
    comments filled in for each student of the class (docs/lms-import.md, "Moodle")."""
    from autograder.term.roster import _decode, read_roster

    source = _worksheet_source(info, worksheet)
    roster = read_roster(source)
    if roster.kind != "moodle worksheet":
        raise ValueError(f"{source} is not Moodle's grading worksheet (it reads as a "
                         f"{roster.kind!r}): {_GRADE_WORKSHEET_HOW}.")
    participants = {id(row): _participant(row)[1] for row in rows}
    _refuse_missing([r for r in rows if not participants[id(r)].isdigit()],
                    "Moodle participant id",
                    f"Moodle's worksheet finds a student by \"Participant <id>\": "
                    f"{_GRADE_WORKSHEET_HOW}.")
    _refuse_duplicates(rows, lambda r: participants[id(r)], "Moodle participant id")
    data = source.read_bytes()
    decoding: list[str] = []
    text = _decode(source, data, decoding)
    exported.notes += [f"{source.name}: {note}" for note in decoding]
    records = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=roster.delimiter)
               if any(cell.strip() for cell in r)]
    header = records[0]
    missing = [name for name in WORKSHEET_REQUIRED if name not in header]
    if missing:
        raise ValueError(
            f"{source}: the worksheet has no {' or '.join(repr(m) for m in missing)} column, "
            f"named exactly so: Moodle's upload finds Identifier, Grade and Last modified "
            f"(grade) by name and refuses a file without them (mod/assign/feedback/offline/"
            f"importgradeslib.php). Download the grading worksheet again (in English) and "
            f"give it with --worksheet.")
    at = {name: header.index(name) for name in WORKSHEET_REQUIRED}
    feedback_at = header.index(WORKSHEET_FEEDBACK) if WORKSHEET_FEEDBACK in header else None
    by_participant = {participants[id(row)]: row for row in rows}
    filled: dict[str, ClassRow] = {}
    held: dict[int, tuple[str, str]] = {}
    written: dict[int, str] = {}
    comments: dict[str, str] = {}
    others = 0
    for line, record in enumerate(records[1:], 2):
        if len(record) > len(header):
            raise ValueError(f"{source}: row {line} has {len(record)} cells and the header "
                             f"{len(header)}; Moodle refuses such a file. Download the grading "
                             f"worksheet again.")
        record.extend([""] * (len(header) - len(record)))
        number = _WORKSHEET_PARTICIPANT.search(record[at[WORKSHEET_ID]])
        row = by_participant.get(number.group(1)) if number else None
        if row is None:
            others += 1
            continue
        filled[participants[id(row)]] = row
        if _holds_grade(record[at[WORKSHEET_GRADE]]):
            held[id(row)] = (record[at[WORKSHEET_GRADE]], record[at[WORKSHEET_MODIFIED]])
        record[at[WORKSHEET_GRADE]] = written[id(row)] = _moodle_grade(row, exported)
        if feedback_at is not None:
            record[feedback_at] = csv_text(feedback_html(row, exported.late))
            comments[participants[id(row)]] = _digest(record[feedback_at].encode())[:16]
    absent = [row for row in rows if participants[id(row)] not in filled]
    if absent:
        raise ValueError(
            f"{len(absent)} student(s) of the class are not in the worksheet {source.name}: "
            f"{_list(absent)}. It is another assignment's, or older than their enrolment: "
            f"download the grading worksheet again and give it with --worksheet.")
    for record in records:
        record[:] = [re.sub(r"\r\n?", "\n", cell) for cell in record]
    path = dest / source.name
    bom = data.startswith(b"\xef\xbb\xbf")
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(records)
    exported.files[source.name] = path
    exported.grades = len(filled)
    exported.steps = [step.replace("{worksheet}", source.name) for step in exported.steps]
    _worksheet_notes(source, roster.delimiter, header, records, rows, feedback_at, others,
                     exported)
    # Moodle never sets a 0 from the worksheet (see the notes): those rows replace nothing.
    _replaced_note(rows, held, {k: v for k, v in written.items() if v != "0"},
                   f"Moodle (the grading worksheet {source.name}, as downloaded)", exported)
    digest = _digest(data)
    grades = {participants[id(row)]: written[id(row)] for row in rows}
    earlier = _earlier_export(out_dir, digest)
    if earlier is not None:
        _second_upload(source, earlier, rows, participants, grades, comments, exported)
    _record_export(out_dir, {
        "worksheet": source.name, "source": str(source), "source_sha256": digest,
        "written": str(path), "written_sha256": _digest(path.read_bytes()),
        "exported_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "late": exported.late, "grades": grades, "feedback": comments})


def _worksheet_notes(source: Path, delimiter: str, header: list[str], records: list[list[str]],
                     rows: list[ClassRow], feedback_at: int | None, others: int,
                     exported: Exported) -> None:
    """What Moodle will not do with the worksheet as written, said before the upload."""
    zeros = [r for r in rows if _moodle_grade(r, exported) == "0"]
    if zeros:
        exported.notes.append(
            f"{len(zeros)} student(s) have the grade 0 in the worksheet: {_list(zeros)}. "
            f"Moodle's worksheet upload never sets a grade of 0 (mod/assign/feedback/offline/"
            f"locallib.php process_import_grades sets a grade only when it is not zero); their "
            f"feedback is uploaded. Enter those zeros in Moodle (the grader, or quick grading).")
    if feedback_at is None:
        exported.notes.append(
            f"{source.name} has no \"Feedback comments\" column (the assignment's feedback "
            f"comments are off): only the grades go into Moodle this way; the feedback pages "
            f"go with feedback.zip. Turn \"Feedback comments\" on and download the worksheet "
            f"again to have the comments too.")
    _check_maximum(exported, _worksheet_maximum(header, records[1:]), source.name,
                   exported.lab_max, "worksheet")
    if others:
        exported.notes.append(
            f"{others} row(s) of {source.name} are participants this class does not have "
            f"(graded without them); they are left as downloaded, and Moodle changes nothing "
            f"for a row whose Grade is empty or unchanged.")
    if delimiter != ",":
        exported.notes.append(f"{source.name} was {delimiter!r}-separated; it is written with "
                              f"commas, as Moodle downloads it and its upload reads by default.")
