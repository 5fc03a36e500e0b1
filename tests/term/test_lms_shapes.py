"""The LMS-shaped fixture builders (data/sample_term/shapes.py) write what the LMSs write.

These test the builders, not the kit's grading: each check is a rule quoted in
data/sample_term/SOURCES.md (Canvas's one zip stamp and file names, the
submissions API's UTC times, the gradebook export's rows; Moodle's folder
names, its worksheet's columns and "Last modified (submission)" date text;
Gradescope's export folders and submission_metadata.yml).
"""

from __future__ import annotations

import csv
import datetime
import importlib.util
import io
import json
import re
import sys
import zipfile
import zoneinfo
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TERM = ROOT / "data" / "sample_term"
UTC = datetime.timezone.utc
NY = zoneinfo.ZoneInfo("America/New_York")


def _load_shapes():
    spec = importlib.util.spec_from_file_location("sample_term_shapes", TERM / "shapes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sample_term_shapes", module)
    spec.loader.exec_module(module)
    return module


shapes = _load_shapes()


@pytest.fixture(scope="module")
def classes():
    return {lms: shapes.lms_class(lms) for lms in ("canvas", "moodle", "gradescope")}


def _zip(cls):
    return zipfile.ZipFile(io.BytesIO(cls.download))


def _dos(when: datetime.datetime) -> tuple:
    """A wall-clock time as a zip entry keeps it (2-second resolution)."""
    return (when.year, when.month, when.day, when.hour, when.minute, when.second // 2 * 2)


# ------------------------------------------------------------------ Canvas


def test_canvas_names_follow_content_zipper():
    assert shapes.canvas_entry_prefix("Brown, Bob", 102, late=False) == "brownbob_102"
    assert shapes.canvas_entry_prefix("Brown, Bob", 102, late=True) == "brownbob_LATE_102"
    # [[:word:]] keeps letters of any script and "_"; "_<digits>_" is squeezed first
    assert shapes.canvas_entry_prefix("Núñez, José", 7, late=False) == "núñezjosé_7"
    assert shapes.canvas_entry_prefix("O'Neil-Smith, Kate", 8, late=False) == "oneilsmithkate_8"
    assert shapes.canvas_entry_prefix("Doe_12_, Jane", 9, late=False) == "doe12jane_9"
    assert shapes.canvas_entry_prefix("Points Possible", 5, late=False) == "pointspossible_5"
    assert shapes.canvas_entry_prefix(None, 5, late=True, anonymous_id="acJ4Q") == "LATE_anon_acJ4Q"
    assert shapes.canvas_attachment_name('a:b*c?.ipynb') == "a_b_c_.ipynb"
    # Attachment.make_unique_filename, in a submissions folder
    assert shapes.canvas_resubmission_name("lab1_attention.ipynb", []) == "lab1_attention.ipynb"
    assert shapes.canvas_resubmission_name("lab1_attention.ipynb",
                                           ["lab1_attention.ipynb"]) == "lab1_attention-1.ipynb"
    assert shapes.canvas_resubmission_name(
        "lab1_attention.ipynb", ["lab1_attention.ipynb", "lab1_attention-1.ipynb"]) \
        == "lab1_attention-2.ipynb"
    assert shapes.canvas_resubmission_name("my.notes.v2.ipynb", ["my.notes.v2.ipynb"]) \
        == "my-1.notes.v2.ipynb"


def test_canvas_zip_is_flat_with_one_stamp_the_build_time(classes):
    cls = classes["canvas"]
    infos = _zip(cls).infolist()
    assert len({i.date_time for i in infos}) == 1, "every entry carries the build time"
    assert infos[0].date_time == _dos(cls.built_at.astimezone(UTC))
    assert cls.built_at - cls.due >= datetime.timedelta(days=10)
    pattern = re.compile(r"^[^/_]+_(LATE_)?\d+_\d+_[^/]+$")
    for info in infos:
        assert pattern.match(info.filename), info.filename
        assert info.flag_bits & 0x800, "rubyzip with Zip.unicode_names sets EFS on every entry"
        assert info.compress_type == zipfile.ZIP_DEFLATED
    sent = [t for t in cls.truth if t.submitted_at is not None]
    assert sorted(i.filename for i in infos) == sorted(f for t in sent for f in t.files)


def test_canvas_marks_late_exactly_when_submitted_after_the_due_date(classes):
    cls = classes["canvas"]
    for t in cls.truth:
        if t.submitted_at is None:
            assert t.files == ()
            continue
        assert t.late == (t.submitted_at > cls.due)
        assert all(("_LATE_" in f) == t.late for f in t.files), t
    cases = {c: t for t in cls.truth for c in t.cases}
    assert cases["late-by-seconds"].seconds_late == 30 and cases["late-by-seconds"].marked_late
    assert not cases["at-due-date"].late


def test_canvas_tricky_names(classes):
    cls = classes["canvas"]
    by_case = {}
    for t in cls.truth:
        for c in t.cases:
            by_case.setdefault(c, []).append(t)
    [clash] = by_case["name-cleans-to-classmate-id"]
    [classmate] = by_case["classmate-of-name-clash"]
    assert clash.files[0].split("_")[0] == classmate.key == "leeann"
    assert clash.key != classmate.key
    [resub] = by_case["resubmitted"]
    assert resub.files[0].endswith("_lab1_attention-1.ipynb")
    [accented] = by_case["accented-name"]
    assert accented.files[0].startswith("núñezjosé_")
    assert len(by_case["no-submission"]) == 2
    rows = list(csv.reader(io.StringIO(cls.roster.decode("utf-8"))))
    assert rows[1][0] == "    Points Possible"
    assert ["Points Possible"] == [r[0] for r in rows[2:] if r[0].strip() == "Points Possible"]


def test_canvas_gradebook_export_rows(classes):
    cls = classes["canvas"]
    text = cls.roster.decode("utf-8")
    assert not text.startswith("\ufeff") and "\r" not in text
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:6] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 1 (4321)"]
    assert rows[0][6:] == [f"Assignments {t}" for t in (
        "Current Points", "Final Points", "Current Score", "Unposted Current Score",
        "Final Score", "Unposted Final Score")] + [
        "Current Points", "Final Points", "Current Score", "Unposted Current Score",
        "Final Score", "Unposted Final Score"]
    assert rows[1][:6] == ["    Points Possible", "", "", "", "", "10.00"]
    assert rows[1][6:] == ["(read only)"] * 12
    assert rows[-1][0] == "Student, Test"
    students = rows[2:-1]
    assert len(students) == 33
    keys = [shapes._collation_key(r[0]) for r in students]
    assert keys == sorted(keys)
    logins = {r[3] for r in students}
    assert logins == {t.key for t in cls.truth}
    # the zip's user ids are the gradebook's IDs
    ids = {r[1] for r in students}
    assert {t.lms_id for t in cls.truth} == ids
    assert '"Brown, Bob",1002,S1002,bbrown,Section B,,' in text


