"""What a student kernel's processes have done: the CPU time they used, and
whether (and how) the kernel's process ended.

A grade may depend on the notebook alone, not on the machine's load
(../shared/GRADING.md, "The same grade on any machine"). So the grader
neither decides that a kernel died from a late heartbeat (jupyter_client's
``HBChannel`` gives up after 1.0 s without an answer: a kernel starved of
CPU for 2.5 s, or stopped by SIGSTOP, read as dead) nor limits a call or a
cell by the wall clock alone:

* ``ProcessWatch`` holds a pidfd of the kernel's top process (bubblewrap,
  or the kernel itself where there is no bubblewrap): the process has ended
  when the pidfd is readable, and its exit status is read from the zombie's
  ``/proc/<pid>/stat`` (field 52, ``exit_code``) before its parent reaps it;
* ``Clock`` adds up the CPU time the kernel's processes used (all of them,
  children included, the dead ones reaped inside the sandbox too): from the
  kernel's cgroup where it has one (exact), else from ``/proc``;
* ``Limit`` stops a call or a cell when its processes have used its limit
  in CPU seconds *and* as many seconds have passed on the wall clock (an
  endless loop ends at the stated limit, on an idle machine or a busy one,
  since its one thread gets its CPU; code that spreads its work on several
  cores is not cut shorter than before), with the wall clock only as a
  generous backstop (``limits.WALL_BACKSTOP_FACTOR`` times the limit) where
  the machine starves the kernel. A backstop reached with little CPU used is
  the machine's doing, not the student's (``Limit.starved``): the grader
  grades the submission again instead of taking points.

This is how programming-contest judges keep verdicts independent of load
(DOMjudge: a CPU time limit, and a wall-clock limit a multiple of it).

Standard library only: the test kernel imports it, and so does the grader.
"""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path

from autograder.limits import STARVED_BACKSTOP_FACTOR, WALL_BACKSTOP_FACTOR

#: How often a limit past its wall-clock seconds reads the CPU count again.
CHECK_S = 0.25
#: How often a clock without a cgroup looks for the kernel's processes again.
TREE_SCAN_S = 1.0

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 on:
    index 0 is the state), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def describe_status(status: int) -> str:
    """A waitpid(2) status in words: "killed by signal 9, SIGKILL...",
    "exited with status 1". An exit status of 128 + N is read as signal N
    too: bubblewrap, and the forked kernel's placeholder, report their
    child's death by signal N that way (as shells do)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
    elif os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if not 128 < code < 128 + 65:
            return f"exited with status {code}"
        number = code - 128
    else:
        return f"ended (wait status {status})"
    return signal_words(number)


def signal_words(number: int) -> str:
    """"killed by signal 9, SIGKILL: out of memory, or killed from outside?"
    and the like."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "an unknown signal"
    hint = {int(signal.SIGKILL): ": out of memory, or killed from outside?",
            int(signal.SIGSEGV): ": a crash in native code?",
            int(signal.SIGABRT): ": a crash in native code?"}.get(number, "")
    return f"killed by signal {number}, {name}{hint}"


def status_from_returncode(returncode: int | None) -> int | None:
    """A Popen returncode (-N for signal N) as a waitpid(2) status."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    return (returncode & 0xFF) << 8


class ProcessWatch:
    """Whether a process (not a child of this one) has ended, without
    polling a heartbeat: a pidfd (Linux 5.3+) becomes readable when it does.

    Where pidfds are missing, the process has ended when /proc says it is a
    zombie or gone. Never raises.
    """

    def __init__(self, pid: int):
        self.pid = pid
        self._status: int | None = None
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._fd = None

    def ended(self, wait: float = 0.0) -> bool:
        """Whether the process has ended (waiting up to ``wait`` seconds)."""
        if self._fd is not None:
            try:
                readable = bool(select.select([self._fd], [], [], max(wait, 0.0))[0])
            except (OSError, ValueError):
                readable = False
            if readable:
                self._read_status()
            return readable
        deadline = time.monotonic() + wait
        while True:
            fields = _stat_fields(self.pid)
            if fields is None or fields[0] in ("Z", "X"):
                self._read_status()
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _read_status(self) -> None:
        fields = _stat_fields(self.pid)
        # exit_code is field 52 (index 49 here); Linux 3.5 and later.
        if self._status is None and fields is not None and len(fields) > 49:
            try:
                self._status = int(fields[49])
            except ValueError:
                pass

    @property
    def status(self) -> int | None:
        """The ended process's waitpid(2) status, where it could be read."""
        return self._status

    def describe(self) -> str:
        """How the process ended, in words ("" when not known)."""
        return "" if self._status is None else describe_status(self._status)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _used(fields: list[str]) -> float:
    """utime, stime, cutime and cstime (fields 14-17), in seconds."""
    return sum(int(value) for value in fields[11:15]) / _TICKS


