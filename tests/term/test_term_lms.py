"""The term on downloads shaped like the LMSs' own (issue 31), without grading.

Each test lists a download as `grade` does (autograder.grader.submissions.
collect), checks the instructor's files against it (Term.check) and applies
the term to made-up results (Term.apply): what is tested is whose each file
is, which time it has and what the late policy takes, not the hidden tests.

The shapes: Canvas's "Download Submissions" zip stamps every entry with the
time the zip was built (canvas-lms app/models/content_zipper.rb adds files
without a time, and rubyzip's Zip::Entry stamps DOSTime.now; the sample term,
data/sample_term/build.py, is built so); Canvas's submissions API gives
``submitted_at`` in UTC (lib/api/v1/submission.rb); Moodle names a
participant's folder ``<Full name>_<participant id>_assignsubmission_file_``
(mod/assign/locallib.php, download_submissions) and its grading worksheet
carries "Last modified (submission)" written by userdate() in English as
"Monday, 5 October 2026, 11:59 PM"; Gradescope's submission_metadata.yml
lists every member of a group under ``:submitters:``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from autograder.grader.results import ExerciseResult, SubmissionResult
from autograder.grader.submissions import collect
from autograder.term.apply import Term
from autograder.term.roster import read_roster

ROOT = Path(__file__).resolve().parents[2]
TERM = ROOT / "data" / "sample_term"
SAMPLES = ROOT / "data" / "sample_submissions" / "lab1"
POINTS = {"dot_scores": 4.0, "softmax": 6.0}
NOTEBOOK = (SAMPLES / "alice.ipynb").read_bytes()


def results(collected, score: float = 8.0) -> list[SubmissionResult]:
    """Each submission graded ``score`` of 10, as the tests would report it."""
    return [SubmissionResult(s.student_id, "lab1", score, 10.0, source_name=s.source_name,
                             exercises=[ExerciseResult("dot_scores", 4.0, 4.0),
                                        ExerciseResult("softmax", score - 4.0, 6.0)])
            for s in collected.submissions]


def run(term: Term, collected, score: float = 8.0):
    term.check(collected)
    rows, notes = term.apply(results(collected, score),
                             {s.student_id: s for s in collected.submissions}, POINTS,
                             held=collected.held)
    return {row.student_id: row for row in rows}, notes


def sample_term(tmp_path, times: bool) -> tuple[Term, object]:
    term = Term.load("lab1", POINTS, tmp_path, course_file=TERM / "course.toml",
                     roster=TERM / "roster.csv",
                     times=TERM / "lab1_submissions.json" if times else None)
    return term, collect(TERM / "lab1_canvas.zip", "lab1", "lab1_attention", term.roster)


# ------------------------------------------------------------------ times


def test_canvas_zip_stamps_are_never_submission_times(tmp_path):
    """The sample term's zip was built ten days after the due date: read as
    submission times, every student would get no credit."""
    with zipfile.ZipFile(TERM / "lab1_canvas.zip") as archive:
        assert len({info.date_time for info in archive.infolist()}) == 1
    term, collected = sample_term(tmp_path, times=False)
    rows, notes = run(term, collected)
    sent = [r for r in rows.values() if r.status != "no submission"]
    assert len(sent) == 5
    assert all(r.penalty == 0 and r.score == 8.0 and r.submitted_at == "" for r in sent)
    [summary] = [n for n in notes if n.startswith("Submission times")]
    assert "UNKNOWN for 5" in summary and "content_zipper.rb" in summary
    assert "no late penalty was taken from them" in summary and "--times" in summary
    # Canvas's LATE marker is said on the row: Canvas applies its own policy on import
    assert any("Canvas marks it late" in n for n in rows["bbrown"].notes)
    assert "submission time unknown: no late penalty taken" in rows["aable"].notes


def test_canvas_times_from_the_submissions_api(tmp_path):
    term, collected = sample_term(tmp_path, times=True)
    rows, notes = run(term, collected)
    bob, carol, erin = rows["bbrown"], rows["cchen"], rows["eeve"]
    # due 2026-10-05 23:59 New York; bob 2026-10-07T06:00Z = 02:00 EDT: 26 h late, 2 days
    assert bob.submitted_at == "2026-10-07T02:00:00-04:00" and bob.penalty == pytest.approx(2.0)
    assert carol.penalty == 0 and "extension: due 2026-10-06 23:59-04:00 (extensions.csv, " \
                                  "line 2)" in carol.notes
    assert erin.penalty == 0 and any("within the grace period" in n for n in erin.notes)
    assert "Submission times of 5 submissions: 5 from the Canvas submissions API." in notes
    assert term.class_facts(list(rows.values()))["late_penalised"] == 1


def make_zip(path: Path, members: dict[str, bytes], stamp=None, stamps=None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for index, (name, data) in enumerate(members.items()):
            when = stamps[index] if stamps else stamp
            archive.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


def course(tmp_path, trust: bool = False) -> Path:
    path = tmp_path / "course.toml"
    path.write_text('[deadlines]\ntimezone = "UTC"\nlab1 = "2026-10-05 23:59"\n'
                    f'[late]\npenalty_percent = 10\ntrust_file_times = {str(trust).lower()}\n')
    return path


def test_one_stamp_on_every_file_is_not_a_time_even_when_file_times_are_trusted(tmp_path):
    archive = make_zip(tmp_path / "class.zip", {"ann.ipynb": NOTEBOOK, "ben.ipynb": NOTEBOOK,
                                                 "cy.ipynb": NOTEBOOK},
                       stamps=[(2026, 10, 9, 12, 0, 0), (2026, 10, 9, 12, 0, 2),
                               (2026, 10, 9, 12, 0, 4)])
    term = Term.load("lab1", POINTS, tmp_path, course_file=course(tmp_path, trust=True))
    collected = collect(archive, "lab1", "lab1_attention")
    rows, notes = run(term, collected)
    assert all(r.penalty == 0 and not r.submitted_at for r in rows.values())
    assert any("every file in the zip carries one time (2026-10-09 12:00:00)" in n
               for n in notes)
    # stamps that differ are the files' own: trusted when the course says so
    spread = make_zip(tmp_path / "spread.zip", {"ann.ipynb": NOTEBOOK, "ben.ipynb": NOTEBOOK},
                      stamps=[(2026, 10, 5, 12, 0, 0), (2026, 10, 7, 12, 0, 0)])
    term = Term.load("lab1", POINTS, tmp_path, course_file=course(tmp_path, trust=True))
    rows, _ = run(term, collect(spread, "lab1", "lab1_attention"))
    assert rows["ann"].penalty == 0 and rows["ben"].penalty == pytest.approx(2 * 0.1 * 10)
    # and not trusted when it does not
    term = Term.load("lab1", POINTS, tmp_path, course_file=course(tmp_path))
    rows, notes = run(term, collect(spread, "lab1", "lab1_attention"))
    assert rows["ben"].penalty == 0 and any("UNKNOWN for 2" in n for n in notes)


MOODLE_WORKSHEET = (
    # mod/assign/gradingtable.php's columns, as the worksheet download writes them
    'Identifier,"Full name","Email address",Status,Grade,"Maximum Grade",'
    '"Grade can be changed","Last modified (submission)","Last modified (grade)",'
    '"Feedback comments"\n'
    '"Participant 200001","Jane Doe",jane@uni.example,"Submitted for grading",,10.00,Yes,'
    '"Monday, 5 October 2026, 9:00 PM",-,\n'
    '"Participant 200002","Tom Lee",tom@uni.example,"Submitted for grading - 1 day 10 hours '
    'late",,10.00,Yes,"Wednesday, 7 October 2026, 10:15 AM",-,\n'
    '"Participant 200003","Ada Kay",ada@uni.example,"No submission",,10.00,Yes,-,-,\n'
)


def test_moodle_times_come_from_the_grading_worksheet_not_the_zip(tmp_path):
    """Moodle's zip stamps a file when it reached the file pool (a draft);
    the worksheet's "Last modified (submission)" is the submission time."""
    archive = make_zip(tmp_path / "moodle.zip", {
        "Jane Doe_200001_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
        "Tom Lee_200002_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
    }, stamps=[(2026, 10, 1, 9, 0, 0), (2026, 10, 2, 9, 0, 0)])
    (tmp_path / "worksheet.csv").write_text(MOODLE_WORKSHEET)
    term = Term.load("lab1", POINTS, tmp_path, course_file=course(tmp_path, trust=True),
                     roster=tmp_path / "worksheet.csv")
    rows, notes = run(term, collect(archive, "lab1", "lab1_attention", term.roster))
    assert rows["jane"].penalty == 0 and rows["jane"].submitted_at == "2026-10-05T21:00:00+00:00"
    # Tom: 1 day 10 h 16 min late: 2 days at 10% of 10 points
    assert rows["tom"].penalty == pytest.approx(2.0)
    assert rows["ada"].status == "no submission"
    assert "Submission times of 2 submissions: 2 from the Moodle grading worksheet." in notes


