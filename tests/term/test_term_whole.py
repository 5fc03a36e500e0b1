"""autograder.term.whole and whole_files: the whole term in one gradebook.

Two labs' OUT folders are made without grading (class.json written with
made-up rows, as tests/term/test_term_export.py does); the expected totals are
worked out by hand from the weights. The Canvas import is read with the
importer re-implemented in tests/term/test_term_export.py (``canvas_import``);
Moodle's gradebook import (grade/import/csv) is re-implemented below from
its source.
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from autograder.cli import main
from autograder.term.model import ClassRow, Student, write_class
from autograder.term.whole import (ABSENT, EXCUSED, NO_ROW, TermSettings, build_gradebook,
                                   parse_lab_arguments)
from autograder.term.whole_files import read_term_csv, write_term
from tests.term.test_term_export import canvas_import

COLUMNS = ["Lab 1 (4321)", "Lab 4 (4324)"]


def _student(sid, name, user_id, email=None, **ids):
    return Student(sid, name, email if email is not None else f"{sid}@uni.edu", "Section A",
                   {"id": str(user_id), **ids})


def _row(student, lab, score, max_score, status="graded", penalty=0.0, late=0.0, regrades=()):
    return ClassRow(student=student, lab=lab, score=score, raw_score=score + penalty,
                    max_score=max_score, status=status, penalty=penalty, late_seconds=late,
                    regrades=list(regrades))


def _lab(tmp_path, lab, title, rows, roster=True):
    out = tmp_path / f"{lab}-out"
    out.mkdir(parents=True, exist_ok=True)
    facts = ({"roster_kind": "canvas gradebook", "roster_file": "roster.csv",
              "roster_assignments": COLUMNS} if roster else {})
    write_class(out, lab, title, rows, roster_lms="canvas" if roster else "", **facts)
    return out


ANN = _student("ann", "Ann Lee", 101, sis_user_id="S1", sis_login_id="alee")
BOB = _student("bob", "Bob Jones", 102)
CARA = _student("cara", "Cara Díaz", 103)
DAN = _student("dan", "Dan Wu", 104)
GRANTED = {"exercise": "softmax", "asked": "2026-10-12", "request": "overflow?",
           "decision": "granted", "score": 2.0, "reason": "the test was wrong", "by": "Dr Smith",
           "line": 2}


def term_class(tmp_path, lab4_roster=True):
    """lab1 (10 points) and lab4 (20): ann late in lab4, bob sent no lab 1, cara is
    excused from lab4 (course.toml), dan left after lab 1 (not on lab4's roster)."""
    lab1 = _lab(tmp_path, "lab1", "Lab 1: Attention", [
        _row(ANN, "lab1", 8, 10, regrades=[GRANTED]), _row(BOB, "lab1", 0, 10, "no submission"),
        _row(CARA, "lab1", 5, 10), _row(DAN, "lab1", 7, 10)])
    lab4 = _lab(tmp_path, "lab4", "Lab 4: Transformer block", [
        _row(ANN, "lab4", 16, 20, penalty=2, late=90000), _row(BOB, "lab4", 20, 20),
        _row(CARA, "lab4", 10, 20)], roster=lab4_roster)
    (tmp_path / "excused.csv").write_text("student_id,lab,reason\ncara@uni.edu,lab4,"
                                          "medical note\n", encoding="utf-8")
    course = tmp_path / "course.toml"
    course.write_text('[term]\nlabs = { lab1 = "lab1-out", lab4 = "lab4-out" }\n'
                      'weights = { lab1 = 1, lab4 = 2 }\nexcused = "excused.csv"\n',
                      encoding="utf-8")
    return course, lab1, lab4


def _settings(course, **overrides):
    import tomllib

    table = tomllib.loads(course.read_text(encoding="utf-8"))["term"]
    table.update(overrides)
    return TermSettings.from_settings(table, course.parent)


def _totals(book):
    return {r.student.student_id: (round(r.total, 2) if r.total is not None else None)
            for r in book.rows}


def test_weights_excused_and_a_student_who_left(tmp_path):
    course, _, _ = term_class(tmp_path)
    book = build_gradebook(_settings(course))
    assert [lab.weight for lab in book.labs] == pytest.approx([1 / 3, 2 / 3])
    # ann .8 and .8; bob 0 and 1 -> 2/3; cara excused from lab4 -> lab 1 alone;
    # dan not on lab4's roster -> lab 1 alone
    assert _totals(book) == {"ann": 80.0, "bob": 66.67, "cara": 50.0, "dan": 70.0}
    cara, dan = book.rows[2], book.rows[3]
    assert cara.cells["lab4"].state == EXCUSED
    assert "lab4: excused (medical note; excused.csv, line 2); its score 10/20 is left out" \
        in cara.notes
    assert dan.cells["lab4"].state == ABSENT
    assert dan.notes == ["lab4: not on lab4's roster (roster.csv): not enrolled when it was "
                         "graded; the lab does not count for them"]
    stats = book.stats("lab4")
    assert (stats["students"], stats["submitted"], stats["excused"], stats["late"]) == \
        (3, 2, 1, 1)
    assert stats["mean"] == 18 and stats["penalties"] == 2


def test_drop_lowest_never_an_excused_lab_nor_the_last(tmp_path):
    course, _, _ = term_class(tmp_path)
    book = build_gradebook(_settings(course, drop_lowest=1))
    # ann: a tie drops the later lab; bob: his 0 is dropped; cara and dan: one lab counts
    assert _totals(book) == {"ann": 80.0, "bob": 100.0, "cara": 50.0, "dan": 70.0}
    assert [n for n, c in book.rows[0].cells.items() if c.dropped] == ["lab4"]
    assert [n for n, c in book.rows[1].cells.items() if c.dropped] == ["lab1"]
    assert not any(c.dropped for r in book.rows[2:] for c in r.cells.values())
    assert "dropped 0 lab(s), not 1: 1 count for this student and one must stay" \
        in book.rows[2].notes


def test_a_lab_graded_without_a_roster_counts_a_missing_row_as_zero(tmp_path):
    course, _, _ = term_class(tmp_path, lab4_roster=False)
    book = build_gradebook(_settings(course))
    dan = book.rows[3]
    assert dan.cells["lab4"].state == NO_ROW and dan.cells["lab4"].score == 0
    assert round(dan.total, 2) == 23.33          # (0.7 * 1 + 0 * 2) / 3


def test_term_csv_and_report(tmp_path):
    course, _, _ = term_class(tmp_path)
    done = write_term(build_gradebook(_settings(course)), tmp_path / "term-out")
    rows = read_term_csv(done.dest / "term.csv")
    assert list(rows[0]) == ["student_id", "name", "email", "section", "lab1 score", "lab1 max",
                             "lab1 late penalty", "lab4 score", "lab4 max", "lab4 late penalty",
                             "dropped", "total percent", "notes"]
    ann = rows[0]
    assert (ann["lab1 score"], ann["lab4 score"], ann["lab4 late penalty"],
            ann["total percent"]) == ("8", "16", "2", "80.00")
    assert ann["notes"] == ("lab1: regrade request of 2026-10-12 (softmax): granted — the test "
                            "was wrong | lab4: late, -2 (after the late penalty: 16)")
    assert rows[1]["lab1 score"] == "0" and rows[2]["lab4 score"] == "EX"
    assert rows[3]["lab4 score"] == "" and rows[3]["total percent"] == "70.00"
    page = (done.dest / "term.html").read_text(encoding="utf-8")
    for heading in ("Labs", "Students to check", "Who is missing what", "Late", "Excused",
                    "Dropped", "Regrade requests", "The gradebook"):
        assert f"<h2>{heading}</h2>" in page
    assert "lab1 33.33%, lab4 66.67%" in page
    assert "<td>bob (Bob Jones)</td><td>lab1</td><td class=\"msg\">no submission</td>" in page
    assert "<td>ann</td><td class=\"num\">2</td><td class=\"msg\">lab4: 1 day 1 h late, " \
           "&minus;2</td>" in page
    assert set(done.files) == {"term.csv", "term.html", "README.txt", "export/canvas/grades.csv",
                               "export/moodle/grades.csv", "export/csv/grades.csv"}


def test_the_canvas_import_sets_every_lab_column(tmp_path):
    course, _, _ = term_class(tmp_path)
    done = write_term(build_gradebook(_settings(course)), tmp_path / "term-out")
    seen = canvas_import(done.dest / "export" / "canvas" / "grades.csv")
    # the roster's "Name (id)" columns: Canvas fills the existing assignments
    assert seen["assignments"] == COLUMNS
    assert seen["points"] == [["Points Possible", None, None, None, None, "10", "20"]]
    assert seen["skipped"] == []
    assert {s["id"]: s["grades"] for s in seen["students"]} == {
        "101": ["8", "16"], "102": ["0", "20"], "103": ["5", "EX"], "104": ["7", None]}
    assert any("removes a grade Canvas has there" in note for note in done.notes)


def moodle_gradebook_import(path, key_column: str, mapping: dict[str, int],
                            users: dict[str, int], gradepointmax: float = 100) -> dict:
    """What Moodle's grade/import/csv does with a file, from its source
    (moodle/moodle grade/import/csv/classes/load_data.php): user id -> {grade item:
    final grade or None}. ``mapping``: the columns mapped to grade items on the
    import's second page; ``users``: the key -> Moodle's user id."""
    text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    records = list(csv.reader(io.StringIO(text, newline="")))
    header = [h.strip() for h in records[0]]                     # trim_headers
    items = [mapping[h] for h in header if h in mapping]
    assert len(items) == len(set(items))                           # 'cannotmapfield'
    found = {}
    for line in records[1:]:
        if len(line) <= 1:                                         # no data on this line
            continue
        grades, user = {}, None
        for name, value in zip(header, line):
            value = value.strip()
            if name == key_column:
                user = users.get(value)                            # check_user_exists
                assert user is not None, f"usermappingerror: {value}"   # aborts the import
            elif name in mapping:                                  # update_grade_item
                if value in ("", "-"):
                    grades[mapping[name]] = None                   # no grade
                else:
                    assert re.fullmatch(r"-?\d+(\.\d+)?", value), "badgrade"
                    assert float(value) <= gradepointmax, "gradevaluetoobig"
                    grades[mapping[name]] = float(value)
        found[user] = grades
    return found


def test_the_moodle_import_sets_every_lab_column(tmp_path):
    course, _, _ = term_class(tmp_path)
    done = write_term(build_gradebook(_settings(course)), tmp_path / "term-out")
    path = done.dest / "export" / "moodle" / "grades.csv"
    header = next(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert header == ["Full name", "Email address", "Lab 1: Attention",
                      "Lab 4: Transformer block"]
    users = {f"{s}@uni.edu": n for n, s in enumerate(["ann", "bob", "cara", "dan"], 1)}
    seen = moodle_gradebook_import(path, "Email address", {"Lab 1: Attention": 11,
                                                           "Lab 4: Transformer block": 14},
                                   users)
    assert seen == {1: {11: 8.0, 14: 16.0}, 2: {11: 0.0, 14: 20.0}, 3: {11: 5.0, 14: None},
                    4: {11: 7.0, 14: None}}
    step = next(s for s in done.steps if s.startswith("export/moodle/grades.csv"))
    assert "lab1 10, lab4 20" in step and "Exclude empty grades" in step
    plain = list(csv.reader(io.StringIO((done.dest / "export" / "csv" / "grades.csv")
                                        .read_text(encoding="utf-8"))))
    assert plain[0] == ["student_id", "name", "email", "section", "lab1", "lab4",
                        "total_percent"]
    assert plain[3][4:] == ["5", "EX", "50.00"]


def test_students_under_other_ids_or_names_are_flagged_never_merged(tmp_path):
    eve = _student("eve", "Eve Adams", 105)
    eve_again = _student("eve_b", "Eve Adams", 105, email="eve@uni.edu")
    zoe, zoe_renamed = _student("zoe", "Zoe Park", 106), _student("zoe", "Zoë Park", 106)
    jane_a, jane_b = _student("jd_a", "Jane Doe", 107), _student("jd_b", "Jane Doe", 108)
    _lab(tmp_path, "lab1", "Lab 1", [_row(eve, "lab1", 5, 10), _row(zoe, "lab1", 6, 10),
                                     _row(jane_a, "lab1", 1, 10), _row(jane_b, "lab1", 2, 10)])
    _lab(tmp_path, "lab4", "Lab 4", [_row(eve_again, "lab4", 10, 20),
                                     _row(zoe_renamed, "lab4", 12, 20),
                                     _row(jane_a, "lab4", 3, 20), _row(jane_b, "lab4", 4, 20)])
    settings = TermSettings.from_settings({}, tmp_path, parse_lab_arguments(
        [f"lab1={tmp_path / 'lab1-out'}", f"lab4={tmp_path / 'lab4-out'}"]))
    book = build_gradebook(settings)
    rows = {r.student.student_id: r for r in book.rows}
    assert sorted(rows) == ["eve", "eve_b", "jd_a", "jd_b", "zoe"]      # eve twice, zoe once
    assert rows["eve"].flags == [
        "maybe the same student as eve_b (email 'eve@uni.edu'): not merged. If one person, "
        "give them one student_id in the rosters and grade the labs again",
        "maybe the same student as eve_b (id '105'): not merged. If one person, give them one "
        "student_id in the rosters and grade the labs again",
        "maybe the same student as eve_b (the name 'Eve Adams'): not merged. If one person, "
        "give them one student_id in the rosters and grade the labs again"]
    assert rows["eve"].cells["lab4"].state == ABSENT and rows["eve_b"].cells["lab1"].state \
        == ABSENT
    assert rows["zoe"].flags == ["named 'Zoe Park' in lab1 and 'Zoë Park' in lab4: one "
                                 "student_id, joined as one student; check that it is one "
                                 "person"]
    assert rows["jd_a"].flags == [] and rows["jd_b"].flags == []   # two people in one lab
    done = write_term(book, tmp_path / "term-out")
    assert "one Canvas user id '105'" in done.not_written["canvas"]
    assert "export/canvas/grades.csv" not in done.files
    assert "1 student(s) to check" not in " ".join(book.notes)
    assert "3 student(s) to check" in " ".join(book.notes)


@pytest.mark.parametrize("overrides, message", [
    ({"weight": 1}, "[term] has weight, which the kit does not know; the settings are labs, "
                    "weights"),
    ({"weights": {"lab1": 1}}, "weights has no weight for lab4: give every lab of the term a "
                               "weight"),
    ({"weights": {"lab1": -1, "lab4": 1}}, "weights.lab1 = -1: give a number, 0 or more"),
    ({"weights": {"lab1": 0, "lab4": 0}}, "weights are all 0"),
    ({"weights": [1, 2]}, "weights = [1, 2]: give a table"),
    ({"drop_lowest": 2}, "drop_lowest = 2 with 2 lab(s): at least one lab must count; give at "
                         "most 1"),
    ({"drop_lowest": 0.5}, "drop_lowest = 0.5: give a whole number"),
    ({"labs": {"lab1": 3}}, "labs.lab1 = 3: give the lab's OUT folder as a string"),
    ({"labs": {}}, "No lab for the term"),
    ({"columns": {"lab9": "Lab 9"}}, "columns.lab9: lab9 is not a lab of the term"),
])
def test_bad_settings_say_what_to_write(tmp_path, overrides, message):
    course, _, _ = term_class(tmp_path)
    with pytest.raises(ValueError) as error:
        _settings(course, **overrides)
    assert message in str(error.value)


@pytest.mark.parametrize("text, message", [
    ("student_id,lab,reason\ncara,lab9,ill\n", "line 2: 'lab9' is not a lab of the term; give "
                                               "one of lab1, lab4"),
    ("student_id,lab,reason\ncara,lab4,\n", "line 2: no reason"),
    ("student_id,lab,reason\ncara,lab4,a\ncara,lab4,b\n", "line 3: cara is excused from lab4 "
                                                         "already on line 2"),
    ("student_id,lab\ncara,lab4\n", "has no column reason"),
    ("student_id,lab,reason\ncarra,lab4,ill\n", "line 2: 'carra' matches no student of the "
                                                "term (did you mean 'cara'?)"),
])
def test_bad_excused_lines_are_named(tmp_path, text, message):
    course, _, _ = term_class(tmp_path)
    (tmp_path / "excused.csv").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        build_gradebook(_settings(course))
    assert message in str(error.value)


def test_a_lab_folder_that_is_not_the_labs_or_not_graded(tmp_path):
    course, lab1, _ = term_class(tmp_path)
    settings = TermSettings.from_settings({}, tmp_path, {"lab1": lab1, "lab4": lab1})
    with pytest.raises(ValueError, match="holds the grades of 'lab1', not 'lab4'"):
        build_gradebook(settings)
    with pytest.raises(ValueError, match="give each lab as LAB=OUT"):
        parse_lab_arguments(["lab1"])


def test_cli_term_prints_files_and_steps(tmp_path, capsys):
    course, _, _ = term_class(tmp_path)
    assert main(["term", "--out", str(tmp_path / "t"), "--course", str(course)]) == 0
    printed = capsys.readouterr().out
    assert "The term: 2 labs (lab1, lab4), 4 students" in printed
    assert "  term.csv" in printed and "Steps:" in printed
    assert "Total: each lab's score of record" in printed
    # the labs on the command line replace course.toml's; one not graded is a clear error
    (tmp_path / "empty").mkdir()
    assert main(["term", f"lab1={tmp_path / 'empty'}", "--out", str(tmp_path / "u"),
                 "--course", str(course)]) == 2
    assert "has no class.json: it is not a graded lab's folder" in capsys.readouterr().err


def test_lab_columns_from_the_settings_and_columns_the_lms_cannot_tell_apart(tmp_path):
    course, _, _ = term_class(tmp_path)
    done = write_term(build_gradebook(_settings(
        course, columns={"lab1": "Attention (9991)", "lab4": "Block"})), tmp_path / "a")
    assert canvas_import(done.dest / "export" / "canvas" / "grades.csv")["assignments"] == [
        "Attention (9991)", "Block"]
    with pytest.raises(ValueError, match="lab1 and lab4 have the same canvas column 'Same'"):
        write_term(build_gradebook(_settings(course, columns={"lab1": "Same", "lab4": "Same"})),
                   tmp_path / "b")
    with pytest.raises(ValueError, match="lab4's Canvas column 'Final Score' is one Canvas's "
                                         "import does not read as an assignment"):
        write_term(build_gradebook(_settings(course, columns={"lab4": "Final Score"})),
                   tmp_path / "c")


def test_labs_of_the_command_line_replace_the_files_and_unused_weights_are_said(tmp_path):
    import tomllib

    course, lab1, _ = term_class(tmp_path)
    table = tomllib.loads(course.read_text(encoding="utf-8"))["term"]
    other = tmp_path / "other.csv"
    other.write_text("student_id,lab,reason\nann,lab1,jury duty\n", encoding="utf-8")
    settings = TermSettings.from_settings(table, tmp_path, {"lab1": lab1}, excused=other)
    assert list(settings.labs) == ["lab1"] and settings.excused_file == other
    assert settings.notes == ["course.toml [term] weights of lab4 not used: it is not among "
                              "this run's labs (lab1)."]
    book = build_gradebook(settings)
    assert _totals(book) == {"ann": None, "bob": 0.0, "cara": 50.0, "dan": 70.0}
    assert "no total: no lab counts for this student" in book.rows[0].notes