def test_canvas_submissions_api_times_are_utc_and_late_is_canvas_s(classes):
    cls = classes["canvas"]
    api = json.loads(cls.times)
    assert len(api) == 33 and "\n" not in cls.times.decode().strip()
    truth = {t.lms_id: t for t in cls.truth}
    for item in api:
        t = truth[str(item["user_id"])]
        assert {"user_id", "submitted_at", "late", "seconds_late", "workflow_state", "attempt",
                "missing", "cached_due_date"} <= set(item)
        if t.submitted_at is None:
            assert item["submitted_at"] is None and item["workflow_state"] == "unsubmitted"
            assert item["attempt"] is None and item["missing"] is True
            continue
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", item["submitted_at"])
        when = datetime.datetime.strptime(item["submitted_at"], "%Y-%m-%dT%H:%M:%SZ")
        assert when.replace(tzinfo=UTC) == t.submitted_at.replace(microsecond=0)
        assert item["late"] == t.late and item["seconds_late"] == t.seconds_late
        assert item["workflow_state"] == "submitted" and item["missing"] is False
    assert {i["attempt"] for i in api if i["submitted_at"]} == {1, 2}


def test_canvas_zip_stamps_can_spread_over_a_slow_job(tmp_path):
    student = shapes.CanvasStudent(1, "A B", "B, A")
    due = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=NY)
    subs = [shapes.CanvasSubmission(student, 10 + k, due, due, 1, [shapes.CanvasFile(
        100 + k, "x.ipynb", b"{}")], "online_upload") for k in range(3)]
    built = datetime.datetime(2026, 10, 15, 18, 3, 6, tzinfo=UTC)
    shapes.canvas_zip(tmp_path / "z.zip", subs, built, seconds_per_entry=2)
    stamps = [i.date_time for i in zipfile.ZipFile(tmp_path / "z.zip").infolist()]
    assert stamps == [(2026, 10, 15, 18, 3, 6), (2026, 10, 15, 18, 3, 8), (2026, 10, 15, 18, 3, 10)]
    # a server in another zone writes its own wall clock
    shapes.canvas_zip(tmp_path / "z2.zip", subs[:1], built, server_tz="America/Denver")
    assert zipfile.ZipFile(tmp_path / "z2.zip").infolist()[0].date_time == (2026, 10, 15, 12, 3, 6)


