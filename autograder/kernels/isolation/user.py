"""The second isolation layer: a user of its own for each student kernel.

Where bubblewrap cannot start (Docker's default seccomp profile denies the
user namespaces it needs, and a masked /proc defeats its ``--proc``:
opencontainers/runc#1658; Gradescope's and Kubernetes' containers are such
places) and the grader is root, each student kernel still runs

- as a dedicated unprivileged user (autograder.kernels.isolation.common.kernel_user:
  uid and gid of its own, no supplementary groups, no capabilities,
  ``no_new_privs``), which owns no file of the machine;
- with the course out of its reach: the course folder, OUT, the
  submissions, the seed and term files and the kit's own sources (hidden
  tests, references, stand-ins) get an access control list entry that
  denies that user everything (autograder.kernels.isolation.acl), while the folders on
  the way to Python, the virtual environment and labkit get one that lets
  it pass through, not list. Nobody else's access changes, and the entries
  are removed when the grading process ends;
- in a private working folder (its HOME and TMPDIR, mode 700), with umask
  077, under the same resource limits as in bubblewrap (memory, file size,
  processes: RLIMIT_NPROC holds, the user being non-root and the kernel's
  alone; open files);
- in a network namespace of its own (no network at all) where the
  container allows one (root with CAP_SYS_ADMIN); where it does not, the
  kernel keeps the container's network and the grader says so;
- and whatever it leaves behind is ended (`clean_user`:
  autograder.kernels.isolation.user_cleanup): every process of
  its user is killed before a kernel starts and after it stops, its files
  in every folder of the machine that any user may write (found once a
  run: `shared_folders`; /tmp, /var/tmp, /dev/shm, /run/lock...) are
  removed, and so are its System V shared memory segments, semaphores and
  message queues. It cannot make POSIX message queues (RLIMIT_MSGQUEUE 0:
  autograder.kernels.isolation.common.rlimits).

`prepare_user_layer` sets the entries up for one user and proves them: a probe runs
as that user, through the very wrapper a kernel starts with, and must fail
to read, list or write every protected path, reach the grader's processes,
and (where promised) the network; it must start Python and import labkit.
Only a layer whose probe passed is used (autograder.kernels.isolation.choose_isolation).

What this layer does not give, and bubblewrap does: the kernel sees the
machine's other files that any user may read (the system, /proc's list of
processes and their command lines), and writes into the shared /tmp and
/dev/shm limited only per file (RLIMIT_FSIZE), not in total; two kernels
graded at once (``--jobs``) can reach each other's files there while both
run (each submission's hidden inputs are its own: autograder.grader.worker.
submission_seed, so what one records answers nothing of the other's).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.kernels.isolation import acl
from autograder.kernels.isolation.base import Isolation, Layer, LayerUnavailable
from autograder.kernels.isolation.common import (KernelUser, Limits, SandboxSpec, become_prefix,
                                                 kernel_user, prlimit_arguments, python_paths,
                                                 rlimits)
from autograder.kernels.isolation.user_cleanup import clean_user, kill_user, shared_files

PROBE_TIMEOUT_S = 60

#: The probe, run as the kernel's user: what it can reach of the protected
#: paths (JSON in on argv[1], JSON out on stdout).
PROBE = r"""
import json, os, socket, sys
ask = json.loads(sys.argv[1])
found = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "reached": []}
def enter(path):
    try:
        os.stat(os.path.join(path, ".labkit-probe-absent"))
    except FileNotFoundError:
        return      # it could look inside: passed through
    except NotADirectoryError:
        raise PermissionError
def read(path):
    if os.path.isdir(path):
        raise PermissionError
    open(path, "rb").close()
def write(path):
    open(os.path.join(path, ".labkit-probe") if os.path.isdir(path) else path, "ab").close()
checks = {"enter": enter, "list": os.listdir, "read": read, "write": write}
for path, kinds in [(p, ("enter", "list", "read", "write")) for p in ask["denied"]] + \
        [(p, ("list", "write")) for p in ask["passable"]]:
    for what in kinds:
        try:
            checks[what](path)
        except OSError:
            continue
        found["reached"].append(f"{what} {path}")
