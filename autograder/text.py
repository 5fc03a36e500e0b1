"""Text that the grader's and the term's files share: cleaned of control
sequences, safe in a spreadsheet cell or as a file name, scores and durations
in words.

Both autograder.grader (grades.csv, exercises.csv, feedback, the report) and
autograder.term (the LMS exports, the roster) write what a student or an LMS
gave: every such text goes through these helpers, in one place.
"""

from __future__ import annotations

import math
import re

__all__ = ["clean_text", "csv_text", "safe_filename", "unique_name", "format_score",
           "late_hours", "late_by", "duration"]

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


def duration(seconds: float) -> str:
    """``seconds`` as "2 days 3 h", "5 h 10 min", "12 min"."""
    minutes = int(seconds // 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    if days:
        return f"{days} day{'s' * (days > 1)} {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def late_hours(seconds: float) -> str:
    """Hours late with two decimals ("" when on time)."""
    return f"{seconds / 3600:.2f}" if seconds and seconds > 0 else ""


def late_by(seconds: float) -> str:
    """How late, in words ("1 day 2 h"; "" when on time)."""
    return duration(seconds) if seconds and seconds > 0 else ""


def csv_text(value) -> str:
    """Text for a CSV cell that a spreadsheet will not run as a formula."""
    text = clean_text(value)
    if text and text[0] in "=+-@\t\r":
        return "'" + text
    return text


def safe_filename(student_id: str) -> str:
    """A file name for ``student_id`` that stays inside the feedback folder."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", student_id or "").lstrip(".")
    return name or "student"


def unique_name(name: str, used: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... the first not in ``used`` (compared
    without case, as case-insensitive file systems do); added to ``used``."""
    candidate, number = name, 2
    while candidate.lower() in used:  # case-insensitive file systems
        candidate = f"{name}-{number}"
        number += 1
    used.add(candidate.lower())
    return candidate
