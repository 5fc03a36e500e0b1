"""autograder.term.export: the files Canvas, Moodle and a plain CSV take back.

The expected headers and rows are written by hand from the LMSs' importers
(Canvas: app/models/gradebook_importer.rb and Assignment's re-upload naming;
Moodle: grade/import/csv, mod/assign/feedback/file/importziplib.php and the
offline grading worksheet, mod/assign/feedback/offline), not from the module
under test. The importers' own rules are re-implemented below from their
source (``canvas_import``, ``moodle_worksheet_upload``), each line citing where
it comes from.
"""

from __future__ import annotations

import csv
import doctest
import io
import re
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
    # The doctests are feedback.py's (the package re-exports its functions).
    result = doctest.testmod(export_module.feedback)
    assert result.failed == 0 and result.attempted > 0
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
    assert "grades.csv" in printed and "feedback.zip" in printed and "README.txt" in printed
    assert "no feedback file for eve" in printed
    assert "Steps:\n  1. grades.csv: Course > Grades > Import" in printed
    assert "2. feedback.zip: Course > Assignments" in printed and "Re-Upload Submissions" in printed
    # no late policy in the kit: Canvas's own may apply, and the terminal says so
    assert "Read first:\n  - Late penalty: the kit took none for this lab" in printed
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
# Canvas's importer, re-implemented from its source
# --------------------------------------------------------------------------

#: instructure/canvas-lms app/models/gradebook_importer.rb (stored version read
#: for issue 31), ``check_for_non_student_row``:
#:     if row[0]&.include?("Points Possible")        # the points row
#:     if row.compact.all? { |column| column =~ /^\s*(Muted|Manual Posting.*)?\s*$/i }
#: (older releases: ``if row[0] =~ /Points Possible/`` and
#: ``next if row.compact.all? { |c| c.strip =~ /^(Muted|)$/i }``).
CANVAS_POINTS_ROW = re.compile(r"Points Possible")
CANVAS_SKIPPED_CELL = re.compile(r"^\s*(Muted|Manual Posting.*)?\s*$", re.IGNORECASE)


def _ruby_cells(line: str, separator: str) -> list[str | None]:
    """One CSV line as Ruby's CSV with the ``:nil`` converter gives it: an empty
    field is nil (gradebook_importer.rb ``CSV::Converters[:nil]``; Ruby keeps a
    quoted "" as "", which the kit never writes)."""
    return [c if c != "" else None for c in next(csv.reader([line], delimiter=separator))]


