"""Resubmissions and zips that students uploaded (issue 46, items 3 and 6), without grading.

A student who uploads again on Moodle keeps both files: the file picker
stores the later one as ``lab1_attention (1).ipynb``
(``file_storage::get_unused_filename``; data/sample_term/shapes.py
``moodle_unused_filename``). Moodle 4.1+ stamps every entry of its download
with the download's time, Moodle 4.0 with when the bytes reached its file
pool: the file graded must not depend on which. Canvas names a later upload
``-1`` (``Attachment.make_unique_filename``) and its attachment ids grow.
A ``.zip`` a student uploaded is opened, under the download's limits.
And report.html's pass rates count graded notebooks only.
"""

from __future__ import annotations

import datetime
import importlib.util
import io
import os
import pickle
import sys
import zipfile
import zoneinfo
from pathlib import Path

import pytest

from autograder.grader import intake
from autograder.grader.reports import (common_failures, counted_note, left_out, pass_rates,
                                       write_gradebook_table, write_reports)
from autograder.grader.results import ExerciseResult, SubmissionResult
from autograder.grader.submissions import archives, collect, collect_submissions
from autograder.grader.submissions.lms import canvas_number, moodle_number
from autograder.labs import LABS
from autograder.term.roster import read_roster

ROOT = Path(__file__).resolve().parents[2]
TERM = ROOT / "data" / "sample_term"
SAMPLES = ROOT / "data" / "sample_submissions" / "lab1"
NY = zoneinfo.ZoneInfo("America/New_York")
UTC = datetime.timezone.utc
LAB, STEM = "lab1", "lab1_attention"
OLD = (SAMPLES / "bob.ipynb").read_bytes()      # answers every exercise, some wrongly
NEW = (SAMPLES / "alice.ipynb").read_bytes()    # answers every exercise
CUT = NEW[: len(NEW) // 2]                       # an upload cut short


def _load_shapes():
    spec = importlib.util.spec_from_file_location("sample_term_shapes", TERM / "shapes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sample_term_shapes", module)
    spec.loader.exec_module(module)
    return module


shapes = _load_shapes()
DUE = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=NY)
DOWNLOADED = DUE + datetime.timedelta(days=10, hours=3)


def _zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


STUDENT_ZIP = _zip_of({"lab1/lab1_attention.ipynb": NEW,
                       "__MACOSX/lab1/._lab1_attention.ipynb": b"\x00\x05\x16\x07mac",
                       "lab1/.ipynb_checkpoints/lab1_attention-checkpoint.ipynb": OLD})


def _uploads(*files):
    """A participant's files as Moodle keeps them: each upload of a name the
    draft area has is renamed by get_unused_filename; each reaches the file
    pool an hour after the one before (``pooled``: hours, newest last unless given)."""
    names, out = [], []
    for filename, data in files:
        name = shapes.moodle_unused_filename(filename, names)
        names.append(name)
        out.append((name, data))
    return out


def moodle_class():
    """Participants, and what each must be graded from (the file's own name)."""
    base = DUE - datetime.timedelta(days=2)
    cases = {
        # the student: a later upload beside the first, both complete
        "resubmitted": (_uploads(("lab1_attention.ipynb", OLD), ("lab1_attention.ipynb", NEW)),
                        None, "lab1_attention (1).ipynb"),
        # 4.0's pool time says the opposite (these bytes were in the pool before)
        "pool-time-earlier": (_uploads(("lab1_attention.ipynb", OLD),
                                       ("lab1_attention.ipynb", NEW)),
                              {"lab1_attention.ipynb": base,
                               "lab1_attention (1).ipynb": base - datetime.timedelta(days=30)},
                              "lab1_attention (1).ipynb"),
        "three-uploads": (_uploads(("lab1_attention.ipynb", OLD), ("lab1_attention.ipynb", OLD),
                                   ("lab1_attention.ipynb", NEW)), None,
                          "lab1_attention (2).ipynb"),
        "later-empty": (_uploads(("lab1_attention.ipynb", NEW), ("lab1_attention.ipynb", b"")),
                        None, "lab1_attention.ipynb"),
        "later-cut-short": (_uploads(("lab1_attention.ipynb", NEW),
                                     ("lab1_attention.ipynb", CUT)),
                            None, "lab1_attention.ipynb"),
        "two-names": ([("Copy of lab1_attention.ipynb", OLD), ("lab1_attention.ipynb", NEW)],
                      {"Copy of lab1_attention.ipynb": base + datetime.timedelta(hours=5),
                       "lab1_attention.ipynb": base}, "lab1_attention.ipynb"),
        "zipped": ([("lab1.zip", STUDENT_ZIP)], None, "lab1_attention.ipynb"),
        "zip-resubmitted": (_uploads(("lab1.zip", _zip_of({"lab1_attention.ipynb": OLD})),
                                     ("lab1.zip", STUDENT_ZIP)), None, "lab1_attention.ipynb"),
    }
    participants, expected = [], {}
    for i, (case, (files, pooled, graded)) in enumerate(cases.items()):
        p = shapes.MoodleParticipant(200001 + i, "Student", case.title(), f"s{i}@uni.example",
                                     files=files, status="submitted", timemodified=base)
        if pooled is None:   # each upload an hour after the one before
            pooled = {name: base + datetime.timedelta(hours=k) for k, (name, _) in
                      enumerate(files)}
        p.pooled_at = pooled
        participants.append(p)
        expected[f"Student_{case.title()}_{200001 + i}"] = graded
    return participants, expected