# ------------------------------------------------------------------ the instructor's files


def test_a_typo_in_extensions_or_overrides_is_refused_against_the_roster(tmp_path):
    (tmp_path / "ext.csv").write_text("student_id,lab,days\ncchenn,lab1,1\nbbrown,lab1,1\n")
    (tmp_path / "over.csv").write_text("student_id,exercise,score,note,by\n"
                                       "zedz,softmax,1,,\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=TERM / "course.toml",
                     roster=TERM / "roster.csv", extensions=tmp_path / "ext.csv",
                     overrides=tmp_path / "over.csv")
    collected = collect(TERM / "lab1_canvas.zip", "lab1", "lab1_attention", term.roster)
    with pytest.raises(ValueError) as error:
        term.check(collected)
    message = str(error.value)
    assert "line 2: 'cchenn' matches no student of the class (did you mean 'cchen'?)" in message
    assert "line 2: 'zedz' matches no student of the class (did you mean 'zzed'?)" in message
    assert "Nothing was graded. Correct or delete those lines." in message
    assert "bbrown" not in message


def test_extension_lines_may_name_a_student_by_any_id_the_roster_has(tmp_path):
    """A Canvas user id, a SIS id or the login all name the same student."""
    (tmp_path / "ext.csv").write_text("student_id,lab,days\n102,lab1,2\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=TERM / "course.toml",
                     roster=TERM / "roster.csv", extensions=tmp_path / "ext.csv",
                     times=TERM / "lab1_submissions.json")
    rows, _ = run(term, collect(TERM / "lab1_canvas.zip", "lab1", "lab1_attention",
                                term.roster))
    assert rows["bbrown"].penalty == 0  # 26 h late with 2 days' extension
    assert any(n.startswith("extension: due 2026-10-07 23:59") for n in rows["bbrown"].notes)