def canvas_import(path) -> dict:
    """What Canvas's GradebookImporter makes of a gradebook CSV, from its source:
    the separator, the header's student columns, the points row(s), the rows it
    skips and the students (by the ID column, ``process_student``)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    # identify_delimiter: the first 3 lines; ";" only if it gives more fields, consistently
    counts = {}
    for separator in (";", ","):
        fields = [len(next(csv.reader([line], delimiter=separator))) for line in lines[:3]]
        counts[separator] = fields[0] if len(set(fields)) == 1 else 0
    separator = ";" if counts[";"] > counts[","] else ","
    rows = [_ruby_cells(line, separator) for line in lines
            if not re.fullmatch(r"[;, ]+\n?", line)]  # skip_lines: /^[;, ]+$/
    header, *body = rows
    # header?: row_has_student_headers?, update_column_count, last_student_info_column
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    columns = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        columns += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        columns += 2
    assert "Section" in header[columns - 1]
    found = {"separator": separator, "assignments": header[columns:], "points": [],
             "skipped": [], "students": []}
    for row in body:
        first = row[0] or ""
        if "Points Possible" in first or CANVAS_POINTS_ROW.search(first):
            found["points"].append(row)
        elif all(CANVAS_SKIPPED_CELL.match(c) for c in row if c is not None):
            found["skipped"].append(row)
        else:
            found["students"].append({"id": row[1], "name": row[0], "grades": row[columns:]})
    return found


def test_a_student_named_points_possible_is_a_student_to_canvas(tmp_path):
    names = ["Points Possible, Paul", "POINTS  POSSIBLE", "Manual Posting", "Muted",
             "a;b;c;d;e;f;g;h", ""]
    rows = canvas_rows()
    for number, name in enumerate(names):
        student = Student(f"p{number}", name, "", "Section A", {"id": str(200 + number)})
        rows.append(_row(student, score=number))
    done = export(_out(tmp_path, rows), "canvas", assignment="Lab 1 (4321)")
    seen = canvas_import(done.dest / "grades.csv")
    assert seen["separator"] == "," and seen["assignments"] == ["Lab 1 (4321)"]
    assert seen["points"] == [["Points Possible", None, None, None, None, "10"]]
    assert seen["skipped"] == []
    # every student is a student, found by the ID column, with their own grade
    assert {s["id"]: s["grades"] for s in seen["students"]} == {
        "101": ["7.5"], "102": ["0"], "103": ["10"], "200": ["0"], "201": ["1"],
        "202": ["2"], "203": ["3"], "204": ["4"], "205": ["5"]}
    names_written = {s["id"]: s["name"] for s in seen["students"]}
    assert names_written["200"] == "Student 200" and names_written["201"] == "Student 201"
    assert names_written["205"] == "Student 205"  # an empty name
    assert names_written["202"] == "Manual Posting"  # the ID cell keeps the row a student's
    assert names_written["204"] == "a;b;c;d;e;f;g;h"
    assert sum("is written 'Student 20" in note for note in done.notes) == 3


def test_the_old_kit_export_would_have_lost_the_student(tmp_path):
    """The importer re-implemented above does see the problem: a row written
    with the name as is would be the points row (the issue's report)."""
    path = tmp_path / "old.csv"
    path.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 (4321)\n"
                    "Points Possible,,,,,10\n\"Points Possible, Paul\",200,,,Section A,7\n",
                    encoding="utf-8")
    seen = canvas_import(path)
    assert len(seen["points"]) == 2 and seen["students"] == []


def _with_facts(tmp_path, rows, lms="canvas", **facts):
    out = _out(tmp_path, rows, lms=lms)
    write_class(out, "lab1", "Lab 1: Attention", rows, roster_lms=lms, **facts)
    return out


def test_canvas_default_column_is_the_rosters_column_of_the_lab(tmp_path):
    # the gradebook export's columns ("Lab 1 (4321)": Assignment#title_with_id)
    out = _with_facts(tmp_path, canvas_rows(), roster_assignments=[
        "Quiz 1 (4300)", "Lab 1 (4321)", "Lab 10 (4330)", "Lab 2 (4322)"])
    done = export(out, "canvas")
    assert _read(done.dest / "grades.csv")[0][-1] == "Lab 1 (4321)"
    assert done.notes[-1] == ("Assignment column: 'Lab 1 (4321)', the roster's column of lab1 "
                              "(--assignment to choose another).")
    # by the lab's title too
    out = _with_facts(tmp_path / "t", canvas_rows(), roster_assignments=[
        "Quiz 1 (4300)", "lab 1: attention (4321)"])
    assert _read(export(out, "canvas").dest / "grades.csv")[0][-1] == "lab 1: attention (4321)"


def test_canvas_default_column_refused_when_not_exactly_one(tmp_path):
    out = _with_facts(tmp_path, canvas_rows(),
                      roster_assignments=["Quiz 1 (4300)", "Essay (4301)"])
    with pytest.raises(ValueError, match=r"columns are 'Quiz 1 \(4300\)', 'Essay \(4301\)': none "
                                         r"of them names lab1 .*--assignment \"Name \(id\)\""):
        export(out, "canvas")
    out = _with_facts(tmp_path / "b", canvas_rows(),
                      roster_assignments=["Lab 1 (4321)", "Lab 1 resubmission (4322)"])
    with pytest.raises(ValueError, match=r"several of them name lab1"):
        export(out, "canvas")
    assert main(["export", "lab1", str(out), "--to", "canvas"]) == 2
    # --assignment decides
    done = export(out, "canvas", assignment="Lab 1 resubmission (4322)")
    assert _read(done.dest / "grades.csv")[0][-1] == "Lab 1 resubmission (4322)"