DOWNLOADS = [("4.0", True), ("4.1", True), ("4.0", False), ("4.1", False)]


@pytest.fixture(scope="module")
def moodle_downloads(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moodle")
    participants, expected = moodle_class()
    found = {}
    for version, folders in DOWNLOADS:
        path = folder / f"moodle_{version}_{'folders' if folders else 'flat'}.zip"
        shapes.moodle_zip(path, participants, DOWNLOADED, server_tz="America/New_York",
                          version=version, folders=folders)
        found[(version, folders)] = {s.student_id: s for s in
                                     collect_submissions(path, LAB, STEM)}
    # the 4.0 download unzipped: its files keep the zip's (file pool) times
    unzipped = folder / "unzipped"
    with zipfile.ZipFile(folder / "moodle_4.0_folders.zip") as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, unzipped))
            stamp = datetime.datetime(*info.date_time).timestamp()
            os.utime(target, (stamp, stamp))
    found[("4.0", "unzipped")] = {s.student_id: s for s in
                                  collect_submissions(unzipped, LAB, STEM)}
    return found, expected


def _graded(submission) -> str:
    return submission.source_name.rsplit("/", 1)[-1].split("_assignsubmission_file_")[-1]


# ------------------------------------------------------------------ Moodle


def test_moodle_names_a_later_upload_as_get_unused_filename_does():
    assert shapes.moodle_unused_filename("a.ipynb", ["a.ipynb"]) == "a (1).ipynb"
    assert shapes.moodle_unused_filename("a.ipynb", ["a.ipynb", "a (1).ipynb"]) == "a (2).ipynb"
    assert shapes.moodle_unused_filename("a (1).ipynb", ["a.ipynb", "a (1).ipynb"]) == "a (2).ipynb"
    assert shapes.moodle_unused_filename(
        "a.ipynb", ["a.ipynb", "a (9).ipynb", "a (10).ipynb"]) == "a (11).ipynb"
    assert shapes.moodle_unused_filename("a.ipynb", ["a.ipynb", "a (copy).ipynb"]) == "a (1).ipynb"
    assert moodle_number("lab1_attention (2).ipynb") == ("lab1_attention.ipynb", 2)
    assert moodle_number("lab1_attention(2).ipynb") == ("lab1_attention(2).ipynb", 0)
    assert moodle_number("notes (1)") == ("notes", 1)
    assert canvas_number("lab1_attention-1.ipynb") == ("lab1_attention.ipynb", 1)
    assert canvas_number("lab1_attention.ipynb") == ("lab1_attention.ipynb", 0)


def test_the_same_class_from_moodle_4_0_and_4_1_grades_the_same_files(moodle_downloads):
    found, expected = moodle_downloads
    for download, by_id in found.items():
        assert sorted(by_id) == sorted(expected), download
        chosen = {student: _graded(s) for student, s in by_id.items()}
        assert chosen == expected, download
    # the student: the later upload, whatever the zip's times
    for (_, folders), by_id in found.items():
        resubmitted = by_id["Student_Resubmitted_200001"]
        assert resubmitted.data == NEW and resubmitted.problem == ""
        assert "(the later upload: Moodle names a later upload of a name '<name> (1)', " \
               "' (2)'... (file_storage::get_unused_filename))" in resubmitted.note
        if folders != "unzipped":   # Moodle's zip times are not submission times
            assert resubmitted.submitted_at == ""


