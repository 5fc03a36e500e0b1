"""What must never reach a student: solutions, hidden tests, references, stand-ins.

The student notebooks (`release`), labkit's wheel and the published student
repository (`publish`) are all checked with the same scanner, which looks for

- the markers of nbgrader's hidden regions and the grader's imports
  (``SECRET_MARKERS``, whatever the spacing);
- code of the instructor's, compared as Python tokens, not as lines: comments,
  line breaks and indentation are dropped, string literals compare by their
  value (quotes, prefixes, escapes and the spacing inside them aside), numbers
  by their value, parentheses and trailing commas are dropped (formatters add
  and remove them), so a solution restyled by black, with other quotes and
  other comments, is the same code. The secret code is every lab's solution
  regions and hidden tests (its source, or its ``hidden.py``), ``reference.py``, ``standins/``,
  and the answers of its sample submissions and verdict suite (``samples.py``,
  ``verdicts.py``). Runs of ``SHINGLE`` tokens ("shingles") of that code which
  appear anywhere in the labs' public code (the sources outside solution and
  hidden regions: the provided code, the visible checks, which a later lab
  may copy from an earlier one's solutions) are public by design and not
  counted, nor are import statements. A text leaks where the secret
  shingles it holds cover at least ``MIN_TOKENS`` tokens of one passage
  (gaps of up to ``SHINGLE`` tokens bridged): about one substantial line of
  code; or where it holds the whole of a solution of ``SHORTEST`` tokens or
  more. Short common code (``return x``, ``np.sum(x, axis=-1)``) never does;
  a one-line answer shorter than that cannot be told from it.

Every file is decoded first (autograder.publish.decode): any text
encoding, archives, notebooks' cells, outputs and attachments, HTML, ANSI
colours, base64, hex, base85, rot13 and reversed text; code inside a long
string literal is read as code too. What
cannot be decoded is reported as unreadable (``Leak.kind``), which publish
refuses unless course.toml lists it.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from autograder.publish.decode import Piece, Unreadable, decode, decode_text
from autograder.labs import KIT_ROOT, Lab, available_labs

#: Text that only the instructor's side holds.
SECRET_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                  "autograder.references", "autograder.testkernel")
_MARKERS = [(marker, re.compile(r"\b" + r"\s*".join(re.escape(part) for part in re.findall(
    r"\w+|\.", marker)) + r"\b")) for marker in SECRET_MARKERS]

#: Tokens a shingle: runs this long are compared.
SHINGLE = 8
#: Tokens of secret code that a passage must hold to leak (a line such as
#: ``shifted = x - np.max(x, axis=axis, keepdims=True)`` is 16).
MIN_TOKENS = 12
#: Tokens of the shortest solution found when it is all there (a one-line
#: answer ``return ops.not_equal(ops.convert_to_tensor(token_ids), pad_id)``
#: is 10 tokens): shorter code is everywhere.
SHORTEST = 10
#: Code in a string literal this long is read as code too.
_LONG_STRING = 40


# --- tokens ------------------------------------------------------------------------------

_DROPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_CLOSING = {")", "]", "}"}
_PREFIX_QUOTE = re.compile(r"(?i)([rbuf]*)('''|\"\"\"|'|\")")
_SPACES = re.compile(r"[\t\f\v \xa0\u2000-\u200d\u2060\u3000\ufeff]+")


@dataclass
class Tokens:
    """A text's normalised tokens, each one's line (1-based), the values of its
    long string literals (which may hold code) and its comments, by line."""

    tokens: list[str]
    lines: list[int]
    strings: list[tuple[int, str]]
    comments: list[tuple[int, str]]


def _string_token(text: str) -> tuple[str, str]:
    """A string literal's normal form (its value, spacing collapsed) and value."""
    match = _PREFIX_QUOTE.match(text)
    prefix, quote = (match.group(1).lower(), match.group(2)) if match else ("", "")
    value: str | bytes
    if "f" in prefix or not match:
        value = text[len(prefix) + len(quote):len(text) - len(quote)] if match else text
    else:
        try:
            with warnings.catch_warnings():  # "\Y" in any text read as code: no warning
                warnings.simplefilter("ignore")
                value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = text[len(prefix) + len(quote):len(text) - len(quote)]
    kind = "b" if "b" in prefix else "f" if "f" in prefix else "s"
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return f"{kind}:{' '.join(str(value).split())}", str(value)


