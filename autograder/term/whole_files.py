"""The term's gradebook written out: term.csv, term.html, and a gradebook import
per LMS with a column per lab (autograder.term.whole makes the gradebook).

Into TERM_OUT (``python -m autograder term ... --out TERM_OUT``):

``term.csv``
    A row per student: ``student_id, name, email, section``, then per lab
    ``<lab> score`` (the score of record, after the late penalty; ``EX``
    when excused, empty when the lab's roster did not list the student),
    ``<lab> max`` and ``<lab> late penalty``, then ``dropped``, ``total
    percent`` (two decimals; empty when no lab counts) and ``notes``
    (missing, excused, dropped, late, regrade requests, students to check).
``term.html``
    The term's report: the rule of the total, per-lab figures (mean and
    median of the scores that count, missing, late, penalties, excused,
    dropped), the students to check, who is missing what, late totals,
    excused and dropped labs, regrade requests, and the whole gradebook.
``export/canvas/grades.csv``
    For Canvas's Grades > Import, by the rules of its importer
    (instructure/canvas-lms app/models/gradebook_importer.rb), as the one-lab
    export (autograder.term.export) writes them: ``Student, ID, SIS User
    ID, SIS Login ID, Section``, then a column per lab, named as the lab's
    roster heads it ("Lab 1 (4321)": ``export.canvas_assignment`` on the
    lab's class.json) or as ``[term] columns`` says, then a ``Points
    Possible`` row. An excused lab is written ``EX`` (the importer excuses
    the assignment: ``no_change_to_value?`` and ``translate_pass_fail``
    read "EX" in any case); a lab the student was not enrolled in is left
    empty (``no_score?``: no score). No total column: every column that is
    not a student column or one of ``NON_ASSIGNMENT_COLUMN_HEADERS``
    ("Current Score", "Final Score", ...) would become an assignment;
    Canvas totals with its own assignment groups' weights. Written only
    when every student has a Canvas user id (a Canvas roster).
``export/moodle/grades.csv``
    For Moodle's Grades > Import > CSV file (moodle/moodle
    grade/import/csv/classes/load_data.php): ``Full name``, the key
    (``Email address``, or ``ID number`` with ``--moodle-key id_number``:
    one row whose user is not found stops the whole import, so every row
    needs it), then a column per lab (the lab's title, or ``[term]
    columns``), each to map to its grade item on the import's second page
    (two columns mapped to one item are refused there). An excused lab, or
    one the student was not enrolled in, is ``-``: no grade
    (``update_grade_item``).
``export/csv/grades.csv``
    ``student_id, name, email, section``, a column per lab (``EX`` when
    excused, empty when not enrolled) and ``total_percent``.
``README.txt``
    What to read first and where each file goes.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.term import export as one_lab
from autograder.term.export.common import _list, _who
from autograder.term.whole import (ABSENT, EXCUSED, NO_ROW, NO_SUBMISSION, Cell, Gradebook,
                                   TermRow)
from autograder.text import clean_text, csv_text, format_score, late_by

__all__ = ["TermWritten", "write_term", "term_columns", "CANVAS_RESERVED"]

#: Canvas's importer drops a column whose header matches any of these (as a
#: regular expression: NON_ASSIGNMENT_COLUMN_HEADERS) and reads these as
#: student columns (GRADEBOOK_IMPORTER_RESERVED_NAMES).
CANVAS_NOT_ASSIGNMENTS = ("Current Score", "Current Points", "Current Grade", "Final Score",
                          "Final Points", "Final Grade", "Override Score", "Override Grade",
                          "Override Status")
CANVAS_RESERVED = ("Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID",
                   "Section", "Integration ID", "Root Account")


@dataclass
class TermWritten:
    """What `term` wrote: files by their path relative to ``dest``, the exports
    not written and why, notes to read first, the steps in the LMSs."""

    dest: Path
    files: dict[str, Path] = field(default_factory=dict)
    not_written: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    """term/export/'s CSV writer (a thin wrapper: it is that package's own)."""
    return one_lab._write_csv(path, header, rows)


def _cell_score(cell: Cell, excused: str = "EX", absent: str = "") -> str:
    if cell.state == EXCUSED:
        return excused
    if cell.state == ABSENT or cell.score is None:
        return absent
    return "0" if cell.state == NO_SUBMISSION else format_score(cell.score)


def _total(row: TermRow) -> str:
    return "" if row.total is None else f"{row.total:.2f}"


def term_columns(book: Gradebook, lms: str) -> tuple[dict[str, str], list[str]]:
    """The LMS's column of each lab, and notes: ``[term] columns`` when given;
    else, for Canvas, the roster's "Name (id)" column of the lab
    (export.canvas_assignment), for Moodle the lab's title.

    Raises:
        ValueError: a roster with several columns and not one of the lab's
            (say it in [term] columns), two labs with one column, or a Canvas
            column its importer would not read as an assignment.
    """
    columns, notes = {}, []
    for lab in book.labs:
        given = book.settings.columns.get(lab.lab)
        if given:
            columns[lab.lab] = given
        elif lms == "canvas":
            try:
                columns[lab.lab], note = one_lab.canvas_assignment(lab.info, lab.lab)
            except ValueError as error:
                raise ValueError(f"{lab.lab} ({lab.out}): {error} For the term, name it in "
                                 f"course.toml [term] columns = {{ {lab.lab} = \"Name (id)\" "
                                 f"}}.") from None
            if "creates a NEW assignment" in note:
                notes.append(f"{lab.lab}: {note}")
        else:
            columns[lab.lab] = lab.title
    seen: dict[str, str] = {}
    for lab_id, name in columns.items():
        if name in seen:
            raise ValueError(f"{seen[name]} and {lab_id} have the same {lms} column {name!r}: "
                             f"the import would give both labs' grades to one item. Name each "
                             f"lab's column in course.toml [term] columns.")
        seen[name] = lab_id
        if lms == "canvas" and (name in CANVAS_RESERVED or any(
                re.search(word, name) for word in CANVAS_NOT_ASSIGNMENTS)):
            raise ValueError(f"{lab_id}'s Canvas column {name!r} is one Canvas's import does not "
                             f"read as an assignment (a student column, or one holding "
                             f"\"Current Score\", \"Final Grade\" and the like): name it "
                             f"otherwise in course.toml [term] columns.")
    return columns, notes


def _canvas(book: Gradebook, dest: Path, written: TermWritten) -> None:
    missing = [r for r in book.rows if not str(r.student.lms_ids.get("id", "")).strip()]
    if missing:
        written.not_written["canvas"] = (
            f"{len(missing)} student(s) have no Canvas user id (ID), which Canvas's import "
            f"finds a student by: {_list(missing)}. Grade the labs with Canvas's gradebook "
            f"export as --roster.")
        return
    ids: dict[str, TermRow] = {}
    for row in book.rows:
        user = str(row.student.lms_ids["id"]).strip()
        if user in ids:
            written.not_written["canvas"] = (
                f"{_who(ids[user])} and {_who(row)} have one Canvas user id {user!r}: Canvas "
                f"would give both rows' grades to one person. They are one student under two "
                f"student_ids across the labs (term.html, \"Students to check\"): give them one "
                f"student_id in the rosters and grade again.")
            return
        ids[user] = row
    columns, notes = term_columns(book, "canvas")
    written.notes += notes
    table = [["Points Possible", "", "", "", ""]
             + [format_score(lab.max_score) for lab in book.labs]]
    for row in book.rows:
        ids_of = row.student.lms_ids
        user = str(ids_of["id"]).strip()
        name = csv_text(row.student.name)
        if not name.strip() or one_lab.CANVAS_POINTS_CELL.search(name):
            name = f"Student {user}"
            written.notes.append(f"Canvas: the Student cell of {_who(row)} is written {name!r} "
                                 f"(Canvas's import reads a first cell holding \"Points "
                                 f"Possible\" as its points row); Canvas finds them by ID.")
        table.append([name, csv_text(user), csv_text(ids_of.get("sis_user_id", "")),
                      csv_text(ids_of.get("sis_login_id", "")), csv_text(row.student.section)]
                     + [_cell_score(row.cells[lab.lab]) for lab in book.labs])
    header = list(one_lab.CANVAS_COLUMNS) + [csv_text(columns[lab.lab]) for lab in book.labs]
    written.files["export/canvas/grades.csv"] = _write_csv(dest / "export" / "canvas" /
                                                           "grades.csv", header, table)
    absent = sum(c.state == ABSENT for r in book.rows for c in r.cells.values())
    if absent:
        written.notes.append(f"Canvas: {absent} cell(s) are empty (a lab whose roster did not "
                             f"list the student); Canvas's import reads an empty cell as no "
                             f"score and removes a grade Canvas has there.")
    written.steps.append(
        "export/canvas/grades.csv: Course > Grades > Import, choose the file; check in the "
        "preview that each lab's column is the existing assignment, not a new one; Upload Data. "
        "\"EX\" excuses the assignment. Canvas totals with its own assignment groups: give each "
        "lab's group the weight course.toml gives it (Assignments > the options menu > "
        "Assignment Groups Weight > \"Weight final grade based on assignment groups\") for "
        "Canvas's total to be term.csv's.")


def _moodle(book: Gradebook, dest: Path, written: TermWritten, moodle_key: str) -> None:
    column = one_lab.MOODLE_KEYS[moodle_key]

    def key(row: TermRow) -> str:
        if moodle_key == "email":
            return row.student.email.strip()
        return str(row.student.lms_ids.get("id_number", "")).strip()

    other = "id_number" if moodle_key == "email" else "email"
    missing = [r for r in book.rows if not key(r)]
    if missing:
        written.not_written["moodle"] = (
            f"{len(missing)} student(s) have no {column.lower()}, and Moodle's import stops at "
            f"the first row whose user it cannot find: {_list(missing)}. Grade the labs with a "
            f"roster that has it, or give --moodle-key {other}.")
        return
    mangled = [r for r in book.rows if csv_text(key(r)) != key(r)]
    seen: dict[str, TermRow] = {}
    for row in book.rows:
        if key(row).casefold() in seen:
            written.not_written["moodle"] = (
                f"{_who(seen[key(row).casefold()])} and {_who(row)} have one {column.lower()} "
                f"{key(row)!r}: Moodle would give both rows' grades to one person. Give them one "
                f"student_id in the rosters, or give --moodle-key {other}.")
            return
        seen[key(row).casefold()] = row
    if mangled:
        written.not_written["moodle"] = (
            f"the {column.lower()} of {_list(mangled)} starts with = + - @ or holds a control "
            f"character: written safely it would not match in Moodle. Give --moodle-key {other}.")
        return
    columns, _ = term_columns(book, "moodle")
    table = [[csv_text(row.student.name), key(row)]
             + [_cell_score(row.cells[lab.lab], "-", "-") for lab in book.labs]
             for row in book.rows]
    header = ["Full name", column] + [csv_text(columns[lab.lab]) for lab in book.labs]
    written.files["export/moodle/grades.csv"] = _write_csv(dest / "export" / "moodle" /
                                                           "grades.csv", header, table)
    big = [lab.lab for lab in book.labs if lab.max_score > 100]
    if big:
        written.notes.append(f"Moodle: {', '.join(big)} have more than 100 points; Moodle's "
                             f"import refuses a grade above 100 unless the site allows "
                             f"unlimited grades (gradepointmax).")
    written.steps.append(
        f"export/moodle/grades.csv: Course > Grades > Import > CSV file; on the next page set "
        f"\"Identify user by\" Map from {column} to "
        f"{'Email address' if moodle_key == 'email' else 'ID number'}, and map each lab's "
        f"column to its grade item (whose maximum grade must be the lab's points: "
        + ", ".join(f"{lab.lab} {format_score(lab.max_score)}" for lab in book.labs)
        + "). \"-\" is no grade (an excused lab): with the course total's \"Exclude empty "
          "grades\" (Moodle's default) it is left out, as the kit leaves it out. Imported grades "
          "are overrides in the gradebook. Moodle totals with its own category weights: give "
          "each grade item the weight course.toml gives its lab for Moodle's total to be "
          "term.csv's.")


def _plain(book: Gradebook, dest: Path, written: TermWritten) -> None:
    header = ["student_id", "name", "email", "section"] + [lab.lab for lab in book.labs] \
        + ["total_percent"]
    table = [[csv_text(r.student.student_id), csv_text(r.student.name),
              csv_text(r.student.email), csv_text(r.student.section)]
             + [_cell_score(r.cells[lab.lab]) for lab in book.labs] + [_total(r)]
             for r in book.rows]
    written.files["export/csv/grades.csv"] = _write_csv(dest / "export" / "csv" / "grades.csv",
                                                        header, table)
    written.steps.append("export/csv/grades.csv: a column per lab (EX: excused, empty: not "
                         "enrolled) and the total, for a spreadsheet or another system.")


def _term_csv(book: Gradebook, dest: Path, written: TermWritten) -> None:
    header = ["student_id", "name", "email", "section"]
    for lab in book.labs:
        header += [f"{lab.lab} score", f"{lab.lab} max", f"{lab.lab} late penalty"]
    header += ["dropped", "total percent", "notes"]
    table = []
    for row in book.rows:
        cells = [csv_text(row.student.student_id), csv_text(row.student.name),
                 csv_text(row.student.email), csv_text(row.student.section)]
        for lab in book.labs:
            cell = row.cells[lab.lab]
            cells += [_cell_score(cell), format_score(cell.max_score), format_score(cell.penalty)]
        cells += [" ".join(name for name, c in row.cells.items() if c.dropped), _total(row),
                  csv_text(" | ".join(row.notes))]
        table.append(cells)
    written.files["term.csv"] = _write_csv(dest / "term.csv", header, table)




def rule_text(book: Gradebook) -> str:
    """The rule of the total in one sentence (term.html, README.txt)."""
    weights = ", ".join(f"{lab.lab} {lab.weight * 100:.4g}%" for lab in book.labs)
    text = (f"Total: each lab's score of record (after the late penalty) as a share of its "
            f"points, weighted ({weights}); an excused lab, or one whose roster did not list "
            f"the student, leaves the weights renormalised over the others")
    drop = book.settings.drop_lowest
    if drop:
        text += (f"; each student's {drop} lowest share{'s' * (drop > 1)} of the labs that "
                 f"count dropped (never an excused lab, never the last one)")
    return text + "."


def _render(template: str, **values) -> str:
    """reports.py's page environment (a thin wrapper: it is that module's own)."""
    from autograder.grader import reports

    return reports._render(template, **values)


def _report(book: Gradebook, dest: Path, written: TermWritten) -> None:
    labs = [{"lab": lab, "stats": book.stats(lab.lab)} for lab in book.labs]
    missing = [(r, name, c) for r in book.rows for name, c in r.cells.items()
               if c.state in (NO_SUBMISSION, ABSENT, NO_ROW)
               or c.state not in ("graded", EXCUSED) and c.row is not None]
    late = [(r, sum(c.penalty for c in r.cells.values()),
             [(name, late_by(c.late_seconds), c.penalty) for name, c in r.cells.items()
              if c.late_seconds > 0]) for r in book.rows]
    page = _render(
        "term.html.j2", book=book, rule=rule_text(book), labs=labs,
        flagged=[r for r in book.rows if r.flags], missing=missing,
        late=[item for item in late if item[2]],
        excused=[(r, name, c) for r in book.rows for name, c in r.cells.items()
                 if c.state == EXCUSED],
        dropped=[(r, name, c) for r in book.rows for name, c in r.cells.items() if c.dropped],
        regrades=[(r, name, q) for r in book.rows for name, c in r.cells.items()
                  if c.row is not None for q in c.row.regrades],
        score=_cell_score, total=_total, notes=book.notes + written.notes)
    path = dest / "term.html"
    path.write_text(page, encoding="utf-8")
    written.files["term.html"] = path


def _readme(book: Gradebook, written: TermWritten) -> None:
    labs = " ".join(f"{lab.lab}={lab.out}" for lab in book.labs)
    lines = [f"What `python -m autograder term {labs} --out {written.dest}` wrote here, and "
             f"what to read first.", "", rule_text(book), ""]
    notes = book.notes + written.notes
    if notes:
        lines += ["Read first:"] + [f"- {note}" for note in notes] + [""]
    if written.not_written:
        lines += ["Not written:"] + [f"- {lms}: {why}" for lms, why in
                                     written.not_written.items()] + [""]
    lines += ["Steps:"] + [f"{n}. {step}" for n, step in enumerate(written.steps, 1)]
    path = written.dest / "README.txt"
    path.write_text(clean_text("\n".join(lines)) + "\n", encoding="utf-8")
    written.files["README.txt"] = path


def write_term(book: Gradebook, dest: Path, moodle_key: str = "email") -> TermWritten:
    """Write term.csv, term.html, the exports and README.txt into ``dest``.

    An LMS's import that cannot be written (students without the id it
    finds them by) is left out, with why, in ``not_written``.

    Raises:
        ValueError: an unknown ``moodle_key``, or lab columns the LMSs could
            not tell apart (term_columns).
    """
    if moodle_key not in one_lab.MOODLE_KEYS:
        raise ValueError(f"Unknown Moodle key {moodle_key!r}: expected one of "
                         f"{', '.join(one_lab.MOODLE_KEYS)} (--moodle-key).")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = TermWritten(dest)
    _term_csv(book, dest, written)
    _canvas(book, dest, written)
    _moodle(book, dest, written, moodle_key)
    _plain(book, dest, written)
    _report(book, dest, written)
    _readme(book, written)
    return written


def read_term_csv(path: Path) -> list[dict[str, str]]:
    """term.csv's rows as dicts (for a script, and the tests)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
