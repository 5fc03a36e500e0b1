"""Moodle's worksheet dates done right (issue 46, items 1 and 7), without grading.

A Moodle class is built by data/sample_term/shapes.py from Moodle's own code
(data/sample_term/SOURCES.md, "Offline grading worksheet"): with user
overrides on the assignment, mod/assign/gradingtable.php adds "Allow
submissions from", "Due date" and "Cut-off date" after Status, each row's
own dates; every date of the worksheet is written by userdate() in the
time zone of the DOWNLOADING user's Moodle profile; the Status says
"<format_time> late" when Moodle judged the submission late against the
student's own due date. Each test lists the download as `grade` does, checks
the instructor's files against it (Term.check) and applies the term to
made-up results (Term.apply), as tests/term/test_term_lms.py does.

The course: lab 1 due Monday 5 October 2026, 23:59 in New York; 15 minutes'
grace; 10% of the points per day late, at most 50%.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from autograder.grader.options import GradingOptions
from autograder.grader.results import ExerciseResult, SubmissionResult
from autograder.grader.submissions import collect
from autograder.term import late
from autograder.term.apply import Term

ROOT = Path(__file__).resolve().parents[2]
TERM = ROOT / "data" / "sample_term"
NOTEBOOK = (ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb").read_bytes()
POINTS = {"dot_scores": 4.0, "softmax": 6.0}
NEW_YORK = ZoneInfo("America/New_York")
DUE = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=NEW_YORK)          # a Monday
THURSDAY = datetime.datetime(2026, 10, 8, 23, 59, tzinfo=NEW_YORK)
SATURDAY = datetime.datetime(2026, 10, 10, 23, 59, tzinfo=NEW_YORK)
DOWNLOADED = DUE + datetime.timedelta(days=10, hours=3)
COURSE = ('[deadlines]\ntimezone = "America/New_York"\nlab1 = "2026-10-05 23:59"\n'
          '[late]\ngrace_minutes = 15\npenalty_percent = 10\nper = "day"\n'
          'max_penalty_percent = 50\n')


def shapes():
    if "sample_term_shapes" not in sys.modules:
        spec = importlib.util.spec_from_file_location("sample_term_shapes", TERM / "shapes.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["sample_term_shapes"] = module
        spec.loader.exec_module(module)
    return sys.modules["sample_term_shapes"]


def participants(overrides: bool = True) -> list:
    """The class. With ``overrides``: Ed's user override moves his due date to
    Thursday; Flo has the same override and a Moodle extension to Saturday;
    Gus has the Thursday override and submitted Friday morning."""
    made = shapes().MoodleParticipant

    def sent(pid, first, when, **dates):
        return made(pid, first, "Lee", f"{first.lower()}@uni.example", status="submitted",
                    files=[("lab1_attention.ipynb", NOTEBOOK)], timemodified=when, **dates)

    people = [
        sent(200001, "Ann", DUE - datetime.timedelta(hours=3, seconds=17)),     # on time
        sent(200002, "Bo", DUE + datetime.timedelta(hours=26, seconds=40)),     # 1 day 2 h late
        sent(200003, "Cy", DUE + datetime.timedelta(minutes=10, seconds=27)),   # in the grace
        sent(200004, "Di", DUE + datetime.timedelta(seconds=30)),               # "30 secs late"
        made(200008, "Hal", "Lee", "hal@uni.example"),                          # nothing
    ]
    if overrides:
        people += [
            sent(200005, "Ed", datetime.datetime(2026, 10, 8, 18, 0, tzinfo=NEW_YORK),
                 override_due=THURSDAY),
            sent(200006, "Flo", datetime.datetime(2026, 10, 9, 12, 0, tzinfo=NEW_YORK),
                 override_due=THURSDAY, extension_due=SATURDAY),
            sent(200007, "Gus", datetime.datetime(2026, 10, 9, 11, 0, tzinfo=NEW_YORK),
                 override_due=THURSDAY),
        ]
    return people


def download(folder: Path, user_tz: str = "America/New_York", overrides: bool = True,
             course: str = COURSE) -> dict[str, Path]:
    """The class's zip, its worksheet downloaded by a user whose profile is in
    ``user_tz``, and the course settings."""
    folder.mkdir(parents=True, exist_ok=True)
    people = participants(overrides)
    shapes().moodle_zip(folder / "moodle.zip", people, DOWNLOADED, server_tz="America/New_York")
    shapes().moodle_worksheet(folder / "worksheet.csv", people, due=DUE,
                              downloaded_at=DOWNLOADED, user_tz=user_tz)
    (folder / "course.toml").write_text(course)
    return {"zip": folder / "moodle.zip", "roster": folder / "worksheet.csv",
            "course": folder / "course.toml"}


def graded(paths: dict[str, Path], out: Path, **given):
    """Term.load, check and apply, every submission 10 of 10: the rows by
    student id, the notes, the term."""
    term = Term.load("lab1", POINTS, out, course_file=paths["course"], roster=paths["roster"],
                     **given)
    collected = collect(paths["zip"], "lab1", "lab1_attention", term.roster)
    term.check(collected)
    results = [SubmissionResult(s.student_id, "lab1", 10.0, 10.0, source_name=s.source_name,
                                exercises=[ExerciseResult("dot_scores", 4.0, 4.0),
                                           ExerciseResult("softmax", 6.0, 6.0)])
               for s in collected.submissions]
    rows, notes = term.apply(results, {s.student_id: s for s in collected.submissions}, POINTS)
    return {row.student_id: row for row in rows}, notes, term


def lateness(rows) -> dict:
    return {sid: (r.score, r.penalty, r.late_seconds, r.due, r.submitted_at)
            for sid, r in rows.items()}


# ------------------------------------------------------------------ the fixture


def test_the_worksheet_has_moodles_override_columns_after_status(tmp_path):
    """gradingtable.php: Status, then (with $hasoverrides) Allow submissions
    from, Due date, Cut-off date; an override's row holds its own dates, the
    dates it leaves as the assignment's empty (NULL); the others the
    assignment's; userdate() in the downloader's zone."""
    paths = download(tmp_path, user_tz="Europe/Berlin")
    lines = paths["roster"].read_text(encoding="utf-8-sig").splitlines()
    assert lines[0] == ('Identifier,"Full name","Email address",Status,"Allow submissions '
                        'from","Due date","Cut-off date",Grade,"Maximum grade","Grade can be '
                        'changed","Last modified (submission)","Last modified (grade)",'
                        '"Feedback comments"')
    ann = next(line for line in lines if "Ann Lee" in line)
    assert ',"Submitted for grading",,"Tuesday, 6 October 2026, 5:59 AM",,,10.00,Yes,' \
           '"Tuesday, 6 October 2026, 2:58 AM",' in ann
    ed = next(line for line in lines if "Ed Lee" in line)
    assert ',"Submitted for grading",,"Friday, 9 October 2026, 5:59 AM",,,' in ed
    gus = next(line for line in lines if "Gus Lee" in line)
    assert '"Submitted for grading - 11 hours 1 min late"' in gus
    # without overrides on the assignment the columns are not there
    plain = download(tmp_path / "plain", overrides=False)["roster"].read_text("utf-8-sig")
    assert "Due date" not in plain.splitlines()[0]


def test_moodles_late_text_is_read_with_what_format_time_leaves_out():
    assert late.moodle_late("Submitted for grading - 1 day 2 hours late") == (93600, 97200)
    assert late.moodle_late("Draft (not submitted) - 10 mins 27 secs late - Graded") == \
        (627, 628)
    assert late.moodle_late("Submitted for grading - 2 days late") == (172800, 176400)
    assert late.moodle_late("Submitted for grading - 1 hour late") == (3600, 3660)
    assert late.moodle_late("Submitted for grading - Graded") is None
    assert late.moodle_late("No submission - Assignment is overdue by: 2 days") is None


# ------------------------------------------------------------------ overrides


def test_the_overridden_student_keeps_full_marks(tmp_path):
    """Ed's override moved his due date to Thursday; he submitted Thursday:
    Moodle's Status says nothing late, and the kit takes nothing."""
    rows, notes, term = graded(download(tmp_path), tmp_path)
    ed = rows["ed"]
    assert (ed.score, ed.penalty, ed.late_seconds) == (10.0, 0.0, 0.0)
    assert ed.due == "2026-10-08T23:59-04:00"
    assert any(n.startswith("due date override: due 2026-10-08 23:59-04:00 (Moodle user or "
                            "group override: the worksheet's Due date, worksheet.csv, line ")
               for n in ed.notes), ed.notes
    # Gus had the same override and was 11 hours late: one day, 10%
    assert (rows["gus"].score, rows["gus"].penalty) == (9.0, 1.0)
    assert any("late: 1 day at 10%, -10% (overridden)" in n for n in rows["gus"].notes)
    # the others as before: Bo 1 day 2 h late (2 days), Cy within the grace,
    # Di 30 seconds late by Moodle, 23:59 in the worksheet (on time)
    assert [rows[s].penalty for s in ("ann", "bo", "cy", "di")] == [0.0, 2.0, 0.0, 0.0]
    assert rows["hal"].status == "no submission"
    assert not term.errors and not term.date_notes
    assert set(term.own_dates) == {"ed", "flo", "gus"}