for pid in ask["processes"]:
    try:
        os.kill(pid, 0)
        found["reached"].append(f"signal process {pid}")
    except OSError:
        pass
found["interfaces"] = sorted(name for _, name in socket.if_nameindex())
try:
    import labkit
    found["labkit"] = True
except Exception as error:
    found["labkit"] = f"{type(error).__name__}: {error}"
print(json.dumps(found))
"""


@dataclass
class Preparation:
    """What `prepare_user_layer` did for one kernel user."""

    uid: int
    network_isolated: bool = False
    details: list[str] = field(default_factory=list)


def _resolved(paths) -> list[Path]:
    seen = []
    for path in paths:
        try:
            real = Path(path).resolve()
        except OSError:
            continue
        if real.exists() and real != Path("/") and real not in seen:
            seen.append(real)
    return seen


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def plan(protected, needed, uid: int) -> dict[Path, int]:
    """The ACL entries for user ``uid``: ``0`` (nothing) on the protected
    paths, or on their parts not on the way to a needed path; SEARCH on the
    folders on the way to the needed paths that it could not pass, or that
    lie inside a protected path.

    Raises:
        LayerUnavailable: a needed path is itself protected.
    """
    protected, needed = _resolved(protected), _resolved(needed)
    entries: dict[Path, int] = {}
    for want in needed:
        for folder in reversed(want.parents):
            if folder == Path("/"):
                continue
            inside = any(_inside(folder, guard) for guard in protected)
            if inside or not acl.user_access(folder, uid) & acl.SEARCH:
                entries[folder] = acl.SEARCH
    for guard in protected:
        holding = [want for want in needed if _inside(want, guard)]
        if any(want == guard for want in holding):
            raise LayerUnavailable(
                f"{guard} holds what the student kernels need (Python, the virtual "
                f"environment or labkit) and must also be hidden from them; keep the "
                f"grader's installation out of the course, OUT and submissions folders.")
        if not holding:
            if not any(_inside(guard, other) and entries.get(other) == 0
                       for other in entries):
                entries[guard] = 0
            continue
        _deny_around(guard, holding, entries)
    return entries


def _deny_around(folder: Path, needed: list[Path], entries: dict[Path, int]) -> None:
    """Deny every entry of ``folder`` but the needed paths and the way to them."""
    for child in sorted(folder.iterdir()):
        if child.is_symlink():
            continue            # a link grants nothing: its target's entries decide
        on_the_way = [want for want in needed if _inside(want, child)]
        if not on_the_way:
            entries[child] = 0
        elif child not in on_the_way:
            _deny_around(child, on_the_way, entries)


#: Paths whose "other" bits were taken away where their file system keeps no
#: ACLs (an NFS volume), with their modes, restored at this process's exit.
_closed: dict[str, int] = {}


def _restore_modes() -> None:
    for path, mode in list(_closed.items()):
        try:
            os.chmod(path, mode)
        except OSError:
            pass
        _closed.pop(path, None)


atexit.register(_restore_modes)


def apply(entries: dict[Path, int], uid: int) -> list[str]:
    """Write the entries; the paths done. Undone at this process's exit.

    Where a protected path's file system keeps no access control lists (an
    NFS volume, say), its "other" permission bits are taken away instead
    (every kernel user is "other" there) and put back at exit; `closed`
    lists them.
    """
    done: list[str] = []
    atexit.register(undo, done, uid)
    for path, perms in entries.items():
        try:
            acl.set_user(path, uid, perms)
        except acl.AclUnsupported as error:
            if perms == 0:
                mode = os.stat(path).st_mode & 0o7777
                _closed.setdefault(str(path), mode)
                os.chmod(path, mode & ~0o007)
                continue
            raise LayerUnavailable(
                f"{path}: its file system keeps no access control lists, so the grader "
                f"cannot let the student kernels' users alone pass through it to reach "
                f"Python and labkit. Fix: `chmod o+x {path}` (then any user may pass), "
                f"install the kit's Python elsewhere, or grade where bubblewrap runs.") from error
        except OSError as error:
            raise LayerUnavailable(f"{path}: the grader could not set its access control "
                                   f"list ({error.strerror}).") from error
        done.append(str(path))
    return done


def closed() -> list[str]:
    """The protected paths closed by their mode (no ACLs there)."""
    return sorted(_closed)


def undo(paths: list[str], uid: int) -> None:
    for path in reversed(paths):
        try:
            acl.remove_user(Path(path), uid)
        except OSError:
            pass
    paths.clear()


def network_namespace_allowed() -> bool:
    """Whether a new network namespace can be made here (a child tries)."""
    try:
        result = subprocess.run(
            [sys.executable, "-I", "-S", "-c",
             "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
             "os._exit(0 if libc.unshare(0x40000000) == 0 else 1)"],
            capture_output=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def probe(become: list[str], denied: list[Path], passable: list[Path],
          processes: list[int]) -> dict:
    """Run PROBE as the kernel's user, through ``become`` (the kernel's
    wrapper): it must not enter, list, read or write ``denied``, nor list
    or write ``passable`` (the protected folders that hold the way to
    Python), nor signal ``processes``."""
    ask = json.dumps({"denied": [str(p) for p in denied],
                      "passable": [str(p) for p in passable], "processes": processes})
    command = become + [sys.executable, "-I", "-c", PROBE, ask]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=PROBE_TIMEOUT_S, cwd="/")
    except subprocess.TimeoutExpired:
        raise LayerUnavailable(f"the probe as the kernels' user did not end in "
                               f"{PROBE_TIMEOUT_S} s") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise LayerUnavailable(f"Python does not start as the kernels' user ({last[:300]}): "
                               f"the interpreter {sys.executable} or its libraries are not "
                               f"readable by other users")
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise LayerUnavailable(f"the probe as the kernels' user answered "
                               f"{result.stdout[:200]!r}") from None


#: The user layer's preparation in this process (prepare_user_layer): what it
#: was set up for and the ACL entries it wrote.
_prepared: Preparation | None = None
_prepared_for: frozenset = frozenset()
_applied: list = []


def needed_paths() -> list[Path]:
    """What a student kernel must reach: Python, the venv, labkit, and the
    run's folder (its scratch and ipc folders are inside)."""
    from autograder import tempdirs

    return python_paths() + [tempdirs.run_folder()]


