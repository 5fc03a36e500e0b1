"""The files a grading run leaves for the instructor and the students.

``write_reports(results, out_dir, lab_title, hints)`` writes, from the
records in results.py only:

- ``grades.csv``: ``student_id,lab,score,max_score,status,file,notes``, one
  row per submission, sorted by student id; ``file`` is the file graded and
  ``notes`` the instructor's notes (which of several files was graded and
  why, repairs, late...), joined by `` | ``;
- ``exercises.csv``: ``student_id,lab,exercise,score,max_score,message``, one
  row per graded exercise;
- ``feedback/<student_id>.html``: one page per student (title, total, status,
  a table of exercises, a hint per failed exercise). Nothing else: the
  instructor's ``notes`` never appear there;
- ``report.html``: the class overview (counts, mean/median, score histogram,
  pass rate per exercise, most common failure messages, submissions that
  were not graded normally, instructor notes).

Every HTML page is self-contained (inline CSS and SVG, no script, nothing
fetched) and every value in it is HTML-escaped. Scores are written like
``7`` or ``7.5`` (at most two decimals). CSV text fields that a spreadsheet
would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, tab or CR)
are prefixed with ``'``.

Everything written or printed passes through :func:`clean_text` (the CSV
cells, every value of a page, the terminal table): file names, statuses and
exception messages come from students, and a terminal control sequence in
them (``ESC[8m`` hides what follows, an OSC sets the window title,
``ESC[?1049h`` switches the screen) would act on the instructor's terminal
when the file is shown there.
"""

from __future__ import annotations

import csv
import html
import math
import re
import statistics
from collections import Counter
from pathlib import Path

from autograder.grader.results import GRADED, ExerciseResult, SubmissionResult

__all__ = [
    "clean_text",
    "GRADES_COLUMNS",
    "EXERCISES_COLUMNS",
    "format_score",
    "score_histogram",
    "normalize_message",
    "write_reports",
    "write_gradebook_table",
]

GRADES_COLUMNS = ["student_id", "lab", "score", "max_score", "status", "file", "notes"]
EXERCISES_COLUMNS = ["student_id", "lab", "exercise", "score", "max_score", "message"]