def test_builders_refuse_naive_times(tmp_path):
    with pytest.raises(ValueError, match="timezone-aware"):
        shapes.canvas_zip(tmp_path / "z.zip", [], datetime.datetime(2026, 10, 15))
    with pytest.raises(ValueError, match="timezone-aware"):
        shapes.moodle_userdate(datetime.datetime(2026, 10, 15), "UTC")


# ------------------------------------------------------------------ Moodle


def test_moodle_userdate_and_format_time():
    monday = datetime.datetime(2026, 10, 5, 21, 0, 59, tzinfo=NY)
    assert shapes.moodle_userdate(monday, "America/New_York") == "Monday, 5 October 2026, 9:00 PM"
    assert shapes.moodle_userdate(monday, "UTC") == "Tuesday, 6 October 2026, 1:00 AM"
    assert shapes.moodle_userdate(datetime.datetime(2026, 10, 5, 0, 5, tzinfo=UTC), "UTC") \
        == "Monday, 5 October 2026, 12:05 AM"
    assert shapes.moodle_userdate(datetime.datetime(2026, 10, 15, 12, 0, tzinfo=UTC), "UTC") \
        == "Thursday, 15 October 2026, 12:00 PM"
    parsed = datetime.datetime.strptime("Monday, 5 October 2026, 9:00 PM",
                                        shapes.MOODLE_USERDATE_STRPTIME)
    assert parsed == datetime.datetime(2026, 10, 5, 21, 0)
    assert shapes.moodle_format_time(93657) == "1 day 2 hours"
    assert shapes.moodle_format_time(86400) == "1 day"
    assert shapes.moodle_format_time(627) == "10 mins 27 secs"
    assert shapes.moodle_format_time(60) == "1 min"
    assert shapes.moodle_format_time(3600 + 60) == "1 hour 1 min"
    assert shapes.moodle_format_time(0) == "now"


def test_moodle_names():
    p = shapes.MoodleParticipant(200007, "Mary_Ann", "Lee", "m@x")
    assert shapes.moodle_entry_name(p, "lab1.ipynb") == \
        "Mary Ann Lee_200007_assignsubmission_file/lab1.ipynb"
    assert shapes.moodle_entry_name(p, "lab1.ipynb", folders=False) == \
        "Mary Ann Lee_200007_assignsubmission_file_lab1.ipynb"
    assert shapes.moodle_entry_name(p, "lab1.ipynb", version="4.0") == \
        "Mary Ann Lee_200007_assignsubmission_file_/lab1.ipynb"
    assert shapes.moodle_entry_name(p, "lab1.ipynb", version="3.11", folders=False) == \
        "Mary Ann Lee_200007_assignsubmission_file_lab1.ipynb"
    q = shapes.MoodleParticipant(200008, "Seán", "O'Brien", "s@x")
    assert shapes.moodle_prefix(q) == "Seán OBrien_200008"
    assert shapes.moodle_clean_filename('a&b<c>d"e`f|g\'h:i\\j/k\x01l') == "abcdefghijkl"


