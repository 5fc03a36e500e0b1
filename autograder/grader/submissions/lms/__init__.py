"""The LMS naming rules: which student a file belongs to, read from its path.

Student id rules (``lab_id="lab1"``, ``notebook_stem="lab1_attention"``);
paths are relative to the folder or zip given:

1. A file in the top folder: the file stem.
   ``alice.ipynb`` -> ``alice``; ``s1234567.ipynb`` -> ``s1234567``.
   Browser/Colab duplicate markers are removed first, so that
   ``alice (1).ipynb`` and ``alice.ipynb`` are the same student ``alice``
   (which one is graded: see choice.py). The content is not checked here: a top-level
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
   participant are one student. Moodle 4.1+ writes the folder without the
   last ``_``; with "Download submissions in folders" off, each file is
   ``<full name>_<participant id>_assignsubmission_file_<file name>`` in the
   top folder, the same student.
5. Gradescope export: folder ``submission_<n>``. When a
   ``submission_metadata.yml`` is present (read with PyYAML's safe loader,
   see ``parse_gradescope_metadata``), the id is the submitter's ``:sid:``,
   else the local part of their ``:email:``:
   ``submission_98765/lab1_attention.ipynb`` -> ``123456`` (sid in the
   metadata) or ``submission_98765`` (no metadata, or metadata that cannot
   be read: then with a note saying why). Every other submitter of a group
   submission is a partner (``Group.members``): Term gives each the group's
   row, as Gradescope gives every member the score.
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
   students whose ids come out equal (or equal but for case) get ``-2``,
   ``-3``..., the name that is the id exactly keeping it, and the id an
   earlier run gave kept (``assign_ids``, OUT/ids.json):
   ``jane_doe.ipynb`` -> ``jane_doe`` and ``jane doe.ipynb`` -> ``jane_doe-2``
   whatever their order, with a note naming both. A name that is not UTF-8
   gives its id from what is left (``ren\\xe9e.ipynb`` -> ``rene``), with a note.

Noise is ignored: ``__MACOSX/``, ``.ipynb_checkpoints/`` and any other path
part starting with ``.``, ``__pycache__/``, ``submission_metadata.yml``,
``Thumbs.db``, ``desktop.ini`` and Office lock files (``~$...``).

Resubmissions: the LMS names a later upload whose name the student's
files already have, and that order is kept on the Candidate (choice.py
grades the later one, the same whatever the zip's times say):

- Moodle (``file_storage::get_unused_filename``, lib/filestorage/
  file_storage.php, used by the file picker's "Rename" when a file of that
  name is in the draft area): ``lab1_attention.ipynb``, then
  ``lab1_attention (1).ipynb``, ``lab1_attention (2).ipynb``: the name
  before the last ``.`` without a final `` (N)``, then `` (N+1)`` for the
  highest N there;
- Canvas (``Attachment.make_unique_filename``, app/models/attachment.rb):
  ``lab1_attention-1.ipynb``, ``-2``...; and the attachment id in Canvas's
  entry name (``<name>_<user id>_<attachment id>_<file>``) grows with each
  upload.

A ``.zip`` the student uploaded is opened (archives.nested_entries) and
each notebook in it is a Candidate, named by its path inside (with a note
saying so); a zip that cannot be opened, holds no notebook or only another
zip stays one Candidate whose problem says why.

The package: this module applies the rules 1-6 (:func:`group_entries`);
files.py holds what a file's name says (:func:`classify`, the LMS's
numbers, a student's zip opened), ids.py the ids of rule 7
(:func:`assign_ids`) and gradescope.py Gradescope's metadata read. Every
name other modules use is imported from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.grader.submissions.archives import Entry
from autograder.grader.submissions.identity import Identity
from autograder.grader.submissions.lms.files import (LAB_NOTEBOOK, LMS_NAMING,
                                                     MAX_NESTED_NOTEBOOKS, NOT_A_NOTEBOOK,
                                                     OTHER_LAB, OTHER_NOTEBOOK, Candidate,
                                                     _lab_number, _looks_like_lab_notebook,
                                                     _normal, _strip_markers, canvas_number,
                                                     classify, is_noise, moodle_number,
                                                     split_ext, unzip)
from autograder.grader.submissions.lms.gradescope import (GradescopeSubmission,
                                                          parse_gradescope_metadata,
                                                          parse_gradescope_submissions)
from autograder.grader.submissions.lms.ids import assign_ids, sanitize_id, unique_ids

__all__ = [
    "LAB_NOTEBOOK", "OTHER_NOTEBOOK", "OTHER_LAB", "NOT_A_NOTEBOOK", "LMS_NAMING",
    "MAX_METADATA_BYTES", "MAX_NESTED_NOTEBOOKS", "Candidate", "Group", "GradescopeSubmission",
    "assign_ids", "canvas_number", "classify", "gradescope_metadata", "group_entries",
    "is_noise", "moodle_number", "parse_gradescope_metadata", "parse_gradescope_submissions",
    "sanitize_id", "split_ext", "unique_ids", "unzip",
]

_METADATA_NAME = "submission_metadata.yml"
#: Gradescope's metadata larger than this is not parsed (its ids fall back to
#: the submission folders, with a note). An export of 3,000 students with
#: autograder output is a few MB, parsed in a second or so by libyaml
#: (docs/performance.md, "Why the code is shaped this way").
MAX_METADATA_BYTES = 20 * 1024 * 1024

_CANVAS = re.compile(
    r"^(?P<name>[^_/]+)_(?P<late>(?i:late)_)?(?P<uid>\d+)_(?P<sub>\d+)_(?P<orig>.+)$"
)
_MOODLE = re.compile(
    r"^(?P<name>.+)_(?P<pid>\d+)_assignsubmission_[a-z]+_?$", re.IGNORECASE
)
#: Moodle's download with "Download submissions in folders" off: one flat file
#: per submitted file, ``<full name>_<participant id>_assignsubmission_file_<name>``
#: (mod/assign/classes/downloader.php, Moodle 4.1+; locallib.php before).
_MOODLE_FLAT = re.compile(
    r"^(?P<name>.+?)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<orig>.+)$",
    re.IGNORECASE)
_GRADESCOPE = re.compile(r"^submission_\d+$")


@dataclass
class Group:
    """One student's files, before one is chosen (choice.py)."""

    key: tuple
    raw_id: str
    fallback: str
    identity: Identity | None = None
    candidates: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Gradescope's ``:created_at:`` of each of its submission folders:
    #: folder -> (time as written, where from).
    times: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Canvas wrote LATE in a file name.
    marked_late: bool = False
    #: The other members of a Gradescope group submission (the first
    #: submitter is ``identity``), in Gradescope's order.
    members: list[Identity] = field(default_factory=list)

    @property
    def id_key(self) -> str:
        """A stable text of what the download calls this student (OUT/ids.json's key)."""
        return "/".join(str(part) for part in self.key)

    def note(self, text: str) -> None:
        """Add ``text`` to the notes unless it is there already."""
        if text not in self.notes:
            self.notes.append(text)


