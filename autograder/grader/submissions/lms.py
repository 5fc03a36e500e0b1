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
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field

import yaml

from autograder.grader.submissions.archives import Entry, nested_entries
from autograder.grader.submissions.identity import Identity

_NOISE_PARTS = {"__macosx", "__pycache__"}
_NOISE_FILES = {"submission_metadata.yml", "thumbs.db", "desktop.ini"}
_METADATA_NAME = "submission_metadata.yml"
#: Gradescope's metadata larger than this is not parsed (its ids fall back to
#: the submission folders, with a note). An export of 3,000 students with
#: autograder output is about 7 MB, parsed in about 1 s by libyaml.
MAX_METADATA_BYTES = 20 * 1024 * 1024
_MAX_ID_LENGTH = 100

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
_GRADESCOPE_KEY = re.compile(r"^:?(submission_\d+)$")
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


def is_noise(parts: tuple[str, ...]) -> bool:
    """Is the path ``parts`` an OS's, an editor's or an LMS's file, not the student's?"""
    if not parts:
        return True
    for part in parts:
        if part.startswith(".") or part.lower() in _NOISE_PARTS:
            return True
    base = parts[-1]
    return base.lower() in _NOISE_FILES or base.startswith("~$")


# -- ids (rule 7) --------------------------------------------------------------


def sanitize_id(raw: str) -> str:
    """``raw`` reduced to ``[A-Za-z0-9_.-]`` ("" when nothing is left).

    >>> sanitize_id("José María")
    'Jose_Maria'
    """
    text = unicodedata.normalize("NFKD", raw).strip()
    text = re.sub(r"\s+", "_", text)
    text = re.sub(r"[^A-Za-z0-9_.-]", "", text)
    return text.strip("._-")[:_MAX_ID_LENGTH].strip("._-")


def unique_ids(wanted: list[tuple[str, str, str]]) -> list[str]:
    """Sanitized, unique ids for ``(raw_id, fallback, source_name)``, in that order.

    ``assign_ids`` without remembered ids, giving the ids only.
    """
    return assign_ids(wanted)[0]


