"""Grades and feedback of a graded lab in the files Canvas and Moodle import.

``export(out_dir, to)`` reads OUT/class.json (the final rows of the last
report and the term's facts, see model.py) and the feedback pages it names,
and writes into ``dest`` (default ``OUT/export/<to>/``) the files below, a
``README.txt`` with what to read first and where each file goes, and returns
the same as ``Exported`` (the CLI prints it).

Who takes the late penalty (``late``)
    One place applies the late policy, and the export says which.
    ``late="kit"`` (the default) exports ``score``, after the kit's penalty;
    when the kit has a late policy for the lab (class.json's
    ``late_policy``, ``late_penalised``) the export says how many students
    it penalised and, for Canvas, that Canvas's automatic late deduction
    must be off before the import: Canvas takes it again whenever a grade
    is entered for a submission it marks late, imported grades included
    (instructure/canvas-lms: ``GradebookUploadsController`` posts the
    import to ``submissions/update_grades``; ``Submission.process_bulk_update``
    calls ``Assignment#grade_student``; app/models/submission.rb,
    ``before_save :apply_late_policy, if: :late_policy_relevant_changes?``,
    ``score_late_or_none`` deducts ``LatePolicy#points_deducted`` from the
    entered score when ``late_submission_deduction_enabled``; the policy
    ``belongs_to :course``, one for every assignment of the course). It is
    turned off at Course > Grades > Settings (gear icon) > Late Policies >
    "Automatically apply deduction to late submissions" > Apply Settings
    (ui/.../LatePoliciesTabPanel; Canvas Guides, "How do I apply a Late
    Submission policy in the Gradebook?"). Moodle before 5.0 has no late
    deduction of its own; Moodle 5.0 and later take one when an assignment's
    "Grade penalties" setting is on (mod/assign/classes/penalty/helper.php
    ``is_penalty_enabled``: a due date, a point grade and ``gradepenalty``;
    the rules are the site's "Late submission penalties",
    grade/penalty/duedate), so the export says to turn that off.
    ``late="lms"`` exports ``raw_score`` (before the kit's penalty) and says
    the LMS's own policy decides, from its own due dates and extensions.
    Moodle's gradebook import writes the gradebook directly, outside the
    assignment, so no late penalty would be taken there at all: that pair is
    refused when the kit has a late policy.

``to="canvas"``
    ``grades.csv`` for the Gradebook's "Import" (Grades > Import): the
    columns ``Student, ID, SIS User ID, SIS Login ID, Section`` and one
    assignment column, then a ``Points Possible`` row and one row per
    student. What this relies on is Canvas's importer itself
    (instructure/canvas-lms, app/models/gradebook_importer.rb):

    - the header (the first row) must start with a cell containing
      "Student" and one containing "ID", and the last student column must
      be "Section" (``row_has_student_headers?``, ``update_column_count``:
      "SIS User ID" then "SIS Login ID" may sit between them);
    - after the header, a row whose first cell contains "Points Possible"
      is the assignments' points, not a student
      (``check_for_non_student_row``: ``row[0]&.include?("Points Possible")``;
      older releases ``row[0] =~ /Points Possible/``), and a row whose every
      cell is blank, "Muted" or "Manual Posting..." is skipped. A student's
      row always has its numeric ID, so only the first cell can make it
      misread: a name holding "Points Possible" (in any case or spacing, to
      be safe) is written ``Student <user id>``, as is an empty one. That
      is safe because ``process_student`` finds the student by the ID column
      (Canvas's user id) first, then by SIS ids, and reads the name only
      when neither matches;
    - an assignment column is matched by "Name (id)" (``Assignment.
      title_and_id``), then by its exact name; a header that matches none
      creates a new assignment (with the Points Possible row's points). The
      default column is the roster's "Name (id)" column of this lab
      (``canvas_assignment``: class.json's ``roster_assignments``, matched
      by the lab's number or title); when the roster has several and not
      exactly one is this lab's, the export is refused with their list;
      when it has none, the column is the lab's title and the export says
      Canvas will create an assignment. Scores are in the lab's points, so
      the assignment in Canvas should have the lab's points too;
    - a blank or ``-`` cell means "no score" (``no_score?``; it removes a
      score already there), so every row gets a number: a student without a
      submission gets 0. Canvas cannot import a row without its user id: a
      class graded without a Canvas roster is refused (grade it again with
      ``--roster`` the gradebook's export).

    ``feedback.zip`` for the assignment's "Re-Upload Submissions" (the
    counterpart of "Download Submissions"): Canvas attaches each file to
    the submission as a comment. Canvas reads a file name by its
    underscore-separated parts: the first two that are only digits are the
    user id and the id of a file the student submitted
    (``Assignment#infer_comment_context_from_filename``), and it ignores a
    file whose submitted file it cannot find. The pages are therefore named
    ``<name>_<user id>_<file id>_feedback.html`` as in Canvas's download
    (``doejane_12345_6789_feedback.html``); the file id comes from the
    submission's Canvas download name (``Identity.submission_id``). A student
    whose file did not come from a Canvas download (or who resubmitted since)
    has no file id to name: their page is listed in ``skipped`` and stays in
    OUT/feedback/.

``to="moodle"``, ``moodle_route="worksheet"`` (the default)
    The assignment's own offline grading worksheet, written back: the file
    ``grade`` read as its roster (class.json's ``roster_file``, roster kind
    "moodle worksheet"), or ``worksheet=``, under its own name (Moodle's
    download names it ``Grades-<course>-<assignment>-<cmid>.csv``), every
    row and cell as downloaded except ``Grade`` and ``Feedback comments``,
    filled in for each student of the class. For the assignment's "Upload
    grading worksheet" (moodle/moodle, mod/assign/feedback/offline):

    - ``importgradeslib.php`` ``init()`` finds the columns by their names,
      exactly: ``Identifier`` (the row's participant: ``next()`` strips
      "Participant " and maps the number back to the user), ``Grade`` and
      ``Last modified (grade)``; without any of the three the upload fails
      ("Moodle could not read the uploaded worksheet"), so the export
      refuses such a file. ``Feedback comments`` (the comments plugin's
      editor field) is read when the assignment has feedback comments on;
      a worksheet without that column gets only grades (said in a note);
    - ``locallib.php`` ``process_import_grades`` skips a row whose grade in
      Moodle was changed more than a minute after its ``Last modified
      (grade)`` (``$usergrade->timemodified > ($modified + 60)``, the cell
      read with ``strtotime``), and its feedback too, unless the upload's
      "Allow updating records that have been modified more recently in
      Moodle than in the spreadsheet" is ticked: that cell is kept exactly as
      downloaded (gradingtable.php ``col_timemarked`` writes it for every
      grade record when downloading, "as it affects import"). It skips an
      empty grade, one below 0 or above the assignment's maximum, and it
      sets a grade only when ``$record->grade`` is true, so a grade of 0
      is never set by this upload: the export lists those students;
    - ``csv_import_reader::load_csv_content`` (lib/csvlib.class.php) reads
      UTF-8 (a BOM is dropped; CR LF becomes LF), the separator chosen on
      the form (comma by default; older releases' uploadgradesform.php has
      no choice: comma), with PHP's ``fgetcsv`` (a backslash escapes a quote), and
      refuses a file whose rows do not all have the header's number of
      cells. The worksheet is written UTF-8 (with a BOM when the download
      had one), comma-separated, every row as long as the header; a
      worksheet in another encoding or separator (saved again by a
      spreadsheet) is read as the roster reader reads it;
    - the comment is stored as HTML (feedback/comments/locallib.php
      ``set_editor_text``: ``FORMAT_HTML``), so the feedback text is written
      HTML-escaped with ``<br>`` between lines.

    Every student needs Moodle's participant id: the worksheet roster's
    ("Participant 123456"), else the Moodle download's (``Identity.user_id``,
    with ``worksheet=``); a student without one, or one the worksheet does
    not list, is refused (grade with the grading worksheet as ``--roster``).

    The upload's preview (importgradesform.php) lists only what it will
    change ("Set grade for <student> to <grade>", 'Set field "Feedback
    comments" for ...'), never a skipped row, and "No modified grades found
    in uploaded worksheet" when nothing. Each export of a worksheet is
    recorded in ``OUT/export/moodle/exported.json`` (the worksheet's SHA-256,
    the file written and its SHA-256, when, the grades and a hash of each
    comment); a later export of the same file (after ``grade --only``) says,
    first in the steps, that an upload of it is skipped on every row the first
    upload set (``_second_upload``), and which rows changed since: the fix is a
    fresh download given with ``worksheet=``.

``to="moodle"``, ``moodle_route="gradebook"``
    ``grades.csv`` for the gradebook's "Import > CSV file": ``Full name``,
    the key (``Email address`` with ``moodle_key="email"``, ``ID number``
    with ``"id_number"``), a grade column headed ``assignment`` and a
    feedback column headed ``<assignment> (Feedback)`` (the header Moodle's
    own grade export gives a feedback column). On import, "Identify user
    by" maps the key column to "Email address" (useremail) or "ID number"
    (useridnumber) and the two columns to the grade item and its feedback
    (moodle/moodle, grade/import/csv/classes/load_data.php: a blank or
    ``-`` grade is "no grade", and one row whose user is not found stops
    the whole import, so a row without the key is refused here). The
    feedback text is plain text: the score, the late penalty and one line
    per exercise. An imported grade is an override in the gradebook: later
    grading in the assignment does not reach the gradebook until it is
    removed; hence the worksheet is the default. The import stores each
    number as is (``update_grade_item``: ``unformat_float``; then
    lib/grade/grade_item.php ``update_final_grade`` clamps it to the item's
    range, ``bounded_grade``): 14.5 into a 100-point item is 14.5 of 100.
    The item's Maximum grade is read from the assignment's grading worksheet
    (``worksheet=``, or the roster when it was one); Moodle's gradebook
    export (grade/export/txt) has no maximum, only the grades by display type
    ("Assignment: Lab 1 (Real)"). Where it is known and is not the lab's
    points, the first step says to set it (or to export with
    ``max_grade``); where it is not known, the first step says to check it.

    With either route, ``feedback.zip`` for the assignment's "Upload
    multiple feedback files in a zip": one folder per participant, named as
    Moodle names them in its "Download all submissions", ``<Full
    name>_<participant id>_assignsubmission_file_``, holding
    ``feedback.html``. Moodle splits a folder name on ``_`` and takes the
    second part as the participant id
    (mod/assign/feedback/file/importziplib.php), so underscores in a name
    become spaces, as in Moodle's download. The participant id is the
    roster's ``lms_ids["participant"]``, else the Moodle download's
    (``Identity.user_id``); students without one are listed in ``skipped``.

Maximum grade (``max_grade``, ``--max-grade``; Moodle only)
    Moodle's Maximum grade of the assignment, as the instructor states it.
    When it is not the lab's points, every Moodle grade is the lab's score
    scaled to it, to two decimals half up (14.5 of 16 -> 90.63 of 100); the
    feedback keeps the lab's points. It overrides what a worksheet says (with
    a note when they differ: the worksheet may predate a change in Moodle).

Grades the LMS holds already
    Every export lists under "Read first" (the first 10, then a count; all
    in ``Exported.replaced``) the students whose grade in the LMS, as the
    file the kit has says it, is another one than the export's: Canvas's
    gradebook export (the roster) in the assignment's column; Moodle's
    worksheet's ``Grade`` with its ``Last modified (grade)`` (a 0, never set by
    the worksheet, replaces nothing); the gradebook route's worksheet, or the
    gradebook export's item column; for ``csv``, the roster's column of the
    lab. A blank or ``-`` cell is no grade.

``to="csv"``
    ``grades.csv`` with ``student_id, name, email, section, lab, score,
    raw_score, max_score, late, penalty, status, submitted_at`` (``score``
    after the kit's penalty, or equal to ``raw_score`` with ``late="lms"``;
    ``penalty`` what the kit's policy takes; ``late`` in hours with two
    decimals, "" when on time) and ``feedback/<student_id>.zip``, one zip per
    student holding their ``feedback.html``.

In every file, scores are written like reports.format_score (``7``,
``7.5``), every text cell the kit writes passes through reports.csv_text (no
spreadsheet formula, no control character), a student with status "no
submission" gets 0 and no feedback file, and a feedback page that is missing
(or names a path outside OUT) is listed in ``skipped`` instead.
"""

