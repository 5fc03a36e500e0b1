"""The whole term in one gradebook: every lab's graded OUT, the course's weights,
drops and excused labs.

``python -m autograder term [LAB=OUT ...] --out TERM_OUT`` reads each lab's
OUT/class.json (written by ``grade``) and writes term.csv, term.html and a
gradebook import per LMS (autograder.term.whole_files). The labs and the
rules come from course.toml (or ``--course``)::

    [term]
    labs = { lab1 = "lab1-out", lab4 = "lab4-out" }   # OUT folders, relative to course.toml
    weights = { lab1 = 1, lab4 = 2 }                  # default: equal; normalised
    drop_lowest = 0                                   # each student's lowest shares left out
    excused = "excused.csv"                           # student_id,lab,reason
    columns = { lab1 = "Lab 1 (4321)" }               # the LMS's column of a lab (optional)

``LAB=OUT`` on the command line replaces ``labs``; ``--excused`` replaces
``excused``.

**Students** are joined across labs by their student_id (the roster's). A
student is never merged with another id: two ids that share an email or an
LMS id (Canvas user id, SIS ids, Moodle ID number, username), or the same
name in labs where they never appear together, are two rows, each flagged
"maybe the same student as ...". One id under two names (or emails) across
labs is one row, flagged.

**The total** follows Canvas's assignment-group weights, each lab a group of
its own: a lab's *share* is its score of record (after the late penalty)
over its points; the total is the weighted mean of the shares that count,
as a percent. A lab that does not count for a student leaves the weights
renormalised over the others (Canvas leaves an excused assignment, and a
group without one that counts, out): an excused lab (excused.csv), and a
lab whose roster did not list the student (not enrolled when it was graded;
the row says so). A lab graded without a roster has rows only for those who
sent a file, so a student with no row there has sent nothing: 0, said on the
row. ``drop_lowest = N`` leaves out each student's N lowest shares of the
labs that count (a tie drops the later lab), never an excused lab, and
never the last lab that counts.
"""

from __future__ import annotations

import difflib
import math
import re
import statistics
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from autograder.term.csvfile import read_rows
from autograder.term.model import ClassRow, Student, read_class
from autograder.text import format_score

__all__ = ["TermSettings", "Cell", "TermRow", "LabOfTerm", "Gradebook", "build_gradebook",
           "read_excused", "parse_lab_arguments", "NO_SUBMISSION", "EXCUSED", "ABSENT",
           "NO_ROW"]

NO_SUBMISSION = "no submission"
#: A cell's state besides a lab's own status ("graded", "no submission", ...).
EXCUSED, ABSENT, NO_ROW = "excused", "not on the roster", "no row"
#: The LMS ids that name one person in every assignment of a course (Moodle's
#: "participant" is the assignment's own, so it is not among them).
STABLE_IDS = ("id", "sis_user_id", "sis_login_id", "id_number", "username")
SETTINGS = ("labs", "weights", "drop_lowest", "excused", "columns")
WHERE = "course.toml [term]"