def test_an_extension_of_a_lab_the_kit_does_not_have_is_refused(tmp_path):
    (tmp_path / "ext.csv").write_text("student_id,lab,days\ncchen,lab 1,1\n")
    with pytest.raises(ValueError, match=r"line 2: the lab 'lab 1' is not a lab of the kit"):
        Term.load("lab1", POINTS, tmp_path, course_file=TERM / "course.toml",
                  extensions=tmp_path / "ext.csv")


def test_without_a_roster_unknown_lines_are_error_lines(tmp_path):
    archive = make_zip(tmp_path / "class.zip", {"ann.ipynb": NOTEBOOK}, stamp=(2026, 1, 1, 0, 0, 0))
    (tmp_path / "ext.csv").write_text("student_id,lab,days\nanne,lab1,1\n")
    (tmp_path / "times.csv").write_text("student_id,submitted_at\nann,2026-10-06 12:00\n"
                                        "bob,2026-10-06 12:00\n")
    term = Term.load("lab1", POINTS, tmp_path, course_file=course(tmp_path),
                     extensions=tmp_path / "ext.csv", times=tmp_path / "times.csv")
    rows, notes = run(term, collect(archive, "lab1", "lab1_attention"))
    assert any("line 2: 'anne' matches no student of the class (did you mean 'ann'?)" in n
               for n in notes)
    assert any("line 3: 'bob' matches no student of the class" in n for n in notes)
    assert rows["ann"].penalty == pytest.approx(1.0)  # no extension applied to ann


def test_canvas_api_times_of_users_not_on_the_roster_are_error_lines(tmp_path):
    api = json.loads((TERM / "lab1_submissions.json").read_text())
    api.append({"user_id": 999, "submitted_at": "2026-10-06T00:00:00Z"})
    (tmp_path / "api.json").write_text(json.dumps(api))
    term = Term.load("lab1", POINTS, tmp_path, course_file=TERM / "course.toml",
                     roster=TERM / "roster.csv", times=tmp_path / "api.json")
    _, notes = run(term, collect(TERM / "lab1_canvas.zip", "lab1", "lab1_attention",
                                 term.roster))
    assert any("submission 7: '999' matches no student of the class" in n for n in notes)


