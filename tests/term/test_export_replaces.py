"""Issue 46: what an export replaces in the LMS, Moodle's Maximum grade, and a
worksheet uploaded twice.

The LMSs' files are written by data/sample_term/shapes.py (Canvas's gradebook
export, Moodle's grading worksheet, each as the LMS's code writes it); what the
importers then do is re-implemented from their source below, each rule citing
where it comes from (moodle/moodle mod/assign/feedback/offline/locallib.php
``process_import_grades`` and importgradesform.php; grade/import/csv/classes/
load_data.php with lib/grade/grade_item.php ``update_final_grade``). No
notebook is graded: the classes are made-up class.json rows.
"""

from __future__ import annotations

import csv
import datetime
import importlib.util
import json
from pathlib import Path

import pytest

from autograder.cli import main
from autograder.term import export as export_module
from autograder.term.export import export
from autograder.term.model import Identity, Student, write_class
from tests.term.test_term_export import (_out, _read, _row, canvas_import, canvas_rows,
                                    moodle_rows, moodle_worksheet_upload)

TERM = Path(__file__).resolve().parents[2] / "data" / "sample_term"
_spec = importlib.util.spec_from_file_location("sample_term_shapes_46", TERM / "shapes.py")
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

UTC = datetime.timezone.utc
ZONE = "UTC"
SHEET = "Grades-CS101-Lab 1-77.csv"


def _at(*args) -> datetime.datetime:
    return datetime.datetime(*args, tzinfo=UTC)


# --------------------------------------------------------------------------
# Moodle's importers, from their source
# --------------------------------------------------------------------------


def _strtotime(cell: str) -> int:
    """PHP ``strtotime`` of a worksheet's "Last modified (grade)": userdate's
    '%A, %d %B %Y, %I:%M %p' (the same zone here); "-" is not a time: false, 0."""
    if cell.strip() in ("", "-"):
        return 0
    when = datetime.datetime.strptime(cell, "%A, %d %B %Y, %I:%M %p").replace(tzinfo=UTC)
    return int(when.timestamp())


def moodle_upload(path, state: dict, now: datetime.datetime, max_grade: float,
                  ignoremodified: bool = False) -> list[str]:
    """Moodle's "Upload grading worksheet", preview and confirm, on ``state``
    (participant -> {"grade", "timemodified", "comment"}: Moodle's grade record).

    public/mod/assign/feedback/offline/importgradesform.php (the preview) and
    locallib.php ``process_import_grades`` (the same rules):
        $stalemodificationdate = ($usergrade && $usergrade->timemodified > ($modified + 60));
        skip: grade not modified / no value / (!$ignoremodified && $stale) / out of range
        $grademodified = ($record->grade && ...)        # 0 is never set
        if ($ignoremodified || !$stalemodificationdate) { ...feedback: if ($newvalue != $oldvalue)
            get_user_grade(create), set_editor_text, update_grade (the gradebook's
            comments plugin): the record's timemodified is now }
    The preview lists only 'gradeupdate' "Set grade for {student} to {grade}" and
    'feedbackupdate' lines; the list is returned ("No modified grades found in
    uploaded worksheet", 'nochanges', when empty)."""
    stamp = int(now.timestamp())
    preview = []
    for participant, (sets, comment, modified) in moodle_worksheet_upload(path,
                                                                           max_grade).items():
        record = state.get(participant)
        stale = record is not None and record["timemodified"] > _strtotime(modified) + 60
        if sets is not None and not (record and record["grade"] == sets) \
                and (ignoremodified or not stale):
            preview.append(f"Set grade for {participant} to {sets:.2f}")
            record = state.setdefault(participant, {"grade": None, "comment": ""})
            record.update(grade=sets, timemodified=stamp)
        if (ignoremodified or not stale) and comment is not None \
                and comment != (record or {}).get("comment", ""):
            preview.append(f'Set field "Feedback comments" for "{participant}"')
            record = state.setdefault(participant, {"grade": None, "comment": ""})
            record.update(comment=comment, timemodified=stamp)
    return preview


def moodle_gradebook_import(path, key: str, column: str, grademax: float) -> dict:
    """Moodle's gradebook "Import > CSV file" with ``key`` mapped to the user and
    ``column`` to the grade item: grade/import/csv/classes/load_data.php
    ``update_grade_item`` (trimmed; '' or '-' is no grade, else
    ``unformat_float``; no check against the item's maximum), then
    lib/grade/grade_item.php ``update_final_grade``: ``bounded_grade`` (kept
    within grademin 0 .. grademax). key -> the grade stored."""
    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    stored = {}
    for row in rows:
        value = row[header.index(column)].strip()
        grade = None if value in ("", "-") else float(value)
        stored[row[header.index(key)]] = None if grade is None else min(max(grade, 0.0),
                                                                           grademax)
    return stored


