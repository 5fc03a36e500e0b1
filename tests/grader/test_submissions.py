"""Finding submissions and student ids (autograder/grader/submissions/, submissions.py its facade)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from autograder.grader import submissions
from autograder.grader.submissions import archives
from autograder.grader.submissions import collect_submissions, parse_gradescope_metadata, sanitize_id

LAB, STEM = "lab1", "lab1_attention"
NOTEBOOK = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def make_folder(root: Path, files: dict[str, bytes | str], mtimes: dict[str, float] | None = None) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        if mtimes and name in mtimes:
            os.utime(path, (mtimes[name], mtimes[name]))
    return root


def make_zip(path: Path, files: dict[str, bytes | str],
             dates: dict[str, tuple] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            info = zipfile.ZipInfo(name, date_time=(dates or {}).get(name, (2024, 1, 1, 12, 0, 0)))
            archive.writestr(info, content)
    return path


def collect(path) -> dict[str, submissions.Submission]:
    found = collect_submissions(path, LAB, STEM)
    by_id = {s.student_id: s for s in found}
    assert len(by_id) == len(found), "student ids must be unique"
    return by_id


def ids_of(files, tmp_path, as_zip=False) -> list[str]:
    if as_zip:
        return sorted(collect(make_zip(tmp_path / "subs.zip", files)))
    return sorted(collect(make_folder(tmp_path / "subs", files)))


# ---------------------------------------------------------------- id rules


@pytest.mark.parametrize("as_zip", [False, True])
def test_plain_stem_in_top_folder(tmp_path, as_zip):
    files = {"alice.ipynb": NOTEBOOK, "s1234567.ipynb": NOTEBOOK}
    assert ids_of(files, tmp_path, as_zip) == ["alice", "s1234567"]


def test_plain_stem_keeps_data_and_source_name(tmp_path):
    found = collect(make_folder(tmp_path, {"alice.ipynb": NOTEBOOK}))
    assert found["alice"].data == NOTEBOOK
    assert found["alice"].source_name == "alice.ipynb"
    assert found["alice"].problem == ""


@pytest.mark.parametrize("as_zip", [False, True])
def test_lab_notebook_in_student_folder(tmp_path, as_zip):
    files = {
        "alice/lab1_attention.ipynb": NOTEBOOK,
        "bob/lab1/lab1_attention.ipynb": NOTEBOOK,
    }
    assert ids_of(files, tmp_path, as_zip) == ["alice", "bob"]


def test_nested_source_name_is_relative(tmp_path):
    found = collect(make_folder(tmp_path, {"bob/lab1/lab1_attention.ipynb": NOTEBOOK}))
    assert found["bob"].source_name == "bob/lab1/lab1_attention.ipynb"


@pytest.mark.parametrize("name", [
    "Copy of lab1_attention.ipynb",
    "lab1_attention (1).ipynb",
    "Copy of Copy of lab1_attention.ipynb",
    "lab1_attention - Copy.ipynb",
])
def test_colab_and_browser_duplicates_in_student_folder(tmp_path, name):
    found = collect(make_folder(tmp_path, {f"alice/{name}": NOTEBOOK}))
    assert list(found) == ["alice"]
    assert found["alice"].problem == ""
    assert found["alice"].source_name == f"alice/{name}"


def test_duplicates_of_one_student_grade_the_newest(tmp_path):
    files = {"alice/lab1_attention.ipynb": b'{"old": 1}',
             "alice/lab1_attention (1).ipynb": b'{"new": 1}',
             "alice/Copy of lab1_attention.ipynb": b'{"older": 1}'}
    mtimes = {"alice/lab1_attention.ipynb": 1_000_000,
              "alice/lab1_attention (1).ipynb": 2_000_000,
              "alice/Copy of lab1_attention.ipynb": 500_000}
    found = collect(make_folder(tmp_path, files, mtimes))
    alice = found["alice"]
    assert alice.source_name == "alice/lab1_attention (1).ipynb"
    assert alice.data == b'{"new": 1}'
    assert alice.problem == ""
    assert "3 files for this student" in alice.note
    assert "the newest" in alice.note
    assert "alice/lab1_attention.ipynb" in alice.note


def test_duplicates_in_zip_use_zip_dates(tmp_path):
    files = {"alice/lab1_attention.ipynb": b'{"new": 1}',
             "alice/Copy of lab1_attention.ipynb": b'{"old": 1}'}
    dates = {"alice/lab1_attention.ipynb": (2024, 3, 2, 0, 0, 0),
             "alice/Copy of lab1_attention.ipynb": (2024, 3, 1, 0, 0, 0)}
    found = collect(make_zip(tmp_path / "s.zip", files, dates))
    assert found["alice"].source_name == "alice/lab1_attention.ipynb"


def test_same_date_prefers_exact_name(tmp_path):
    files = {"alice/Copy of lab1_attention.ipynb": b'{"copy": 1}',
             "alice/lab1_attention.ipynb": b'{"exact": 1}'}
    found = collect(make_zip(tmp_path / "s.zip", files))
    assert found["alice"].data == b'{"exact": 1}'
    assert "closest name" in found["alice"].note


def test_lab_named_notebook_beats_other_notebook(tmp_path):
    files = {"alice/scratch.ipynb": b'{"scratch": 1}', "alice/lab1_attention.ipynb": NOTEBOOK,
             "alice/helpers.py": b"x = 1\n"}
    mtimes = {"alice/scratch.ipynb": 3_000_000, "alice/lab1_attention.ipynb": 1_000_000}
    found = collect(make_folder(tmp_path, files, mtimes))
    assert found["alice"].source_name == "alice/lab1_attention.ipynb"
    assert "alice/helpers.py" in found["alice"].note
    assert found["alice"].problem == ""


def test_top_level_duplicates_are_one_student(tmp_path):
    files = {"alice.ipynb": b'{"a": 1}', "alice (1).ipynb": b'{"b": 1}'}
    mtimes = {"alice.ipynb": 1_000_000, "alice (1).ipynb": 2_000_000}
    found = collect(make_folder(tmp_path, files, mtimes))
    assert list(found) == ["alice"]
    assert found["alice"].source_name == "alice (1).ipynb"


@pytest.mark.parametrize("as_zip", [False, True])
def test_canvas_bulk_download(tmp_path, as_zip):
    files = {
        "doejane_12345_6789_lab1_attention.ipynb": NOTEBOOK,
        "smithjohn_LATE_23456_7890_lab1_attention.ipynb": NOTEBOOK,
        "leeann_34567_8901_Copy of lab1_attention.ipynb": NOTEBOOK,
        "kimbo_45678_9012_lab1_attention-1.ipynb": NOTEBOOK,
    }
    assert ids_of(files, tmp_path, as_zip) == [
        "doejane_12345", "kimbo_45678", "leeann_34567", "smithjohn_23456"]


def test_canvas_late_is_a_note_and_resubmission_is_no_problem(tmp_path):
    files = {"smithjohn_LATE_23456_7890_lab1_attention.ipynb": NOTEBOOK,
             "kimbo_45678_9012_lab1_attention-1.ipynb": NOTEBOOK}
    found = collect(make_folder(tmp_path, files))
    assert found["smithjohn_23456"].problem == ""
    assert "late" in found["smithjohn_23456"].note.lower()
    assert found["kimbo_45678"].problem == ""
    assert found["kimbo_45678"].note == ""


def test_canvas_two_files_of_one_student(tmp_path):
    files = {"doejane_12345_6789_lab1_attention.ipynb": NOTEBOOK,
             "doejane_12345_6790_notes.txt": b"my notes"}
    found = collect(make_folder(tmp_path, files))
    assert list(found) == ["doejane_12345"]
    assert found["doejane_12345"].source_name == "doejane_12345_6789_lab1_attention.ipynb"
    assert found["doejane_12345"].problem == ""


def test_canvas_other_lab_and_py(tmp_path):
    files = {"doejane_12345_6789_lab2_multihead_attention.ipynb": NOTEBOOK,
             "smithjohn_23456_7890_lab1_attention.py": b"x = 1\n"}
    found = collect(make_folder(tmp_path, files))
    assert found["doejane_12345"].problem == (
        "this looks like lab2's notebook (lab2_multihead_attention.ipynb), not lab1's")
    assert found["smithjohn_23456"].problem.startswith(
        "not a notebook: .py uploaded; expected a .ipynb")


@pytest.mark.parametrize("as_zip", [False, True])
def test_moodle_folders(tmp_path, as_zip):
    files = {
        "Jane Doe_123456_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
        "José María O'Neil_234567_assignsubmission_file_/Copy of lab1_attention.ipynb": NOTEBOOK,
    }
    assert ids_of(files, tmp_path, as_zip) == ["Jane_Doe_123456", "Jose_Maria_ONeil_234567"]


def test_moodle_file_and_onlinetext_are_one_student(tmp_path):
    files = {
        "Jane Doe_123456_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
        "Jane Doe_123456_assignsubmission_onlinetext_/onlinetext.html": b"<p>hi</p>",
    }
    found = collect(make_folder(tmp_path, files))
    assert list(found) == ["Jane_Doe_123456"]
    assert found["Jane_Doe_123456"].problem == ""


def test_moodle_html_only_still_gets_a_row(tmp_path):
    files = {"Jane Doe_123456_assignsubmission_onlinetext_/onlinetext.html": b"<p>hi</p>"}
    found = collect(make_folder(tmp_path, files))
    assert found["Jane_Doe_123456"].problem.startswith("not a notebook: .html uploaded")
    assert found["Jane_Doe_123456"].data == b"<p>hi</p>"


GRADESCOPE_METADATA = """\
---
submission_98765:
  :submitters:
  - :name: Jane Doe
    :sid: '123456'
    :email: jane@example.com
  :created_at: 2024-03-01 10:00:00.000000000 -08:00
  :score: 10.0