def test_canvas_without_assignment_columns_says_canvas_creates_one(tmp_path):
    done = export(_with_facts(tmp_path, canvas_rows(), roster_assignments=[]), "canvas")
    assert _read(done.dest / "grades.csv")[0][-1] == "Lab 1: Attention"
    assert "Canvas's import creates a NEW assignment 'Lab 1: Attention'" in done.notes[-1]
    done = export(_with_facts(tmp_path / "b", canvas_rows()), "canvas", assignment="Lab 1")
    assert "Canvas fills the assignment of exactly that name, or creates a new one" in \
        done.notes[-1]


# --------------------------------------------------------------------------
# One place applies the late policy
# --------------------------------------------------------------------------

POLICY = "Due 2026-10-05 23:59-04:00; 10% of the points per day late."


def test_canvas_late_kit_says_to_turn_canvas_deduction_off(tmp_path, capsys):
    out = _with_facts(tmp_path, canvas_rows(), late_policy=POLICY, late_penalised=1,
                      roster_assignments=["Lab 1 (4321)"])
    done = export(out, "canvas")
    # alice: 8.5 before the kit's penalty of 1
    assert {row[1]: row for row in _read(done.dest / "grades.csv")}["101"][-1] == "7.5"
    setting = ("Course > Grades > Settings (the gear icon) > Late Policies tab > clear "
               "\"Automatically apply deduction to late submissions\" > Apply Settings")
    assert done.steps[0] == ("BEFORE importing grades.csv, turn Canvas's automatic late "
                             f"deduction off: {setting}. The kit already took the late penalty.")
    assert done.steps[1].startswith("grades.csv: Course > Grades > Import")
    [late, column] = done.notes
    assert late.startswith("Late penalty: taken by the kit: the kit's late policy (Due "
                           "2026-10-05 23:59-04:00; 10% of the points per day late) "
                           "penalised 1 of 3 student(s)")
    assert "--late lms" in late and "for every assignment" in late
    readme = (done.dest / "README.txt").read_text(encoding="utf-8")
    assert late in readme and f"1. {done.steps[0]}" in readme
    assert main(["export", "lab1", str(out), "--to", "canvas"]) == 0
    printed = capsys.readouterr().out
    assert "Read first:\n  - Late penalty: taken by the kit" in printed
    assert "Steps:\n  1. BEFORE importing grades.csv, turn Canvas's automatic late" in printed


def test_canvas_late_lms_exports_the_raw_score_and_says_canvas_decides(tmp_path):
    out = _with_facts(tmp_path, canvas_rows(), late_policy=POLICY, late_penalised=1,
                      roster_assignments=["Lab 1 (4321)"])
    done = export(out, "canvas", late="lms")
    assert {row[1]: row for row in _read(done.dest / "grades.csv")}["101"][-1] == "8.5"
    assert not done.steps[0].startswith("BEFORE")
    assert done.notes[0].startswith("Late penalty: left to Canvas (--late lms): grades.csv "
                                    "has the scores BEFORE the kit's late penalty")
    assert "not the kit's times or extensions" in done.notes[0]
    assert "feedback pages (written by grade) still show the kit's penalty" in done.notes[0]
    assert done.late == "lms"


def test_canvas_late_without_a_kit_policy_says_canvas_may_take_one(tmp_path):
    done = export(_with_facts(tmp_path, canvas_rows(), roster_assignments=["Lab 1 (4321)"]),
                  "canvas")
    assert done.notes[0].startswith("Late penalty: the kit took none for this lab")
    assert not done.steps[0].startswith("BEFORE")