# ------------------------------------------------------------------ identities


MOODLE_GRADEBOOK = ("First name,Last name,ID number,Institution,Department,Email address\n"
                    "Jane,Doe,S1,Uni,CS,jane@uni.example\n"
                    "Tom,Lee,S2,Uni,CS,tom@uni.example\n")


def test_two_moodle_participants_under_one_name_are_never_merged(tmp_path):
    """A roster without participant ids matches Moodle's folders by full name:
    a second participant renamed to a classmate's name must not have their
    notebook graded as the classmate's."""
    archive = make_zip(tmp_path / "moodle.zip", {
        "Jane Doe_200001_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
        "Jane Doe_200099_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
        "Tom Lee_200002_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
    }, stamp=(2026, 10, 1, 0, 0, 0))
    (tmp_path / "gradebook.csv").write_text(MOODLE_GRADEBOOK)
    term = Term.load("lab1", POINTS, tmp_path, course_file=course(tmp_path),
                     roster=tmp_path / "gradebook.csv")
    collected = collect(archive, "lab1", "lab1_attention", term.roster)
    assert [s.student_id for s in collected.submissions] == ["S2"]
    assert len(collected.unmatched) == 2
    assert all("moodle 200001, moodle 200099" in u.reason and "never merged" in u.reason
               for u in collected.unmatched)
    rows, _ = run(term, collected)
    assert rows["S1"].status == "no submission"
    assert any("were not graded as theirs" in n for n in rows["S1"].notes)


