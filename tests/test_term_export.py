"""autograder.term.export: the files Canvas, Moodle and a plain CSV take back.

The expected headers and rows are written by hand from the LMSs' importers
(Canvas: app/models/gradebook_importer.rb and Assignment's re-upload naming;
Moodle: grade/import/csv and mod/assign/feedback/file/importziplib.php), not
from the module under test.
"""

from __future__ import annotations

import csv
import doctest
import zipfile

import pytest

from autograder.cli import main
from autograder.term import export as export_module
from autograder.term.export import export, feedback_text
from autograder.term.model import ClassRow, Identity, Student, write_class

PAGE = "<html><body>feedback of {}</body></html>"


def _row(student: Student, **values) -> ClassRow:
    values.setdefault("lab", "lab1")
    values.setdefault("max_score", 10)
    values.setdefault("status", "graded")
    values.setdefault("raw_score", values.get("score", 0))
    return ClassRow(student=student, **values)


def _out(tmp_path, rows, title="Lab 1: Attention", lms="canvas"):
    out = tmp_path / "out"
    (out / "feedback").mkdir(parents=True)
    for row in rows:
        if row.feedback:
            (out / row.feedback).write_text(PAGE.format(row.student.student_id), encoding="utf-8")
    write_class(out, "lab1", title, rows, roster_lms=lms)
    return out


def _read(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _zip(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name).decode("utf-8") for name in archive.namelist()}


# --------------------------------------------------------------------------
# Canvas
# --------------------------------------------------------------------------


def canvas_rows():
    alice = Student("smith_alice", "Alice Smith", "alice@uni.edu", "Section A",
                    {"id": "101", "sis_user_id": "S001", "sis_login_id": "asmith"})
    bob = Student("jones_bob", "Bob Jones", "", "Section B", {"id": "102"})
    eve = Student("eve", '=HYPERLINK("http://x")\x1b[8m', "", "Section A",
                  {"id": "103", "sis_user_id": "-5", "sis_login_id": "@eve"})
    return [
        _row(alice, score=7.5, raw_score=8.5, penalty=1, late_seconds=5400,
             feedback="feedback/smith_alice.html",
             identity=Identity("canvas", "smithalice", "101", "", "5001")),
        _row(bob, score=0, status="no submission"),
        # Graded from a plain folder: no Canvas file id to name its page by.
        _row(eve, score=10, feedback="feedback/eve.html", identity=Identity("file", "eve")),
    ]


def test_canvas_grades_csv_is_what_the_gradebook_import_reads(tmp_path):
    out = _out(tmp_path, canvas_rows())
    done = export(out, "canvas")
    assert done.dest == out / "export" / "canvas"
    assert _read(done.dest / "grades.csv") == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 1: Attention"],
        ["Points Possible", "", "", "", "", "10"],
        ["'=HYPERLINK(\"http://x\")", "103", "'-5", "'@eve", "Section A", "10"],
        ["Bob Jones", "102", "", "", "Section B", "0"],
        ["Alice Smith", "101", "S001", "asmith", "Section A", "7.5"],
    ]
    assert done.grades == 3 and done.feedback == 1


def test_canvas_assignment_name_with_id_and_feedback_zip_names(tmp_path):
    out = _out(tmp_path, canvas_rows())
    done = export(out, "canvas", dest=tmp_path / "d", assignment="Lab 1 (4321)")
    assert _read(tmp_path / "d" / "grades.csv")[0][-1] == "Lab 1 (4321)"
    # Canvas's re-upload reads <name>_<user id>_<submitted file id>_...
    assert _zip(tmp_path / "d" / "feedback.zip") == {
        "smithalice_101_5001_feedback.html": PAGE.format("smith_alice")}
    assert done.skipped == [("eve", "no Canvas submission file id (the file did not come from "
                                    "Canvas's Download Submissions): upload its page by hand")]
    assert set(done.files) == {"grades.csv", "feedback.zip", "README.txt"}


def test_canvas_name_part_is_never_read_as_an_id(tmp_path):
    student = Student("s1", "Zoë D'Arcy_12", "", "", {"id": "7"})
    rows = [_row(student, score=1, feedback="feedback/s1.html",
                 identity=Identity("canvas", "", "7", "", "99"))]
    done = export(_out(tmp_path, rows), "canvas")
    assert list(_zip(done.dest / "feedback.zip")) == ["zoedarcy12_7_99_feedback.html"]
    student.name = "12345"
    done = export(_out(tmp_path / "b", rows), "canvas")
    assert list(_zip(done.dest / "feedback.zip")) == ["student_7_99_feedback.html"]