def test_csv_late_modes(tmp_path):
    out = _with_facts(tmp_path, moodle_rows(), lms="moodle", late_policy=POLICY,
                      late_penalised=1)
    kit = _read(export(out, "csv").dest / "grades.csv")
    lms_done = export(out, "csv", late="lms")
    lms = _read(lms_done.dest / "grades.csv")
    assert [r[5:8] + r[9:10] for r in kit[1:]] == [["6", "7", "10", "1"], ["0", "0", "10", "0"],
                                                  ["10", "10", "10", "0"]]
    assert [r[5:7] for r in lms[1:]] == [["7", "7"], ["0", "0"], ["10", "10"]]
    assert lms_done.notes[0].startswith("Late penalty: not in score (--late lms)")


def test_late_lms_with_moodle_gradebook_is_refused_when_the_kit_has_a_policy(tmp_path):
    out = _with_facts(tmp_path, moodle_rows(), lms="moodle", late_policy=POLICY,
                      late_penalised=1)
    with pytest.raises(ValueError, match=r"would take no late penalty at all.*--late kit"):
        export(out, "moodle", moodle_route="gradebook", late="lms")
    done = export(out, "moodle", moodle_route="gradebook")
    assert "outside the assignment, so no Moodle late penalty is added" in done.notes[0]
    assert _read(done.dest / "grades.csv")[1][2] == "6"


# --------------------------------------------------------------------------
# Moodle: the assignment's grading worksheet, written back
# --------------------------------------------------------------------------

#: Moodle's "Download grading worksheet": the columns and cells of
#: mod/assign/gradingtable.php (data/sample_term/SOURCES.md, "Offline grading
#: worksheet"; mod/assign/feedback/offline/tests/fixtures/
#: assignfeedback_offline_test_worksheet_1.csv has the same header): UTF-8 with
#: a BOM (Spout's CSV writer), fputcsv quoting, "-" for no time, times as
#: userdate's strftimedaydatetime. Tom was graded in Moodle before (a grade and
#: its "Last modified (grade)"); the comment cell is HTML, as Moodle stores it.
WORKSHEET = (
    '\ufeffIdentifier,"Full name","Email address",Status,Grade,"Maximum grade",'
    '"Grade can be changed","Last modified (submission)","Last modified (grade)",'
    '"Feedback comments"\n'
    '"Participant 123456","Jane Doe",jane@uni.edu,"Submitted for grading - 2 hours late",,'
    '10.00,Yes,"Tuesday, 6 October 2026, 1:59 AM",-,\n'
    '"Participant 654321",Tom,tom@uni.edu,"Submitted for grading - Graded",9.00,10.00,Yes,'
    '"Monday, 5 October 2026, 9:30 PM","Tuesday, 6 October 2026, 9:00 AM","<p>Good</p>"\n'
    '"Participant 123458","Ana Lima",ana@uni.edu,"No submission",,10.00,Yes,-,-,\n'
    '"Participant 999999","Zoe Extra",zoe@uni.edu,"No submission",,10.00,Yes,-,-,\n'
)
#: Column indexes in WORKSHEET.
GRADE, MODIFIED, FEEDBACK = 4, 8, 9


