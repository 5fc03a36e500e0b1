"""Faults an instructor meets (autograder.grader.faults): a class graded
through the real command line is struck once grading started (Ctrl-C,
SIGTERM, SIGHUP, SIGKILL of the command or of one worker, a full disk); then

- no process of the run is left a few seconds later (every descendant seen
  while it ran, recorded with psutil, is gone);
- the terminal says what happened in a sentence, without a traceback, and
  the exit status is a shell's for the signal (or says the fault);
- no temporary file is left in OUT;
- the same command afterwards gives the scores an uninterrupted run gives.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")

STUDENTS = ("alice", "bob", "carol", "dave")
#: How long the processes of a struck run may take to go.
GONE_WITHIN_S = 8


@pytest.fixture(scope="module")
def expected() -> dict[str, float]:
    """The score each student of the class must get (tests/samples.py)."""
    from tests.samples import expectations

    points = expectations("lab1")
    return {student: sum(points[f"{student}.ipynb"].values()) for student in STUDENTS}


def _class(folder: Path) -> Path:
    folder.mkdir()
    for student in STUDENTS:
        shutil.copy(ROOT / "data" / "sample_submissions" / "lab1" / f"{student}.ipynb", folder)
    return folder


def _command(submissions: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", "lab1", str(submissions),
            "--out", str(out), "--jobs", "2", "--seed", "faults", "--quiet"]


class Run:
    """The command started in a session of its own (as from a terminal: its
    workers share its process group), its descendants recorded as they come."""

    def __init__(self, command: list[str], log: Path):
        self.log = log
        with open(log, "wb") as handle:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=handle,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.root = psutil.Process(self.process.pid)
        self.seen: dict[int, tuple[float, str]] = {}

    def walk(self) -> list[psutil.Process]:
        try:
            found = self.root.children(recursive=True)
        except psutil.Error:
            return []
        for process in found:
            try:
                self.seen.setdefault(process.pid, (process.create_time(), process.name()))
            except psutil.Error:
                pass
        return found

    def wait_for_grading(self, timeout: float = 400) -> None:
        """Until a kernel (a student's sandbox, or a test kernel) has run for a second."""
        deadline = time.monotonic() + timeout
        since = None
        while time.monotonic() < deadline and self.process.poll() is None:
            kernels = [p for p in self.walk() if _name(p) == "bwrap"
                       or "ipykernel_launcher" in " ".join(_cmdline(p))]
            if kernels and since is None:
                since = time.monotonic()
            if since is not None and time.monotonic() - since > 1:
                self.walk()
                return
            time.sleep(0.1)
        raise AssertionError(f"grading did not start: {self.output()[-2000:]}")

    def workers(self) -> list[psutil.Process]:
        return [p for p in self.root.children()
                if "spawn_main" in " ".join(_cmdline(p))]

    def wait(self, timeout: float = 120) -> int:
        return self.process.wait(timeout=timeout)

    def alive(self) -> list[str]:
        """The descendants seen that still run (a zombie is gone)."""
        left = []
        for pid, (created, name) in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and \
                        process.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{pid} {name} {' '.join(_cmdline(process))[:150]}")
            except psutil.Error:
                pass
        return left

    def all_gone(self) -> list[str]:
        deadline = time.monotonic() + GONE_WITHIN_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.alive()
        for line in left:       # not to disturb the next tests
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except OSError:
                pass
        return left

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return ""


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _scores(out: Path) -> dict[str, float]:
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}


def _left_tmp(out: Path) -> list[str]:
    return [str(p) for p in out.rglob("*.tmp")]


#: Each fault: how it strikes the run, the exit status, what the terminal says.
FAULTS = {
    # Ctrl-C at a terminal: SIGINT to the whole foreground process group.
    "ctrl-c": (lambda run: os.killpg(run.process.pid, signal.SIGINT), 130, "interrupted: "),
    "sigterm": (lambda run: run.process.send_signal(signal.SIGTERM), 143, "interrupted: "),
    "sighup": (lambda run: run.process.send_signal(signal.SIGHUP), 129, "interrupted: "),
    # The out-of-memory killer's choice: one worker, or the command alone.
    "worker-sigkill": (lambda run: run.workers()[0].kill(), 75, "a grading worker died "),
    "sigkill": (lambda run: run.process.kill(), -signal.SIGKILL, ""),
}


