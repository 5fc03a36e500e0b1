"""What of a student's failure reaches their feedback page: their exception,
redacted.

A student's code sees the hidden tests' inputs and the grader's compiled
stand-ins; its exception message is the one thing of it that reaches the
feedback page. _describe_failure writes a failed call's message (the
exception, and where in the student's cells: _student_cell), redact keeps a
message's words but not its data, and hide_data (also applied by the grader
to every failed test's message) hides runs of numbers.
"""

from __future__ import annotations

import base64
import functools
import json
import marshal
import os
import re
import types
from pathlib import Path

# The cap on a student's message (what and why: autograder.limits); a name
# of this module too, read at each use (redact's default: when defined).
from autograder.limits import MAX_MESSAGE_CHARS
from autograder.text import MARKS, cut_words, split_error, strip_escapes, student_error


def _describe_failure(label: str, answer: dict, shipped=()) -> str:
    """The student's exception, with the last line of their code that ran,
    redacted (see redact): it goes to their feedback page. Written with
    autograder.text.student_error's marks: the exception's type and first
    line, and where in the student's code, are what the student reads;
    what the framework added (Keras's wrapper, TensorFlow's internals) is
    kept apart for a "details" fold (autograder.text.student_message)."""
    where = code = ""
    traceback = answer.get("traceback", "")
    lines = (traceback if isinstance(traceback, str) else "").splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("File ") and "<autograder>" not in stripped \
                and "<stand-in" not in stripped:
            where = stripped
            # the frame's source line, as the traceback quotes it (indented)
            following = lines[index + 1] if index + 1 < len(lines) else ""
            code = following.strip() if following.startswith("    ") \
                and not following.strip().startswith(("File ", "^", "~")) else ""
    kind = redact(str(answer.get("type")), shipped, limit=60)
    headline, details = split_error(str(answer.get("message")))
    frame = ""
    if where and "ipykernel" in where or "tmp/ipykernel" in where:
        place = where.split(", ", 1)[-1]
        number = re.match(r"line (\d+)", place)
        cell = _student_cell(int(number.group(1)), code) if number else ""
        # (the line's code is not quoted: the cell and line say where, and a
        # page quoting code reads to the leak scanner as code shown)
        frame = (f"your cell of `{cell}`, " if cell else "your code, ") \
            + redact(place, shipped, limit=80)
    return student_error(label, kind, redact(headline, shipped) or "(no message)", frame,
                         redact(details, shipped, limit=2 * MAX_MESSAGE_CHARS))


def _student_cell(line_number: int, code: str) -> str:
    """The name the student's cell defines (its first class or function) whose
    line ``line_number`` is ``code``: where their error is, as they know it
    ("" when not found). The cells' sources are the grader's file
    (AUTOGRADER_STUDENT_CELLS, autograder.kernels.testskernel); a frame's line is
    counted in its cell, as ipykernel compiles each cell on its own."""
    path = os.environ.get("AUTOGRADER_STUDENT_CELLS", "")
    if not path or not code:
        return ""
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    for source in cells if isinstance(cells, list) else []:
        lines = str(source).splitlines()
        if 0 < line_number <= len(lines) and lines[line_number - 1].strip() == code:
            defined = re.search(r"^(?:class|def)\s+(\w+)", str(source), re.M)
            return defined.group(1) if defined else ""
    return ""


_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+")
_NUMBER = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|…)"
_NUMBER_RUN = re.compile(rf"(?:{_NUMBER}[\s,;:|()\[\]]+){{5,}}{_NUMBER}")
_HEX_RUN = re.compile(r"\b[0-9a-fA-F]{16,}\b|[0-9a-fA-F]{32,}")
_LONG_WORD = re.compile(r"\S{60,}")
_ENCODED = re.compile(r"[A-Za-z0-9+/=]{12,}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def redact(text: str, shipped=(), limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` (a student's exception message) fit to show on their page.

    A student's code sees the hidden tests' inputs and the grader's compiled
    stand-ins; its exception message is the one thing of it that reaches the
    feedback page. So the message keeps its words, names and shapes but not
    data: terminal escape sequences go whole (Keras's bold ``ESC[1m``), other
    control characters become "?"; every number written with a decimal
    point or exponent, every run of six or more numbers, hexadecimal and
    other long unbroken runs become "…";
    any piece of what the grader shipped in the request (``shipped``: the
    encoded code, its string constants) becomes "[grader's code]"; and the
    whole is cut at ``limit`` characters, after a word.
    """
    for blob in shipped:
        for piece in sorted(_shipped_strings(blob), key=len, reverse=True):
            text = text.replace(piece, "[grader's code]")
    if shipped:
        text = _ENCODED.sub(lambda found: "[grader's code]" if any(
            found.group(0) in blob for blob in shipped) else found.group(0), text)
    # Escape sequences whole (Keras's bold "ESC[1m"), then what control
    # bytes are left; the marks of autograder.text.student_error are the
    # grader's alone.
    text = strip_escapes(text).translate({ord(mark): None for mark in MARKS})
    text = _CONTROL.sub("?", text)
    text = _FLOAT.sub("…", text)
    text = _HEX_RUN.sub("…", text)
    text = _LONG_WORD.sub("…", text)
    return hide_data(text, limit)


def hide_data(text: str, limit: int) -> str:
    """``text`` without runs of six or more numbers (any notation), cut at
    ``limit`` characters.

    The grader applies it to every failed test's message (IsolatedExecute):
    a test's message may quote what the student's code returned, and that
    may be the hidden inputs in disguise; a shape or a single difference
    stays readable.
    """
    text = _NUMBER_RUN.sub("…", text)
    return cut_words(text, limit)


@functools.lru_cache(maxsize=64)
def _shipped_strings(blob: str) -> tuple[str, ...]:
    """The string constants of a shipped code object worth hiding: 12
    characters or more, and not a plain name (a keyword argument's name is
    also the student's own wording)."""
    found = []

    def walk(code):
        for const in code.co_consts:
            if isinstance(const, str) and len(const) >= 12 and not const.isidentifier():
                found.append(const)
            elif isinstance(const, types.CodeType):
                walk(const)

    walk(marshal.loads(base64.b64decode(blob)))
    return tuple(found)