from __future__ import annotations

import csv
import decimal
import hashlib
import html
import io
import json
import math
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from autograder.text import (clean_text, csv_text, cut_words, format_score, safe_filename,
                            unique_name)
from autograder.term.model import ClassRow, read_class

__all__ = ["Exported", "export", "feedback_text", "feedback_html", "canvas_assignment",
           "late_instructions", "EXPORT_FORMATS", "LATE_MODES", "MOODLE_KEYS", "MOODLE_ROUTES",
           "UPLOAD_STEPS"]

#: What ``export`` writes (``--to``).
EXPORT_FORMATS = ("canvas", "moodle", "csv")
#: Who takes the late penalty (``--late``): the kit's score, or the raw score.
LATE_MODES = ("kit", "lms")
#: Moodle's routes (``--moodle-route``): the assignment's grading worksheet, or
#: the gradebook's CSV import.
MOODLE_ROUTES = ("worksheet", "gradebook")
#: moodle_key -> the grades.csv column that identifies a student.
MOODLE_KEYS = {"email": "Email address", "id_number": "ID number"}

#: Where the assignment's grading actions are in Moodle: "Submissions" and its
#: Actions menu in current releases (mod/assign/feedback/offline/tests/behat/
#: upload_worksheet.feature: 'I navigate to "Submissions"', 'I choose the
#: "Upload grading worksheet" item in the "Actions" action menu'), "View all
#: submissions" and its "Grading action" menu in older ones.
MOODLE_ACTIONS = ("the assignment > Submissions (older Moodle: View all submissions) > "
                  "Actions (older: the Grading action menu)")

#: Where each file goes in the LMS, for the instructor (printed by the CLI),
#: by route: "moodle" is the grading worksheet, "moodle gradebook" the CSV import.
UPLOAD_STEPS = {
    "canvas": [
        "grades.csv: Course > Grades > Import (or Actions > Import), choose the file, check "
        "the preview (the assignment column must be the existing assignment, not a new one) "
        "and Upload Data.",
        "feedback.zip: Course > Assignments > the assignment > Re-Upload Submissions (next "
        "to Download Submissions), choose the zip; each page becomes a comment on the "
        "student's submission.",
    ],
    "moodle": [
        "{worksheet}: " + MOODLE_ACTIONS + " > Upload grading worksheet; choose the file. "
        "Leave \"Allow updating records that have been modified more recently in Moodle "
        "than in the spreadsheet\" unticked: Moodle then keeps any grade changed in Moodle "
        "after the worksheet was downloaded, by its \"Last modified (grade)\" cell, and "
        "skips that row without a word (its preview lists only the changes it will make); "
        "tick it only to overwrite those too. Check the \"Set grade for ...\" lines (a "
        "student missing from them is skipped) and Confirm.",
        "feedback.zip: " + MOODLE_ACTIONS + " > Upload multiple feedback files in a zip "
        "(needs the assignment's \"Feedback files\" setting on).",
    ],
    "moodle gradebook": [
        "grades.csv: Course > Grades > Import > CSV file; on the next page set \"Identify "
        "user by\" Map from the key column to {key}, map the grade column to the "
        "assignment's grade item and the (Feedback) column to its feedback. Each grade "
        "becomes an override in the gradebook: grades given later in the assignment do not "
        "reach the gradebook until the override is removed.",
        "feedback.zip: " + MOODLE_ACTIONS + " > Upload multiple feedback files in a zip "
        "(needs the assignment's \"Feedback files\" setting on).",
    ],
    "csv": [
        "grades.csv: one row per student, for a spreadsheet or another system.",
        "feedback/<student_id>.zip: one zip per student, their feedback page inside.",
    ],
}

NO_SUBMISSION = "no submission"
#: The feedback page's name inside the zips (Moodle and csv).
FEEDBACK_NAME = "feedback.html"
#: An exercise message's longest line in Moodle's feedback text.
MESSAGE_WIDTH = 200
#: The instructor's notes beside the exported files.
README = "README.txt"


@dataclass
class Exported:
    """What `export` wrote.

    Attributes:
        to: "canvas", "moodle" or "csv".
        dest: the folder the files are in.
        files: each file written, by its path relative to ``dest``
            ("grades.csv", "feedback.zip", "feedback/<student_id>.zip", the
            worksheet's name, "README.txt").
        grades: rows (students) given a grade.
        feedback: feedback pages packed.
        skipped: (student_id, why) for each student whose feedback page is
            not in the export.
        steps: what to do in the LMS, in order (a step before the import
            when the LMS's own late deduction must be turned off, then where
            each file goes).
        notes: what the instructor must read before importing (who takes
            the late penalty, the assignment column, names written
            otherwise, grades the LMS will not set); the CLI prints them
            first, and README.txt beside the files keeps them with the steps.
        late: "kit" or "lms" (``export``'s ``late``).
        replaced: (student_id, the LMS's grade, the export's) for each student
            whose grade in the LMS (as the roster or worksheet says it) the
            export replaces with another; the notes list the first 10.
        max_grade: Moodle's Maximum grade as stated (``export``'s
            ``max_grade``; None: the lab's points, unscaled).
        lab_max: the lab's points.
    """

    to: str
    dest: Path
    files: dict[str, Path] = field(default_factory=dict)
    grades: int = 0
    feedback: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    late: str = "kit"
    replaced: list[tuple[str, str, str]] = field(default_factory=list)
    max_grade: float | None = None
    lab_max: float = 0.0