def prepare_user_layer(protected=()) -> Preparation:
    """Set the user layer up for this process's kernel user and prove it.

    Raises:
        LayerUnavailable: it cannot hold here (why, and the fix).
    """
    global _prepared, _prepared_for, _applied
    from autograder import tempdirs

    protected = [Path(p) for p in protected]
    asked = frozenset(str(p) for p in protected)
    if _prepared is not None and asked <= _prepared_for:
        return _prepared
    user = kernel_user()
    if user is None:
        raise LayerUnavailable("the grader does not run as root")
    if _prepared is not None:
        # Asked again for more: set up for everything asked so far.
        protected = sorted({*protected, *map(Path, _prepared_for)})
        asked = frozenset(str(p) for p in protected)
        undo(_applied, user.uid)
        _prepared = None
    entries = plan(protected, needed_paths(), user.uid)
    # What a killed run's kernel of this user left; files any user may write
    # would carry one kernel's answers to the next.
    clean_user(user.uid)
    entries.update({path: 0 for path in shared_files(user.uid, entries)})
    done = _applied = apply(entries, user.uid)
    network = network_namespace_allowed()
    home = Path(tempdirs.make_folder("labkit-probe-", mode=0o711))
    try:
        become = prlimit_arguments(rlimits(Limits(), uid=user.uid)) + \
            become_prefix(user, home, net=network, umask=0o077)
        denied_paths = [path for path, perms in entries.items() if perms == 0]
        passable = [path for path in entries if path not in denied_paths
                    and any(path == guard.resolve() for guard in protected)]
        found = probe(become, denied_paths, passable, [os.getpid(), os.getppid()])
    finally:
        kill_user(user.uid)
        shutil.rmtree(home, ignore_errors=True)
    wrong = list(found.get("reached", []))
    if found.get("uid") != user.uid or found.get("groups"):
        wrong.append(f"ran as uid {found.get('uid')} with groups {found.get('groups')}")
    if found.get("labkit") is not True:
        wrong.append(f"cannot import labkit ({found.get('labkit')})")
    if network and found.get("interfaces") != ["lo"]:
        wrong.append(f"sees network interfaces {found.get('interfaces')}")
    if wrong:
        undo(done, user.uid)
        raise LayerUnavailable("the probe as the kernels' user could "
                               + "; ".join(wrong[:5]))
    _prepared_for = asked
    _prepared = Preparation(
        user.uid, network, [
            f"user: uid {user.uid}, gid {user.gid}, no supplementary groups, no capabilities",
            f"course files: {len(denied_paths)} paths denied to it by ACL, "
            f"{len(entries) - len(denied_paths)} "
            f"folders passable (not listable) on the way to Python and labkit; probed as "
            f"that user: {len(denied_paths) + len(passable)} paths unreadable and unwritable",
            *([f"closed to every other user while grading (no ACLs on their file system): "
               f"{', '.join(closed())}"] if closed() else []),
            "passable for it (not listable): " + ", ".join(
                str(path) for path, perms in entries.items() if perms),
            "limits: memory, processes, file size, open files (setrlimit)",
            "not isolated: the machine's world-readable files, the process list; /tmp and "
            "/dev/shm shared (limited per file, cleaned after each kernel)"])
    return _prepared