#: Failure messages shown per exercise in report.html.
TOP_MESSAGES = 5
#: Width of the status column in write_gradebook_table.
STATUS_WIDTH = 60

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 60em; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; white-space: nowrap; }
.msg { white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 0.9em; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #b42318; }
.hint { background: #f6f8fa; border-left: 4px solid #0969da; padding: 0.4em 0.8em; }
"""


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------

# ECMA-48 sequences, 7-bit (ESC ...) and 8-bit (C1) forms: CSI with its
# parameters; OSC, DCS, SOS, PM and APC up to their terminator (BEL or ST),
# or to the end of the text when unterminated (as a terminal would swallow
# it); any other two-or-three-character escape.
_CONTROL_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
# What is left of C0 and C1 (newline and tab kept where ``keep_lines``), and
# the bidirectional overrides that make a file name read as another.
_CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(value, keep_lines: bool = True) -> str:
    r"""``value`` as text that is safe to print or write: no control sequence.

    Terminal control sequences and other control characters are removed
    (newline and tab stay when ``keep_lines``, else they become spaces); a
    surrogate (a file name byte that is not UTF-8) becomes U+FFFD, so that
    any text can be written as UTF-8.

    >>> clean_text("a\x1b[8mb\x1b]0;title\x07c\r\n")
    'abc\n'
    """
    text = "" if value is None else str(value)
    text = _CONTROL_CHARACTER.sub("", _CONTROL_SEQUENCE.sub("", text))
    text = _SURROGATE.sub("\ufffd", text)
    return text if keep_lines else re.sub(r"[\n\t]", " ", text)


def format_score(value) -> str:
    """A score as ``7`` or ``7.5`` (two decimals at most); "" when missing."""
    if value is None:
        return ""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(number):
        return ""
    text = f"{number:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _csv_text(value) -> str:
    """Text for a CSV cell that a spreadsheet will not run as a formula."""
    text = clean_text(value)
    if text and text[0] in "=+-@\t\r":
        return "'" + text
    return text


def _e(value) -> str:
    """HTML-escaped text (quotes included), control sequences removed."""
    return html.escape(clean_text(value), quote=True)


def _safe_filename(student_id: str) -> str:
    """A file name for ``student_id`` that stays inside the feedback folder."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", student_id or "").lstrip(".")
    return name or "student"


def _sorted(results: list[SubmissionResult]) -> list[SubmissionResult]:
    return sorted(results, key=lambda r: (r.student_id, r.source_name))


def _page(title: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


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
            writer.writerow([_csv_text(r.student_id), _csv_text(r.lab), format_score(r.score),
                             format_score(r.max_score), _csv_text(r.status),
                             _csv_text(r.source_name), _csv_text(" | ".join(r.notes))])
    return path


def write_exercises_csv(results: list[SubmissionResult], path: Path) -> Path:
    """``exercises.csv``: one row per exercise, students sorted, curriculum order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(EXERCISES_COLUMNS)
        for r in _sorted(results):
            for x in r.exercises:
                writer.writerow([_csv_text(r.student_id), _csv_text(r.lab), _csv_text(x.exercise),
                                 format_score(x.score), format_score(x.max_score),
                                 _csv_text(x.message)])
    return path


# --------------------------------------------------------------------------
# Student feedback
# --------------------------------------------------------------------------


def feedback_html(result: SubmissionResult, lab_title: str,
                  hints: dict[str, str] | None = None) -> str:
    """The feedback page of one student: no notes, no hidden tests."""
    hints = hints or {}
    parts = [
        f"<h1>{_e(lab_title)}</h1>",
        f"<p>Student: <strong>{_e(result.student_id)}</strong></p>",
        f"<p>Total score: <strong>{_e(format_score(result.score))} / "
        f"{_e(format_score(result.max_score))}</strong></p>",
    ]
    if result.status == GRADED:
        parts.append(f"<p>Status: {_e(result.status)}</p>")
    else:
        parts.append(f"<p>Status: <span class=\"bad msg\">{_e(result.status)}</span></p>")
    if result.exercises:
        parts.append(_feedback_table(result.exercises))
    failed_hints = [(x.exercise, hints[x.exercise]) for x in result.exercises
                    if not x.passed and hints.get(x.exercise)]
    if failed_hints:
        parts.append("<h2>Hints</h2>")
        for exercise, hint in failed_hints:
            parts.append(f"<p class=\"hint\"><strong>{_e(exercise)}</strong>: {_e(hint)}</p>")
    return _page(f"{lab_title}: feedback for {result.student_id}", "\n".join(parts))


def _feedback_table(exercises: list[ExerciseResult]) -> str:
    rows = ["<table>", "<tr><th>Exercise</th><th>Score</th><th>Result</th></tr>"]
    for x in exercises:
        if x.passed:
            verdict = "<span class=\"ok\">&#10003;</span>"
        else:
            verdict = f"<span class=\"bad msg\">{_e(x.message or 'not full marks')}</span>"
        rows.append(f"<tr><td>{_e(x.exercise)}</td><td class=\"num\">"
                    f"{_e(format_score(x.score))} / {_e(format_score(x.max_score))}</td>"
                    f"<td>{verdict}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


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


def pass_rates(results: list[SubmissionResult]) -> list[tuple[str, int, int]]:
    """(exercise, passed, graded) in curriculum order (first appearance)."""
    rates = []
    for exercise in _exercise_order(results):
        rows = [x for r in results for x in r.exercises if x.exercise == exercise]
        rates.append((exercise, sum(x.passed for x in rows), len(rows)))
    return rates


def common_failures(results: list[SubmissionResult],
                    top: int = TOP_MESSAGES) -> dict[str, list[tuple[int, str]]]:
    """Per exercise, the ``top`` most common failure messages: (count, example)."""
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


def _histogram_svg(counts: list[int]) -> str:
    """Vertical bars, one per bin, labelled with the bin and the count."""
    bar, gap, height, base = 28, 6, 160, 200
    width = len(counts) * (bar + gap) + gap
    peak = max(counts, default=0) or 1
    items = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{base + 24}\" "
             f"role=\"img\" aria-label=\"score histogram\">"]
    for k, count in enumerate(counts):
        x = gap + k * (bar + gap)
        h = round(height * count / peak)
        items.append(f"<rect class=\"bin\" x=\"{x}\" y=\"{base - h}\" width=\"{bar}\" "
                     f"height=\"{h}\" fill=\"#0969da\"><title>{k}: {count}</title></rect>")
        items.append(f"<text x=\"{x + bar / 2}\" y=\"{base - h - 4}\" font-size=\"11\" "
                     f"text-anchor=\"middle\">{count}</text>")
        items.append(f"<text x=\"{x + bar / 2}\" y=\"{base + 16}\" font-size=\"11\" "
                     f"text-anchor=\"middle\">{k}</text>")
    items.append("</svg>")
    return "".join(items)


def _pass_rate_svg(rates: list[tuple[str, int, int]]) -> str:
    """Horizontal bars, one per exercise, as a percentage of graded rows."""
    label_w, bar_w, row_h = 200, 300, 22
    height = row_h * len(rates) + 8
    items = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{label_w + bar_w + 60}\" "
             f"height=\"{height}\" role=\"img\" aria-label=\"pass rate per exercise\">"]
    for i, (exercise, passed, graded) in enumerate(rates):
        y = 4 + i * row_h
        share = passed / graded if graded else 0.0
        items.append(f"<text x=\"{label_w - 6}\" y=\"{y + 14}\" font-size=\"12\" "
                     f"text-anchor=\"end\">{_e(exercise)}</text>")
        items.append(f"<rect x=\"{label_w}\" y=\"{y}\" width=\"{bar_w}\" height=\"{row_h - 6}\" "
                     f"fill=\"#eee\"/>")
        items.append(f"<rect x=\"{label_w}\" y=\"{y}\" width=\"{round(bar_w * share)}\" "
                     f"height=\"{row_h - 6}\" fill=\"#1a7f37\"/>")
        items.append(f"<text x=\"{label_w + bar_w + 6}\" y=\"{y + 14}\" font-size=\"12\">"
                     f"{share:.0%}</text>")
    items.append("</svg>")
    return "".join(items)


def _summary_html(results: list[SubmissionResult], max_score: float) -> str:
    scores = [r.score for r in results if r.score is not None and math.isfinite(r.score)]
    mean = format_score(statistics.fmean(scores)) if scores else "-"
    median = format_score(statistics.median(scores)) if scores else "-"
    graded = sum(r.status == GRADED for r in results)
    return (
        "<table>"
        f"<tr><th>Submissions</th><td class=\"num\">{len(results)}</td></tr>"
        f"<tr><th>Graded normally</th><td class=\"num\">{graded}</td></tr>"
        f"<tr><th>Maximum score</th><td class=\"num\">{_e(format_score(max_score))}</td></tr>"
        f"<tr><th>Mean score</th><td class=\"num\">{_e(mean)}</td></tr>"
        f"<tr><th>Median score</th><td class=\"num\">{_e(median)}</td></tr>"
        "</table>"
    )


def _pass_rate_html(rates: list[tuple[str, int, int]]) -> str:
    if not rates:
        return "<p>No exercise was graded.</p>"
    rows = ["<table>", "<tr><th>Exercise</th><th>Passed</th><th>Graded</th><th>Pass rate</th></tr>"]
    for exercise, passed, graded in rates:
        share = f"{passed / graded:.0%}" if graded else "-"
        rows.append(f"<tr><td>{_e(exercise)}</td><td class=\"num\">{passed}</td>"
                    f"<td class=\"num\">{graded}</td><td class=\"num\">{share}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows) + "\n" + _pass_rate_svg(rates)


def _failures_html(failures: dict[str, list[tuple[int, str]]]) -> str:
    if not failures:
        return "<p>No failures.</p>"
    parts = []
    for exercise, groups in failures.items():
        parts.append(f"<h3>{_e(exercise)}</h3>")
        parts.append("<table><tr><th>Count</th><th>Example message</th></tr>")
        for count, example in groups:
            parts.append(f"<tr><td class=\"num\">{count}</td>"
                         f"<td class=\"msg\">{_e(example)}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts)


def _problems_html(results: list[SubmissionResult]) -> str:
    odd = [r for r in _sorted(results) if r.status != GRADED]
    if not odd:
        return "<p>All submissions were graded normally.</p>"
    rows = ["<table>", "<tr><th>Student</th><th>File</th><th>Score</th><th>Status</th></tr>"]
    for r in odd:
        rows.append(f"<tr><td>{_e(r.student_id)}</td><td>{_e(r.source_name)}</td>"
                    f"<td class=\"num\">{_e(format_score(r.score))} / "
                    f"{_e(format_score(r.max_score))}</td>"
                    f"<td class=\"msg\">{_e(r.status)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _notes_html(results: list[SubmissionResult]) -> str:
    noted = [r for r in _sorted(results) if r.notes]
    if not noted:
        return "<p>None.</p>"
    rows = ["<table>", "<tr><th>Student</th><th>Notes</th></tr>"]
    for r in noted:
        notes = "<br>".join(_e(n) for n in r.notes)
        rows.append(f"<tr><td>{_e(r.student_id)}</td><td class=\"msg\">{notes}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def report_html(results: list[SubmissionResult], lab_title: str) -> str:
    """The instructor's class overview of one lab."""
    max_score = _class_max(results)
    scores = [r.score for r in results]
    rates = pass_rates(results)
    body = "\n".join([
        f"<h1>{_e(lab_title)}: grading report</h1>",
        "<h2>Summary</h2>", _summary_html(results, max_score),
        "<h2>Score histogram</h2>",
        "<p>Bar k counts the scores from k up to (not including) k + 1.</p>",
        _histogram_svg(score_histogram(scores, max_score)),
        "<h2>Pass rate per exercise</h2>", _pass_rate_html(rates),
        "<h2>Most common failure messages</h2>",
        "<p>Messages that differ only in their numbers are counted together.</p>",
        _failures_html(common_failures(results)),
        "<h2>Submissions not graded normally</h2>", _problems_html(results),
        "<h2>Instructor notes</h2>", _notes_html(results),
    ])
    return _page(f"{lab_title}: grading report", body)


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------


def write_reports(results: list[SubmissionResult], out_dir: Path, lab_title: str,
                  hints: dict[str, str] | None = None) -> dict[str, Path]:
    """Write every output file of a grading run into ``out_dir``.

    Args:
        results: one SubmissionResult per student.
        out_dir: created when missing.
        lab_title: shown at the top of every page.
        hints: exercise name -> hint shown to students who failed it.

    Returns:
        Path of each file written, keyed by its path relative to ``out_dir``:
        ``"grades.csv"``, ``"exercises.csv"``, ``"report.html"`` and
        ``"feedback/<student_id>.html"`` for each student.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {
        "grades.csv": write_grades_csv(results, out_dir / "grades.csv"),
        "exercises.csv": write_exercises_csv(results, out_dir / "exercises.csv"),
    }
    used: set[str] = set()
    for result in _sorted(results):
        name = _unique_name(_safe_filename(result.student_id), used)
        relative = f"feedback/{name}.html"
        written[relative] = _write(out_dir / relative, feedback_html(result, lab_title, hints))
    written["report.html"] = _write(out_dir / "report.html", report_html(results, lab_title))
    return written


def _unique_name(name: str, used: set[str]) -> str:
    candidate, number = name, 2
    while candidate.lower() in used:  # case-insensitive file systems
        candidate = f"{name}-{number}"
        number += 1
    used.add(candidate.lower())
    return candidate


def write_gradebook_table(results: list[SubmissionResult]) -> str:
    """A plain-text table of student, score/max and status, for the terminal."""
    rows = [("student_id", "score", "status")]
    for r in _sorted(results):
        status = re.sub(r"\s+", " ", clean_text(r.status, keep_lines=False)).strip()
        if len(status) > STATUS_WIDTH:
            status = status[: STATUS_WIDTH - 3] + "..."
        rows.append((clean_text(r.student_id, keep_lines=False),
                     f"{format_score(r.score)}/{format_score(r.max_score)}", status))
    w0 = max(len(row[0]) for row in rows)
    w1 = max(len(row[1]) for row in rows)
    lines = [f"{a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c in rows]
    lines.insert(1, f"{'-' * w0}  {'-' * w1}  {'-' * len('status')}")
    return "\n".join(lines) + "\n"
