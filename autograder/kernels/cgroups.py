"""Each student kernel's CPU and processes, bounded by a cgroup of its own.

Why: a notebook that starts 300 busy processes, each in a session of its own
(``setsid``), starved the correct notebook graded beside it. Linux's
scheduler is fair between sessions (autogroup, sched(7)), and a notebook
makes as many sessions as it likes. Here every student kernel, and
everything it starts, runs in a control group of its own under one group
for the grading process (the run's), so that

- the kernels get equal shares of the CPU whatever their process counts
  (equal weights, and tasks in a cgroup other than the root's are out of
  autogroup's reach);
- a kernel gets at most the CPU it was given (a quota: its share of the
  machine, the cores over the run's jobs, at least one core);
- its tasks (processes and threads) are bounded, and the grader can tell
  that the bound was hit (the student is told "your notebook started more
  than N processes"); RLIMIT_NPROC cannot do that, counting per user;
- the CPU time of everything that ran in it, the dead included, can be read
  (the grader limits a cell by that, not by the wall clock).

What holds where (``detect`` tries, in this order, by creating and removing
a probe group, never by reading mount flags alone; the run prints
``Bound.describe``):

- cgroup v2 (Documentation/admin-guide/cgroup-v2.rst), the unified
  hierarchy at /sys/fs/cgroup or a cgroup2 mount elsewhere: ``cpu.max``
  ("$MAX $PERIOD", the quota in microseconds a period), ``cpu.weight``
  (100, the default: equal shares), ``pids.max``; usage from ``cpu.stat``
  (``usage_usec``); hits of the limit from ``pids.events`` (``max``; since
  Linux 6.13 that counts hits of this group's own limit and
  ``pids.events.local`` the forks refused in it, the larger is taken); the
  whole group ended with ``cgroup.kill``. The "no internal process
  constraint": a group may enable controllers for its children only while
  it holds no process of its own (the root excepted). So the run's group
  is created in this process's own group (the ``0::`` line of
  /proc/self/cgroup) where that already gives its children ``cpu`` and
  ``pids`` (``cgroup.subtree_control``: the root); else, where this process
  is alone in its group (a container's, a delegated one: systemd's
  Delegate=yes), in that group after this process moved into a leaf of it
  (``labkit-grader-<pid>``, left in place) and gave the group's children
  the two controllers (``detect(adopt=False)`` does not); else in the
  nearest ancestor that gives them. The run's group enables them for its
  kernels itself. No other group is written to: a grader that shares its
  group with other processes gets the next bound.
- cgroup v1 (Documentation/admin-guide/cgroup-v1/): one hierarchy for each
  controller (or several mounted together), so a kernel's group is one
  directory in each of the ``cpu`` hierarchy (``cpu.cfs_quota_us`` over
  ``cpu.cfs_period_us``, scheduler/sched-bwc.rst; ``cpu.shares`` 1024, the
  default), the ``cpuacct`` one (``cpuacct.usage``, nanoseconds, children
  and the dead included: cgroup-v1/cpuacct.rst) and the ``pids`` one
  (``pids.max``, ``pids.events``: cgroup-v1/pids.rst). v1 has no
  ``cgroup.kill``: every process listed is sent SIGKILL until none is.
- none (a container whose /sys/fs/cgroup is read-only, or a user without a
  delegated subtree): ``Bound.reason`` says why; the caller falls back to
  the process limit (RLIMIT_NPROC) and a lower priority
  (``autograder.limits.KERNEL_FALLBACK_NICE``).

The run's group weighs (cpu.weight, cpu.shares) its live kernels' count
times the default, so that the grading run's share of a machine it shares
with other work is what it was when each kernel was a session of its own.

A launcher joins a kernel's group in one of two ways: the command prefix
``KernelGroup.join_command_prefix()`` (a shell that writes "0", meaning
itself, into each ``cgroup.procs``, then execs the rest: ``prlimit``,
``bwrap`` and the kernel all start inside), or ``KernelGroup.join(pid)``
(``join_paths``: for the fork server's child, before it enters the
sandbox's namespaces; it needs only ``os``, so a script that imports
nothing of the kit can copy it). Writing "0" moves the writer on v1 and v2
alike (cgroup_procs_write_start in kernel/cgroup/cgroup.c). The kernel's
own user cannot leave its group: the group's files are the grader's.

Use::

    bound = detect()                       # once, early; print bound.describe(cores)
    if bound.available:
        run = RunGroup(bound)              # run.close() at the end (or ``with``)
        kernel = run.new_kernel_group(kernel_cpu_cores(jobs), KERNEL_TASKS)
        command = kernel.join_command_prefix() + command   # or kernel.join(pid)
        ... kernel.cpu_seconds(), kernel.pids_limit_hits() ...
        kernel.remove()
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autograder.cputime import cgroup_cpu_seconds
from autograder.limits import (CGROUP_KILL_WAIT_S, KERNEL_FALLBACK_NICE, KERNEL_MIN_CPU_CORES,
                               KERNEL_TASKS)

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
#: Every group this module creates is named so; it touches no other.
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


@dataclass(frozen=True)
class Bound:
    """What bounds a kernel on this machine: ``kind`` "v2", "v1" or "none";
    ``parents`` the directories a run's group is created in; ``reason`` why
    nothing better holds (empty for v2)."""

    kind: str
    parents: tuple[Hierarchy, ...] = ()
    reason: str = ""

    @property
    def available(self) -> bool:
        return self.kind in ("v1", "v2")

    def describe(self, cpu_cores: float | None = None, pids: int = KERNEL_TASKS,
                 nice: int = KERNEL_FALLBACK_NICE) -> str:
        """The bound in words, for the run to print and keep, e.g.
        "cgroup v2 (/sys/fs/cgroup/...): cpu.max 1 core, cpu.weight 100,
        pids.max 512 a kernel"."""
        if not self.available:
            return (f"none ({self.reason}); processes limited by RLIMIT_NPROC "
                    f"and nice {nice}")
        where = ", ".join(str(parent.path) for parent in self.parents)
        cores = "no quota" if cpu_cores is None else _cores(cpu_cores)
        if self.kind == "v2":
            return (f"cgroup v2 ({where}): cpu.max {cores}, cpu.weight {CPU_WEIGHT}, "
                    f"pids.max {pids} a kernel")
        return (f"cgroup v1 ({where}): cpu.cfs_quota_us {cores}, cpu.shares {CPU_SHARES}, "
                f"pids.max {pids} a kernel")