def _number_token(text: str) -> str:
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return text.lower()


def code_tokens(text: str) -> Tokens:
    """``text`` as normalised Python tokens (see the module's docstring).

    Any text is read: what Python's tokenizer stumbles on (an unterminated
    string, prose, a traceback's markers) costs that line, not the text.
    Indentation is dropped before tokenizing, so no indentation is ever wrong.
    """
    text = _SPACES.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = [line.lstrip() for line in text.split("\n")]
    out = Tokens([], [], [], [])
    start, restarts = 0, 0
    while start < len(lines):
        chunk = lines[start:] if restarts < 64 else lines[start:start + 1]
        failed = _tokenize_into(out, chunk, start)
        if failed is None:
            if restarts < 64:
                break
            start += 1
            continue
        restarts += 1
        start += max(failed, 1)
    return out


def _tokenize_into(out: Tokens, lines: list[str], offset: int) -> int | None:
    """Appends the tokens of ``lines`` (line ``offset`` + 1 onwards) to ``out``;
    None when they all read, else the (1-based) line within ``lines`` where
    reading stopped, which the caller skips."""
    readline = io.StringIO("\n".join(lines) + "\n").readline
    fstring: list = []  # Python 3.12+: an f-string's tokens, gathered into one
    try:
        for token in tokenize.generate_tokens(readline):
            kind, string = token.type, token.string
            if fstring or kind == _FSTRING_START:
                fstring.append(token)
                depth = sum(1 if t.type == _FSTRING_START else -1 if t.type == _FSTRING_END
                            else 0 for t in fstring)
                if depth == 0:
                    (row, col), (end_row, end_col) = fstring[0].start, fstring[-1].end
                    source = "\n".join(lines[row - 1:end_row])
                    source = source[col:len(source) - len(lines[end_row - 1]) + end_col]
                    _add_string(out, source, offset + row)
                    fstring = []
                continue
            if kind in _DROPPED:
                if kind == tokenize.COMMENT:
                    out.comments.append((offset + token.start[0], string.lstrip("#")))
                continue
            if kind == tokenize.STRING:
                _add_string(out, string, offset + token.start[0])
                continue
            if kind == tokenize.NUMBER:
                string = _number_token(string)
            elif kind == tokenize.NAME:
                if not string.isascii():
                    string = unicodedata.normalize("NFKC", string)
            elif kind == tokenize.OP or kind == tokenize.ERRORTOKEN:
                if string in _CLOSING and out.tokens and out.tokens[-1] == ",":
                    out.tokens.pop()  # a trailing comma (black's "magic" one)
                    out.lines.pop()
                if string in ("(", ")", ";", "\\") or not string.strip():
                    continue
            out.tokens.append(string)
            out.lines.append(offset + token.start[0])
    except tokenize.TokenError as error:
        message, (row, _) = error.args[0], error.args[1]
        if "multi-line statement" in message:
            return None  # an unclosed bracket: every token was read
        return row
    except SyntaxError as error:
        return error.lineno or 1
    return None


def _add_string(out: Tokens, source: str, line: int) -> None:
    token, value = _string_token(source)
    out.tokens.append(token)
    out.lines.append(line)
    if len(value) >= _LONG_STRING and ("\n" in value or "(" in value or "=" in value):
        out.strings.append((line, value))


def _shingles(tokens: list[str]) -> list[int]:
    return [hash(tuple(tokens[index:index + SHINGLE]))
            for index in range(len(tokens) - SHINGLE + 1)]


# --- the instructor's code ---------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """A passage of instructor-only code: what a leak is reported as."""

    label: str      # "lab1's solution of softmax"
    file: str       # "solutions/lab1/lab1_attention.py"




def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(KIT_ROOT))
    except ValueError:
        return str(path)