# --------------------------------------------------------------------------
# Who takes the late penalty
# --------------------------------------------------------------------------

#: Where Canvas's automatic late deduction is turned off: the Gradebook's
#: settings tray, tab "Late Policies", checkbox "Automatically apply deduction
#: to late submissions" (canvas-lms LatePoliciesTabPanel; Canvas Guides, "How
#: do I apply a Late Submission policy in the Gradebook?").
CANVAS_LATE_TAB = "Course > Grades > Settings (the gear icon) > Late Policies tab"
CANVAS_LATE_SETTING = (CANVAS_LATE_TAB + " > clear \"Automatically apply deduction to late "
                       "submissions\" > Apply Settings")
#: Where Moodle 5.0+ takes a late penalty itself: the assignment's "Grade
#: penalties" (mod/assign lang 'gradepenalty'; mod/assign/classes/penalty/helper.php).
MOODLE_LATE_SETTING = ("the assignment > Settings > Grade > \"Grade penalties\" (Moodle 5.0 "
                       "and later, shown when the site enables grade penalties)")


def _kit_policy(info: dict) -> bool:
    """Whether the kit takes a late penalty for this lab (a policy, or a row penalised)."""
    return bool(info.get("late_policy")) or int(info.get("late_penalised") or 0) > 0


def late_instructions(to: str, late: str, info: dict, rows: int,
                      route: str = "worksheet") -> tuple[list[str], list[str]]:
    """(steps before the import, notes): who takes the late penalty, said once.

    Args:
        to: "canvas", "moodle" or "csv".
        late: "kit" (the scores after the kit's penalty) or "lms" (before it).
        info: class.json's facts (``late_policy``, ``late_penalised``).
        rows: students exported.
        route: Moodle's route, "worksheet" or "gradebook".

    Raises:
        ValueError: ``late="lms"`` with Moodle's gradebook route when the kit
            has a late policy: nobody would take the penalty.
    """
    policy = (info.get("late_policy") or "").strip().rstrip(".")
    penalised = int(info.get("late_penalised") or 0)
    kit = _kit_policy(info)
    what = (f"the kit's late policy ({policy}) penalised {penalised} of {rows} student(s)"
            if policy else f"the kit penalised {penalised} of {rows} student(s) for lateness")
    if late == "kit":
        if not kit:
            if to == "canvas":
                return [], ["Late penalty: the kit took none for this lab (no due date or no "
                            "penalty in course.toml). If the course has Canvas's automatic late "
                            "deduction on, Canvas takes it as these grades are imported, by its "
                            "own due dates (" + CANVAS_LATE_TAB + ")."]
            return [], []
        if to == "canvas":
            step = ("BEFORE importing grades.csv, turn Canvas's automatic late deduction off: "
                    + CANVAS_LATE_SETTING + ". The kit already took the late penalty.")
            return [step], [
                f"Late penalty: taken by the kit: {what}; grades.csv has the scores after it. "
                f"Canvas deducts its own late penalty whenever a grade is entered for a "
                f"submission it marks late, imported grades included, so turn its automatic "
                f"deduction off before importing ({CANVAS_LATE_SETTING}), or late students "
                f"lose points twice. The setting is the course's, for every assignment: if "
                f"other assignments need it, export with --late lms instead (the scores "
                f"before the kit's penalty, Canvas's policy deciding)."]
        if to == "moodle" and route == "gradebook":
            return [], [f"Late penalty: taken by the kit: {what}; grades.csv has the scores "
                        f"after it. Moodle's gradebook import sets the gradebook's grade "
                        f"directly, outside the assignment, so no Moodle late penalty is "
                        f"added."]
        if to == "moodle":
            step = ("BEFORE uploading the worksheet, if this assignment's \"Grade penalties\" "
                    "is on, turn it off: " + MOODLE_LATE_SETTING + ". The kit already took "
                    "the late penalty.")
            return [step], [
                f"Late penalty: taken by the kit: {what}; the worksheet has the scores after "
                f"it. Moodle before 5.0 takes no late penalty of its own; Moodle 5.0 and later "
                f"take one as the grade is saved when the assignment's \"Grade penalties\" is "
                f"on ({MOODLE_LATE_SETTING}): turn it off for this assignment, or export with "
                f"--late lms to leave the penalty to Moodle."]
        return [], [f"Late penalty: taken by the kit: {what}; score is after it, raw_score "
                    f"before it, penalty what it took."]
    # late == "lms": the LMS decides, from its own times, due dates and extensions.
    pages = (" The feedback pages (written by grade) still show the kit's penalty."
             if penalised else "")
    if to == "canvas":
        return [], [
            f"Late penalty: left to Canvas (--late lms): grades.csv has the scores BEFORE the "
            f"kit's late penalty (raw_score){'; ' + what if kit else ''}. Canvas's automatic "
            f"late deduction takes it as the grades are imported, from Canvas's own submission "
            f"times, due dates and assignment overrides, not the kit's times or extensions; "
            f"with that deduction off ({CANVAS_LATE_TAB}) no late penalty is taken at "
            f"all.{pages}"]
    if to == "moodle" and route == "gradebook":
        if kit:
            raise ValueError(
                f"--late lms with --moodle-route gradebook would take no late penalty at all "
                f"({what}): Moodle's gradebook import sets the gradebook's grade directly, "
                f"outside the assignment and its \"Grade penalties\". Export with --late kit "
                f"(the scores after the kit's penalty), or with the worksheet route.")
        return [], ["Late penalty: none: the kit has no late policy for this lab, and Moodle's "
                    "gradebook import takes none."]
    if to == "moodle":
        return [], [
            f"Late penalty: left to Moodle (--late lms): the worksheet has the scores BEFORE "
            f"the kit's late penalty (raw_score){'; ' + what if kit else ''}. Moodle takes "
            f"one only from 5.0, when the assignment's \"Grade penalties\" is on "
            f"({MOODLE_LATE_SETTING}), from Moodle's own due dates and extensions; otherwise "
            f"no late penalty is taken at all.{pages}"]
    return [], [f"Late penalty: not in score (--late lms): score is raw_score, before the "
                f"kit's late penalty; penalty is what the kit's policy would take"
                f"{' (' + what + ')' if kit else ''}."]


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


# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------


def _score(row: ClassRow, value: float) -> str:
    """A score cell: 0 for a student who submitted nothing."""
    return "0" if row.status == NO_SUBMISSION else format_score(value)


def _value(row: ClassRow, late: str) -> float:
    """The score exported: after the kit's late penalty ("kit") or before it ("lms")."""
    return row.score if late == "kit" else row.raw_score


def _late_hours(row: ClassRow) -> str:
    return f"{row.late_seconds / 3600:.2f}" if row.late_seconds and row.late_seconds > 0 else ""


def _who(row: ClassRow) -> str:
    name = clean_text(row.student.name, keep_lines=False).strip()
    return f"{row.student.student_id} ({name})" if name else row.student.student_id


def _list(rows: list[ClassRow], most: int = 10) -> str:
    shown = ", ".join(_who(r) for r in rows[:most])
    return shown + (f" and {len(rows) - most} more" if len(rows) > most else "")


def _refuse_missing(rows: list[ClassRow], what: str, how: str) -> None:
    if rows:
        raise ValueError(f"{len(rows)} student(s) have no {what}, so the LMS cannot import "
                         f"their rows: {', '.join(_who(r) for r in rows)}. {how}")


def _refuse_duplicates(rows: list[ClassRow], key, what: str) -> None:
    seen: dict[str, ClassRow] = {}
    for row in rows:
        value = key(row)
        if value in seen:
            raise ValueError(f"{_who(seen[value])} and {_who(row)} have the same {what} "
                             f"{value!r}: the LMS would give both grades to one person. Fix the "
                             f"roster so that each student's {what} is their own, and grade again.")
        seen[value] = row


def _feedback_page(out_dir: Path, row: ClassRow, exported: Exported) -> Path | None:
    """The row's feedback page, or None (with the reason in ``skipped``) when it has none."""
    if row.status == NO_SUBMISSION:
        return None
    sid = row.student.student_id
    if not row.feedback:
        exported.skipped.append((sid, f"no feedback page (status: {row.status})"))
        return None
    root = out_dir.resolve()
    page = (root / row.feedback).resolve()
    if not page.is_relative_to(root):
        exported.skipped.append((sid, f"its feedback page {row.feedback!r} is outside {out_dir}"))
        return None
    if not page.is_file():
        exported.skipped.append((sid, f"its feedback page {row.feedback} is missing; grade "
                                      f"again to rewrite it"))
        return None
    return page


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _zip(path: Path, members: list[tuple[str, Path]]) -> Path:
    """Write ``members`` (name in the zip, file) into a new zip at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, source in members:
            archive.write(source, name)
    return path


def _ascii_letters(text: str) -> str:
    """Lower-case ASCII letters and digits of ``text`` (accents dropped)."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]", "", plain.lower())


