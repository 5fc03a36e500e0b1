"""Find the submissions in a folder or a zip, and the student each belongs to.

``collect_submissions(path, lab_id, notebook_stem)`` returns one
:class:`Submission` per student: never none for a student who uploaded
something (a ``.py``, an empty file, another lab's notebook all give a
Submission whose ``problem`` says why it cannot be graded), never two.

Nothing is extracted to disk: a zip is read member by member, so a member
named ``../../x.ipynb`` or ``/etc/x.ipynb`` is only a name here. Nothing is
kept in memory either: a Submission says where its file is, and its content
is read (at most MAX_FILE_BYTES) each time it is asked for, so that a batch
holds at most one file in memory per process, however many students and
however compressed the zip. A zip whose members would unpack to more than
MAX_ARCHIVE_BYTES, or that has more than MAX_ARCHIVE_MEMBERS members, is
refused as a whole (it is not a class download; a zip bomb is).

File names are bytes-safe: a name that is not UTF-8 (an archive made on
another system, unzipped here) is shown with U+FFFD for each byte that is
not, its student id is made from what is left (``ren\\xe9e.ipynb`` ->
``rene``), and it is still read through its real name.

Student id rules (``lab_id="lab1"``, ``notebook_stem="lab1_attention"``);
paths are relative to the folder or zip given:

1. A file in the top folder: the file stem.
   ``alice.ipynb`` -> ``alice``; ``s1234567.ipynb`` -> ``s1234567``.
   Browser/Colab duplicate markers are removed first, so that
   ``alice (1).ipynb`` and ``alice.ipynb`` are the same student ``alice``
   (which one is graded: see the end). The content is not checked here: a top-level
   ``lab2_multihead_attention.ipynb`` is the student ``lab2_multihead_attention``
   (with a note that the name looks like a lab notebook, not a student id).
2. Canvas bulk download (top folder):
   ``<name>_<userid>_<submissionid>_<original file name>``, optionally with
   ``LATE_`` before the user id -> ``<name>_<userid>``.
   ``doejane_12345_6789_lab1_attention.ipynb`` -> ``doejane_12345``;
   ``doejane_LATE_12345_6789_Copy of lab1_attention.ipynb`` -> ``doejane_12345``
   (note: submitted late). The original file name (``lab1_attention-1.ipynb``
   after a resubmission) is checked like a file in a student folder (rule 3).
3. Any file below a folder: the top-most folder below ``path``.
   ``alice/lab1_attention.ipynb`` -> ``alice``;
   ``alice/lab1/lab1_attention.ipynb`` -> ``alice``;
   ``alice/Copy of lab1_attention.ipynb``, ``alice/lab1_attention (1).ipynb``,
   ``alice/Copy of Copy of lab1_attention.ipynb`` -> ``alice``.
   Another lab's notebook (``alice/lab2_multihead_attention.ipynb`` while
   grading lab1) is still ``alice``'s Submission, with the problem
   "this looks like lab2's notebook (lab2_multihead_attention.ipynb), not lab1's".
4. Moodle assignment download: folder
   ``<full name>_<participant id>_assignsubmission_<plugin>_`` ->
   ``<full name>_<participant id>``, sanitized:
   ``Jane Doe_123456_assignsubmission_file_/lab1_attention.ipynb`` ->
   ``Jane_Doe_123456``. The ``file`` and ``onlinetext`` folders of one
   participant are one student.
5. Gradescope export: folder ``submission_<n>``. When a
   ``submission_metadata.yml`` is present (it is parsed by hand), the id is the
   submitter's ``:sid:``, else the local part of their ``:email:``:
   ``submission_98765/lab1_attention.ipynb`` -> ``123456`` (sid in the
   metadata) or ``submission_98765`` (no metadata).
6. A single wrapping folder is looked through: when everything is inside one
   folder that holds several student entries (``export/alice.ipynb``,
   ``export/bob.ipynb``; Gradescope's ``assignment_1_export/submission_1/...``),
   the ids come from the level below it: ``alice``, ``bob``. A folder that
   itself holds the lab notebook (``alice/lab1_attention.ipynb``) is a
   student folder, never a wrapper.
7. Ids are sanitized to ``[A-Za-z0-9_.-]``: accents are removed, white space
   becomes ``_``, other characters are dropped, leading/trailing ``._-`` are
   stripped: ``José María.ipynb`` -> ``Jose_Maria``. An id that would be empty
   falls back to the sanitized file stem, then to ``student``. Two different
   students whose ids come out equal get ``-2``, ``-3``...:
   ``jane doe.ipynb`` -> ``jane_doe`` and ``jane_doe.ipynb`` -> ``jane_doe-2``
   (in sorted order of their file names).

Noise is ignored: ``__MACOSX/``, ``.ipynb_checkpoints/`` and any other path
part starting with ``.``, ``__pycache__/``, ``submission_metadata.yml``,
``Thumbs.db``, ``desktop.ini`` and Office lock files (``~$...``).

When a student has several files, the one graded is chosen by content
first, then by name: a file without a problem before one with a problem; the
notebook with the most of this lab's exercises answered (an answer cell, or
a cell defining the exercise, that no longer raises NotImplementedError);
a notebook named like the lab notebook (exact or a "Copy of"/"(1)"
duplicate) before another notebook; the newest (file or zip mtime); the
fewest duplicate markers; the first by name. So a newer ``alice (1).ipynb``
that is the blank notebook, or another lab's, does not replace alice's
work. Grading every file and keeping the best is not done: it would reward
uploading many guesses (and cost a grading per file). Which file was graded
and why is said in ``note`` (remarks for the instructor, in the student's
row of grades.csv), never in ``problem`` (reasons that stop grading).
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_FILE_BYTES",
    "Submission",
    "collect_submissions",
    "parse_gradescope_metadata",
    "sanitize_id",
]

#: Files larger than this are not read (zip-bomb and runaway-output guard).
MAX_FILE_BYTES = 50 * 1024 * 1024
#: A zip whose readable members would unpack to more than this is refused.
MAX_ARCHIVE_BYTES = 2 * 1024 * 1024 * 1024
#: A zip with more members than this is refused (a class download of 3,000
#: students, each with a few files, stays well below).
MAX_ARCHIVE_MEMBERS = 20_000

_NOISE_PARTS = {"__macosx", "__pycache__"}
_NOISE_FILES = {"submission_metadata.yml", "thumbs.db", "desktop.ini"}
_METADATA_NAME = "submission_metadata.yml"
_MAX_ID_LENGTH = 100
_MAX_LISTED = 5

_CANVAS = re.compile(
    r"^(?P<name>[^_/]+)_(?P<late>(?i:late)_)?(?P<uid>\d+)_(?P<sub>\d+)_(?P<orig>.+)$"
)
_MOODLE = re.compile(
    r"^(?P<name>.+)_(?P<pid>\d+)_assignsubmission_[a-z]+_?$", re.IGNORECASE
)
_GRADESCOPE = re.compile(r"^submission_\d+$")
_LAB_NUMBER = re.compile(r"^lab[ _-]?0*(\d+)(?!\d)", re.IGNORECASE)

# Duplicate markers added by browsers, Colab, Windows and macOS.
_PREFIX_MARKERS = [re.compile(r"^copy[ _]of[ _]+", re.IGNORECASE)]
_SUFFIX_MARKERS = [
    re.compile(r"\s*\(\d+\)$"),  # "lab1_attention (1)"
    re.compile(r"\s+-\s+copy(\s*\(\d+\))?$", re.IGNORECASE),  # Windows
    re.compile(r"\s+copy(\s+\d+)?$", re.IGNORECASE),  # macOS
]
_DASH_NUMBER = re.compile(r"-\d+$")  # Canvas resubmission: "lab1_attention-1"

# Browsers sometimes append an extension to a downloaded notebook.
_RENAMED_NOTEBOOK = (".ipynb.txt", ".ipynb.json")


@dataclass
class Submission:
    """One student's file, chosen for grading.

    Attributes:
        student_id: sanitized, unique id (see the module docstring).
        source_name: the file's path relative to the folder or zip given,
            with ``/`` separators, as found there (U+FFFD for bytes of the
            name that are not UTF-8).
        origin: where the content is read from: ``("file", path)`` or
            ``("zip", zip_path, member_index)``; None when it is not read
            (too large, not a regular file). Plain values, so that a
            Submission travels to a worker process without its content.
        problem: "" when the file can be graded, else why not ("empty file",
            "not a notebook: .py uploaded; expected a .ipynb", ...).
        note: remarks for the instructor that do not stop grading (which
            file was graded and why, late submission...).
    """

    student_id: str
    source_name: str
    origin: tuple | None
    problem: str = ""
    note: str = ""

    def read(self) -> tuple[bytes | None, str]:
        """The content (read now, never kept), or None and why it cannot be read."""
        if self.origin is None:
            return None, self.problem or "not read"
        try:
            return _read_origin(self.origin), ""
        except _TooLarge:
            return None, _too_large_problem()
        except Exception as error:  # noqa: BLE001 - becomes the student's status
            return None, f"could not read the file: {type(error).__name__}: {error}"

    @property
    def data(self) -> bytes | None:
        """The content, or None when it cannot be read (see ``read``)."""
        return self.read()[0]


@dataclass
class _Entry:
    """A file found under ``path``, before it is assigned to a student."""

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
        except _TooLarge:
            self.problem = _too_large_problem()
        except Exception as error:  # noqa: BLE001 - becomes a problem
            self.problem = f"could not read the file: {type(error).__name__}: {error}"
        return None

    def is_empty(self) -> bool:
        if self.problem:
            return False
        if self.size == 0:
            return True
        if self.size <= 4096:
            data = self.data()
            return data is not None and not data.strip()
        return False


@dataclass
class _Candidate:
    """An entry with what its name says about it."""

    entry: _Entry
    kind: int  # 0 lab notebook, 1 other notebook, 2 other lab, 3 not a notebook
    markers: int
    problem: str
    note: str


@dataclass
class _Group:
    key: tuple
    raw_id: str
    fallback: str
    candidates: list[_Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: this lab's exercises, to rank several notebooks by their answers
    exercises: tuple[str, ...] = ()


# --------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------


def collect_submissions(path, lab_id: str, notebook_stem: str) -> list[Submission]:
    """One Submission per student found in the folder or zip ``path``.

    Args:
        path: a folder, or a ``.zip`` file, of submissions.
        lab_id: the lab being graded, e.g. ``"lab1"``.
        notebook_stem: the lab notebook's file stem, e.g. ``"lab1_attention"``.

    Returns:
        Submissions sorted by student id (empty when nothing was found).

    Raises:
        ValueError: ``path`` does not exist, is neither a folder nor a zip, is
            a broken zip, or a zip past MAX_ARCHIVE_MEMBERS or MAX_ARCHIVE_BYTES.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(
            f"Submissions not found: {str(path)!r} does not exist. Expected a "
            "folder of notebooks or a .zip of them (e.g. the LMS bulk download); "
            "check the path."
        )
    if path.is_dir():
        return _collect(_folder_entries(path.resolve()), lab_id, notebook_stem)
    if path.is_file() and (path.suffix.lower() == ".zip" or zipfile.is_zipfile(path)):
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as error:
            raise ValueError(
                f"Cannot read submissions from {str(path)!r}: not a valid zip file "
                f"({type(error).__name__}: {error}). Expected a .zip of notebooks; "
                "download it again, or unzip it yourself and pass the folder."
            ) from None
        with archive:
            _check_archive(archive, path)
            return _collect(_zip_entries(archive, path.resolve()), lab_id, notebook_stem)
    raise ValueError(
        f"Cannot read submissions from {str(path)!r}: it is neither a folder nor a "
        "zip file. Expected a folder of notebooks or a .zip of them; to grade a "
        "single notebook, put it in a folder (named <student_id>.ipynb) and pass "
        "the folder."
    )