def test_a_later_upload_that_is_empty_or_cut_short_does_not_replace_the_work(moodle_downloads):
    found, _ = moodle_downloads
    for by_id in found.values():
        empty = by_id["Student_Later-Empty_200004"]
        assert empty.data == NEW and empty.problem == ""
        assert "the later upload 'lab1_attention (1).ipynb' was not graded: empty file " \
               "(0 bytes): nothing to grade (Moodle names a later upload" in empty.note
        cut = by_id["Student_Later-Cut-Short_200005"]
        assert cut.data == NEW and cut.problem == ""
        assert "the later upload 'lab1_attention (1).ipynb' was not graded: it is not a " \
               "notebook that can be read (cut short or damaged)" in cut.note


def test_two_names_moodle_does_not_order_are_chosen_by_name_and_said_so(moodle_downloads):
    found, _ = moodle_downloads
    for by_id in found.values():
        two = by_id["Student_Two-Names_200006"]
        assert two.data == NEW
        assert "the closest name to the lab notebook; Moodle's download does not say which " \
               "was uploaded later" in two.note


def test_a_zip_in_a_moodle_download_is_graded_from_inside(moodle_downloads):
    found, _ = moodle_downloads
    for (version, folders), by_id in found.items():
        zipped = by_id["Student_Zipped_200007"]
        assert zipped.problem == "" and zipped.data == NEW
        assert zipped.source_name.endswith("lab1.zip/lab1/lab1_attention.ipynb")
        assert "graded 'lab1/lab1_attention.ipynb' from inside the student's zip " \
               "'lab1.zip'" in zipped.note
        again = by_id["Student_Zip-Resubmitted_200008"]
        assert again.data == NEW and "lab1 (1).zip/" in again.source_name
        # a Submission travels to a worker process as plain values and reads its file there
        travelled = pickle.loads(pickle.dumps(zipped))
        assert travelled.read() == (NEW, "")
        notebook, problem = intake.take(travelled, LABS[LAB])
        assert problem == "" and notebook is not None


# ------------------------------------------------------------------ Canvas


def test_canvas_grades_the_later_upload_whatever_the_zip_order(tmp_path):
    student = shapes.CanvasStudent(1001, "Jane Doe", "Doe, Jane", login_id="jdoe")
    other = shapes.CanvasStudent(1002, "Bob Brown", "Brown, Bob", login_id="bbrown")
    resubmitted = shapes.CanvasSubmission(student, 51001, due_at=DUE, submitted_at=DUE)
    resubmitted.submission_type = "online_upload"
    second = shapes.canvas_resubmission_name("lab1_attention.ipynb", ["lab1_attention.ipynb"])
    assert second == "lab1_attention-1.ipynb"
    # the later upload first in the zip: its stamp is the earlier one (a slow job)
    resubmitted.files = [shapes.CanvasFile(90007, second, NEW),
                         shapes.CanvasFile(90003, "lab1_attention.ipynb", OLD)]
    renamed = shapes.CanvasSubmission(other, 51002, due_at=DUE, submitted_at=DUE)
    renamed.submission_type = "online_upload"
    renamed.files = [shapes.CanvasFile(90009, "Copy of lab1_attention.ipynb", NEW),
                     shapes.CanvasFile(90004, "lab1_attention.ipynb", OLD)]
    shapes.canvas_zip(tmp_path / "c.zip", [resubmitted, renamed], DOWNLOADED,
                      seconds_per_entry=4)
    found = {s.student_id: s for s in collect_submissions(tmp_path / "c.zip", LAB, STEM)}
    jane = found["doejane_1001"]
    assert jane.source_name == "doejane_1001_90007_lab1_attention-1.ipynb"
    assert "Canvas's attachment id 90007 is after 90003" in jane.note
    bob = found["brownbob_1002"]
    assert bob.source_name == "brownbob_1002_90009_Copy of lab1_attention.ipynb"


# ------------------------------------------------------------------ zips students upload


def _student_folder(tmp_path, data: bytes, name="lab1.zip") -> Path:
    root = tmp_path / "subs"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / name).write_bytes(data)
    return root


def _alice(root):
    [alice] = collect_submissions(root, LAB, STEM)
    assert alice.student_id == "alice"
    return alice


def test_a_students_zip_in_a_folder_is_graded_with_a_note(tmp_path):
    alice = _alice(_student_folder(tmp_path, STUDENT_ZIP))
    assert alice.source_name == "alice/lab1.zip/lab1/lab1_attention.ipynb"
    assert alice.problem == "" and alice.data == NEW
    assert alice.note == ("graded 'lab1/lab1_attention.ipynb' from inside the student's zip "
                          "'lab1.zip'")
    assert alice.time_source == "file time"


