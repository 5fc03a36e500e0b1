"""autograder.cputime: a kernel's death read from its process, its CPU time,
and limits in CPU seconds with the wall clock as a backstop (issue 45)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from autograder import cputime

#: Busy for the given CPU seconds (not wall seconds: the machine may be loaded).
BUSY_CPU = ("import time, sys\nend = float(sys.argv[1])\n"
            "while time.process_time() < end: pass\n")
BUSY = "import time\nend = time.time() + float(__import__('sys').argv[1])\nwhile time.time() < end: pass\n"


def _start(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args])


def test_a_stopped_process_is_not_ended_and_a_killed_one_is_with_its_signal():
    # What a late heartbeat took for a death: a kernel stopped for 2.5 s
    # (SIGSTOP, as a starved CPU would) then going on.
    child = _start("import time; time.sleep(30)")
    watch = cputime.ProcessWatch(child.pid)
    try:
        os.kill(child.pid, signal.SIGSTOP)
        assert not watch.ended(wait=2.5)
        os.kill(child.pid, signal.SIGCONT)
        assert not watch.ended()
        os.kill(child.pid, signal.SIGKILL)
        assert watch.ended(wait=5)
        # Read from the zombie, before its parent (this test) reaps it.
        assert watch.status is not None and os.WIFSIGNALED(watch.status)
        assert watch.describe().startswith("killed by signal 9, SIGKILL")
    finally:
        child.kill()
        child.wait()
        watch.close()


@pytest.mark.parametrize("status, words", [
    (9, "killed by signal 9, SIGKILL: out of memory, or killed from outside?"),
    (1 << 8, "exited with status 1"),
    (0, "exited with status 0"),
    # bubblewrap and the forked kernel's placeholder say a signal N as 128 + N
    ((128 + 9) << 8, "killed by signal 9, SIGKILL: out of memory, or killed from outside?"),
    ((128 + 11) << 8, "killed by signal 11, SIGSEGV: a crash in native code?"),
])
def test_exit_statuses_in_words(status, words):
    assert cputime.describe_status(status) == words


def test_popen_returncodes_become_wait_statuses():
    assert cputime.describe_status(cputime.status_from_returncode(-9)).startswith(
        "killed by signal 9")
    assert cputime.describe_status(cputime.status_from_returncode(3)) == "exited with status 3"
    assert cputime.status_from_returncode(None) is None


def test_the_clock_counts_every_process_of_the_tree_the_dead_included():
    # A parent that runs two busy children in sessions of their own, the
    # first of which has ended (reaped: its time is the parent's cutime).
    code = ("import subprocess, sys\n"
            f"busy = {BUSY_CPU!r}\n"
            "a = subprocess.Popen([sys.executable, '-c', busy, '0.6'], start_new_session=True)\n"
            "a.wait()\n"
            "b = subprocess.Popen([sys.executable, '-c', busy, '30'], start_new_session=True)\n"
            "print(b.pid, flush=True)\n"
            "import time; time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        second = int(parent.stdout.readline())
        clock = cputime.Clock(parent.pid)
        deadline = time.monotonic() + 60
        while _own_cpu(second) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        own = _own_cpu(second)
        used = clock.seconds()
        # the first child's 0.6 s and the second's so far, plus the Pythons' starts
        assert 0.6 + own - 0.05 <= used <= 0.6 + _own_cpu(second) + 1.0, (used, own)
        assert clock.seconds() >= used        # never backwards
    finally:
        for pid in cputime.tree_processes(parent.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.wait()


def _own_cpu(pid: int) -> float:
    fields = cputime._stat_fields(pid) or []
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def test_a_busy_loop_reaches_its_limit_by_cpu_time():
    child = _start(BUSY, "30")
    try:
        # (however loaded the machine: runnable, it waits for its CPU)
        limit = cputime.Limit(cputime.Clock(child.pid), 0.3, backstop=20, starved_backstop=600)
        while not limit.reached():
            time.sleep(0.05)
        assert limit.by == "cpu" and not limit.starved
    finally:
        child.kill()
        child.wait()


def test_a_sleeping_process_reaches_the_backstop_as_its_own_doing():
    child = _start("import time; time.sleep(30)")
    try:
        limit = cputime.Limit(cputime.Clock(child.pid), 0.3, backstop=3)
        while not limit.reached():
            time.sleep(0.05)
        assert limit.by == "wall" and not limit.starved
        assert "waiting" in limit.waited_words()
    finally:
        child.kill()
        child.wait()


def test_a_starved_process_reaches_the_backstop_as_the_machines_doing():
    # Starved: runnable, yet given almost no CPU. Reproduced by stopping and
    # resuming it in turn (runnable while resumed), 5% of the time running.
    child = _start(BUSY, "30")
    try:
        limit = cputime.Limit(cputime.Clock(child.pid), 1.0, backstop=2,
                              starved_backstop=4)
        while not limit.reached():
            os.kill(child.pid, signal.SIGCONT)
            time.sleep(0.005)
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(0.1)
            os.kill(child.pid, signal.SIGCONT)
        assert limit.by == "wall" and limit.wall_used >= 4   # not at the waiting backstop
        # sampled runnable (resumed) at most checks: the machine's fault
        assert limit.starved, (limit._samples, limit._runnable)
        assert "too busy" in limit.starved_words()
    finally:
        child.kill()
        child.wait()


def test_without_a_clock_the_limit_is_the_wall_clock():
    limit = cputime.Limit(None, 0.2)
    assert not limit.reached()
    time.sleep(0.3)
    assert limit.reached() and limit.by == "cpu" and not limit.starved