# --------------------------------------------------------------------------
# A Moodle class: jane, tom (graded 9 by a TA before the export), ana (nothing)
# --------------------------------------------------------------------------

JANE, TOM, ANA = "123456", "654321", "123458"


def _participants(grades: dict, marked: dict) -> list:
    people = [(JANE, "Jane", "Doe", "jane@uni.edu"), (TOM, "Tom", "O'Neil", "tom@uni.edu"),
              (ANA, "Ana", "Lima", "ana@uni.edu")]
    return [shapes.MoodleParticipant(int(pid), first, last, email, status="submitted",
                                     timemodified=_at(2026, 10, 5, 20), grade=grades.get(pid),
                                     timemarked=marked.get(pid))
            for pid, first, last, email in people]


def _sheet(folder: Path, grades: dict, marked: dict, max_grade: float = 10.0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SHEET
    shapes.moodle_worksheet(path, _participants(grades, marked), due=_at(2026, 10, 6),
                            downloaded_at=_at(2026, 10, 7, 8), user_tz=ZONE,
                            max_grade=max_grade)
    return path


def _moodle_class(tmp_path, sheet: Path | None, rows=None, kind="moodle worksheet"):
    rows = rows or moodle_rows()
    for row, participant in zip(rows, (JANE, TOM, ANA)):
        row.student.lms_ids["participant"] = participant
    out = _out(tmp_path, rows, lms="moodle")
    facts = dict(roster_kind=kind, roster_file=str(sheet), roster_assignments=["Grade"]) \
        if sheet is not None else {}
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="moodle", **facts)
    return out, rows


TA_GRADED = {TOM: 9.0}
TA_MARKED = {TOM: _at(2026, 10, 6, 9)}


# --------------------------------------------------------------------------
# 1. The Maximum grade, on both Moodle routes
# --------------------------------------------------------------------------


def test_gradebook_route_warns_on_a_100_point_item_the_worksheet_shows(tmp_path):
    sheet = _sheet(tmp_path, {}, {}, max_grade=100.0)
    out, _ = _moodle_class(tmp_path, sheet)
    done = export(out, "moodle", moodle_route="gradebook")
    assert done.steps[0] == (
        "BEFORE importing: set the grade item's Maximum grade (the assignment's, for its item) "
        "to 10, the lab's points (the assignment > Settings > Grade > Maximum grade; it is "
        "100.00 now), or export again with --max-grade 100 to scale the grades to it.")
    assert any(n.startswith("Moodle's Maximum grade for this assignment's grade item is 100.00 "
                            f"(the grading worksheet {SHEET}), and the lab has 10 points")
               for n in done.notes)
    assert done.steps[0] in (done.dest / "README.txt").read_text(encoding="utf-8")
    # what the warning is about: Moodle's import keeps 6 as 6 of 100
    stored = moodle_gradebook_import(done.dest / "grades.csv", "Email address",
                                     "Lab 1: Attention", grademax=100.0)
    assert stored["jane@uni.edu"] == 6.0
    # --max-grade 100: the grades scaled, and Moodle stores them as meant
    done = export(out, "moodle", moodle_route="gradebook", max_grade=100)
    stored = moodle_gradebook_import(done.dest / "grades.csv", "Email address",
                                     "Lab 1: Attention", grademax=100.0)
    assert stored == {"jane@uni.edu": 60.0, "tom@uni.edu": 100.0, "ana@uni.edu": 0.0}
    assert not any("Maximum grade" in step for step in done.steps)
    assert any(n.startswith("Grades scaled to Moodle's Maximum grade 100 (--max-grade)")
               for n in done.notes)
    # the feedback keeps the lab's points
    assert _read(done.dest / "grades.csv")[1][3].startswith("Score: 6/10")


