"""Reading a folder or a zip of submissions: bounded, lazy, never extracted.

Nothing is extracted to disk: a zip is read member by member, so a member
named ``../../x.ipynb`` or ``/etc/x.ipynb`` is only a name here. Nothing is
kept in memory either: an :class:`Entry` (and the Submission made from it)
says where its file is, and its content is read (at most MAX_FILE_BYTES)
each time it is asked for, so that a batch holds at most one file in memory
per process, however many students and however compressed the zip. A zip
whose members would unpack to more than MAX_ARCHIVE_BYTES, or that has more
than MAX_ARCHIVE_MEMBERS members, is refused as a whole (it is not a class
download; a zip bomb is).

File names are bytes-safe: a name that is not UTF-8 (an archive made on
another system, unzipped here) is shown with U+FFFD for each byte that is
not (:func:`display`), and the file is still read through its real name.
Symbolic links, FIFOs and devices are listed (so their student gets a row
saying why) but never opened.

A zip a student uploaded (``lab1.zip`` holding the lab's notebook) is
listed by :func:`nested_entries`, under the same limits as a class
download (MAX_ARCHIVE_MEMBERS, MAX_ARCHIVE_BYTES, MAX_FILE_BYTES a file),
and its files are read through it (origin ``("nested", <the zip's origin>,
member_index)``); a zip inside it is listed, never opened.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import io
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

#: Files larger than this are not read (zip-bomb and runaway-output guard).
MAX_FILE_BYTES = 50 * 1024 * 1024
#: A zip whose readable members would unpack to more than this is refused.
MAX_ARCHIVE_BYTES = 2 * 1024 * 1024 * 1024
#: A zip with more members than this is refused (a class download of 3,000
#: students, each with a few files, stays well below).
MAX_ARCHIVE_MEMBERS = 20_000


class TooLarge(Exception):
    """A file turned out larger than MAX_FILE_BYTES while it was read."""


@dataclass
class Entry:
    """A file found under the folder or zip given, before it is assigned to a student.

    Attributes:
        source_name: its path relative to the folder or zip, ``/`` separated,
            U+FFFD for bytes that are not UTF-8.
        parts: the path's components without "", ".", ".." or a drive letter.
        size: bytes, as the file system or the zip header says.
        mtime: seconds since the epoch (the zip's date for a member).
        reader: reads the content (at most MAX_FILE_BYTES); None when it is
            not to be read (too large, a link, not a regular file).
        problem: why it cannot be read ("" when it can).
        origin: where a Submission reads it again (see ``read_origin``).
    """

    source_name: str
    parts: tuple[str, ...]
    size: int
    mtime: float
    reader: Callable[[], bytes] | None
    problem: str = ""
    origin: tuple | None = None

    def data(self) -> bytes | None:
        """The content, read now and not kept; sets ``problem`` when it cannot be read."""
        if self.reader is None or self.problem:
            return None
        try:
            return self.reader()
        except TooLarge:
            self.problem = too_large_problem()
        except Exception as error:  # noqa: BLE001 - becomes a problem
            self.problem = f"could not read the file: {type(error).__name__}: {error}"
        return None

    def is_empty(self) -> bool:
        """True for a file of no bytes or of white space only (read when small)."""
        if self.problem:
            return False
        if self.size == 0:
            return True
        if self.size <= 4096:
            data = self.data()
            return data is not None and not data.strip()
        return False


@contextlib.contextmanager
def open_entries(path: Path) -> Iterator[list[Entry]]:
    """The entries of the folder or zip ``path``, readable inside the ``with``.

    Raises:
        ValueError: ``path`` does not exist, is neither a folder nor a zip, is
            a broken zip, or a zip past MAX_ARCHIVE_MEMBERS or MAX_ARCHIVE_BYTES.
    """
    if not path.exists():
        raise ValueError(
            f"Submissions not found: {str(path)!r} does not exist. Expected a "
            "folder of notebooks or a .zip of them (e.g. the LMS bulk download); "
            "check the path."
        )
    if path.is_dir():
        yield folder_entries(path.resolve())
        return
    if not (path.is_file() and (path.suffix.lower() == ".zip" or zipfile.is_zipfile(path))):
        raise ValueError(
            f"Cannot read submissions from {str(path)!r}: it is neither a folder nor a "
            "zip file. Expected a folder of notebooks or a .zip of them; to grade a "
            "single notebook, put it in a folder (named <student_id>.ipynb) and pass "
            "the folder."
        )
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise ValueError(
            f"Cannot read submissions from {str(path)!r}: not a valid zip file "
            f"({type(error).__name__}: {error}). Expected a .zip of notebooks; "
            "download it again, or unzip it yourself and pass the folder."
        ) from None
    with archive:
        check_archive(archive, path)
        yield zip_entries(archive, path.resolve())


def display(name: str) -> str:
    """``name`` as text: U+FFFD for each byte of a file name that is not UTF-8."""
    try:
        return os.fsencode(name).decode("utf-8", errors="replace")
    except UnicodeError:
        return re.sub(r"[\ud800-\udfff]", "\ufffd", name)


def too_large_problem(size: int | None = None) -> str:
    """The problem of a file past MAX_FILE_BYTES (``size`` when it is known)."""
    shown = f"{size / 1024 / 1024:.0f} MB; " if size else ""
    return (
        f"file too large ({shown}the limit is {MAX_FILE_BYTES // (1024 * 1024)} MB); "
        "not read. Clear the notebook's outputs and submit it again."
    )


def read_origin(origin: tuple) -> bytes:
    """The content at a Submission's ``origin``, at most MAX_FILE_BYTES.

    ``origin`` is ``("file", path)``, ``("zip", zip_path, member_index)`` or
    ``("nested", origin, member_index)`` (a member of the zip a student
    uploaded, itself at ``origin``): plain values, so that it travels to a worker process, which opens the zip
    once (``_archive``) and reads each member it is given from it.
    """
    if origin[0] == "file":
        return _read_limited(lambda: _open_regular(origin[1]))
    if origin[0] == "nested":
        _, outer, index = origin
        return _read_limited(lambda: _member(read_origin(outer), index))
    _, zip_path, index = origin
    info = os.stat(zip_path)
    archive = _archive(zip_path, info.st_mtime_ns, info.st_size)
    return _read_limited(lambda: archive.open(archive.infolist()[index]))


def entry_reader(open_file) -> Callable[[], bytes]:
    """A reader that raises TooLarge past MAX_FILE_BYTES, whatever the header said."""
    return lambda: _read_limited(open_file)


def _read_limited(open_file) -> bytes:
    with open_file() as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise TooLarge()
    return data


def _open_regular(path: str):
    """``path`` opened for reading if it is still a regular file (not a link, FIFO...)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{display(path)!r} is no longer a regular file")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


@functools.lru_cache(maxsize=1)
def _archive(path: str, mtime_ns: int, size: int) -> zipfile.ZipFile:
    """The zip at ``path``, opened once per process (a class has one)."""
    return zipfile.ZipFile(path)


def clean_parts(name: str) -> tuple[str, ...]:
    """Path components of ``name`` without "", ".", ".." or a drive letter."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if parts and re.fullmatch(r"[A-Za-z]:", parts[0]):
        parts = parts[1:]
    return tuple(parts)


# -- folders -------------------------------------------------------------------


def folder_entries(root: Path) -> list[Entry]:
    """Every regular file under ``root`` (symlinks are not followed)."""
    entries = []
    for directory, subdirs, files in os.walk(root, followlinks=False):
        subdirs.sort()
        for name in sorted(files):
            full = Path(directory) / name
            source = display(full.relative_to(root).as_posix())
            try:
                info = os.lstat(full)
            except OSError as error:
                entries.append(Entry(source, clean_parts(source), 0, 0.0, None,
                                     f"could not read the file: {error}"))
                continue
            entries.append(_folder_entry(full, source, info))
        for name in list(subdirs):  # a symlinked folder is a file-like entry
            full = Path(directory) / name
            if full.is_symlink():
                source = display(full.relative_to(root).as_posix())
                entries.append(Entry(source, clean_parts(source), 0, 0.0, None,
                                     "symbolic link; not followed"))
    return entries


def _folder_entry(full: Path, source: str, info: os.stat_result) -> Entry:
    parts = clean_parts(source)
    if stat.S_ISLNK(info.st_mode):
        return Entry(source, parts, 0, info.st_mtime, None, "symbolic link; not followed")
    if not stat.S_ISREG(info.st_mode):
        return Entry(source, parts, 0, info.st_mtime, None, "not a regular file; not read")
    if info.st_size > MAX_FILE_BYTES:
        return Entry(source, parts, info.st_size, info.st_mtime, None,
                     too_large_problem(info.st_size))
    origin = ("file", str(full))
    return Entry(source, parts, info.st_size, info.st_mtime,
                 entry_reader(lambda: _open_regular(str(full))), origin=origin)


# -- zips ----------------------------------------------------------------------


def check_archive(archive: zipfile.ZipFile, path: Path) -> None:
    """Refuse a zip with too many members, or whose members unpack to too much.

    Only what would be read counts: members within MAX_FILE_BYTES (larger
    ones are refused one by one, in their student's row). The sizes are
    the headers' and hold: the zip module never unpacks more than a
    member's header says.
    """
    members, total = _archive_sizes(archive)
    if members > MAX_ARCHIVE_MEMBERS:
        raise ValueError(
            f"Cannot read submissions from {display(str(path))!r}: it has {members:,} "
            f"files, more than the {MAX_ARCHIVE_MEMBERS:,} a class download has (a zip bomb?). "
            "Check the zip; if it is right, unzip it yourself and pass the folder."
        )
    if total > MAX_ARCHIVE_BYTES:
        raise ValueError(
            f"Cannot read submissions from {display(str(path))!r}: its files would unpack to "
            f"{total / 1024 ** 3:.1f} GiB from a {path.stat().st_size / 1024 ** 2:.1f} MiB zip, "
            f"more than the limit of {MAX_ARCHIVE_BYTES / 1024 ** 3:.0f} GiB (a zip bomb?). "
            "Check the zip; if it is right, unzip it yourself and pass the folder "
            "(each file is then read on its own, up to "
            f"{MAX_FILE_BYTES // (1024 * 1024)} MB)."
        )


def _archive_sizes(archive: zipfile.ZipFile) -> tuple[int, int]:
    """(files, bytes they unpack to) of ``archive``, by its headers: only the
    files within MAX_FILE_BYTES count in the bytes (larger ones are never read)."""
    members = [info for info in archive.infolist() if not info.is_dir()]
    return len(members), sum(info.file_size for info in members
                             if info.file_size <= MAX_FILE_BYTES)


def nested_entries(entry: Entry) -> tuple[list[Entry], str]:
    """The files of the zip a student uploaded (``entry``), or [] and why not.

    The zip is read (at most MAX_FILE_BYTES, as any file) and listed under
    the limits of a class download (check_archive's: MAX_ARCHIVE_MEMBERS
    files, MAX_ARCHIVE_BYTES unpacked, a file past MAX_FILE_BYTES listed
    but not read); nothing is extracted or kept: each file is read from the
    zip again when asked. A file's path is the zip's path, ``/``, and its
    path inside (``alice/lab1.zip/lab1/lab1_attention.ipynb``); its time is
    the zip's (when the student uploaded it, as far as the download says),
    never the time the student's own machine wrote inside. Why not: a
    sentence to follow "the zip ..." ("cannot be opened: BadZipFile: ...").
    """
    data = entry.data()
    outer = entry.reader
    if data is None or outer is None:
        return [], f"could not be read ({entry.problem or 'not read'})"
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as error:
        return [], f"cannot be opened ({type(error).__name__}: {error}): it is damaged or not a zip"
    with archive:
        members, total = _archive_sizes(archive)
        if members > MAX_ARCHIVE_MEMBERS:
            return [], (f"has {members:,} files, more than the {MAX_ARCHIVE_MEMBERS:,} a "
                        f"download may have (a zip bomb?): not opened")
        if total > MAX_ARCHIVE_BYTES:
            return [], (f"would unpack to {total / 1024 ** 3:.1f} GiB, more than the limit of "
                        f"{MAX_ARCHIVE_BYTES / 1024 ** 3:.0f} GiB (a zip bomb?): not opened")
        entries = []
        for index, info in enumerate(archive.infolist()):
            if info.is_dir():
                continue
            inner = _zip_name(info)
            source = f"{entry.source_name}/{inner}"
            parts = entry.parts + clean_parts(inner)
            if info.flag_bits & 0x1:
                entries.append(Entry(source, parts, info.file_size, entry.mtime, None,
                                     "the file is password-protected inside the zip: not "
                                     "read; upload the .ipynb itself, not in a zip"))
                continue
            if info.file_size > MAX_FILE_BYTES:
                entries.append(Entry(source, parts, info.file_size, entry.mtime, None,
                                     too_large_problem(info.file_size)))
                continue
            reader = entry_reader(lambda index=index: _member(outer(), index))
            origin = ("nested", entry.origin, index) if entry.origin is not None else None
            entries.append(Entry(source, parts, info.file_size, entry.mtime, reader,
                                 origin=origin))
    return entries, ""


@contextlib.contextmanager
def _member(data: bytes, index: int):
    """The ``index``-th member of the zip ``data``, open for reading."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive, \
            archive.open(archive.infolist()[index]) as handle:
        yield handle


def root_origin(origin: tuple | None) -> tuple | None:
    """The origin of the file in the download that holds ``origin``: itself,
    or for a file inside a zip a student uploaded, that zip's."""
    while origin is not None and origin[0] == "nested":
        origin = origin[1]
    return origin


def zip_entries(archive: zipfile.ZipFile, path: Path | None = None) -> list[Entry]:
    """The members of ``archive`` (the zip at ``path``, where Submissions read them)."""
    entries = []
    for index, info in enumerate(archive.infolist()):
        if info.is_dir():
            continue
        source = _zip_name(info)
        parts = clean_parts(source)
        mtime = _zip_mtime(info)
        if info.file_size > MAX_FILE_BYTES:
            entries.append(Entry(source, parts, info.file_size, mtime, None,
                                 too_large_problem(info.file_size)))
            continue
        reader = entry_reader(lambda info=info: archive.open(info))
        origin = ("zip", str(path), index) if path is not None else None
        entries.append(Entry(source, parts, info.file_size, mtime, reader, origin=origin))
    return entries


def _zip_name(info: zipfile.ZipInfo) -> str:
    """The member name, repaired when a UTF-8 name was stored as cp437."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            name = name.encode("cp437").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    return name


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    try:
        return datetime.datetime(*info.date_time).timestamp()
    except (ValueError, OverflowError, OSError):
        return 0.0
