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
           "late_hours", "late_by", "duration", "strip_escapes", "cut_words", "split_error",
           "student_error", "student_message", "StudentMessage", "said_once"]

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


def strip_escapes(text: str) -> str:
    """``text`` without its terminal control sequences (whole: ``ESC[1m``
    leaves nothing, not ``[1m``); other control characters are kept."""
    return _CONTROL_SEQUENCE.sub("", text)


#: Where a message is cut: "… (cut)" after the last whole word.
CUT_MARK = "… (cut)"


def cut_words(text: str, limit: int, mark: str = CUT_MARK) -> str:
    """``text`` cut to at most ``limit`` characters (then ``mark``), at the end
    of a word: never inside one (only a text whose first word is longer than
    the limit is cut where the limit falls)."""
    if len(text) <= limit:
        return text
    kept = text[:limit]
    if not text[limit].isspace():
        space = max(kept.rfind(" "), kept.rfind("\n"), kept.rfind("\t"))
        if space > 0:
            kept = kept[:space]
    return kept.rstrip() + mark


# -- the messages a student reads ----------------------------------------------
# A student's exception, as the test kernel writes it into a hidden test's
# message (autograder.kernels.probe): "`label` raised Type: its first line
# (where in the student's code)", DETAILS_START, what else the framework
# said, ERROR_END (the message starts as it always did: hidden tests read
# the type with re.match(r"`[^`]*` raised (\w+)")). The hidden test puts its
# own words around it (what it called; the kit's explanation of the likely
# mistake); student_message takes them apart again. Private-use characters:
# no student text keeps them (probe.redact removes them).
DETAILS_START, ERROR_END = "\ue001", "\ue002"
MARKS = "\ue000" + DETAILS_START + ERROR_END
#: Where a student's error starts, before its end mark.
_RAISED = re.compile(r"`[^`\n]*` raised \w")
_KERAS_CALL = re.compile(r"\s*Exception encountered when calling (?:layer )?['\"]?([\w.]+?)['\"]?"
                         r"(?:\.call\(\))?\s*(?:\(type \w+\))?\.\s*\n")
_KERAS_ARGUMENTS = re.compile(r"\n\s*(?:Call )?[Aa]rguments received by .*", re.S)
_FUNCTION_NODE = re.compile(r"\{\{function_node[^}]*(?:\}\}|…)\s*")
_OP_NAME = re.compile(r"\s*\[Op:\w+\](?:\s*name:\s*\S*)?\s*$")
#: What is left of an escape sequence whose ESC byte was replaced ("?[1m").
_ESCAPE_REMAINS = re.compile(r"\?\[[0-9;]*m")


def split_error(message: str) -> tuple[str, str]:
    """An exception's message as (its first line, what else it says): the
    line a student reads, and the rest for a "details" fold ("" when there
    is nothing more).

    Keras's wrapper ("Exception encountered when calling X.call(). ...
    Arguments received by ...") gives the error it wraps, with where
    ("(in X.call())"); TensorFlow's ``{{function_node ...}}`` and
    ``[Op:AddV2] name:`` are left to the details. Escape sequences are
    removed first.

    >>> split_error("Exception encountered when calling Softmax.call().\\n\\n"
    ...             "\\x1b[1mbad mask\\x1b[0m\\n\\nArguments received by Softmax.call():\\n  x")[0]
    'bad mask (in Softmax.call())'
    """
    text = _ESCAPE_REMAINS.sub("", strip_escapes(str(message)))
    core, where = text, ""
    wrapped = _KERAS_CALL.match(text)
    if wrapped:
        where = wrapped.group(1) + ("" if wrapped.group(1).endswith(")") else ".call()")
        core = _KERAS_ARGUMENTS.sub("", text[wrapped.end():])
    lines = [line.strip() for line in core.splitlines() if line.strip()]
    first = _OP_NAME.sub("", _FUNCTION_NODE.sub("", lines[0] if lines else "")).strip()
    headline = first + (f" (in {where})" if where and first else "")
    rest = text.strip()
    return headline, ("" if rest == first else rest)


def student_error(label: str, kind: str, headline: str, where: str = "",
                  details: str = "") -> str:
    """A student's exception as a hidden test's message quotes it (see
    DETAILS_START): "`label` raised kind: headline (where)", its details marked."""
    return (f"`{label}` raised {kind}: {headline}"
            + (f" ({where})" if where else "")
            + (DETAILS_START + details if details else "") + ERROR_END)


