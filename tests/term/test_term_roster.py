"""autograder.term.roster: the roster files of Canvas, Moodle and a plain CSV, and matching.

The roster files below are written by hand from what each LMS writes:

- Canvas: the gradebook export as lib/gradebook_exporter.rb (instructure/
  canvas-lms) writes it: header "Student, ID, SIS User ID, SIS Login ID,
  [Integration ID], Section, <title> (<id>)..., totals"; an optional
  "Manual Posting" row with empty student cells; the row "    Points
  Possible"; the test student ("Student, Test") last; a UTF-8 BOM when the
  user asks for one.
- Moodle: the grading worksheet as mod/assign/gradingtable.php writes it
  ("Identifier" = "Participant <id>", "Full name", identity fields, "Status",
  "Grade", "Maximum Grade", "Grade can be changed", ...) and the gradebook's
  plain-text export (grade/export/txt: "First name", "Last name", "ID number",
  "Institution", "Department", "Email address", grade items, "Last downloaded
  from this course"), with Moodle's separators (comma, semicolon, tab).
"""

from __future__ import annotations

import re

import pytest

from autograder.term.model import Identity
from autograder.term.roster import Roster, read_roster

CANVAS = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Integration ID,Section,"
    "Lab 1 (12345),Lab 2 (12346),Current Score,Unposted Current Score,Final Score,"
    "Unposted Final Score\r\n"
    ",,,,,,Manual Posting,,,,,\r\n"
    "    Points Possible,,,,,,10.00,10.00,(read only),(read only),(read only),(read only)\r\n"
    "\"Doe, Jane\",101,S0001,jdoe,,Section A,9.00,,90.00,90.00,45.00,45.00\r\n"
    "\"Müller, José\",102,,,,Section A and Section B,8.00,7.00,75.00,75.00,75.00,75.00\r\n"
    "\"Ng, Amy\",103,S0003,,,Section B,N/A,EX,,,,\r\n"
    "\"Student, Test\",999,,,,Section A,,,,,,\r\n"
)