def _source_code(lab: Lab) -> dict[str, list]:
    """The lab's source: its solution regions and hidden tests, as (unit, tokens,
    line of each token) passages, and the rest (public) as one list of tokens."""
    path = lab.source_path
    text = path.read_text(encoding="utf-8")
    region_of_line: dict[int, tuple[str, str, int]] = {}
    cell, region, count = "", None, 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("# %%"):
            found = re.search(r'grade_id="([^"]+)"', stripped)
            cell = found.group(1) if found else ""
        if stripped == "### BEGIN SOLUTION":
            region, count = "solution", count + 1
        elif stripped == "### BEGIN HIDDEN TESTS":
            region, count = "hidden", count + 1
        elif stripped in ("### END SOLUTION", "### END HIDDEN TESTS"):
            region = None
        elif region:
            region_of_line[number] = (region, cell, count)
    tokens = code_tokens(text)
    imports = _import_lines(text)
    passages: dict[int, tuple[str, Unit, list[str], list[int]]] = {}
    public: list[str] = []
    for token, at in zip(tokens.tokens, tokens.lines):
        place = region_of_line.get(at)
        if place is None:
            public.append(token)
            continue
        if at in imports:
            continue
        kind, exercise, index = place
        if index not in passages:
            label = (f"{lab.id}'s solution of {exercise or 'an exercise'}" if kind == "solution"
                     else f"{lab.id}'s hidden tests {exercise}".rstrip())
            passages[index] = (kind, Unit(label, _relative(path)), [], [])
        passages[index][2].append(token)
        passages[index][3].append(at)
    # Public too: the prose (markdown cells are comments here) and the code in
    # strings (a check's hint), which the scanner reads as code in a notebook.
    prose = "\n".join(comment for line, comment in tokens.comments
                      if line not in region_of_line)
    code: dict[str, list] = {"solution": [], "hidden": [], "public": [
        public, *_expanded(code_tokens(prose)),
        *(stream for line, value in tokens.strings if line not in region_of_line
          for stream in _expanded(code_tokens(value)))]}
    for region, *passage in passages.values():
        code[region].append(tuple(passage))
    return code


def _import_lines(text: str) -> set[int]:
    """The lines of ``text``'s import statements: never an answer
    (``from __future__ import annotations`` is everywhere; the grader's own
    modules are SECRET_MARKERS)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    return {line for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}


def _expanded(tokens: Tokens, depth: int = 0) -> list[list[str]]:
    """The token lists of ``tokens`` and of the code in its long strings, as
    the scanner reads them."""
    streams = [tokens.tokens]
    if depth < 2:
        for _, value in tokens.strings:
            streams += _expanded(code_tokens(value), depth + 1)
    return streams


def _module_code(lab: Lab, path: Path, what: str) -> list[tuple[Unit, list[str], list[int]]]:
    """A Python module, one passage per top-level function or class."""
    text = path.read_text(encoding="utf-8")
    tokens = code_tokens(text)
    name_of_line: dict[int, str] = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    for node in (tree.body if tree else []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            for line in range(first, (node.end_lineno or node.lineno) + 1):
                name_of_line[line] = node.name
    passages: dict[str, tuple[Unit, list[str], list[int]]] = {}
    imports = _import_lines(text)
    for token, line in zip(tokens.tokens, tokens.lines):
        if line in imports:
            continue
        name = name_of_line.get(line, "")
        if name not in passages:
            label = f"{lab.id}'s {what}" + (f" of {name}" if name else "")
            passages[name] = (Unit(label, _relative(path)), [], [])
        passages[name][1].append(token)
        passages[name][2].append(line)
    return list(passages.values())


def _answers_code(lab: Lab, path: Path, what: str) -> list[tuple[Unit, list[str], list[int]]]:
    """The code in the string literals of samples.py / verdicts.py (answers as
    a student would write them), one passage a string, named by its exercise."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return []
    passages = []

    def visit(node, exercise):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                name = key.value if isinstance(key, ast.Constant) and isinstance(
                    key.value, str) else exercise
                visit(value, name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if len(node.value) >= _LONG_STRING:
                try:
                    ast.parse(node.value)
                except (SyntaxError, ValueError):
                    return
                tokens = code_tokens(node.value)
                imports = _import_lines(node.value)
                kept = [(token, line) for token, line in zip(tokens.tokens, tokens.lines)
                        if line not in imports]
                label = f"{lab.id}'s {what}" + (f" of {exercise}" if exercise else "")
                passages.append((Unit(label, _relative(path)), [token for token, _ in kept],
                                 [node.lineno + line - 1 for _, line in kept]))
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, exercise)

    visit(tree, "")
    return passages