@dataclass
class TermSettings:
    """course.toml's ``[term]``, checked (``from_settings``)."""

    labs: dict[str, Path]
    weights: dict[str, float]
    drop_lowest: int = 0
    excused_file: Path | None = None
    columns: dict[str, str] = field(default_factory=dict)
    #: What the instructor should know of the settings (weights of labs not in the run).
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_settings(cls, table: dict | None, base: Path,
                      labs: dict[str, Path] | None = None,
                      excused: Path | None = None) -> "TermSettings":
        """The settings from course.toml's ``[term]`` (``base``: course.toml's folder);
        ``labs`` and ``excused`` (the command line's) replace the file's.

        Raises:
            ValueError: a setting that is not what it should be, saying which
                and what to write instead.
        """
        table = dict(table or {})
        unknown = sorted(set(table) - set(SETTINGS))
        if unknown:
            raise ValueError(f"{WHERE} has {', '.join(unknown)}, which the kit does not know; "
                             f"the settings are {', '.join(SETTINGS)}.")
        if labs is None:
            given = _table(table, "labs", "the OUT folder of each lab, e.g. labs = { lab1 = "
                                          "\"lab1-out\", lab4 = \"lab4-out\" }")
            labs = {}
            for lab, folder in given.items():
                if not isinstance(folder, str) or not folder.strip():
                    raise ValueError(f"{WHERE} labs.{lab} = {folder!r}: give the lab's OUT "
                                     f"folder as a string (relative to course.toml), e.g. "
                                     f"{lab} = \"{lab}-out\".")
                labs[lab] = (Path(base) / folder).resolve()
        if not labs:
            raise ValueError(f"No lab for the term: list each lab's OUT folder in {WHERE} "
                             f"labs = {{ lab1 = \"lab1-out\" }}, or give LAB=OUT on the command "
                             f"line (e.g. lab1=lab1-out lab4=lab4-out).")
        notes: list[str] = []
        weights = {lab: 1.0 for lab in labs}
        if "weights" in table:
            given = _table(table, "weights", "a number per lab, e.g. weights = { lab1 = 1, "
                                             "lab4 = 2 }")
            for lab, weight in given.items():
                if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                        or not math.isfinite(weight) or weight < 0:
                    raise ValueError(f"{WHERE} weights.{lab} = {weight!r}: give a number, 0 or "
                                     f"more (they are normalised: 1 and 2 are a third and two "
                                     f"thirds).")
            missing = [lab for lab in labs if lab not in given]
            if missing:
                raise ValueError(f"{WHERE} weights has no weight for {', '.join(missing)}: give "
                                 f"every lab of the term a weight (or none: equal weights).")
            unused = [lab for lab in given if lab not in labs]
            if unused:
                notes.append(f"{WHERE} weights of {', '.join(unused)} not used: "
                             f"{'it is' if len(unused) == 1 else 'they are'} not among this "
                             f"run's labs ({', '.join(labs)}).")
            weights = {lab: float(given[lab]) for lab in labs}
            if not any(weights.values()):
                raise ValueError(f"{WHERE} weights are all 0: give at least one lab a weight "
                                 f"above 0.")
        drop = table.get("drop_lowest", 0)
        if isinstance(drop, bool) or not isinstance(drop, int) or drop < 0:
            raise ValueError(f"{WHERE} drop_lowest = {drop!r}: give a whole number, 0 or more "
                             f"(how many of each student's lowest labs to leave out).")
        if drop and drop >= len(labs):
            raise ValueError(f"{WHERE} drop_lowest = {drop} with {len(labs)} lab(s): at least "
                             f"one lab must count; give at most {len(labs) - 1}.")
        if excused is None and table.get("excused"):
            if not isinstance(table["excused"], str):
                raise ValueError(f"{WHERE} excused = {table['excused']!r}: give the excused "
                                 f"labs' CSV file (student_id,lab,reason), relative to "
                                 f"course.toml.")
            excused = (Path(base) / table["excused"]).resolve()
        columns = _table(table, "columns", "the LMS's column of a lab, e.g. columns = { lab1 "
                                           "= \"Lab 1 (4321)\" }") if "columns" in table else {}
        for lab, name in columns.items():
            if lab not in labs:
                raise ValueError(f"{WHERE} columns.{lab}: {lab} is not a lab of the term "
                                 f"({', '.join(labs)}); remove it or add the lab to labs.")
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"{WHERE} columns.{lab} = {name!r}: give the column's name "
                                 f"as the LMS's gradebook heads it, e.g. \"Lab 1 (4321)\".")
        return cls(labs, weights, drop, Path(excused) if excused else None,
                   {lab: name.strip() for lab, name in columns.items()}, notes)


def _table(table: dict, name: str, example: str) -> dict:
    value = table.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"{WHERE} {name} = {value!r}: give a table, {example}.")
    return value


def parse_lab_arguments(values: list[str]) -> dict[str, Path] | None:
    """``["lab1=lab1-out", ...]`` (the command line's) as {lab: OUT}; None when empty.

    Raises:
        ValueError: an argument without "=", or one lab twice.
    """
    if not values:
        return None
    labs: dict[str, Path] = {}
    for value in values:
        lab, sign, folder = value.partition("=")
        if not sign or not lab.strip() or not folder.strip():
            raise ValueError(f"{value!r}: give each lab as LAB=OUT, the lab's id and the "
                             f"--out folder it was graded into (e.g. lab1=lab1-out).")
        if lab.strip() in labs:
            raise ValueError(f"{lab.strip()} is given twice ({labs[lab.strip()]} and {folder}): "
                             f"give each lab once.")
        labs[lab.strip()] = Path(folder.strip())
    return labs


# --------------------------------------------------------------------------
# The gradebook
# --------------------------------------------------------------------------


@dataclass
class LabOfTerm:
    """One lab of the term, as its class.json has it."""

    lab: str
    title: str
    out: Path
    info: dict
    rows: dict[str, ClassRow]
    max_score: float
    weight: float          # normalised: the weights of the term's labs sum to 1

    @property
    def has_roster(self) -> bool:
        return bool(self.info.get("roster_kind") or self.info.get("roster_lms"))


