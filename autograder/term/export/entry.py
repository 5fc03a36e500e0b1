"""The entry point: ``export`` checks what it is asked, reads OUT/class.json,
writes the files of the format chosen and README.txt beside them.

Part of autograder.term.export (the CLI's ``export``).
"""

from __future__ import annotations

import math
from pathlib import Path

from autograder.text import clean_text
from autograder.term.export.canvas import CANVAS_ASSIGNMENT, _canvas, canvas_assignment
from autograder.term.export.common import (EXPORT_FORMATS, LATE_MODES, MOODLE_KEYS,
                                           MOODLE_ROUTES, README, UPLOAD_STEPS, Exported,
                                           _score, _value)
from autograder.term.export.held import _replaced_note, _roster_held
from autograder.term.export.late_policy import late_instructions
from autograder.term.export.moodle import (_gradebook_checks, _moodle_gradebook, _moodle_pages,
                                           _moodle_worksheet)
from autograder.term.export.plain import _plain
from autograder.term.model import read_class


def _write_readme(exported: Exported, lab: str) -> None:
    lines = [f"What `python -m autograder export {lab} OUT --to {exported.to}` wrote here "
             f"(--late {exported.late}), and what to read first.", ""]
    if exported.notes:
        lines += ["Read first:"] + [f"- {note}" for note in exported.notes] + [""]
    lines += ["Steps:"] + [f"{n}. {step}" for n, step in enumerate(exported.steps, 1)]
    if exported.skipped:
        lines += ["", "Feedback not in the export:"]
        lines += [f"- {student}: {why}" for student, why in exported.skipped]
    path = exported.dest / README
    path.write_text(clean_text("\n".join(lines)) + "\n", encoding="utf-8")
    exported.files[README] = path


