"""What a file's name says, for the LMS naming rules
(autograder.grader.submissions.lms): the kind of file it is
(:class:`Candidate`: the lab's notebook, another notebook, another lab's,
not a notebook), the duplicate markers that browsers and Colab add, the
upload order in Moodle's and Canvas's names, the noise every download
holds, and the notebooks of a ``.zip`` the student uploaded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from autograder.grader.submissions.archives import Entry, nested_entries

_NOISE_PARTS = {"__macosx", "__pycache__"}
_NOISE_FILES = {"submission_metadata.yml", "thumbs.db", "desktop.ini"}
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

#: What a Candidate is, best first (choice.py ranks by it).
LAB_NOTEBOOK, OTHER_NOTEBOOK, OTHER_LAB, NOT_A_NOTEBOOK = range(4)

#: Moodle's numbered name: file_storage::get_unused_filename matches the name
#: before its last "." with ``~^(.+) \(([0-9]+)\)$~``.
_MOODLE_NUMBER = re.compile(r"^(.+) \(([0-9]+)\)$")
#: Canvas's extension (Attachment.make_unique_filename):
#: ``filename[/(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$/]``.
_CANVAS_EXT = re.compile(r"(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$")
#: A student's zip with more notebooks than this is no one student's upload.
MAX_NESTED_NOTEBOOKS = 10
#: The LMSs whose naming orders a student's uploads (choice.py).
LMS_NAMING = {"moodle": "Moodle", "canvas": "Canvas"}


@dataclass
class Candidate:
    """An entry with what its name says about it.

    ``lms``, ``family``, ``number`` and ``upload_id`` are the upload order
    the LMS's naming gives ("" and 0 outside a Moodle or Canvas download):
    of two files of one ``family`` (the name without the LMS's number), the
    higher ``number`` was uploaded later; Canvas's ``upload_id`` (the
    attachment id) grows with every upload.
    """

    entry: Entry
    kind: int  # LAB_NOTEBOOK, OTHER_NOTEBOOK, OTHER_LAB or NOT_A_NOTEBOOK
    markers: int  # duplicate markers removed from its name ("Copy of", "(1)")
    problem: str
    note: str
    lms: str = ""
    family: str = ""
    number: int = 0
    upload_id: int = 0
    #: The student's own name of the file (Canvas's and Moodle's flat names
    #: without their prefix; "lab1.zip/lab1/x.ipynb" inside the student's zip).
    name: str = ""


def moodle_number(name: str) -> tuple[str, int]:
    r"""(the name without Moodle's number, the number): ``"a (2).ipynb"`` ->
    ``("a.ipynb", 2)``; ``(name, 0)`` when it has none.

    The inverse of ``file_storage::get_unused_filename``: PHP's
    ``pathinfo($filename)['filename']`` (before the last ".") matched by
    ``~^(.+) \(([0-9]+)\)$~``; the new name is ``$basename . ' (' . $number
    . ')' . '.' . $extension``.
    """
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    match = _MOODLE_NUMBER.match(stem)
    if not match:
        return name, 0
    return match[1] + (f".{ext}" if dot else ""), int(match[2])


def canvas_number(name: str) -> tuple[str, int]:
    r"""(the name without Canvas's number, the number): ``"a-1.ipynb"`` ->
    ``("a.ipynb", 1)``; ``(name, 0)`` when it has none.

    The inverse of ``Attachment.make_unique_filename``: the extension is
    ``filename[/(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$/] || ""``, the
    new name ``"#{basename}-#{addition}#{extname}"``.
    """
    found = _CANVAS_EXT.search(name)
    ext = found.group(0) if found else ""
    base = name[: len(name) - len(ext)] if ext else name
    match = re.match(r"^(.+)-([0-9]+)$", base)
    if not match:
        return name, 0
    return match[1] + ext, int(match[2])


def is_noise(parts: tuple[str, ...]) -> bool:
    """Is the path ``parts`` an OS's, an editor's or an LMS's file, not the student's?"""
    if not parts:
        return True
    for part in parts:
        if part.startswith(".") or part.lower() in _NOISE_PARTS:
            return True
    base = parts[-1]
    return base.lower() in _NOISE_FILES or base.startswith("~$")


# -- file names ----------------------------------------------------------------


def split_ext(name: str) -> tuple[str, str, bool]:
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
    patterns = _PREFIX_MARKERS + _SUFFIX_MARKERS + ([_DASH_NUMBER] if dash_number else [])
    while changed:
        changed = False
        for pattern in patterns:
            removed = pattern.sub("", stem, count=1)
            # Only a marker counts: white space alone around a name is the
            # name's (" alice" is not "alice"'s duplicate; lms.assign_ids).
            if removed != stem and removed.strip():
                stem, count, changed = removed.strip(), count + 1, True
    return stem, count


def _normal(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def _lab_number(text: str) -> str | None:
    match = _LAB_NUMBER.match(text.strip())
    return match.group(1) if match else None


def _looks_like_lab_notebook(name: str, notebook_stem: str) -> bool:
    """Is ``name`` a lab notebook's file name (this lab's or another's)?"""
    stem, ext, _ = split_ext(name)
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


def classify(entry: Entry, name: str, lab_id: str, notebook_stem: str,
             named_by_student: bool) -> Candidate:
    """What the file name ``name`` says about ``entry``.

    ``named_by_student``: the name is the student's own file name (inside a
    student folder, or Canvas's original name), so it should be the lab's.
    """
    stem, ext, renamed = split_ext(name)
    note = f"{name!r} was renamed by the browser; graded as a .ipynb" if renamed else ""
    if ext != ".ipynb":
        return Candidate(entry, NOT_A_NOTEBOOK, 0, _not_a_notebook(ext), "", name=name)
    base, markers = _strip_markers(stem, dash_number=named_by_student)
    kind, problem = OTHER_NOTEBOOK, ""
    if _normal(base) == _normal(notebook_stem):
        kind = LAB_NOTEBOOK
    elif named_by_student:
        theirs, ours = _lab_number(base), _lab_number(lab_id)
        if theirs is not None and ours is not None and theirs != ours:
            kind = OTHER_LAB
            problem = f"this looks like lab{theirs}'s notebook ({name}), not {lab_id}'s"
    return Candidate(entry, kind, markers, problem, note, name=name)


# -- a zip the student uploaded ---------------------------------------------------


def unzip(candidate: Candidate, name: str, lab_id: str, notebook_stem: str) -> list[Candidate]:
    """The notebooks in the zip a student uploaded, each a Candidate; else
    ``[candidate]`` (the zip) with a problem saying why none is graded.

    Noise inside (``__MACOSX/``, ``.ipynb_checkpoints/``...) is ignored as
    in a download. Each notebook keeps the zip's upload order (its LMS
    number) and says in its note that it was graded from inside the zip;
    a zip inside the zip is never opened (said in the note, or the problem
    when it is all there is). A zip of more than MAX_NESTED_NOTEBOOKS
    notebooks is no student's upload: not graded, with the reason.
    """
    zip_entry = candidate.entry
    fix = (f"upload {notebook_stem}.ipynb itself, not in a zip (in Jupyter or Colab: "
           f"File > Download > Download .ipynb)")
    entries, problem = nested_entries(zip_entry)
    if problem:
        candidate.problem = f"not a notebook: the zip {name!r} {problem}; {fix}"
        return [candidate]
    depth = len(zip_entry.parts)
    files = [e for e in entries if not is_noise(e.parts[depth:])]
    inside = ["/".join(e.parts[depth:]) for e in files]
    zips = [path for path in inside if split_ext(path)[1] == ".zip"]
    notebooks = [e for e in files if split_ext(e.parts[-1])[1] == ".ipynb"]
    if not notebooks:
        held = ", ".join(repr(path) for path in inside[:_MAX_SHOWN]) + (
            f" and {len(inside) - _MAX_SHOWN} more" if len(inside) > _MAX_SHOWN else "")
        if zips and len(zips) == len(inside):
            why = f"holds only another zip ({held}): a zip inside a zip is not opened"
        elif inside:
            why = f"holds no notebook (it holds {held})"
        else:
            why = "is empty"
        candidate.problem = f"not a notebook: the zip {name!r} {why}; {fix}"
        return [candidate]
    if len(notebooks) > MAX_NESTED_NOTEBOOKS:
        candidate.problem = (
            f"not graded: the zip {name!r} holds {len(notebooks)} notebooks, more than the "
            f"{MAX_NESTED_NOTEBOOKS} one student's upload may hold; {fix}. (A class download "
            f"is given to the grader itself as the submissions, not inside a folder.)")
        return [candidate]
    skipped = (f"; {', '.join(repr(z) for z in zips[:_MAX_SHOWN])} inside it (a zip inside a "
               f"zip) not opened" if zips else "")
    found = []
    for entry in notebooks:
        path = "/".join(entry.parts[depth:])
        inner = classify(entry, entry.parts[-1], lab_id, notebook_stem, named_by_student=True)
        inner.lms, inner.family = candidate.lms, candidate.family
        inner.number, inner.upload_id = candidate.number, candidate.upload_id
        inner.name = f"{name}/{path}"
        inner.note = "; ".join(filter(None, [
            inner.note, f"graded {path!r} from inside the student's zip {name!r}{skipped}"]))
        found.append(inner)
    return found


_MAX_SHOWN = 5
