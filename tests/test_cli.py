"""The instructor's command line: errors, --db, time limits."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import nbformat
import pytest

from autograder.labs import LABS
from tests.conftest import ROOT, gradebook_scores, run_cli


def test_an_unknown_lab_is_a_clear_error_with_exit_status_2(tmp_path):
    result = run_cli("grade", "lab9", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "Unknown lab 'lab9'" in result.stderr and "lab1" in result.stderr


def test_missing_submissions_are_a_clear_error(tmp_path):
    result = run_cli("grade", "lab1", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_an_empty_folder_grades_nothing_and_succeeds(tmp_path):
    (tmp_path / "in").mkdir()
    result = run_cli("grade", "lab1", str(tmp_path / "in"), "--out", str(tmp_path / "o"),
                     "--quiet")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "o" / "grades.csv").read_text().splitlines() == [
        "student_id,name,lab,score,max_score,raw_score,late_hours,penalty,status,file,"
        "submitted_at,notes"]


@pytest.mark.slow
def test_db_url_puts_the_gradebook_where_asked_and_limits_stop_a_loop(tmp_path):
    batch = tmp_path / "in"
    batch.mkdir()
    shutil.copy(ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb", batch)
    looping = nbformat.read(batch / "alice.ipynb", as_version=4)
    for cell in looping.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "bilinear_scores":
            cell.source = "while True:\n    pass\n" + cell.source
    nbformat.write(looping, batch / "loopy.ipynb")
    database = tmp_path / "elsewhere" / "class.db"
    database.parent.mkdir()
    result = run_cli("grade", "lab1", str(batch), "--out", str(tmp_path / "out"), "--quiet",
                     "--db", f"sqlite:///{database}", "--cell-timeout", "10")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {r["student_id"]: r for r in csv.DictReader(open(tmp_path / "out" / "grades.csv"))}
    assert float(rows["alice"]["score"]) == 10
    # The loop costs the exercise it sits in; the cells after it still run.
    exercises = {r["exercise"]: r for r in csv.DictReader(open(tmp_path / "out" / "exercises.csv"))
                 if r["student_id"] == "loopy"}
    assert float(exercises["bilinear_scores"]["score"]) == 0
    assert float(rows["loopy"]["score"]) == 9, exercises
    assert not (tmp_path / "out" / "nbgrader" / "gradebook.db").exists()
    with sqlite3.connect(database) as connection:
        students = {row[0] for row in connection.execute("select id from student")}
        lab = LABS["lab1"]
        assignments = {row[0] for row in connection.execute("select name from assignment")}
    assert students == {"alice", "loopy"} and assignments == {lab.id}


@pytest.mark.slow
def test_parallel_grading_equals_serial_and_a_rerun_resumes(tmp_path):
    batch = tmp_path / "in"
    batch.mkdir()
    for name in ("alice", "bob", "carol"):
        shutil.copy(ROOT / "data" / "sample_submissions" / "lab1" / f"{name}.ipynb", batch)
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    for out, jobs in ((serial, "1"), (parallel, "2")):
        result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                         "--seed", "same", "--jobs", jobs)
        assert result.returncode == 0, result.stderr[-2000:]
    for name in ("grades.csv", "exercises.csv"):
        assert (serial / name).read_text() == (parallel / name).read_text()
    # An interrupted run: one student's result is missing. The rerun grades
    # that student only and keeps the rest.
    saved = {p.name: p.stat().st_mtime_ns for p in (parallel / "results").glob("*.json")}
    (parallel / "results" / "bob.json").unlink()
    result = run_cli("grade", "lab1", str(batch), "--out", str(parallel), "--quiet")
    assert result.returncode == 0, result.stderr[-2000:]
    now = {p.name: p.stat().st_mtime_ns for p in (parallel / "results").glob("*.json")}
    assert now["alice.json"] == saved["alice.json"] and now["carol.json"] == saved["carol.json"]
    assert "bob.json" in now
    assert (serial / "grades.csv").read_text() == (parallel / "grades.csv").read_text()


@pytest.mark.slow
def test_sharded_grading_merged_equals_unsharded_row_for_row(tmp_path):
    batch = tmp_path / "in"
    batch.mkdir()
    for name in ("alice", "bob", "carol", "dave"):
        shutil.copy(ROOT / "data" / "sample_submissions" / "lab1" / f"{name}.ipynb", batch)
    whole = tmp_path / "whole"
    result = run_cli("grade", "lab1", str(batch), "--out", str(whole), "--quiet",
                     "--seed", "same", "--jobs", "2")
    assert result.returncode == 0, result.stderr[-2000:]

    refused = run_cli("grade", "lab1", str(batch), "--out", str(tmp_path / "x"), "--shard", "1/2")
    assert refused.returncode == 2 and "needs --seed" in refused.stderr
    refused = run_cli("grade", "lab1", str(batch), "--out", str(tmp_path / "x"),
                      "--shard", "3/2", "--seed", "same")
    assert refused.returncode == 2 and "is not K/N" in refused.stderr

    shards = [tmp_path / "shard1", tmp_path / "shard2"]
    for index, out in enumerate(shards, start=1):
        result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                         "--seed", "same", "--jobs", "1", "--shard", f"{index}/2")
        assert result.returncode == 0, result.stderr[-2000:]
    graded = [{row.split(",")[0] for row in (out / "grades.csv").read_text().splitlines()[1:]}
              for out in shards]
    assert graded[0] | graded[1] == {"alice", "bob", "carol", "dave"}
    assert not graded[0] & graded[1] and len(graded[0]) == len(graded[1]) == 2

    # A shard missing is refused with the reason; nothing is written.
    refused = run_cli("merge", "lab1", str(shards[0]), "--out", str(tmp_path / "partial"))
    assert refused.returncode == 2 and "shard(s) 2 missing" in refused.stderr

    merged = tmp_path / "merged"
    result = run_cli("merge", "lab1", *map(str, shards), "--out", str(merged))
    assert result.returncode == 0, result.stderr[-2000:]
    for name in ("grades.csv", "exercises.csv"):
        assert (merged / name).read_text() == (whole / name).read_text(), name
    scores = {out: gradebook_scores(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}", LABS["lab1"])
              for out in (merged, whole)}
    assert {student for student, _ in scores[whole]} == {"alice", "bob", "carol", "dave"}
    assert scores[merged] == scores[whole]
    assert sorted(p.name for p in (merged / "feedback").iterdir()) == \
        sorted(p.name for p in (whole / "feedback").iterdir())
    assert sorted(p.name for p in (merged / "nbgrader" / "autograded").iterdir()) == \
        ["alice", "bob", "carol", "dave"]


@pytest.mark.slow
def test_nothing_a_student_kernel_writes_to_its_descriptors_reaches_the_instructor(tmp_path):
    """Neither kernel's fd 1 and 2 are the grader's terminal: TensorFlow's C++
    start-up logs (in lab2 the test kernel's references import Keras too) and
    a notebook's os.write(2, ...) do not show up in what the instructor sees,
    and the notebook still gets its marks."""
    batch = tmp_path / "in"
    batch.mkdir()
    notebook = nbformat.read(ROOT / "data" / "sample_submissions" / "lab2" / "alice.ipynb",
                             as_version=4)
    notebook.cells.insert(1, nbformat.v4.new_code_cell(
        "import os\nos.write(1, b'STUDENT-ON-FD1\\n' * 100)\nos.write(2, b'STUDENT-ON-FD2\\n' * 100)"))
    nbformat.write(notebook, batch / "alice.ipynb")
    result = run_cli("grade", "lab2", str(batch), "--out", str(tmp_path / "out"), "--jobs", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    seen = result.stdout + result.stderr
    for leaked in ("STUDENT-ON-FD1", "STUDENT-ON-FD2", "absl::InitializeLog", "oneDNN"):
        assert leaked not in seen, f"{leaked!r} reached the instructor's terminal:\n{seen[-1500:]}"
    row = next(csv.DictReader(open(tmp_path / "out" / "grades.csv", encoding="utf-8")))
    assert (float(row["score"]), row["status"]) == (10.0, "graded"), row


def test_the_demo_grades_every_lab_with_every_option_of_grade(monkeypatch, tmp_path):
    # `make demo` calls `grade` for each lab; a new option of `grade` must
    # reach it with its default (it once did not, and the demo crashed).
    from autograder import cli
    from autograder.labs import available_labs

    seen, exported = [], []
    monkeypatch.setattr(cli, "_grade", lambda args: seen.append(vars(args)) or 0)
    monkeypatch.setattr(cli, "_export", lambda args: exported.append(vars(args)) or 0)
    assert cli.main(["demo", "--out", str(tmp_path)]) == 0
    expected = vars(cli.build_parser().parse_args(["grade", "lab1", "x", "--out", "y"]))
    with_samples = [lab.id for lab in available_labs()
                    if (ROOT / "data" / "sample_submissions" / lab.id).exists()]
    # every lab's samples, then the sample term (lab 1 from Canvas, with its roster)
    assert [args["lab"] for args in seen] == with_samples + ["lab1"]
    assert len(with_samples) == len(available_labs())
    term = seen.pop()
    assert term["roster"] == ROOT / "data" / "sample_term" / "roster.csv"
    assert [(e["lab"], e["to"], e["out"]) for e in exported] == [
        ("lab1", "canvas", str(tmp_path / "term-lab1"))]
    for args in seen + [term]:
        assert set(args) == set(expected)
        assert args["regrade"] and args["seed"] == "demo" and args["kernels"] == "fork"


# --kernels fresh is one of --plain's twins: with them in make test-plain
# (tests/grader/test_plain.py grades lab 1 both ways in make test).
@pytest.mark.slow
@pytest.mark.plain
def test_kernels_fresh_and_fork_give_the_same_grades(tmp_path):
    import json

    from autograder.kernels.isolation.bubblewrap import bubblewrap_works

    batch = tmp_path / "batch"
    batch.mkdir()
    for student in ("alice", "bob"):
        shutil.copy(ROOT / "data" / "sample_submissions" / "lab1" / f"{student}.ipynb", batch)
    found = {}
    for kernels in ("fresh", "fork"):
        out = tmp_path / kernels
        result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                         "--seed", "same", "--jobs", "1", "--kernels", kernels)
        assert result.returncode == 0, result.stderr[-2000:]
        grades = {row["student_id"]: row["score"] for row in csv.DictReader(open(out / "grades.csv"))}
        forked = {json.loads(path.read_text())["timings"]["student_kernel_forked"]
                  for path in (out / "results").glob("*.json")}
        found[kernels] = (grades, forked)
    assert found["fresh"][0] == found["fork"][0] == {"alice": "10", "bob": "9.5"}
    assert found["fresh"][1] == {0.0}
    assert found["fork"][1] == ({1.0} if bubblewrap_works() else {0.0})


@pytest.mark.slow
def test_cells_that_grade_nothing_are_skipped_by_default_and_run_with_run_demos(tmp_path):
    """Skipping the provided demonstrations and visible checks changes no grade
    (the verdict suite grades every variant and mistake with them skipped);
    the feedback says they were not run; a submission whose own cell reads a
    name a visible check defines gets that check run."""
    import json

    import nbformat

    from autograder.labs import get_lab
    from autograder.grader.source import skipped_when_grading

    lab = get_lab("lab4")
    skipped = skipped_when_grading(lab)
    # lab4's seven demonstrations, its exercises' visible checks, then the
    # "Ready to submit?" cell the release appends.
    assert skipped[-1] == "ready_to_submit"
    assert sorted(name for name in skipped if name.startswith("check_")) == sorted(
        f"check_{exercise}" for exercise in lab.exercises)
    assert len([name for name in skipped if name.startswith("demo_")]) == 7
    assert len(skipped) == 7 + len(lab.exercises) + 1
    batch = tmp_path / "batch"
    batch.mkdir()
    for student in ("alice", "bob"):
        shutil.copy(ROOT / "data" / "sample_submissions" / "lab4" / f"{student}.ipynb", batch)
    # carol: alice's answers, and a cell of her own, after masked_softmax's
    # visible check, that calls the NumPy softmax that check defines.
    carol = nbformat.read(batch / "alice.ipynb", as_version=4)
    at = next(index for index, cell in enumerate(carol.cells)
              if cell.metadata.get("nbgrader", {}).get("grade_id") == "check_masked_softmax")
    carol.cells.insert(at + 1, nbformat.v4.new_code_cell(
        "print('mine:', numpy_softmax(np.zeros(4)).sum())"))
    nbformat.write(carol, batch / "carol.ipynb")
    found = {}
    for option in ([], ["--run-checks"], ["--run-demos"]):
        out = tmp_path / (option[0].strip("-") if option else "skip")
        result = run_cli("grade", "lab4", str(batch), "--out", str(out), "--quiet",
                         "--seed", "same", "--jobs", "2", *option)
        assert result.returncode == 0, result.stderr[-2000:]
        grades = {row["student_id"]: row["score"] for row in csv.DictReader(open(out / "grades.csv"))}
        counts = {path.stem: (json.loads(path.read_text())["timings"]["cells_skipped"],
                              json.loads(path.read_text())["timings"].get("cells_needed", 0.0))
                  for path in (out / "results").glob("*.json")}
        said = {}
        for student in ("alice", "carol"):
            graded = nbformat.read(out / "nbgrader" / "autograded" / student / "lab4" /
                                   "lab4_masked_decoder.ipynb", as_version=4)
            said[student] = sorted(
                cell.metadata["nbgrader"]["grade_id"] for cell in graded.cells
                if cell.cell_type == "code" and any(
                    "Not run by the grader" in output.get("text", "") for output in cell.outputs))
            if student == "carol":
                own = [cell for cell in graded.cells if "mine:" in cell.source][0]
                said["carol's cell"] = "".join(output.get("text", "") for output in own.outputs)
        found[option[0] if option else ""] = (grades, counts, said)
    default, checks, every = found[""], found["--run-checks"], found["--run-demos"]
    assert default[0] == checks[0] == every[0] == {"alice": "16", "bob": "13.5", "carol": "16"}
    assert default[1] == {"alice": (len(skipped), 0.0), "bob": (len(skipped), 0.0),
                          "carol": (len(skipped) - 1, 1.0)}
    assert default[2]["alice"] == sorted(skipped)
    assert default[2]["carol"] == sorted(set(skipped) - {"check_masked_softmax"})
    assert "mine: 1.0" in default[2]["carol's cell"]
    demos = sorted(name for name in skipped if not name.startswith("check_"))
    assert set(checks[1].values()) == {(len(demos), 0.0)}
    assert checks[2]["alice"] == checks[2]["carol"] == demos
    assert set(every[1].values()) == {(0.0, 0.0)}
    assert every[2]["alice"] == every[2]["carol"] == []


# ---------------------------------------------------------------- issue 18

#: A cell after dot_scores' hidden tests: prints a digest of every input
#: dot_scores was called with (the visible check's and the hidden tests').
RECORD_INPUTS = '''
import hashlib
print("INPUTS", hashlib.sha256(repr(SEEN).encode()).hexdigest())
'''
RECORDING_DOT = '''
SEEN = []
def dot_scores(query, keys):
    SEEN.append(repr(keys))
    return np.einsum("...nd,...d->...n", np.asarray(keys), np.asarray(query))
'''


def _inputs_seen(out) -> str:
    notebook = nbformat.read(out / "nbgrader" / "autograded" / "spy" / "lab1" /
                             "lab1_attention.ipynb", as_version=4)
    printed = [output.get("text", "") for cell in notebook.cells
               for output in cell.get("outputs", []) if "INPUTS" in output.get("text", "")]
    assert printed, "the recording cell printed nothing"
    return printed[0].split()[1]


@pytest.mark.slow
def test_every_run_draws_a_secret_seed_and_none_is_kept_in_out(tmp_path):
    """Resumed or regraded, a run into the same OUT uses new hidden inputs
    (inputs leaked by one run answer nothing in the next) unless the
    instructor gives --seed; OUT never holds the seed."""
    from tests.hostile.cases import notebook

    batch = tmp_path / "in"
    batch.mkdir()
    spy = notebook({"dot_scores": RECORDING_DOT})
    index = next(i for i, c in enumerate(spy.cells)
                 if c.metadata.get("nbgrader", {}).get("grade_id") == "bilinear_scores")
    spy.cells.insert(index, nbformat.v4.new_code_cell(RECORD_INPUTS))
    nbformat.write(spy, batch / "spy.ipynb")
    out = tmp_path / "out"

    def grade(*options) -> str:
        result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                         "--jobs", "1", *options)
        assert result.returncode == 0, result.stderr[-2000:]
        assert float(next(csv.DictReader(open(out / "grades.csv")))["score"]) == 10
        return _inputs_seen(out)

    first = grade()
    (out / "results" / "spy.json").unlink()        # an interrupted run, resumed
    resumed = grade()
    regraded = grade("--regrade")
    assert len({first, resumed, regraded}) == 3
    seed = "instructors-own-seed-7f3a9c"
    assert grade("--seed", seed, "--regrade") == grade("--seed", seed, "--regrade")
    holding = [str(path.relative_to(out)) for path in out.rglob("*")
               if path.is_file() and seed.encode() in path.read_bytes()]
    assert not holding, f"the seed is kept in {holding}"
    assert "seed" not in json.loads((out / "run.json").read_text()) \
        and "seed_check" in json.loads((out / "run.json").read_text())


@pytest.mark.slow
def test_one_notebook_never_stops_a_serial_batch_nor_its_resumption(tmp_path):
    """--jobs 1: a cell whose metadata.nbgrader is a string, a file name that
    is not UTF-8 and one with terminal escapes, beside a classmate. Every
    student gets a row, report.html is complete, a rerun resumes, and the
    printed table holds no control byte."""
    from tests.hostile.cases import notebook

    batch = tmp_path / "in"
    (batch / "mallory").mkdir(parents=True)
    broken = notebook()
    for cell in broken.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax":
            cell.metadata["nbgrader"] = "softmax"
    nbformat.write(broken, batch / "aaa.ipynb")
    nbformat.write(notebook(), batch / "bob.ipynb")
    nbformat.write(notebook(), batch / os.fsdecode(b"ren\xe9e.ipynb"))
    nbformat.write(notebook(), batch / "mallory" / "lab2\x1b[8m\x1b]0;title\x07.ipynb")
    out = tmp_path / "out"
    for attempt in ("first", "resumed"):
        result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--jobs", "1",
                         "--quiet")
        assert result.returncode == 0, (attempt, result.stderr[-2000:])
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout, result.stdout
        rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv",
                                                                 encoding="utf-8"))}
        assert {s: (r["score"], r["status"][:20]) for s, r in rows.items()} == {
            "aaa": ("10", "graded"), "bob": ("10", "graded"), "rene": ("10", "graded"),
            "mallory": ("0", "this looks like lab2")}, attempt
        assert "nbgrader metadata was a str" in rows["aaa"]["notes"]
        report = (out / "report.html").read_text(encoding="utf-8")
        assert report.rstrip().endswith("</html>") and "not UTF-8 (shown as \ufffd)" in report


@pytest.mark.slow
def test_a_zip_bomb_does_not_fill_the_graders_memory(tmp_path):
    """12 members of 50 MB of spaces (0.6 MB zipped): each student's file is
    read when graded and not kept, so the grader's peak stays far below the
    600 MB the members unpack to (2.1 GB for the 2 MB bomb of issue 18
    before the mend; 0.24 GB after)."""
    import zipfile

    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        for index in range(12):
            with archive.open(f"s{index:02d}.ipynb", "w") as member:
                for _ in range(50):
                    member.write(b" " * (1 << 20))
    measure = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "print(done.stderr[-2000:])")
    result = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "autograder",
                             "grade", "lab1", str(bomb), "--out", str(tmp_path / "out"),
                             "--jobs", "1", "--quiet"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    status, peak_kib = map(int, result.stdout.split()[:2])
    assert status == 0, result.stdout
    assert peak_kib < 450 * 1024, f"peak {peak_kib / 1024:.0f} MiB"
    rows = list(csv.DictReader(open(tmp_path / "out" / "grades.csv", encoding="utf-8")))
    assert len(rows) == 12 and all(r["status"].startswith("empty file") for r in rows)


def test_a_gradebook_that_fails_after_the_workers_started_stops_them(tmp_path):
    # The workers start before the class's gradebook is prepared (so that
    # their set-up overlaps it); when that preparation fails, the error is
    # the gradebook's and no worker is left running.
    import multiprocessing

    from autograder.grader.batch import Grader
    from autograder.grader.options import GradingOptions

    folder = tmp_path / "class"
    folder.mkdir()
    for student in ("alice", "bob", "carol"):
        shutil.copy(ROOT / "data/sample_submissions/lab1" / f"{student}.ipynb", folder)
    (tmp_path / "not-a-folder").write_text("a file where the gradebook's folder would be\n")
    options = GradingOptions(jobs=2, seed="s", progress=False,
                             db_url=f"sqlite:///{tmp_path / 'not-a-folder' / 'gradebook.db'}")
    grader = Grader("lab1", tmp_path / "out", options)
    before = set(multiprocessing.active_children())     # other tests' in this process
    with pytest.raises(Exception) as raised:
        grader.grade_all(folder)
    assert "gradebook" in str(raised.value).lower() or "database" in str(raised.value).lower()
    # Running processes, not multiprocessing's records of them: a record whose
    # process was reaped by the pool's own thread may still read as alive
    # (its waitpid then finds no child), with no process behind it.
    left = [f"{process.name} pid {process.pid}: {_process_state(process.pid)}"
            for process in set(multiprocessing.active_children()) - before
            if _process_state(process.pid) != "gone"]
    assert not left, f"worker processes left after the failed run: {left}"
    assert not list((tmp_path / "out" / "results").glob("*.json"))


def _process_state(pid: int) -> str:
    import psutil

    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"
