"""Faults an instructor meets while a class is graded, and what is left after them.

A run of `grade` may end before its end: Ctrl-C (SIGINT), SIGTERM (a
scheduler, `kill`), SIGHUP (the terminal closed), SIGKILL (the out-of-memory
killer's choice) of the command or of one of its workers, a full disk. In
each case:

- no process of the run is left: every worker process dies with the command
  (autograder.lifetime.die_with_parent, set as each starts: PR_SET_PDEATHSIG), each worker's
  fork server with its worker (the same, autograder.kernels.forkserver.client), the
  test kernel with its worker (ipykernel polls its parent: JPY_PARENT_PID),
  each student kernel with its sandbox (bubblewrap's --die-with-parent), and
  multiprocessing's resource tracker once the last of them has closed its
  pipe; a command that ends by a signal it can catch, or by a worker lost or
  a full disk, first stops its workers itself;
- the terminal says what happened in one sentence, no traceback
  (`Interrupted`, `RunStopped`: autograder.cli prints them), and the exit
  status is a shell's for the signal (128 + its number) or says the fault;
- the results already saved are kept, each written whole or not at all
  (`write_atomically`: no temporary file is left), and the same command
  goes on from them.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

#: The signals a run stops on with a sentence, and its exit status for each (a
#: shell's: 128 + the signal's number).
STOP_SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
#: The exit status of a run stopped by a lost worker (sysexits.h's EX_TEMPFAIL:
#: the same command may succeed), and by a full disk (EX_IOERR).
EXIT_WORKER_LOST = 75
EXIT_DISK_FULL = 74

#: What a result costs in OUT before the first one of a run is saved (its
#: notebook's copies in the course folders, the result, its feedback page),
#: beyond four times the notebook's own size.
RESULT_OVERHEAD_BYTES = 64 * 1024

class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal: Ctrl-C, SIGTERM or SIGHUP."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return STOP_SIGNALS.get(signal.Signals(self.signum), 128 + self.signum)


class RunStopped(Exception):
    """The machine stopped the run: a worker process died, the disk filled.
    Its message is the sentence the terminal shows."""

    exit_status = 1


class WorkerLost(RunStopped):
    exit_status = EXIT_WORKER_LOST


class DiskFull(RunStopped):
    """The disk filled: ``path``, the file that could not be written (where known)."""

    exit_status = EXIT_DISK_FULL

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path


_stopping: list[int] = []
#: How deep the main thread is in `held` steps, and whether a signal waits for their end.
_held = 0
_waiting = False


def stop_on_signals() -> dict:
    """Turn SIGINT, SIGTERM and SIGHUP into `Interrupted` in this (main)
    thread. Only the first one raises, and not inside a `held` step (at its
    end): those that come while the run stops its workers are noted and left
    (SIGKILL ends everything at once). Returns the handlers replaced
    (`restore_signals`)."""
    _stopping.clear()
    before = {}
    for signum in STOP_SIGNALS:
        try:
            before[signum] = signal.signal(signum, _on_signal)
        except (OSError, ValueError):     # not the main thread, or not this system's
            pass
    return before


def restore_signals(before: dict) -> None:
    for signum, handler in before.items():
        signal.signal(signum, handler)


def _on_signal(signum, _frame) -> None:
    global _waiting
    _stopping.append(signum)
    if len(_stopping) == 1:
        if _held:
            _waiting = True
        else:
            raise Interrupted(signum)


def stopping() -> int | None:
    """The signal the run is stopping on, if any."""
    return _stopping[0] if _stopping else None


def check() -> None:
    """Raise `Interrupted` where a signal came and was not raised (or was
    swallowed: nbgrader's capture_log catches every exception, and its
    converters log a KeyboardInterrupt as a failure)."""
    if _stopping:
        raise Interrupted(_stopping[0])


class held:
    """``with held():`` a step that a stop signal does not cut short: the
    signal is raised at its end (nbgrader's steps, which would log it as a
    failure with a traceback; writing one result into the gradebook and
    OUT/results/).

    ``with held(workers=True):`` also the worker processes started inside it
    start with Ctrl-C ignored (SIG_IGN, which they inherit; a blocked signal
    they would not: multiprocessing starts them with an empty mask), until
    each sets its own (`worker_signals`): a Ctrl-C while one is still
    starting up does not end it with a traceback. (A Ctrl-C to this process
    in those milliseconds is lost.)
    """

    def __init__(self, workers: bool = False):
        self.workers = workers

    def __enter__(self):
        global _held
        _held += 1
        if self.workers:
            self.before = signal.signal(signal.SIGINT, signal.SIG_IGN)
        return self

    def __exit__(self, kind, _value, _traceback):
        global _held, _waiting
        if self.workers:
            signal.signal(signal.SIGINT, self.before)
        _held -= 1
        if not _held and _waiting:
            _waiting = False
            if kind is None:
                raise Interrupted(_stopping[0])


def worker_signals() -> None:
    """In a worker process, as it starts: a Ctrl-C reaches the whole process
    group, but the command alone stops the run (it ends its workers), so
    SIGINT does nothing here; SIGTERM and SIGHUP end the worker (their
    default). Through a Python handler, not SIG_IGN: the processes the worker
    starts (sandboxes, kernels) get their default dispositions back (the
    worker started with SIGINT ignored: `held`)."""
    signal.signal(signal.SIGINT, lambda *_: None)


#: The warning multiprocessing's resource tracker gives as it unlinks the
#: semaphores of a process pool whose process was killed (SIGKILL) before it
#: could unlink them itself.
TRACKER_WARNING = "ignore:resource_tracker:UserWarning"


def quiet_resource_tracker() -> None:
    """Before this process starts a process pool: its resource tracker (a
    process multiprocessing starts with the pool's first semaphore, which
    ends when the last process of the run has closed its pipe) unlinks the
    pool's semaphores without a warning on the terminal when this process
    was killed with SIGKILL, the one way it leaves them. (They are unlinked
    at its exit in every other case: a signal is an exception here.) The
    tracker takes its warning filters from this process's -W options."""
    if TRACKER_WARNING not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_WARNING)