def test_moodle_zip_folders_and_one_download_stamp(classes):
    cls = classes["moodle"]
    infos = _zip(cls).infolist()
    pattern = re.compile(r"^(?P<name>.+)_(?P<pid>\d+)_assignsubmission_file/(?P<file>[^/]+)$")
    pids = set()
    for info in infos:
        match = pattern.match(info.filename)
        assert match, info.filename
        pids.add(match["pid"])
        assert info.flag_bits & 0x08, "streamed by ZipStream: data descriptor"
    stamp = _dos(cls.built_at.astimezone(NY))
    assert {i.date_time for i in infos} == {stamp}
    sent = {t.lms_id for t in cls.truth if t.submitted_at is not None}
    assert pids == sent
    twins = [t for t in cls.truth if t.name == "Jane Doe"]
    assert len(twins) == 2 and len({t.files[0].split("/")[0] for t in twins}) == 2
    assert any(f.startswith("Mary Ann Lee_") for t in cls.truth for f in t.files)
    assert any(f.startswith("Seán OBrien_") for t in cls.truth for f in t.files)


def test_moodle_legacy_zip_is_stamped_with_the_file_pool_time(tmp_path):
    due = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=NY)
    pooled = datetime.datetime(2026, 10, 1, 9, 0, 1, tzinfo=NY)
    p = shapes.MoodleParticipant(200001, "Jane", "Doe", "j@x", files=[("lab1.ipynb", b"{}")],
                                 status="submitted", timemodified=due, pooled_at=pooled)
    names = shapes.moodle_zip(tmp_path / "m.zip", [p], due + datetime.timedelta(days=10),
                              server_tz="America/New_York", version="4.0")
    assert names == ["Jane Doe_200001_assignsubmission_file_/lab1.ipynb"]
    info = zipfile.ZipFile(tmp_path / "m.zip").infolist()[0]
    assert info.date_time == (2026, 10, 1, 9, 0, 0) and not info.flag_bits & 0x08


def test_moodle_worksheet_columns_and_dates(classes):
    cls = classes["moodle"]
    assert cls.roster.startswith(b"\xef\xbb\xbf"), "Spout's CSV writer writes a UTF-8 BOM"
    text = cls.roster.decode("utf-8-sig")
    assert text.splitlines()[0] == ('Identifier,"Full name","Email address",Status,Grade,'
                                    '"Maximum grade","Grade can be changed",'
                                    '"Last modified (submission)","Last modified (grade)",'
                                    '"Feedback comments"')
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 33
    truth = {t.lms_id: t for t in cls.truth}
    for row in rows:
        pid = re.fullmatch(r"Participant (\d+)", row["Identifier"])[1]
        t = truth[pid]
        assert row["Full name"] == t.name and row["Email address"] == t.email
        assert row["Maximum grade"] == "10.00" and row["Grade can be changed"] == "Yes"
        assert row["Grade"] == "" and row["Last modified (grade)"] == "-"
        if t.submitted_at is None:
            assert row["Last modified (submission)"] == "-"
            assert row["Status"].startswith("No submission - Assignment is overdue by: 10 days")
            continue
        when = datetime.datetime.strptime(row["Last modified (submission)"],
                                          shapes.MOODLE_USERDATE_STRPTIME)
        true_local = t.submitted_at.astimezone(NY).replace(second=0, microsecond=0, tzinfo=None)
        assert when == true_local, row
    status = {truth[re.search(r"\d+", r["Identifier"])[0]].cases[0]: r["Status"] for r in rows}
    assert status["draft"] == "Draft (not submitted)"
    assert status["moodle-extension"] == ("Submitted for grading - Extension granted until: "
                                          "Wednesday, 7 October 2026, 11:59 PM")
    assert status["on-time"] == "Submitted for grading"
    late = [r["Status"] for r in rows if r["Status"].endswith(" late")]
    assert "Submitted for grading - 1 day 2 hours late" in late
    twins = [r for r in rows if r["Full name"] == "Jane Doe"]
    assert len({r["Identifier"] for r in twins}) == 2


def test_php_fputcsv_quoting():
    assert shapes._php_fputcsv_line(["Participant 1", "a@b.c", "", "10.00", 'say "hi"', "a,b"]) \
        == '"Participant 1",a@b.c,,10.00,"say ""hi""","a,b"\n'