def group_entries(entries: list[Entry], lab_id: str, notebook_stem: str) -> list[Group]:
    """The entries that are not noise, grouped by student (rules 1-6), in sorted order."""
    metadata, metadata_problem = gradescope_metadata(entries)
    files = [e for e in entries if not is_noise(e.parts)]
    depth = _wrapper_depth(files, notebook_stem)
    groups: dict[tuple, Group] = {}
    rules = _Rules(groups, metadata, metadata_problem, lab_id, notebook_stem)
    for entry in sorted(files, key=lambda e: e.source_name):
        rules.assign(entry, entry.parts[depth:])
    for group in groups.values():
        if any("\ufffd" in c.entry.source_name for c in group.candidates):
            group.notes.append("a file name has bytes that are not UTF-8 (shown as \ufffd); "
                               "the id is made from the rest of the name")
    return list(groups.values())


def gradescope_metadata(entries: list[Entry]) -> tuple[dict[str, GradescopeSubmission], str]:
    """Gradescope's submission -> student map from the shallowest metadata file.

    Returns the map and why the file could not be read ("" when it could,
    or when there is none): a metadata file that is too large or malformed
    leaves the submission folders' names as ids, with that note.
    """
    found = [e for e in entries if e.parts and e.parts[-1].lower() == _METADATA_NAME]
    if not found:
        return {}, ""
    entry = min(found, key=lambda e: (len(e.parts), e.source_name))
    where = f"Gradescope's {entry.source_name!r} could not be read"
    fallback = "the ids are the submission folders' names"
    if entry.size > MAX_METADATA_BYTES:
        return {}, (f"{where} ({entry.size:,} bytes, more than the {MAX_METADATA_BYTES:,} "
                    f"parsed); {fallback}")
    data = entry.data()
    if data is None:
        return {}, (f"{where} ({entry.problem}); {fallback}" if entry.problem else "")
    if not data:
        return {}, ""
    try:
        return parse_gradescope_submissions(data.decode("utf-8", errors="replace")), ""
    except ValueError as error:
        return {}, f"{where}: {error}; {fallback}"


# -- folders (rule 6) ----------------------------------------------------------


def _wrapper_depth(files: list[Entry], notebook_stem: str) -> int:
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


def _student_like_children(files: list[Entry], level: int, notebook_stem: str) -> int:
    """How many entries at ``level`` look like one student's submission."""
    students = set()
    for entry in files:
        child = entry.parts[level]
        if len(entry.parts) == level + 1:  # a file
            stem, ext, _ = split_ext(child)
            if ext == ".ipynb" and not _looks_like_lab_notebook(child, notebook_stem):
                students.add(child)
            elif ext == ".zip" and _lab_number(stem) is None \
                    and _normal(stem) != _normal(notebook_stem):
                students.add(child)  # alice.zip: a student's zip, named as the student
            elif _CANVAS.match(child) or _MOODLE_FLAT.match(child):
                students.add(child)
        elif _MOODLE.match(child) or _GRADESCOPE.match(child):
            students.add(child)
        elif _lab_number(child) is None and _normal(child) != _normal(notebook_stem):
            if split_ext(entry.parts[-1])[1] == ".ipynb":
                students.add(child)
    return len(students)


