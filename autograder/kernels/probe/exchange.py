"""The exchange folder: the requests, answers, callbacks and pipes of calls
into one student's kernel, as files of one folder.

The exchange folder is the student's kernel's to write, so every file in it
is reached through this one descriptor, never followed through a link
(O_NOFOLLOW), and written only as a new file (O_EXCL): a notebook that puts
links there, or swaps the folder for a link to one of the grader's, gets
nothing written or read outside it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from autograder.kernels.probe.errors import StudentCodeError


class ExchangeFolder:
    """The exchange folder of one student's kernel, reached through one
    descriptor (``fd``; the client's and its transport's alike)."""

    def __init__(self, path: Path, identity: tuple[int, int] | None = None):
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True)
        # ``identity`` (device, inode) is the folder the grader made before
        # the notebook ran; ``tampered`` says how the folder found is not it.
        self.tampered: str | None = None
        self.fd: int | None   # None: closed, or the folder could not be opened
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as error:
            self.fd, self.tampered = None, f"{type(error).__name__}"
        else:
            found = os.fstat(self.fd)
            if identity and (found.st_dev, found.st_ino) != tuple(identity):
                self.tampered = "another folder"

    def close(self) -> None:
        """Close the folder's descriptor (nothing is reached through it after)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def write_new(self, name: str, data: bytes) -> None:
        """Write a new file ``name`` in the exchange folder (never through a link)."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                     dir_fd=self.fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    def read_answer_file(self, name: str, limit: int, label: str) -> bytes | None:
        """The bytes of the regular file ``name`` of the exchange folder, at
        most ``limit`` of them; None when there is no such file."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError:
            raise StudentCodeError(
                f"`{label}`'s answer is not a file the grader may read (a link or a "
                f"special file was put in its place).") from None
        with os.fdopen(fd, "rb") as handle:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise StudentCodeError(
                    f"`{label}`'s answer is not a regular file (something else was put "
                    f"in its place).")
            if found.st_size > limit:
                raise StudentCodeError(
                    f"`{label}` returned {found.st_size // 2**20} MiB of data; the tests "
                    f"expect small results (arrays, numbers).")
            return handle.read(limit + 1)[:limit + 1]
