"""A grading run's cgroup and its kernels' cgroups: created, set, joined,
read, emptied and removed (why, and what holds where: autograder.kernels.cgroups).
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.kernels.cgroups import files
from autograder.cputime import cgroup_cpu_seconds
from autograder.limits import CGROUP_KILL_WAIT_S, KERNEL_MIN_CPU_CORES, KERNEL_TASKS

if TYPE_CHECKING:
    from autograder.kernels.cgroups.detection import Bound

#: The scheduler's period for a CPU quota, in microseconds (cpu.max's and
#: cpu.cfs_period_us's default).
PERIOD_US = 100_000
#: The smallest quota the kernel accepts (cpu.cfs_quota_us: 1 ms).
MIN_QUOTA_US = 1_000
#: cpu.weight (v2) and cpu.shares (v1) of every kernel's group: the
#: defaults, so all kernels weigh the same.
CPU_WEIGHT = 100
CPU_SHARES = 1024
#: The controllers a kernel's group needs.
V2_CONTROLLERS = ("cpu", "pids")
V1_CONTROLLERS = ("cpu", "cpuacct", "pids")
#: Every group this package creates is named so; it touches no other.
PREFIX = "labkit-"
#: The shell code of join_command_prefix: its arguments are the cgroup.procs
#: files, "--", then the command. "echo" is the shell's own, so the writer
#: (pid "0") is the shell, which then becomes the command. Paths arrive as
#: arguments, never as code.
JOIN_SCRIPT = ('while [ "$#" -gt 0 ] && [ "$1" != -- ]; do '
               'echo 0 > "$1" || { echo "labkit: cannot join the cgroup of $1" >&2; exit 126; }; '
               'shift; done; shift; exec "$@"')
#: $0 of that shell, as ps shows it.
JOIN_NAME = "labkit-cgroup-join"


@dataclass(frozen=True)
class Hierarchy:
    """One directory of a group: where it is and which controllers it has
    (v2: one directory with all; v1: one for each hierarchy)."""

    path: Path
    controllers: tuple[str, ...]


def kernel_cpu_cores(jobs: int, cores: int | None = None) -> float:
    """A kernel's CPU share: the cores this process may use (or ``cores``)
    over the kernels run at once, at least KERNEL_MIN_CPU_CORES."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(KERNEL_MIN_CPU_CORES, cores / max(1, jobs))


# -- groups ---------------------------------------------------------------------------


class RunGroup:
    """The group of one grading process, holding its kernels' groups: created
    at once (``labkit-<pid>-<random>`` under each of ``bound.parents``),
    removed by ``close`` with everything in it."""

    def __init__(self, bound: Bound, *, name: str | None = None) -> None:
        if not bound.available:
            raise ValueError(f"no cgroup to create a run's group in: {bound.reason}")
        self.bound = bound
        self.name = name or f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        if not self.name.startswith(PREFIX) or "/" in self.name:
            raise ValueError(f"a run's group is named {PREFIX}..., not {self.name!r}")
        self.hierarchies = tuple(Hierarchy(parent.path / self.name, parent.controllers)
                                 for parent in bound.parents)
        self._count = itertools.count(1)
        self._lock = threading.Lock()
        self._kernels: list[KernelGroup] = []
        created: list[Path] = []
        try:
            for hierarchy in self.hierarchies:
                hierarchy.path.mkdir(mode=0o755)
                created.append(hierarchy.path)
                if bound.kind == "v2" and hierarchy.controllers:
                    files.write(hierarchy.path / "cgroup.subtree_control",
                           " ".join(f"+{name}" for name in hierarchy.controllers))
        except BaseException:
            for path in reversed(created):
                files.remove_folder(path, CGROUP_KILL_WAIT_S)
            raise

    def __enter__(self) -> RunGroup:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def new_kernel_group(self, cpu_cores: float | None, pids: int = KERNEL_TASKS) -> KernelGroup:
        """A group for one kernel: at most ``cpu_cores`` cores (None: no
        quota, equal shares only) and ``pids`` tasks."""
        with self._lock:
            number = next(self._count)
        kernel = KernelGroup(self.bound.kind,
                             tuple(Hierarchy(h.path / f"kernel-{number}", h.controllers)
                                   for h in self.hierarchies), cpu_cores, pids)
        kernel._on_remove = self._forget
        with self._lock:
            self._kernels.append(kernel)
            self._weigh()
        return kernel

    def _forget(self, kernel: KernelGroup) -> None:
        with self._lock:
            if kernel in self._kernels:
                self._kernels.remove(kernel)
                self._weigh()

    def _weigh(self) -> None:
        """The run's group weighs what its kernels would as sessions of
        their own (each the default weight), so that the grading run's share
        of a machine it shares is what it was without cgroups. Held lock."""
        count = max(1, len(self._kernels))
        for hierarchy in self.hierarchies:
            try:
                if "cpu" not in hierarchy.controllers:
                    continue
                if self.bound.kind == "v2":
                    files.write(hierarchy.path / "cpu.weight", str(min(10_000, CPU_WEIGHT * count)))
                else:
                    files.write(hierarchy.path / "cpu.shares", str(min(262_144, CPU_SHARES * count)))
            except OSError:
                pass        # the kernels' equal shares among themselves hold anyway

    def close(self, timeout: float = CGROUP_KILL_WAIT_S) -> list[str]:
        """Kill every process in the run's groups, remove them (leaves
        first); never raises. Returns the directories left (none, normally)."""
        deadline = time.monotonic() + timeout
        try:
            everything = KernelGroup(self.bound.kind, self.hierarchies, None, 0, create=False)
            everything.kill(timeout, subtree=True)
        except Exception:  # noqa: BLE001, S110 - what is left is reported below
            pass
        left = []
        for hierarchy in self.hierarchies:
            if not hierarchy.path.exists():
                continue
            for folder, _, _ in os.walk(hierarchy.path, topdown=False):
                if not files.remove_folder(Path(folder), max(0.0, deadline - time.monotonic())):
                    left.append(folder)
        return left


