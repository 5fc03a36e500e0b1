"""The feedback comment of a row, as plain text (Moodle's gradebook feedback
column) and as the HTML Moodle stores a worksheet's feedback comment in.

Part of autograder.term.export.
"""

from __future__ import annotations

import html

from autograder.text import clean_text, cut_words, format_score
from autograder.term.export.common import MESSAGE_WIDTH, NO_SUBMISSION, _late_hours
from autograder.term.model import ClassRow


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
