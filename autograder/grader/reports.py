"""The files a grading run leaves for the instructor and the students.

``write_reports(results, out_dir, lab_title, hints)`` writes, from the
records in results.py only:

- ``grades.csv``: ``student_id,name,lab,score,max_score,raw_score,late_hours,
  penalty,status,file,submitted_at,notes``, one row per student (every
  enrolled student with a roster), sorted by student id; ``score`` is the
  score of record and ``raw_score`` the score before the late penalty (the
  tests' score with the instructor's overrides); ``late_hours`` is empty
  when on time; ``file`` is the file graded and ``notes`` the instructor's
  notes (which of several files was graded and why, repairs, late...),
  joined by `` | ``;
- ``exercises.csv``: ``student_id,lab,exercise,score,max_score,message``, one
  row per graded exercise (``message``: one line per distinct error, an
  error several tests met said once);
- ``properties.csv``: ``student_id,lab,exercise,property,sentence,score,
  max_score,message``, one row per graded property (tests cell: ``property``
  is its grade id, ``sentence`` what it checks as the student reads it), in
  the notebook's order; a student's properties of an exercise add up to
  the tests' score of its exercises.csv row (the score before an
  instructor's override); a notebook that was not graded has none;
- ``feedback/<student_id>.html``: one page per student (title, total, status,
  a table of exercises, under each one line per graded property (✓ or ✗,
  its points, for ✗ its message, the framework's details folded), a hint
  per failed exercise). Nothing else: the
  instructor's ``notes`` never appear there;
- ``report.html``: the class overview (counts, mean/median, score histogram,
  pass rate per exercise and per property, and most common failure messages of the graded
  notebooks (``ran``; the files left out are counted beside them,
  ``left_out``), submissions that were not graded normally, instructor
  notes).

Every HTML page is self-contained (inline CSS and SVG, no script, nothing
fetched) and every value in it is HTML-escaped: the pages are Jinja2
templates (``templates/*.html.j2``, the style in ``templates/style.css``)
rendered with autoescaping, so a value is escaped unless a template says
otherwise (none does), and with StrictUndefined, so a misspelt name fails
instead of leaving a cell empty. This module computes what the pages show
(statistics, chart geometry); the templates only lay it out. Scores are written like
``7`` or ``7.5`` (at most two decimals). CSV text fields that a spreadsheet
would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, tab or CR)
are prefixed with ``'``.

Everything written or printed passes through :func:`clean_text` (the CSV
cells, every value a template prints (the environment's ``finalize``),
the terminal table): file names, statuses and
exception messages come from students, and a terminal control sequence in
them (``ESC[8m`` hides what follows, an OSC sets the window title,
``ESC[?1049h`` switches the screen) would act on the instructor's terminal
when the file is shown there.
"""

from __future__ import annotations

import csv
import functools
import math
import re
import statistics
from collections import Counter
from pathlib import Path

import jinja2
from markupsafe import Markup

from autograder.grader.results import (GRADED, NEEDS_REGRADING, NO_SUBMISSION, SubmissionResult,
                                      needs_regrading)
from autograder.limits import MAX_CELL_OUTPUT_BYTES, MAX_NOTEBOOK_OUTPUT_BYTES
from autograder.text import (clean_text, csv_text, format_score, late_by, late_hours,
                            safe_filename, unique_name)

__all__ = [
    "clean_text",
    "GRADES_COLUMNS",
    "EXERCISES_COLUMNS",
    "PROPERTIES_COLUMNS",
    "format_score",
    "score_histogram",
    "normalize_message",
    "write_reports",
    "write_gradebook_table",
]

GRADES_COLUMNS = ["student_id", "name", "lab", "score", "max_score", "raw_score", "late_hours",
                  "penalty", "status", "file", "submitted_at", "notes"]
EXERCISES_COLUMNS = ["student_id", "lab", "exercise", "score", "max_score", "message"]
PROPERTIES_COLUMNS = ["student_id", "lab", "exercise", "property", "sentence", "score",
                      "max_score", "message"]

#: How a note about output the grader dropped begins (autograder.grader.worker):
#: the one note a feedback page shows.
OUTPUT_TRUNCATED = "output truncated by the grader"

#: Failure messages shown per exercise in report.html.
TOP_MESSAGES = 5
#: Width of the status column in write_gradebook_table.
STATUS_WIDTH = 60

# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------

def _sorted(results: list[SubmissionResult]) -> list[SubmissionResult]:
    return sorted(results, key=lambda r: (r.student_id, r.source_name))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------


def write_grades_csv(results: list[SubmissionResult], path: Path) -> Path:
    """``grades.csv``: one row per submission, sorted by student id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(GRADES_COLUMNS)
        for r in _sorted(results):
            raw = r.raw_score if r.raw_score is not None else r.score
            writer.writerow([csv_text(r.student_id), csv_text(r.name), csv_text(r.lab),
                             format_score(r.score), format_score(r.max_score), format_score(raw),
                             late_hours(r.late_seconds), format_score(r.penalty),
                             csv_text(r.status), csv_text(r.source_name),
                             csv_text(r.submitted_at), csv_text(" | ".join(r.notes))])
    return path


def write_exercises_csv(results: list[SubmissionResult], path: Path) -> Path:
    """``exercises.csv``: one row per exercise, students sorted, curriculum order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(EXERCISES_COLUMNS)
        for r in _sorted(results):
            for x in r.exercises:
                writer.writerow([csv_text(r.student_id), csv_text(r.lab), csv_text(x.exercise),
                                 format_score(x.score), format_score(x.max_score),
                                 csv_text(x.message)])
    return path


def write_properties_csv(results: list[SubmissionResult], path: Path) -> Path:
    """``properties.csv``: one row per graded property, students sorted,
    exercises in curriculum order, properties in the notebook's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(PROPERTIES_COLUMNS)
        for r in _sorted(results):
            for x in r.exercises:
                for p in x.properties:
                    writer.writerow([csv_text(r.student_id), csv_text(r.lab),
                                     csv_text(x.exercise), csv_text(p.test),
                                     csv_text(p.sentence), format_score(p.score),
                                     format_score(p.max_score), csv_text(p.message)])
    return path


# --------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------

#: The pages' Jinja2 templates (shipped as package data, see pyproject.toml).
TEMPLATES = Path(__file__).with_name("templates")


def _finalize(value):
    """What a template prints: ``value`` through :func:`clean_text`.

    The environment escapes it afterwards (autoescape). Markup is what the
    templates built themselves (a macro's output), whose values went through
    here already, so it is kept as it is.
    """
    if isinstance(value, Markup):
        return value
    return clean_text(value)


@functools.cache
def _environment() -> jinja2.Environment:
    """The pages' environment: every value cleaned, then HTML-escaped
    (quotes included), and a name a template misspells is an error
    (StrictUndefined), not an empty cell."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
        undefined=jinja2.StrictUndefined, finalize=_finalize,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["score"] = format_score
    return environment


def _render(template: str, **values) -> str:
    return _environment().get_template(template).render(**values)


# --------------------------------------------------------------------------
# Student feedback
# --------------------------------------------------------------------------


def feedback_html(result: SubmissionResult, lab_title: str,
                  hints: dict[str, str] | None = None) -> str:
    """The feedback page of one student: no notes, no hidden tests.

    A hint is shown for each exercise without full marks that has one.
    """
    hints = hints or {}
    failed_hints = [(x.exercise, hints[x.exercise]) for x in result.exercises
                    if not x.passed and hints.get(x.exercise)]
    # Of the notes, only the output the grader dropped is the student's to read.
    truncated = next((note for note in result.notes
                      if note.startswith(OUTPUT_TRUNCATED)), "")
    return _render("feedback.html.j2", lab_title=lab_title, result=result,
                   lines={x.exercise: property_lines(x) for x in result.exercises},
                   graded=GRADED, regrade=needs_regrading(result.status), hints=failed_hints, late_by=late_by(result.late_seconds),
                   truncated=truncated, cell_cap=MAX_CELL_OUTPUT_BYTES / 2**20,
                   notebook_cap=MAX_NOTEBOOK_OUTPUT_BYTES / 2**20)


def property_lines(exercise) -> list[dict]:
    """The lines under an exercise on the feedback page, one per graded
    property: ``passed``, ``sentence``, ``score``, ``max_score``, and for a
    failed one ``message`` and ``details`` (an error met by several tests
    said at the first, "(the same error in N tests)", the others pointing
    back to it)."""
    properties = exercise.properties
    again = Counter(p.same_as for p in properties if p.same_as)
    sentences = {p.test: p.sentence or p.test for p in properties}
    lines = []
    for p in properties:
        line = {"passed": p.passed, "sentence": p.sentence or p.test, "score": p.score,
                "max_score": p.max_score, "message": "", "details": ""}
        if not p.passed:
            if p.same_as:
                line["message"] = f"The same error as in \u201c{sentences.get(p.same_as, p.same_as)}\u201d above."
            else:
                line["message"] = p.message or "not full marks"
                if again[p.test]:
                    line["message"] += f" (the same error in {again[p.test] + 1} tests)"
                line["details"] = p.details
        lines.append(line)
    return lines


# --------------------------------------------------------------------------
# Class report
# --------------------------------------------------------------------------


def score_histogram(scores: list[float], max_score: float) -> list[int]:
    """Counts of scores in bins of 1 point: bin k holds k <= score < k + 1.

    There are ``floor(max_score) + 1`` bins (0 .. max), so full marks on an
    integer maximum get a bin of their own (a maximum of 3.5 gives bins
    0..3, the last one holding 3 <= score <= 3.5). Scores are clipped to
    [0, max_score]; float noise (6.9999999) counts as the integer it rounds to.
    """
    top = max(0, math.floor(max_score + 1e-9)) if math.isfinite(max_score) else 0
    counts = [0] * (top + 1)
    for score in scores:
        if score is None or not math.isfinite(score):
            continue
        clipped = min(max(score, 0.0), max_score)
        index = math.floor(clipped + 1e-6)
        counts[min(max(index, 0), top)] += 1
    return counts


def normalize_message(message: str) -> str:
    """``message`` with numbers as ``#`` and spaces collapsed (for grouping).

    ``"max abs error 0.031 at [2, 3]"`` -> ``"max abs error # at [#, #]"``.
    """
    text = re.sub(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", "#", message or "")
    return re.sub(r"\s+", " ", text).strip()


def _exercise_order(results: list[SubmissionResult]) -> list[str]:
    order: dict[str, None] = {}
    for r in results:
        for x in r.exercises:
            order.setdefault(x.exercise, None)
    return list(order)


def ran(result: SubmissionResult) -> bool:
    """Whether ``result`` is a notebook the tests ran on ("graded", or "partly
    graded: ..." when the run stopped): its exercises say what the student
    did. A file that was empty, cut short, not a notebook, another lab's,
    too large, or that the grader failed on has every exercise at 0 for a
    reason that is not the exercise's."""
    return result.status == GRADED or result.status.startswith("partly graded")


#: Why a submission is not among the graded notebooks, by its status's start:
#: (start, one, several). The last one that matches names it.
LEFT_OUT = [
    ("", "submission not graded for another reason", "submissions not graded for other reasons"),
    ("empty file", "empty file", "empty files"),
    ("not a notebook", "file that was not a notebook", "files that were not notebooks"),
    ("invalid notebook", "notebook cut short or damaged", "notebooks cut short or damaged"),
    ("wrong notebook", "notebook of another lab", "notebooks of another lab"),
    ("this looks like lab", "notebook of another lab", "notebooks of another lab"),
    ("file too large", "file too large to read", "files too large to read"),
    ("grader error", "submission the grader failed on", "submissions the grader failed on"),
    (NEEDS_REGRADING, "submission to grade again", "submissions to grade again"),
]


def left_out(results: list[SubmissionResult]) -> list[tuple[int, str]]:
    """The submissions that are not graded notebooks (``ran``), counted by
    why: [(2, "files that were not notebooks"), (1, "empty file")], most
    first. Enrolled students who sent nothing are not submissions: not listed."""
    counts: Counter[tuple[str, str]] = Counter()
    for r in results:
        if r.status == NO_SUBMISSION or ran(r):
            continue
        _, one, several = [kind for kind in LEFT_OUT if r.status.startswith(kind[0])][-1]
        counts[(one, several)] += 1
    return [(count, one if count == 1 else several)
            for (one, several), count in sorted(counts.items(), key=lambda kv: -kv[1])]


def counted_note(results: list[SubmissionResult]) -> str:
    """What report.html says beside the pass rates: which rows they count."""
    graded = sum(ran(r) for r in results)
    text = f"Of {graded} graded notebook{'s' * (graded != 1)}"
    out = left_out(results)
    if not out:
        return text + "."
    parts = [f"{count} {what}" for count, what in out]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    total = sum(count for count, _ in out)
    return (f"{text}; {listed} {'is' if total == 1 else 'are'} not counted (their exercises "
            f"are at 0 for that reason, not for the exercise's).")


def pass_rates(results: list[SubmissionResult]) -> list[tuple[str, int, int]]:
    """(exercise, passed, graded) in curriculum order (first appearance), of
    the graded notebooks only (``ran``): an empty file's, a .py's, a cut-short
    notebook's exercises are not failed exercises (``left_out`` counts them)."""
    results = [r for r in results if ran(r)]
    rates = []
    for exercise in _exercise_order(results):
        rows = [x for r in results for x in r.exercises if x.exercise == exercise]
        rates.append((exercise, sum(x.passed for x in rows), len(rows)))
    return rates


def property_pass_rates(results: list[SubmissionResult]) -> list[dict]:
    """Per graded property, of the graded notebooks only (``ran``), in the
    notebook's order: ``exercise``, ``test``, ``sentence``, ``points``,
    ``passed``, ``graded`` and ``share`` ("75%"): which rule the class misses."""
    rows: dict[tuple[str, str], dict] = {}
    for r in results:
        if not ran(r):
            continue
        for x in r.exercises:
            for p in x.properties:
                row = rows.setdefault((x.exercise, p.test), {
                    "exercise": x.exercise, "test": p.test, "sentence": p.sentence,
                    "points": p.max_score, "passed": 0, "graded": 0})
                row["passed"] += p.passed
                row["graded"] += 1
    order = {name: index for index, name in enumerate(_exercise_order(results))}
    ranked = sorted(rows.values(), key=lambda row: order.get(row["exercise"], len(order)))
    for row in ranked:
        row["share"] = f"{row['passed'] / row['graded']:.0%}" if row["graded"] else "-"
    return ranked


def common_failures(results: list[SubmissionResult],
                    top: int = TOP_MESSAGES) -> dict[str, list[tuple[int, str]]]:
    """Per exercise, the ``top`` most common failure messages: (count,
    example), of the graded notebooks only (``ran``, as ``pass_rates``)."""
    results = [r for r in results if ran(r)]
    found: dict[str, list[tuple[int, str]]] = {}
    for exercise in _exercise_order(results):
        counts: Counter[str] = Counter()
        examples: dict[str, str] = {}
        for r in results:
            for x in r.exercises:
                if x.exercise == exercise and not x.passed:
                    message = x.message or "(no message)"
                    key = normalize_message(message)
                    counts[key] += 1
                    examples.setdefault(key, message)
        if counts:
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            found[exercise] = [(count, examples[key]) for key, count in ranked]
    return found


def _class_max(results: list[SubmissionResult]) -> float:
    values = [r.max_score for r in results if r.max_score is not None
              and math.isfinite(r.max_score)]
    return max(values, default=0.0)


def _histogram_chart(counts: list[int]) -> dict:
    """The score histogram's geometry: vertical bars, one per bin, the count
    above each and the bin below (macros.html.j2 draws it)."""
    bar, gap, height, base = 28, 6, 160, 200
    peak = max(counts, default=0) or 1
    bars = []
    for k, count in enumerate(counts):
        x = gap + k * (bar + gap)
        h = round(height * count / peak)
        bars.append({"bin": k, "count": count, "x": x, "y": base - h, "height": h,
                     "middle": x + bar // 2})
    return {"width": len(counts) * (bar + gap) + gap, "height": base + 24, "bar": bar,
            "base": base, "bars": bars}


def _pass_rate_chart(rates: list[tuple[str, int, int]]) -> dict:
    """The pass rates' table rows and chart geometry: a horizontal bar per
    exercise, as a share of its graded rows."""
    label, bar, row = 200, 300, 22
    rows = []
    for i, (exercise, passed, graded) in enumerate(rates):
        share = passed / graded if graded else 0.0
        rows.append({"exercise": exercise, "passed": passed, "graded": graded,
                     "share": f"{share:.0%}" if graded else "-", "y": 4 + i * row,
                     "width": round(bar * share)})
    return {"width": label + bar + 60, "height": row * len(rates) + 8, "label": label,
            "bar": bar, "thickness": row - 6, "rows": rows}


def _summary(results: list[SubmissionResult], max_score: float) -> list[tuple[str, object]]:
    scores = [r.score for r in results if r.score is not None and math.isfinite(r.score)]
    missing = sum(r.status == NO_SUBMISSION for r in results)
    again = sum(needs_regrading(r.status) for r in results)
    return [
        ("Submissions", len(results) - missing),
        *([("No submission (0 points)", missing)] if missing else []),
        ("Graded normally", sum(r.status == GRADED for r in results)),
        *([("To grade again (the grader failed twice)", again)] if again else []),
        ("Late (penalty taken)", sum(r.penalty > 0 for r in results)),
        ("Maximum score", format_score(max_score)),
        ("Mean score", format_score(statistics.fmean(scores)) if scores else "-"),
        ("Median score", format_score(statistics.median(scores)) if scores else "-"),
    ]


def report_html(results: list[SubmissionResult], lab_title: str,
                term: dict | None = None, similar=None) -> str:
    """The instructor's class overview of one lab.

    ``term``: what the term's rules add (autograder.term.apply.report_term):
    ``roster`` (a description, "" without one), ``enrolled``, ``submitted``,
    ``unmatched`` ([{files, who, reason}]), ``policy`` (the late policy in
    words, "" without a due date), ``overrides_file`` and ``notes``.
    ``similar``: autograder.term.similarity.find_similar's Pairs, shown as
    the section "Similar answers" at the end (None: no such section).
    """
    term = {**EMPTY_TERM, **(term or {})}
    max_score = _class_max(results)
    ordered = _sorted(results)
    submitted = [r for r in results if r.status != NO_SUBMISSION]
    return _render(
        "report.html.j2", lab_title=lab_title, summary=_summary(results, max_score),
        histogram=_histogram_chart(score_histogram([r.score for r in results], max_score)),
        rates=_pass_rate_chart(pass_rates(submitted)), failures=common_failures(submitted),
        property_rates=property_pass_rates(submitted),
        counted=counted_note(submitted),
        not_graded=[r for r in ordered if r.status not in (GRADED, NO_SUBMISSION)],
        noted=[r for r in ordered if r.notes], term=term,
        missing=[r for r in ordered if r.status == NO_SUBMISSION],
        late=[(r, late_by(r.late_seconds)) for r in ordered if r.late_seconds > 0],
        overridden=[(r, x) for r in ordered for x in r.exercises if x.override_by],
        similar=similar)


#: report_html's ``term`` when no rule of the term applies.
EMPTY_TERM = {"roster": "", "enrolled": 0, "submitted": 0, "unmatched": [], "policy": "",
              "overrides_file": "", "notes": [], "isolation": None, "extensions": [],
              "regrades": [], "regrades_file": ""}


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------


def write_reports(results: list[SubmissionResult], out_dir: Path, lab_title: str,
                  hints: dict[str, str] | None = None, term: dict | None = None,
                  similar=None) -> dict[str, Path]:
    """Write every output file of a grading run into ``out_dir``.

    Args:
        results: one SubmissionResult per student.
        out_dir: created when missing.
        lab_title: shown at the top of every page.
        hints: exercise name -> hint shown to students who failed it.
        term: what the term's rules add to report.html (see report_html).
        similar: find_similar's Pairs for report.html's "Similar answers"
            (None: the section is not shown).

    Returns:
        Path of each file written, keyed by its path relative to ``out_dir``:
        ``"grades.csv"``, ``"exercises.csv"``, ``"properties.csv"``, ``"report.html"`` and
        ``"feedback/<student_id>.html"`` for each student who submitted
        something (an enrolled student with no submission has none).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {
        "grades.csv": write_grades_csv(results, out_dir / "grades.csv"),
        "exercises.csv": write_exercises_csv(results, out_dir / "exercises.csv"),
        "properties.csv": write_properties_csv(results, out_dir / "properties.csv"),
    }
    names = feedback_names(results)
    for result in _sorted(results):
        if result.student_id in names:
            relative = names[result.student_id]
            written[relative] = _write(out_dir / relative,
                                       feedback_html(result, lab_title, hints))
    written["report.html"] = _write(out_dir / "report.html",
                                    report_html(results, lab_title, term, similar))
    return written


#: OUT/unmatched.csv: the files that matched no one on the roster (not graded).
UNMATCHED_COLUMNS = ["file", "whose", "reason"]


def write_unmatched(unmatched: list[dict], out_dir: Path) -> dict[str, Path]:
    """``unmatched.csv`` (one row per file) when files matched no one on the
    roster, else none (an earlier run's is removed)."""
    path = Path(out_dir) / "unmatched.csv"
    if not unmatched:
        path.unlink(missing_ok=True)
        return {}
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(UNMATCHED_COLUMNS)
        for found in unmatched:
            for name in found["files"]:
                writer.writerow([csv_text(name), csv_text(found["who"]),
                                 csv_text(found["reason"])])
    return {"unmatched.csv": path}


def feedback_names(results: list[SubmissionResult]) -> dict[str, str]:
    """student_id -> their feedback page's path relative to OUT
    (``feedback/<id>.html``; none for an enrolled student with no submission)."""
    used: set[str] = set()
    names = {}
    for result in _sorted(results):
        if result.status != NO_SUBMISSION:
            name = unique_name(safe_filename(result.student_id), used)
            names[result.student_id] = f"feedback/{name}.html"
    return names


#: Width of the file column in write_gradebook_table (its end is kept).
FILE_WIDTH = 48
#: The mark of a row whose file was chosen among several, or taken from a zip.
CHOSEN_MARK = "*"


def chosen_file(result: SubmissionResult) -> str:
    """The file graded, as the terminal shows it, when it was chosen among
    several of the student's files or taken out of the student's zip ("": it
    was the student's one file). Found in the row's notes (choice.py's
    CHOICE_NOTE, NESTED_NOTE), which grades.csv keeps (merge reads them back)."""
    from autograder.grader.submissions.choice import CHOICE_NOTE, NESTED_NOTE

    if not result.source_name or not any(CHOICE_NOTE.search(n) or NESTED_NOTE in n
                                         for n in result.notes):
        return ""
    parts = result.source_name.split("/")
    # From the student's zip on (alice/lab1.zip/lab1/x.ipynb -> lab1.zip/lab1/x.ipynb),
    # else the file's own name.
    start = max((i for i, part in enumerate(parts[:-1]) if part.lower().endswith(".zip")),
                default=len(parts) - 1)
    return "/".join(parts[start:])


def write_gradebook_table(results: list[SubmissionResult]) -> str:
    """A plain-text table of student, score/max and status, for the terminal.

    When a student's file was chosen among several (a resubmission kept
    beside the first upload...) or taken from a zip they uploaded, a fourth
    column ``file`` shows it, marked ``*``, and a line under the table says
    where the reasons are.
    """
    rows = [("student_id", "score", "status", "file")]
    for r in _sorted(results):
        status = re.sub(r"\s+", " ", clean_text(r.status, keep_lines=False)).strip()
        if len(status) > STATUS_WIDTH:
            status = status[: STATUS_WIDTH - 3] + "..."
        chosen = re.sub(r"\s+", " ", clean_text(chosen_file(r), keep_lines=False)).strip()
        if len(chosen) > FILE_WIDTH:
            chosen = "..." + chosen[-(FILE_WIDTH - 3):]
        rows.append((clean_text(r.student_id, keep_lines=False),
                     f"{format_score(r.score)}/{format_score(r.max_score)}", status,
                     f"{CHOSEN_MARK} {chosen}" if chosen else ""))
    w0 = max(len(row[0]) for row in rows)
    w1 = max(len(row[1]) for row in rows)
    marked = sum(bool(row[3]) for row in rows[1:])
    if not marked:
        lines = [f"{a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c, _ in rows]
        lines.insert(1, f"{'-' * w0}  {'-' * w1}  {'-' * len('status')}")
        return "\n".join(lines) + "\n"
    w2 = max(len(row[2]) for row in rows)
    lines = [f"{a:<{w0}}  {b:>{w1}}  {c:<{w2}}  {d}".rstrip() for a, b, c, d in rows]
    lines.insert(1, f"{'-' * w0}  {'-' * w1}  {'-' * w2}  {'-' * len('file')}")
    lines.append(f"{CHOSEN_MARK} the file graded of several the student uploaded, or from "
                 f"inside their zip ({marked}): grades.csv's file and notes say which and why")
    return "\n".join(lines) + "\n"