def remove_dead_runs(bound: Bound) -> list[str]:
    """Remove the run groups (``labkit-<pid>-<hex>``) that a grading process
    which no longer exists left behind (killed before its ``close``), where
    they hold no process any more; never raises. A group of a live grader
    is never touched (its pid is alive, or one of its groups holds a
    process). Returns the groups removed."""
    removed = []
    for parent in bound.parents:
        try:
            entries = list(parent.path.iterdir())
        except OSError:
            continue
        for entry in entries:
            match = re.fullmatch(re.escape(PREFIX) + r"(\d+)-[0-9a-f]+", entry.name)
            if not match or Path(f"/proc/{match.group(1)}").exists():
                continue
            folders = [Path(folder) for folder, _, _ in os.walk(entry, topdown=False)]
            if any(files.read_words(folder / "cgroup.procs") for folder in folders):
                continue
            if all(files.remove_folder(folder, 0.5) for folder in folders):
                removed.append(str(entry))
    return removed


class KernelGroup:
    """One kernel's group: a directory in each hierarchy of the run's group.
    Created by RunGroup.new_kernel_group."""

    def __init__(self, kind: str, hierarchies: tuple[Hierarchy, ...], cpu_cores: float | None,
                 pids: int, *, create: bool = True) -> None:
        self.kind = kind
        self.hierarchies = hierarchies
        self.cpu_cores = cpu_cores
        self.pids_max = pids
        self._on_remove: Callable[[KernelGroup], None] | None = None
        if not create:
            return
        if pids < 1:
            raise ValueError(f"a kernel needs a task at least, not {pids}")
        made: list[Path] = []
        try:
            for hierarchy in hierarchies:
                hierarchy.path.mkdir(mode=0o755)
                made.append(hierarchy.path)
                self._configure(hierarchy)
        except BaseException:
            for path in reversed(made):
                files.remove_folder(path, CGROUP_KILL_WAIT_S)
            raise

    def _configure(self, hierarchy: Hierarchy) -> None:
        path, controllers = hierarchy.path, hierarchy.controllers
        quota = None if self.cpu_cores is None else max(MIN_QUOTA_US,
                                                        round(self.cpu_cores * PERIOD_US))
        if self.kind == "v2":
            if "cpu" in controllers:
                if quota is not None:
                    files.write(path / "cpu.max", f"{quota} {PERIOD_US}")
                files.write(path / "cpu.weight", str(CPU_WEIGHT))
            if "pids" in controllers:
                files.write(path / "pids.max", str(self.pids_max))
            return
        if "cpu" in controllers:
            files.write(path / "cpu.cfs_period_us", str(PERIOD_US))
            if quota is not None:
                try:
                    files.write(path / "cpu.cfs_quota_us", str(quota))
                except OSError as error:
                    # v1 refuses a quota above an ancestor's (sched-bwc.rst):
                    # the ancestor's then, which bounds the kernel anyway.
                    ceiling = _v1_ancestor_quota(path)
                    if error.errno != errno.EINVAL or ceiling is None:
                        raise
                    files.write(path / "cpu.cfs_quota_us", str(min(quota, ceiling)))
            files.write(path / "cpu.shares", str(CPU_SHARES))
        if "pids" in controllers:
            files.write(path / "pids.max", str(self.pids_max))

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(hierarchy.path for hierarchy in self.hierarchies)

    def procs_paths(self) -> list[str]:
        """The cgroup.procs file of each directory: write a pid (or "0",
        the writer) into each to move a process in."""
        return [str(path / "cgroup.procs") for path in self.paths]

    def join_command_prefix(self) -> list[str]:
        """A command prefix that moves its process into this group, then
        execs the rest of the command: ``prefix + ["prlimit", ...]``. Exits
        126 with a line on stderr where a move fails."""
        return ["/bin/sh", "-c", JOIN_SCRIPT, JOIN_NAME, *self.procs_paths(), "--"]

    def join(self, pid: int | None = None) -> None:
        """Move ``pid`` (default: the calling process, with all its threads)
        into this group. Raises OSError where it cannot."""
        join_paths(self.procs_paths(), pid)

    def _find(self, controller: str, *names: str) -> Path | None:
        for hierarchy in self.hierarchies:
            if self.kind == "v2" or controller in hierarchy.controllers:
                for name in names:
                    if (hierarchy.path / name).exists():
                        return hierarchy.path / name
        return None

    def usage_file(self) -> Path:
        """Where the group counts the CPU time of everything that ever ran in
        it: v2's ``cpu.stat`` (usage_usec), v1's ``cpuacct.usage`` (ns)."""
        usage = (self._find("cpu", "cpu.stat") if self.kind == "v2"
                 else self._find("cpuacct", "cpuacct.usage"))
        if usage is None:
            raise FileNotFoundError(f"no CPU usage file in {', '.join(map(str, self.paths))}")
        return usage

    def cpu_seconds(self) -> float:
        """CPU time (user and system) of everything that ever ran in the
        group, its children and the dead included (autograder.cputime reads
        the same file for the grader's limits)."""
        usage = self.usage_file()
        seconds = cgroup_cpu_seconds(str(usage))
        if seconds is None:
            raise ValueError(f"no CPU time in {usage}")
        return seconds

    def pids_limit_hits(self) -> int:
        """How many times a fork or clone in the group failed for its task
        limit (0: never)."""
        hits = 0
        for name in ("pids.events", "pids.events.local"):
            events = self._find("pids", name)
            if events is None:
                continue
            for line in events.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    hits = max(hits, int(value))
        return hits

    def tasks(self) -> int:
        """Tasks (processes and threads) in the group now (pids.current)."""
        current = self._find("pids", "pids.current")
        return 0 if current is None else int(current.read_text())

    def pids(self, *, subtree: bool = False) -> list[int]:
        """The processes in the group (in any of its directories; with
        ``subtree``, in the groups below too), as this process's PID
        namespace numbers them."""
        found: set[int] = set()
        for path in self.paths:
            folders: Iterable[str] = ([folder for folder, _, _ in os.walk(path)] if subtree
                                      else [str(path)])
            for folder in folders:
                try:
                    text = Path(folder, "cgroup.procs").read_text()
                except FileNotFoundError:
                    continue
                found.update(int(word) for word in text.split() if int(word) > 0)
        return sorted(found)

    def kill(self, timeout: float = CGROUP_KILL_WAIT_S, *, subtree: bool = False) -> bool:
        """SIGKILL every process in the group until none is left (v2's
        cgroup.kill where there is one); True where it is empty. The calling
        process is never signalled, even where it joined."""
        deadline = time.monotonic() + timeout
        if self.kind == "v2":
            kill_file = self.paths[0] / "cgroup.kill"
            if kill_file.exists():
                try:
                    files.write(kill_file, "1")
                except OSError:
                    pass
        pause = 0.002
        me = os.getpid()
        while True:
            pids = [pid for pid in self.pids(subtree=subtree) if pid != me]
            if not pids:
                return True
            if time.monotonic() >= deadline:
                return False
            _kill_listed(pids, lambda: set(self.pids(subtree=subtree)))
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def remove(self, timeout: float = CGROUP_KILL_WAIT_S) -> list[str]:
        """Kill everything in the group, then remove its directories; never
        raises. Returns the directories left (none, normally)."""
        deadline = time.monotonic() + timeout
        try:
            self.kill(timeout)
        except Exception:  # noqa: BLE001, S110 - what is left is reported below
            pass
        left = [str(path) for path in self.paths
                if path.exists() and not files.remove_folder(path, max(0.0, deadline - time.monotonic()))]
        if not left and self._on_remove is not None:
            self._on_remove(self)
        return left