def test_canvas_refuses_students_without_a_canvas_id(tmp_path):
    rows = canvas_rows() + [_row(Student("carol", "Carol King"), score=3),
                            _row(Student("dan"), score=4)]
    with pytest.raises(ValueError) as error:
        export(_out(tmp_path, rows), "canvas")
    message = str(error.value)
    assert "2 student(s) have no Canvas user id" in message
    assert "carol (Carol King), dan" in message and "--roster" in message


def test_canvas_refuses_two_students_with_one_id(tmp_path):
    rows = canvas_rows()
    rows[1].student.lms_ids["id"] = "101"
    with pytest.raises(ValueError, match="same Canvas user id '101'"):
        export(_out(tmp_path, rows), "canvas")


# --------------------------------------------------------------------------
# Moodle
# --------------------------------------------------------------------------


def moodle_rows():
    jane = Student("Jane_Doe_123456", "Jane Doe", "jane@uni.edu", "",
                   {"participant": "123456", "id_number": "S1", "username": "jdoe"})
    tom = Student("tom", "Tom_O'Neil", "tom@uni.edu", "", {"id_number": "S2"})
    ana = Student("ana", "@Ana Lima", "ana@uni.edu", "", {"id_number": "S3"})
    return [
        _row(jane, score=6, raw_score=7, penalty=1, late_seconds=7200,
             feedback="feedback/Jane_Doe_123456.html",
             exercises=[{"exercise": "ex1", "score": 2, "max_score": 2, "message": ""},
                        {"exercise": "ex2", "score": 0, "max_score": 3,
                         "message": "=wrong shape\nTraceback..."}],
             identity=Identity("moodle", "Jane Doe", "123456", "",
                               "Jane Doe_123456_assignsubmission_file_")),
        # No participant id in the roster: the Moodle download's folder gives it.
        _row(tom, score=10, feedback="feedback/tom.html",
             identity=Identity("moodle", "Tom_O'Neil", "654321")),
        _row(ana, score=0, status="no submission"),
    ]


def test_moodle_grades_csv_by_email_with_feedback_text(tmp_path):
    done = export(_out(tmp_path, moodle_rows(), lms="moodle"), "moodle", moodle_route="gradebook")
    assert _read(done.dest / "grades.csv") == [
        ["Full name", "Email address", "Lab 1: Attention", "Lab 1: Attention (Feedback)"],
        ["Jane Doe", "jane@uni.edu", "6",
         "Score: 6/10\nLate penalty: 1 (submitted 2.00 hours late)\nex1: 2/2\n"
         "ex2: 0/3 - =wrong shape"],
        ["'@Ana Lima", "ana@uni.edu", "0", "No submission: 0/10"],
        ["Tom_O'Neil", "tom@uni.edu", "10", "Score: 10/10"],
    ]


def test_moodle_grades_csv_by_id_number(tmp_path):
    done = export(_out(tmp_path, moodle_rows(), lms="moodle"), "moodle", moodle_route="gradebook",
                  moodle_key="id_number", assignment="Attention lab")
    table = _read(done.dest / "grades.csv")
    assert table[0] == ["Full name", "ID number", "Attention lab", "Attention lab (Feedback)"]
    assert [row[1] for row in table[1:]] == ["S1", "S3", "S2"]


def test_moodle_feedback_zip_has_a_folder_per_participant(tmp_path):
    done = export(_out(tmp_path, moodle_rows(), lms="moodle"), "moodle", moodle_route="gradebook")
    assert _zip(done.dest / "feedback.zip") == {
        "Jane Doe_123456_assignsubmission_file_/feedback.html": PAGE.format("Jane_Doe_123456"),
        # Moodle reads the participant id after the first "_": none in the name.
        "Tom O'Neil_654321_assignsubmission_file_/feedback.html": PAGE.format("tom"),
    }
    assert done.feedback == 2 and done.skipped == []


def test_moodle_lists_students_without_a_participant_id(tmp_path):
    rows = moodle_rows()
    rows[1].identity = Identity("folder", "tom")
    done = export(_out(tmp_path, rows, lms="moodle"), "moodle", moodle_route="gradebook")
    assert done.skipped == [("tom", "no Moodle participant id (roster or Moodle download): "
                                    "upload its page by hand")]
    assert list(_zip(done.dest / "feedback.zip")) == [
        "Jane Doe_123456_assignsubmission_file_/feedback.html"]


