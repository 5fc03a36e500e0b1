"""The instructor's term: the late policy, overrides, and a whole class through
roster, grading, the report and the LMS export.

The class (``canvas_class``) is the sample term (data/sample_term/build.py):
a Canvas "Download Submissions" zip of lab 1, graded with a Canvas gradebook
export as roster and a course.toml with a due date and a late policy; it has
an on-time, a late, an extended, a LATE-marked, a duplicated (resubmitted)
and an unknown submission, and an enrolled student who sent nothing. A
Moodle class and a Gradescope export follow. Expected values are worked out
by hand from the policy.
"""

from __future__ import annotations

import csv
import datetime
import json
import zipfile
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from autograder.cli import main
from autograder.grader.results import ExerciseResult, SubmissionResult
from autograder.grader.submissions import Collected, Submission
from autograder.term import late
from autograder.term.apply import Term
from autograder.term.overrides import read_overrides

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "sample_submissions" / "lab1"
LONDON = ZoneInfo("Europe/London")
POINTS = {"dot_scores": 1.0, "softmax": 2.0}


def policy(**late_settings) -> late.LatePolicy:
    deadlines = {"timezone": "Europe/London", "lab1": "2026-10-05 23:59"}
    return late.LatePolicy.from_settings(deadlines, late_settings, ROOT)


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=LONDON)


# ------------------------------------------------------------------ late policy


@pytest.mark.parametrize("submitted, percent", [
    ("2026-10-05 23:59", 0),        # on the minute: on time
    ("2026-10-06 00:10", 0),        # 11 minutes: within the 15 minutes' grace
    ("2026-10-06 00:20", 10),       # 21 minutes: a part of a day counts as a day
    ("2026-10-06 23:59", 10),       # exactly one day
    ("2026-10-07 00:00", 20),       # one day and a minute: two days
    ("2026-10-12 12:00", 50),       # 7 days: 70%, capped at 50%
])
def test_penalty_per_day_with_grace_and_cap(submitted, percent):
    found = late.lateness(policy(grace_minutes=15, penalty_percent=10, max_penalty_percent=50),
                          "lab1", at(submitted))
    assert found.percent == percent


def test_penalty_per_hour():
    found = late.lateness(policy(penalty_percent=5, per="hour"), "lab1",
                          at("2026-10-06 02:30"))  # 2 h 31 min: 3 hours
    assert found.percent == 15
    assert "2 h 31 min late: 3 hours at 5%, -15%" == found.note


def test_no_credit_after_days_and_after_a_date():
    rule = policy(penalty_percent=10, no_credit_after_days=3)
    assert late.lateness(rule, "lab1", at("2026-10-08 23:59")).percent == 30
    gone = late.lateness(rule, "lab1", at("2026-10-09 00:00"))
    assert gone.percent == 100 and "no credit" in gone.note
    dated = late.LatePolicy.from_settings(
        {"lab1": {"due": "2026-10-05 23:59", "no_credit_after": "2026-10-06 12:00"}},
        {"penalty_percent": 10}, ROOT)
    assert late.lateness(dated, "lab1", datetime.datetime(2026, 10, 6, 11, 0,
                                                           tzinfo=datetime.timezone.utc)
                         ).percent == 10
    assert late.lateness(dated, "lab1", datetime.datetime(2026, 10, 6, 12, 1,
                                                           tzinfo=datetime.timezone.utc)
                         ).percent == 100


def test_extensions_move_the_due_date_and_the_last_date(tmp_path):
    path = tmp_path / "ext.csv"
    path.write_text("student_id,lab,due,days\nbob,lab1,,2\nann,*,2026-10-10 12:00,\n")
    rule = policy(penalty_percent=10, no_credit_after_days=3)
    extensions = late.read_extensions(path, rule)
    bob = late.extension_for(extensions, "bob", "lab1")
    assert late.lateness(rule, "lab1", at("2026-10-07 23:00"), bob).percent == 0
    assert late.lateness(rule, "lab1", at("2026-10-08 01:00"), bob).percent == 10
    # 3 days after the extended due date is still credit; a day more is not
    assert late.lateness(rule, "lab1", at("2026-10-10 23:00"), bob).percent == 30
    assert late.lateness(rule, "lab1", at("2026-10-11 00:30"), bob).percent == 100
    ann = late.extension_for(extensions, "ann", "lab1")
    assert late.lateness(rule, "lab1", at("2026-10-10 11:00"), ann).percent == 0
    assert late.extension_for(extensions, "carl", "lab1") is None