def join_paths(procs: Sequence[str], pid: int | None = None) -> None:
    """Move ``pid`` (default: the caller, "0") into each group whose
    cgroup.procs file is named. Needs nothing but ``os``: a process that
    imports nothing of the kit (the fork server) can copy it."""
    data = b"0" if pid is None else str(pid).encode()
    for path in procs:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


# -- helpers --------------------------------------------------------------------------


def _kill_listed(pids: list[int], listed_now: Callable[[], set[int]]) -> None:
    """SIGKILL each of ``pids`` that is still in the group: a pidfd pins the
    process first, and the group is read again, so that a pid that ended and
    was reused by a process outside is not signalled."""
    handles: dict[int, int] = {}
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    try:
        if pidfd_open is not None and send is not None:
            for pid in pids:
                try:
                    handles[pid] = pidfd_open(pid)
                except OSError:
                    continue
            still = listed_now()
            for pid, handle in handles.items():
                if pid in still:
                    try:
                        send(handle, signal.SIGKILL)
                    except OSError:
                        pass
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    finally:
        for handle in handles.values():
            os.close(handle)


def _v1_ancestor_quota(path: Path) -> int | None:
    """The smallest CPU quota of path's ancestors (v1), at this group's
    period, in microseconds; None where none has one."""
    smallest = None
    for folder in path.parents:
        try:
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            period = int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            break
        if quota > 0:
            scaled = quota * PERIOD_US // period
            smallest = scaled if smallest is None else min(smallest, scaled)
    return smallest