def test_gradebook_route_without_the_maximum_says_to_check_it(tmp_path, capsys):
    out = _out(tmp_path, moodle_rows(), lms="moodle")
    done = export(out, "moodle", moodle_route="gradebook")
    assert done.steps[0].startswith("BEFORE importing: check that the grade item's Maximum "
                                    "grade (the assignment's, for its item) is 10, the lab's "
                                    "points")
    assert "--max-grade N" in done.steps[0]
    assert any("14.5 into a 100-point item is 14.5 of 100" in n for n in done.notes)
    # stated: no check left to do
    done = export(out, "moodle", moodle_route="gradebook", max_grade=10)
    assert not any("Maximum grade" in s for s in done.steps)
    # a worksheet says it
    sheet = _sheet(tmp_path / "w", {}, {}, max_grade=10.0)
    rows = moodle_rows()
    for row, participant in zip(rows, (JANE, TOM, ANA)):
        row.student.lms_ids["participant"] = participant
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="moodle")
    done = export(out, "moodle", moodle_route="gradebook", worksheet=sheet)
    assert not any("Maximum grade" in s for s in done.steps)
    # the command line
    assert main(["export", "lab1", str(out), "--to", "moodle", "--moodle-route", "gradebook",
                 "--max-grade", "100"]) == 0
    printed = capsys.readouterr().out
    assert "Grades scaled to Moodle's Maximum grade 100 (--max-grade)" in printed
    assert _read(out / "export" / "moodle" / "grades.csv")[1][2] == "60"


def test_worksheet_route_max_grade_step_and_scaling(tmp_path):
    sheet = _sheet(tmp_path, {}, {}, max_grade=100.0)
    out, _ = _moodle_class(tmp_path, sheet)
    done = export(out, "moodle")
    assert done.steps[0].startswith("BEFORE uploading: set the assignment's Maximum grade to "
                                    "10, the lab's points")
    done = export(out, "moodle", max_grade=100, dest=tmp_path / "scaled")
    upload = moodle_worksheet_upload(done.dest / SHEET, max_grade=100.0)
    assert {p: sets for p, (sets, _, _) in upload.items()} == {JANE: 60.0, TOM: 100.0,
                                                               ANA: None}
    # stated otherwise than the worksheet: as stated, with a note
    done = export(out, "moodle", max_grade=20, dest=tmp_path / "other")
    assert any("says 100.00, and --max-grade says 20" in n for n in done.notes)
    assert _read(done.dest / SHEET)[1][4] == "12"


def test_max_grade_refusals_and_rounding(tmp_path, capsys):
    out = _out(tmp_path, canvas_rows())
    with pytest.raises(ValueError, match=r"--max-grade is Moodle's Maximum grade, and the "
                                         r"export is for canvas"):
        export(out, "canvas", max_grade=100)
    with pytest.raises(ValueError, match=r"--max-grade 0 is not a Maximum grade.*positive"):
        export(out, "moodle", moodle_route="gradebook", max_grade=0)
    assert main(["export", "lab1", str(out), "--to", "csv", "--max-grade", "100"]) == 2
    assert "--max-grade is Moodle's" in capsys.readouterr().err
    # half up, as a person rounds: 14.5 of 16 is 90.63 of 100
    assert export_module._scaled(14.5, 16, 100) == 90.63
    assert export_module._scaled(7, 16, 100) == 43.75


# --------------------------------------------------------------------------
# 2. The grades the LMS holds that an export replaces
# --------------------------------------------------------------------------


def test_moodle_worksheet_lists_the_ta_graded_student(tmp_path, capsys):
    sheet = _sheet(tmp_path, TA_GRADED, TA_MARKED)
    out, _ = _moodle_class(tmp_path, sheet)
    done = export(out, "moodle")
    assert done.replaced == [("tom", "9.00", "10")]
    [note] = [n for n in done.notes if "already have another grade" in n]
    assert note.startswith(
        f"1 student(s) already have another grade in Moodle (the grading worksheet {SHEET}, "
        f"as downloaded), which this export replaces (the LMS's grade -> the export's): tom "
        f"(Tom_O'Neil): 9.00 (Last modified (grade): Tuesday, 6 October 2026, 9:00 AM) -> 10.")
    assert note in (done.dest / "README.txt").read_text(encoding="utf-8")
    # and Moodle does replace it: the TA's grade is older than the download
    state = {TOM: {"grade": 9.0, "timemodified": int(TA_MARKED[TOM].timestamp()),
                   "comment": ""}}
    assert f"Set grade for {TOM} to 10.00" in moodle_upload(done.dest / SHEET, state,
                                                             _at(2026, 10, 8), 10.0)
    assert main(["export", "lab1", str(out), "--to", "moodle", "--dest",
                 str(tmp_path / "cli")]) == 0
    assert "tom (Tom_O'Neil): 9.00" in capsys.readouterr().out