:submission_11111:
  :submitters:
  - :name: Bob
    :sid: ''
    :email: "bob.b@example.com"
submission_22222:
  :submitters: []
"""


def test_gradescope_without_metadata(tmp_path):
    files = {"submission_98765/lab1_attention.ipynb": NOTEBOOK}
    assert ids_of(files, tmp_path) == ["submission_98765"]


@pytest.mark.parametrize("as_zip", [False, True])
def test_gradescope_with_metadata(tmp_path, as_zip):
    files = {
        "assignment_42_export/submission_metadata.yml": GRADESCOPE_METADATA,
        "assignment_42_export/submission_98765/lab1_attention.ipynb": NOTEBOOK,
        "assignment_42_export/submission_11111/lab1_attention.ipynb": NOTEBOOK,
        "assignment_42_export/submission_22222/lab1_attention.ipynb": NOTEBOOK,
    }
    assert ids_of(files, tmp_path, as_zip) == ["123456", "bob.b", "submission_22222"]


def test_gradescope_metadata_at_top(tmp_path):
    files = {"submission_metadata.yml": GRADESCOPE_METADATA,
             "submission_98765/lab1_attention.ipynb": NOTEBOOK}
    found = collect(make_folder(tmp_path, files))
    assert list(found) == ["123456"]
    assert "submission_98765" in found["123456"].note


def test_parse_gradescope_metadata():
    assert parse_gradescope_metadata(GRADESCOPE_METADATA) == {
        "submission_98765": "123456", "submission_11111": "bob.b"}


def test_gradescope_metadata_is_read_as_written():
    # An unquoted sid keeps its leading zeros (YAML 1.1 would read an octal),
    # a Ruby tag and a date that is no date are no errors, a group's first
    # submitter with a sid gives the id.
    text = """\