def test_times_in_every_form_the_downloads_write():
    zone = LONDON
    gradescope = late.parse_time("2026-10-05 16:00:00.123456789 -08:00", zone, "x")
    assert gradescope == datetime.datetime(2026, 10, 6, 0, 0, 0, 123456,
                                           tzinfo=datetime.timezone.utc)
    assert late.parse_time("2026-10-05T23:59", zone, "x").utcoffset() == datetime.timedelta(
        hours=1)  # read in the course's zone (BST)
    assert late.parse_time("2026-10-05", zone, "x").time() == datetime.time(23, 59, 59)
    assert late.parse_time("2026-10-05 22:00Z", zone, "x").tzinfo is not None
    with pytest.raises(ValueError, match=r"where: 'next monday' is not a date and time"):
        late.parse_time("next monday", zone, "where")


def test_file_times_are_used_only_when_trusted():
    rule = policy()
    assert late.submission_time(rule, "2026-10-06T10:00:00+00:00", "file time", "x") is None
    trusting = policy(trust_file_times=True)
    assert late.submission_time(trusting, "2026-10-06T10:00:00+00:00", "file time", "x") \
        is not None
    # a zip's stamp is when the file was zipped (or, from an LMS, when the zip was built)
    assert late.submission_time(rule, "2026-10-06T10:00:00", "zip time", "x") is None
    assert late.submission_time(trusting, "2026-10-06T10:00:00", "zip time", "x") == \
        at("2026-10-06 10:00")


def test_canvas_late_marker_without_a_time_takes_no_penalty():
    found = late.lateness(policy(penalty_percent=10), "lab1", None, marked_late=True)
    assert found.percent == 0 and "Canvas marks it late" in found.note


@pytest.mark.parametrize("deadlines, settings, message", [
    ({"timezone": "Mars/Olympus"}, {}, "is not a time zone"),
    ({"lab1": "soon"}, {}, "'soon' is not a date and time"),
    ({"lab1": {"when": "2026-10-05"}}, {}, "a table with due"),
    ({}, {"penalty_percent": -5}, "penalty_percent = -5: give a number, 0 or more"),
    ({}, {"per": "week"}, 'per = \'week\': give "day" or "hour"'),
    ({}, {"max_penalty_percent": 150}, "at most 100"),
    ({}, {"penalty": 10}, "[late] has penalty, which the kit does not know"),
])
def test_bad_settings_say_what_to_write(deadlines, settings, message):
    with pytest.raises(ValueError) as error:
        late.LatePolicy.from_settings(deadlines, settings, ROOT)
    assert message in str(error.value)


@pytest.mark.parametrize("text, message", [
    ("student_id,lab\nbob,lab1\n", "give either due"),
    ("student_id,lab,days\nbob,lab1,two\n", "line 2: days = 'two' is not a number"),
    ("student,lab,days\n", "has no column student_id"),
])
def test_bad_extensions_name_the_line(tmp_path, text, message):
    (tmp_path / "e.csv").write_text(text)
    with pytest.raises(ValueError) as error:
        late.read_extensions(tmp_path / "e.csv", policy())
    assert message in str(error.value)


# ------------------------------------------------------------------ overrides


@pytest.mark.parametrize("line, message", [
    ("bob,attention,1,,", "'attention' is not an exercise of this lab"),
    ("bob,softmax,3,,", "score '3' for softmax is not a number from 0 to 2"),
    ("bob,softmax,,,", "neither a score nor a note"),
    (",softmax,1,,", "no student_id"),
])
def test_bad_overrides_name_the_line(tmp_path, line, message):
    (tmp_path / "o.csv").write_text(f"student_id,exercise,score,note,by\n{line}\n")
    with pytest.raises(ValueError) as error:
        read_overrides(tmp_path / "o.csv", POINTS)
    assert "line 2" in str(error.value) and message in str(error.value)