@dataclass
class Cell:
    """One student's lab in the term's gradebook.

    ``state``: the lab's status ("graded", "no submission", why a file was
    not graded), or EXCUSED, ABSENT (not on that lab's roster) or NO_ROW (no
    row in a lab graded without a roster: 0). ``score`` is the score of
    record (after the late penalty; None when the lab does not count).
    """

    state: str
    score: float | None
    max_score: float
    penalty: float = 0.0
    late_seconds: float = 0.0
    reason: str = ""
    dropped: bool = False
    row: ClassRow | None = None

    @property
    def counts(self) -> bool:
        return self.state not in (EXCUSED, ABSENT)

    @property
    def share(self) -> float | None:
        if self.score is None or not self.max_score:
            return None
        return self.score / self.max_score


@dataclass
class TermRow:
    """One student of the term: a cell per lab, the total (percent, None when no lab
    counts), and notes (what is missing, excused, dropped, flagged, requested)."""

    student: Student
    cells: dict[str, Cell]
    total: float | None = None
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


@dataclass
class Gradebook:
    """The term: its labs in order, a row per student (by student_id), the notes."""

    settings: TermSettings
    labs: list[LabOfTerm]
    rows: list[TermRow]
    excused: dict[tuple[str, str], tuple[str, int]]
    notes: list[str] = field(default_factory=list)

    def stats(self, lab: str) -> dict:
        """Per-lab figures for the report: students, submitted, mean and median
        score of the rows that count, missing, late, penalties, excused."""
        cells = [r.cells[lab] for r in self.rows]
        counted = [c.score for c in cells if c.counts and c.score is not None]
        return {"students": sum(c.state != ABSENT for c in cells),
                "submitted": sum(c.state not in (NO_SUBMISSION, EXCUSED, ABSENT, NO_ROW)
                                 for c in cells),
                "mean": statistics.fmean(counted) if counted else None,
                "median": statistics.median(counted) if counted else None,
                "missing": sum(c.state in (NO_SUBMISSION, NO_ROW) for c in cells),
                "late": sum(c.late_seconds > 0 for c in cells),
                "penalties": sum(c.penalty for c in cells),
                "excused": sum(c.state == EXCUSED for c in cells),
                "dropped": sum(c.dropped for c in cells)}


def read_excused(path: Path, labs: list[str]) -> list[tuple[int, str, str, str]]:
    """[(line, student, lab, reason)] of the excused labs' CSV (student_id,lab,reason).

    Raises:
        ValueError: the file cannot be read, lacks a column, names a lab
            that is not the term's, gives no reason, or one student's lab
            twice; the message names the line.
    """
    path = Path(path)
    found: dict[tuple[str, str], int] = {}
    out = []
    for line, row in read_rows(path, ("student_id", "lab", "reason"), "excused labs"):
        where = f"{path}, line {line}"
        student, lab, reason = row.get("student_id", ""), row.get("lab", ""), \
            row.get("reason", "")
        if not student:
            raise ValueError(f"{where}: no student_id; give the student's id as in term.csv.")
        if lab not in labs:
            raise ValueError(f"{where}: {lab!r} is not a lab of the term; give one of "
                             f"{', '.join(labs)}.")
        if not reason:
            raise ValueError(f"{where}: no reason; say why {student} is excused from {lab} "
                             f"(the term's report lists it).")
        if (student, lab) in found:
            raise ValueError(f"{where}: {student} is excused from {lab} already on line "
                             f"{found[student, lab]}; keep one line.")
        found[student, lab] = line
        out.append((line, student, lab, reason))
    return out


def _read_labs(settings: TermSettings) -> list[LabOfTerm]:
    labs, weight_sum = [], sum(settings.weights.values())
    for lab, out in settings.labs.items():
        info, rows = read_class(Path(out))
        if info["lab"] != lab:
            raise ValueError(f"{out} holds the grades of {info['lab']!r}, not {lab!r}: give "
                             f"{lab}'s --out folder (or name it {info['lab']}={out}).")
        if not rows:
            raise ValueError(f"{out}/class.json has no students: grade {lab}'s submissions "
                             f"(with the roster) first, or leave {lab} out of the term.")
        by_id: dict[str, ClassRow] = {}
        for row in rows:
            if row.student.student_id in by_id:
                raise ValueError(f"{out}/class.json has two rows of {row.student.student_id!r}: "
                                 f"grade {lab} again into that folder to rewrite it.")
            by_id[row.student.student_id] = row
        labs.append(LabOfTerm(lab, info.get("lab_title") or lab, Path(out), info, by_id,
                              max(r.max_score for r in rows),
                              settings.weights[lab] / weight_sum))
    return labs