def quiet_gradebook_errors() -> None:
    """nbgrader's gradebook logs each database error it then raises (tornado's
    application log, printed with its traceback where nothing handles it):
    the grader says what failed in the row, or in a sentence (a full disk)."""
    import logging

    log = logging.getLogger("tornado.application")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        log.addHandler(logging.NullHandler())


# -- the disk -------------------------------------------------------------------------

def is_disk_full(error: BaseException | None) -> bool:
    """Whether ``error`` (or one it was raised from) says the disk is full:
    ENOSPC or EDQUOT, SQLite's "database or disk is full"."""
    return any(isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
               or says_disk_full(str(e)) for e in _chain(error))


def full_path(error: BaseException | None) -> str | None:
    """The file a disk-full ``error`` could not write, where it says."""
    for e in _chain(error):
        if isinstance(e, DiskFull) and e.path:
            return e.path
        if isinstance(e, OSError) and e.filename:
            return str(e.filename)
    return None


def _chain(error: BaseException | None):
    seen = 0
    while error is not None and seen < 10:
        yield error
        error = error.__cause__ or error.__context__
        seen += 1


def quoted_path(text: str) -> str | None:
    """The file an OSError's message names ("...: '/a/file'"), if any."""
    found = re.search(r": '(/[^']+)'", text)
    return found.group(1) if found else None


def says_disk_full(text: str) -> bool:
    """Whether a message (a worker's grader error) says the disk filled."""
    return ("No space left on device" in text or "[Errno 28]" in text
            or "database or disk is full" in text or "Disk quota exceeded" in text)


def write_atomically(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``path`` whole or not at all: into a temporary name beside it,
    then renamed over it; the temporary file is removed when the write fails
    (a full disk, an interrupt)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding=encoding) as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException as error:
        try:
            temporary.unlink()
        except OSError:
            pass
        if isinstance(error, OSError) and not error.filename:
            error.filename = str(path)     # (a write's error names no file)
        raise


@dataclass
class Progress:
    """How far the run is, for the sentence a fault ends it with."""

    out_dir: Path | None = None
    total: int | None = None
    graded: int = 0
    graded_now: int = 0
    out_bytes_at_start: int = 0
    notebook_bytes: int = 0

    def start(self, out_dir: Path, total: int, graded: int, notebook_bytes: int) -> None:
        self.out_dir = Path(out_dir)
        self.total, self.graded, self.graded_now = total, graded, 0
        self.notebook_bytes = notebook_bytes
        self.prepared()

    def prepared(self) -> None:
        """OUT's course folder is set up: what OUT holds now is not the results'."""
        if self.out_dir is not None:
            self.out_bytes_at_start = folder_bytes(self.out_dir)

    def one_more(self) -> None:
        self.graded += 1
        self.graded_now += 1

    def needed_bytes(self) -> int:
        """What the rest of the run will write into OUT, estimated from what
        it wrote per submission so far (before the first: four times the
        submissions' own size, and some) and the reports (as much again as
        one result, per student)."""
        total = self.total or 0
        left = max(total - self.graded, 0)
        if self.graded_now and self.out_dir is not None:
            per = (folder_bytes(self.out_dir) - self.out_bytes_at_start) / self.graded_now
        else:
            per = 4 * self.notebook_bytes / max(total, 1) + RESULT_OVERHEAD_BYTES
        per = max(per, RESULT_OVERHEAD_BYTES)
        return int(per * left + RESULT_OVERHEAD_BYTES * total)

    def so_far(self) -> str:
        if self.total is None:
            return "before grading began"
        return f"{self.graded} of {self.total} graded"


#: This run's progress (autograder.grader.batch keeps it).
progress = Progress()


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder`` (as du counts them, roughly)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def disk_full_sentence(path: str | None = None) -> str:
    """What the terminal says when a disk filled: the one holding OUT (or,
    where the file not written, ``path``, lies on another, that one)."""
    out_dir = Path(progress.out_dir or ".").resolve()
    where, disk = out_dir, "OUT"
    if path:
        where = _existing(Path(path).resolve().parent)
        try:
            if not where.is_relative_to(out_dir) \
                    and os.stat(where).st_dev != os.stat(_existing(out_dir)).st_dev:
                disk = str(where)        # another disk: the temporary folder's
        except OSError:
            pass
    try:
        free = shutil.disk_usage(_existing(where)).free
    except OSError:
        free = 0
    needed = max(progress.needed_bytes(), 1)
    return (f"the disk holding {disk} is full: {free // 2**20} MB free, "
            f"{-(-needed // 2**20)} MB needed ({progress.so_far()}; OUT is {out_dir}). "
            f"Free some space there, then the same command goes on.")


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