def test_moodle_refuses_rows_without_the_key(tmp_path):
    rows = moodle_rows()
    rows[1].student.email = ""
    out = _out(tmp_path, rows, lms="moodle")
    with pytest.raises(ValueError, match=r"1 student\(s\) have no email address.*tom \(Tom_O'Neil\)"
                                         r".*--moodle-key id_number"):
        export(out, "moodle", moodle_route="gradebook")
    rows[0].student.lms_ids.pop("id_number")
    write_class(out, "lab1", "Lab 1", rows)
    with pytest.raises(ValueError, match=r"no id number.*Jane_Doe_123456 \(Jane Doe\)"):
        export(out, "moodle", moodle_key="id_number", moodle_route="gradebook")


def test_moodle_refuses_a_key_that_escaping_would_change(tmp_path):
    rows = moodle_rows()
    rows[2].student.email = "+ana@uni.edu"
    out = _out(tmp_path, rows, lms="moodle")
    with pytest.raises(ValueError, match=r"email address of ana \(@Ana Lima\) starts"):
        export(out, "moodle", moodle_route="gradebook")
    assert export(out, "moodle", moodle_key="id_number", moodle_route="gradebook").grades == 3


# --------------------------------------------------------------------------
# Plain CSV
# --------------------------------------------------------------------------


def test_plain_csv_and_one_zip_per_student(tmp_path):
    rows = moodle_rows()
    rows[0].submitted_at = "2025-03-01T12:00:00+01:00"
    rows[1].status = "\x1b]0;title\x07-error: kernel died"
    done = export(_out(tmp_path, rows, lms="moodle"), "csv")
    assert _read(done.dest / "grades.csv") == [
        ["student_id", "name", "email", "section", "lab", "score", "raw_score", "max_score",
         "late", "penalty", "status", "submitted_at"],
        ["Jane_Doe_123456", "Jane Doe", "jane@uni.edu", "", "lab1", "6", "7", "10", "2.00",
         "1", "graded", "2025-03-01T12:00:00+01:00"],
        ["ana", "'@Ana Lima", "ana@uni.edu", "", "lab1", "0", "0", "10", "", "0",
         "no submission", ""],
        ["tom", "Tom_O'Neil", "tom@uni.edu", "", "lab1", "10", "10", "10", "", "0",
         "'-error: kernel died", ""],
    ]
    assert sorted(done.files) == ["README.txt", "feedback/Jane_Doe_123456.zip", "feedback/tom.zip",
                                  "grades.csv"]
    assert _zip(done.dest / "feedback" / "tom.zip") == {"feedback.html": PAGE.format("tom")}
    assert not (done.dest / "feedback" / "ana.zip").exists()


def test_missing_or_escaping_feedback_pages_are_listed_not_packed(tmp_path):
    rows = moodle_rows()
    rows[1].feedback = "../../etc/passwd"
    out = _out(tmp_path, rows[:1] + rows[2:], lms="moodle")
    write_class(out, "lab1", "Lab 1", rows)
    (out / rows[0].feedback).unlink()
    done = export(out, "csv")
    assert [sid for sid, _ in done.skipped] == ["Jane_Doe_123456", "tom"]
    assert "missing" in done.skipped[0][1] and "outside" in done.skipped[1][1]
    assert done.feedback == 0 and done.grades == 3


def test_bad_arguments_and_folders_are_clear_errors(tmp_path):
    out = _out(tmp_path, canvas_rows())
    with pytest.raises(ValueError, match="Unknown export format 'blackboard'"):
        export(out, "blackboard")
    with pytest.raises(ValueError, match="Unknown Moodle key 'username'"):
        export(out, "moodle", moodle_key="username")
    with pytest.raises(ValueError, match="assignment name is empty"):
        export(out, "csv", assignment="  ")
    with pytest.raises(ValueError, match="holds the grades of 'lab1', not 'lab2'"):
        export(out, "csv", lab="lab2")
    with pytest.raises(ValueError, match="has no class.json"):
        export(tmp_path / "nowhere", "csv")
    write_class(out, "lab1", "Lab 1", [])
    with pytest.raises(ValueError, match="no students"):
        export(out, "csv")