def sanitize_id(raw: str) -> str:
    """``raw`` reduced to ``[A-Za-z0-9_.-]`` ("" when nothing is left).

    >>> sanitize_id("José María")
    'Jose_Maria'
    """
    text = unicodedata.normalize("NFKD", raw).strip()
    text = re.sub(r"\s+", "_", text)
    text = re.sub(r"[^A-Za-z0-9_.-]", "", text)
    return text.strip("._-")[:_MAX_ID_LENGTH].strip("._-")


def parse_gradescope_metadata(text: str) -> dict[str, str]:
    """Map ``submission_<n>`` to a student id from Gradescope's metadata.

    Reads only what is needed from ``submission_metadata.yml`` (no YAML
    library): the first ``:sid:`` of each submission block, else the local
    part of its first ``:email:``. Blocks without either are left out::

        submission_98765:
          :submitters:
          - :name: Jane Doe
            :sid: '123456'
            :email: jane@example.com

    gives ``{"submission_98765": "123456"}``.
    """
    found: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        header = re.match(r"^:?(submission_\d+):\s*$", line)
        if header:
            current = found.setdefault(header.group(1), {})
            continue
        if line.strip() and not line[0].isspace() and not line.startswith("-"):
            current = None  # another top-level key
            continue
        field_match = re.match(r"^[\s-]*:(sid|email):\s*(.*?)\s*$", line)
        if current is not None and field_match:
            value = field_match.group(2).strip().strip("'\"").strip()
            if value:
                current.setdefault(field_match.group(1), value)
    mapping = {}
    for key, fields in found.items():
        if fields.get("sid"):
            mapping[key] = fields["sid"]
        elif fields.get("email"):
            mapping[key] = fields["email"].split("@")[0]
    return mapping