# ------------------------------------------------------------------ Gradescope


def test_gradescope_time_is_psych_s():
    when = datetime.datetime(2020, 11, 15, 17, 4, 24, 43103, tzinfo=UTC)
    assert shapes.gradescope_time(when) == "2020-11-15 17:04:24.043103000 Z"
    assert shapes.gradescope_time(when, "America/New_York") == "2020-11-15 12:04:24.043103000 -05:00"
    assert yaml.safe_load(f"t: {shapes.gradescope_time(when)}")["t"] == when


def test_gradescope_export_layout_and_metadata(classes):
    cls = classes["gradescope"]
    archive = _zip(cls)
    names = archive.namelist()
    assert names[0] == "assignment_77_export/submission_metadata.yml"
    assert all(re.fullmatch(r"assignment_77_export/submission_\d+/[^/]+", n) for n in names[1:])
    meta_text = archive.read(names[0]).decode("utf-8")
    assert meta_text.startswith("---\nsubmission_")
    assert "  :submitters:\n  - :name: " in meta_text and "    :sid: '3001'\n" in meta_text
    meta = yaml.safe_load(meta_text)
    folders = {n.split("/")[1] for n in names[1:]}
    assert set(meta) == folders
    sizes = sorted(len(m[":submitters"]) for m in meta.values())
    assert sizes.count(3) == 1 and sizes.count(2) == 1
    truth = {t.key: t for t in cls.truth}
    for folder, m in meta.items():
        created = m[":created_at"]
        assert isinstance(created, datetime.datetime) and created.tzinfo is not None
        keys = []
        for s in m[":submitters"]:
            assert set(s) == {":name", ":email", ":sid"}
            assert s[":sid"] is None or isinstance(s[":sid"], str)
            keys.append(s[":sid"] or s[":email"].split("@")[0])
        for key in keys:
            t = truth[key]
            assert t.submitted_at == created and t.files[0].split("/")[1] == folder
            assert set(t.group) == (set(keys) if len(keys) > 1 else set())
    assert any(":history" in m for m in meta.values())
    nobody = [t for t in cls.truth if t.submitted_at is None]
    assert len(nobody) == 2 and all(t.files == () for t in nobody)
    roster = list(csv.DictReader(io.StringIO(cls.roster.decode())))
    assert {r["student_id"] for r in roster} == set(truth)


# ------------------------------------------------------------------ the class generator


@pytest.mark.parametrize("lms", ["canvas", "moodle", "gradescope"])
def test_class_is_deterministic_and_holds_its_cases(lms, classes, tmp_path):
    cls = classes[lms]
    again = shapes.lms_class(lms)
    assert (again.download, again.roster, again.times) == (cls.download, cls.roster, cls.times)
    other = shapes.lms_class(lms, seed=1)  # other times (Moodle's zip does not show them)
    assert (other.download, other.roster) != (cls.download, cls.roster)
    assert len(cls.truth) == 33 and len({t.key for t in cls.truth}) == 33
    cases = {c for t in cls.truth for c in t.cases}
    assert {"on-time", "late", "no-submission", "at-due-date"} <= cases
    late = [t for t in cls.truth if t.late]
    assert late and all(t.seconds_late > 0 for t in late)
    samples = {t.sample for t in cls.truth if t.sample}
    assert "erin/Copy of lab1_attention.ipynb" in samples and len(samples) == 7
    for info in _zip(cls).infolist():
        stamp = datetime.datetime(*info.date_time, tzinfo=UTC)
        assert stamp > cls.due + datetime.timedelta(days=9), "built ten days after the due date"
    paths = cls.write(tmp_path)
    assert paths["download"].read_bytes() == cls.download
    assert ("times" in paths) == (lms == "canvas")


def test_class_refuses_unknown_lms_and_tiny_classes():
    with pytest.raises(ValueError, match="canvas, moodle or gradescope"):
        shapes.lms_class("blackboard")
    with pytest.raises(ValueError, match="at least 16"):
        shapes.lms_class("canvas", n=5)