def test_a_students_zip_inside_the_class_zip_is_read_through_both(tmp_path):
    outer = tmp_path / "class.zip"
    with zipfile.ZipFile(outer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("alice/lab1.zip", (2026, 10, 5, 20, 0, 0)), STUDENT_ZIP)
        archive.writestr("bob/lab1_attention.ipynb", OLD)
    found = {s.student_id: s for s in collect_submissions(outer, LAB, STEM)}
    alice = found["alice"]
    assert alice.origin[0] == "nested" and alice.origin[1][0] == "zip"
    assert alice.read() == (NEW, "")
    # its time is the class zip's entry for the student's zip, never the time inside
    assert (alice.submitted_at, alice.time_source) == ("2026-10-05T20:00:00", "zip time")


@pytest.mark.parametrize("data, says", [
    (b"PK\x03\x04 not really a zip", "not a notebook: the zip 'lab1.zip' cannot be opened "
                                     "(BadZipFile: File is not a zip file): it is damaged"),
    (_zip_of({"inner.zip": STUDENT_ZIP}), "not a notebook: the zip 'lab1.zip' holds only another "
                                          "zip ('inner.zip'): a zip inside a zip is not opened"),
    (_zip_of({"lab1.py": b"x = 1\n", "__MACOSX/._lab1.py": b"x"}),
     "not a notebook: the zip 'lab1.zip' holds no notebook (it holds 'lab1.py')"),
    (_zip_of({}), "not a notebook: the zip 'lab1.zip' is empty"),
    (_zip_of({f"s{i}/lab1_attention.ipynb": NEW for i in range(11)}),
     "not graded: the zip 'lab1.zip' holds 11 notebooks, more than the 10 one student's "
     "upload may hold"),
])
def test_a_zip_that_cannot_be_graded_keeps_its_row_with_the_reason(tmp_path, data, says):
    alice = _alice(_student_folder(tmp_path, data))
    assert alice.source_name == "alice/lab1.zip"
    assert alice.problem.startswith(says)
    assert "upload lab1_attention.ipynb itself, not in a zip" in alice.problem
    assert alice.data == data


def test_students_zips_named_as_them_in_a_wrapping_folder_are_theirs(tmp_path):
    root = tmp_path / "subs"
    (root / "export").mkdir(parents=True)
    (root / "export" / "alice.zip").write_bytes(STUDENT_ZIP)
    (root / "export" / "bob.zip").write_bytes(_zip_of({"lab1_attention.ipynb": OLD}))
    found = {s.student_id: s for s in collect_submissions(root, LAB, STEM)}
    assert sorted(found) == ["alice", "bob"]
    assert found["alice"].data == NEW and found["bob"].data == OLD
    assert found["bob"].source_name == "export/bob.zip/lab1_attention.ipynb"


def test_a_zip_inside_the_students_zip_is_not_opened_and_said(tmp_path):
    data = _zip_of({"lab1_attention.ipynb": NEW, "old.zip": STUDENT_ZIP})
    alice = _alice(_student_folder(tmp_path, data))
    assert alice.data == NEW
    assert "'old.zip' inside it (a zip inside a zip) not opened" in alice.note


def test_a_students_zip_of_several_notebooks_chooses_as_among_files(tmp_path):
    data = _zip_of({"scratch.ipynb": OLD, "lab1_attention.ipynb": NEW,
                    "lab1_attention (1).ipynb": b""})
    alice = _alice(_student_folder(tmp_path, data))
    assert alice.source_name == "alice/lab1.zip/lab1_attention.ipynb"
    assert alice.note.startswith("graded 'lab1_attention.ipynb' from inside the student's zip")
    assert "3 files for this student: graded 'alice/lab1.zip/lab1_attention.ipynb'" in alice.note


def test_a_students_zip_goes_through_the_download_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 1000)
    alice = _alice(_student_folder(tmp_path, STUDENT_ZIP))
    assert alice.problem.startswith("not a notebook: the zip 'lab1.zip' would unpack to")
    assert "(a zip bomb?): not opened" in alice.problem
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 2 ** 31)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_MEMBERS", 2)
    alice = _alice(_student_folder(tmp_path / "2", STUDENT_ZIP))
    assert "has 3 files, more than the 2 a download may have" in alice.problem
    monkeypatch.setattr(archives, "MAX_ARCHIVE_MEMBERS", 20_000)
    monkeypatch.setattr(archives, "MAX_FILE_BYTES", len(NEW) - 1)
    alice = _alice(_student_folder(tmp_path / "3", STUDENT_ZIP))
    assert alice.problem.startswith("file too large")


def test_a_password_protected_notebook_in_a_zip_says_so(tmp_path):
    data = bytearray(_zip_of({"lab1_attention.ipynb": NEW}))
    # set the encryption bit (general purpose bit 0) in the local and central headers
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(signature) + offset
        data[at] |= 0x01
    alice = _alice(_student_folder(tmp_path, bytes(data)))
    assert alice.problem.startswith("the file is password-protected inside the zip")