@pytest.mark.slow
@pytest.mark.faults
def test_every_fault_leaves_no_process_no_temporary_file_and_the_same_command_goes_on(
        tmp_path, expected):
    # One class, struck by each fault in turn once its grading started, each
    # run the same command as the last: then a run left to finish gives the
    # uninterrupted run's scores.
    submissions = _class(tmp_path / "class")
    out = tmp_path / "out"
    command = _command(submissions, out)
    for fault, (strike, status, said) in FAULTS.items():
        run = Run(command, tmp_path / f"{fault}.log")
        try:
            run.wait_for_grading()
            strike(run)
            code = run.wait()
        finally:
            if run.process.poll() is None:
                run.process.kill()
        left = run.all_gone()
        output = run.output()
        assert not left, f"{fault}: left running: {left}"
        assert code == status, f"{fault}: exit status {code}: {output[-3000:]}"
        assert "Traceback" not in output and "leaked" not in output, f"{fault}: {output[-3000:]}"
        if said:
            assert said in output and "graded; the same command goes on" in output, \
                f"{fault}: {output[-3000:]}"
        assert not _left_tmp(out), fault
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _scores(out) == expected
    assert not _left_tmp(out)


@pytest.mark.slow
@pytest.mark.faults
def test_a_full_disk_says_so_keeps_what_was_saved_and_the_same_command_goes_on(
        tmp_path, expected):
    # OUT/results on a tmpfs with room for one result: the second fills it.
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    submissions = _class(tmp_path / "class")
    out = tmp_path / "out"
    results = out / "results"
    results.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(results)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        command = _command(submissions, out)
        run = Run(command, tmp_path / "full.log")
        try:
            code = run.wait(timeout=900)
        finally:
            if run.process.poll() is None:
                run.process.kill()
        left = run.all_gone()
        output = run.output()
        assert not left, left
        assert code == 74, output[-3000:]
        assert "the disk holding OUT is full: 0 MB free, " in output, output[-3000:]
        assert "MB needed (1 of 4 graded" in output, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert not _left_tmp(out)
        saved = sorted(p.name for p in results.iterdir())
        assert len(saved) == 1 and saved[0].endswith(".json"), saved
        # Room again: the same command grades the others.
        subprocess.run(["mount", "-o", "remount,size=16m", str(results)], check=True)
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        assert _scores(out) == expected
        assert not _left_tmp(out)
    finally:
        subprocess.run(["umount", "-l", str(results)], capture_output=True)


def test_a_result_cut_short_is_graded_again_not_trusted(tmp_path):
    # What a run killed in the middle of a write could leave (an older kit
    # wrote results/<student>.tmp, then renamed it): neither is read.
    from autograder.grader.batch import ClassGradebook
    from autograder.grader.options import GradingOptions
    from autograder.labs import get_lab

    gradebook = ClassGradebook(get_lab("lab1"), tmp_path / "out", GradingOptions())
    results = tmp_path / "out" / "results"
    results.mkdir(parents=True)
    (results / "alice.json").write_text('{"sha256": "abc", "result": {"student_id": "al')
    (results / "bob.json").write_text('{"sha256": "abc", "result": {"student_id": "bob"}}')
    assert gradebook.saved("alice", "abc") is None
    assert gradebook.saved("bob", "abc") is None


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    from autograder.grader import faults

    target = tmp_path / "results" / "alice.json"
    target.parent.mkdir()
    target.write_text("the earlier result")

    real_replace = os.replace

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError) as raised:
        faults.write_atomically(target, "x" * 10000)
    monkeypatch.setattr(os, "replace", real_replace)
    assert faults.is_disk_full(raised.value)
    assert faults.full_path(raised.value) == str(target)
    assert target.read_text() == "the earlier result"
    assert [p.name for p in target.parent.iterdir()] == ["alice.json"]