def kernel_cpu_cores(jobs: int, cores: int | None = None) -> float:
    """A kernel's CPU share: the cores this process may use (or ``cores``)
    over the kernels run at once, at least KERNEL_MIN_CPU_CORES."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(KERNEL_MIN_CPU_CORES, cores / max(1, jobs))


# -- detection ------------------------------------------------------------------------


def detect(*, adopt: bool = True, mountinfo: str = "/proc/self/mountinfo",
           own: str = "/proc/self/cgroup") -> Bound:
    """What this machine allows: cgroup v2, else v1, else none (with the
    reasons). Each candidate is tried: a probe group is created, set, joined
    by a process and removed. Never raises.

    With ``adopt`` (v2 only), a grading process alone in its group moves
    itself into a leaf of it to give the group's children cpu and pids
    (_adopt): call this before the grader starts any process."""
    reasons: list[str] = []
    try:
        mounts = _mounts(mountinfo)
        groups = _own_groups(own)
    except Exception as error:  # noqa: BLE001 - none, and why
        return Bound("none", reason=f"cannot read {mountinfo} or {own}: {_why(error)}")
    for version in ("v2", "v1"):
        try:
            bound = (_detect_v2(mounts, groups, reasons, adopt=adopt) if version == "v2"
                     else _detect_v1(mounts, groups, reasons))
        except Exception as error:  # noqa: BLE001 - the next bound, and why
            reasons.append(f"cgroup {version}: {_why(error)}")
            continue
        if bound is not None:
            return bound
    return Bound("none", reason="; ".join(reasons) or "no cgroup file system mounted")


@dataclass(frozen=True)
class _Mount:
    root: str
    point: str
    writable: bool
    fstype: str
    super_options: tuple[str, ...]


def _unescape(text: str) -> str:
    """A path of /proc/self/mountinfo (space, tab, newline and backslash
    written as octal escapes)."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        text = text.replace(code, chr(int(code[1:], 8)))
    return text


def _mounts(mountinfo: str) -> list[_Mount]:
    mounts = []
    for line in Path(mountinfo).read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 6 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append(_Mount(root=_unescape(fields[3]), point=_unescape(fields[4]),
                             writable="rw" in fields[5].split(","), fstype=tail[0],
                             super_options=tuple(tail[2].split(","))))
    return mounts


def _own_groups(own: str) -> dict[str, str]:
    """This process's group in each hierarchy: "" for v2, each controller
    (and name=...) for v1."""
    groups = {}
    for line in Path(own).read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        path = path.removesuffix(" (deleted)")
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _locate(mount: _Mount, group: str | None) -> Path | None:
    """The directory of ``group`` (a path within its hierarchy) under this
    mount, None where the mount does not show it."""
    if group is None:
        return None
    if mount.root == "/":
        relative = group
    elif group == mount.root or group.startswith(mount.root.rstrip("/") + "/"):
        relative = group[len(mount.root):]
    else:
        return None
    path = Path(mount.point) / relative.lstrip("/")
    return path if path.is_dir() else None