def _plain_name(name: str) -> str:
    text = unicodedata.normalize("NFKD", name or "").encode("ascii", "ignore").decode()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _who(student: Student) -> str:
    return f"{student.student_id} ({student.name})" if student.name else student.student_id


def _join_students(labs: list[LabOfTerm]) -> tuple[dict[str, Student], dict[str, list[str]]]:
    """Every student_id of the term -> the Student (the latest lab's fields, the
    earlier labs' where those are empty), and the flags of each id."""
    students: dict[str, Student] = {}
    flags: dict[str, list[str]] = {}
    seen: dict[str, dict[str, tuple[str, str]]] = {}   # id -> field -> (value, lab)
    for lab in labs:
        for sid, row in lab.rows.items():
            s = row.student
            known = seen.setdefault(sid, {})
            facts = {"name": s.name.strip(), "email": s.email.strip().casefold(),
                     **{k: str(s.lms_ids.get(k, "")).strip() for k in STABLE_IDS}}
            for key, value in facts.items():
                if not value:
                    continue
                earlier = known.get(key)
                if earlier and earlier[0] != value:
                    what = "named" if key == "name" else f"with {key.replace('_', ' ')}"
                    flags.setdefault(sid, []).append(
                        f"{what} {earlier[0]!r} in {earlier[1]} and {value!r} in {lab.lab}: one "
                        f"student_id, joined as one student; check that it is one person")
                known[key] = (value, lab.lab)
            old = students.get(sid)
            students[sid] = Student(sid, s.name or (old.name if old else ""),
                                    s.email or (old.email if old else ""),
                                    s.section or (old.section if old else ""),
                                    {**(old.lms_ids if old else {}),
                                     **{k: v for k, v in s.lms_ids.items() if str(v).strip()}})
    _flag_one_person_under_two_ids(labs, students, flags)
    return students, flags


def _flag_one_person_under_two_ids(labs: list[LabOfTerm], students: dict[str, Student],
                                   flags: dict[str, list[str]]) -> None:
    """Flag (never merge) two student_ids that may be one person: a shared email or
    stable LMS id, or one name in labs where the two never appear together."""
    in_labs = {sid: {lab.lab for lab in labs if sid in lab.rows} for sid in students}
    keys: dict[tuple[str, str], set[str]] = {}
    for sid, s in students.items():
        if s.email.strip():
            keys.setdefault(("email", s.email.strip().casefold()), set()).add(sid)
        for key in STABLE_IDS:
            value = str(s.lms_ids.get(key, "")).strip()
            if value:
                keys.setdefault((key.replace("_", " "), value), set()).add(sid)
        if _plain_name(s.name):
            keys.setdefault(("name", _plain_name(s.name)), set()).add(sid)
    for (what, value), ids in sorted(keys.items()):
        if len(ids) < 2:
            continue
        for sid in sorted(ids):
            others = sorted(o for o in ids if o != sid
                            and (what != "name" or not in_labs[o] & in_labs[sid]))
            if not others:
                continue
            said = f"the name {students[sid].name!r}" if what == "name" else f"{what} {value!r}"
            flags.setdefault(sid, []).append(
                f"maybe the same student as {', '.join(others)} ({said}): not merged. If one "
                f"person, give them one student_id in the rosters and grade the labs again")


def build_gradebook(settings: TermSettings) -> Gradebook:
    """Read every lab's class.json and make the term's gradebook.

    Raises:
        ValueError: a lab's OUT that is not graded, or another lab's; an
            excused labs' file that is malformed or names a student the
            term does not have (each line said).
    """
    labs = _read_labs(settings)
    students, flags = _join_students(labs)
    excused: dict[tuple[str, str], tuple[str, int]] = {}
    if settings.excused_file is not None:
        index = _index(students)
        problems = []
        for line, key, lab, reason in read_excused(settings.excused_file, list(settings.labs)):
            found = index.get(key) or index.get(key.casefold()) or set()
            if len(found) == 1:
                excused[next(iter(found)), lab] = (reason, line)
                continue
            near = difflib.get_close_matches(key, list(students), n=3, cutoff=0.6)
            problems.append(f"line {line}: {key!r} " + (
                f"is the id of {len(found)} students ({', '.join(sorted(found))})" if found
                else "matches no student of the term" + (
                    f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else "")))
        if problems:
            raise ValueError(f"The excused labs' file {settings.excused_file} names students the "
                             f"term does not have:\n  " + "\n  ".join(problems)
                             + "\nGive each student's student_id as in term.csv (or the "
                               "labs' grades.csv).")
    rows = [_term_row(students[sid], labs, excused, flags.get(sid, []), settings)
            for sid in sorted(students)]
    notes = list(settings.notes)
    flagged = sum(bool(r.flags) for r in rows)
    if flagged:
        notes.append(f"{flagged} student(s) to check: one id under two names or ids, or maybe "
                     f"one person under two ids (never merged); term.html lists them.")
    return Gradebook(settings, labs, rows, excused, notes)