def test_feedback_text_doctest_and_a_status_line():
    assert doctest.testmod(export_module).failed == 0
    row = _row(Student("x"), score=0, status="error: timed out")
    assert feedback_text(row) == "Score: 0/10\nStatus: error: timed out"


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------


def test_cli_export_prints_files_and_where_to_upload(tmp_path, capsys):
    out = _out(tmp_path, canvas_rows())
    assert main(["export", "lab1", str(out), "--to", "canvas",
                 "--assignment", "Lab 1 (4321)"]) == 0
    printed = capsys.readouterr().out
    assert "Exported 3 grades and 1 feedback pages of lab1 for canvas" in printed
    assert "grades.csv" in printed and "feedback.zip" in printed
    assert "no feedback file for eve" in printed
    assert "Grades > Import" in printed and "Re-Upload Submissions" in printed
    assert _read(out / "export" / "canvas" / "grades.csv")[0][-1] == "Lab 1 (4321)"


def test_cli_export_moodle_with_dest_and_key(tmp_path, capsys):
    out = _out(tmp_path, moodle_rows(), lms="moodle")
    dest = tmp_path / "to_moodle"
    assert main(["export", "lab1", str(out), "--to", "moodle", "--dest", str(dest),
                 "--moodle-route", "gradebook", "--moodle-key", "id_number"]) == 0
    printed = capsys.readouterr().out
    assert "Map from the key column to ID number" in printed
    assert "Upload multiple feedback files in a zip" in printed
    assert _read(dest / "grades.csv")[0][1] == "ID number"


def test_cli_export_errors_exit_2_with_the_message(tmp_path, capsys):
    out = _out(tmp_path, canvas_rows())
    assert main(["export", "lab2", str(out), "--to", "csv"]) == 2
    assert "error:" in capsys.readouterr().err
    rows = canvas_rows() + [_row(Student("carol"), score=1)]
    write_class(out, "lab1", "Lab 1", rows)
    assert main(["export", "lab1", str(out), "--to", "canvas"]) == 2
    err = capsys.readouterr().err
    assert "no Canvas user id" in err and "carol" in err


# --------------------------------------------------------------------------
# Issue 31: Canvas's import never misreads a row; one place applies the late
# policy; Moodle's own grading worksheet
# --------------------------------------------------------------------------

#: Canvas's importer (app/models/gradebook_importer.rb) takes a row whose first
#: cell matches /Points Possible/ as the points row, not a student.
CANVAS_POINTS_ROW = r"Points Possible"


def test_a_student_named_points_possible_is_still_a_student_in_canvas(tmp_path):
    import re

    rows = canvas_rows()
    rows[0].student.name = "Points Possible"
    done = export(_out(tmp_path, rows), "canvas", assignment="Lab 1 (4321)")
    table = _read(done.dest / "grades.csv")
    assert re.search(CANVAS_POINTS_ROW, table[1][0])  # the one points row
    assert not any(re.search(CANVAS_POINTS_ROW, row[0], re.IGNORECASE) for row in table[2:])
    by_id = {row[1]: row for row in table[2:]}
    assert by_id["101"][0] == "Student 101"  # Canvas finds the student by ID
    assert any("written \"Student 101\"" in note for note in done.notes)


def _with_facts(tmp_path, rows, **facts):
    out = _out(tmp_path, rows)
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms="canvas", **facts)
    return out


def test_canvas_default_column_is_the_rosters_column_of_the_lab(tmp_path):
    out = _with_facts(tmp_path, canvas_rows(),
                      roster_assignments=["Quiz 1 (4300)", "Lab 1 (4321)", "Lab 2 (4322)"])
    done = export(out, "canvas")
    assert _read(done.dest / "grades.csv")[0][-1] == "Lab 1 (4321)"
    out = _with_facts(tmp_path / "b", canvas_rows(),
                      roster_assignments=["Quiz 1 (4300)", "Essay (4301)"])
    with pytest.raises(ValueError, match=r"'Quiz 1 \(4300\)', 'Essay \(4301\)'; none of them "
                                         r"names lab1\. Give --assignment"):
        export(out, "canvas")
    out = _with_facts(tmp_path / "c", canvas_rows(), roster_assignments=[])
    done = export(out, "canvas")
    assert _read(done.dest / "grades.csv")[0][-1] == "Lab 1: Attention"
    assert any("Canvas imports as a NEW assignment" in note for note in done.notes)