def feedback_text(row: ClassRow, late: str = "kit") -> str:
    """The feedback comment of a row, as plain text (Moodle's feedback column).

    With ``late="lms"`` the score is the one before the kit's late penalty,
    and the lateness is said without a penalty (the LMS takes it).

    >>> r = ClassRow(student=None, lab="lab1", score=6, raw_score=7, max_score=10,
    ...              status="graded", late_seconds=7200, penalty=1,
    ...              exercises=[{"exercise": "ex1", "score": 2, "max_score": 2, "message": ""}])
    >>> print(feedback_text(r))
    Score: 6/10
    Late penalty: 1 (submitted 2.00 hours late)
    ex1: 2/2
    >>> print(feedback_text(r, late="lms"))
    Score: 7/10
    Submitted 2.00 hours late (the late penalty is the LMS's to take)
    ex1: 2/2
    """
    if row.status == NO_SUBMISSION:
        return f"No submission: 0/{format_score(row.max_score)}"
    score = row.score if late == "kit" else row.raw_score
    lines = [f"Score: {format_score(score)}/{format_score(row.max_score)}"]
    if row.status != "graded":
        lines.append(f"Status: {row.status}")
    late_hours = _late_hours(row)
    if row.penalty and late == "kit":
        lines.append(f"Late penalty: {format_score(row.penalty)}"
                     + (f" (submitted {late_hours} hours late)" if late_hours else ""))
    elif row.penalty and late_hours:
        lines.append(f"Submitted {late_hours} hours late (the late penalty is the LMS's to take)")
    for x in row.exercises:
        line = f"{x.get('exercise', '')}: {format_score(x.get('score'))}/" \
               f"{format_score(x.get('max_score'))}"
        properties = x.get("properties") or []
        message = (str(x.get("message") or "").strip().splitlines() or [""])[0]
        if message and not properties:
            line += " - " + _cut(message)
        lines.append(line)
        lines.extend(_property_lines(properties))
    return "\n".join(lines)


def _cut(message: str) -> str:
    """``message`` within MESSAGE_WIDTH characters, cut after a word ("...")."""
    return message if len(message) <= MESSAGE_WIDTH \
        else cut_words(message, MESSAGE_WIDTH - 3, "...")


def _property_lines(properties: list[dict]) -> list[str]:
    """An exercise's graded properties in a text comment, one line each:
    "  ✓ sentence (0.5/0.5)", "  ✗ sentence (0/2.75): message" (the
    message's first line, cut after a word; the framework's details left
    out; an error an earlier property met: "the same error as above")."""
    lines = []
    for p in properties:
        score, points = p.get("score") or 0, p.get("max_score") or 0
        mark = "\u2713" if score >= points else "\u2717"
        line = (f"  {mark} {p.get('sentence') or p.get('test', '')} "
                f"({format_score(score)}/{format_score(points)})")
        message = (str(p.get("message") or "").strip().splitlines() or [""])[0]
        if score < points and p.get("same_as"):
            line += ": the same error as above"
        elif score < points and message:
            line += ": " + _cut(message)
        lines.append(line)
    return lines


def feedback_html(row: ClassRow, late: str = "kit") -> str:
    """``feedback_text`` as the HTML Moodle stores a feedback comment in: each line
    escaped, ``<br>`` between lines (no raw quote, so no CSV quoting surprise).

    >>> r = ClassRow(student=None, lab="lab1", score=1, raw_score=1, max_score=2,
    ...              status="graded", exercises=[{"exercise": "ex1", "score": 1,
    ...              "max_score": 2, "message": 'shape (2, 3) != "(3, 2)" & <b>'}])
    >>> print(feedback_html(r))
    Score: 1/2<br>ex1: 1/2 - shape (2, 3) != &quot;(3, 2)&quot; &amp; &lt;b&gt;
    """
    text = clean_text(feedback_text(row, late))
    return "<br>".join(html.escape(line, quote=False).replace('"', "&quot;")
                       for line in text.split("\n"))


# --------------------------------------------------------------------------
# Canvas
# --------------------------------------------------------------------------

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
#: A first cell Canvas's importer reads as its points row (gradebook_importer.rb
#: ``check_for_non_student_row``: ``row[0]&.include?("Points Possible")``),
#: matched here in any case and spacing, to be safe.
CANVAS_POINTS_CELL = re.compile(r"points\s*possible", re.IGNORECASE)
#: Canvas's assignment column as its gradebook export writes it (title_with_id).
CANVAS_ASSIGNMENT = re.compile(r"^.+ \((\d+)\)$")


def _canvas_name(row: ClassRow) -> str:
    """The name part of a Canvas download's file name ("doejane"), never only digits."""
    identity = row.identity
    source = identity.name if identity is not None and identity.source == "canvas" else ""
    name = _ascii_letters(source or row.student.name)
    return name if name and not name.isdigit() else "student"


def _canvas_student_cell(row: ClassRow, user_id: str, exported: Exported) -> str:
    """The Student cell of a row: the name, unless Canvas would read that row as
    its points row (or the name is empty); then "Student <user id>", which
    Canvas never reads, finding the student by the ID column."""
    name = csv_text(row.student.name)
    if name.strip() and not CANVAS_POINTS_CELL.search(name):
        return name
    cell = f"Student {user_id}"
    why = ("Canvas's importer takes a row whose first cell holds \"Points Possible\" as its "
           "points row" if name.strip() else "the name is empty")
    exported.notes.append(f"The Student cell of {_who(row)} is written {cell!r}: {why}; "
                          f"Canvas finds the student by the ID column ({user_id}).")
    return cell