def test_overrides_replace_scores_keep_the_tests_score_and_penalties_come_after(tmp_path):
    (tmp_path / "o.csv").write_text(
        "student_id,exercise,score,note,by\n"
        "bob,softmax,2,Numerically fine after all,Dr Smith\n"
        "bob,dot_scores,,See the scaling,\n"
        "nobody,softmax,1,,\n")
    course = tmp_path / "course.toml"
    course.write_text('[deadlines]\nlab1 = "2026-10-05 23:59"\n[late]\npenalty_percent = 10\n')
    times = tmp_path / "times.csv"
    times.write_text("student_id,submitted_at\nbob,2026-10-06 10:00\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=course, times=times,
                     overrides=tmp_path / "o.csv")
    tested = SubmissionResult("bob", "lab1", 1.0, 3.0, exercises=[
        ExerciseResult("dot_scores", 1.0, 1.0), ExerciseResult("softmax", 0.0, 2.0, "wrong")])
    term.check(Collected([Submission("bob", "bob.ipynb", None)]))
    rows, notes = term.apply([tested], {}, POINTS)
    bob = rows[0]
    assert tested.exercises[1].score == 0.0  # the tests' result is not changed
    assert (bob.raw_score, bob.penalty, bob.score) == (3.0, 0.3, pytest.approx(2.7))
    assert bob.exercises[1].auto_score == 0.0 and bob.exercises[1].override_by == "Dr Smith"
    assert bob.exercises[0].auto_score is None
    assert bob.exercises[0].override_note == "See the scaling"
    assert [note for note in notes if "nobody" in note] == [
        f"overrides {tmp_path / 'o.csv'}, line 4: 'nobody' matches no student of the class; "
        f"give the student_id of grades.csv, or delete the line if the student left"]
    assert "override of softmax: 2 of 2 (the tests gave 0), by Dr Smith (o.csv, line 2)" \
        in bob.notes
    assert "Submission times of 1 submissions: 1 from the times CSV." in notes


# ------------------------------------------------------------------ a whole class

TERM = ROOT / "data" / "sample_term"


