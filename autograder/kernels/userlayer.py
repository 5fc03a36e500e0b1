"""The second isolation layer: a user of its own for each student kernel.

Where bubblewrap cannot start (Docker's default seccomp profile denies the
user namespaces it needs, and a masked /proc defeats its ``--proc``:
opencontainers/runc#1658; Gradescope's and Kubernetes' containers are such
places) and the grader is root, each student kernel still runs

- as a dedicated unprivileged user (autograder.kernels.sandbox.kernel_user:
  uid and gid of its own, no supplementary groups, no capabilities,
  ``no_new_privs``), which owns no file of the machine;
- with the course out of its reach: the course folder, OUT, the
  submissions, the seed and term files and the kit's own sources (hidden
  tests, references, stand-ins) get an access control list entry that
  denies that user everything (autograder.kernels.acl), while the folders on
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
- and whatever it leaves behind is ended (`clean_user`): every process of
  its user is killed before a kernel starts and after it stops, its files
  in every folder of the machine that any user may write (found once a
  run: `shared_folders`; /tmp, /var/tmp, /dev/shm, /run/lock...) are
  removed, and so are its System V shared memory segments, semaphores and
  message queues. It cannot make POSIX message queues (RLIMIT_MSGQUEUE 0:
  autograder.kernels.sandbox.rlimits).

`prepare` sets the entries up for one user and proves them: a probe runs
as that user, through the very wrapper a kernel starts with, and must fail
to read, list or write every protected path, reach the grader's processes,
and (where promised) the network; it must start Python and import labkit.
Only a layer whose probe passed is used (autograder.kernels.sandbox.choose_isolation).

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
import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.kernels import acl

#: Shared folders a kernel may write into wherever they exist; its files there
#: are removed after it (with every other folder any user may write:
#: shared_folders).
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
#: File systems with nothing a kernel could leave a file in (kernel
#: interfaces): not walked by shared_folders.
PSEUDO_FILE_SYSTEMS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "securityfs", "debugfs", "tracefs",
    "bpf", "pstore", "configfs", "fusectl", "binfmt_misc", "efivarfs", "hugetlbfs",
    "autofs", "rpc_pipefs", "nsfs", "selinuxfs"})
#: The file in the run's folder (autograder.grader.tempdirs) that keeps what
#: shared_folders found, so that the walk is made once a run, not once a worker.
SHARED_FOLDERS_FILE = "shared-folders.json"
#: At most this many folders are looked into when a kernel's files are
#: removed (folders that others may write, nested in the shared ones): a
#: tree of them made to slow the grader down is cut there (its own files go
#: with it: each top entry the user owns is removed whole).
CLEAN_MAX_FOLDERS = 10_000
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


class LayerUnavailable(RuntimeError):
    """The user layer cannot be set up here; the message says why and how to fix it."""


@dataclass
class Preparation:
    """What `prepare` did for one kernel user."""

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


def kill_user(uid: int) -> None:
    """End every process of user ``uid`` (a kernel's leftovers: a daemon,
    a fork bomb). A child becomes that user and signals every process it
    may (kill(-1) reaches exactly that user's, never root's), twice."""
    if uid == 0 or os.geteuid() != 0:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(3):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
                time.sleep(0.01)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def clean_user(uid: int, folders=None) -> list[str]:
    """End what user ``uid`` (a kernel's) left on the machine: its
    processes, its files in the folders any user may write, its System V
    IPC objects. What was removed (files, and "shm 1234"-like IPC names)."""
    kill_user(uid)
    return remove_user_files(uid, folders) + remove_user_ipc(uid)


def _mount_points() -> list[tuple[str, str, bool]]:
    """(mount point, file system type, read-only) of this process's mounts."""
    found: list[tuple[str, str, bool]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        try:
            after = fields.index("-")
            point = fields[4].encode().decode("unicode_escape")
            found.append((point, fields[after + 1], "ro" in fields[5].split(",")))
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
    return found


def find_shared(skip=(), passable=()) -> tuple[list[str], list[str]]:
    """Walk the machine for what any user may write: (folders, regular
    files) whose "other" write bit is set, on a file system mounted
    writable, reachable by an unprivileged user (through folders others may
    search, or ``passable``: the folders the kernel's ACL entries let it
    pass). ``skip``: folders not walked (the course and the kit, denied to
    the kernel anyway). Kernel interfaces (/proc, /sys, cgroups...) are not
    walked. A few seconds on a full machine (24,000 folders: 2.3 s)."""
    mounts = _mount_points()
    pruned = {point for point, kind, _ in mounts if kind in PSEUDO_FILE_SYSTEMS}
    pruned |= {"/proc", "/sys"} | {str(path) for path in skip}
    passable = {str(path) for path in passable}
    readonly = {point for point, _, ro in mounts if ro}
    folders: list[str] = []
    files: list[str] = []
    stack = ["/"]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                path = entry.path
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode):
                    if path in pruned:
                        continue
                    if mode & 0o002 and not _read_only(path, readonly):
                        folders.append(path)
                    if mode & 0o001 or path in passable:
                        stack.append(path)
                elif stat.S_ISREG(mode) and mode & 0o002 and not _read_only(path, readonly):
                    files.append(path)
    return sorted(folders), sorted(files)


def _read_only(path: str, readonly: set[str]) -> bool:
    if not readonly:
        return False
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


_shared: dict[str, list[str]] | None = None


def shared_places(skip=(), passable=()) -> dict[str, list[str]]:
    """What any user may write: {"folders": find_shared's and SHARED_TEMP's
    that exist, "files": find_shared's}, found once a run (kept in the
    run's folder, which only the grader may write; ``skip`` and
    ``passable`` as find_shared, used by the first process of the run that
    asks), once a process outside a run."""
    global _shared
    if _shared is not None:
        return _shared
    from autograder.grader import tempdirs

    kept = tempdirs.run_folder() / SHARED_FOLDERS_FILE
    try:
        found = json.loads(kept.read_text())
        if isinstance(found, dict) and all(
                isinstance(found.get(key), list) and all(isinstance(p, str) for p in found[key])
                for key in ("folders", "files")):
            _shared = found
            return _shared
    except (OSError, ValueError):
        pass
    folders, files = find_shared(skip, passable)
    _shared = {"folders": sorted({*folders, *(path for path in SHARED_TEMP
                                              if os.path.isdir(path)
                                              and not os.path.islink(path))}),
               "files": files}
    partial = kept.with_name(f".{kept.name}.{os.getpid()}")
    try:
        handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(handle, "w") as out:
            json.dump(_shared, out)
        os.replace(partial, kept)
    except OSError:
        pass
    return _shared


def shared_files(uid: int, entries: dict[Path, int]) -> list[Path]:
    """The files any user may write (shared_places; the walk skips the paths
    ``entries`` deny and passes those they let pass) that exist now and
    that ``uid`` does not own (the owner's own bits would hold over an
    entry denying it: clean_user removes those)."""
    found = shared_places([path for path, perms in entries.items() if perms == 0],
                          [path for path, perms in entries.items() if perms])["files"]
    kept = []
    for path in found:
        try:
            if os.lstat(path).st_uid != uid:
                kept.append(Path(path))
        except OSError:
            continue
    return kept


def shared_folders() -> list[str]:
    """The folders any user may write (shared_places)."""
    return shared_places()["folders"]


def remove_user_files(uid: int, folders=None) -> list[str]:
    """Remove what user ``uid`` left in the folders any user may write
    (default: shared_folders) and in the folders others may write inside
    them (another kernel's 0777 folder in /tmp): each entry it owns,
    whole."""
    removed: list[str] = []
    stack = list(shared_folders() if folders is None else folders)
    seen = 0
    while stack and seen < CLEAN_MAX_FOLDERS:
        top = stack.pop()
        seen += 1
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            path = entry.path
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid:
                    if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                        stack.append(path)
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
                removed.append(path)
            except OSError:
                continue
    return removed


#: System V IPC: /proc/sysvipc's tables, the columns of the owner's and the
#: creator's uid (after the key and id), and the command that removes one.
IPC_RMID = 0
_IPC_TABLES = {"shm": ("uid", "cuid", "shmctl"), "sem": ("uid", "cuid", "semctl"),
               "msg": ("uid", "cuid", "msgctl")}


def user_ipc(uid: int) -> list[tuple[str, int]]:
    """The System V IPC objects user ``uid`` owns or made: (kind, id)."""
    found = []
    for kind, (owner, creator, _) in _IPC_TABLES.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        try:
            owner_at, creator_at = header.index(owner), header.index(creator)
        except ValueError:
            continue
        for line in lines[1:]:
            fields = line.split()      # key, id, perms, ...
            try:
                if uid in (int(fields[owner_at]), int(fields[creator_at])):
                    found.append((kind, int(fields[1])))
            except (ValueError, IndexError):
                continue
    return found


def remove_user_ipc(uid: int) -> list[str]:
    """Remove user ``uid``'s System V shared memory segments, semaphore sets
    and message queues (a segment is freed once no process holds it: its
    user's are ended first, clean_user); what was removed ("shm 32769")."""
    objects = user_ipc(uid)
    if not objects:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    removed = []
    for kind, ident in objects:
        call = getattr(libc, _IPC_TABLES[kind][2])
        result = call(ident, 0, IPC_RMID, None) if kind == "sem" else call(ident, IPC_RMID, None)
        if result == 0:
            removed.append(f"{kind} {ident}")
    return removed


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