def test_with_a_roster_the_same_files_are_chosen(tmp_path):
    participants, expected = moodle_class()
    (tmp_path / "roster.csv").write_text(
        "First name,Last name,ID number,Institution,Department,Email address\n"
        "Student,Resubmitted,S1,Uni,CS,s0@uni.example\n"
        "Student,Zip-Resubmitted,S8,Uni,CS,s7@uni.example\n")
    roster = read_roster(tmp_path / "roster.csv")
    for version in ("4.0", "4.1"):
        path = tmp_path / f"m{version}.zip"
        shapes.moodle_zip(path, [participants[0], participants[7]], DOWNLOADED, version=version)
        collected = collect(path, LAB, STEM, roster)
        assert {s.student_id: (_graded(s), s.data == NEW) for s in collected.submissions} == {
            "S1": ("lab1_attention (1).ipynb", True), "S8": ("lab1_attention.ipynb", True)}


# ------------------------------------------------------------------ reports


def _row(student, status, scores, source="x.ipynb", notes=()):
    exercises = [ExerciseResult(name, score, 1.0, "" if score else "wrong")
                 for name, score in zip(("dot_scores", "softmax"), scores)]
    return SubmissionResult(student, "lab1", sum(scores), 2.0, status, source, exercises,
                            list(notes))


def test_pass_rates_count_graded_notebooks_only(tmp_path):
    results = [
        _row("a", "graded", [1, 1]), _row("b", "graded", [1, 0]),
        _row("c", "partly graded: the time limit", [0, 0]),
        _row("d", "not a notebook: .py uploaded; expected a .ipynb", [0, 0], "d.py"),
        _row("e", "not a notebook: the zip 'e.zip' cannot be opened", [0, 0], "e.zip"),
        _row("f", "empty file: upload the .ipynb saved from Jupyter or Colab", [0, 0]),
        _row("g", "invalid notebook: not complete JSON (line 3, column 1: x)", [0, 0]),
        _row("h", "no submission", [0, 0], ""),
    ]
    assert pass_rates(results) == [("dot_scores", 2, 3), ("softmax", 1, 3)]
    assert common_failures(results) == {"dot_scores": [(1, "wrong")],
                                        "softmax": [(2, "wrong")]}
    assert left_out(results) == [(2, "files that were not notebooks"), (1, "empty file"),
                                 (1, "notebook cut short or damaged")]
    assert counted_note(results) == (
        "Of 3 graded notebooks; 2 files that were not notebooks, 1 empty file and 1 notebook "
        "cut short or damaged are not counted (their exercises are at 0 for that reason, "
        "not for the exercise's).")
    page = write_reports(results, tmp_path, "Lab 1")["report.html"].read_text()
    assert "Of 3 graded notebooks; 2 files that were not notebooks" in page
    assert counted_note(results[:2]) == "Of 2 graded notebooks."


def test_the_terminal_table_shows_the_file_chosen(tmp_path):
    results = [
        _row("jane", "graded", [1, 1],
             "Jane Doe_200001_assignsubmission_file/lab1_attention (1).ipynb",
             ["2 files for this student: graded 'Jane Doe_200001_assignsubmission_file/"
              "lab1_attention (1).ipynb' (the later upload: ...); ignored ..."]),
        _row("alice", "graded", [1, 0], "alice/lab1.zip/lab1/lab1_attention.ipynb",
             ["graded 'lab1/lab1_attention.ipynb' from inside the student's zip 'lab1.zip'"]),
        _row("bob", "graded", [0, 0], "bob/lab1_attention.ipynb"),
    ]
    lines = write_gradebook_table(results).splitlines()
    assert lines[0].split() == ["student_id", "score", "status", "file"]
    assert lines[2].split() == ["alice", "1/2", "graded", "*", "lab1.zip/lab1/lab1_attention.ipynb"]
    assert lines[3].split() == ["bob", "0/2", "graded"]
    assert lines[4].endswith("graded  * lab1_attention (1).ipynb")
    assert lines[-1].startswith("* the file graded of several the student uploaded, or from "
                                "inside their zip (2): grades.csv's file and notes")
    # grades.csv keeps the file graded in its own column (its header unchanged)
    rows = (write_reports(results, tmp_path, "Lab 1")["grades.csv"].read_text()
            .splitlines())
    assert rows[0].split(",")[9] == "file"
    assert "alice/lab1.zip/lab1/lab1_attention.ipynb" in rows[1]