def test_the_sample_term_is_built_from_the_lab1_samples(tmp_path):
    """data/sample_term/ is what its build.py writes, byte for byte (run it
    after changing the lab 1 samples)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sample_term_build", TERM / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path in module.build(tmp_path):
        assert path.read_bytes() == (TERM / path.name).read_bytes(), \
            f"data/sample_term/{path.name} is out of date: run python data/sample_term/build.py"


@pytest.fixture(scope="module")
def canvas_class(tmp_path_factory):
    """The sample term's lab 1 (data/sample_term/build.py says who is who),
    graded once as the README does, the overrides in OUT: (folder, out, status)."""
    out = tmp_path_factory.mktemp("term") / "out"
    out.mkdir()
    (out / "overrides.csv").write_bytes((TERM / "overrides.csv").read_bytes())
    status = main(["grade", "lab1", str(TERM / "lab1_canvas.zip"), "--out", str(out),
                   "--roster", str(TERM / "roster.csv"), "--course", str(TERM / "course.toml"),
                   "--times", str(TERM / "lab1_submissions.json"),
                   "--seed", "term", "--quiet", "--jobs", "2"])
    return TERM, out, status


def _grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", encoding="utf-8", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


@pytest.mark.slow
def test_every_enrolled_student_has_one_row_and_strangers_are_not_graded(canvas_class):
    _, out, status = canvas_class
    assert status == 0
    grades = _grades(out)
    assert sorted(grades) == ["aable", "bbrown", "cchen", "ddoe", "eeve", "zzed"]
    assert grades["zzed"]["status"] == "no submission" and grades["zzed"]["score"] == "0"
    assert grades["zzed"]["name"] == "Zoe Zed" and grades["zzed"]["file"] == ""
    assert not (out / "feedback" / "zzed.html").exists()
    # the resubmission: both of dave's files were his; the notebook with answers is graded
    assert grades["ddoe"]["file"] == "doedave_104_9014_lab1_attention-1.ipynb"
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "mallorymal_555_9555_lab1_attention.ipynb" in report
    assert "Files that match no one on the roster (not graded)" in report
    assert "6 enrolled, 5 submitted" in report
    assert not (out / "results" / "mallorymal_555.json").exists()
    with open(out / "unmatched.csv", encoding="utf-8", newline="") as handle:
        unmatched = list(csv.DictReader(handle))
    assert [row["file"] for row in unmatched] == ["mallorymal_555_9555_lab1_attention.ipynb"]
    assert "id 555" in unmatched[0]["whose"] and "matches nobody" in unmatched[0]["reason"]


@pytest.mark.slow
def test_late_work_is_penalised_by_the_course_policy(canvas_class):
    _, out, _ = canvas_class
    grades = _grades(out)
    alice, bob, carol, erin = (grades[k] for k in ("aable", "bbrown", "cchen", "eeve"))
    assert alice["late_hours"] == "" and alice["penalty"] == "0"
    # bob: due 2026-10-05 23:59 New York, submitted 2026-10-07 02:00: 26 h 1 min late
    assert bob["late_hours"] == "26.02"
    assert bob["submitted_at"] == "2026-10-07T02:00:00-04:00"
    raw = float(bob["raw_score"])
    assert float(bob["penalty"]) == pytest.approx(min(raw, 2.0))  # 20% of 10 points
    assert float(bob["score"]) == pytest.approx(raw - min(raw, 2.0))
    # carol: 30 minutes late, but her extension of a day makes it on time
    assert carol["penalty"] == "0" and carol["late_hours"] == ""
    # erin: 10 minutes late, within the 15 minutes' grace
    assert erin["late_hours"] == "0.17" and erin["penalty"] == "0"
    assert "within the grace period" in erin["notes"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Due 2026-10-05 23:59-04:00, 15 minutes&#39; grace; 10% of the points per day" \
        in report


@pytest.mark.slow
def test_overrides_are_in_the_gradebook_the_report_and_the_feedback(canvas_class):
    _, out, _ = canvas_class
    alice = _grades(out)["aable"]
    saved = json.loads((out / "results" / "aable.json").read_text())["result"]
    tested = {x["exercise"]: x["score"] for x in saved["exercises"]}
    assert tested["softmax"] == 2.0  # the tests gave full marks; results/ keeps that
    assert float(alice["raw_score"]) == pytest.approx(sum(tested.values()) - 1.0)
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Copied the loop from the lecture notes without citing" in report
    assert "Dr Smith" in report
    page = (out / "feedback" / "aable.html").read_text(encoding="utf-8")
    assert "Your instructor set this score (the tests gave 2)" in page
    assert "Dr Smith" not in page


@pytest.mark.slow
def test_the_class_goes_into_canvas_as_canvas_imports_it(canvas_class):
    _, out, _ = canvas_class
    # the roster's column of lab 1 is the default
    assert main(["export", "lab1", str(out), "--to", "canvas"]) == 0
    with open(out / "export" / "canvas" / "grades.csv", encoding="utf-8", newline="") as h:
        rows = list(csv.reader(h))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "Lab 1 (4321)"]
    assert rows[1] == ["Points Possible", "", "", "", "", "10"]
    by_id = {row[1]: row for row in rows[2:]}
    assert sorted(by_id) == ["101", "102", "103", "104", "105", "106"]
    grades = _grades(out)
    assert by_id["102"] == ["Bob Brown", "102", "S102", "bbrown", "Section A",
                            grades["bbrown"]["score"]]
    assert by_id["106"][-1] == "0"
    with zipfile.ZipFile(out / "export" / "canvas" / "feedback.zip") as archive:
        names = sorted(archive.namelist())
    # named like Canvas's own download, with the submitted file's id, for Re-Upload Submissions
    assert "brownbob_102_9002_feedback.html" in names and len(names) == 5


@pytest.mark.slow
def test_only_one_student_is_graded_again_and_overrides_stay(canvas_class, tmp_path):
    folder, out, _ = canvas_class
    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    penalised = _grades(out)["bbrown"]
    # the roster and course settings of the first run are used again without being named
    status = main(["grade", "lab1", str(folder / "lab1_canvas.zip"), "--out", str(out),
                   "--quiet", "--only", "eeve", "--no-similarity"])
    assert status == 0
    assert _grades(out)["bbrown"] == penalised
    after = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    assert [name for name in after if after[name] != before.get(name)] == ["eeve.json"]
    assert "Dr Smith" in (out / "report.html").read_text(encoding="utf-8")
    assert len(_grades(out)) == 6
    with pytest.raises(SystemExit):
        main(["grade", "lab1", "--only"])
    assert main(["grade", "lab1", str(folder / "lab1_canvas.zip"), "--out", str(out),
                 "--roster", str(folder / "roster.csv"), "--quiet", "--only", "nobody"]) == 2


# ------------------------------------------------------------------ Moodle and Gradescope

MOODLE_WORKSHEET = (
    # Moodle's "Download grading worksheet" (mod/assign/gradingtable.php's columns)
    'Identifier,"Full name","Email address",Status,Grade,"Maximum Grade",'
    '"Grade can be changed","Last modified (submission)","Last modified (grade)",'
    '"Feedback comments"\n'
    '"Participant 200001","Jane Doe",jane@uni.example,"Submitted for grading",,10.00,Yes,'
    '"Monday, 5 October 2026, 9:00 PM",-,\n'
    '"Participant 200002","Tom Lee",tom@uni.example,"No submission",,10.00,Yes,-,-,\n'
)


def _member(archive: zipfile.ZipFile, name: str, sample: str, when: tuple) -> None:
    info = zipfile.ZipInfo(name, date_time=when)
    archive.writestr(info, (SAMPLES / sample).read_bytes())


@pytest.mark.slow
def test_a_moodle_class_from_download_to_grade_import(tmp_path):
    """Moodle's zip has a folder per participant (file and online text
    folders of one participant are one student); the grades go back keyed
    by email, the feedback as Moodle's feedback-files zip."""
    with zipfile.ZipFile(tmp_path / "moodle.zip", "w") as archive:
        _member(archive, "Jane Doe_200001_assignsubmission_file_/lab1_attention.ipynb",
                "frank.ipynb", (2026, 10, 5, 21, 0, 0))
        archive.writestr("Jane Doe_200001_assignsubmission_onlinetext_/onlinetext.html",
                         "<p>see the notebook</p>")
        _member(archive, "Someone Else_299999_assignsubmission_file_/lab1_attention.ipynb",
                "alice.ipynb", (2026, 10, 5, 21, 0, 0))
    (tmp_path / "roster.csv").write_text(MOODLE_WORKSHEET)
    out = tmp_path / "out"
    assert main(["grade", "lab1", str(tmp_path / "moodle.zip"), "--out", str(out), "--roster",
                 str(tmp_path / "roster.csv"), "--quiet", "--jobs", "1",
                 "--no-similarity"]) == 0
    grades = _grades(out)
    assert sorted(grades) == ["jane", "tom"]
    assert grades["tom"]["status"] == "no submission"
    assert grades["jane"]["file"] == \
        "Jane Doe_200001_assignsubmission_file_/lab1_attention.ipynb"
    assert "Someone Else_299999_assignsubmission_file_/lab1_attention.ipynb" in \
        (out / "report.html").read_text(encoding="utf-8")
    # Moodle's own route: the grading worksheet, filled in
    assert main(["export", "lab1", str(out), "--to", "moodle"]) == 0
    with open(out / "export" / "moodle" / "roster.csv", encoding="utf-8", newline="") as h:
        sheet = {row["Identifier"]: row for row in csv.DictReader(h)}
    assert sheet["Participant 200001"]["Grade"] == grades["jane"]["score"]
    assert sheet["Participant 200002"]["Grade"] == "0"
    assert sheet["Participant 200001"]["Feedback comments"].startswith("Score: ")
    # the gradebook's CSV import, by option
    assert main(["export", "lab1", str(out), "--to", "moodle", "--moodle-route",
                 "gradebook"]) == 0
    with open(out / "export" / "moodle" / "grades.csv", encoding="utf-8", newline="") as h:
        rows = list(csv.reader(h))
    assert rows[0] == ["Full name", "Email address", "Lab 1: attention from scratch",
                       "Lab 1: attention from scratch (Feedback)"]
    assert {row[1]: row[2] for row in rows[1:]} == {
        "jane@uni.example": grades["jane"]["score"], "tom@uni.example": "0"}
    with zipfile.ZipFile(out / "export" / "moodle" / "feedback.zip") as archive:
        assert archive.namelist() == ["Jane Doe_200001_assignsubmission_file_/feedback.html"]