def test_with_a_roster_a_name_that_only_cleans_to_an_id_is_not_that_student(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.ipynb").write_bytes(NOTEBOOK)
    (folder / "!alice.ipynb").write_bytes((SAMPLES / "bob.ipynb").read_bytes())
    (folder / "BOB.ipynb").write_bytes(NOTEBOOK)
    (tmp_path / "roster.csv").write_text("student_id,name\nalice,Alice\nbob,Bob\n")
    roster = read_roster(tmp_path / "roster.csv")
    collected = collect(folder, "lab1", "lab1_attention", roster)
    graded = {s.student_id: s.source_name for s in collected.submissions}
    # alice's own file is hers; "!alice" is listed; BOB (the only one) is bob's
    assert graded == {"alice": "alice.ipynb", "bob": "BOB.ipynb"}
    [listed] = collected.unmatched
    assert listed.files == ["!alice.ipynb"] and "only cleans to alice's id" in listed.reason


# ------------------------------------------------------------------ Gradescope groups


GROUP_METADATA = """\
submission_5001:
  :submitters:
  - :name: Ann Smith
    :sid: '3001'
    :email: ann@uni.example
  - :name: Ben Jones
    :sid: '3002'
    :email: ben@uni.example
  :created_at: 2026-10-05 20:00:00.000000000 -04:00
  :score: 8.0
submission_5002:
  :submitters:
  - :name: Cy Ray
    :sid: '3003'
    :email: cy@uni.example
  :created_at: 2026-10-07 20:00:00.000000000 -04:00
"""


def gradescope_export(tmp_path) -> Path:
    export = tmp_path / "assignment_77_export"
    for folder in ("submission_5001", "submission_5002"):
        (export / folder).mkdir(parents=True)
        (export / folder / "lab1_attention.ipynb").write_bytes(NOTEBOOK)
    (export / "submission_metadata.yml").write_text(GROUP_METADATA)
    return export


@pytest.mark.parametrize("with_roster", [False, True])
def test_every_member_of_a_gradescope_group_gets_its_score(tmp_path, with_roster):
    export = gradescope_export(tmp_path)
    roster = None
    if with_roster:
        roster = tmp_path / "roster.csv"
        roster.write_text("student_id,name,email\n3001,Ann Smith,ann@uni.example\n"
                          "3002,Ben Jones,ben@uni.example\n3003,Cy Ray,cy@uni.example\n")
    path = tmp_path / "course.toml"
    path.write_text('[deadlines]\ntimezone = "America/New_York"\nlab1 = "2026-10-05 23:59"\n'
                    '[late]\npenalty_percent = 10\n')
    term = Term.load("lab1", POINTS, tmp_path, course_file=path, roster=roster)
    collected = collect(export, "lab1", "lab1_attention", term.roster)
    assert [s.student_id for s in collected.submissions] == ["3001", "3003"]
    rows, _ = run(term, collected, score=7.0)
    assert sorted(rows) == ["3001", "3002", "3003"]
    ann, ben = rows["3001"], rows["3002"]
    assert (ben.score, ben.source_name, ben.penalty) == (7.0, ann.source_name, 0)
    note = ("group submission (Gradescope submission_5001) of 3001, 3002: graded once, every "
            "member gets its score")
    assert note in ann.notes and note in ben.notes
    assert rows["3003"].penalty == pytest.approx(2.0)  # 2 days late
    facts = term.class_rows([ann, ben], {s.student_id: s for s in collected.submissions}, {})
    assert facts[1].identity.user_id == "3002" and facts[1].identity.name == "Ben Jones"


# ------------------------------------------------------------------ a class of 33, per LMS


def _shapes():
    import importlib.util
    import sys

    if "sample_term_shapes" not in sys.modules:
        spec = importlib.util.spec_from_file_location("sample_term_shapes", TERM / "shapes.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["sample_term_shapes"] = module
        spec.loader.exec_module(module)
    return sys.modules["sample_term_shapes"]


def expected_penalty(truth, score: float = 8.0) -> float:
    """The course's policy worked out from the true time: 10% of 10 points per
    day or part of one, at most 50%, no grace; a Moodle extension moves the due date."""
    import math

    if truth.submitted_at is None:
        return 0.0
    seconds = truth.seconds_late
    if truth.lms_extension_until is not None:
        seconds = (truth.submitted_at - truth.lms_extension_until).total_seconds()
    if seconds <= 0:
        return 0.0
    return min(score, 10.0 * min(50, math.ceil(seconds / 86400) * 10) / 100)


@pytest.mark.parametrize("lms, with_times", [("canvas", True), ("canvas", False),
                                             ("moodle", True), ("gradescope", True)])
def test_a_class_of_33_as_each_lms_gives_it(tmp_path, lms, with_times):
    """Issue 31's 'done when', on a class made by data/sample_term/shapes.py
    from each LMS's own source (SOURCES.md): every enrolled student has a row,
    graded from their own file only; no one is penalised from a time the
    download does not carry; the late ones lose what the policy says;
    group partners share their group's row."""
    made = _shapes().lms_class(lms, n=33)
    paths = made.write(tmp_path / "download")
    rules = tmp_path / "course.toml"
    rules.write_text('[deadlines]\ntimezone = "America/New_York"\nlab1 = "2026-10-05 23:59"\n'
                     '[late]\npenalty_percent = 10\nper = "day"\nmax_penalty_percent = 50\n')
    assert made.due.isoformat() == "2026-10-05T23:59:00-04:00"
    term = Term.load("lab1", POINTS, tmp_path, course_file=rules, roster=paths["roster"],
                     times=paths.get("times") if with_times else None)
    collected = collect(paths["download"], "lab1", "lab1_attention", term.roster)
    rows, notes = run(term, collected)
    truth = made.by_key()
    assert sorted(rows) == sorted(truth)
    assert not collected.unmatched and not term.errors
    for key, true in truth.items():
        row = rows[key]
        if true.submitted_at is None:
            assert row.status == "no submission", key
            continue
        assert row.source_name in true.files, (key, row.source_name, true.files)
        timed = with_times or lms != "canvas"
        assert row.penalty == pytest.approx(expected_penalty(true) if timed else 0.0), key
        if true.group:
            assert any(n.startswith("group submission") for n in row.notes), key
        if "draft" in true.cases:
            assert any(n.startswith("Moodle: a draft") for n in row.notes), key
        if true.lms_extension_until is not None:
            assert any(n.startswith("extension: due 2026-10-07 23:59") for n in row.notes), key
    [summary] = [n for n in notes if n.startswith("Submission times")]
    if lms == "canvas" and not with_times:
        assert "UNKNOWN for 31" in summary and "content_zipper.rb" in summary
    else:
        assert "UNKNOWN" not in summary, summary