def moodle_worksheet_upload(path, max_grade: float) -> dict:
    """What Moodle's "Upload grading worksheet" does with a file, from its source
    (moodle/moodle mod/assign/feedback/offline and lib/csvlib.class.php):
    participant id -> (grade set or None, feedback text, Last modified (grade))."""
    data = path.read_bytes()
    text = data.decode("utf-8")  # the form's encoding, utf-8 by default
    text = text.removeprefix("\ufeff")  # load_csv_content: core_text::trim_utf8_bom
    text = re.sub(r"\r\n?", "\n", text).strip()  # "Fix mac/dos newlines", trim()
    records = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=",")
               if r != [""] and r != []]  # fgetcsv; a one-empty-cell line is dropped
    header = records[0]
    # every row as long as the header, or the whole file is refused (csvweirdcolumns)
    assert all(len(r) == len(header) for r in records)
    # importgradeslib.php init(): columns found by exact name; all three needed
    index = {name: header.index(name) for name in ("Identifier", "Grade",
                                                   "Last modified (grade)")}
    feedback = header.index("Feedback comments") if "Feedback comments" in header else None
    found = {}
    for record in records[1:]:
        identifier = record[index["Identifier"]]
        assert identifier.startswith("Participant ")  # next(): substr(strlen('Participant '))
        participant = identifier[len("Participant "):]
        grade = record[index["Grade"]]
        value = float(grade) if grade != "" else None  # unformat_float
        # process_import_grades: skip '' / < 0 / above the maximum; set only when truthy
        sets = value if value and 0 <= value <= max_grade else None
        found[participant] = (sets, record[feedback] if feedback is not None else None,
                              record[index["Last modified (grade)"]])
    return found


def _worksheet_class(tmp_path, late_policy="", penalised=0, sheet_text=WORKSHEET,
                     participants=("123456", "654321", "123458")):
    tmp_path.mkdir(parents=True, exist_ok=True)
    sheet = tmp_path / "Grades-CS101-Lab 1-77.csv"
    sheet.write_bytes(sheet_text.encode("utf-8"))
    rows = moodle_rows()
    for row, participant in zip(rows, participants):
        row.student.lms_ids["participant"] = participant
    out = _with_facts(tmp_path, rows, lms="moodle", roster_kind="moodle worksheet",
                      roster_file=str(sheet), roster_assignments=["Grade"],
                      late_policy=late_policy, late_penalised=penalised)
    return sheet, out


def test_moodle_worksheet_is_written_back_as_moodle_reads_it(tmp_path):
    from autograder.term.roster import read_roster

    sheet, out = _worksheet_class(tmp_path)
    done = export(out, "moodle")
    written = done.dest / sheet.name  # Moodle's own name for it
    assert set(done.files) == {sheet.name, "feedback.zip", "README.txt"}
    assert written.read_bytes().startswith(b"\xef\xbb\xbf")  # as downloaded
    before, after = _read(sheet), _read(written)
    assert after[0] == before[0] and len(after) == len(before)
    for old, new in zip(before[1:], after[1:]):
        # every cell as downloaded ("Last modified (grade)" above all) but the two filled in
        assert [c for i, c in enumerate(new) if i not in (GRADE, FEEDBACK)] == \
            [c for i, c in enumerate(old) if i not in (GRADE, FEEDBACK)]
    assert [row[GRADE] for row in after[1:]] == ["6", "10", "0", ""]
    assert after[1][FEEDBACK] == ("Score: 6/10<br>Late penalty: 1 (submitted 2.00 hours late)"
                                  "<br>ex1: 2/2<br>ex2: 0/3 - =wrong shape")
    assert after[4] == before[4]  # a participant the class does not have: untouched
    # what Moodle does with it
    upload = moodle_worksheet_upload(written, max_grade=10.0)
    assert upload == {
        "123456": (6.0, after[1][FEEDBACK], "-"),
        "654321": (10.0, "Score: 10/10", "Tuesday, 6 October 2026, 9:00 AM"),
        "123458": (None, "No submission: 0/10", "-"),  # Moodle never sets a 0
        "999999": (None, "", "-")}
    # and the kit reads it back as the same roster
    again, first = read_roster(written), read_roster(sheet)
    assert [(s.student_id, s.lms_ids) for s in again] == [(s.student_id, s.lms_ids)
                                                          for s in first]
    assert done.grades == 3 and done.feedback == 2
    assert "Jane Doe_123456_assignsubmission_file_/feedback.html" in _zip(
        done.dest / "feedback.zip")
    # the steps name the file and the upload's option; the notes say what Moodle will not do
    assert done.steps[0].startswith(f"{sheet.name}: the assignment > Submissions (older "
                                    f"Moodle: View all submissions) > Actions (older: the "
                                    f"Grading action menu) > Upload grading worksheet")
    assert "\"Allow updating records that have been modified more recently in Moodle than " \
           "in the spreadsheet\" unticked" in done.steps[0]
    assert any(n.startswith("1 student(s) have the grade 0 in the worksheet: ana (@Ana Lima)")
               for n in done.notes)
    assert any(n.startswith(f"1 row(s) of {sheet.name} are participants this class does not")
               for n in done.notes)


