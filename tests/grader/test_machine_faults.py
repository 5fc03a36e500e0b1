"""A grade depends on the notebook alone, not on what the machine does to
its kernel (issue 45): graded through the real CLI while the kernel is
stopped or killed from outside during a hidden test.

The notebooks are lab 1's correct sample with ``bilinear_scores`` touching
a marker file in the kernel's working folder on its first call (during its
hidden tests: the grader skips the visible checks), then waiting 3 s. A
watcher thread here plays the machine: it finds the kernel whose working
folder holds a marker (through /proc/<pid>/cwd, as root) and, the first
time only, stops it for 5 s (SIGSTOP, SIGCONT: a starved CPU, which a late
heartbeat took for a death) or kills it (SIGKILL: the out-of-memory killer
striking a neighbour). A third notebook kills its own kernel every time.
"""

from __future__ import annotations

import csv
import os
import signal
import threading
import time

import nbformat
import pytest

from autograder.kernels.isolation.bubblewrap import bubblewrap_works
from autograder.kernels.isolation.common import KERNEL_UIDS
from tests.conftest import ROOT, run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0 or not bubblewrap_works(),
                       reason="needs root (kernels of their own users) and bubblewrap"),
]

SAMPLE = ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb"


def _marking(marker: str) -> str:
    return ("    global _MARKED\n"
            "    if not globals().get('_MARKED'):\n"
            "        _MARKED = True\n"
            f"        import time; open({marker!r}, 'w').close(); time.sleep(3)\n")


PREFIXES = {
    "paused": _marking("stop-me"),
    "struck": _marking("kill-me"),
    "suicidal": "    import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n",
}


def _variant(prefix: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(SAMPLE, as_version=4)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "bilinear_scores":
            lines = cell.source.split("\n")
            start = next(i for i, line in enumerate(lines) if line.startswith("def bilinear"))
            # after the one-line docstring of the sample's answer
            assert lines[start + 1].strip().startswith('"""') and \
                lines[start + 1].count('"""') == 2, lines[start + 1]
            lines.insert(start + 2, prefix.rstrip("\n"))
            cell.source = "\n".join(lines)
            return notebook
    raise AssertionError("no bilinear_scores cell in the sample")


class Machine(threading.Thread):
    """Stops or kills, once each, the student kernel that left a marker."""

    def __init__(self):
        super().__init__(daemon=True)
        self.done: dict[str, float] = {}
        self.halt = threading.Event()
        self.resumes: list[threading.Timer] = []

    def run(self):
        while not self.halt.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    if os.stat(f"/proc/{entry}").st_uid not in KERNEL_UIDS:
                        continue
                    for marker in ("stop-me", "kill-me"):
                        if marker in self.done or \
                                not os.path.exists(f"/proc/{entry}/cwd/{marker}"):
                            continue
                        pid = int(entry)
                        self.done[marker] = time.monotonic()
                        if marker == "kill-me":
                            os.kill(pid, signal.SIGKILL)
                        else:      # resumed 5 s later, while this goes on looking
                            os.kill(pid, signal.SIGSTOP)
                            resume = threading.Timer(5, os.kill, (pid, signal.SIGCONT))
                            resume.start()
                            self.resumes.append(resume)
                except OSError:
                    continue
            time.sleep(0.05)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("machine")
    submissions = folder / "in"
    submissions.mkdir()
    nbformat.write(nbformat.read(SAMPLE, as_version=4), submissions / "alice.ipynb")
    for name, prefix in PREFIXES.items():
        nbformat.write(_variant(prefix), submissions / f"{name}.ipynb")
    machine = Machine()
    machine.start()
    try:
        result = run_cli("grade", "lab1", str(submissions), "--out", str(folder / "out"),
                         "--quiet", "--seed", "tests", "--jobs", "2")
    finally:
        machine.halt.set()
        machine.join()
        for resume in machine.resumes:
            resume.join()
    rows = {row["student_id"]: row for row in csv.DictReader(open(folder / "out" / "grades.csv"))}
    exercises = {(row["student_id"], row["exercise"]): row
                 for row in csv.DictReader(open(folder / "out" / "exercises.csv"))}
    return result, rows, exercises, machine.done, folder / "out"


def test_the_machine_struck_both_kernels(graded):
    *_, done, _ = graded
    assert set(done) == {"stop-me", "kill-me"}


def test_a_kernel_stopped_for_5_s_during_a_hidden_test_is_not_called_dead(graded):
    result, rows, *_ = graded
    assert rows["paused"]["score"] == "10" and rows["paused"]["status"] == "graded", \
        rows["paused"]
    assert "graded twice" not in rows["paused"]["notes"]


def test_a_kernel_killed_from_outside_is_graded_again_before_any_point_is_taken(graded):
    result, rows, exercises, *_ = graded
    row = rows["struck"]
    assert row["score"] == "10" and row["status"] == "graded", row
    assert "graded twice" in row["notes"] and "killed by signal 9" in row["notes"], row
    assert exercises[("struck", "bilinear_scores")]["message"] == ""
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_kernel_that_kills_itself_every_time_loses_its_points_with_the_signal_named(graded):
    _, rows, exercises, *_ = graded
    row = rows["suicidal"]
    assert row["status"].startswith("partly graded: the notebook's kernel died (killed by "
                                    "signal 9, SIGKILL"), row
    assert "at the same place in two gradings" in row["notes"]
    message = exercises[("suicidal", "bilinear_scores")]["message"]
    assert message.startswith("Your notebook's kernel died (killed by signal 9"), message
    # the exercises graded before it keep their points
    assert exercises[("suicidal", "dot_scores")]["score"] == "1"
    assert rows["alice"]["score"] == "10"


def test_no_feedback_says_a_kernel_died_for_what_the_machine_did(graded):
    *_, out = graded
    for student in ("paused", "struck", "alice"):
        page = (out / "feedback" / f"{student}.html").read_text()
        assert "died" not in page and "killed" not in page, student