class StudentMessage(tuple):
    """student_message's answer: ``text`` (what the student reads: the kit's
    explanation first, then what was called and the error in one line),
    ``details`` (what the framework added, for a fold) and ``error`` (the
    student's error alone, "" when the kit's own check failed: messages with
    the same ``error`` are the same error met by several tests)."""

    __slots__ = ()

    def __new__(cls, text: str, details: str = "", error: str = ""):
        return super().__new__(cls, (text, details, error))

    text = property(lambda self: self[0])
    details = property(lambda self: self[1])
    error = property(lambda self: self[2])


_LEADING = re.compile(r"^[\s;:,.\-–—]+")


def _explanation(text: str) -> str:
    """The kit's words after a student's error, to go first: without the
    punctuation that joined them, and without their parentheses."""
    text = _LEADING.sub("", text).strip()
    if text.startswith("(") and text.endswith(")") and _closes_at_end(text):
        text = text[1:-1].strip()
    if text and not text.endswith((".", "!", "?", ":")):
        text += "."
    return text[:1].upper() + text[1:]


def _closes_at_end(text: str) -> bool:
    """Whether the parenthesis that opens ``text`` is the one that ends it."""
    depth = 0
    for index, character in enumerate(text):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth == 0:
            return index == len(text) - 1
    return False


def student_message(raw: str) -> StudentMessage:
    r"""A failed test's message as the student reads it.

    Escape sequences go first (whole); a student's error quoted by the test
    (student_error's marks) keeps its one line and where, what the framework
    added goes to ``details``; the kit's explanation written after the error
    comes first. A message without marks is only cleaned.

    >>> m = student_message("f(x): `f` raised ValueError: bad (line 3, in f)"
    ...                     "\ue001Traceback...\ue002 (Here x is (2, 3).)")
    >>> m.text, m.details, m.error
    ('Here x is (2, 3). f(x): `f` raised ValueError: bad (line 3, in f)', 'Traceback...', '`f` raised ValueError: bad (line 3, in f)')
    """
    text = clean_text(_ESCAPE_REMAINS.sub("", strip_escapes(str(raw or ""))))
    if ERROR_END not in text and DETAILS_START not in text:
        return StudentMessage(_strip_marks(text).strip())
    said, errors, details = [], [], []
    rest = text
    while ERROR_END in rest or DETAILS_START in rest:
        end = rest.find(ERROR_END)
        segment, rest = (rest[:end], rest[end + 1:]) if end >= 0 else (rest, "")  # cut short
        found = _RAISED.search(segment.partition(DETAILS_START)[0])
        head, body = (segment[:found.start()], segment[found.start():]) if found \
            else (segment, "")
        line, _, more = body.partition(DETAILS_START)
        if not found:
            head, _, more = head.partition(DETAILS_START)
        line = " ".join(_strip_marks(line).split())
        said.append(_strip_marks(head) + line)
        if line:
            errors.append(line)
        if more.strip():
            details.append(_strip_marks(more).strip())
    after = _strip_marks(rest).strip()
    explanation = _explanation(after) if errors and re.search(r"\w", after) else ""
    message = "".join(said).strip()
    if after and not explanation:
        message = f"{message} {after}" if re.match(r"\w", after) else message + after
    message = f"{explanation} {message}".strip() if explanation else message
    return StudentMessage(message, "\n\n".join(dict.fromkeys(details)),
                          " ".join(dict.fromkeys(errors)))


def _strip_marks(text: str) -> str:
    return text.translate({ord(mark): None for mark in MARKS})


def said_once(messages: list[tuple[str, str]]) -> list[str]:
    """``messages`` ((error, text) of each failed test, in order) with each
    error said once: the first text of an error met by several tests gets
    "(the same error in N tests)", the others are left out; an empty error
    (the kit's own check) is never grouped, a text said twice is said once."""
    counts: dict[str, int] = {}
    for error, _ in messages:
        if error:
            counts[error] = counts.get(error, 0) + 1
    said: dict[str, None] = {}
    seen: set[str] = set()
    for error, text in messages:
        if error and error in seen:
            continue
        seen.add(error)
        if error and counts[error] > 1:
            text = f"{text} (the same error in {counts[error]} tests)"
        said.setdefault(text, None)
    return list(said)


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


def megabytes(size: float) -> str:
    """``size`` bytes as "1.5 MB" (MiB, one decimal), as the notes and feedback say sizes."""
    return f"{size / 2**20:.1f} MB"


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