:submission_1: !ruby/hash:ActiveSupport::HashWithIndifferentAccess
  :submitters:
  - :name: Ann
    :sid: 0012345
  :created_at: 2024-13-45 99:00:00 -08:00
  :score: !ruby/object:BigDecimal 18:0.1e2
submission_2:
  :submitters:
  - :name: Ben
    :sid:
    :email: ben@example.com
  - :name: Cy
    :sid: 777
submission_3: just text
other_key:
  :submitters:
  - :sid: '999'
"""
    assert parse_gradescope_metadata(text) == {"submission_1": "0012345", "submission_2": "777"}
    assert parse_gradescope_metadata("") == {}


@pytest.mark.parametrize("text, says", [
    ("submission_1:\n  :submitters: [\n", "not valid YAML"),
    ("- submission_1\n- submission_2\n", "found a list"),
    ("[" * 5000, "not valid YAML"),
    ("a: *undefined_alias\n", "not valid YAML"),
])
def test_malformed_gradescope_metadata_is_a_clear_error(text, says):
    with pytest.raises(ValueError, match=says):
        parse_gradescope_metadata(text)


@pytest.mark.parametrize("as_zip", [False, True])
def test_malformed_gradescope_metadata_leaves_folder_ids_with_a_note(tmp_path, as_zip):
    files = {"submission_metadata.yml": "submission_98765:\n  :submitters: [\n  - :sid: 1\n",
             "submission_98765/lab1_attention.ipynb": NOTEBOOK,
             "submission_11111/lab1_attention.ipynb": NOTEBOOK}
    path = make_zip(tmp_path / "s.zip", files) if as_zip else make_folder(tmp_path / "s", files)
    found = collect(path)
    assert sorted(found) == ["submission_11111", "submission_98765"]
    note = found["submission_98765"].note
    assert "'submission_metadata.yml' could not be read: not valid YAML" in note, note
    assert "the ids are the submission folders' names" in note
    assert found["submission_98765"].problem == ""


def test_gradescope_metadata_past_its_bound_is_not_parsed(tmp_path, monkeypatch):
    from autograder.grader.submissions import lms

    monkeypatch.setattr(lms, "MAX_METADATA_BYTES", 100)
    files = {"submission_metadata.yml": GRADESCOPE_METADATA,
             "submission_98765/lab1_attention.ipynb": NOTEBOOK}
    found = collect(make_folder(tmp_path, files))
    assert list(found) == ["submission_98765"]
    size = len(GRADESCOPE_METADATA.encode())
    assert f"could not be read ({size:,} bytes, more than the 100 parsed)" \
        in found["submission_98765"].note


def test_other_lab_notebook_in_student_folder(tmp_path):
    found = collect(make_folder(tmp_path, {"alice/lab2_multihead_attention.ipynb": NOTEBOOK}))
    assert found["alice"].problem == (
        "this looks like lab2's notebook (lab2_multihead_attention.ipynb), not lab1's")
    assert found["alice"].data == NOTEBOOK


def test_other_lab_notebook_loses_to_the_right_one(tmp_path):
    files = {"alice/lab2_multihead_attention.ipynb": NOTEBOOK,
             "alice/lab1_attention.ipynb": NOTEBOOK}
    mtimes = {"alice/lab2_multihead_attention.ipynb": 9_000_000}
    found = collect(make_folder(tmp_path, files, mtimes))
    assert found["alice"].source_name == "alice/lab1_attention.ipynb"
    assert found["alice"].problem == ""


def test_other_lab_name_in_top_folder_is_taken_as_is(tmp_path):
    found = collect(make_folder(tmp_path, {"lab2_multihead_attention.ipynb": NOTEBOOK}))
    assert list(found) == ["lab2_multihead_attention"]
    assert found["lab2_multihead_attention"].problem == ""
    assert "looks like a lab notebook" in found["lab2_multihead_attention"].note


def test_single_wrapping_folder_is_looked_through(tmp_path):
    files = {"export/alice.ipynb": NOTEBOOK, "export/bob.ipynb": NOTEBOOK,
             "export/carol/lab1_attention.ipynb": NOTEBOOK}
    assert ids_of(files, tmp_path, as_zip=True) == ["alice", "bob", "carol"]


def test_one_student_folder_is_not_a_wrapper(tmp_path):
    files = {"alice/lab1/lab1_attention.ipynb": NOTEBOOK, "alice/notes.txt": b"notes",
             "alice/old/lab1_attention.ipynb": NOTEBOOK}
    assert ids_of(files, tmp_path, as_zip=True) == ["alice"]


# ---------------------------------------------------------------- sanitizing


@pytest.mark.parametrize("raw, expected", [
    ("alice", "alice"),
    ("Jane Doe", "Jane_Doe"),
    ("José  María", "Jose_Maria"),
    ("o'neil+x@y", "oneilxy"),
    (".hidden", "hidden"),
    ("a/b\\c", "abc"),
    ("张伟", ""),
])
def test_sanitize_id(raw, expected):
    assert sanitize_id(raw) == expected


def test_id_never_empty(tmp_path):
    files = {"张伟_123456_assignsubmission_file_/lab1_attention.ipynb": NOTEBOOK,
             "张伟/lab1_attention.ipynb": NOTEBOOK,
             "李娜.ipynb": NOTEBOOK}
    found = collect(make_folder(tmp_path, files))
    assert sorted(found) == ["123456", "lab1_attention", "student"]
    assert all(found.values())


def test_clashing_ids_are_made_unique(tmp_path):
    files = {"jane doe.ipynb": b'{"a": 1}', "jane_doe.ipynb": b'{"b": 1}',
             "jane_doe-2.ipynb": b'{"c": 1}'}
    found = collect(make_folder(tmp_path, files))
    assert sorted(found) == ["jane_doe", "jane_doe-2", "jane_doe-3"]
    # a name that is the id exactly keeps it; the one that only cleans to it does not
    assert found["jane_doe"].source_name == "jane_doe.ipynb"
    assert found["jane_doe-2"].source_name == "jane_doe-2.ipynb"
    assert found["jane_doe-3"].source_name == "jane doe.ipynb"


@pytest.mark.parametrize("impostor", ["!alice.ipynb", " alice.ipynb", "Alice.ipynb",
                                      "alice!.ipynb"])
def test_a_file_never_takes_a_classmates_id_and_ids_stay_from_run_to_run(tmp_path, impostor):
    """Issue 31: a file whose name only cleans to another student's id took
    it when it sorted first, and the owner became alice-2. The exact name wins,
    whatever the order; the clash is a note naming both files; OUT/ids.json
    keeps every id for the next run, so overrides and extensions follow the
    person."""
    files = {impostor: b'{"impostor": 1}', "alice.ipynb": b'{"alice": 1}',
             "bob.ipynb": b'{"bob": 1}'}
    folder = make_folder(tmp_path / "s", files)
    ids = tmp_path / "out" / "ids.json"
    found = submissions.collect(folder, "lab1", "lab1_attention", ids_file=ids)
    by_id = {s.student_id.casefold(): s.source_name for s in found.submissions}
    assert by_id["alice"] == "alice.ipynb" and by_id["alice-2"] == impostor
    [note] = found.notes
    assert "2 files give the id 'alice'" in note and "(its name is exactly the id)" in note
    assert "Check whose each file is" in note
    # the next run, with a new file that would sort before them, keeps the ids
    (folder / "Alice .ipynb").write_bytes(b'{"third": 1}') if impostor != "Alice.ipynb" \
        else (folder / "alice .ipynb").write_bytes(b'{"third": 1}')
    again = submissions.collect(folder, "lab1", "lab1_attention", ids_file=ids)
    after = {s.source_name: s.student_id for s in again.submissions}
    assert after["alice.ipynb"] == "alice"
    assert after[by_id["alice-2"]].casefold() == "alice-2"
    assert sorted(v.casefold() for v in after.values()) == ["alice", "alice-2", "alice-3", "bob"]
    # an exact name arriving later takes its id back from a file that only cleans to it
    # (a case variant is exact too: the id it had stays)
    if impostor == "Alice.ipynb":
        return
    for extra in ("Alice .ipynb", "alice .ipynb"):
        (folder / extra).unlink(missing_ok=True)
    ids.write_text(json.dumps({f"file/{impostor[:-6]}": "alice"}))
    again = submissions.collect(folder, "lab1", "lab1_attention", ids_file=ids)
    assert {s.source_name: s.student_id for s in again.submissions}["alice.ipynb"] == "alice"
    assert "it was 'alice' in an earlier run" in " ".join(again.notes)


def test_top_file_and_folder_with_same_name_are_two_rows(tmp_path):
    files = {"alice.ipynb": NOTEBOOK, "alice/lab1_attention.ipynb": NOTEBOOK}
    found = collect(make_folder(tmp_path, files))
    assert sorted(found) == ["alice", "alice-2"]


# ---------------------------------------------------------------- problems


def test_empty_file(tmp_path):
    found = collect(make_folder(tmp_path, {"alice.ipynb": b"", "bob/lab1_attention.ipynb": b" \n"}))
    assert found["alice"].problem.startswith("empty file")
    assert found["alice"].data == b""
    assert found["bob"].problem.startswith("empty file")


def test_empty_file_loses_to_a_real_one(tmp_path):
    files = {"alice/lab1_attention.ipynb": b"", "alice/Copy of lab1_attention.ipynb": NOTEBOOK}
    mtimes = {"alice/lab1_attention.ipynb": 9_000_000}
    found = collect(make_folder(tmp_path, files, mtimes))
    assert found["alice"].data == NOTEBOOK
    assert found["alice"].problem == ""


@pytest.mark.parametrize("name, ext", [("alice.py", ".py"), ("alice.html", ".html"),
                                       ("alice.pdf", ".pdf")])
def test_not_a_notebook(tmp_path, name, ext):
    found = collect(make_folder(tmp_path, {name: b"content"}))
    assert found["alice"].problem.startswith(f"not a notebook: {ext} uploaded; expected a .ipynb")
    assert found["alice"].data == b"content"


def test_py_in_student_folder(tmp_path):
    found = collect(make_folder(tmp_path, {"alice/lab1_attention.py": b"x = 1\n"}))
    assert found["alice"].problem.startswith("not a notebook: .py uploaded; expected a .ipynb")


def test_browser_renamed_notebook_is_graded(tmp_path):
    found = collect(make_folder(tmp_path, {"alice/lab1_attention.ipynb.txt": NOTEBOOK}))
    assert found["alice"].problem == ""
    assert "renamed by the browser" in found["alice"].note


def test_noise_is_ignored(tmp_path):
    files = {
        "alice.ipynb": NOTEBOOK,
        "__MACOSX/._alice.ipynb": b"junk",
        ".ipynb_checkpoints/alice-checkpoint.ipynb": NOTEBOOK,
        "bob/.ipynb_checkpoints/lab1_attention-checkpoint.ipynb": NOTEBOOK,
        "bob/lab1_attention.ipynb": NOTEBOOK,
        ".DS_Store": b"junk",
        "submission_metadata.yml": "---\n",
        "carol/.DS_Store": b"junk",
    }
    for as_zip in (False, True):
        (tmp_path / str(as_zip)).mkdir()
        assert ids_of(files, tmp_path / str(as_zip), as_zip) == ["alice", "bob"]


def test_zip_member_too_large(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_FILE_BYTES", 100)
    found = collect(make_zip(tmp_path / "s.zip", {"alice.ipynb": b"x" * 200,
                                                   "bob.ipynb": NOTEBOOK[:90]}))
    assert found["alice"].data is None
    assert found["alice"].problem.startswith("file too large")
    assert found["bob"].problem == ""


def test_zip_member_lying_about_its_size(tmp_path, monkeypatch):
    """A member whose header claims a small size never yields more, nor crashes."""
    path = make_zip(tmp_path / "s.zip", {"alice.ipynb": b"x" * 200})
    archive = zipfile.ZipFile(path)
    archive.infolist()[0].file_size = 10
    entries = archives.zip_entries(archive)
    assert entries[0].data() is None
    assert entries[0].problem.startswith("could not read the file")
    archive.close()


def test_read_is_cut_at_the_limit(monkeypatch):
    import io
    monkeypatch.setattr(archives, "MAX_FILE_BYTES", 100)
    entry = archives.Entry("a.ipynb", ("a.ipynb",), 10, 0.0,
                            archives.entry_reader(lambda: io.BytesIO(b"x" * 1000)))
    assert entry.data() is None
    assert entry.problem.startswith("file too large")


def test_zip_path_traversal_names_are_only_names(tmp_path):
    files = {"../../evil/lab1_attention.ipynb": NOTEBOOK, "/abs/bob.ipynb": NOTEBOOK,
             "carol.ipynb": NOTEBOOK}
    found = collect(make_zip(tmp_path / "s.zip", files))
    assert sorted(found) == ["abs", "carol", "evil"]
    assert found["evil"].source_name == "../../evil/lab1_attention.ipynb"
    assert not (tmp_path / "evil").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zip"]


def test_folder_symlink_not_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    subs = make_folder(tmp_path / "subs", {"bob.ipynb": NOTEBOOK})
    (subs / "alice.ipynb").symlink_to(secret)
    found = collect(subs)
    assert found["alice"].data is None
    assert "symbolic link" in found["alice"].problem


def test_empty_folder_gives_nothing(tmp_path):
    assert collect_submissions(tmp_path, LAB, STEM) == []


# ---------------------------------------------------------------- bad paths


def test_missing_path_error(tmp_path):
    with pytest.raises(ValueError) as error:
        collect_submissions(tmp_path / "nope", LAB, STEM)
    message = str(error.value)
    assert "does not exist" in message
    assert "folder" in message and ".zip" in message
    assert "nope" in message


def test_invalid_zip_error(tmp_path):
    bad = tmp_path / "subs.zip"
    bad.write_bytes(b"this is not a zip")
    with pytest.raises(ValueError) as error:
        collect_submissions(bad, LAB, STEM)
    message = str(error.value)
    assert "not a valid zip file" in message
    assert "unzip" in message


def test_single_notebook_path_error(tmp_path):
    single = tmp_path / "alice.ipynb"
    single.write_bytes(NOTEBOOK)
    with pytest.raises(ValueError) as error:
        collect_submissions(single, LAB, STEM)
    message = str(error.value)
    assert "neither a folder nor a zip" in message
    assert "put it in a folder" in message


# ---------------------------------------------------------------- issue 18


def test_a_zip_bomb_is_refused_as_a_whole_and_nothing_is_kept_in_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 1000)
    bomb = make_zip(tmp_path / "bomb.zip", {f"s{i}.ipynb": b" " * 600 for i in range(2)})
    with pytest.raises(ValueError) as error:
        collect_submissions(bomb, LAB, STEM)
    assert "bomb.zip" in str(error.value) and "unpack to" in str(error.value)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 2000)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_MEMBERS", 1)
    with pytest.raises(ValueError, match="more than the 1 a class download has"):
        collect_submissions(bomb, LAB, STEM)


@pytest.mark.parametrize("as_zip", [False, True])
def test_a_submission_says_where_its_file_is_and_reads_it_when_asked(tmp_path, as_zip):
    import pickle

    files = {"alice.ipynb": NOTEBOOK + b" " * 100_000}
    path = make_zip(tmp_path / "s.zip", files) if as_zip else make_folder(tmp_path / "s", files)
    alice = collect(path)["alice"]
    assert len(pickle.dumps(alice)) < 1000      # what travels to a worker: no content
    assert alice.data == files["alice.ipynb"]


def test_a_name_that_is_not_utf8_is_shown_replaced_and_read_through_its_bytes(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / os.fsdecode(b"ren\xe9e.ipynb")).write_bytes(NOTEBOOK)
    (folder / os.fsdecode(b"\xff\xfe.ipynb")).write_bytes(NOTEBOOK)
    found = collect(folder)
    assert sorted(found) == ["rene", "student"]
    assert found["rene"].source_name == "ren\ufffde.ipynb"
    assert found["rene"].data == NOTEBOOK and "not UTF-8" in found["rene"].note
    assert found["rene"].source_name.encode("utf-8")      # writable as it is


def _lab1(answered: int) -> bytes:
    """A lab1 notebook with the first ``answered`` exercises answered."""
    from autograder.labs import LABS

    cells = []
    for index, exercise in enumerate(LABS["lab1"].exercises):
        body = "    return 1" if index < answered else "    raise NotImplementedError()"
        cells.append({"cell_type": "code", "source": f"def {exercise}(x):\n{body}",
                      "metadata": {"nbgrader": {"grade_id": exercise, "solution": True}},
                      "outputs": [], "execution_count": None})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                       "nbformat_minor": 5}).encode()


@pytest.mark.parametrize("as_zip", [False, True])
def test_a_newer_copy_with_fewer_answers_does_not_replace_the_work(tmp_path, as_zip):
    files = {"alice.ipynb": _lab1(6), "alice (1).ipynb": _lab1(0),
             "bob.ipynb": _lab1(2), "bob (1).ipynb": _lab1(5)}
    if as_zip:
        path = make_zip(tmp_path / "s.zip", files, dates={
            "alice.ipynb": (2024, 1, 1, 10, 0, 0), "bob.ipynb": (2024, 1, 1, 10, 0, 0)})
    else:
        path = make_folder(tmp_path / "s", files, mtimes={"alice.ipynb": 1e9, "bob.ipynb": 1e9})
    found = collect(path)
    assert found["alice"].source_name == "alice.ipynb"
    assert "graded 'alice.ipynb' (the most exercises answered: 6 of 6, against 0 in " \
           "'alice (1).ipynb')" in found["alice"].note
    assert found["bob"].source_name == "bob (1).ipynb"
    assert "5 of 6, against 2 in 'bob.ipynb'" in found["bob"].note