def test_moodle_worksheet_html_and_quotes_are_safe_for_moodles_reader(tmp_path):
    rows_text = WORKSHEET.replace("\ufeff", "")  # a worksheet saved without a BOM
    sheet, out = _worksheet_class(tmp_path, sheet_text=rows_text)
    rows = moodle_rows()
    for row, participant in zip(rows, ("123456", "654321", "123458")):
        row.student.lms_ids["participant"] = participant
    rows[1].exercises = [{"exercise": "ex1", "score": 1, "max_score": 2,
                          "message": 'expected "C:\\\\" <path>\r\nmore'}]
    write_class(out, "lab1", "Lab 1", rows, roster_lms="moodle", roster_kind="moodle worksheet",
                roster_file=str(sheet))
    written = export(out, "moodle").dest / sheet.name
    data = written.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf")
    comment = moodle_worksheet_upload(written, 10.0)["654321"][1]
    assert comment == "Score: 10/10<br>ex1: 1/2 - expected &quot;C:\\\\&quot; &lt;path&gt;"
    # PHP's fgetcsv takes \ as an escape: nothing the kit writes has \ before a quote
    assert b'\\"' not in data


def test_moodle_worksheet_late_modes(tmp_path):
    sheet, out = _worksheet_class(tmp_path, late_policy=POLICY, penalised=1)
    done = export(out, "moodle")
    assert done.steps[0].startswith("BEFORE uploading the worksheet, if this assignment's "
                                    "\"Grade penalties\" is on, turn it off: the assignment > "
                                    "Settings > Grade > \"Grade penalties\" (Moodle 5.0")
    assert "Moodle before 5.0 takes no late penalty of its own" in done.notes[0]
    assert _read(done.dest / sheet.name)[1][GRADE] == "6"
    done = export(out, "moodle", late="lms")
    jane = _read(done.dest / sheet.name)[1]
    assert jane[GRADE] == "7" and jane[FEEDBACK].startswith(
        "Score: 7/10<br>Submitted 2.00 hours late (the late penalty is the LMS's to take)")
    assert done.notes[0].startswith("Late penalty: left to Moodle (--late lms)")
    assert not any("Grade penalties" in step for step in done.steps)
    # the same worksheet filled in again, jane's grade changed: said first (issue 46)
    assert done.steps[0].startswith(f"BEFORE uploading: {sheet.name} is the same worksheet an "
                                    f"earlier export filled in")