def test_moodle_gradebook_route_lists_from_the_worksheet_or_the_gradebook_export(tmp_path):
    sheet = _sheet(tmp_path, TA_GRADED, TA_MARKED)
    out, _ = _moodle_class(tmp_path, sheet)
    done = export(out, "moodle", moodle_route="gradebook")
    assert done.replaced == [("tom", "9.00", "10")]
    # Moodle's gradebook export as roster (grade/export/txt grade_export_txt.php
    # print_grades: the profile fields, "<module>: <item> (Real)", "Last downloaded
    # from this course"): the item's column has the grade, no maximum
    gradebook = tmp_path / "CS101 Grades.csv"
    gradebook.write_text(
        "First name,Last name,ID number,Institution,Department,Email address,"
        "\"Assignment: Lab 1: Attention (Real)\",\"Assignment: Lab 2 (Real)\","
        "\"Last downloaded from this course\"\n"
        "Jane,Doe,S1,,,jane@uni.edu,-,8.00,1791360000\n"
        "Tom,O'Neil,S2,,,tom@uni.edu,9.00,7.00,1791360000\n"
        "Ana,Lima,S3,,,ana@uni.edu,-,-,1791360000\n", encoding="utf-8")
    out, _ = _moodle_class(tmp_path / "g", gradebook, kind="moodle gradebook")
    done = export(out, "moodle", moodle_route="gradebook")
    assert done.replaced == [("tom", "9.00", "10")]
    assert any(f"Moodle's gradebook (the roster {gradebook.name}, as exported)" in n
               for n in done.notes)
    assert done.steps[0].startswith("BEFORE importing: check that the grade item's")


def canvas_class(tmp_path, extra: int = 12):
    """canvas_rows() and ``extra`` more, with Canvas's gradebook export as roster
    (shapes.canvas_gradebook_csv): alice and the extra students graded in Canvas
    already (8 and 5), bob ungraded, eve 10 (the kit's too)."""
    rows = canvas_rows()
    people = [shapes.CanvasStudent(101, "Alice Smith", "Smith, Alice", "asmith", "S001"),
              shapes.CanvasStudent(102, "Bob Jones", "Jones, Bob", section="Section B"),
              shapes.CanvasStudent(103, "Eve", "Eve")]
    scores = {101: 8.0, 103: 10.0}
    for n in range(extra):
        rows.append(_row(Student(f"p{n:02d}", f"P{n:02d} Extra", "", "Section A",
                                 {"id": str(300 + n)}), score=4))
        people.append(shapes.CanvasStudent(300 + n, f"P{n:02d} Extra", f"Extra, P{n:02d}"))
        scores[300 + n] = 5.0
    roster = tmp_path / "gradebook.csv"
    shapes.canvas_gradebook_csv(roster, people, assignment_title="Lab 1", assignment_id=4321,
                                scores=scores)
    out = _out(tmp_path, rows)
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="canvas",
                roster_kind="canvas gradebook", roster_file=str(roster),
                roster_assignments=["Lab 1 (4321)"])
    return out


def test_canvas_lists_the_grades_it_replaces_first_ten_and_a_count(tmp_path):
    out = canvas_class(tmp_path)
    done = export(out, "canvas")
    # eve: 10.00 in Canvas, 10 here: the same; bob: no grade in Canvas
    assert done.replaced[-1] == ("smith_alice", "8.00", "7.5")  # by student id
    assert len(done.replaced) == 13 and {r[0] for r in done.replaced[:-1]} == {
        f"p{n:02d}" for n in range(12)}
    [note] = [n for n in done.notes if "already have another grade" in n]
    assert note.startswith("13 student(s) already have another grade in Canvas (the roster "
                           "gradebook.csv, column 'Lab 1 (4321)', as exported: grades entered "
                           "since are not in it), which this export replaces")
    assert "p00 (P00 Extra): 5.00 -> 4; p01 (P01 Extra)" in note and "p09 (P09 Extra)" in note
    assert "p10" not in note and "p09 (P09 Extra): 5.00 -> 4; and 3 more." in note
    # Canvas's importer does take the file's grade for alice
    seen = canvas_import(done.dest / "grades.csv")
    assert {s["id"]: s["grades"] for s in seen["students"]}["101"] == ["7.5"]
    # the plain csv says the same of the roster's column
    done = export(out, "csv")
    assert any("which grades.csv's score would replace, imported there" in n
               for n in done.notes)


def test_nothing_listed_when_the_lms_holds_no_other_grade(tmp_path):
    out = canvas_class(tmp_path, extra=0)
    rows = canvas_rows()
    rows[0].score = 8  # alice: Canvas's 8.00
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="canvas",
                roster_kind="canvas gradebook", roster_file=str(tmp_path / "gradebook.csv"),
                roster_assignments=["Lab 1 (4321)"])
    done = export(out, "canvas")
    assert done.replaced == [] and not any("already have" in n for n in done.notes)
    (tmp_path / "gradebook.csv").unlink()
    done = export(out, "canvas")
    assert any("is not there any more, so the export cannot say which grades" in n
               for n in done.notes)