def test_the_late_penalty_is_applied_in_one_place(tmp_path, capsys):
    policy = "Due 2026-10-05 23:59-04:00; 10% of the points per day late."
    out = _with_facts(tmp_path, canvas_rows(), late_policy=policy, late_penalised=1,
                      roster_assignments=["Lab 1 (4321)"])
    # the kit took it: alice's 7.5 (8.5 less 1) goes, and Canvas's deduction must be off
    done = export(out, "canvas")
    alice = {row[1]: row for row in _read(done.dest / "grades.csv")}["101"]
    assert alice[-1] == "7.5"
    [note] = done.notes
    assert "The kit took a late penalty from 1 student(s)" in note
    assert "Turn Canvas's automatic late deduction OFF" in note
    assert "Late Policies" in note and "--late lms" in note
    assert note in (done.dest / "README.txt").read_text(encoding="utf-8")
    # the LMS takes it: the score before the kit's penalty
    done = export(out, "canvas", late="lms")
    assert {row[1]: row for row in _read(done.dest / "grades.csv")}["101"][-1] == "8.5"
    assert "BEFORE the kit's late penalty" in done.notes[0]
    assert main(["export", "lab1", str(out), "--to", "canvas"]) == 0
    assert "Read first: The kit took a late penalty" in capsys.readouterr().err
    # no penalty taken: Canvas's own policy is said to apply
    out = _with_facts(tmp_path / "b", canvas_rows(), late_policy=policy, late_penalised=0,
                      roster_assignments=["Lab 1 (4321)"])
    assert "Canvas applies it on import" in export(out, "canvas").notes[0]


#: Moodle's "Download grading worksheet" (mod/assign/gradingtable.php; shapes.py
#: writes it so: UTF-8 with a BOM, fputcsv quoting).
WORKSHEET = (
    '\ufeffIdentifier,"Full name","Email address",Status,Grade,"Maximum grade",'
    '"Grade can be changed","Last modified (submission)","Last modified (grade)",'
    '"Feedback comments"\n'
    '"Participant 123456","Jane Doe",jane@uni.edu,"Submitted for grading",,10.00,Yes,'
    '"Monday, 5 October 2026, 9:00 PM",-,\n'
    '"Participant 123457",Tom,tom@uni.edu,"Submitted for grading",,10.00,Yes,'
    '"Monday, 5 October 2026, 9:30 PM","Tuesday, 6 October 2026, 9:00 AM",\n'
    '"Participant 123458","Ana Lima",ana@uni.edu,"No submission",,10.00,Yes,-,-,\n'
)


def test_moodle_grading_worksheet_is_written_back_as_moodle_reads_it(tmp_path):
    from autograder.term.roster import read_roster

    sheet = tmp_path / "worksheet.csv"
    sheet.write_bytes(WORKSHEET.encode("utf-8"))
    rows = moodle_rows()
    for row, participant in zip(rows, ("123456", "123457", "123458")):
        row.student.lms_ids["participant"] = participant
    out = _out(tmp_path, rows, lms="moodle")
    write_class(out, "lab1", "Lab 1", rows, roster_lms="moodle", roster_kind="moodle worksheet",
                roster_file=str(sheet))
    done = export(out, "moodle")
    written = done.dest / "worksheet.csv"
    assert written.read_bytes().startswith(b"\xef\xbb\xbf")  # as downloaded
    before, after = _read(sheet), _read(written)
    assert after[0] == before[0] and len(after) == len(before)
    for old, new in zip(before[1:], after[1:]):
        # every cell as downloaded (Identifier, Last modified (grade)...) but the two filled in
        assert [c for i, c in enumerate(new) if i not in (4, 9)] == \
            [c for i, c in enumerate(old) if i not in (4, 9)]
    assert [row[4] for row in after[1:]] == ["6", "10", "0"]
    assert after[1][9].startswith("Score: 6/10\nLate penalty: 1")
    assert [s.student_id for s in read_roster(written)] == [s.student_id for s in
                                                             read_roster(sheet)]
    assert "Upload grading worksheet" in done.steps[0]
    assert done.feedback == 2
    assert "Jane Doe_123456_assignsubmission_file_/feedback.html" in _zip(
        done.dest / "feedback.zip")


def test_moodle_worksheet_route_needs_the_worksheet(tmp_path):
    out = _out(tmp_path, moodle_rows(), lms="moodle")
    with pytest.raises(ValueError, match=r"graded without Moodle's grading worksheet as its "
                                         r"roster.*--moodle-route gradebook"):
        export(out, "moodle")