def _stat(path: Path) -> tuple[str, float, int]:
    try:
        status = path.stat()
    except OSError:
        return (str(path), 0.0, -1)
    return (str(path), status.st_mtime, status.st_size)


def _lab_files(lab: Lab) -> list[Path]:
    folder = lab.folder
    return [lab.source_path, folder / "reference.py", folder / "hidden.py",
            *sorted((folder / "standins").glob("*.py")), folder / "samples.py",
            folder / "verdicts.py"]


@functools.lru_cache(maxsize=64)
def _lab_code(lab: Lab, stamp: tuple) -> dict[str, list]:
    """``lab``'s code by kind, read once while its files are unchanged (``stamp``)."""
    folder = lab.folder
    kinds: dict[str, list] = {**_source_code(lab), "reference": [], "standin": [], "answers": []}
    if (folder / "reference.py").exists():
        kinds["reference"] = _module_code(lab, folder / "reference.py", "reference")
    if (folder / "hidden.py").exists():     # the hidden tests as a module (autograder.hidden)
        kinds["hidden"] += _module_code(lab, folder / "hidden.py", "hidden tests")
    for path in sorted((folder / "standins").glob("*.py")):
        kinds["standin"] += _module_code(lab, path, "stand-in")
    for name, what in (("samples.py", "sample submission"), ("verdicts.py", "verdict suite")):
        if (folder / name).exists():
            kinds["answers"] += _answers_code(lab, folder / name, what)
    return kinds


# --- findings ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Leak:
    """A finding: instructor-only text in ``path`` (``where`` inside it: an
    archive's member, a notebook's cell or output), or, with ``kind``
    "unreadable", a part the scanner cannot read."""

    path: str
    what: str
    where: str = ""
    kind: str = "leak"

    def __str__(self) -> str:
        inside = f" [{self.where}]" if self.where else ""
        return f"{self.path}{inside}: {self.what}"