def test_an_extension_beats_an_override_and_extends_it_by_days(tmp_path):
    """Flo: a Moodle extension to Saturday beats her Thursday override (as
    col_status does). Gus: the extensions file's one day is added to his own
    due date (Thursday), not to the lab's."""
    paths = download(tmp_path)
    (tmp_path / "ext.csv").write_text("student_id,lab,days\ngus,lab1,1\n")
    rows, _, _ = graded(paths, tmp_path, extensions=tmp_path / "ext.csv")
    flo, gus = rows["flo"], rows["gus"]
    assert (flo.score, flo.due) == (10.0, "2026-10-10T23:59-04:00")
    assert any(n.startswith("extension: due 2026-10-10 23:59-04:00 (worksheet.csv, line ")
               for n in flo.notes)
    assert (gus.score, gus.due) == (10.0, "2026-10-09T23:59-04:00")
    assert "extension: due 2026-10-09 23:59-04:00 (ext.csv, line 2)" in gus.notes


def test_a_worksheet_without_override_columns_works_as_before(tmp_path):
    rows, notes, term = graded(download(tmp_path, overrides=False), tmp_path)
    assert not term.roster.date_columns and not term.own_dates
    assert {s: (r.score, r.penalty) for s, r in rows.items() if s != "hal"} == {
        "ann": (10.0, 0.0), "bo": (8.0, 2.0), "cy": (10.0, 0.0), "di": (10.0, 0.0)}
    assert "Submission times of 4 submissions: 4 from the Moodle grading worksheet." in notes