# --------------------------------------------------------------------------
# 3. A second worksheet upload after a regrade
# --------------------------------------------------------------------------


def test_second_export_of_one_worksheet_says_what_moodle_skips(tmp_path):
    sheet = _sheet(tmp_path, TA_GRADED, TA_MARKED)
    out, rows = _moodle_class(tmp_path, sheet)
    moodle = {TOM: {"grade": 9.0, "timemodified": int(TA_MARKED[TOM].timestamp()),
                    "comment": ""}}
    first = export(out, "moodle")
    assert not any("same worksheet" in s for s in first.steps)
    uploaded = _at(2026, 10, 8, 10)
    preview = moodle_upload(first.dest / SHEET, moodle, uploaded, 10.0)
    assert f"Set grade for {JANE} to 6.00" in preview
    assert moodle[JANE]["grade"] == 6.0
    # a regrade (grade --only jane): 6 -> 8, and the same worksheet filled in again
    rows[0].score, rows[0].raw_score = 8, 9
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="moodle",
                roster_kind="moodle worksheet", roster_file=str(sheet))
    second = export(out, "moodle")
    assert second.steps[0].startswith(
        f"BEFORE uploading: {SHEET} is the same worksheet an earlier export filled in (")
    assert "the 1 changed since would not reach Moodle" in second.steps[0]
    assert "No modified grades found in uploaded worksheet" in second.steps[0]
    assert "export with --worksheet FILE" in second.steps[0]
    [note] = [n for n in second.notes if "earlier export filled in" in n]
    assert "1 row(s) changed since: Jane_Doe_123456 (Jane Doe): 6 -> 8" in note
    readme = (second.dest / "README.txt").read_text(encoding="utf-8")
    assert second.steps[0] in readme and note in readme
    # what the kit says is what Moodle does: every row skipped, jane keeps 6
    assert moodle_upload(second.dest / SHEET, moodle, _at(2026, 10, 9), 10.0) == []
    assert moodle[JANE]["grade"] == 6.0
    # a fresh download (the upload's times in it) given with --worksheet: no warning,
    # and Moodle takes the new grade
    fresh = _sheet(tmp_path / "fresh", {JANE: 6.0, TOM: 10.0},
                   {JANE: uploaded, TOM: uploaded, ANA: uploaded})
    third = export(out, "moodle", worksheet=fresh)
    assert not any("same worksheet" in s for s in third.steps)
    assert third.replaced == [("Jane_Doe_123456", "6.00", "8")]
    assert moodle_upload(third.dest / SHEET, moodle, _at(2026, 10, 9), 10.0)[0] == \
        f"Set grade for {JANE} to 8.00"
    record = json.loads((out / "export" / "moodle" / "exported.json").read_text("utf-8"))
    assert [e["grades"][JANE] for e in record["exports"]] == ["6", "8", "8"]
    # the kit's own written file given back as --worksheet is no fresh download either
    again = export(out, "moodle", worksheet=first.dest / SHEET, dest=tmp_path / "again")
    assert any("earlier export filled in" in n for n in again.notes)


def test_second_export_with_nothing_changed_is_a_note_only(tmp_path):
    sheet = _sheet(tmp_path, {}, {})
    out, _ = _moodle_class(tmp_path, sheet)
    export(out, "moodle")
    done = export(out, "moodle")
    assert not any(s.startswith("BEFORE uploading:") for s in done.steps)
    assert any("no grade or comment changed since" in n for n in done.notes)
    # a record the kit cannot read is started again, not an error
    (out / "export" / "moodle" / "exported.json").write_text("{", encoding="utf-8")
    assert not any("earlier export" in n for n in export(out, "moodle").notes)


def test_moodle_download_identity_rows_are_matched_for_the_record(tmp_path):
    """Tom's participant id from the Moodle download (no roster id) is recorded too."""
    sheet = _sheet(tmp_path, {}, {})
    rows = moodle_rows()
    rows[1].identity = Identity("moodle", "Tom", TOM)
    out = _out(tmp_path, rows, lms="moodle")
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="moodle",
                roster_kind="moodle gradebook", roster_file="gone.csv")
    rows[2].identity = Identity("moodle", "Ana Lima", ANA)
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="moodle",
                roster_kind="moodle gradebook", roster_file="gone.csv")
    export(out, "moodle", worksheet=sheet)
    record = json.loads((out / "export" / "moodle" / "exported.json").read_text("utf-8"))
    assert record["exports"][0]["grades"] == {JANE: "6", TOM: "10", ANA: "0"}