# -- assigning a file to its student (rules 1-5) --------------------------------


@dataclass
class _Rules:
    """The rules 1-5, applied to one listing: puts each file in its student's group."""

    groups: dict[tuple, Group]
    metadata: dict[str, GradescopeSubmission]
    metadata_problem: str
    lab_id: str
    notebook_stem: str

    def assign(self, entry: Entry, parts: tuple[str, ...]) -> None:
        """Put ``entry`` (at ``parts`` below the wrapping folders) in its student's group."""
        if len(parts) == 1:
            if not self._canvas(entry, parts[0]) and not self._moodle_flat(entry, parts[0]):
                self._top_file(entry, parts[0])
        else:
            self._in_folder(entry, parts[0], parts[-1])

    def _group(self, key: tuple, raw_id: str, name: str, identity: Identity) -> Group:
        if key not in self.groups:
            self.groups[key] = Group(key, raw_id, split_ext(name)[0], identity)
        return self.groups[key]

    def _add(self, group: Group, entry: Entry, name: str, named_by_student: bool,
             lms: str = "", upload_id: int = 0) -> None:
        """Add ``entry`` (the student's file ``name``) to ``group``: a zip's
        notebooks, each in its own right (``unzip``), or the file."""
        candidate = classify(entry, name, self.lab_id, self.notebook_stem, named_by_student)
        if lms:
            folder = "/".join(entry.parts[:-1])
            family, number = (moodle_number if lms == "moodle" else canvas_number)(name)
            candidate.lms, candidate.number, candidate.upload_id = lms, number, upload_id
            candidate.family = f"{folder}/{family}"
        if candidate.kind == NOT_A_NOTEBOOK and split_ext(name)[1] == ".zip" \
                and not entry.problem:
            group.candidates.extend(unzip(candidate, name, self.lab_id, self.notebook_stem))
        else:
            group.candidates.append(candidate)

    def _canvas(self, entry: Entry, name: str) -> bool:
        """Rule 2: a Canvas bulk-download name; False when ``name`` is not one."""
        canvas = _CANVAS.match(name)
        if not canvas:
            return False
        group = self._group(("canvas", canvas["name"], canvas["uid"]),
                            f"{canvas['name']}_{canvas['uid']}", name,
                            Identity("canvas", canvas["name"], canvas["uid"],
                                     submission_id=canvas["sub"]))
        if canvas["late"]:
            group.marked_late = True
            group.note("submitted late (Canvas: LATE)")
        self._add(group, entry, canvas["orig"], named_by_student=True, lms="canvas",
                  upload_id=int(canvas["sub"]))
        return True

    def _moodle_flat(self, entry: Entry, name: str) -> bool:
        """Rule 4, flat: a Moodle download without folders; False when ``name`` is not one."""
        moodle = _MOODLE_FLAT.match(name)
        if not moodle:
            return False
        group = self._group(("moodle", moodle["name"], moodle["pid"]),
                            f"{moodle['name']}_{moodle['pid']}", moodle["orig"],
                            Identity("moodle", moodle["name"], moodle["pid"],
                                     submission_id=f"{moodle['name']}_{moodle['pid']}"))
        self._add(group, entry, moodle["orig"], named_by_student=True, lms="moodle")
        return True

    def _top_file(self, entry: Entry, name: str) -> None:
        """Rule 1: a file in the top folder is the student of its stem."""
        base, _ = _strip_markers(split_ext(name)[0], dash_number=False)
        group = self._group(("file", base), base, name, Identity("file", base))
        if _looks_like_lab_notebook(name, self.notebook_stem):
            group.note(f"the file name {name!r} looks like a lab notebook, not a student id; "
                       f"used {base!r} as the student id")
        self._add(group, entry, name, named_by_student=False)

    def _in_folder(self, entry: Entry, folder: str, name: str) -> None:
        """Rules 3-5: a file below a folder is the student of that folder."""
        moodle = _MOODLE.match(folder)
        if moodle:
            group = self._group(("moodle", moodle["name"], moodle["pid"]),
                                f"{moodle['name']}_{moodle['pid']}", name,
                                Identity("moodle", moodle["name"], moodle["pid"],
                                         submission_id=folder))
        elif _GRADESCOPE.match(folder) and folder in self.metadata:
            found = self.metadata[folder]
            group = self._group(("gradescope", found.student_id), found.student_id, name,
                                Identity("gradescope", found.name, found.sid, found.email,
                                         folder))
            group.note(f"Gradescope {folder}")
            if found.others and not group.members:
                group.members = [Identity("gradescope", name, sid, email, folder)
                                 for name, sid, email in found.others]
            if found.created_at:
                group.times[folder] = (found.created_at, f"Gradescope metadata ({folder})")
        else:
            group = self._group(("folder", folder), folder, name, Identity("folder", folder))
            if _GRADESCOPE.match(folder) and self.metadata_problem:
                group.note(self.metadata_problem)
        self._add(group, entry, name, named_by_student=True,
                  lms="moodle" if moodle else "")
