"""Grade a lab: submissions in, gradebook, CSVs, feedback and report out.

The front door of the kit's two layers: autograder.grader grades (results in
the class's gradebook and OUT/results/), then autograder.term makes the rows
of record and writes the reports (autograder.term.record). Neither imports the
other's entry: this module calls them in order.

The steps, for `python -m autograder grade LAB SUBMISSIONS --out OUT`:

1. Lay out an nbgrader course folder (OUT/nbgrader unless --course-dir) and
   register the lab with nbgrader's generate_assignment (source notebook,
   graded cells and their checksums go into the gradebook).
2. Find the submissions and their student ids (autograder.grader.submissions).
3. For each student, in a worker process (autograder.grader.worker): check
   the notebook can be read (autograder.grader.intake), put it in
   submitted/<student>/<lab>/ and run nbgrader's autograde, whose Execute step
   is autograder.grader.execute.IsolatedExecute (student code in the sandbox, tests
   in a clean kernel). nbgrader restores deleted or edited test cells from
   the source.
4. Read the scores back from nbgrader's gradebook and the messages from the
   grader's own record, record them in the class's gradebook and results/
   (autograder.grader.batch).
5. Apply the term (roster, deadlines, extensions, overrides, groups), compare
   the answers, and write OUT/grades.csv, OUT/exercises.csv,
   OUT/feedback/<student>.html and OUT/report.html (autograder.term.record).

Every option of a run (jobs, time limits, seed, shard, kernels, where the
gradebook goes...) is one `GradingOptions` (autograder.grader.options),
built once by the command line; shards are joined by `merge`
(autograder.grader.shards, then the record). This module is the front door:
`grade` and `merge`, nothing of its own but the order of the steps and the
term's files a run remembers.

A student whose notebook cannot be graded still gets a row, with the reason
in `status`: every step of one submission (reading, normalizing, checking
metadata, grading, recording) runs inside the error handling that turns a
failure into that row, so no notebook stops the batch or its resumption.

The hidden tests' inputs come from a seed. Unless the instructor gives one
(--seed, which shards need, so that they agree), every run draws a fresh
secret seed that is written nowhere: not in run.json, not in results/, so a
later run into the same OUT (a resumption, --regrade) draws another, and
inputs leaked from one run's feedback do not answer the next. A resumption
keeps the finished results without needing their seed. An instructor's seed
is recorded only as a slow keyed hash (`seed_check`, in
autograder.grader.options), which `merge` compares across shards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autograder.grader.batch import Grader
from autograder.grader.options import TERM_FILES, GradingOptions, flag_of
from autograder.grader.results import SubmissionResult
from autograder.grader.shards import merge_shards
from autograder.grader.source import source_points
from autograder.term.apply import Term
from autograder.term.record import write_record

__all__ = ["GradingOptions", "grade", "merge"]


def grade(lab_id: str, submissions: Path, out_dir: Path, options: GradingOptions | None = None,
          hints: dict[str, str] | None = None) -> tuple[list[SubmissionResult], dict]:
    """Grade ``submissions`` of ``lab_id`` and write every report into ``out_dir``.

    Returns the rows of record (the term's rules applied: autograder.term)
    and the paths written.

    ``options``: how (autograder.grader.options; the defaults without it).
    ``hints``: the feedback's hint for each exercise (default: the lab's
    hints.toml).
    """
    options = options or GradingOptions()
    submissions = Path(submissions)
    if not submissions.exists():
        raise ValueError(
            f"Submissions not found: {submissions} does not exist. Give a folder of "
            f".ipynb files or a .zip downloaded from your LMS."
        )
    options = remembered_term(Path(out_dir), options)
    grader = Grader(lab_id, out_dir, options)
    # The instructor's files (roster, times, extensions, overrides, course.toml's
    # deadlines) are read and checked before anyone is graded.
    term = Term.load(lab_id, source_points(grader.lab), grader.out_dir,
                     course_file=options.course_file, roster=options.roster,
                     times=options.times, extensions=options.extensions,
                     overrides=options.overrides,
                     worksheet_timezone=options.worksheet_timezone)
    # Every line of them is matched to the class before anyone is graded.
    term.check(grader.find(submissions, term.roster))
    results = grader.grade_all(submissions, term.roster)
    return write_record(grader.gradebook, results, hints, term, grader.collected, options)


def merge(lab_id: str, shard_dirs: list[Path], out_dir: Path,
          options: GradingOptions | None = None, allow_missing: bool = False,
          ) -> tuple[list[SubmissionResult], dict]:
    """Merge the OUT folders of `grade --shard K/N` runs into one class's OUT:
    what one unsharded run would have written (autograder.grader.shards
    says what is refused), its reports included."""
    gradebook, results = merge_shards(lab_id, shard_dirs, out_dir, options, allow_missing)
    return write_record(gradebook, results)


def remembered_term(out_dir: Path, options: GradingOptions) -> GradingOptions:
    """``options`` with the term's files (roster, course settings, times,
    extensions, overrides) of the last run into ``out_dir`` where this run
    names none, so that `grade --only bob` or a resumed run applies the same
    rules (and --worksheet-timezone, while the roster is the same); then
    OUT/term.json records this run's. A file given replaces the remembered
    one; deleting OUT/term.json forgets them all.

    Raises:
        ValueError: a remembered file is gone (moved or deleted), saying which.
    """
    import dataclasses
    import json

    record = Path(out_dir) / "term.json"
    try:
        remembered = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        remembered = {}
    changes: dict[str, Any] = {}
    for name in TERM_FILES:
        path = remembered.get(name) if isinstance(remembered, dict) else None
        if getattr(options, name) is None and isinstance(path, str):
            if not Path(path).exists():
                flag = flag_of(name)
                raise ValueError(
                    f"The last grading into {out_dir} used {path} ({flag}), which is gone. "
                    f"Give {flag} again with its new place, or delete {record} to grade "
                    f"without the files the earlier runs used.")
            changes[name] = Path(path)
    # the zone of a Moodle worksheet goes with it (--worksheet-timezone)
    if not isinstance(remembered, dict):
        remembered = {}
    zone = remembered.get("worksheet_timezone")
    same_roster = options.roster is None or (
        str(Path(options.roster).resolve()) == remembered.get("roster"))
    if options.worksheet_timezone is None and isinstance(zone, str) and same_roster:
        changes["worksheet_timezone"] = zone
    options = dataclasses.replace(options, **changes) if changes else options
    used: dict[str, str] = {name: str(Path(getattr(options, name)).resolve())
                            for name in TERM_FILES if getattr(options, name) is not None}
    if options.worksheet_timezone:
        used["worksheet_timezone"] = options.worksheet_timezone
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(used, indent=1), encoding="utf-8")
    return options