def _index(students: dict[str, Student]) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for sid, s in students.items():
        for key in (sid, s.email, *[str(v) for v in s.lms_ids.values()]):
            key = (key or "").strip()
            if key:
                index.setdefault(key, set()).add(sid)
                index.setdefault(key.casefold(), set()).add(sid)
    for sid in students:                  # a student's own id is theirs alone
        index[sid] = {sid}
    return index


def _term_row(student: Student, labs: list[LabOfTerm], excused: dict, flags: list[str],
              settings: TermSettings) -> TermRow:
    term_row = TermRow(student, {}, flags=list(flags))
    notes = term_row.notes
    for lab in labs:
        row = lab.rows.get(student.student_id)
        if (student.student_id, lab.lab) in excused:
            reason, line = excused[student.student_id, lab.lab]
            cell = Cell(EXCUSED, None, lab.max_score, reason=reason, row=row)
            had = (f"; its score {format_score(row.score)}/{format_score(row.max_score)} is "
                   f"left out" if row is not None and row.status != NO_SUBMISSION else "")
            source = settings.excused_file.name if settings.excused_file else "excused"
            notes.append(f"{lab.lab}: excused ({reason}; {source}, line {line}){had}")
        elif row is None and lab.has_roster:
            roster = lab.info.get("roster_file") or lab.out
            cell = Cell(ABSENT, None, lab.max_score,
                        reason=f"not on {lab.lab}'s roster ({roster}): not enrolled when it "
                               f"was graded; the lab does not count for them")
            notes.append(f"{lab.lab}: {cell.reason}")
        elif row is None:
            cell = Cell(NO_ROW, 0.0, lab.max_score,
                        reason=f"no row in {lab.lab} (graded without a roster: only those who "
                               f"sent a file have one): counted as no submission, 0")
            notes.append(f"{lab.lab}: {cell.reason}")
        else:
            score = 0.0 if row.status == NO_SUBMISSION else row.score
            cell = Cell(row.status, score, row.max_score or lab.max_score, row.penalty,
                        row.late_seconds, row=row)
            if row.status == NO_SUBMISSION:
                notes.append(f"{lab.lab}: no submission (0)")
            elif row.status != "graded":
                notes.append(f"{lab.lab}: {row.status}")
            if row.penalty:
                notes.append(f"{lab.lab}: late, -{format_score(row.penalty)} "
                             f"(after the late penalty: {format_score(row.score)})")
        for request in (row.regrades if row is not None else []):
            about = f" ({request.get('exercise')})" if request.get("exercise") else ""
            said = (f"{request.get('decision')} — {request.get('reason')}"
                    if request.get("decision") != "pending" else "pending, not decided")
            notes.append(f"{lab.lab}: regrade request of {request.get('asked')}{about}: {said}")
        term_row.cells[lab.lab] = cell
    _total(term_row, labs, settings.drop_lowest)
    notes.extend(flags)
    return term_row


def _total(term_row: TermRow, labs: list[LabOfTerm], drop_lowest: int) -> None:
    """The total of a row: the weighted mean of its counted shares, its lowest
    ``drop_lowest`` of them left out (see the module)."""
    order = {lab.lab: n for n, lab in enumerate(labs)}
    weights = {lab.lab: lab.weight for lab in labs}
    counted = [name for name, cell in term_row.cells.items() if cell.counts]
    drops = min(drop_lowest, max(len(counted) - 1, 0))
    if drops < drop_lowest and counted:
        term_row.notes.append(f"dropped {drops} lab(s), not {drop_lowest}: "
                              f"{len(counted)} count for this student and one must stay")
    lowest = sorted(counted, key=lambda name: (term_row.cells[name].share, -order[name]))
    for name in lowest[:drops]:
        term_row.cells[name].dropped = True
        share = term_row.cells[name].share or 0.0
        term_row.notes.append(f"{name}: dropped (one of the {drop_lowest} lowest; "
                              f"{share * 100:.1f}%)")
    kept = [name for name in counted if not term_row.cells[name].dropped]
    weight = sum(weights[name] for name in kept)
    if not kept or weight <= 0:
        term_row.total = None
        term_row.notes.append("no total: no lab counts for this student")
        return
    term_row.total = 100 * sum(weights[name] * (term_row.cells[name].share or 0.0)
                               for name in kept) / weight
