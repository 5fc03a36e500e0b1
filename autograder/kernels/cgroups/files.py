"""The files of a cgroup, written, read and removed as the kernel asks
(cgroup v1 and v2 alike): what autograder.kernels.cgroups.detection and
autograder.kernels.cgroups.groups both use. Called through the module
(``files.write``), so that a test replaces each in one place."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path


def write(path: Path, text: str) -> None:
    """One write(2) of ``text``: a cgroup file takes a value a write."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    except OSError as error:
        raise OSError(error.errno, f"writing {text!r}: {error.strerror}", str(path)) from None
    finally:
        os.close(fd)


def read_words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def remove_folder(path: Path, timeout: float) -> bool:
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
