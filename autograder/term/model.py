"""Plain records of the term layer: who is enrolled, whose a file is, the final rows.

Every step of autograder.term reads and writes these; nothing here knows an
LMS's file format (roster.py and export/ do).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Whose a file is: read by the grader's intake, named here with the records it joins.
from autograder.grader.submissions.identity import Identity

#: The LMSs whose files the kit reads and writes; "csv" is a plain file.
LMS_KINDS = ("canvas", "moodle", "csv")


@dataclass
class Student:
    """One enrolled student, as the roster lists them.

    Attributes:
        student_id: the id of the student's row in grades.csv and of their
            results (sanitized like a submission's id, unique in the roster).
        name: the name to show ("Jane Doe").
        email: "" when the roster has none.
        section: the LMS's section ("" when none).
        lms_ids: what the LMS calls the student, by field: for Canvas
            ``id`` (the user id), ``sis_user_id``, ``sis_login_id``; for
            Moodle ``participant`` (the assignment's participant id, from
            "Participant 123456"), ``id_number``, ``username``; for a plain
            CSV whatever extra columns it has (lower-cased names).
    """

    student_id: str
    name: str = ""
    email: str = ""
    section: str = ""
    lms_ids: dict[str, str] = field(default_factory=dict)


@dataclass
class ClassRow:
    """One enrolled (or, without a roster, submitting) student's final result of a lab.

    Attributes:
        student: who (a roster's Student; without a roster, one made from
            the submission's id).
        lab: the lab id.
        score: the score of record: the tests' score with the instructor's
            overrides, less the late penalty.
        raw_score: the tests' score with the overrides, before any penalty.
        max_score: the lab's points.
        status: "graded", "no submission", or why the file was not graded.
        file: the file graded, as found in the download ("" when none).
        submitted_at: when it was submitted, ISO 8601 with offset ("" when
            not known).
        time_source: where that time came from ("Gradescope metadata", "zip
            time", "times CSV", ...).
        due: the due date that applied (ISO 8601, an extension's when the
            student has one; "" when the lab has none).
        late_seconds: how late, in seconds (0 when on time or unknown).
        penalty: points taken for lateness.
        feedback: the student's feedback page, relative to OUT ("" when none).
        identity: whose the file is, as the download said (None when there
            was no file).
        notes: remarks for the instructor.
        exercises: ``[{"exercise", "score", "max_score", "message",
            "auto_score", "override_by", "override_note"}]`` in curriculum
            order.
        regrades: the student's regrade requests of the lab
            (autograder.term.regrades: ``{"exercise", "asked", "request",
            "decision", "score", "reason", "by", "line"}``).
    """

    student: Student
    lab: str
    score: float
    raw_score: float
    max_score: float
    status: str
    file: str = ""
    submitted_at: str = ""
    time_source: str = ""
    due: str = ""
    late_seconds: float = 0.0
    penalty: float = 0.0
    feedback: str = ""
    identity: Identity | None = None
    notes: list[str] = field(default_factory=list)
    exercises: list[dict] = field(default_factory=list)
    regrades: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ClassRow":
        data = dict(data)
        data["student"] = Student(**data["student"])
        if data.get("identity") is not None:
            data["identity"] = Identity(**data["identity"])
        return cls(**data)


#: OUT/class.json: the final rows of the last report, what `export` reads.
CLASS_FILE = "class.json"


#: What class.json says of the term besides its rows (read_class gives each,
#: "" or [] when an older class.json lacks it):
#: - roster_lms: the roster's LMS ("" without a roster);
#: - roster_kind: which roster file ("canvas gradebook", "moodle worksheet", ...);
#: - roster_file: the roster's path, as given to `grade`;
#: - roster_assignments: the roster's grade columns ("Lab 1 (4321)", "Grade");
#: - late_policy: the lab's late policy in one sentence ("" when the kit takes
#:   no late penalty for it: no due date or no penalty);
#: - late_penalised: how many rows the kit took a late penalty from.
TERM_FIELDS = ("roster_lms", "roster_kind", "roster_file", "roster_assignments",
               "late_policy", "late_penalised")


def write_class(out_dir: Path, lab: str, lab_title: str, rows: list[ClassRow],
                roster_lms: str = "", isolation: dict | None = None, **term) -> Path:
    """Write OUT/class.json: the lab, the term's facts (TERM_FIELDS, keywords),
    the student kernels' isolation (autograder.kernels.isolation.Isolation), the rows."""
    unknown = set(term) - set(TERM_FIELDS)
    if unknown:
        raise TypeError(f"write_class: unknown term fields {sorted(unknown)}")
    path = Path(out_dir) / CLASS_FILE
    path.write_text(json.dumps({"lab": lab, "lab_title": lab_title, "roster_lms": roster_lms,
                                **term, "isolation": isolation,
                                "rows": [row.to_json() for row in rows]}, indent=1),
                    encoding="utf-8")
    return path


def read_class(out_dir: Path) -> tuple[dict, list[ClassRow]]:
    """({"lab", "lab_title", and each of TERM_FIELDS}, rows) of OUT/class.json.

    Raises:
        ValueError: OUT has no class.json (not graded yet), or it is not one.
    """
    path = Path(out_dir) / CLASS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = [ClassRow.from_json(row) for row in data["rows"]]
    except FileNotFoundError:
        raise ValueError(f"{out_dir} has no {CLASS_FILE}: it is not a graded lab's folder. "
                         f"Give the --out folder of `python -m autograder grade`.") from None
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a class file written by `grade` ({error}); grade "
                         f"the lab again into that folder to rewrite it.") from None
    info = {k: data.get(k, "") for k in ("lab", "lab_title") + TERM_FIELDS}
    info["roster_assignments"] = list(data.get("roster_assignments") or [])
    info["late_penalised"] = int(data.get("late_penalised") or 0)
    return info, rows