def test_moodles_cut_off_date_is_the_last_date_for_credit_where_the_course_sets_none():
    policy = late.LatePolicy.from_settings({"timezone": "America/New_York",
                                            "lab1": "2026-10-05 23:59"},
                                           {"penalty_percent": 10}, Path("."))
    own = late.OwnDates("ed", due=THURSDAY, cutoff=SATURDAY)
    sunday = SATURDAY + datetime.timedelta(hours=1)
    assert late.lateness(policy, "lab1", sunday, own=own).percent == 100.0
    assert late.lateness(policy, "lab1", SATURDAY, own=own).percent == 20.0
    # a Moodle extension past the cut-off lets the student submit until it
    extended = late.Extension("ed", "lab1", due=sunday + datetime.timedelta(hours=1))
    assert late.lateness(policy, "lab1", sunday, extended, own=own).percent == 0.0
    # where the course sets a last date for credit, the cut-off is not used
    policy.no_credit_after_days = 10
    assert late.lateness(policy, "lab1", sunday, own=late.OwnDates("ed", due=THURSDAY)
                         ).percent == 30.0   # 2 days 1 h late


# ------------------------------------------------------------------ the worksheet's zone


@pytest.mark.parametrize("overrides", [True, False])
def test_a_berlin_worksheet_read_in_berlin_gives_the_course_zones_lateness(tmp_path, overrides):
    """A TA whose Moodle profile is in Berlin downloads the worksheet: every
    date is written six hours later than New York's. Stated, the lateness is
    the same as from the instructor's own download."""
    home, _, _ = graded(download(tmp_path / "ny", overrides=overrides), tmp_path / "ny")
    berlin = download(tmp_path / "berlin", user_tz="Europe/Berlin", overrides=overrides)
    rows, notes, term = graded(berlin, tmp_path / "berlin", worksheet_timezone="Europe/Berlin")
    assert lateness(rows) == lateness(home)
    assert rows["bo"].submitted_at == "2026-10-07T01:59:00-04:00"   # shown in the course's zone
    assert term.worksheet_zone_source == "--worksheet-timezone Europe/Berlin"
    # course.toml's [moodle] worksheet_timezone does the same
    stated = download(tmp_path / "toml", user_tz="Europe/Berlin", overrides=overrides,
                      course=COURSE + '[moodle]\nworksheet_timezone = "Europe/Berlin"\n')
    rows, _, _ = graded(stated, tmp_path / "toml")
    assert lateness(rows) == lateness(home)


def test_a_berlin_worksheet_read_in_the_courses_zone_stops_naming_the_rows(tmp_path):
    """Without the worksheet's zone, the kit's lateness is checked against
    Moodle's Status; they disagree on every row near the due date, and the
    run stops before grading, saying which rows and what to give."""
    berlin = download(tmp_path, user_tz="Europe/Berlin", overrides=False)
    with pytest.raises(ValueError) as stopped:
        graded(berlin, tmp_path)
    message = str(stopped.value)
    assert message.startswith("The kit's lateness disagrees with Moodle's own Status on 4 "
                              "row(s) of the grading worksheet (its dates read in "
                              "America/New_York (the course's")
    assert (f"{berlin['roster']}, line 2: ann (Ann Lee): Moodle's Status 'Submitted for "
            f"grading' (no \"late\": on time); the kit: submitted 2026-10-06 02:58-04:00 "
            f"(Moodle grading worksheet), due 2026-10-05 23:59-04:00 (course.toml's "
            f"[deadlines] lab1): 2 h 59 min late") in message
    assert ("bo (Bo Lee): Moodle's Status 'Submitted for grading - 1 day 2 hours late' (1 "
            "day 2 h to 1 day 3 h late); the kit: submitted 2026-10-07 07:59-04:00") in message
    assert "Nothing was graded." in message and "--worksheet-timezone <that zone>" in message
    assert "[moodle] worksheet_timezone in course.toml" in message


