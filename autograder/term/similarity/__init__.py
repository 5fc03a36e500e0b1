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

The package, a module per step: records.py holds the settings above and
the records (Answers, Snippet, Match, Pair, Pairs); answers.py, what is
compared (extract_answers); fingerprints.py, the two layers' fingerprints
and a pair's matching blocks. This module weighs them and compares
(find_similar), and every name other modules use is imported from here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import nbformat

from autograder.labs import Lab
from autograder.term.similarity.answers import _provided as _provided  # benchmarks/ read it here
from autograder.term.similarity.answers import (_lab, _reference_answers, _truncated, answer_code,
                                                extract_answers)
from autograder.term.similarity.fingerprints import (LAYERS, _covered, _matches,
                                                     _provided_hashes, _side, _Side)
from autograder.term.similarity.records import (COMMON_AT_LEAST, COMMON_SHARE, GUARANTEE, LIMIT,
                                                MAX_ANSWER_CHARS, MIN_TOKENS, NOISE,
                                                REFERENCE_PREFIX, THRESHOLD, Answers, Match,
                                                Pair, Pairs, Snippet)

__all__ = [
    "NOISE", "GUARANTEE", "THRESHOLD", "MIN_TOKENS", "COMMON_AT_LEAST", "COMMON_SHARE", "LIMIT",
    "REFERENCE_PREFIX", "Answers", "Snippet", "Match", "Pair", "Pairs",
    "extract_answers", "answer_code", "common_limit", "find_similar",
]


# --------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------


def common_limit(students: int) -> int:
    """A fingerprint in more than this many of ``students`` notebooks is
    common code: max(COMMON_AT_LEAST, COMMON_SHARE x students), rounded down."""
    return max(COMMON_AT_LEAST, math.floor(COMMON_SHARE * students))


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