# --------------------------------------------------------------------------
# Reading folders and zips
# --------------------------------------------------------------------------


def _clean_parts(name: str) -> tuple[str, ...]:
    """Path components of ``name`` without "", ".", ".." or a drive letter."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if parts and re.fullmatch(r"[A-Za-z]:", parts[0]):
        parts = parts[1:]
    return tuple(parts)


def _is_noise(parts: tuple[str, ...]) -> bool:
    if not parts:
        return True
    for part in parts:
        if part.startswith(".") or part.lower() in _NOISE_PARTS:
            return True
    base = parts[-1]
    return base.lower() in _NOISE_FILES or base.startswith("~$")


def _read_limited(open_file) -> bytes:
    with open_file() as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _TooLarge()
    return data


def _open_regular(path: str):
    """``path`` opened for reading if it is still a regular file (not a link, FIFO...)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{_display(path)!r} is no longer a regular file")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


@functools.lru_cache(maxsize=1)
def _archive(path: str, mtime_ns: int, size: int) -> zipfile.ZipFile:
    """The zip at ``path``, opened once per process (a class has one)."""
    return zipfile.ZipFile(path)


def _read_origin(origin: tuple) -> bytes:
    """The content at a Submission's ``origin``, at most MAX_FILE_BYTES."""
    if origin[0] == "file":
        return _read_limited(lambda: _open_regular(origin[1]))
    _, zip_path, index = origin
    info = os.stat(zip_path)
    archive = _archive(zip_path, info.st_mtime_ns, info.st_size)
    return _read_limited(lambda: archive.open(archive.infolist()[index]))


