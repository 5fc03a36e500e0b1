"""What bounds a student kernel's CPU and processes here: cgroup v2, v1 or
none, each tried by creating and removing a probe group (why, and what holds
where: autograder.kernels.cgroups).
"""

from __future__ import annotations

import errno
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from autograder.kernels.cgroups import files
from autograder.kernels.cgroups.groups import (CPU_SHARES, CPU_WEIGHT, PREFIX, V1_CONTROLLERS,
                                               V2_CONTROLLERS, Hierarchy, RunGroup)
from autograder.limits import KERNEL_FALLBACK_NICE, KERNEL_TASKS


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
        available = set(files.read_words(own / "cgroup.controllers"))
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
    enabled = set(files.read_words(group / "cgroup.subtree_control"))
    return all(name in enabled for name in V2_CONTROLLERS)


def _adopt(own: Path) -> tuple[Path | None, str]:
    """Where this process is alone in its v2 group (a delegated group, a
    container's, a systemd unit's with Delegate=yes), move it to a leaf of
    its own (``labkit-grader-<pid>``) and give the group's children cpu and
    pids: then the group holds no process, as the no-internal-process rule
    asks. Returns the leaf, or None and why not. Nothing is done where the
    group holds another process: it is not this grader's to rearrange."""
    others = [pid for pid in files.read_words(own / "cgroup.procs") if int(pid) != os.getpid()]
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
        files.write(leaf / "cgroup.procs", "0")
        files.write(own / "cgroup.subtree_control", " ".join(f"+{name}" for name in V2_CONTROLLERS))
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
            files.write(path, text)
        except OSError:
            pass
    files.remove_folder(leaf, 1.0)


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


# -- helpers --------------------------------------------------------------------------


def _why(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        name = errno.errorcode.get(error.errno, str(error.errno))
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{name} ({error.strerror})"
    return f"{type(error).__name__}: {error}"


def _cores(cores: float) -> str:
    text = f"{cores:g}"
    return f"{text} core" if text == "1" else f"{text} cores"