def write(tmp_path, text, name="roster.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def error(path) -> str:
    with pytest.raises(ValueError) as caught:
        read_roster(path)
    return str(caught.value)


# -- Canvas ----------------------------------------------------------------------


def test_canvas_gradebook(tmp_path):
    roster = read_roster(write(tmp_path, CANVAS))
    assert roster.lms == "canvas"
    assert roster.kind == "canvas gradebook"
    assert roster.assignments == ["Lab 1 (12345)", "Lab 2 (12346)"]
    assert [s.student_id for s in roster] == ["jdoe", "mullerjose_102", "S0003"]
    jane, jose, amy = roster.students
    assert (jane.name, jane.section, jane.email) == ("Jane Doe", "Section A", "")
    assert jane.lms_ids == {"id": "101", "sis_user_id": "S0001", "sis_login_id": "jdoe"}
    assert jose.name == "José Müller"
    assert jose.section == "Section A and Section B"
    assert jose.lms_ids == {"id": "102"}
    assert amy.lms_ids == {"id": "103", "sis_user_id": "S0003"}
    assert len(roster) == 3
    # the "Manual Posting" and "Points Possible" rows are skipped without a note
    assert len(roster.notes) == 1 and "line 7" in roster.notes[0] and "test student" in roster.notes[0]
    assert roster.by_id("S0003") is amy
    assert roster.by_id("nobody") is None


def test_canvas_semicolons_first_last_names_and_formula_names(tmp_path):
    # Canvas uses the user's CSV separator (semicolon in many locales), and the
    # LastName/FirstName columns when the course shows split names.
    text = ("LastName;FirstName;ID;SIS Login ID;Section;Lab 1 (5)\n"
            "    Points Possible;;;;;10\n"
            "Ørsted;Hans;7;;S1;\n")
    roster = read_roster(write(tmp_path, text))
    assert roster.delimiter == ";"
    (hans,) = roster.students
    # no SIS id: "<sortable name>_<ID>" as Canvas names downloads, sanitized like
    # lms/ids.py sanitizes them (Ø has no ASCII decomposition and is dropped)
    assert (hans.student_id, hans.name) == ("rstedhans_7", "Hans Ørsted")
    text = 'Student,ID,SIS Login ID,Section\n"=""=Eve, Ann""",8,,S\n'
    (eve,) = read_roster(write(tmp_path, text, "f.csv")).students
    assert eve.name == "Ann =Eve"


def test_canvas_errors(tmp_path):
    path = write(tmp_path, "Student,ID,SIS Login ID,Section\n\"Doe, Jane\",,jd,S\n")
    message = error(path)
    assert str(path) in message and "line 2" in message and "'Doe, Jane' has no Canvas ID" in message
    path = write(tmp_path, "Student,ID,SIS Login ID,Section\n\"A, B\",1,x,S\n\"C, D\",1,y,S\n")
    assert "lines 2 and 3 have the same id '1'" in error(path)
    path = write(tmp_path, "Student,ID,SIS Login ID,Section\n\"A, B\",1,x,S\n\"C, D\",2,X,S\n")
    assert "lines 2 and 3 have the same sis_login_id 'X'" in error(path)
    path = write(tmp_path, "Student,ID,SIS Login ID,Section\n    Points Possible,,,\n")
    assert "lists no students" in error(path)


# -- Moodle ----------------------------------------------------------------------

WORKSHEET = (
    "Identifier,\"Full name\",\"Email address\",Status,Grade,\"Maximum Grade\","
    "\"Grade can be changed\",\"Last modified (submission)\",\"Last modified (grade)\","
    "\"Feedback comments\"\n"
    "\"Participant 123456\",\"Jane Doe\",jane@uni.example,\"Submitted for grading\",,"
    "100.00,Yes,\"Monday, 2 September 2024, 10:00 AM\",-,\n"
    "\"Participant 123457\",\"José María\",,\"No submission\",,100.00,Yes,-,-,\n"
    "\"Participant 123458\",\"Jane  Doé\",jd2@uni.example,\"No submission\",,100.00,Yes,-,-,\n"
)


def test_moodle_worksheet(tmp_path):
    roster = read_roster(write(tmp_path, WORKSHEET))
    assert (roster.lms, roster.kind, roster.assignments) == ("moodle", "moodle worksheet", ["Grade"])
    assert [s.student_id for s in roster] == ["jane", "Jose_Maria_123457", "jd2"]
    jane = roster.students[0]
    assert (jane.name, jane.email, jane.lms_ids) == ("Jane Doe", "jane@uni.example",
                                                    {"participant": "123456"})


def test_moodle_worksheet_blind_marking_and_identity_fields(tmp_path):
    text = ("Identifier;Status;Grade;\"Maximum Grade\"\n"
            "\"Participant 5\";\"No submission\";;10,00\n")
    (anon,) = read_roster(write(tmp_path, text)).students
    assert anon.student_id == "Participant_5"  # Moodle's blind download folder name
    text = ("Identifier\tFull name\tID number\tUsername\tStatus\tGrade\n"
            "Participant 9\tAl Bo\t\tabo\tNo submission\t\n"
            "Participant 10\tCy Do\tU-10\tcdo\tNo submission\t\n")
    roster = read_roster(write(tmp_path, text, "t.csv"))
    assert roster.delimiter == "\t"
    assert [s.student_id for s in roster] == ["abo", "U-10"]
    assert roster.students[1].lms_ids == {"participant": "10", "id_number": "U-10", "username": "cdo"}


def test_moodle_gradebook_semicolons_bom(tmp_path):
    text = ("\ufeff\"First name\";\"Last name\";\"ID number\";Institution;Department;"
            "\"Email address\";\"Assignment: Lab 1 (Real)\";\"Course total (Real)\";"
            "\"Last downloaded from this course\"\n"
            "Jane;Doe;20240001;;;jane@uni.example;9,00;9,00;1725264000\n"
            "Zoë;Ünal;;;;zunal@uni.example;-;-;1725264000\n"
            "Bo;Li;;;;;-;-;1725264000\n")
    roster = read_roster(write(tmp_path, text))
    assert (roster.lms, roster.kind, roster.delimiter) == ("moodle", "moodle gradebook", ";")
    assert roster.assignments == ["Assignment: Lab 1 (Real)", "Course total (Real)"]
    assert [s.student_id for s in roster] == ["20240001", "zunal", "Bo_Li"]
    assert roster.students[1].name == "Zoë Ünal"
    assert any("matched by full name" in n for n in roster.notes)


def test_moodle_errors(tmp_path):
    path = write(tmp_path, "Identifier,Full name,Status\nStudent X,A B,-\n")
    assert "line 2: the Identifier 'Student X' is not 'Participant <number>'" in error(path)
    path = write(tmp_path, "Identifier,Full name,Status\n,A B,-\n")
    assert "line 2: no Identifier" in error(path)
    path = write(tmp_path, "Identifier,Full name,Status\nParticipant 1,A,-\nParticipant 1,B,-\n")
    assert "lines 2 and 3 have the same participant '1'" in error(path)
    path = write(tmp_path, "First name,Last name,Email address,Assignment: Lab 1 (Real)\n"
                           ",,\"\",\nA,B,,1\n,,,5\n")
    assert "line 4: the row has no name, ID number, username or email" in error(path)


# -- plain CSV -------------------------------------------------------------------


def test_plain_csv(tmp_path):
    text = "Student_ID,Name,Email,Section,GitHub\ns1,Jane Doe,jane@x.org,A,janed\ns 2,Bo,,,\n"
    roster = read_roster(write(tmp_path, text))
    assert (roster.lms, roster.kind, roster.assignments) == ("csv", "csv", [])
    jane, bo = roster.students
    assert (jane.student_id, jane.name, jane.email, jane.section) == ("s1", "Jane Doe", "jane@x.org", "A")
    assert jane.lms_ids == {"github": "janed"}
    assert bo.student_id == "s_2" and bo.lms_ids == {}
    assert any("line 3" in n and "'s 2' is used as 's_2'" in n for n in roster.notes)


def test_plain_csv_colliding_sanitized_ids_get_suffixes(tmp_path):
    roster = read_roster(write(tmp_path, "student_id\njane doe\njane_doe\n"))
    # the id written exactly keeps it, whatever the order of the lines
    assert [s.student_id for s in roster] == ["jane_doe-2", "jane_doe"]
    assert "line 2: the id 'jane_doe' is another student's too; this student is 'jane_doe-2'" \
        in roster.notes


def test_plain_errors(tmp_path):
    path = write(tmp_path, "student_id,name\ns1,A\n,B\n")
    assert f"{path}: line 3: no student_id" in error(path)
    path = write(tmp_path, "student_id,name\n???,A\n")
    assert "line 2: the student_id '???' has no letter or digit" in error(path)
    path = write(tmp_path, "student_id,name\ns1,A\ns2,B\nS1,C\n")
    assert "lines 2 and 4 have the same student_id 'S1'" in error(path)
    path = write(tmp_path, "id,name,email\n1,A,a@x\n")
    assert "line 1: the roster has no 'student_id' column" in error(path)


# -- files and encodings ---------------------------------------------------------


def test_empty_unrecognized_and_missing(tmp_path):
    assert "the roster is empty" in error(write(tmp_path, ""))
    assert "the roster is empty" in error(write(tmp_path, "\ufeff\n\n", "b.csv"))
    message = error(write(tmp_path, "foo,bar\n1,2\n", "c.csv"))
    assert "line 1: the header ('foo', 'bar') is not a roster" in message
    assert "student_id" in message and "Canvas" in message and "Moodle" in message
    assert "cannot be read" in error(tmp_path / "missing.csv")
    assert "lists no students" in error(write(tmp_path, "student_id\n", "d.csv"))
    assert "only empty cells" in error(write(tmp_path, ",,,\n,\n", "e.csv"))


def test_utf16_and_cp1252(tmp_path):
    text = "student_id\tname\r\ns1\tRenée\r\n"
    roster = read_roster(write(tmp_path, text, encoding="utf-16"))  # Excel "Unicode text"
    assert roster.students[0].name == "Renée" and roster.notes == []
    roster = read_roster(write(tmp_path, "student_id,name\ns1,Renée\n", "w.csv", encoding="cp1252"))
    assert roster.students[0].name == "Renée"
    assert any("Windows-1252" in n and "line 2" in n for n in roster.notes)
    message = error(write(tmp_path, b"student_id,name\ns1,Ren\x81e\n", "x.csv"))
    assert "line 2 is not UTF-8" in message and "CSV UTF-8" in message


def test_control_characters_are_removed(tmp_path):
    roster = read_roster(write(tmp_path, "student_id,name\ns1,\x1b[8mEve\n"))
    assert roster.students[0].name == "Eve"


# -- matching --------------------------------------------------------------------


@pytest.fixture
def canvas(tmp_path) -> Roster:
    return read_roster(write(tmp_path, CANVAS, "canvas.csv"))


def test_match_canvas(canvas):
    assert canvas.match(Identity("canvas", "mullerjose", "102")).student_id == "mullerjose_102"
    assert canvas.match(Identity("canvas", "doejane", "101")).student_id == "jdoe"
    assert canvas.match(Identity("canvas", "doejane", "555")) is None
    assert canvas.match_reason(Identity("canvas", "doejane", "555")) == \
        "Canvas user id '555' matches nobody"
    assert canvas.match(Identity("canvas", "studenttest", "999")) is None  # skipped test student


def test_match_moodle_by_participant(tmp_path):
    roster = read_roster(write(tmp_path, WORKSHEET))
    jane = Identity("moodle", "Jane Doe", "123456", submission_id="Jane Doe_123456_assignsubmission_file_")
    assert roster.match(jane).student_id == "jane"
    assert roster.match(Identity("moodle", "Jane Doe", "1")) is None
    assert "participant '1' matches nobody" in roster.match_reason(Identity("moodle", "Jane Doe", "1"))


def test_match_moodle_by_name_without_participants(tmp_path):
    text = ("First name,Last name,Email address\nJosé,María,jm@x\nJane,Doe,j1@x\n"
            "JANE,Doé,j2@x\n")
    roster = read_roster(write(tmp_path, text))
    found = roster.match(Identity("moodle", "jose  maria", "77"))
    assert found.student_id == "jm"
    assert "no Moodle participant ids" in roster.match_reason(Identity("moodle", "Jose Maria", "7"))
    assert roster.match(Identity("moodle", "Jane Doe", "8")) is None
    assert "matches 2 students: j1, j2" in roster.match_reason(Identity("moodle", "Jane Doe", "8"))
    assert "matches nobody" in roster.match_reason(Identity("moodle", "Al Bo", "9"))
    assert roster.match(Identity("moodle", "", "9")) is None


def test_match_gradescope(tmp_path, canvas):
    assert canvas.match(Identity("gradescope", "Jane Doe", "S0001")).student_id == "jdoe"
    assert canvas.match(Identity("gradescope", "", "s0003")).student_id == "S0003"
    assert canvas.match(Identity("gradescope", "", "jdoe")).student_id == "jdoe"
    assert canvas.match(Identity("gradescope", "", "777")) is None
    assert "sid '777' matches nobody" in canvas.match_reason(Identity("gradescope", "", "777"))
    roster = read_roster(write(tmp_path, "student_id,email,id_number\ns1,Jane@X.org,\n"
                                         "s2,bo@x.org,42\n", "g.csv"))
    assert roster.match(Identity("gradescope", "", "", email="jane@x.org")).student_id == "s1"
    assert roster.match(Identity("gradescope", "", "42")).student_id == "s2"
    # an unknown sid falls back to the email
    assert roster.match(Identity("gradescope", "", "999", email="bo@x.org")).student_id == "s2"
    assert "no sid and no email" in roster.match_reason(Identity("gradescope"))


def test_match_folder_and_file(tmp_path):
    text = ("Identifier,Full name,Email address,ID number,Username,Status\n"
            "Participant 1,Jane Doe,jane.doe@uni.example,U1,jdoe,-\n"
            "Participant 2,Bo Li,bo@uni.example,U2,bli,-\n"
            "Participant 3,Bo Li,bo@other.example,,bli2,-\n")
    roster = read_roster(write(tmp_path, text))
    assert roster.match(Identity("folder", "U1")).student_id == "U1"
    assert roster.match(Identity("file", "JDOE")).student_id == "U1"
    assert roster.match(Identity("file", "jane.doe")).student_id == "U1"
    assert roster.match(Identity("folder", "jane.doe@uni.example")).student_id == "U1"
    assert roster.match(Identity("folder", "u2")).student_id == "U2"
    assert roster.match(Identity("folder", "bo")) is None
    assert roster.match_reason(Identity("folder", "bo")) == "the name 'bo' matches 2 students: U2, bli2"
    assert roster.match_reason(Identity("file", "zed")) == "the name 'zed' matches nobody"
    assert roster.match(Identity("file", "")) is None


def test_student_id_beats_other_keys(tmp_path):
    # "jdoe" is one student's id and another's username: the id decides.
    text = "student_id,email,username\njdoe,a@x,\nzz,b@x,jdoe\n"
    roster = read_roster(write(tmp_path, text))
    assert roster.match(Identity("folder", "jdoe")).email == "a@x"


def test_match_canvas_without_canvas_ids_uses_the_name(tmp_path):
    roster = read_roster(write(tmp_path, "student_id,name\ndoejane_12345,Jane Doe\n"))
    found, why = roster.resolve(Identity("canvas", "doejane", "12345"))
    assert found is None and "no Canvas user ids" in why
    assert roster.match(Identity("canvas", "doejane_12345", "12345")).student_id == "doejane_12345"


def test_unknown_source(canvas):
    with pytest.raises(ValueError, match=re.escape("Identity source 'email' is unknown")):
        canvas.match(Identity("email", "x"))