def _detect_v2(mounts: list[_Mount], groups: dict[str, str], reasons: list[str], *,
               adopt: bool = True) -> Bound | None:
    """The first of: this process's own group, where it may already give its
    children cpu and pids (the root); the same group, adopted (``_adopt``);
    the nearest ancestor that gives them."""
    found = False
    for mount in mounts:
        if mount.fstype != "cgroup2":
            continue
        found = True
        where = f"cgroup v2 at {mount.point}"
        if not mount.writable:
            reasons.append(f"{where}: mounted read-only")
            continue
        own = _locate(mount, groups.get(""))
        if own is None:
            reasons.append(f"{where}: this process's group ({groups.get('')}) is not under it")
            continue
        available = set(_read_words(own / "cgroup.controllers"))
        missing = [name for name in V2_CONTROLLERS if name not in available]
        if missing:
            reasons.append(f"{where}: no {', '.join(missing)} controller in {own} (held by "
                           f"cgroup v1 hierarchies, or not delegated)")
            continue
        tried = []
        candidates: list[Path] = [own]
        while candidates[-1] != Path(mount.point) and candidates[-1].parent != candidates[-1]:
            candidates.append(candidates[-1].parent)
        for number, candidate in enumerate(candidates):
            if not _gives(candidate):
                if number == 0 and adopt:
                    leaf, why = _adopt(own)
                    if leaf is None:
                        tried.append(f"{own}: not adopted: {why}")
                        continue
                    bound = Bound("v2", (Hierarchy(own, V2_CONTROLLERS),),
                                  reason=f"this process moved to {leaf}, to give {own}'s "
                                         f"children cpu and pids")
                    failure = _probe(bound)
                    if failure is None:
                        return bound
                    _unadopt(own, leaf)
                    tried.append(f"{own}, adopted: {failure}")
                continue
            bound = Bound("v2", (Hierarchy(candidate, V2_CONTROLLERS),))
            failure = _probe(bound)
            if failure is None:
                return bound
            tried.append(f"{candidate}: {failure}")
        reasons.append(f"{where}: " + "; ".join(
            tried + [f"no group from {own} up has {' and '.join(V2_CONTROLLERS)} in "
                     f"cgroup.subtree_control (a group holding processes cannot give them "
                     f"to its children: the no-internal-process rule; run the grader alone "
                     f"in a delegated group)"]))
    if not found:
        reasons.append("no cgroup v2 mount")
    return None


def _gives(group: Path) -> bool:
    """Whether a v2 group gives its children the cpu and pids controllers."""
    enabled = set(_read_words(group / "cgroup.subtree_control"))
    return all(name in enabled for name in V2_CONTROLLERS)


def _adopt(own: Path) -> tuple[Path | None, str]:
    """Where this process is alone in its v2 group (a delegated group, a
    container's, a systemd unit's with Delegate=yes), move it to a leaf of
    its own (``labkit-grader-<pid>``) and give the group's children cpu and
    pids: then the group holds no process, as the no-internal-process rule
    asks. Returns the leaf, or None and why not. Nothing is done where the
    group holds another process: it is not this grader's to rearrange."""
    others = [pid for pid in _read_words(own / "cgroup.procs") if int(pid) != os.getpid()]
    if others:
        return None, f"it holds {len(others)} other process(es)"
    if not (own / "cgroup.type").exists():
        return None, "it is the root, whose cgroup.subtree_control is the machine's"
    leaf = own / f"{PREFIX}grader-{os.getpid()}"
    try:
        leaf.mkdir(mode=0o755)
    except OSError as error:
        return None, _why(error)
    try:
        _write(leaf / "cgroup.procs", "0")
        _write(own / "cgroup.subtree_control", " ".join(f"+{name}" for name in V2_CONTROLLERS))
    except OSError as error:
        _unadopt(own, leaf)
        return None, _why(error)
    return leaf, ""


def _unadopt(own: Path, leaf: Path) -> None:
    """Undo _adopt as far as it went: the controllers off, this process back
    in its group, the leaf removed."""
    for path, text in ((own / "cgroup.subtree_control",
                        " ".join(f"-{name}" for name in V2_CONTROLLERS)),
                       (own / "cgroup.procs", "0")):
        try:
            _write(path, text)
        except OSError:
            pass
    _rmdir(leaf, 1.0)