def allowed(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` (relative, with /) matches one of the globs ``patterns``
    (``*`` and ``?`` within a folder, ``**`` across folders; a folder allows
    what it holds)."""
    for pattern in patterns:
        pattern = pattern.strip().removeprefix("./").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if re.fullmatch(regex + "(?:/.*)?", path):  # a folder: everything in it
            return True
    return False


def _segments(hits: list) -> Iterable[tuple[list, int]]:
    """Runs of ``hits`` (position first, in order) whose shingles overlap or
    are at most SHINGLE tokens apart, each with the tokens its shingles cover."""
    segment: list = []
    covered, end = 0, -1
    for hit in hits:
        position = hit[0]
        if segment and position > end + SHINGLE:
            yield segment, covered
            segment, covered, end = [], 0, -1
        segment.append(hit)
        covered += max(0, position + SHINGLE - max(position, end))
        end = max(end, position + SHINGLE)
    if segment:
        yield segment, covered


class Scanner:
    """Finds instructor-only code of the labs ``labs`` in files."""

    def __init__(self, labs: list[Lab]):
        code = [_lab_code(lab, tuple(_stat(path) for path in _lab_files(lab))) for lab in labs]
        # Public: the provided code of every lab of the kit, scanned or not
        # (labkit's checks of lab 4 share lines with lab 1's stand-ins).
        public: set[int] = set()
        every = {lab.id: lab for lab in available_labs()} | {lab.id: lab for lab in labs}
        for lab in every.values():
            for tokens in _lab_code(lab, tuple(_stat(path) for path in _lab_files(lab)))[
                    "public"]:
                public.update(_shingles(tokens))
        self.units: list[Unit] = []
        #: shingle -> (unit, line in the unit's file)
        self.secret: dict[int, tuple[int, int]] = {}
        #: unit -> its shingles: a solution too short for MIN_TOKENS, found whole
        self.whole: dict[int, set[int]] = {}
        for kind in ("solution", "hidden", "reference", "standin", "answers"):
            for kinds in code:
                for unit, tokens, lines in kinds[kind]:
                    index = len(self.units)
                    self.units.append(unit)
                    shingles = _shingles(tokens)
                    for position, shingle in enumerate(shingles):
                        if shingle not in public:
                            self.secret.setdefault(shingle, (index, lines[position]))
                    if kind == "solution" and SHORTEST <= len(tokens) < MIN_TOKENS + SHINGLE \
                            and all(self.secret.get(shingle, (None,))[0] == index
                                    for shingle in shingles):
                        self.whole[index] = set(shingles)

    # -- one text --

    def _code_leaks(self, text: str, depth: int = 0) -> list[tuple[int, int, int, int, str]]:
        """(unit, secret line, tokens matched, line in ``text``, that line) for
        each passage of ``text`` that holds secret code: each unit's own
        passages first, then passages that hold enough of several together."""
        tokens = code_tokens(text)
        hits = [(position, *self.secret[shingle], shingle)
                for position, shingle in enumerate(_shingles(tokens.tokens))
                if shingle in self.secret]
        shown = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        found = []

        def report(unit, segment, covered):
            line = tokens.lines[segment[0][0]]
            secret_line = next(each[2] for each in segment if each[1] == unit)
            found.append((unit, secret_line, covered, line, shown[line - 1].strip()))

        by_unit: dict[int, list] = {}
        for hit in hits:
            by_unit.setdefault(hit[1], []).append(hit)
        for unit, unit_hits in by_unit.items():
            whole = self.whole.get(unit)
            for segment, covered in _segments(unit_hits):
                if covered >= MIN_TOKENS or (whole and whole <= {hit[3] for hit in segment}):
                    report(unit, segment, covered)
                    break
        reported = {each[0] for each in found}
        for segment, covered in _segments(hits):
            units = Counter(hit[1] for hit in segment)
            if covered >= MIN_TOKENS and not reported & units.keys():
                report(units.most_common(1)[0][0], segment, covered)
        if depth < 2:
            for line, value in tokens.strings:
                found += [(unit, secret_line, covered, line, snippet)
                          for unit, secret_line, covered, _, snippet
                          in self._code_leaks(value, depth + 1)]
        return found

    def _piece_leaks(self, path: str, piece: Piece, seen: set) -> list[Leak]:
        leaks = []
        for marker, pattern in _MARKERS:
            if marker not in seen and pattern.search(piece.text):
                seen.add(marker)
                leaks.append(Leak(path, f"contains {marker!r}", piece.where))
        for unit, secret_line, covered, line, snippet in self._code_leaks(piece.text):
            if unit in seen:
                continue
            seen.add(unit)
            found = self.units[unit]
            if len(snippet) > 80:
                snippet = snippet[:77] + "..."
            leaks.append(Leak(path, f"{found.label} ({found.file}, line {secret_line}): "
                                    f"{covered} tokens of it from line {line}: {snippet!r}",
                              piece.where))
        return leaks

    def _decoded_leaks(self, path: str, parts) -> list[Leak]:
        leaks: list[Leak] = []
        seen: set = set()
        for part in parts:
            if isinstance(part, Unreadable):
                leaks.append(Leak(path, part.reason, part.where, kind="unreadable"))
            else:
                leaks += self._piece_leaks(path, part, seen)
        return leaks

    def text_leaks(self, name: str, text: str) -> list[Leak]:
        """The leaks in ``text`` (a notebook's JSON is read as its cells)."""
        return self._decoded_leaks(name, decode_text(text))

    def bytes_leaks(self, name: str, data: bytes) -> list[Leak]:
        """The leaks in the file ``data``, decoded (autograder.publish.decode), and
        what of it cannot be read (``kind`` "unreadable")."""
        return self._decoded_leaks(name, decode(data))

    def tree_leaks(self, root: Path, allow: Iterable[str] = ()) -> list[Leak]:
        """Every leak in the files under ``root`` (.git aside), and every file
        or part of one that cannot be read, unless ``allow`` (globs relative to
        ``root``) lists the file: then only its readable parts are checked."""
        allow = list(allow)
        leaks: list[Leak] = []
        for path in sorted(Path(root).rglob("*")):
            relative = path.relative_to(root)
            if ".git" in relative.parts or not path.is_file():
                continue
            name = relative.as_posix()
            found = self.bytes_leaks(name, path.read_bytes())
            if allow and allowed(name, allow):
                found = [leak for leak in found if leak.kind != "unreadable"]
            leaks += found
        return leaks