def _check_archive(archive: zipfile.ZipFile, path: Path) -> None:
    """Refuse a zip with too many members, or whose members unpack to too much.

    Only what would be read counts: members within MAX_FILE_BYTES (larger
    ones are refused one by one, in their student's row). The sizes are
    the headers' and hold: the zip module never unpacks more than a
    member's header says.
    """
    members = [info for info in archive.infolist() if not info.is_dir()]
    if len(members) > MAX_ARCHIVE_MEMBERS:
        raise ValueError(
            f"Cannot read submissions from {_display(str(path))!r}: it has {len(members):,} "
            f"files, more than the {MAX_ARCHIVE_MEMBERS:,} a class download has (a zip bomb?). "
            "Check the zip; if it is right, unzip it yourself and pass the folder."
        )
    total = sum(info.file_size for info in members if info.file_size <= MAX_FILE_BYTES)
    if total > MAX_ARCHIVE_BYTES:
        raise ValueError(
            f"Cannot read submissions from {_display(str(path))!r}: its files would unpack to "
            f"{total / 1024 ** 3:.1f} GiB from a {path.stat().st_size / 1024 ** 2:.1f} MiB zip, "
            f"more than the limit of {MAX_ARCHIVE_BYTES / 1024 ** 3:.0f} GiB (a zip bomb?). "
            "Check the zip; if it is right, unzip it yourself and pass the folder "
            "(each file is then read on its own, up to "
            f"{MAX_FILE_BYTES // (1024 * 1024)} MB)."
        )


