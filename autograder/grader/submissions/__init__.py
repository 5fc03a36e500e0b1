"""Find the submissions in a folder or a zip, and the student each belongs to.

``collect_submissions(path, lab_id, notebook_stem)`` returns one
:class:`Submission` per student: never none for a student who uploaded
something (a ``.py``, an empty file, another lab's notebook all give a
Submission whose ``problem`` says why it cannot be graded), never two.

Three steps, one module each:

- archives.py: the folder or zip is listed, bounded (member count, sizes)
  and never extracted; each file is read only when asked, at most
  MAX_FILE_BYTES;
- lms/: the LMS naming rules (Canvas, Moodle, Gradescope, a folder per
  student, a file per student) group the files by student and make the ids,
  keep the order of a student's uploads the LMS's names give (Moodle's
  ``(1)``, Canvas's ``-1``), and open a ``.zip`` the student uploaded;
- choice.py: of a student's files, the one graded is chosen (most answers,
  the lab's name, the newest by the LMS's names or else by the files'
  times...), with a note saying why.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grader.submissions.archives import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_MEMBERS,
    MAX_FILE_BYTES,
    open_entries,
)
from autograder.grader.submissions.choice import Submission, choose
from autograder.grader.submissions.lms import (
    Group,
    assign_ids,
    group_entries,
    parse_gradescope_metadata,
    sanitize_id,
)
from autograder.grader.submissions.identity import Identity

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_FILE_BYTES",
    "Collected",
    "Submission",
    "Unmatched",
    "collect",
    "collect_submissions",
    "parse_gradescope_metadata",
    "sanitize_id",
]


@dataclass
class Unmatched:
    """Files of a download that are not graded as anyone's: listed for the instructor.

    Attributes:
        files: their paths in the folder or zip.
        identity: whose the download says they are.
        reason: why ("matches nobody", "matches 2 students: ...", two
            participants under one name, a name that only cleans to a
            classmate's id).
    """

    files: list[str]
    identity: Identity | None
    reason: str


@dataclass
class Collected:
    """What a folder or zip holds: one Submission per student, files that
    are not graded as anyone's (``unmatched``: with a roster), notes for the
    instructor on the whole download (ids that clash, times that are not
    submission times), and ``held``: enrolled students whose files are listed
    in ``unmatched`` instead of graded (student_id -> why)."""

    submissions: list[Submission]
    unmatched: list[Unmatched] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)


#: Why the times in an LMS's zip are not submission times.
CANVAS_ZIP_TIME = (
    "Canvas's download stamps every file with the time the zip was built, not when it was "
    "submitted (canvas-lms app/models/content_zipper.rb adds each file without a time)")
MOODLE_ZIP_TIME = (
    "Moodle's download stamps a file with when it reached Moodle (a draft upload), not "
    "when it was submitted; the grading worksheet's 'Last modified (submission)' has that")
#: Zip stamps this close together on every file are one stamp (a zip written
#: in one go), not each submission's time.
ONE_STAMP_SECONDS = 120
#: OUT/ids.json: the id each download entry got, kept so that a rerun keeps it.
IDS_FILE = "ids.json"


def collect(path, lab_id: str, notebook_stem: str, roster=None,
            ids_file: Path | None = None) -> Collected:
    """The submissions in ``path``, matched to the ``roster`` when one is given.

    Without a roster, ids come from the download's names (lms/) and clashes
    are settled by ``lms.assign_ids``: a name that is the id exactly first,
    then the id ``ids_file`` (OUT/ids.json) remembers from an earlier run,
    which this run updates. With a roster (autograder.term.roster.Roster),
    every student's files are matched to an enrolled student
    (``Roster.match``) and the id is the roster's ``student_id``. Files of
    two download entries that match one student are merged only when that
    is sure (``_settle``): one LMS participant under two names, or a folder
    and a file both named exactly as the student; two participants under
    one name, or a name that only cleans to a classmate's id, are listed in
    ``unmatched`` instead, never graded as that classmate's. Files that
    match nobody are listed too.

    The other members of a Gradescope group submission are the
    submission's ``partners`` (Term gives each its row). Zip times that
    cannot be submission times are cleared, with ``time_note`` saying why.
    """
    from autograder.labs import LABS

    exercises = LABS[lab_id].exercises if lab_id in LABS else ()
    with open_entries(Path(path)) as entries:
        groups = group_entries(entries, lab_id, notebook_stem)
        if roster is None:
            collected = _by_names(groups, exercises, ids_file)
        else:
            collected = _by_roster(groups, exercises, roster)
    collected.notes.extend(_check_times(collected.submissions, Path(path)))
    collected.submissions.sort(key=lambda s: s.student_id)
    return collected


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
    return collect(path, lab_id, notebook_stem).submissions


def _by_names(groups: list[Group], exercises, ids_file: Path | None) -> Collected:
    """Ids from the download's names; clashes settled and noted; partners by sid."""
    submissions = [choose(group, exercises) for group in groups]
    remembered = _read_ids(ids_file)
    ids, notes = assign_ids([(group.raw_id, group.fallback, submission.source_name)
                             for group, submission in zip(groups, submissions)],
                            [group.id_key for group in groups], remembered)
    for submission, student_id in zip(submissions, ids):
        submission.student_id = student_id
    taken = set(ids)
    for group, submission in zip(groups, submissions):
        for member in group.members:
            member_id = sanitize_id(member.user_id or member.email.split("@")[0])
            who = member.name or member.email or member.user_id
            if member_id in taken:
                notes.append(f"{who} ({member_id}), a member of the group submission "
                             f"{submission.source_name!r}, has a row of their own: not given "
                             f"the group's score")
                continue
            taken.add(member_id)
            submission.partners.append((member_id, member))
    if ids_file is not None:
        remembered.update({group.id_key: student_id for group, student_id in zip(groups, ids)})
        _write_ids(ids_file, remembered)
    return Collected(submissions, notes=notes)


def _by_roster(groups: list[Group], exercises, roster) -> Collected:
    """Every group matched to an enrolled student, merged only where that is sure."""
    collected = Collected([])
    found: dict[str, list[Group]] = {}
    students = {}
    for group in groups:
        student = roster.match(group.identity) if group.identity else None
        if student is None:
            collected.unmatched.append(Unmatched(
                _files(group), group.identity,
                roster.match_reason(group.identity) if group.identity else "no identity"))
            continue
        found.setdefault(student.student_id, []).append(group)
        students[student.student_id] = student
    chosen = []
    for student_id, mine in found.items():
        keep, reason = _settle(students[student_id], mine)
        for group in mine:
            if group not in keep:
                collected.unmatched.append(Unmatched(_files(group), group.identity, reason))
        if not keep:
            collected.held[student_id] = reason
            continue
        into = keep[0]
        for group in keep[1:]:
            into.note(f"the download has this student's files under several names "
                      f"({into.raw_id!r}, {group.raw_id!r}); one is graded")
            into.candidates.extend(group.candidates)
            into.times.update(group.times)
            into.marked_late |= group.marked_late
            for note in group.notes:
                into.note(note)
        submission = choose(into, exercises)
        submission.student_id = student_id
        chosen.append((into, submission))
    graded = {submission.student_id for _, submission in chosen}
    for group, submission in chosen:
        for member in group.members:
            student = roster.match(member)
            who = member.name or member.email or member.user_id
            if student is None:
                collected.unmatched.append(Unmatched(
                    _files(group), member, f"a member of the group submission "
                    f"{submission.source_name!r}: {roster.match_reason(member)}; not given "
                    f"the group's score"))
            elif student.student_id in graded or student.student_id in collected.held:
                collected.notes.append(
                    f"{who} ({student.student_id}), a member of the group submission "
                    f"{submission.source_name!r}, has a submission of their own: graded from "
                    f"it, not given the group's score")
            else:
                graded.add(student.student_id)
                submission.partners.append((student.student_id, member))
        collected.submissions.append(submission)
    return collected


def _settle(student, groups: list[Group]) -> tuple[list[Group], str]:
    """Which of the download entries matched to ``student`` are surely theirs.

    One entry is. Entries that carry different LMS ids (two Moodle
    participants, matched by one full name) are two people: none is. Of
    entries matched by a name, those named exactly as the student (their id,
    login, username, ID number or email) are, and one whose name only cleans
    to it (``!alice``, ``Alice``, ``alice `` beside ``alice``) is not; when
    none is exact and several clean to the student, none is. Returns the
    entries kept and why the others are not ("" when all are kept).
    """
    if len(groups) == 1:
        return groups, ""
    files = "; ".join(f"{g.raw_id!r}: {', '.join(_files(g))}" for g in groups)
    lms_ids = {(g.identity.source, g.identity.user_id) for g in groups
               if g.identity and g.identity.source in ("canvas", "moodle", "gradescope")
               and g.identity.user_id}
    if len(lms_ids) > 1:
        shown = ", ".join(f"{source} {uid}" for source, uid in sorted(lms_ids))
        return [], (f"{len(lms_ids)} different participants of the download ({shown}) match "
                    f"{student.student_id} ({student.name or 'no name'}) by name: two people, "
                    f"never merged, neither graded as {student.student_id}. Grade with a "
                    f"roster that has their LMS ids (Moodle: the assignment's grading "
                    f"worksheet; Canvas: the gradebook export), or move the right file into a "
                    f"folder named {student.student_id}")
    names = {student.student_id, student.email.strip(), student.email.strip().split("@")[0]}
    names |= {value for value in student.lms_ids.values()}
    names.discard("")

    def exact(group: Group) -> bool:
        identity = group.identity
        return identity is not None and (
            identity.source in ("canvas", "moodle", "gradescope") or identity.name in names)

    kept = [g for g in groups if exact(g)]
    if not kept:
        return [], (f"{len(groups)} names in the download clean to {student.student_id}'s id "
                    f"and none is exactly it ({files}): not graded as {student.student_id}. "
                    f"Rename the student's own file or folder to {student.student_id}")
    if len(kept) == len(groups):
        return kept, ""
    own = ", ".join(f for g in kept for f in _files(g))
    return kept, (f"the name only cleans to {student.student_id}'s id, and "
                  f"{student.student_id}'s own file is in the download ({own}): not graded as "
                  f"{student.student_id}'s. Whose is it? Rename it to its owner's id")


def _files(group: Group) -> list[str]:
    return [c.entry.source_name for c in group.candidates]


def _check_times(submissions: list[Submission], path: Path) -> list[str]:
    """Clear the zip times that cannot be submission times; notes on the download."""
    zipped = [s for s in submissions if s.time_source == "zip time" and s.submitted_at]
    for submission in zipped:
        source = submission.identity.source if submission.identity else ""
        if source == "canvas":
            submission.time_note = CANVAS_ZIP_TIME
        elif source == "moodle":
            submission.time_note = MOODLE_ZIP_TIME
    rest = [s for s in zipped if not s.time_note]
    stamps = sorted(datetime.datetime.fromisoformat(s.submitted_at) for s in rest)
    notes = []
    if len(rest) >= 2 and (stamps[-1] - stamps[0]).total_seconds() <= ONE_STAMP_SECONDS:
        why = (f"every file in the zip carries one time ({stamps[0].isoformat(' ')}): when the "
               f"zip was written, not when each was submitted")
        notes.append(why)
        for submission in rest:
            submission.time_note = why
    elif path.is_file():
        # A zip's stamp is a wall-clock time in an unknown zone: later than the
        # zip file itself by more than any zone's offset, it is not a true time.
        written = path.stat().st_mtime
        for submission in rest:
            stamp = datetime.datetime.fromisoformat(submission.submitted_at)
            if stamp.replace(tzinfo=datetime.timezone.utc).timestamp() - 14 * 3600 > written:
                submission.time_note = (f"the zip stamps this file {stamp.isoformat(' ')}, "
                                        f"later than the zip itself was written")
    for submission in zipped:
        if submission.time_note:
            submission.submitted_at = submission.time_source = ""
    return notes


def _read_ids(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_ids(path: Path, ids: dict[str, str]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_text(json.dumps(ids, indent=1, sort_keys=True),
                                        encoding="utf-8")
    path.with_suffix(".tmp").replace(path)