def _lab_key(text: str) -> str:
    """Lower-case words of ``text`` ("Lab 1: Attention" -> "lab 1 attention")."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return " ".join(re.sub(r"[^a-z0-9]+", " ", plain.lower()).split())


def _names_lab(column: str, lab_id: str, lab_title: str) -> bool:
    """Whether a "Name (id)" column is this lab's: its name is the lab's title (or
    the title's part before ":"), or says "Lab <n>" with the lab's number."""
    name = _lab_key(column.rsplit(" (", 1)[0])
    titles = {_lab_key(lab_title), _lab_key(lab_title.split(":")[0]), _lab_key(lab_id)} - {""}
    number = re.search(r"(\d+)$", lab_id)
    return name in titles or bool(number and re.search(
        rf"\blab\s*0*{int(number.group(1))}\b", name))


def canvas_assignment(info: dict, lab_id: str) -> tuple[str, str]:
    """The default assignment column for Canvas, and a note for the instructor.

    The roster's (class.json's ``roster_assignments``) "Name (id)" column of
    this lab when exactly one is (by the lab's number or title: "Lab 1
    (4321)" for lab1 "Lab 1: Attention"); the lab's title when the roster
    has no assignment column at all (Canvas then creates an assignment).

    Raises:
        ValueError: the roster has assignment columns and none, or several,
            are this lab's; the message lists them.
    """
    title = (info.get("lab_title") or lab_id).strip()
    columns = [c for c in info.get("roster_assignments") or [] if CANVAS_ASSIGNMENT.match(c)]
    if not columns:
        roster = ("the roster has no" if info.get("roster_lms") == "canvas"
                  else "the class was not graded with Canvas's gradebook export, so it has no")
        return title, (f"Assignment column: {title!r}, the lab's title: {roster} assignment "
                       f"column (\"Name (id)\"), and Canvas's import creates a NEW assignment "
                       f"{title!r}. To fill the assignment you made in Canvas, export with "
                       f"--assignment \"Name (id)\" as the gradebook's export heads its column.")
    mine = [c for c in columns if _names_lab(c, lab_id, title)]
    if len(mine) == 1:
        return mine[0], (f"Assignment column: {mine[0]!r}, the roster's column of {lab_id} "
                         f"(--assignment to choose another).")
    listed = ", ".join(repr(c) for c in columns)
    raise ValueError(
        f"The roster's assignment columns are {listed}: "
        f"{'several' if mine else 'none'} of them {'name' if mine else 'names'} {lab_id} "
        f"({title!r}). Give the assignment's column with --assignment \"Name (id)\", "
        f"e.g. --assignment {columns[0]!r}.")


def _canvas(out_dir: Path, rows: list[ClassRow], assignment: str, dest: Path,
            exported: Exported) -> None:
    _refuse_missing([r for r in rows if not str(r.student.lms_ids.get("id", "")).strip()],
                    "Canvas user id (ID)",
                    "Grade the lab with a Canvas roster (--roster the gradebook's export, "
                    "Grades > Export) so that every student has one.")
    _refuse_duplicates(rows, lambda r: str(r.student.lms_ids["id"]).strip(), "Canvas user id")
    max_score = max(r.max_score for r in rows)
    table = [["Points Possible", "", "", "", "", format_score(max_score)]]
    members: list[tuple[str, Path]] = []
    for row in rows:
        ids = row.student.lms_ids
        user_id = str(ids["id"]).strip()
        table.append([_canvas_student_cell(row, user_id, exported), csv_text(user_id),
                      csv_text(ids.get("sis_user_id", "")), csv_text(ids.get("sis_login_id", "")),
                      csv_text(row.student.section), _score(row, _value(row, exported.late))])
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        identity = row.identity
        file_id = identity.submission_id if identity is not None and identity.source == "canvas" \
            else ""
        if not file_id.isdigit():
            exported.skipped.append((row.student.student_id,
                                     "no Canvas submission file id (the file did not come from "
                                     "Canvas's Download Submissions): upload its page by hand"))
            continue
        members.append((f"{_canvas_name(row)}_{user_id}_{file_id}_feedback.html", page))
    header = CANVAS_COLUMNS + [csv_text(assignment)]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    exported.files["feedback.zip"] = _zip(dest / "feedback.zip", members)
    exported.grades, exported.feedback = len(rows), len(members)


# --------------------------------------------------------------------------
# Moodle
# --------------------------------------------------------------------------


def _moodle_key(row: ClassRow, moodle_key: str) -> str:
    if moodle_key == "email":
        return (row.student.email or "").strip()
    return str(row.student.lms_ids.get("id_number", "")).strip()


def _participant(row: ClassRow) -> tuple[str, str]:
    """(full name, participant id) of a row as Moodle's download names them."""
    identity = row.identity if row.identity is not None and row.identity.source == "moodle" \
        else None
    participant = str(row.student.lms_ids.get("participant", "")).strip()
    if not participant and identity is not None:
        participant = identity.user_id.strip()
    name = (identity.name if identity is not None and identity.name else row.student.name)
    # Moodle splits the folder name on "_" and reads the participant id second.
    name = re.sub(r"\s+", " ", re.sub(r"[_/\\:*?\"<>|]", " ",
                                      clean_text(name, keep_lines=False))).strip()
    return name or "Participant", participant


def _moodle_pages(out_dir: Path, rows: list[ClassRow], exported: Exported) -> None:
    """feedback.zip: a folder per participant, as Moodle's "Download all submissions"."""
    members, used = [], set[str]()
    for row in rows:
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        name, participant = _participant(row)
        if not participant.isdigit():
            exported.skipped.append((row.student.student_id,
                                     "no Moodle participant id (roster or Moodle download): "
                                     "upload its page by hand"))
            continue
        folder = unique_name(f"{name}_{participant}_assignsubmission_file_", used)
        members.append((f"{folder}/{FEEDBACK_NAME}", page))
    exported.files["feedback.zip"] = _zip(exported.dest / "feedback.zip", members)
    exported.feedback = len(members)


def _moodle_gradebook(out_dir: Path, rows: list[ClassRow], assignment: str, dest: Path,
                      exported: Exported, moodle_key: str) -> None:
    column = MOODLE_KEYS[moodle_key]
    _refuse_missing([r for r in rows if not _moodle_key(r, moodle_key)], column.lower(),
                    f"Moodle finds each student by their {column.lower()}: grade the lab with a "
                    f"Moodle roster that has it (--roster), or export with --moodle-key "
                    f"{'id_number' if moodle_key == 'email' else 'email'}.")
    mangled = [r for r in rows
               if csv_text(_moodle_key(r, moodle_key)) != _moodle_key(r, moodle_key)]
    if mangled:
        raise ValueError(
            f"The {column.lower()} of {', '.join(_who(r) for r in mangled)} starts with a "
            f"character a spreadsheet runs as a formula (= + - @) or holds a control character: "
            f"written safely it would no longer match in Moodle. Export with --moodle-key "
            f"{'id_number' if moodle_key == 'email' else 'email'}, or correct it in the roster.")
    _refuse_duplicates(rows, lambda r: _moodle_key(r, moodle_key).lower(), column.lower())
    table = [[csv_text(row.student.name), csv_text(_moodle_key(row, moodle_key)),
              _moodle_grade(row, exported),
              csv_text(feedback_text(row, exported.late))] for row in rows]
    header = ["Full name", column, csv_text(assignment), csv_text(f"{assignment} (Feedback)")]
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", header, table)
    exported.grades = len(rows)
    _moodle_pages(out_dir, rows, exported)


def _gradebook_checks(info: dict, rows: list[ClassRow], assignment: str,
                      worksheet: Path | None, exported: Exported) -> None:
    """The gradebook route's Maximum grade and the grades it replaces: from the
    assignment's grading worksheet (``worksheet``, or the roster when it was
    one: its ``Maximum grade`` and ``Grade``), else from Moodle's gradebook
    export as roster (the item's "(Real)" column; it has no maximum)."""
    source = _max_grade_source(info, worksheet)
    if worksheet is not None and source is None:
        raise ValueError(f"The grading worksheet {worksheet} (--worksheet) is not a file: give "
                         f"the CSV that {MOODLE_ACTIONS} > Download grading worksheet wrote.")
    written = {id(row): _moodle_grade(row, exported) for row in rows}
    if source is None:
        _check_maximum(exported, None, "", exported.lab_max, "gradebook")
        held, where = _roster_held(info, rows, assignment, exported)
        _replaced_note(rows, held, written, where, exported)
        return
    try:
        header, records = _read_table(source)
    except (OSError, ValueError) as error:
        raise ValueError(f"{source}: the grading worksheet cannot be read ({error}); download "
                         f"it again ({MOODLE_ACTIONS} > Download grading worksheet) and give "
                         f"it with --worksheet.") from None
    if _column(header, WORKSHEET_ID) is None:
        raise ValueError(f"{source} is not Moodle's grading worksheet (no Identifier column): "
                         f"{_GRADE_WORKSHEET_HOW}.")
    _check_maximum(exported, _worksheet_maximum(header, records),
                   f"the grading worksheet {source.name}", exported.lab_max, "gradebook")
    held = _held_in(source, "moodle worksheet", rows)
    _replaced_note(rows, held, written, f"Moodle (the grading worksheet {source.name}, as "
                                        f"downloaded)", exported)


#: The grading worksheet's columns Moodle's upload reads, by their English
#: names (mod/assign/lang/en/assign.php 'recordid', core 'gradenoun',
#: 'lastmodifiedgrade'; the comments plugin's 'pluginname'); "Participant " is
#: 'hiddenuser', stripped from the Identifier (importgradeslib.php ``next()``).
WORKSHEET_ID, WORKSHEET_GRADE = "Identifier", "Grade"
WORKSHEET_MODIFIED, WORKSHEET_FEEDBACK = "Last modified (grade)", "Feedback comments"
WORKSHEET_REQUIRED = (WORKSHEET_ID, WORKSHEET_GRADE, WORKSHEET_MODIFIED)
_WORKSHEET_PARTICIPANT = re.compile(r"(\d+)\s*$")
_GRADE_WORKSHEET_HOW = ("grade the lab with the assignment's grading worksheet as --roster (" +
                        MOODLE_ACTIONS + " > Download grading worksheet), or give it with "
                        "--worksheet FILE")


def _worksheet_source(info: dict, worksheet: Path | None) -> Path:
    if worksheet is not None:
        source = Path(worksheet)
        if not source.is_file():
            raise ValueError(f"The grading worksheet {source} (--worksheet) is not a file: give "
                             f"the CSV that {MOODLE_ACTIONS} > Download grading worksheet wrote.")
        return source
    if info.get("roster_kind") != "moodle worksheet":
        graded = (f"the roster was {info['roster_kind']!r} ({info.get('roster_file')})"
                  if info.get("roster_kind") else "the lab was graded without a roster")
        raise ValueError(
            f"Moodle's route is the assignment's grading worksheet, filled in, and {graded}: "
            f"{_GRADE_WORKSHEET_HOW}. Or export with --moodle-route gradebook for the "
            f"gradebook's CSV import (its grades become overrides in the gradebook).")
    source = Path(info.get("roster_file") or "")
    if not source.is_file():
        raise ValueError(f"The grading worksheet the lab was graded with ({source}) is not there "
                         f"any more: give it with --worksheet FILE (the same file, or one "
                         f"downloaded again).")
    return source


def _moodle_worksheet(out_dir: Path, rows: list[ClassRow], info: dict, dest: Path,
                      exported: Exported, worksheet: Path | None) -> None:
    """The assignment's grading worksheet, as downloaded, with Grade and Feedback
    comments filled in for each student of the class (see the module)."""
    from autograder.term.roster import _decode, read_roster

    source = _worksheet_source(info, worksheet)
    roster = read_roster(source)
    if roster.kind != "moodle worksheet":
        raise ValueError(f"{source} is not Moodle's grading worksheet (it reads as a "
                         f"{roster.kind!r}): {_GRADE_WORKSHEET_HOW}.")
    participants = {id(row): _participant(row)[1] for row in rows}
    _refuse_missing([r for r in rows if not participants[id(r)].isdigit()],
                    "Moodle participant id",
                    f"Moodle's worksheet finds a student by \"Participant <id>\": "
                    f"{_GRADE_WORKSHEET_HOW}.")
    _refuse_duplicates(rows, lambda r: participants[id(r)], "Moodle participant id")
    data = source.read_bytes()
    decoding: list[str] = []
    text = _decode(source, data, decoding)
    exported.notes += [f"{source.name}: {note}" for note in decoding]
    records = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=roster.delimiter)
               if any(cell.strip() for cell in r)]
    header = records[0]
    missing = [name for name in WORKSHEET_REQUIRED if name not in header]
    if missing:
        raise ValueError(
            f"{source}: the worksheet has no {' or '.join(repr(m) for m in missing)} column, "
            f"named exactly so: Moodle's upload finds Identifier, Grade and Last modified "
            f"(grade) by name and refuses a file without them (mod/assign/feedback/offline/"
            f"importgradeslib.php). Download the grading worksheet again (in English) and "
            f"give it with --worksheet.")
    at = {name: header.index(name) for name in WORKSHEET_REQUIRED}
    feedback_at = header.index(WORKSHEET_FEEDBACK) if WORKSHEET_FEEDBACK in header else None
    by_participant = {participants[id(row)]: row for row in rows}
    filled: dict[str, ClassRow] = {}
    held: dict[int, tuple[str, str]] = {}
    written: dict[int, str] = {}
    comments: dict[str, str] = {}
    others = 0
    for line, record in enumerate(records[1:], 2):
        if len(record) > len(header):
            raise ValueError(f"{source}: row {line} has {len(record)} cells and the header "
                             f"{len(header)}; Moodle refuses such a file. Download the grading "
                             f"worksheet again.")
        record.extend([""] * (len(header) - len(record)))
        number = _WORKSHEET_PARTICIPANT.search(record[at[WORKSHEET_ID]])
        row = by_participant.get(number.group(1)) if number else None
        if row is None:
            others += 1
            continue
        filled[participants[id(row)]] = row
        if _holds_grade(record[at[WORKSHEET_GRADE]]):
            held[id(row)] = (record[at[WORKSHEET_GRADE]], record[at[WORKSHEET_MODIFIED]])
        record[at[WORKSHEET_GRADE]] = written[id(row)] = _moodle_grade(row, exported)
        if feedback_at is not None:
            record[feedback_at] = csv_text(feedback_html(row, exported.late))
            comments[participants[id(row)]] = _digest(record[feedback_at].encode())[:16]
    absent = [row for row in rows if participants[id(row)] not in filled]
    if absent:
        raise ValueError(
            f"{len(absent)} student(s) of the class are not in the worksheet {source.name}: "
            f"{_list(absent)}. It is another assignment's, or older than their enrolment: "
            f"download the grading worksheet again and give it with --worksheet.")
    for record in records:
        record[:] = [re.sub(r"\r\n?", "\n", cell) for cell in record]
    path = dest / source.name
    bom = data.startswith(b"\xef\xbb\xbf")
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(records)
    exported.files[source.name] = path
    exported.grades = len(filled)
    exported.steps = [step.replace("{worksheet}", source.name) for step in exported.steps]
    _worksheet_notes(source, roster.delimiter, header, records, rows, feedback_at, others,
                     exported)
    # Moodle never sets a 0 from the worksheet (see the notes): those rows replace nothing.
    _replaced_note(rows, held, {k: v for k, v in written.items() if v != "0"},
                   f"Moodle (the grading worksheet {source.name}, as downloaded)", exported)
    digest = _digest(data)
    grades = {participants[id(row)]: written[id(row)] for row in rows}
    earlier = _earlier_export(out_dir, digest)
    if earlier is not None:
        _second_upload(source, earlier, rows, participants, grades, comments, exported)
    _record_export(out_dir, {
        "worksheet": source.name, "source": str(source), "source_sha256": digest,
        "written": str(path), "written_sha256": _digest(path.read_bytes()),
        "exported_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "late": exported.late, "grades": grades, "feedback": comments})


def _worksheet_notes(source: Path, delimiter: str, header: list[str], records: list[list[str]],
                     rows: list[ClassRow], feedback_at: int | None, others: int,
                     exported: Exported) -> None:
    """What Moodle will not do with the worksheet as written, said before the upload."""
    zeros = [r for r in rows if _moodle_grade(r, exported) == "0"]
    if zeros:
        exported.notes.append(
            f"{len(zeros)} student(s) have the grade 0 in the worksheet: {_list(zeros)}. "
            f"Moodle's worksheet upload never sets a grade of 0 (mod/assign/feedback/offline/"
            f"locallib.php process_import_grades sets a grade only when it is not zero); their "
            f"feedback is uploaded. Enter those zeros in Moodle (the grader, or quick grading).")
    if feedback_at is None:
        exported.notes.append(
            f"{source.name} has no \"Feedback comments\" column (the assignment's feedback "
            f"comments are off): only the grades go into Moodle this way; the feedback pages "
            f"go with feedback.zip. Turn \"Feedback comments\" on and download the worksheet "
            f"again to have the comments too.")
    _check_maximum(exported, _worksheet_maximum(header, records[1:]), source.name,
                   exported.lab_max, "worksheet")
    if others:
        exported.notes.append(
            f"{others} row(s) of {source.name} are participants this class does not have "
            f"(graded without them); they are left as downloaded, and Moodle changes nothing "
            f"for a row whose Grade is empty or unchanged.")
    if delimiter != ",":
        exported.notes.append(f"{source.name} was {delimiter!r}-separated; it is written with "
                              f"commas, as Moodle downloads it and its upload reads by default.")


# --------------------------------------------------------------------------
# What the LMS holds already: the grades an export replaces, the grade's maximum
# --------------------------------------------------------------------------


def _number(cell: str) -> float | None:
    """A grade cell as a number ("9.00", "9,5", "7"), None when it is none."""
    text = cell.strip().replace("\u00a0", "").replace(" ", "")
    if text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")  # Moodle's format_float in a decimal-comma locale
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _holds_grade(cell: str) -> bool:
    """Whether an LMS's grade cell holds a grade: not blank, not "-" (no grade in
    Canvas's and Moodle's exports, and in their importers)."""
    return cell.strip() not in ("", "-")


def _differs(held: str, written: str) -> bool:
    """Whether writing ``written`` over the LMS's ``held`` changes the grade."""
    old, new = _number(held), _number(written)
    if old is not None and new is not None:
        return abs(old - new) > 0.005  # both LMSs keep two decimals
    return held.strip().casefold() != written.strip().casefold()  # "EX", a letter


def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a roster file as the LMS wrote it, cells stripped.

    Raises:
        ValueError: the file is not a roster read_roster reads.
    """
    from autograder.term.roster import _decode, read_roster

    roster = read_roster(path)
    text = _decode(path, path.read_bytes(), [])
    records = [[clean_text(cell, keep_lines=False).strip() for cell in record]
               for record in csv.reader(io.StringIO(text, newline=""),
                                        delimiter=roster.delimiter)]
    records = [r for r in records if any(r)]
    return records[0], records[1:]


def _column(header: list[str], name: str) -> int | None:
    lower = [h.casefold() for h in header]
    return lower.index(name.casefold()) if name.casefold() in lower else None


#: A grade item's column in Moodle's gradebook export (grade/export/lib.php
#: ``format_column_name``: the module's name, ``labelsep`` ": ", the item's name,
#: then " (Real)", " (Percentage)" or " (Letter)" by display type).
_MOODLE_ITEM_COLUMN = re.compile(r"^(?:[^:]+: )?(?P<name>.+) \((?P<kind>Real)\)$")


def _moodle_item_column(header: list[str], assignment: str, lab: str,
                        title: str) -> int | None:
    """The "(Real)" column of Moodle's gradebook export that is this lab's grade
    item: named ``assignment`` exactly, else the one naming the lab."""
    items = [(i, m.group("name")) for i, h in enumerate(header)
             if (m := _MOODLE_ITEM_COLUMN.match(h))]
    exact = [i for i, name in items if name.strip() == assignment.strip()]
    if len(exact) == 1:
        return exact[0]
    mine = [i for i, name in items if _names_lab(f"{name} (0)", lab, title)]
    return mine[0] if len(mine) == 1 else None


def _held_in(path: Path, kind: str, rows: list[ClassRow], column: str | None = None,
             lab: str = "", title: str = "") -> dict[int, tuple[str, str]]:
    """What an LMS file says each row's grade is: id(row) -> (grade cell, Moodle's
    "Last modified (grade)" or ""), for the rows it lists with a grade.

    ``kind`` is the roster kind: "canvas gradebook" (the student by the ID
    column, the grade in ``column``, the assignment's "Name (id)"), "moodle
    worksheet" (by "Participant N", the ``Grade`` column) or "moodle gradebook"
    (by email, ID number or username; the grade item's "(Real)" column named
    ``column`` or naming the lab).
    """
    header, records = _read_table(path)
    at: int | None
    if kind == "canvas gradebook":
        at = _column(header, column or "")
        key_at = _column(header, "ID")

        def keys(row: ClassRow) -> list[str]:
            return [str(row.student.lms_ids.get("id", "")).strip()]
    elif kind == "moodle worksheet":
        at, key_at = _column(header, WORKSHEET_GRADE), _column(header, WORKSHEET_ID)

        def keys(row: ClassRow) -> list[str]:
            return [f"Participant {_participant(row)[1]}"]
    elif kind == "moodle gradebook":
        at = _moodle_item_column(header, column or title, lab, title)
        found = [_column(header, name) for name in ("Email address", "ID number", "Username")]
        key_at = None
        if at is None:
            return {}
        by: dict[str, tuple[str, str]] = {}
        for record in records:
            for index in found:
                if index is not None and index < len(record) and record[index] and \
                        at < len(record):
                    by.setdefault(record[index].casefold(), (record[at], ""))
        held = {}
        for row in rows:
            for key in (row.student.email, row.student.lms_ids.get("id_number", ""),
                        row.student.lms_ids.get("username", "")):
                if key and key.casefold() in by and _holds_grade(by[key.casefold()][0]):
                    held[id(row)] = by[key.casefold()]
                    break
        return held
    else:
        return {}
    if at is None or key_at is None:
        return {}
    modified_at = _column(header, WORKSHEET_MODIFIED)
    by = {}
    for record in records:
        if max(at, key_at) < len(record):
            when = record[modified_at] if modified_at is not None and \
                modified_at < len(record) else ""
            key = record[key_at]
            if kind == "moodle worksheet":
                number = _WORKSHEET_PARTICIPANT.search(key)
                key = f"Participant {number.group(1)}" if number else key
            by.setdefault(key, (record[at], when))
    held = {}
    for row in rows:
        for key in keys(row):
            if key in by and _holds_grade(by[key][0]):
                held[id(row)] = by[key]
    return held


def _roster_held(info: dict, rows: list[ClassRow], column: str | None,
                 exported: Exported) -> tuple[dict[int, tuple[str, str]], str]:
    """The grades the roster ``grade`` read holds for this lab, and where they are
    ("" and nothing when the roster has no column of the lab, or is gone)."""
    kind, source = info.get("roster_kind") or "", Path(info.get("roster_file") or "")
    if kind not in ("canvas gradebook", "moodle worksheet", "moodle gradebook"):
        return {}, ""
    if not source.is_file():
        exported.notes.append(
            f"The roster the lab was graded with ({source}) is not there any more, so the "
            f"export cannot say which grades already in the LMS it replaces: check the "
            f"LMS's column for grades a TA entered before importing.")
        return {}, ""
    try:
        held = _held_in(source, kind, rows, column, info.get("lab", ""),
                        info.get("lab_title") or "")
    except (OSError, ValueError) as error:
        exported.notes.append(f"The roster {source} cannot be read again ({error}), so the "
                              f"export cannot say which grades already in the LMS it replaces.")
        return {}, ""
    where = {"canvas gradebook": f"Canvas (the roster {source.name}, column {column!r}, as "
                                 f"exported: grades entered since are not in it)",
             "moodle worksheet": f"Moodle (the grading worksheet {source.name}, as downloaded)",
             "moodle gradebook": f"Moodle's gradebook (the roster {source.name}, as "
                                 f"exported)"}[kind]
    return held, where


def _replaced_note(rows: list[ClassRow], held: dict[int, tuple[str, str]],
                   written: dict[int, str], where: str, exported: Exported,
                   what: str = "this export replaces", most: int = 10) -> None:
    """List, under "Read first", each student whose grade in the LMS the export
    replaces with another one (``Exported.replaced`` keeps them all)."""
    replaced = [(row, held[id(row)], written[id(row)]) for row in rows
                if id(row) in held and id(row) in written
                and _differs(held[id(row)][0], written[id(row)])]
    if not replaced:
        return
    exported.replaced = [(row.student.student_id, old, new) for row, (old, _), new in replaced]

    def item(row: ClassRow, old: str, when: str, new: str) -> str:
        since = f" (Last modified (grade): {when})" if when.strip() not in ("", "-") else ""
        return f"{_who(row)}: {clean_text(old, keep_lines=False)}{since} -> {new}"

    shown = "; ".join(item(row, old, when, new) for row, (old, when), new in replaced[:most])
    more = f"; and {len(replaced) - most} more" if len(replaced) > most else ""
    exported.notes.append(
        f"{len(replaced)} student(s) already have another grade in {where}, which {what} "
        f"(the LMS's grade -> the export's): {shown}{more}. A TA may have "
        f"entered them: check each before importing. Where the LMS's grade should stay, "
        f"write it into the file's cell (a blank cell removes a grade in Canvas), or put the "
        f"TA's scores in OUT/overrides.csv and grade again (--only the student).")


def _max_grade_source(info: dict, worksheet: Path | None) -> Path | None:
    """The grading worksheet that says the assignment's Maximum grade: ``worksheet``,
    else the roster when it was one (None when neither is there)."""
    if worksheet is not None and Path(worksheet).is_file():
        return Path(worksheet)
    if info.get("roster_kind") == "moodle worksheet":
        source = Path(info.get("roster_file") or "")
        return source if source.is_file() else None
    return None


def _worksheet_maximum(header: list[str], records: list[list[str]]) -> str | None:
    """The worksheet's "Maximum grade" cell (the same on every row), None when absent."""
    at = next((i for i, h in enumerate(header) if h.casefold() == "maximum grade"), None)
    if at is None:
        return None
    return next((r[at].strip() for r in records if at < len(r) and r[at].strip()), None)


#: Where an assignment's Maximum grade is set in Moodle (mod/assign/mod_form.php:
#: the "Grade" section's modgrade element, 'modgrademaxgrade' "Maximum grade").
MOODLE_MAX_SETTING = "the assignment > Settings > Grade > Maximum grade"


def _check_maximum(exported: Exported, moodle_max: str | None, where: str, lab_max: float,
                   route: str) -> None:
    """Say what Moodle will make of the grades given its Maximum grade.

    ``moodle_max`` is the Maximum grade a worksheet says (None when the kit has
    no way to know it); ``exported.max_grade`` the one stated with --max-grade
    (the grades are then scaled to it). The worksheet's upload skips a grade
    above the maximum (mod/assign/feedback/offline/locallib.php
    ``process_import_grades``: "Out of range"); the gradebook's CSV import stores
    the number as is (grade/import/csv/classes/load_data.php
    ``update_grade_item``: ``unformat_float``), clamped to the item's range
    (lib/grade/grade_item.php ``update_final_grade``: ``bounded_grade``), so
    14.5 into a 100-point item is 14.5 of 100 and nothing says so.
    """
    lab = format_score(lab_max)
    known = _number(moodle_max) if moodle_max is not None else None
    stated = exported.max_grade
    thing = ("the assignment's Maximum grade" if route == "worksheet"
             else "the grade item's Maximum grade (the assignment's, for its item)")
    if stated is not None:
        if known is not None and abs(known - stated) > 1e-9:
            exported.notes.append(
                f"Maximum grade: {where} says {moodle_max}, and --max-grade says "
                f"{format_score(stated)}: the grades are written for {format_score(stated)}, "
                f"as stated. If Moodle's is still {moodle_max} ({MOODLE_MAX_SETTING}), "
                f"export again with --max-grade {format_score(known)} or change it in Moodle.")
        if abs(stated - lab_max) > 1e-9:
            exported.notes.append(
                f"Grades scaled to Moodle's Maximum grade {format_score(stated)} "
                f"(--max-grade): each is the lab's score x {format_score(stated)} / {lab}, to "
                f"two decimals; the feedback keeps the lab's points (Score: .../{lab}).")
        return
    if known is not None:
        if abs(known - lab_max) <= 1e-9:
            return
        full = f"{lab} of {lab} here is {lab} of {format_score(known)} in Moodle"
        if route == "worksheet":
            verb = (f"stores each grade as is, with no warning ({full})" if known > lab_max
                    else "skips a grade above its maximum, without a word, and does not "
                         "rescale")
        else:
            verb = (f"stores each number as is, with no warning ({full})" if known > lab_max
                    else "stores each number as is, and a grade above the maximum as the "
                         "maximum")
        if route == "worksheet":
            exported.notes.append(
                f"Moodle's Maximum grade for this assignment is {moodle_max}, and the lab has "
                f"{lab} points: Moodle {verb}. Set the assignment's Maximum grade to {lab} "
                f"before uploading, or export again with --max-grade {format_score(known)} to "
                f"write the grades scaled to {format_score(known)}.")
        else:
            exported.notes.append(
                f"Moodle's Maximum grade for this assignment's grade item is {moodle_max} "
                f"({where}), and the lab has {lab} points: the gradebook's CSV import {verb}. "
                f"Set it to {lab} before importing, or export again with --max-grade "
                f"{format_score(known)} to write the grades scaled to {format_score(known)}.")
        exported.steps.insert(0, (
            f"BEFORE {'uploading' if route == 'worksheet' else 'importing'}: set {thing} to "
            f"{lab}, the lab's points ({MOODLE_MAX_SETTING}; it is {moodle_max} now), or "
            f"export again with --max-grade {format_score(known)} to scale the grades to it."))
        return
    if route == "gradebook":
        exported.notes.append(
            f"Maximum grade: the kit cannot see the grade item's (the lab has {lab} points; "
            f"Moodle's default is 100), and the gradebook's CSV import stores each number as "
            f"is: 14.5 into a 100-point item is 14.5 of 100. Check it before importing (step "
            f"1), or give the assignment's grading worksheet with --worksheet FILE (its "
            f"Maximum grade is read), or state it with --max-grade N.")
        exported.steps.insert(0, (
            f"BEFORE importing: check that {thing} is {lab}, the lab's points "
            f"({MOODLE_MAX_SETTING}, or Course > Grades > Gradebook setup > the item > Edit "
            f"grade item). If it is not, set it to {lab}, or export again with --max-grade N "
            f"(the item's maximum) to write the grades scaled to N."))


def _scaled(value: float, lab_max: float, max_grade: float) -> float:
    """``value`` of ``lab_max`` points as a grade of ``max_grade``, to two decimals
    (half up, as a person rounds: 14.5 of 16 is 90.63 of 100)."""
    if lab_max <= 0:
        return value
    exact = decimal.Decimal(repr(value)) * decimal.Decimal(repr(max_grade)) \
        / decimal.Decimal(repr(lab_max))
    return float(exact.quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP))


def _moodle_grade(row: ClassRow, exported: Exported) -> str:
    """A Moodle grade cell: the score, scaled to --max-grade when it is not the lab's points."""
    value = _value(row, exported.late)
    if exported.max_grade is not None and row.status != NO_SUBMISSION:
        value = _scaled(value, exported.lab_max, exported.max_grade)
    return _score(row, value)


# --------------------------------------------------------------------------
# Moodle: an earlier export of the same worksheet
# --------------------------------------------------------------------------

#: What the worksheet route exported, by worksheet: OUT/export/moodle/exported.json
#: (wherever --dest put the files), so that a later export of the same file
#: says what Moodle will skip.
EXPORT_RECORD = Path("export") / "moodle" / "exported.json"
#: The most exports the record keeps (the newest).
EXPORT_RECORD_SIZE = 50


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_record(out_dir: Path) -> list[dict]:
    path = out_dir / EXPORT_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["exports"]
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _earlier_export(out_dir: Path, digest: str) -> dict | None:
    """The newest earlier export of the worksheet whose bytes hash to ``digest``
    (as the source filled in, or as the file the kit wrote)."""
    found = [e for e in _load_record(out_dir)
             if digest in (e.get("source_sha256"), e.get("written_sha256"))]
    return found[-1] if found else None


def _record_export(out_dir: Path, entry: dict) -> None:
    path = out_dir / EXPORT_RECORD
    entries = _load_record(out_dir) + [entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exports": entries[-EXPORT_RECORD_SIZE:]}, indent=1,
                               ensure_ascii=False), encoding="utf-8")