def _display(name: str) -> str:
    """``name`` as text: U+FFFD for each byte of a file name that is not UTF-8."""
    try:
        return os.fsencode(name).decode("utf-8", errors="replace")
    except UnicodeError:
        return re.sub(r"[\ud800-\udfff]", "\ufffd", name)


class _TooLarge(Exception):
    pass


def _too_large_problem(size: int | None = None) -> str:
    shown = f"{size / 1024 / 1024:.0f} MB; " if size else ""
    return (
        f"file too large ({shown}the limit is {MAX_FILE_BYTES // (1024 * 1024)} MB); "
        "not read. Clear the notebook's outputs and submit it again."
    )


def _entry_reader(open_file) -> Callable[[], bytes]:
    """A reader that raises _TooLarge past MAX_FILE_BYTES, whatever the header said."""
    return lambda: _read_limited(open_file)


def _folder_entries(root: Path) -> list[_Entry]:
    """Every regular file under ``root`` (symlinks are not followed)."""
    entries = []
    for directory, subdirs, files in os.walk(root, followlinks=False):
        subdirs.sort()
        for name in sorted(files):
            full = Path(directory) / name
            source = _display(full.relative_to(root).as_posix())
            try:
                info = os.lstat(full)
            except OSError as error:
                entries.append(_Entry(source, _clean_parts(source), 0, 0.0, None,
                                      f"could not read the file: {error}"))
                continue
            entries.append(_folder_entry(full, source, info))
        for name in list(subdirs):  # a symlinked folder is a file-like entry
            full = Path(directory) / name
            if full.is_symlink():
                source = _display(full.relative_to(root).as_posix())
                entries.append(_Entry(source, _clean_parts(source), 0, 0.0, None,
                                      "symbolic link; not followed"))
    return entries


def _folder_entry(full: Path, source: str, info: os.stat_result) -> _Entry:
    parts = _clean_parts(source)
    if stat.S_ISLNK(info.st_mode):
        return _Entry(source, parts, 0, info.st_mtime, None, "symbolic link; not followed")
    if not stat.S_ISREG(info.st_mode):
        return _Entry(source, parts, 0, info.st_mtime, None, "not a regular file; not read")
    if info.st_size > MAX_FILE_BYTES:
        return _Entry(source, parts, info.st_size, info.st_mtime, None,
                      _too_large_problem(info.st_size))
    origin = ("file", str(full))
    return _Entry(source, parts, info.st_size, info.st_mtime,
                  _entry_reader(lambda: _open_regular(str(full))), origin=origin)


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


def _zip_entries(archive: zipfile.ZipFile, path: Path | None = None) -> list[_Entry]:
    """The members of ``archive`` (the zip at ``path``, where Submissions read them)."""
    entries = []
    for index, info in enumerate(archive.infolist()):
        if info.is_dir():
            continue
        source = _zip_name(info)
        parts = _clean_parts(source)
        mtime = _zip_mtime(info)
        if info.file_size > MAX_FILE_BYTES:
            entries.append(_Entry(source, parts, info.file_size, mtime, None,
                                  _too_large_problem(info.file_size)))
            continue
        reader = _entry_reader(lambda info=info: archive.open(info))
        origin = ("zip", str(path), index) if path is not None else None
        entries.append(_Entry(source, parts, info.file_size, mtime, reader, origin=origin))
    return entries


# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------


def _split_ext(name: str) -> tuple[str, str, bool]:
    """(stem, lower-case extension, renamed) of a file name.

    ``renamed`` is True for a notebook the browser renamed (``x.ipynb.txt``).
    """
    lower = name.lower()
    for suffix in _RENAMED_NOTEBOOK:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], ".ipynb", True
    stem, ext = os.path.splitext(name)
    if not stem:  # ".ipynb" alone
        return name, "", False
    return stem, ext.lower(), False