def assign_ids(wanted: list[tuple[str, str, str]], keys: list[str] | None = None,
               remembered: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Sanitized, unique ids for ``(raw_id, fallback, source_name)``, and notes on clashes.

    The id is ``raw_id`` sanitized, else ``fallback`` sanitized, else
    ``student``. When several come out equal, one keeps it and the others
    get ``-2``, ``-3``... (never another student's id), in this order:

    1. a name that is the id exactly (``alice.ipynb`` is ``alice`` before
       ``!alice.ipynb`` or ``alice .ipynb``, whatever the sort order), and
       had it in the run before (or is new);
    2. the id ``remembered[key]`` an earlier run gave the same entry
       (``keys[i]``: a stable text of the entry, see ``Group.id_key``), so
       that a rerun keeps every id, and the overrides and extensions
       written against it; but a name that only cleans to an id gives it
       up to a name that is that id exactly;
    3. a name that is the id exactly (a case variant: ``Alice`` beside
       ``alice``, ids that clash too);
    4. the lower-case id before other cases, then the sorted order of
       (id, source_name).

    Every clash is a note for the instructor, naming each file and the id
    it got: two files are never silently given one person's id.
    """
    keys = keys or [""] * len(wanted)
    remembered = remembered or {}
    bases = [sanitize_id(raw) or sanitize_id(fallback) or "student"
             for raw, fallback, _ in wanted]
    exact = [bool(raw) and sanitize_id(raw) == raw for raw, _, _ in wanted]
    # Ids that differ only in case clash too: one person's "Alice" and "alice"
    # would be one file on a case-insensitive disk, and look alike to a person.
    taken = {base.casefold() for base in bases}
    used: set[str] = set()
    ids = [""] * len(wanted)

    with_exact = {bases[i].casefold() for i in range(len(wanted)) if exact[i]}

    def memory(i: int) -> str | None:
        again = remembered.get(keys[i]) if keys[i] else None
        if again and again.casefold() == bases[i].casefold() and not exact[i] \
                and bases[i].casefold() in with_exact:
            return None  # a name that is exactly the id takes it back
        return again

    def rank(i: int):
        again = memory(i)
        order = (0 if exact[i] and again == bases[i] else 1 if again
                 else 2 if exact[i] else 3)
        # Among case variants, the lower-case id first (logins are).
        return (bases[i].casefold(), order, bases[i] != bases[i].lower(), wanted[i][2])

    for index in sorted(range(len(wanted)), key=rank):
        base = bases[index]
        again = memory(index)
        if again and again.casefold() not in used and (again == base or (
                again.startswith(f"{base}-") and again.casefold() not in taken)):
            student_id = again
        else:
            student_id, number = base, 2
            while student_id.casefold() in used or (
                    student_id != base and student_id.casefold() in taken):
                student_id = f"{base}-{number}"
                number += 1
        used.add(student_id.casefold())
        ids[index] = student_id
    notes = []
    clashing: dict[str, list[int]] = {}
    for index, base in enumerate(bases):
        clashing.setdefault(base.casefold(), []).append(index)
    for indices in clashing.values():
        if len(indices) < 2:
            continue
        indices.sort(key=lambda i: (ids[i] != bases[i], ids[i]))
        base = ids[indices[0]]
        named = ", ".join(f"{wanted[i][2]!r} is {ids[i]!r}"
                          + (" (its name is exactly the id)" if exact[i] else "")
                          + (f" (it was {remembered[keys[i]]!r} in an earlier run)"
                             if keys[i] in remembered and remembered[keys[i]] != ids[i] else "")
                          for i in indices)
        notes.append(f"{len(indices)} files give the id {base!r}: {named}. Check whose each "
                     f"file is; rename a file, or grade with a roster (--roster), to settle it")
    return ids, notes


# -- Gradescope's metadata (rule 5) --------------------------------------------


# The ignore: a base class chosen at import (libyaml's loader when installed).
class _MetadataLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's when there is one), reading ids as written.

    Every scalar but null is text, as written: an unquoted ``:sid: 0012345``
    stays ``0012345`` (the safe loader's YAML 1.1 would read the octal 5349),
    and a malformed date in ``:created_at:`` is no error. A tag the safe
    loader does not know (Ruby's ``!ruby/object:...`` in an export) is read
    as the plain mapping, list or text it tags. Nothing else changes: only
    str, list, dict and None are ever built.
    """


_MetadataLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag == "tag:yaml.org,2002:null"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_untagged(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_MetadataLoader.add_multi_constructor("!", _construct_untagged)


def parse_gradescope_metadata(text: str) -> dict[str, str]:
    """Map ``submission_<n>`` to a student id from Gradescope's metadata.

    ``text`` is ``submission_metadata.yml``, read with PyYAML's safe loader
    (``_MetadataLoader``). The id of a submission is the first submitter's
    ``:sid:`` that is not empty, else the local part of the first ``:email:``
    that is not; submissions without either are left out::

        submission_98765:            # or :submission_98765: (a Ruby symbol)
          :submitters:
          - :name: Jane Doe
            :sid: '123456'
            :email: jane@example.com

    gives ``{"submission_98765": "123456"}``.

    Raises:
        ValueError: ``text`` is not YAML, or not a mapping of submissions;
            the message says where and what was expected.
    """
    return {key: found.student_id for key, found in parse_gradescope_submissions(text).items()}


@dataclass(frozen=True)
class GradescopeSubmission:
    """What Gradescope's metadata says of one ``submission_<n>``: its first
    submitter's id (sid, else the email's local part), sid, email and name,
    and ``:created_at:`` as written ("" when missing)."""

    student_id: str
    sid: str = ""
    email: str = ""
    name: str = ""
    created_at: str = ""
    #: Every submitter after the first, as (name, sid, email): a group
    #: submission's partners, who get its score as Gradescope gives it them.
    others: tuple[tuple[str, str, str], ...] = ()


def parse_gradescope_submissions(text: str) -> dict[str, GradescopeSubmission]:
    """``parse_gradescope_metadata`` with all the kit reads of each submission.

    Raises:
        ValueError: as ``parse_gradescope_metadata``.
    """
    try:
        document = yaml.load(text, Loader=_MetadataLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        raise ValueError(f"not valid YAML ({' '.join(str(error).split())[:300]})") from None
    except RecursionError:
        raise ValueError("not valid YAML (nested too deeply)") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ValueError(f"expected a mapping of submission_<n> to submissions, "
                         f"found a {type(document).__name__}")
    return _gradescope_submissions(document)


def _gradescope_submissions(document: dict) -> dict[str, GradescopeSubmission]:
    found = {}
    for key, block in document.items():
        match = _GRADESCOPE_KEY.match(str(key))
        if not match:
            continue
        submitters = _field(block, "submitters")
        submitters = [s for s in submitters if isinstance(s, dict)] \
            if isinstance(submitters, list) else []
        people = [(_text(_field(s, "name")), _text(_field(s, "sid")), _text(_field(s, "email")))
                  for s in submitters]
        people = [p for p in people if p[1] or p[2]]
        if people:
            # The id is the first sid given, else the first email: that
            # submitter's row holds the submission; the others share it.
            first = next((p for p in people if p[1]), people[0])
            name, sid, email = first
            found[match.group(1)] = GradescopeSubmission(
                sid or email.split("@")[0], sid, email, name,
                _text(_field(block, "created_at")), tuple(p for p in people if p != first))
    return found


def _text(value) -> str:
    return "" if value is None or isinstance(value, (dict, list)) else str(value).strip()


def _first(submitters: list, name: str) -> str:
    """The first submitter's ``name`` field that is not empty ("" when none is)."""
    return next((_text(_field(s, name)) for s in submitters if _text(_field(s, name))), "")


def _field(mapping, name: str):
    """``mapping[":name"]`` (Gradescope writes Ruby symbols), else ``mapping["name"]``."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(f":{name}", mapping.get(name))


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