GRADESCOPE_METADATA = """\
submission_1001:
  :submitters:
  - :name: Ann Smith
    :sid: '3001'
    :email: ann@uni.example
  :created_at: 2026-10-06 03:30:00.000000000 +00:00
submission_1002:
  :submitters:
  - :name: Ben Jones
    :sid: '3002'
    :email: ben@uni.example
  :created_at: 2026-10-05 20:00:00.000000000 -04:00
"""


@pytest.mark.slow
def test_a_gradescope_export_carries_its_own_submission_times(tmp_path):
    """Gradescope's metadata gives the submitters' sids (matched to the
    roster's student_id) and the times, late by the course's policy."""
    export = tmp_path / "assignment_export"
    for folder, sample in (("submission_1001", "bob.ipynb"), ("submission_1002", "bob.ipynb")):
        (export / folder).mkdir(parents=True)
        (export / folder / "lab1_attention.ipynb").write_bytes((SAMPLES / sample).read_bytes())
    (export / "submission_metadata.yml").write_text(GRADESCOPE_METADATA)
    (tmp_path / "roster.csv").write_text("student_id,name,email\n3001,Ann Smith,ann@uni.example\n"
                                         "3002,Ben Jones,ben@uni.example\n")
    (tmp_path / "course.toml").write_text(
        '[deadlines]\ntimezone = "America/New_York"\nlab1 = "2026-10-05 23:59"\n'
        '[late]\npenalty_percent = 25\nper = "hour"\n')
    out = tmp_path / "out"
    assert main(["grade", "lab1", str(export), "--out", str(out), "--roster",
                 str(tmp_path / "roster.csv"), "--course", str(tmp_path / "course.toml"),
                 "--quiet", "--jobs", "2", "--no-similarity"]) == 0
    grades = _grades(out)
    # Ann: 03:30 UTC is 23:30 in New York (EDT): on time; Ben: 20:00 -04:00, on time too...
    assert grades["3001"]["penalty"] == "0" and grades["3001"]["late_hours"] == ""
    assert grades["3002"]["penalty"] == "0"
    # ...until the due date is an hour earlier: Ann is then 31 minutes late, one hour at 25%
    (tmp_path / "course.toml").write_text(
        '[deadlines]\ntimezone = "America/New_York"\nlab1 = "2026-10-05 22:59"\n'
        '[late]\npenalty_percent = 25\nper = "hour"\n')
    assert main(["grade", "lab1", str(export), "--out", str(out), "--roster",
                 str(tmp_path / "roster.csv"), "--course", str(tmp_path / "course.toml"),
                 "--quiet", "--no-similarity"]) == 0
    grades = _grades(out)
    assert grades["3001"]["late_hours"] == "0.52"
    assert float(grades["3001"]["penalty"]) == pytest.approx(
        min(2.5, float(grades["3001"]["raw_score"])))
    assert grades["3001"]["submitted_at"] == "2026-10-05T23:30:00-04:00"
    assert grades["3002"]["penalty"] == "0"