def export(out_dir: Path, to: str, dest: Path | None = None, assignment: str | None = None,
           moodle_key: str = "email", lab: str | None = None, late: str = "kit",
           moodle_route: str = "worksheet", worksheet: Path | None = None,
           max_grade: float | None = None) -> Exported:
    """Write a graded lab's grades and feedback in the files ``to`` imports.

    Args:
        out_dir: the ``--out`` folder of ``grade`` (holds class.json).
        to: "canvas", "moodle" or "csv".
        dest: where to write (default ``OUT/export/<to>/``; created).
        assignment: the grade column's header. For Canvas, "Name (id)"
            matches an existing assignment exactly; the default is the
            roster's column of this lab (``canvas_assignment``), else the
            lab's title (a new assignment, said in a note). For Moodle's
            gradebook route, the default is the lab's title.
        moodle_key: "email" or "id_number": how Moodle's gradebook import
            finds each student.
        lab: when given, OUT's class.json must be this lab's.
        late: "kit": the scores after the kit's late penalty, with the step
            that turns the LMS's own deduction off when the kit has a late
            policy; "lms": the scores before it (raw_score), the LMS's policy
            deciding (``late_instructions``).
        moodle_route: "worksheet": the assignment's grading worksheet with
            Grade and Feedback comments filled in; "gradebook": the
            gradebook's CSV import.
        worksheet: the grading worksheet to fill in (default: the roster
            ``grade`` read, when it was one); with the gradebook route, read
            for the assignment's Maximum grade and the grades Moodle holds.
        max_grade: Moodle only: the assignment's (grade item's) Maximum grade
            as the instructor states it; when it is not the lab's points the
            grades are scaled to it (``_scaled``). Without it, the worksheet's
            Maximum grade is checked, and the gradebook route's steps say to
            check the item's (``_check_maximum``).

    Returns:
        Exported: the files written (README.txt among them), the counts, the
        feedback pages left out, the steps and the notes.

    Raises:
        ValueError: an unknown ``to``, ``late``, ``moodle_route`` or
            ``moodle_key``, OUT not graded, a class.json of another lab or
            with no rows, students the LMS could not find (listed), no
            assignment column of the lab among several, no grading
            worksheet for Moodle's default route, ``late="lms"`` with
            Moodle's gradebook route when the kit has a late policy, or a
            ``max_grade`` that is not a positive number, or not for Moodle.
    """
    if to not in EXPORT_FORMATS:
        raise ValueError(f"Unknown export format {to!r}: expected one of "
                         f"{', '.join(EXPORT_FORMATS)} (--to).")
    if late not in LATE_MODES:
        raise ValueError(f"Unknown late mode {late!r}: expected kit (the scores after the kit's "
                         f"late penalty) or lms (before it; the LMS's late policy decides) "
                         f"(--late).")
    if moodle_route not in MOODLE_ROUTES:
        raise ValueError(f"Unknown Moodle route {moodle_route!r}: expected worksheet (the "
                         f"assignment's grading worksheet) or gradebook (the gradebook's CSV "
                         f"import) (--moodle-route).")
    if moodle_key not in MOODLE_KEYS:
        raise ValueError(f"Unknown Moodle key {moodle_key!r}: expected one of "
                         f"{', '.join(MOODLE_KEYS)} (--moodle-key).")
    if max_grade is not None and to != "moodle":
        raise ValueError(f"--max-grade is Moodle's Maximum grade, and the export is for {to}: "
                         f"leave it out (Canvas takes the lab's points from the Points "
                         f"Possible row; the csv has max_score).")
    if max_grade is not None and not (math.isfinite(max_grade) and max_grade > 0):
        raise ValueError(f"--max-grade {max_grade} is not a Maximum grade: give the positive "
                         f"number Moodle shows as the assignment's Maximum grade (e.g. 100).")
    out_dir = Path(out_dir)
    info, rows = read_class(out_dir)
    if lab is not None and info["lab"] != lab:
        raise ValueError(f"{out_dir} holds the grades of {info['lab']!r}, not {lab!r}: give "
                         f"the --out folder where {lab} was graded (or the lab {info['lab']}).")
    if not rows:
        raise ValueError(f"{out_dir}/class.json has no students: there is nothing to export. "
                         f"Grade the lab's submissions (with the roster) first.")
    if assignment is not None and not assignment.strip():
        raise ValueError("The assignment name is empty: give the LMS's assignment name "
                         "(--assignment), or leave it out to use the default.")
    route = ("moodle" if moodle_route == "worksheet" else "moodle gradebook") \
        if to == "moodle" else to
    before, notes = late_instructions(to, late, info, len(rows), moodle_route)
    if to == "canvas" and assignment is None:
        assignment, note = canvas_assignment(info, info["lab"])
        notes.append(note)
    elif to == "canvas" and assignment is not None \
            and not CANVAS_ASSIGNMENT.match(assignment.strip()):
        notes.append(f"Assignment column: {assignment.strip()!r} has no \"(id)\": Canvas fills "
                     f"the assignment of exactly that name, or creates a new one.")
    assignment = (assignment or info["lab_title"] or info["lab"]).strip()
    dest = Path(dest) if dest is not None else out_dir / "export" / to
    dest.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r.student.student_id)
    steps = before + [step.format(key=MOODLE_KEYS[moodle_key], worksheet="{worksheet}")
                      for step in UPLOAD_STEPS[route]]
    exported = Exported(to=to, dest=dest, steps=steps, notes=notes, late=late,
                        max_grade=max_grade, lab_max=max(r.max_score for r in rows))
    plain = {id(row): _score(row, _value(row, late)) for row in rows}
    if to == "canvas":
        _canvas(out_dir, rows, assignment, dest, exported)
        held, where = _roster_held(info, rows, assignment, exported)
        _replaced_note(rows, held, plain, where, exported)
    elif route == "moodle":
        _moodle_worksheet(out_dir, rows, info, dest, exported, worksheet)
        _moodle_pages(out_dir, rows, exported)
    elif to == "moodle":
        _moodle_gradebook(out_dir, rows, assignment, dest, exported, moodle_key)
        _gradebook_checks(info, rows, assignment, worksheet, exported)
    else:
        _plain(out_dir, rows, dest, exported)
        column = None
        if info.get("roster_kind") == "canvas gradebook":
            try:
                column = canvas_assignment(info, info["lab"])[0]
            except ValueError:
                column = None
        held, where = _roster_held(info, rows, column, exported)
        _replaced_note(rows, held, plain, where, exported,
                       what="grades.csv's score would replace, imported there")
    _write_readme(exported, info["lab"])
    return exported
