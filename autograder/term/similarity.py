"""Students' code compared pairwise, to flag pairs for a person to judge.

After a lab is graded, :func:`find_similar` compares every two students'
notebooks, and every student's notebook with each file of an optional folder
of references (earlier terms' notebooks, solutions found online), by
fingerprints of their code: the k-grams of MOSS's winnowing (Schleimer,
Wilkerson and Aiken, "Winnowing: Local Algorithms for Document
Fingerprinting", SIGMOD 2003), on code normalised as copydetect 0.5's
``filter_code`` does. The result lists pairs, most similar first; it changes
no score, and a listed pair is a reason to look, not a verdict.

What is compared (:func:`extract_answers`): every code cell the student
wrote or changed: the answer cells (nbgrader grade id one of the lab's
exercises), the cells the student added (untagged: every cell runs when a
notebook is graded, so an answer copied into a new cell counts as much as
one in its answer cell) and the provided cells the student edited. Of each
cell, the lines the released notebook (labs/<lab>/<notebook>.ipynb) has in
any cell are removed (stripped, line by line: signatures, docstrings, ``#
YOUR CODE HERE``, checks, demos), so that only the student's own lines are
left; two students who wrote nothing are not similar. The code is
fingerprinted in two layers (:data:`LAYERS`): its structure, where
Pygments' tokens are copydetect's (every name ``V``, every string ``S``),
so that renamed variables do not hide a copy, and its text, names kept, so
that a copy of code that many write alike (with their own names) still
stands out. Both drop comments and white space. A k-gram never spans two
blocks (lines of one cell with no provided line between them), so that
moving functions into other cells, or putting them in another order, does
not hide them.

What counts (:class:`_Class`): each fingerprint (a k-gram of :data:`NOISE`
filtered characters, about a statement and a half) weighs log((N + 1) / c),
c the number of the N notebooks and references that have it (at least 2),
so that the fewer students wrote a piece of code, the more it counts; these
weigh nothing:

- the provided code's fingerprints: every k-gram of the released notebook's
  code cells (a student who pastes a check into a cell of their own copies
  nobody);
- the class's common code (MOSS's ``-m``): a fingerprint in more than
  :func:`common_limit` (max(3, N / 3)) notebooks is an idiom the lab's
  hints lead to (``V=V.V(V-V)`` for ``e = np.exp(x - m)``), not evidence;
  a ring of more students than that copying the same code is missed, and
  ``common`` lowers the limit to look for one;
- between two students, the fingerprints of a reference that either is
  listed with: two students who copied the same public solution are listed
  each beside it, not with each other.

The similarity of a to b (:attr:`Pair.similarity_a`) is the weight of a's
fingerprints that b has too, over the weight of all of a's, the mean of
the two layers'; a pair's similarity (:attr:`Pair.similarity`, what the
list is ordered by and the threshold applies to) is the mean of its two
sides', so that a short notebook found whole in a long one is not 100%
similar (what made short answers score 99% before). A pair is listed from
:data:`THRESHOLD`, when each side has at least :data:`MIN_TOKENS` filtered
characters of counted code in common with the other.

The defaults were chosen on generated classes (tests/similarity_class.py;
benchmarks/similarity_calibration.py prints the figures, and
docs/instructors.md has them): 30 lab 1 notebooks written independently,
in styles that follow the hints more or less closely, with seven planted
copies (verbatim, renamed, reordered, moved into new cells, respaced,
renamed-reordered-moved, half the exercises copied). Over ten such classes
every copy is listed and ranked above every independent pair, and 0.56% of
the independent pairs are listed too. The comparison before (answer cells
only, copydetect's share of the smaller side, no common code set aside,
threshold 0.5) listed 251 of the first class's 666 pairs and missed both
copies moved into new cells. Setting common code aside from 10% of the
class on (more than 3 of 37 notebooks, ``common=3``) missed 10 of the 70
copies: a copy of a student who wrote mostly what the hints say shares
little rare code, but the whole combination of common choices, which the
weighting counts.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import nbformat
import numpy as np
from pygments import lexers, token

from autograder.labs import Lab, get_lab

__all__ = [
    "NOISE", "GUARANTEE", "THRESHOLD", "MIN_TOKENS", "COMMON_AT_LEAST", "COMMON_SHARE", "LIMIT",
    "REFERENCE_PREFIX", "Answers", "Snippet", "Match", "Pair", "Pairs",
    "extract_answers", "answer_code", "common_limit", "find_similar",
]

#: Length of a fingerprint (a k-gram), in filtered characters: copydetect's noise_t.
NOISE = 20
#: Every match at least this long is found: copydetect's guarantee_t (equal
#: to NOISE: every k-gram is a fingerprint, window 1).
GUARANTEE = 20
#: A pair is listed when its similarity (Pair.similarity) reaches this.
THRESHOLD = 0.25
#: ... and each side has this many filtered characters of counted code in
#: common with the other (about two statements): two notebooks that hold
#: one same line and nothing else are not listed.
MIN_TOKENS = 60
#: A fingerprint found in more than max(COMMON_AT_LEAST, COMMON_SHARE x N)
#: of the N notebooks and references is common code: it does not count
#: (MOSS's -m).
COMMON_AT_LEAST = 3
COMMON_SHARE = 1 / 3
#: Pairs listed at most; the rest are counted (Pairs.more).
LIMIT = 50
#: How a reference file is named in a Pair: "reference:<path relative to the folder>".
REFERENCE_PREFIX = "reference:"
#: Answer code compared per notebook, at most (a notebook padded with
#: megabytes of code is compared on its first part, and said so).
MAX_ANSWER_CHARS = 200_000


@dataclass(frozen=True)
class Answers:
    """A notebook's code, as compared.

    Attributes:
        text: the kept lines, joined by newlines.
        origins: for each line of ``text``, (exercise, line number in its
            cell, from 1). The exercise of a line outside an answer cell is
            the one whose ``def``/``class`` precedes it in that cell, else
            the exercise of the answer cell above it ("" before any).
        cells: for each line of ``text``, "" when it is in the exercise's
            answer cell, else which cell it is in: "cell 14, added" (a cell
            the student added; cells counted from 1, markdown included) or
            "cell 10, check_softmax edited" (a provided cell; "cell 12, a
            second softmax cell" for a duplicated answer cell); empty when
            there are no cells (a reference .py file).
        blocks: for each line of ``text``, the number of its block: lines of
            one cell and exercise with no provided line between them. A
            fingerprint never spans two blocks, so that code moved into
            other cells, or functions put in another order, is fingerprinted
            as it was (empty: a block per exercise).
    """

    text: str
    origins: tuple[tuple[str, int], ...] = ()
    cells: tuple[str, ...] = ()
    blocks: tuple[int, ...] = ()

    def cell(self, index: int) -> str:
        return self.cells[index] if self.cells else ""


@dataclass(frozen=True)
class Snippet:
    """Matched lines of one side within one cell.

    Attributes:
        exercise: the exercise ("" when not known).
        lines: their line numbers in the cell (from 1; in a reference .py
            file, in the file).
        text: those lines (provided lines in between are not shown).
        cell: "" for the exercise's answer cell, else the cell (see Answers.cells).
    """

    exercise: str
    lines: tuple[int, ...]
    text: str
    cell: str = ""


@dataclass(frozen=True)
class Match:
    """One block of matching code: a's lines beside b's."""

    a: tuple[Snippet, ...]
    b: tuple[Snippet, ...]


@dataclass(frozen=True)
class Pair:
    """Two notebooks (or a notebook and a reference) whose code is similar.

    Attributes:
        a, b: student ids, or "reference:<relative path>" (only ever b).
        similarity_a: share of a's code found in b (0..1), each fingerprint
            weighted by its rarity in the class, the mean of the two layers'
            shares (the module's docstring says how).
        similarity_b: share of b's code found in a, likewise.
        tokens: filtered characters of a's code (names as ``V``) that the
            fingerprints a shares with b cover (in either layer; common and
            provided code not counted).
        matches: the matching blocks, side by side.
    """

    a: str
    b: str
    similarity_a: float
    similarity_b: float
    tokens: int
    matches: tuple[Match, ...] = ()

    @property
    def similarity(self) -> float:
        """The mean of the two sides' similarities: what the list is ordered
        by and the threshold applies to (a short notebook found whole in a
        long one is half similar, not 100%)."""
        return (self.similarity_a + self.similarity_b) / 2


class Pairs(list):
    """find_similar's answer: the listed Pairs, most similar first, and the counts.

    Attributes:
        threshold, noise, guarantee, min_tokens: the settings used.
        common: a fingerprint in more than this many of the notebooks and
            references was common code, not counted.
        notebooks: how many students' notebooks were compared.
        references: how many reference files were compared.
        compared: how many pairs were compared.
        more: how many pairs reached the threshold but are not listed (the cap).
        skipped: (student id or "reference:<path>", why) of each file not read.
    """

    def __init__(self, pairs=(), *, threshold: float = THRESHOLD, noise: int = NOISE,
                 guarantee: int = GUARANTEE, min_tokens: int = MIN_TOKENS, common: int = 0,
                 notebooks: int = 0, references: int = 0, compared: int = 0, more: int = 0,
                 skipped: list[tuple[str, str]] | None = None):
        super().__init__(pairs)
        self.threshold, self.noise, self.guarantee = threshold, noise, guarantee
        self.min_tokens, self.common = min_tokens, common
        self.notebooks, self.references, self.compared = notebooks, references, compared
        self.more = more
        self.skipped = list(skipped or [])

    @property
    def pairs(self) -> list[Pair]:
        """The listed pairs (a plain list), for templates."""
        return list(self)


# --------------------------------------------------------------------------
# What is compared
# --------------------------------------------------------------------------


def _lab(lab: Lab | str) -> Lab:
    return lab if isinstance(lab, Lab) else get_lab(lab)


def _read(notebook) -> nbformat.NotebookNode:
    if isinstance(notebook, (str, Path)):
        return nbformat.read(notebook, as_version=4)
    return nbformat.from_dict(notebook)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _grade_id(cell) -> str:
    nbgrader = cell.get("metadata", {}).get("nbgrader", {})
    grade_id = nbgrader.get("grade_id", "") if isinstance(nbgrader, dict) else ""
    return grade_id if isinstance(grade_id, str) else ""


@dataclass(frozen=True)
class _Provided:
    """The released notebook's code: its stripped lines, its cells' sources
    and grade ids."""

    lines: frozenset[str]
    sources: tuple[str, ...]
    grade_ids: frozenset[str]


@functools.cache
def _provided(student_path: Path) -> _Provided:
    try:
        blank = nbformat.read(student_path, as_version=4)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"The released blank notebook {student_path} could not be read ({error}); it holds "
            "the provided code that is not compared. Run `make labs` to build it.") from None
    cells = [cell for cell in blank.get("cells", []) if cell.get("cell_type") == "code"]
    sources = tuple(_source(cell) for cell in cells)
    return _Provided(frozenset(line.strip() for source in sources for line in source.splitlines()),
                     sources, frozenset(_grade_id(cell) for cell in cells) - {""})


def _definition(exercises) -> re.Pattern:
    return re.compile(r"\s*(?:def|class)\s+(" + "|".join(map(re.escape, exercises)) + r")\b")


def extract_answers(notebook, lab: Lab | str) -> Answers:
    """The code the student wrote or changed in ``notebook`` (a path or a
    notebook), with its origins.

    Every code cell, in notebook order, each line kept unless it is empty or
    (stripped) one of the lines of the released notebook
    (labs/<lab>/<notebook>.ipynb): the answer cells of ``lab``'s exercises,
    the cells the student added and the provided cells the student edited.

    Raises:
        ValueError: ``lab`` is not a lab, or its blank notebook cannot be read.
        OSError, nbformat's errors: ``notebook`` is a path that cannot be read.
    """
    lab = _lab(lab)
    provided = _provided(lab.student_path)
    definition = _definition(lab.exercises)
    kept = _Kept()
    answered: set[str] = set()
    section = ""
    for index, cell in enumerate(_read(notebook).get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        grade_id = _grade_id(cell)
        if grade_id in lab.exercises and grade_id not in answered:
            answered.add(grade_id)
            section, label = grade_id, ""
        elif grade_id in lab.exercises:
            label = f"cell {index}, a second {grade_id} cell"
        elif grade_id in provided.grade_ids:
            label = f"cell {index}, {grade_id} edited"
        else:
            label = f"cell {index}, added"
        kept.block()
        exercise = section
        for number, line in enumerate(_source(cell).splitlines(), start=1):
            found = definition.match(line) if label else None
            exercise = found.group(1) if found else exercise
            kept.line(line, exercise, number, label, provided.lines)
    return kept.answers()


class _Kept:
    """The lines extract_answers keeps, and where each block of them starts
    (a new cell, or a provided line left out in between)."""

    def __init__(self):
        self.lines, self.origins, self.cells, self.blocks = [], [], [], []
        self.number, self.new = 0, True

    def block(self) -> None:
        self.new = True

    def line(self, line: str, exercise: str, number: int, cell: str,
             provided: frozenset[str]) -> None:
        stripped = line.strip()
        if stripped and stripped in provided:
            self.new = True
        elif stripped:
            if self.new or (self.origins and self.origins[-1][0] != exercise):
                self.number, self.new = self.number + 1, False
            self.lines.append(line)
            self.origins.append((exercise, number))
            self.cells.append(cell)
            self.blocks.append(self.number)

    def answers(self, cells: bool = True) -> Answers:
        return Answers("\n".join(self.lines), tuple(self.origins),
                       tuple(self.cells) if cells else (), tuple(self.blocks))


def answer_code(notebook, lab: Lab | str) -> str:
    """The student's code only (see :func:`extract_answers`), as one text."""
    return extract_answers(notebook, lab).text


def _reference_answers(path: Path, lab: Lab) -> Answers:
    """A reference file's code: a notebook's (as a student's), or a whole .py
    file, less every provided line, each line carrying the exercise whose
    ``def``/``class`` precedes it."""
    if path.suffix == ".ipynb":
        return extract_answers(path, lab)
    source = path.read_text(encoding="utf-8", errors="replace")
    provided = _provided(lab.student_path).lines
    definition = _definition(lab.exercises)
    kept, exercise = _Kept(), ""
    for number, line in enumerate(source.splitlines(), start=1):
        found = definition.match(line)
        exercise = found.group(1) if found else exercise
        kept.line(line, exercise, number, "", provided)
    return kept.answers(cells=False)


def _truncated(answers: Answers, limit: int) -> Answers:
    kept = answers.text[:limit].rsplit("\n", 1)[0]
    count = kept.count("\n") + 1
    return Answers(kept, answers.origins[:count], answers.cells[:count],
                   answers.blocks[:count])


# --------------------------------------------------------------------------
# Fingerprints
# --------------------------------------------------------------------------

#: The two layers a notebook is fingerprinted in: its structure (names set
#: aside, as copydetect's filter does) and its text (names kept).
LAYERS = ("structure", "text")

_LEXER = lexers.get_lexer_by_name("python")
_NAMES = {token.Name, token.Name.Variable, token.Name.Attribute}
_QUOTES = {"'", '"', "'''", '"""'}


def _normalised(code: str) -> tuple[tuple[str, list[int]], ...]:
    """``code`` as compared, in each layer of LAYERS: (filtered code, the
    position in ``code`` of each of its characters).

    Both drop comments and white space and write every string's quotes as
    ``"``. The structure layer is copydetect's filter_code: a name is ``V``
    (a defined function's ``F``, a class's ``O``), a string's text ``S``;
    builtins (``range``, ``print``), keywords, numbers and operators are
    kept. The text layer keeps names and strings as they are. ``a@b``,
    which Pygments reads as a decorator, is a matrix product in both.
    """
    layers: tuple[tuple[list[str], list[int]], ...] = tuple(([], []) for _ in LAYERS)

    def put(layer: int, text: str, at: int, exact: bool) -> None:
        chars, where = layers[layer]
        chars.append(text)
        where.extend(at + i if exact else at for i in range(len(text)))

    for at, kind, text in _LEXER.get_tokens_unprocessed(code):
        if kind in token.Comment or kind in token.Text:
            continue
        if kind in token.Name.Decorator:
            put(0, "@V", at, False)
            put(1, text, at, True)
        elif kind in _NAMES or kind in token.Name.Function or kind in token.Name.Class:
            put(0, "F" if kind in token.Name.Function else "O" if kind in token.Name.Class
                else "V", at, False)
            put(1, text, at, True)
        elif kind in token.Literal.String:
            if text in _QUOTES:
                put(0, '"', at, False)
                put(1, '"', at, False)
            else:
                put(0, "S", at, False)
                put(1, text, at, True)
        else:
            put(0, text, at, True)
            put(1, text, at, True)
    return tuple(("".join(chars), where) for chars, where in layers)


def _hash(kgram: str) -> int:
    """A k-gram's fingerprint: 64 bits, the same in every run (copydetect's
    hash() is randomized per process)."""
    return int.from_bytes(hashlib.blake2b(kgram.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "little", signed=True)


def _fingerprints(filtered: str, k: int, window: int) -> tuple[list[int], list[int]]:
    """(hashes, positions) of ``filtered``'s fingerprints (winnowed when window > 1)."""
    if len(filtered) < k:
        return [], []
    hashes = np.array([_hash(filtered[i:i + k]) for i in range(len(filtered) - k + 1)],
                      dtype=np.int64)
    # Imported here: copydetect's package imports matplotlib.pyplot (0.3 s), which
    # a run without --similarity never needs.
    from copydetect.utils import winnow

    hashes, positions = winnow(hashes, window, remove_duplicates=False)
    return np.asarray(hashes).tolist(), np.asarray(positions).tolist()


@dataclass
class _Layer:
    """One layer of a side: its units' filtered code laid end to end.

    ``where[h]``: the positions of fingerprint h; ``starts[u]``: unit u's
    first position; ``raw[u]``: the position in unit u's text of each of its
    filtered characters."""

    where: dict[int, list[int]] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)
    raw: list[list[int]] = field(default_factory=list)
    length: int = 0


@dataclass
class _Unit:
    """One cell's kept lines (or one exercise of a .py file): ``rows``, their
    indices in Answers; ``line_starts``, their positions in the unit's text."""

    rows: list[int]
    line_starts: list[int]


@dataclass
class _Side:
    """One notebook or reference as fingerprinted, in each layer."""

    name: str
    answers: Answers
    units: list[_Unit] = field(default_factory=list)
    layers: tuple[_Layer, ...] = ()
    #: Where each unit's text starts in the side's text (units end to end).
    text_starts: list[int] = field(default_factory=list)
    text_length: int = 0


def _units(answers: Answers) -> list[list[int]]:
    """Rows of each unit: the lines of one block (see Answers.blocks)."""
    groups: dict[object, list[int]] = {}
    for row in range(len(answers.origins)):
        block = answers.blocks[row] if answers.blocks else answers.origins[row][0]
        groups.setdefault(block, []).append(row)
    return list(groups.values())


def _side(name: str, answers: Answers, k: int, window: int) -> _Side:
    side = _Side(name, answers, layers=tuple(_Layer() for _ in LAYERS))
    text_lines = answers.text.split("\n") if answers.origins else []
    for rows in _units(answers):
        starts, position = [], 0
        for row in rows:
            starts.append(position)
            position += len(text_lines[row]) + 1
        side.units.append(_Unit(rows, starts))
        text = "\n".join(text_lines[row] for row in rows)
        side.text_starts.append(side.text_length)
        side.text_length += len(text) + 1
        for layer, (filtered, raw) in zip(side.layers, _normalised(text)):
            layer.starts.append(layer.length)
            layer.raw.append(raw)
            for value, at in zip(*_fingerprints(filtered, k, window)):
                layer.where.setdefault(value, []).append(layer.length + at)
            layer.length += len(filtered)
    return side


@functools.cache
def _provided_hashes(student_path: Path, k: int, window: int) -> tuple[frozenset[int], ...]:
    """Every fingerprint of the released notebook's code cells, per layer."""
    found: tuple[set[int], ...] = tuple(set() for _ in LAYERS)
    for source in _provided(student_path).sources:
        for hashes, (filtered, _) in zip(found, _normalised(source)):
            hashes.update(_fingerprints(filtered, k, window)[0])
    return tuple(frozenset(hashes) for hashes in found)


def _covered(side: _Side, shared: tuple[set[int], ...], k: int) -> int:
    """The filtered characters of ``side``'s structure layer (names as ``V``)
    in the code that the fingerprints ``shared`` (per layer) cover: code
    shared in either layer, measured in one unit."""
    if not any(shared):
        return 0
    steps = np.zeros(side.text_length + 1, dtype=np.int32)
    for layer, hashes in zip(side.layers, shared):
        for value in hashes:
            for position in layer.where[value]:
                index = bisect.bisect_right(layer.starts, position) - 1
                raw, offset = layer.raw[index], position - layer.starts[index]
                base = side.text_starts[index]
                steps[base + raw[offset]] += 1
                steps[base + raw[min(offset + k, len(raw)) - 1] + 1] -= 1
    covered = np.cumsum(steps) > 0
    structure = side.layers[0]
    return int(sum(np.count_nonzero(covered[np.asarray(raw, dtype=np.int64) + base])
                   for raw, base in zip(structure.raw, side.text_starts) if raw))


def common_limit(students: int) -> int:
    """A fingerprint in more than this many of ``students`` notebooks is
    common code: max(COMMON_AT_LEAST, COMMON_SHARE x students), rounded down."""
    return max(COMMON_AT_LEAST, math.floor(COMMON_SHARE * students))


# --------------------------------------------------------------------------
# Matching blocks, for the report
# --------------------------------------------------------------------------


def _rows(side: _Side, layer: _Layer, position: int, k: int) -> range:
    """The rows (indices in Answers) that the k-gram at ``position`` of ``layer`` touches."""
    index = bisect.bisect_right(layer.starts, position) - 1
    unit, raw = side.units[index], layer.raw[index]
    offset = position - layer.starts[index]
    first, last = raw[offset], raw[min(offset + k, len(raw)) - 1]
    low = max(bisect.bisect_right(unit.line_starts, first) - 1, 0)
    high = max(bisect.bisect_right(unit.line_starts, last) - 1, low)
    return range(unit.rows[low], unit.rows[high] + 1)


def _matches(a: _Side, b: _Side, shared: tuple[set[int], ...], k: int) -> tuple[Match, ...]:
    """The matching blocks of a and b, side by side: the lines of a and b
    that share a fingerprint (in either layer), joined into blocks by a
    union-find over lines (a's lines of a fingerprint with b's). A
    fingerprint found in one place of each side joins first; one found in
    several places (an idiom written twice) only adds lines not joined yet,
    so that it does not tie unrelated blocks together."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def root(node: tuple[int, int]) -> tuple[int, int]:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    occurrences = sorted(
        ((len(layer_a.where[value]) * len(layer_b.where[value]), layer, value)
         for layer, (layer_a, layer_b, hashes) in enumerate(zip(a.layers, b.layers, shared))
         for value in hashes))
    for count, layer, value in occurrences:
        layer_a, layer_b = a.layers[layer], b.layers[layer]
        rows = [[(0, row) for i in layer_a.where[value] for row in _rows(a, layer_a, i, k)],
                [(1, row) for j in layer_b.where[value] for row in _rows(b, layer_b, j, k)]]
        joined = [node for node in rows[0] + rows[1] if node in parent]
        if count > 1 and joined:
            anchor = root(joined[0])
            for node in rows[0] + rows[1]:
                if node not in parent:
                    parent[node] = anchor
            continue
        anchor = root(rows[0][0])
        for node in rows[0] + rows[1]:
            parent[root(node)] = anchor
    groups: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for node in list(parent):
        groups.setdefault(root(node), ([], []))[node[0]].append(node[1])
    ordered = sorted((sorted(rows_a), sorted(rows_b)) for rows_a, rows_b in groups.values()
                     if rows_a and rows_b)
    return tuple(Match(_snippets(a.answers, rows_a), _snippets(b.answers, rows_b))
                 for rows_a, rows_b in ordered)


def _snippets(answers: Answers, rows: list[int]) -> tuple[Snippet, ...]:
    """``rows`` (indices in Answers), grouped by cell and exercise, in text order."""
    text_lines = answers.text.split("\n")
    snippets: list[Snippet] = []
    group: list[int] = []

    def place(row: int) -> tuple[str, str]:
        return answers.origins[row][0], answers.cell(row)

    for row in rows:
        if group and place(group[-1]) != place(row):
            snippets.append(_snippet(answers, group, text_lines))
            group = []
        group.append(row)
    if group:
        snippets.append(_snippet(answers, group, text_lines))
    return tuple(snippets)


def _snippet(answers: Answers, rows: list[int], text_lines: list[str]) -> Snippet:
    return Snippet(answers.origins[rows[0]][0], tuple(answers.origins[r][1] for r in rows),
                   "\n".join(text_lines[r] for r in rows), answers.cell(rows[0]))


# --------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------


def _check_settings(threshold: float, limit: int, noise: int, guarantee: int,
                    min_tokens: int, common: int | None) -> None:
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold is {threshold!r}: expected a share of the code, above 0 and "
                         f"at most 1 (the default is {THRESHOLD}).")
    if limit < 0:
        raise ValueError(f"limit is {limit!r}: expected the number of pairs to list, 0 or more.")
    if not 1 <= noise <= guarantee:
        raise ValueError(f"noise is {noise!r} and guarantee {guarantee!r}: expected "
                         f"1 <= noise <= guarantee, in filtered characters (defaults {NOISE} "
                         f"and {GUARANTEE}).")
    if not (isinstance(min_tokens, int) and min_tokens >= 0):
        raise ValueError(f"min_tokens is {min_tokens!r}: expected 0 or more filtered characters "
                         f"of shared code (the default is {MIN_TOKENS}).")
    if common is not None and not (isinstance(common, int) and common >= 2):
        raise ValueError(f"common is {common!r}: expected a number of notebooks, 2 or more "
                         "(a fingerprint in more of them is common code), or None for "
                         f"max({COMMON_AT_LEAST}, {COMMON_SHARE:.0%} of the class).")


def _read_side(name: str, read, k: int, window: int, skipped: list) -> _Side | None:
    try:
        answers = read()
    except (OSError, UnicodeDecodeError, nbformat.reader.NotJSONError) as error:
        skipped.append((name, f"not read: {error}"))
        return None
    except Exception as error:  # nbformat's validation errors, malformed cells
        skipped.append((name, f"not a notebook: {type(error).__name__}: {error}"))
        return None
    if len(answers.text) > MAX_ANSWER_CHARS:
        answers = _truncated(answers, MAX_ANSWER_CHARS)
        skipped.append((name, f"answers longer than {MAX_ANSWER_CHARS:,} characters: only the "
                              f"first are compared"))
    return _side(name, answers, k, window)


class _Class:
    """The fingerprints of every notebook and reference, and what each one weighs.

    ``weights[layer][h]``: log((N + 1) / max(c, 2)), c the number of the N
    notebooks and references with fingerprint h (code only one has counts
    as much as code two share); absent (0) for the provided code's
    fingerprints and the common ones (c above ``common``). ``kept``: a
    side's fingerprints that weigh something; ``totals``: their weights
    summed, per layer."""

    def __init__(self, sides: list[_Side], provided: tuple[frozenset[int], ...], common: int):
        documents = len(sides)
        self.weights: list[dict[int, float]] = []
        for layer, ignored in enumerate(provided):
            counts: dict[int, int] = {}
            for side in sides:
                for value in side.layers[layer].where:
                    counts[value] = counts.get(value, 0) + 1
            self.weights.append({value: math.log((documents + 1) / max(count, 2))
                                 for value, count in counts.items()
                                 if count <= common and value not in ignored})
        self.kept = {side.name: tuple(set(side.layers[layer].where) & weights.keys()
                                      for layer, weights in enumerate(self.weights))
                     for side in sides}
        self.totals = {name: tuple(self.weight(layer, hashes) for layer, hashes in enumerate(kept))
                       for name, kept in self.kept.items()}

    def weight(self, layer: int, hashes) -> float:
        weights = self.weights[layer]
        return sum(weights[value] for value in hashes)

    def compare(self, a: _Side, b: _Side, k: int, aside: tuple[set[int], ...] = ()
                ) -> tuple[Pair, tuple[set[int], ...]]:
        """The pair a, b (without its matching blocks) and the fingerprints
        they share, per layer; ``aside``: fingerprints, per layer, that do
        not count (those of the references a or b is listed with)."""
        shares: tuple[list[float], list[float]] = ([], [])
        shared: list[set[int]] = []
        for layer in range(len(LAYERS)):
            kept_a, kept_b = self.kept[a.name][layer], self.kept[b.name][layer]
            total_a, total_b = self.totals[a.name][layer], self.totals[b.name][layer]
            if aside and aside[layer]:
                out_a, out_b = kept_a & aside[layer], kept_b & aside[layer]
                kept_a, kept_b = kept_a - out_a, kept_b - out_b
                total_a -= self.weight(layer, out_a)
                total_b -= self.weight(layer, out_b)
            hashes = kept_a & kept_b
            both = self.weight(layer, hashes)
            for total, share in zip((total_a, total_b), shares):
                if total > 1e-9:
                    share.append(min(1.0, both / total))
            shared.append(hashes)
        similarity_a, similarity_b = (sum(share) / len(share) if share else 0.0
                                      for share in shares)
        pair = Pair(a.name, b.name, similarity_a, similarity_b, 0)
        return pair, tuple(shared)


def find_similar(lab: Lab | str, notebooks: dict[str, Path], references: Path | None = None,
                 threshold: float = THRESHOLD, limit: int = LIMIT, noise: int = NOISE,
                 guarantee: int = GUARANTEE, min_tokens: int = MIN_TOKENS,
                 common: int | None = None) -> Pairs:
    """The pairs whose code is similar, most similar first.

    Every two students of ``notebooks`` are compared, and every student with
    every file of ``references`` (its .ipynb and .py files, searched
    recursively); references are not compared with each other. A pair is
    listed when its similarity (:attr:`Pair.similarity`) reaches
    ``threshold`` and each side has at least ``min_tokens`` filtered
    characters of code in common with the other; at most ``limit`` pairs
    are listed (``Pairs.more`` counts the rest). Everything happens in
    memory: no file is written. The module's docstring says what is
    compared, what is set aside and how the similarity is counted.

    Args:
        lab: the lab (or its id) the notebooks answer.
        notebooks: student id -> the notebook graded (a path, or a notebook
            read already). A file that cannot be read as a notebook is
            skipped and listed in ``Pairs.skipped``.
        references: a folder of earlier terms' notebooks or known solutions.
        threshold: see :data:`THRESHOLD`.
        limit: see :data:`LIMIT`.
        noise, guarantee: copydetect's thresholds, in filtered characters
            (see the module's docstring).
        min_tokens: see :data:`MIN_TOKENS`.
        common: a fingerprint in more than this many of the notebooks and
            references is common code, which does not count (None:
            :func:`common_limit` of their number).

    Raises:
        ValueError: a setting out of range, ``references`` not a folder, or
            an unknown lab.
    """
    _check_settings(threshold, limit, noise, guarantee, min_tokens, common)
    lab = _lab(lab)
    k, window = noise, guarantee - noise + 1
    skipped: list[tuple[str, str]] = []
    students: list[_Side] = []
    for student_id, notebook in sorted(notebooks.items()):
        source = Path(notebook) if isinstance(notebook, (str, Path)) else notebook
        side = _read_side(student_id, lambda: extract_answers(source, lab), k, window, skipped)
        if side is not None:
            students.append(side)
    others: list[_Side] = []
    if references is not None:
        folder = Path(references)
        if not folder.is_dir():
            raise ValueError(f"references is {folder}, which is not a folder: expected a folder "
                             "of earlier notebooks (.ipynb) or solutions (.py), or None.")
        for path in sorted(p for p in folder.rglob("*")
                           if p.suffix in (".ipynb", ".py") and p.is_file()):
            name = REFERENCE_PREFIX + path.relative_to(folder).as_posix()
            side = _read_side(name, lambda: _reference_answers(path, lab), k, window, skipped)
            if side is not None:
                others.append(side)

    documents = len(students) + len(others)
    limit_common = common if common is not None else common_limit(documents)
    every = _Class(students + others, _provided_hashes(lab.student_path, k, window), limit_common)

    found: list[tuple[_Side, _Side, Pair, tuple[set[int], ...]]] = []

    def keep(a: _Side, b: _Side, pair: Pair, shared: tuple[set[int], ...]) -> bool:
        if pair.similarity < threshold:
            return False
        tokens_a, tokens_b = _covered(a, shared, k), _covered(b, shared, k)
        if min(tokens_a, tokens_b) < max(min_tokens, 1):
            return False
        found.append((a, b, replace(pair, tokens=tokens_a), shared))
        return True

    explained: dict[str, list[set[int]]] = {}
    for a in students:
        for b in others:
            if keep(a, b, *every.compare(a, b, k)):
                for layer, hashes in enumerate(every.kept[b.name]):
                    explained.setdefault(a.name, [set(), set()])[layer].update(hashes)
    for index, a in enumerate(students):
        for b in students[index + 1:]:
            aside = tuple(x | y for x, y in zip(explained.get(a.name, [set(), set()]),
                                                explained.get(b.name, [set(), set()])))
            keep(a, b, *every.compare(a, b, k, aside if any(aside) else ()))
    found.sort(key=lambda item: (-item[2].similarity, -item[2].tokens, item[2].a, item[2].b))
    pairs = [replace(pair, matches=_matches(a, b, shared, k)) for a, b, pair, shared in found[:limit]]
    compared = len(students) * (len(students) - 1) // 2 + len(students) * len(others)
    return Pairs(pairs, threshold=threshold, noise=noise, guarantee=guarantee,
                 min_tokens=min_tokens, common=limit_common, notebooks=len(students),
                 references=len(others), compared=compared, more=max(0, len(found) - limit),
                 skipped=skipped)
