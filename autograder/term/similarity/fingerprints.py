"""How autograder.term.similarity fingerprints code: each notebook's code
normalised in two layers (:data:`LAYERS`), its k-grams hashed and winnowed,
the filtered characters that shared fingerprints cover, and the matching
blocks of a pair, side by side, for the report.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pygments import lexers, token

from autograder.term.similarity.answers import _provided
from autograder.term.similarity.records import Answers, Match, Snippet


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
    # Imported here: copydetect's package imports matplotlib.pyplot (docs/performance.md), which
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

