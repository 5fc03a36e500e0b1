"""The rows of record: the term applied to the tests' results, the answers
compared, every report written.

Grading (autograder.grader) ends with each submission's results in the class's
gradebook and OUT/results/. This step comes after it, called by the entry
point (autograder.pipeline): the instructor's rules (autograder.term.apply:
roster, deadlines, extensions, overrides, groups) make the rows of record;
the similarity check compares the answers; autograder.grader.reports writes
grades.csv, exercises.csv, the feedback pages and report.html; class.json
keeps what the exports need.
"""

from __future__ import annotations

import sys
from typing import Any

from autograder.grader import reports
from autograder.grader.batch import ClassGradebook
from autograder.grader.options import GradingOptions
from autograder.grader.results import SubmissionResult
from autograder.term import similarity
from autograder.term.apply import Term, report_term
from autograder.term.model import write_class
from autograder.text import clean_text

__all__ = ["write_record"]


def write_record(gradebook: ClassGradebook, results: list[SubmissionResult],
                 hints: dict[str, str] | None = None, term: Term | None = None,
                 collected=None, options: GradingOptions | None = None
                 ) -> tuple[list[SubmissionResult], dict]:
    """The rows of record and the files written: grades.csv, exercises.csv,
    feedback, report.html and class.json in the gradebook's OUT.

    ``hints``: the lab's unless given. ``term``: the instructor's rules
    (none without it); ``collected``: what the download held (submission
    times, files that match no one: autograder.grader.submissions.Collected);
    ``options``: whether and how to compare the answers, and whether this is
    a shard of the class.
    """
    lab = gradebook.lab
    if hints is None:
        hints = lab.hints()
    term = term or Term(lab.id)
    submissions = {s.student_id: s for s in collected.submissions} if collected else {}
    rows, notes = term.apply(results, submissions, gradebook.points_of(results),
                             whole_class=not (options and options.shard),
                             held=collected.held if collected else None)
    for note in notes:
        print(f"Term: {clean_text(note)}", file=sys.stderr)
    summary = report_term(term, rows, collected, notes)
    summary["isolation"] = gradebook.isolation
    similar = None
    if options and options.similarity:
        try:
            similar = _similar(gradebook, rows, options)
        except Exception as error:  # noqa: BLE001 - it flags; it never stops the reports
            summary["notes"].append(f"the similarity check did not run: "
                                    f"{type(error).__name__}: {error}")
    paths = reports.write_reports(rows, gradebook.out_dir, lab.title, hints, summary, similar)
    paths.update(reports.write_unmatched(summary["unmatched"], gradebook.out_dir))
    write_class(gradebook.out_dir, lab.id, lab.title,
                term.class_rows(rows, submissions, reports.feedback_names(rows)),
                isolation=gradebook.isolation, **term.class_facts(rows))
    return rows, paths


def _similar(gradebook: ClassGradebook, rows: list[SubmissionResult], options: GradingOptions):
    """Pairs of similar answers among the graded notebooks (None: fewer than two)."""
    notebooks = {}
    for row in rows:
        path = gradebook.notebook_path(row.student_id)
        if row.source_name and path.is_file():
            notebooks[row.student_id] = path
    if len(notebooks) < 2 and not options.similar_to:
        return None
    extra: dict[str, Any] = ({"threshold": options.similarity_threshold}
                             if options.similarity_threshold is not None else {})
    return similarity.find_similar(gradebook.lab, notebooks, options.similar_to, **extra)
