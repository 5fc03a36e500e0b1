"""Texts that a text holds encoded: what decode undoes before the scanner reads.

A solution leaks as well written out in an encoding as in plain text, so
every text is read for

- runs of base64 (``base64.b64encode``, URL-safe too), hex (``bytes.hex()``,
  ``binascii.hexlify``, bytes separated by spaces or colons, ``\\x`` and
  ``0x`` escapes) and base85 (``base64.b85encode``; ``a85encode``, with or
  without Adobe's ``<~ ~>`` and line wrapping): :func:`binary_runs` decodes
  each to bytes, which decode reads as it reads a file (text, an archive...);
  base85 at each of its five alignments and tolerantly, so a run that starts
  or ends inside other text (``a85decode(b'...')``) decodes all the same;
- rot13 (``codecs.encode(source, "rot13")``) and reversed text
  (``source[::-1]``): :func:`rewritten` gives the text rot13-decoded when it
  holds a Python keyword in rot13 (``erghea``, ``frys``, ``vzcbeg``...) and
  reversed when it holds one reversed (``nruter``, ``fles``, ``tropmi``...).
  Ordinary text holds none, so it is read once, not three times.

Runs shorter than ``MIN_BASE64``, ``MIN_HEX`` or ``MIN_BASE85`` characters are
not decoded: hashes, identifiers and names are that short, and decode to noise.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import string
from collections.abc import Iterator

#: The least length of a run of base64 that is decoded (shorter: a hash, a name).
MIN_BASE64 = 64
#: The least number of hex digits in a run that is decoded (a SHA-256 is 64).
MIN_HEX = 64
#: The least length of a run of base85 that is decoded.
MIN_BASE85 = 64

_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{%d,}={0,2}(?:(?:\\n|\r?\n)[A-Za-z0-9+/_-]{4,}={0,2})*"
                     % MIN_BASE64)
#: Hex bytes, one after the other or separated (space, colon, comma, line
#: break), each perhaps written ``\\x41`` or ``0x41``.
_HEX_BYTE = r"(?:\\x|0x)?[0-9A-Fa-f]{2}"
_HEX = re.compile(r"%s(?:(?:[ :,]|, |\\n|\r?\n)?%s){%d,}" % (_HEX_BYTE, _HEX_BYTE,
                                                              MIN_HEX // 2 - 1))
_HEX_NOISE = re.compile(r"\\x|0x|\\n|[\s:,]")
#: base64.b85encode's digits (RFC 1924), and a85encode's: "!" to "u", "z" four zero bytes.
_B85_DIGITS = (string.digits + string.ascii_uppercase + string.ascii_lowercase
               + "!#$%&()*+-;<=>?@^_`{|}~")
_A85_DIGITS = "".join(chr(code) for code in range(33, 118))
_B85_DIGIT = "[%s]" % re.escape(_B85_DIGITS)
_B85 = re.compile(r"%s{%d,}(?:\r?\n%s{4,})*" % (_B85_DIGIT, MIN_BASE85, _B85_DIGIT))
_A85 = re.compile(r"[!-uz]{%d,}(?:\r?\n[!-uz]{4,})*" % MIN_BASE85)
_BASE85 = (("base85-decoded", _B85, {char: value for value, char in enumerate(_B85_DIGITS)},
            False),
           ("ascii85-decoded", _A85, {char: value for value, char in enumerate(_A85_DIGITS)},
            True))

#: Python keywords that prose never holds, and what rot13 and reversing make of them.
_KEYWORDS = ("return", "import", "lambda", "self", "None", "True", "False", "while", "yield",
             "class", "elif", "def")
_ROT13 = re.compile(r"\b(?:%s)\b" % "|".join(codecs.encode(word, "rot13") for word in _KEYWORDS))
#: Reversed, "elif" and "def" are words ("file", "fed"): left out.
_REVERSED = re.compile(r"\b(?:%s)\b" % "|".join(word[::-1] for word in _KEYWORDS[:-2]))
#: A string literal's escape sequences (``\\n``, ``\\x41``...), which a text encoded
#: inside a literal keeps as they are: rot13 and reversing the text around them
#: leave them be too (a second reading; the first undoes a whole file exactly).
_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|N\{[^}]*\}|[0-7]{1,3}|.)",
                     re.S)
_ESCAPE_OR_CHAR = re.compile(_ESCAPE.pattern + "|.", re.S)
_ESCAPE_OR_RUN = re.compile(_ESCAPE.pattern + r"|[^\\]+", re.S)


def binary_runs(text: str) -> Iterator[tuple[str, bytes]]:
    """(what it was, its bytes) for each run of base64, hex or base85 in ``text``."""
    for match in _BASE64.finditer(text):
        run = re.sub(r"\\n|\s", "", match.group())
        for altchars in ((b"+/", b"-_") if ("-" in run or "_" in run) else (b"+/",)):
            try:
                raw = base64.b64decode(run + "=" * (-len(run) % 4), altchars=altchars,
                                       validate=True)
            except (binascii.Error, ValueError):
                continue
            yield "base64-decoded", raw
            break
    for match in _HEX.finditer(text):
        digits = _HEX_NOISE.sub("", match.group())
        yield "hex-decoded", bytes.fromhex(digits[:len(digits) - len(digits) % 2])
    for label, pattern, values, zeros in _BASE85:
        for match in pattern.finditer(text):
            run = re.sub(r"\s", "", match.group())
            for start in range(5):
                raw = base85(run[start:], values, zeros)
                if raw:
                    yield label, raw


def base85(run: str, values: dict[str, int], zeros: bool = False) -> bytes:
    """``run`` decoded five digits to four bytes, as base64.b85decode (``values``
    its digits) or a85decode (``zeros``: "z" for four zero bytes) do, but
    tolerantly: a character that is no digit is skipped, and a group that
    overflows (other text read as digits, at the wrong alignment) is dropped."""
    out = bytearray()
    group = count = 0
    for char in run:
        if zeros and char == "z" and count == 0:
            out += bytes(4)
            continue
        value = values.get(char)
        if value is None:
            continue
        group, count = group * 85 + value, count + 1
        if count == 5:
            if group < 1 << 32:
                out += group.to_bytes(4, "big")
            group = count = 0
    if count > 1:  # a last group cut short: padded with the highest digit
        pad = 85 ** (5 - count)
        group = group * pad + pad - 1
        if group < 1 << 32:
            out += group.to_bytes(4, "big")[:count - 1]
    return bytes(out)


def rewritten(text: str, done: str = "") -> Iterator[tuple[str, str]]:
    """(how, ``text`` decoded so) for rot13 and reversed text, where ``text``
    holds a Python keyword so written; ``done``: how ``text`` itself was
    decoded (decoding it so again gives back the text it came from)."""
    if done != "rot13-decoded" and _ROT13.search(text):
        yield "rot13-decoded", codecs.decode(text, "rot13")
        if _ESCAPE.search(text):
            yield "rot13-decoded", _ESCAPE_OR_RUN.sub(_rot13_unless_escape, text)
    if done != "reversed" and _REVERSED.search(text):
        yield "reversed", text[::-1]
        if _ESCAPE.search(text):
            yield "reversed", "".join(reversed(_ESCAPE_OR_CHAR.findall(text)))


def _rot13_unless_escape(match: re.Match) -> str:
    part = match.group()
    return part if part.startswith("\\") else codecs.decode(part, "rot13")
