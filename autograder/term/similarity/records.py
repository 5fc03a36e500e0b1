"""What autograder.term.similarity compares and reports: its settings (the
thresholds, the cap, the k-gram length) and its records: a notebook's code
as compared (:class:`Answers`), and the pairs found (:class:`Pair`, their
matching blocks :class:`Match` of :class:`Snippet`, the list :class:`Pairs`).
"""

from __future__ import annotations

from dataclasses import dataclass

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