def test_with_override_columns_a_worksheet_in_another_zone_stops_on_its_due_dates(tmp_path):
    """The Due date column shows Moodle's due date on every row without an
    override: none is course.toml's when read in the wrong zone."""
    berlin = download(tmp_path, user_tz="Europe/Berlin")
    with pytest.raises(ValueError) as stopped:
        graded(berlin, tmp_path)
    message = str(stopped.value)
    assert (f"{berlin['roster']}: no row's Due date is course.toml's due date of lab1, "
            f"2026-10-05 23:59-04:00: the worksheet's Due date is 'Tuesday, 6 October 2026, "
            f"5:59 AM', 2026-10-06 05:59-04:00, on 5 of 8 rows (lines 2, 3, 4, 5, 9) (6 h 0 "
            f"min later, as far apart as two time zones") in message
    assert "Nothing was graded." in message and "--worksheet-timezone <that zone>" in message
    assert "make course.toml's [deadlines] lab1 the assignment's due date in Moodle" in message


def test_a_course_due_date_that_is_not_moodles_stops_too(tmp_path):
    """The zone is right (stated), but course.toml's due date is a day off
    Moodle's: Moodle's Status and the kit disagree, and the run says so."""
    paths = download(tmp_path, overrides=False,
                     course=COURSE.replace("2026-10-05 23:59", "2026-10-04 23:59"))
    with pytest.raises(ValueError, match=r"on 4 row\(s\) .*its dates read in America/New_York "
                                         r"\(--worksheet-timezone America/New_York\)"):
        graded(paths, tmp_path, worksheet_timezone="America/New_York")


def test_without_a_due_date_in_course_toml_nothing_is_late_and_the_notes_say_why(tmp_path):
    paths = download(tmp_path, user_tz="Europe/Berlin",
                     course=COURSE.replace('lab1 = "2026-10-05 23:59"\n', ""))
    rows, notes, _ = graded(paths, tmp_path)
    assert all(r.penalty == 0 for r in rows.values())
    assert any("Moodle's worksheet gives due dates for lab1 (Due date), but course.toml has no "
               "due date for lab1: the kit takes no late penalty" in n for n in notes)


def test_the_zone_is_checked_and_remembered_with_its_worksheet(tmp_path):
    from autograder.pipeline import remembered_term

    with pytest.raises(ValueError, match=r"--worksheet-timezone 'Berlin' is not a time zone: "
                                         r"give the IANA name"):
        GradingOptions(worksheet_timezone="Berlin")
    bad = download(tmp_path, course=COURSE + '[moodle]\nworksheet_timezone = "CEST"\n')
    with pytest.raises(ValueError, match=r"\[moodle\] worksheet_timezone 'CEST' is not a time"):
        Term.load("lab1", POINTS, tmp_path, course_file=bad["course"])
    out, sheet = tmp_path / "out", bad["roster"]
    options = remembered_term(out, GradingOptions(roster=sheet, worksheet_timezone="UTC"))
    assert options.worksheet_timezone == "UTC"
    assert remembered_term(out, GradingOptions()).worksheet_timezone == "UTC"
    assert remembered_term(out, GradingOptions(roster=sheet)).worksheet_timezone == "UTC"
    other = tmp_path / "other.csv"
    other.write_bytes(sheet.read_bytes())
    assert remembered_term(out, GradingOptions(roster=other)).worksheet_timezone is None


def test_grade_stops_before_grading_with_exit_status_2(tmp_path, capsys):
    from autograder.cli import main

    berlin = download(tmp_path, user_tz="Europe/Berlin", overrides=False)
    status = main(["grade", "lab1", str(berlin["zip"]), "--out", str(tmp_path / "out"),
                   "--roster", str(berlin["roster"]), "--course", str(berlin["course"]),
                   "--quiet", "--jobs", "1", "--no-similarity"])
    assert status == 2
    err = capsys.readouterr().err
    assert "error: The kit's lateness disagrees with Moodle's own Status on 4 row(s)" in err
    assert not (tmp_path / "out" / "grades.csv").exists()
