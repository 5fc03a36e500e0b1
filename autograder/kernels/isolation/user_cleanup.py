"""What a student kernel's user leaves on the machine, found and ended (the
user layer: autograder.kernels.isolation.user).

Under the user layer a kernel shares the machine's /tmp, /dev/shm and every
other folder any user may write, and its System V IPC. `clean_user` ends it
all before a kernel of that user starts and after it stops: every process of
the user (`kill_user`), its files in the folders any user may write (found
once a run: `shared_places`), and its shared memory segments, semaphores and
message queues (`remove_user_ipc`).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import stat
import time
from pathlib import Path

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
#: The file in the run's folder (autograder.tempdirs) that keeps what
#: shared_folders found, so that the walk is made once a run, not once a worker.
SHARED_FOLDERS_FILE = "shared-folders.json"
#: At most this many folders are looked into when a kernel's files are
#: removed (folders that others may write, nested in the shared ones): a
#: tree of them made to slow the grader down is cut there (its own files go
#: with it: each top entry the user owns is removed whole).
CLEAN_MAX_FOLDERS = 10_000


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
    walked. A few seconds on a full machine (docs/performance.md, "Why the code is shaped this way")."""
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
    from autograder import tempdirs

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