def test_a_remembered_term_file_that_is_gone_is_a_clear_error(tmp_path):
    from autograder.pipeline import remembered_term
    from autograder.grader.options import GradingOptions

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id\nann\n")
    out = tmp_path / "out"
    assert remembered_term(out, GradingOptions(roster=roster)).roster == roster
    assert remembered_term(out, GradingOptions()).roster == roster.resolve()
    roster.unlink()
    with pytest.raises(ValueError, match=r"used .*roster.csv \(--roster\), which is gone"):
        remembered_term(out, GradingOptions())
    (out / "term.json").unlink()
    assert remembered_term(out, GradingOptions()).roster is None


def test_the_instructors_csv_files_take_excel_and_quoted_lines(tmp_path):
    """A BOM, header names in any case, a note over two lines, blank rows."""
    path = tmp_path / "o.csv"
    path.write_text('\ufeffStudent_ID , Exercise,Score,Note,By\n\n'
                    'bob,softmax,,"line one\nline two",TA\n', encoding="utf-8")
    [override] = read_overrides(path, POINTS)
    assert (override.student_id, override.note, override.line) == ("bob", "line one\nline two", 3)
    with pytest.raises(ValueError, match="first line must name the columns: student_id,exercise"):
        (tmp_path / "bad.csv").write_text("id,exercise\n")
        read_overrides(tmp_path / "bad.csv", POINTS)
    with pytest.raises(ValueError, match="does not exist"):
        late.read_times(tmp_path / "none.csv", policy())
