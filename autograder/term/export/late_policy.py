"""Who takes the late penalty: the kit or the LMS, said once, with the step that
turns the LMS's own deduction off (see docs/lms-import.md, "Who takes the late
penalty").

Part of autograder.term.export.
"""

from __future__ import annotations


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