def _strip_markers(stem: str, dash_number: bool) -> tuple[str, int]:
    """``stem`` without duplicate markers, and how many were removed.

    ``Copy of Copy of lab1_attention (1)`` -> (``lab1_attention``, 3).
    ``dash_number`` also removes a final ``-1`` (Canvas resubmissions).
    """
    count = 0
    changed = True
    while changed:
        changed = False
        patterns = _PREFIX_MARKERS + _SUFFIX_MARKERS + ([_DASH_NUMBER] if dash_number else [])
        for pattern in patterns:
            new = pattern.sub("", stem, count=1).strip()
            if new and new != stem:
                stem, count, changed = new, count + 1, True
    return stem, count


def _normal(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def _lab_number(text: str) -> str | None:
    match = _LAB_NUMBER.match(text.strip())
    return match.group(1) if match else None


def _looks_like_lab_notebook(name: str, notebook_stem: str) -> bool:
    """Is ``name`` a lab notebook's file name (this lab's or another's)?"""
    stem, ext, _ = _split_ext(name)
    if ext != ".ipynb":
        return False
    base, _ = _strip_markers(stem, dash_number=True)
    return _normal(base) == _normal(notebook_stem) or _lab_number(base) is not None


def _not_a_notebook(ext: str) -> str:
    what = f"{ext} uploaded" if ext else "a file without extension uploaded"
    return (
        f"not a notebook: {what}; expected a .ipynb "
        "(in Jupyter or Colab: File > Download > Download .ipynb)"
    )


def _classify(entry: _Entry, name: str, lab_id: str, notebook_stem: str,
              named_by_student: bool) -> _Candidate:
    """What the file name ``name`` says about ``entry``.

    ``named_by_student``: the name is the student's own file name (inside a
    student folder, or Canvas's original name), so it should be the lab's.
    """
    stem, ext, renamed = _split_ext(name)
    notes = [f"{name!r} was renamed by the browser; graded as a .ipynb"] if renamed else []
    if ext != ".ipynb":
        return _Candidate(entry, 3, 0, _not_a_notebook(ext), "")
    base, markers = _strip_markers(stem, dash_number=named_by_student)
    kind, problem = 1, ""
    if _normal(base) == _normal(notebook_stem):
        kind = 0
    elif named_by_student:
        theirs, ours = _lab_number(base), _lab_number(lab_id)
        if theirs is not None and ours is not None and theirs != ours:
            kind = 2
            problem = (
                f"this looks like lab{theirs}'s notebook ({name}), not {lab_id}'s"
            )
    return _Candidate(entry, kind, markers, problem, "; ".join(notes))


# --------------------------------------------------------------------------
# From entries to students
# --------------------------------------------------------------------------


def _collect(entries: list[_Entry], lab_id: str, notebook_stem: str) -> list[Submission]:
    from autograder.labs import LABS

    metadata = _gradescope_metadata(entries)
    files = [e for e in entries if not _is_noise(e.parts)]
    depth = _wrapper_depth(files, notebook_stem)
    groups: dict[tuple, _Group] = {}
    for entry in sorted(files, key=lambda e: e.source_name):
        _assign(entry, entry.parts[depth:], groups, metadata, lab_id, notebook_stem)
    exercises = LABS[lab_id].exercises if lab_id in LABS else ()
    for group in groups.values():
        group.exercises = exercises
        if any("\ufffd" in c.entry.source_name for c in group.candidates):
            group.notes.append("a file name has bytes that are not UTF-8 (shown as \ufffd); "
                               "the id is made from the rest of the name")
    submissions = [_choose(group) for group in groups.values()]
    _make_unique(submissions, list(groups.values()))
    return sorted(submissions, key=lambda s: s.student_id)


def _gradescope_metadata(entries: list[_Entry]) -> dict[str, str]:
    """Gradescope's submission -> student map from the shallowest metadata file."""
    found = [e for e in entries if e.parts and e.parts[-1].lower() == _METADATA_NAME]
    if not found:
        return {}
    data = min(found, key=lambda e: (len(e.parts), e.source_name)).data()
    if not data:
        return {}
    return parse_gradescope_metadata(data.decode("utf-8", errors="replace"))


def _wrapper_depth(files: list[_Entry], notebook_stem: str) -> int:
    """How many single wrapping folders to look through (rule 6)."""
    depth = 0
    while True:
        if not files or any(len(e.parts) <= depth + 1 for e in files):
            return depth
        tops = {e.parts[depth] for e in files}
        if len(tops) != 1:
            return depth
        root = tops.pop()
        if _MOODLE.match(root) or _GRADESCOPE.match(root):
            return depth
        if any(len(e.parts) == depth + 2 and _looks_like_lab_notebook(e.parts[-1], notebook_stem)
               for e in files):
            return depth  # the root holds the lab notebook: a student folder
        if _student_like_children(files, depth + 1, notebook_stem) < 2:
            return depth
        depth += 1


def _student_like_children(files: list[_Entry], level: int, notebook_stem: str) -> int:
    """How many entries at ``level`` look like one student's submission."""
    students = set()
    for entry in files:
        child = entry.parts[level]
        if len(entry.parts) == level + 1:  # a file
            stem, ext, _ = _split_ext(child)
            if ext == ".ipynb" and not _looks_like_lab_notebook(child, notebook_stem):
                students.add(child)
            elif _CANVAS.match(child):
                students.add(child)
        elif _MOODLE.match(child) or _GRADESCOPE.match(child):
            students.add(child)
        elif _lab_number(child) is None and _normal(child) != _normal(notebook_stem):
            if _split_ext(entry.parts[-1])[1] == ".ipynb":
                students.add(child)
    return len(students)


def _group(groups: dict, key: tuple, raw_id: str, fallback: str) -> _Group:
    if key not in groups:
        groups[key] = _Group(key, raw_id, fallback)
    return groups[key]


def _assign(entry: _Entry, parts: tuple[str, ...], groups: dict, metadata: dict,
            lab_id: str, notebook_stem: str) -> None:
    """Put ``entry`` in its student's group (rules 1-5)."""
    name = parts[-1]
    fallback = _split_ext(name)[0]
    if len(parts) == 1:
        canvas = _CANVAS.match(name)
        if canvas:
            raw = f"{canvas['name']}_{canvas['uid']}"
            group = _group(groups, ("canvas", canvas["name"], canvas["uid"]), raw, fallback)
            if canvas["late"] and "submitted late (Canvas: LATE)" not in group.notes:
                group.notes.append("submitted late (Canvas: LATE)")
            group.candidates.append(
                _classify(entry, canvas["orig"], lab_id, notebook_stem, named_by_student=True)
            )
            return
        stem, _, _ = _split_ext(name)
        base, _ = _strip_markers(stem, dash_number=False)
        group = _group(groups, ("file", base), base, fallback)
        if _looks_like_lab_notebook(name, notebook_stem):
            note = (f"the file name {name!r} looks like a lab notebook, not a student id; "
                    f"used {base!r} as the student id")
            if note not in group.notes:
                group.notes.append(note)
        group.candidates.append(
            _classify(entry, name, lab_id, notebook_stem, named_by_student=False)
        )
        return
    folder = parts[0]
    moodle = _MOODLE.match(folder)
    if moodle:
        raw = f"{moodle['name']}_{moodle['pid']}"
        group = _group(groups, ("moodle", moodle["name"], moodle["pid"]), raw, fallback)
    elif _GRADESCOPE.match(folder) and folder in metadata:
        group = _group(groups, ("gradescope", metadata[folder]), metadata[folder], fallback)
        note = f"Gradescope {folder}"
        if note not in group.notes:
            group.notes.append(note)
    else:
        group = _group(groups, ("folder", folder), folder, fallback)
    group.candidates.append(_classify(entry, name, lab_id, notebook_stem, named_by_student=True))


def _problem_of(candidate: _Candidate) -> str:
    """The candidate's problem, reading it when needed to see it is empty."""
    entry = candidate.entry
    if entry.problem:
        return entry.problem
    if entry.is_empty():
        return f"empty file ({entry.size} bytes): nothing to grade"
    return candidate.problem


def _answered(data: bytes | None, exercises: tuple[str, ...]) -> int:
    """How many of ``exercises`` the notebook ``data`` answers; -1 if it is no notebook.

    An exercise is answered by a code cell that is its answer cell (by
    nbgrader's grade_id) or defines it (``def softmax``), and no longer
    raises NotImplementedError as the blank notebook does. Only the
    structure is read: a damaged notebook counts what can be seen.
    """
    try:
        cells = json.loads(data)["cells"]
    except Exception:  # noqa: BLE001 - anything unreadable is not a notebook
        return -1
    if not isinstance(cells, list):
        return -1
    found = set()
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(map(str, source)) if isinstance(source, list) else str(source)
        if "NotImplementedError" in source:
            continue
        metadata = cell.get("metadata")
        nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        for exercise in exercises:
            if grade_id == exercise or re.search(
                    rf"^(?:def|class)\s+{re.escape(exercise)}\b", source, re.MULTILINE):
                found.add(exercise)
    return len(found)


def _choose(group: _Group) -> Submission:
    """The submission graded for one student, and notes on the others.

    Several notebooks without a problem are read (one at a time, none
    kept) to count their answers; a single file is not read here.
    """
    problems = {id(c): _problem_of(c) for c in group.candidates}
    readable = [c for c in group.candidates if not problems[id(c)] and c.kind < 2]
    answers = {id(c): _answered(c.entry.data(), group.exercises) if len(readable) > 1 else 0
               for c in readable}

    def rank(c: _Candidate):
        return (bool(problems[id(c)]), -answers.get(id(c), -1), c.kind, -c.entry.mtime,
                c.markers, c.entry.source_name)

    ordered = sorted(group.candidates, key=rank)
    best = ordered[0]
    problem = best.entry.problem or problems[id(best)]
    notes = list(group.notes)
    if best.note:
        notes.append(best.note)
    if len(ordered) > 1:
        notes.append(_choice_note(best, ordered[1:], problems, answers, len(group.exercises)))
    return Submission(
        student_id="",  # set by _make_unique
        source_name=best.entry.source_name,
        origin=None if best.entry.problem else best.entry.origin,
        problem=problem,
        note="; ".join(notes),
    )


def _choice_note(best: _Candidate, others: list[_Candidate], problems: dict,
                 answers: dict, exercises: int) -> str:
    runner = others[0]
    mine, theirs = answers.get(id(best), -1), answers.get(id(runner), -1)
    if problems[id(runner)] and not problems[id(best)]:
        why = "the only one without a problem"
    elif id(runner) in answers and mine != theirs:
        why = (f"the most exercises answered: {mine} of {exercises}, against "
               f"{max(theirs, 0)} in {runner.entry.source_name!r}")
    elif runner.kind != best.kind:
        why = "named like the lab notebook" if best.kind == 0 else "a notebook"
    elif runner.entry.mtime != best.entry.mtime:
        why = "the newest"
    else:
        why = "the closest name to the lab notebook"
    names = [repr(c.entry.source_name) for c in others[:_MAX_LISTED]]
    if len(others) > _MAX_LISTED:
        names.append(f"and {len(others) - _MAX_LISTED} more")
    return (f"{len(others) + 1} files for this student: graded {best.entry.source_name!r} "
            f"({why}); ignored {', '.join(names)}")


def _make_unique(submissions: list[Submission], groups: list[_Group]) -> None:
    """Set sanitized, unique student ids (``-2``, ``-3``... on clashes)."""
    wanted = []
    for submission, group in zip(submissions, groups):
        base = sanitize_id(group.raw_id) or sanitize_id(group.fallback) or "student"
        wanted.append((base, submission.source_name, submission))
    taken = {base for base, _, _ in wanted}
    used: set[str] = set()
    for base, _, submission in sorted(wanted, key=lambda w: (w[0], w[1])):
        student_id = base
        number = 2
        while student_id in used or (student_id != base and student_id in taken):
            student_id = f"{base}-{number}"
            number += 1
        used.add(student_id)
        submission.student_id = student_id