class UserLayer(Layer):
    """A user of its own for each kernel, the course denied to it by ACL
    entries (prepare_user_layer): where bubblewrap cannot start and the
    grader is root."""

    name = "user"
    title = "a user of its own per kernel"
    fix = "run the grader as root so that each kernel gets a user of its own"
    notes = ("isolation: a user of its own for the kernel, the course denied to it "
             "(bubblewrap could not run here)",)

    def problem(self) -> str:
        if os.geteuid() == 0:
            return ""
        return f"needs the grader to run as root (it runs as uid {os.geteuid()})"

    def prepare(self, protected=()) -> None:
        prepare_user_layer(protected)

    def isolation(self, passed_over: list[str]) -> Isolation:
        preparation = _prepared
        assert preparation is not None, "the user layer is described once prepared"
        if preparation.network_isolated:
            network, network_detail = "none", "none (a network namespace of its own)"
        else:
            network = "NOT isolated"
            network_detail = ("NOT isolated: this container allows no new network "
                              "namespace (deny it outside: a NetworkPolicy, a firewall)")
        return Isolation(
            self.name, f"a user of its own per student kernel ({'; '.join(passed_over)}); "
                       f"course files denied to it; network: {network}",
            tuple([f"network: {network_detail}"] + preparation.details))

    def command_prefix(self, spec: SandboxSpec, user: KernelUser | None) -> list[str]:
        # The run's preparation (its protected paths cover this kernel's
        # hidden ones); set up here only for a kernel started outside a run.
        preparation = _prepared or prepare_user_layer(spec.hidden)
        return become_prefix(user, spec.scratch, net=preparation.network_isolated, umask=0o077)

    def environment(self, spec: SandboxSpec, env: dict[str, str]) -> None:
        # The machine's /tmp is shared there: temporary files go to the
        # kernel's own folder.
        env["TMPDIR"] = str(spec.scratch)

    def after_kernel(self, user: KernelUser | None) -> None:
        # Every process of the kernel's user ended, its files in the folders
        # any user may write and its System V IPC removed: a daemon, a planted
        # file or segment of one submission never meets the next.
        if user is not None:
            clean_user(user.uid)

    def clock_user(self, user: KernelUser | None) -> KernelUser | None:
        return user