def tree_processes(root: int, uid: int | None = None) -> set[int]:
    """Process ``root``, every descendant, and every process of user ``uid``
    where given (the user layer's kernel user: a process that left the tree
    by a double fork is still its own): one scan of /proc."""
    parents: dict[int, int] = {}
    owned: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        pid = int(entry)
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 15:
            continue
        try:
            parents[pid] = int(fields[1])
        except ValueError:
            continue
        if uid is not None:
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    owned.add(pid)
            except OSError:
                pass
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in found or pid not in parents:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found | owned


def tree_cpu_seconds(root: int, uid: int | None = None) -> float:
    """CPU seconds used by the processes of tree_processes (each one's own
    time and that of its reaped children)."""
    return _cpu_of(tree_processes(root, uid))


def _cpu_of(pids) -> float:
    total = 0.0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None and len(fields) >= 15:
            try:
                total += _used(fields)
            except ValueError:
                pass
    return total


def any_runnable(pids) -> bool:
    """Whether a thread of one of ``pids`` is runnable (state R): it would
    run if it had a CPU."""
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/stat", "rb") as handle:
                    text = handle.read().decode("ascii", "replace")
            except OSError:
                continue
            fields = text[text.rfind(")") + 2:].split()
            if fields and fields[0] == "R":
                return True
    return False


def cgroup_cpu_seconds(usage_file: str) -> float | None:
    """CPU seconds from a cgroup's accounting file: cgroup v2's ``cpu.stat``
    (``usage_usec``) or v1's ``cpuacct.usage`` (nanoseconds); None when it
    cannot be read."""
    try:
        text = Path(usage_file).read_text()
    except OSError:
        return None
    if usage_file.endswith("cpu.stat"):
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None
    try:
        return int(text.strip()) / 1e9
    except ValueError:
        return None


class Clock:
    """The CPU seconds a student kernel's processes have used so far: its
    cgroup's count where it has one, else the sum over its process tree
    (found by a scan of /proc at most every TREE_SCAN_S: a call's limit reads
    the clock as it starts, some 100 times a submission)."""

    def __init__(self, pid: int | None, uid: int | None = None, usage_file: str = "",
                 also: tuple[int, ...] = ()):
        self.pid, self.uid, self.usage_file = pid, uid, usage_file
        #: Other processes counted with the kernel's (with their trees): the
        #: test kernel, for a tests cell's limit.
        self.also = tuple(also)
        self._last = 0.0
        self._tree: set[int] = set()
        self._scanned = float("-inf")

    def processes(self) -> set[int]:
        """The kernel's processes and those of ``also`` (as last scanned)."""
        if self.pid is None:
            return set()
        if time.monotonic() - self._scanned >= TREE_SCAN_S:
            self._tree = tree_processes(self.pid, self.uid)
            for pid in self.also:
                self._tree |= tree_processes(pid)
            self._scanned = time.monotonic()
        return self._tree

    def seconds(self) -> float:
        found = cgroup_cpu_seconds(self.usage_file) if self.usage_file else None
        if found is not None and self.also:
            found += _cpu_of(set().union(*(tree_processes(pid) for pid in self.also)))
        if found is None and self.pid is not None:
            found = _cpu_of(self.processes())
        # Never backwards (a process of the tree ended unreaped, its time lost).
        self._last = max(self._last, found or 0.0)
        return self._last

    def runnable(self) -> bool:
        """Whether one of the kernel's threads (or the other processes the
        clock counts) waits for a CPU now."""
        return any_runnable(self.processes())

    def spec(self) -> tuple:
        """What another process needs to make the same clock: Clock(*spec)."""
        return (self.pid, self.uid, self.usage_file)