def _second_upload(source: Path, earlier: dict, rows: list[ClassRow],
                   participants: dict[int, str], grades: dict[str, str],
                   comments: dict[str, str], exported: Exported) -> None:
    """Say what Moodle does with a worksheet an earlier export filled in already.

    Moodle's upload (mod/assign/feedback/offline/locallib.php
    ``process_import_grades``, and its preview, importgradesform.php) reads each
    row's "Last modified (grade)" with ``strtotime`` (``-`` gives false: 0) and
    skips the row, grade and feedback comments alike, when Moodle's grade
    record was modified more than 60 s later (``$stalemodificationdate``),
    unless "Allow updating records ..." is ticked. A worksheet's cell is the
    time of its download (gradingtable.php ``col_timemarked``); an upload makes
    (or updates) each row's grade record, now. So the same file uploaded again
    after a regrade is skipped on every row the first upload set. The preview
    lists only what it will change ("Set grade for ...", 'Set field "Feedback
    comments" for ...': the strings 'gradeupdate', 'feedbackupdate'), never a
    skipped row, and says "No modified grades found in uploaded worksheet"
    ('nochanges') when there is nothing it will change.

    When rows changed since the earlier export, the first step says so and
    what to do (a fresh download with --worksheet); otherwise a note does.
    """
    before_grades = earlier.get("grades") or {}
    before_comments = earlier.get("feedback") or {}
    changed = []
    for row in rows:
        participant = participants[id(row)]
        old, new = before_grades.get(participant), grades.get(participant)
        if old != new:
            changed.append(f"{_who(row)}: {old if old is not None else 'not in it'} -> {new}")
        elif before_comments.get(participant) not in (None, comments.get(participant)):
            changed.append(f"{_who(row)}: its feedback")
    when = earlier.get("exported_at") or "an earlier run"
    record = f"OUT/{EXPORT_RECORD.as_posix()}"
    if not changed:
        exported.notes.append(
            f"{source.name} is the worksheet an earlier export filled in ({when}; {record}), "
            f"and no grade or comment changed since. If that export was uploaded, Moodle has "
            f"them already and this upload changes nothing (\"No modified grades found in "
            f"uploaded worksheet\").")
        return
    shown = "; ".join(changed[:10]) + (f"; and {len(changed) - 10} more"
                                       if len(changed) > 10 else "")
    exported.notes.append(
        f"{source.name} is the worksheet an earlier export filled in ({when}; {record}), and "
        f"{len(changed)} row(s) changed since: {shown}. If that export was uploaded, Moodle "
        f"skips every row it set when this file is uploaded again with \"Allow updating "
        f"records ...\" unticked, these included, and its preview does not list skipped rows: "
        f"download the grading worksheet again and export with --worksheet FILE (step 1).")
    exported.steps.insert(0, (
        f"BEFORE uploading: {source.name} is the same worksheet an earlier export filled in "
        f"({when}). If you uploaded that export, Moodle now holds a grade record for every row "
        f"it set, newer than this file's \"Last modified (grade)\" cells (\"-\" or the times "
        f"of the first download), and with \"Allow updating records that have been modified "
        f"more recently in Moodle than in the spreadsheet\" unticked it skips those rows, "
        f"grade and feedback comments alike: the {len(changed)} changed since would not reach "
        f"Moodle. Its preview lists only the changes it will make (\"Set grade for ...\"), "
        f"never a skipped row, and shows \"No modified grades found in uploaded worksheet\" "
        f"when it skips them all. Download the grading worksheet again (" + MOODLE_ACTIONS +
        " > Download grading worksheet) and export with --worksheet FILE; or tick that box "
        "for this one upload, which also overwrites any grade changed in Moodle since (a "
        "TA's too)."))


# --------------------------------------------------------------------------
# Plain CSV
# --------------------------------------------------------------------------

CSV_COLUMNS = ["student_id", "name", "email", "section", "lab", "score", "raw_score",
               "max_score", "late", "penalty", "status", "submitted_at"]


def _plain(out_dir: Path, rows: list[ClassRow], dest: Path, exported: Exported) -> None:
    table, used = [], set[str]()
    for row in rows:
        s = row.student
        table.append([csv_text(s.student_id), csv_text(s.name), csv_text(s.email),
                      csv_text(s.section), csv_text(row.lab),
                      _score(row, _value(row, exported.late)),
                      _score(row, row.raw_score), format_score(row.max_score), _late_hours(row),
                      format_score(row.penalty), csv_text(row.status),
                      csv_text(row.submitted_at)])
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        relative = f"feedback/{unique_name(safe_filename(s.student_id), used)}.zip"
        exported.files[relative] = _zip(dest / relative, [(FEEDBACK_NAME, page)])
        exported.feedback += 1
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", CSV_COLUMNS, table)
    exported.grades = len(rows)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


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
