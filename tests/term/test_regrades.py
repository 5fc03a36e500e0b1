"""autograder.term.regrades: a student asks, the instructor decides, the record
reaches the student's feedback page, the report and class.json.

The requests are OUT/regrades.csv lines written here by hand; the rows are
made-up test results (no notebook is graded).
"""

from __future__ import annotations

import pytest

from autograder.grader.reports import feedback_html, report_html
from autograder.grader.results import ExerciseResult, SubmissionResult
from autograder.grader.submissions import Collected, Submission
from autograder.term.apply import Term, report_term
from autograder.term.regrades import read_regrades

POINTS = {"dot_scores": 1.0, "softmax": 2.0}
HEADER = "student_id,exercise,asked,request,decision,score,reason,by\n"


def _write(tmp_path, *lines, name="regrades.csv"):
    path = tmp_path / name
    path.write_text(HEADER + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("line, message", [
    ("bob,attention,2026-10-12,why?,denied,,no", "the request names 'attention', which is not "
     "an exercise of this lab; give one of dot_scores, softmax"),
    ("bob,softmx,2026-10-12,why?,denied,,no", "(did you mean 'softmax'?)"),
    ("bob,softmax,next monday,why?,denied,,no", "asked 'next monday' is not a date; give the "
     "day the student asked as YYYY-MM-DD"),
    ("bob,softmax,,why?,denied,,no", "no date in asked"),
    ("bob,softmax,2026-10-12,why?,accepted,,no", "decision 'accepted' is not one the kit "
     "knows; give granted, partly, denied or pending"),
    ("bob,softmax,2026-10-12,why?,granted,2,", "the request is granted, with no reason"),
    ("bob,softmax,2026-10-12,why?,denied,2,no", "a score with a denied request"),
    ("bob,softmax,2026-10-12,why?,pending,2,", "a score with a pending request"),
    ("bob,,2026-10-12,why?,granted,2,yes", "a score and no exercise; name the exercise"),
    ("bob,softmax,2026-10-12,why?,granted,3,yes", "score '3' for softmax is not a number from "
     "0 to 2 (its points)"),
    ("bob,softmax,2026-10-12," + "x" * 301 + ",denied,,no", "the request is 301 characters "
     "long; keep the student's words short (at most 300)"),
    (",softmax,2026-10-12,why?,denied,,no", "no student_id"),
])
def test_bad_requests_name_the_line(tmp_path, line, message):
    with pytest.raises(ValueError) as error:
        read_regrades(_write(tmp_path, line), POINTS)
    assert "regrades.csv, line 2: " in str(error.value) and message in str(error.value)


def test_one_score_per_exercise_and_a_missing_column(tmp_path):
    path = _write(tmp_path, "bob,softmax,2026-10-12,a,partly,1,half", "bob,softmax,2026-10-20,b,"
                  "granted,2,all")
    with pytest.raises(ValueError, match="line 3: bob's softmax is given a score already on "
                                         "line 2; keep one score per exercise"):
        read_regrades(path, POINTS)
    (tmp_path / "r.csv").write_text("student_id,exercise,asked\nbob,softmax,2026-10-12\n")
    with pytest.raises(ValueError, match="has no column decision; its first line must name the "
                                         "columns: student_id,exercise,asked,request,decision"):
        read_regrades(tmp_path / "r.csv", POINTS)


def _bob():
    return SubmissionResult("bob", "lab1", 1.0, 3.0, source_name="bob.ipynb", exercises=[
        ExerciseResult("dot_scores", 1.0, 1.0), ExerciseResult("softmax", 0.0, 2.0, "overflow")])


def _term(tmp_path, *lines, overrides=None):
    _write(tmp_path, *lines)
    course = tmp_path / "course.toml"
    course.write_text("[deadlines]\n")
    if overrides:
        (tmp_path / "overrides.csv").write_text("student_id,exercise,score,note,by\n"
                                                + overrides + "\n")
    return Term.load("lab1", POINTS, tmp_path, course_file=course)


def test_a_granted_request_is_an_override_and_reaches_the_feedback_and_report(tmp_path):
    term = _term(tmp_path,
                 "bob,softmax,2026-10-12T09:30,I subtract the max,granted,2,"
                 "\"The test fed -inf rows; your answer is right\",Dr Smith",
                 "bob,,2026-10-13,My late penalty is wrong,denied,,One day late counts,TA Lee",
                 "bob,dot_scores,2026-10-14,Mask?,,,,",
                 "nobody,,2026-10-14,?,denied,,no,")
    term.check(Collected([Submission("bob", "bob.ipynb", None)]))
    tested = _bob()
    rows, notes = term.apply([tested], {}, POINTS)
    bob = rows[0]
    assert tested.exercises[1].score == 0.0          # the tests' result is not changed
    assert bob.score == 3.0 and bob.exercises[1].auto_score == 0.0
    assert bob.exercises[1].override_by == "Dr Smith"
    assert bob.exercises[1].override_note == ("regrade request of 2026-10-12: The test fed "
                                              "-inf rows; your answer is right")
    assert bob.notes == [
        "override of softmax: 2 of 2 (the tests gave 0), by Dr Smith (regrades.csv, line 2)",
        "regrade request of 2026-10-12 (softmax): granted — The test fed -inf rows; your "
        "answer is right (regrades.csv, line 2)",
        "regrade request of 2026-10-13: denied — One day late counts (regrades.csv, line 3)",
        "regrade request of 2026-10-14 (dot_scores): pending, not decided (regrades.csv, "
        "line 4)"]
    assert notes == ["regrades line 5: 'nobody' has no row in this lab's gradebook; check the "
                     "id against grades.csv"]
    assert [q["decision"] for q in bob.regrades] == ["granted", "denied", "pending"]

    page = feedback_html(bob, "Lab 1")
    assert ("Your regrade request of 2026-10-12 (softmax):\n<strong>granted</strong> &mdash; "
            "The test fed -inf rows; your answer is right (your score for softmax is now 2)"
            ) in page
    assert "Your regrade request of 2026-10-13:\n<strong>denied</strong> &mdash; One day late " \
           "counts" in page
    assert "Your regrade request of 2026-10-14 (dot_scores):\nreceived; your instructor has " \
           "not decided yet." in page

    report = report_html(rows, "Lab 1", report_term(term, rows, None, notes))
    assert "<h2>Regrade requests</h2>" in report
    assert "<td>bob</td><td>softmax</td><td>2026-10-12</td><td class=\"msg\">I subtract the " \
           "max</td><td>granted</td><td class=\"num\">2</td>" in report
    assert "<td class=\"bad\">pending</td>" in report

    (facts,) = term.class_rows(rows, {}, {"bob": "feedback/bob.html"})
    assert [q["reason"] for q in facts.regrades] == [
        "The test fed -inf rows; your answer is right", "One day late counts", ""]


def test_no_regrades_file_no_section(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text("[deadlines]\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=course)
    rows, notes = term.apply([_bob()], {}, POINTS)
    assert term.regrades == [] and rows[0].regrades == []
    assert "Regrade requests" not in report_html(rows, "Lab 1", report_term(term, rows, None,
                                                                            notes))
    assert "regrade request" not in feedback_html(rows[0], "Lab 1")


def test_a_score_in_both_files_is_refused(tmp_path):
    with pytest.raises(ValueError) as error:
        _term(tmp_path, "bob,softmax,2026-10-12,?,granted,2,right,",
              overrides="bob,softmax,1,half,Dr Smith")
    assert "regrades.csv, line 2 gives bob's softmax a score, and" in str(error.value)
    assert "overrides.csv, line 2 another" in str(error.value)
    assert "Keep one" in str(error.value)
    # a note-only override and a granted request live together
    (tmp_path / "overrides.csv").write_text("student_id,exercise,score,note,by\n"
                                            "bob,softmax,,see the test,\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=tmp_path / "course.toml")
    assert len(term.regrades) == 1 and len(term.overrides) == 1


def test_with_a_roster_a_request_names_a_student_by_any_of_their_ids(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nbob,Bob Jones,bob@uni.edu\nann,Ann Lee,ann@uni.edu\n")
    _write(tmp_path, "BOB@uni.edu,softmax,2026-10-12,?,granted,2,right,")
    course = tmp_path / "course.toml"
    course.write_text("[deadlines]\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=course, roster=roster)
    assert [r.student_id for r in term.regrades] == ["bob"]
    _write(tmp_path, "bobb,softmax,2026-10-12,?,granted,2,right,")
    with pytest.raises(ValueError) as error:
        Term.load("lab1", POINTS, tmp_path, course_file=course, roster=roster)
    assert "regrades.csv, line 2: 'bobb' matches no student of the roster (did you mean " \
           "'bob'" in str(error.value)
    assert "Nothing was graded. Correct those lines." in str(error.value)