def _detect_v1(mounts: list[_Mount], groups: dict[str, str], reasons: list[str]) -> Bound | None:
    parents: dict[Path, list[str]] = {}
    problems = []
    for controller in V1_CONTROLLERS:
        options = [mount for mount in mounts
                   if mount.fstype == "cgroup" and controller in mount.super_options]
        if not options:
            problems.append(f"no {controller} hierarchy")
            continue
        usable = [mount for mount in options if mount.writable]
        located = [(mount, _locate(mount, groups.get(controller))) for mount in usable]
        places = [path for _, path in located if path is not None]
        if not places:
            problems.append(f"{options[0].point} " + ("is read-only" if not usable else
                            "does not show this process's group"))
            continue
        parents.setdefault(places[0], []).append(controller)
    if problems:
        reasons.append("cgroup v1: " + ", ".join(problems))
        return None
    bound = Bound("v1", tuple(Hierarchy(path, tuple(names)) for path, names in parents.items()),
                  reason="; ".join(reasons))
    failure = _probe(bound)
    if failure is None:
        return bound
    reasons.append(f"cgroup v1: {failure}")
    return None


def _probe(bound: Bound) -> str | None:
    """Create a run's group and a kernel's under ``bound``, set them, move a
    process in and remove them: None where all worked, else what failed."""
    try:
        run = RunGroup(bound, name=f"{PREFIX}probe-{os.getpid()}-{secrets.token_hex(4)}")
    except Exception as error:  # noqa: BLE001 - the reason
        return _why(error)
    failure = None
    try:
        kernel = run.new_kernel_group(1.0, 16)
        done = subprocess.run(kernel.join_command_prefix() + ["/bin/sh", "-c", "exit 0"],
                              capture_output=True, timeout=30, check=False)
        if done.returncode != 0:
            failure = (f"a process could not join {kernel.paths[0]}: "
                       f"{done.stderr.decode(errors='replace').strip()[:200]}")
        else:
            kernel.cpu_seconds()
            kernel.pids_limit_hits()
    except Exception as error:  # noqa: BLE001 - the reason
        failure = _why(error)
    finally:
        left = run.close()
    if left:
        return (f"{failure or 'it worked, but'}: the probe group could not be removed: "
                f"{', '.join(left)}")
    return failure


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
                    _write(hierarchy.path / "cgroup.subtree_control",
                           " ".join(f"+{name}" for name in hierarchy.controllers))
        except BaseException:
            for path in reversed(created):
                _rmdir(path, CGROUP_KILL_WAIT_S)
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
                    _write(hierarchy.path / "cpu.weight", str(min(10_000, CPU_WEIGHT * count)))
                else:
                    _write(hierarchy.path / "cpu.shares", str(min(262_144, CPU_SHARES * count)))
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
                if not _rmdir(Path(folder), max(0.0, deadline - time.monotonic())):
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
            if any(_read_words(folder / "cgroup.procs") for folder in folders):
                continue
            if all(_rmdir(folder, 0.5) for folder in folders):
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
                _rmdir(path, CGROUP_KILL_WAIT_S)
            raise

    def _configure(self, hierarchy: Hierarchy) -> None:
        path, controllers = hierarchy.path, hierarchy.controllers
        quota = None if self.cpu_cores is None else max(MIN_QUOTA_US,
                                                        round(self.cpu_cores * PERIOD_US))
        if self.kind == "v2":
            if "cpu" in controllers:
                if quota is not None:
                    _write(path / "cpu.max", f"{quota} {PERIOD_US}")
                _write(path / "cpu.weight", str(CPU_WEIGHT))
            if "pids" in controllers:
                _write(path / "pids.max", str(self.pids_max))
            return
        if "cpu" in controllers:
            _write(path / "cpu.cfs_period_us", str(PERIOD_US))
            if quota is not None:
                try:
                    _write(path / "cpu.cfs_quota_us", str(quota))
                except OSError as error:
                    # v1 refuses a quota above an ancestor's (sched-bwc.rst):
                    # the ancestor's then, which bounds the kernel anyway.
                    ceiling = _v1_ancestor_quota(path)
                    if error.errno != errno.EINVAL or ceiling is None:
                        raise
                    _write(path / "cpu.cfs_quota_us", str(min(quota, ceiling)))
            _write(path / "cpu.shares", str(CPU_SHARES))
        if "pids" in controllers:
            _write(path / "pids.max", str(self.pids_max))

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
                    _write(kill_file, "1")
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
                if path.exists() and not _rmdir(path, max(0.0, deadline - time.monotonic()))]
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


def _rmdir(path: Path, timeout: float) -> bool:
    """Remove an empty group, retrying while it is busy (its last processes
    still exiting); True where it is gone."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() >= deadline:
                return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


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


def _write(path: Path, text: str) -> None:
    """One write(2) of ``text``: a cgroup file takes a value a write."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    except OSError as error:
        raise OSError(error.errno, f"writing {text!r}: {error.strerror}", str(path)) from None
    finally:
        os.close(fd)


def _read_words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _why(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        name = errno.errorcode.get(error.errno, str(error.errno))
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{name} ({error.strerror})"
    return f"{type(error).__name__}: {error}"


def _cores(cores: float) -> str:
    text = f"{cores:g}"
    return f"{text} core" if text == "1" else f"{text} cores"