class Limit:
    """A time limit of ``seconds`` measured in CPU time, from now.

    ``reached()`` is true once the kernel's processes have used ``seconds``
    of CPU and as many seconds have passed (the student's limit); or once
    the wall clock has passed ``seconds * backstop`` while they mostly
    waited (a sleep, input that never comes: the student's too); or, where
    they were mostly runnable but given no CPU (a machine loaded past its
    cores), once it has passed ``seconds * starved_backstop`` (the
    machine's doing: ``starved``). Between checks the caller may wait: the
    wall clock alone cannot reach the limit before ``seconds``.
    """

    def __init__(self, clock: Clock | None, seconds: float,
                 backstop: float = WALL_BACKSTOP_FACTOR,
                 starved_backstop: float = STARVED_BACKSTOP_FACTOR):
        self.clock, self.seconds = clock, float(seconds)
        self.started = time.monotonic()
        self.cpu_start = clock.seconds() if clock is not None else 0.0
        self.backstop = self.seconds * backstop if clock is not None else self.seconds
        self.starved_backstop = max(self.backstop, self.seconds * starved_backstop)
        self.cpu_used = 0.0
        self.wall_used = 0.0
        #: Which limit ended it: "" (not reached), "cpu" or "wall".
        self.by = ""
        self._checked = float("-inf")
        self._samples = self._runnable = 0

    def wall_left(self) -> float:
        """Seconds before the wall clock alone could end it (0: check now)."""
        return max(0.0, self.started + self.seconds - time.monotonic())

    def reached(self) -> bool:
        """Whether the limit is reached (its CPU count is read at most every
        CHECK_S seconds: a scan of /proc where there is no cgroup)."""
        now = time.monotonic()
        self.wall_used = now - self.started
        if self.wall_used < self.seconds:
            return False
        if self.by:
            return True
        if now - self._checked < CHECK_S:
            return False
        self._checked = now
        if self.clock is None:
            self.by = "cpu"   # no clock: the wall clock is all there is
            return True
        self.cpu_used = self.clock.seconds() - self.cpu_start
        if self.cpu_used >= self.seconds:
            self.by = "cpu"
            return True
        # Past its seconds on the wall clock with less CPU than its limit:
        # waiting (sleep, input) or starved (runnable, no CPU given). Which,
        # is sampled as it goes on.
        self._samples += 1
        self._runnable += self.clock.runnable()
        if self.wall_used >= (self.starved_backstop if self._mostly_runnable()
                              else self.backstop):
            self.by = "wall"
        return bool(self.by)

    def _mostly_runnable(self) -> bool:
        return self._runnable * 2 >= max(self._samples, 1)

    @property
    def starved(self) -> bool:
        """Ended by the wall clock with less CPU used than the limit while
        its processes were mostly runnable: the machine, not the code, was
        slow. (A notebook that sleeps or waits is not starved.)"""
        return self.by == "wall" and self._mostly_runnable()

    def waited_words(self) -> str:
        """What a backstop reached while the code waited says."""
        return (f"it did not finish within {self.wall_used:.0f} s on the wall clock, using "
                f"{self.cpu_used:.1f} s of CPU (waiting: a sleep, or input that never comes?)")

    def starved_words(self) -> str:
        return (f"the machine was too busy: {self.wall_used:.0f} s passed on the wall clock "
                f"while the notebook's processes used {self.cpu_used:.1f} s of CPU "
                f"(limit {self.seconds:.0f} s of CPU)")