def test_moodle_worksheet_from_a_moodle_download_and_worksheet_option(tmp_path):
    """Graded with Moodle's gradebook export as roster: the participant ids come
    from the download's folder names, the worksheet from --worksheet."""
    sheet, _ = _worksheet_class(tmp_path)
    rows = moodle_rows()
    rows[2].identity = Identity("moodle", "Ana Lima", "123458")  # her folder, no file
    rows[1].identity = Identity("moodle", "Tom", "654321")
    out = _with_facts(tmp_path / "g", rows, lms="moodle", roster_kind="moodle gradebook",
                      roster_file="gone.csv")
    with pytest.raises(ValueError, match=r"the roster was 'moodle gradebook' \(gone.csv\): "
                                         r"grade the lab with the assignment's grading "
                                         r"worksheet as --roster .*--worksheet FILE.*"
                                         r"--moodle-route gradebook"):
        export(out, "moodle")
    done = export(out, "moodle", worksheet=sheet)
    assert [row[GRADE] for row in _read(done.dest / sheet.name)[1:]] == ["6", "10", "0", ""]
    assert main(["export", "lab1", str(out), "--to", "moodle", "--worksheet", str(sheet),
                 "--dest", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / sheet.name).is_file()


def test_moodle_worksheet_refusals(tmp_path):
    sheet, out = _worksheet_class(tmp_path)
    # no participant id
    rows = moodle_rows()
    write_class(out, "lab1", "Lab 1", rows, roster_lms="moodle", roster_kind="moodle worksheet",
                roster_file=str(sheet))
    rows[0].student.lms_ids["participant"] = "123456"
    rows[2].identity = None
    write_class(out, "lab1", "Lab 1", rows, roster_lms="moodle", roster_kind="moodle worksheet",
                roster_file=str(sheet))
    with pytest.raises(ValueError, match=r"1 student\(s\) have no Moodle participant id.*ana "
                                         r"\(@Ana Lima\).*grading worksheet as --roster"):
        export(out, "moodle")
    # a student the worksheet does not list
    sheet, out = _worksheet_class(tmp_path / "b", participants=("123456", "654321", "777777"))
    with pytest.raises(ValueError, match=r"1 student\(s\) of the class are not in the worksheet "
                                         r".*ana \(@Ana Lima\).*download the grading worksheet "
                                         r"again"):
        export(out, "moodle")
    # a worksheet without the column Moodle's upload compares times with
    text = WORKSHEET.replace('"Last modified (grade)"', '"Last changed"')
    sheet, out = _worksheet_class(tmp_path / "c", sheet_text=text)
    with pytest.raises(ValueError, match=r"no 'Last modified \(grade\)' column, named exactly "
                                         r"so.*importgradeslib.php"):
        export(out, "moodle")
    # the roster moved away
    sheet, out = _worksheet_class(tmp_path / "d")
    sheet.unlink()
    with pytest.raises(ValueError, match=r"is not there any more: give it with --worksheet"):
        export(out, "moodle")
    with pytest.raises(ValueError, match=r"is not a file"):
        export(out, "moodle", worksheet=tmp_path / "nothing.csv")


def test_moodle_worksheet_notes_maximum_and_missing_feedback_column(tmp_path):
    text = WORKSHEET.replace(',"Feedback comments"', "").replace("10.00,", "100.00,")
    text = "\n".join(line.rsplit(",", 1)[0] if line.startswith('"Participant') else line
                     for line in text.split("\n"))
    sheet, out = _worksheet_class(tmp_path, sheet_text=text)
    done = export(out, "moodle")
    assert any("has no \"Feedback comments\" column" in note for note in done.notes)
    assert any("Maximum grade for this assignment is 100.00, and the lab has 10 points" in note
               for note in done.notes)
    assert len(_read(done.dest / sheet.name)[1]) == 9


def test_moodle_worksheet_route_needs_the_worksheet(tmp_path, capsys):
    out = _out(tmp_path, moodle_rows(), lms="moodle")
    with pytest.raises(ValueError, match=r"the lab was graded without a roster: grade the lab "
                                         r"with the assignment's grading worksheet as --roster"):
        export(out, "moodle")
    assert main(["export", "lab1", str(out), "--to", "moodle"]) == 2
    assert "--moodle-route gradebook" in capsys.readouterr().err


def test_unknown_late_and_route_are_clear_errors(tmp_path):
    out = _out(tmp_path, canvas_rows())
    with pytest.raises(ValueError, match=r"Unknown late mode 'both'"):
        export(out, "canvas", late="both")
    with pytest.raises(ValueError, match=r"Unknown Moodle route 'zip'"):
        export(out, "moodle", moodle_route="zip")
    with pytest.raises(ValueError, match=r"Unknown export format 'moodle gradebook'"):
        export(out, "moodle gradebook")
