"""The temporary folders of a grading run, all in one folder the run owns.

Every temporary folder the grader makes (a submission's scratch and ipc
folders, the test kernel's, the fork server's home, release's) lies in one
*run folder*, ``labkit-run-PID-XXXXXXXX`` in the system's temporary folder:
PID is the process that made it, and every process of the run (the CLI, its
workers) holds a shared lock on its ``lock`` file while it lives. A run that
ends normally removes its folder on exit. A run that was killed (SIGKILL,
out of memory, a power cut) leaves it behind with no one holding its lock;
the next run finds and removes it before making its own. A folder is
removed only when no process holds its lock *and* its PID is gone, so a run
that is starting (folder made, lock not yet taken) is never removed.

The worker processes of a run (``--jobs N``, started with multiprocessing's
spawn) find the run folder in the environment (``AUTOGRADER_RUN_FOLDER``,
which the test kernel and the student kernels never get) and join it when it
was made by their parent; any other process makes its own.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import tempfile
from pathlib import Path

ENVIRONMENT = "AUTOGRADER_RUN_FOLDER"
PREFIX = "labkit-run-"
NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")

_folder: Path | None = None
_lock: int | None = None


def run_folder() -> Path:
    """This run's folder: made (and dead runs' folders removed) on first use."""
    global _folder
    if _folder is not None and _folder.is_dir():
        return _folder
    inherited = os.environ.get(ENVIRONMENT, "")
    if inherited and _owner(Path(inherited)) == os.getppid() and _hold(Path(inherited)):
        _folder = Path(inherited)
        return _folder
    remove_dead_runs()
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    _hold(folder)
    # The student kernel runs as another user where the grader is root
    # (autograder.kernels.isolation.common.kernel_user): it may pass through, never list.
    folder.chmod(0o711)
    _folder = folder
    os.environ[ENVIRONMENT] = str(folder)
    atexit.register(_remove_own, folder, os.getpid())
    return folder


def make_folder(prefix: str, mode: int = 0o700) -> str:
    """A new temporary folder inside this run's folder (as tempfile.mkdtemp),
    the grader's alone unless ``mode`` says otherwise: a submission's folder,
    which holds the student kernel's scratch and ipc folders, is 0o711 (the
    kernel's user, where it is not the grader's, passes through)."""
    folder = tempfile.mkdtemp(prefix=prefix, dir=run_folder())
    os.chmod(folder, mode)
    return folder


def remove_dead_runs(where: Path | None = None) -> list[Path]:
    """Remove the run folders (of this user) in ``where`` (default: the
    system's temporary folder) whose run is dead; returns them."""
    removed = []
    where = Path(where or tempfile.gettempdir())
    for folder in where.glob(f"{PREFIX}*"):
        try:
            if folder.is_symlink() or not folder.is_dir() \
                    or folder.stat().st_uid != os.geteuid():
                continue
        except OSError:
            continue
        owner = _owner(folder)
        if owner is None or _alive(owner):
            continue
        try:
            handle = os.open(folder / "lock", os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            handle = None
        except OSError:
            continue
        try:
            if handle is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:      # a process of that run is still alive
                    continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            if handle is not None:
                os.close(handle)
    return removed


def _owner(folder: Path) -> int | None:
    found = NAME.match(folder.name)
    return int(found.group(1)) if found else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _hold(folder: Path) -> bool:
    """Take a shared lock on ``folder``'s lock file, kept while this process
    lives (the descriptor is not inherited by the processes it starts)."""
    global _lock
    try:
        handle = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
    except OSError:
        return False
    fcntl.flock(handle, fcntl.LOCK_SH)
    if _lock is not None:
        os.close(_lock)
    _lock = handle
    return True


def _remove_own(folder: Path, pid: int) -> None:
    """On a normal exit of the process that made the run folder (not in a
    child that forked from it)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)
