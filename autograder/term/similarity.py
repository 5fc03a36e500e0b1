"""Students' answer cells compared pairwise, to flag pairs for a person to judge.

After a lab is graded, :func:`find_similar` compares every two students'
answers, and every student's answers with each file of an optional folder of
references (earlier terms' notebooks, solutions found online), with
copydetect's winnowing: the algorithm of MOSS (Schleimer, Wilkerson and
Aiken, "Winnowing: Local Algorithms for Document Fingerprinting", SIGMOD
2003; copydetect 0.5.0's README on PyPI and its source, detector.py and
utils.py, are what this module relies on). The result flags pairs; it
changes no score, and a high similarity is a reason to look, not a verdict:
short exercises leave few ways to write them.

What is compared (:func:`extract_answers`): only a student's answer cells
(the code cells whose nbgrader grade id is one of the lab's exercises), in
curriculum order, without the lines the released blank notebook's answer
cell already had (the signature, the docstring, ``# YOUR CODE HERE``,
``raise NotImplementedError()``): two students who wrote nothing are not
similar. copydetect's tokenizer (Pygments) then replaces every name by
``V`` or ``F``, every string by ``S`` and drops comments and white space,
so renamed variables and rewritten comments do not hide a copy. A
one-character separator unique to each notebook stands between two
exercises, so that no match runs from one exercise into the next.

The similarity of a to b is copydetect's: the share of a's fingerprinted
tokens (characters of the filtered code) that also occur in b; it is not
symmetric (a short answer copied into a long one is 100% of the short one).

Thresholds (see :data:`NOISE`, :data:`GUARANTEE`, :data:`THRESHOLD`):
copydetect's defaults (noise 25, guarantee 25) are made for whole programs.
Filtered, a lab 1 answer line is 10 to 30 characters
(``scores = np.einsum("...d,...nd->...n", query, keys)`` is
``V=V.V("S",V,V)``) and a whole exercise 30 to 200, so 25 characters is
longer than most statements and short copies slip through; 12 or 15 let
the idioms everybody writes (``V.V(V,V=V,V=True)``, ``V=V.V(V)V=V.V(V)``)
count. A noise threshold of 20 (about a statement and a half) kept every
independently written pair of the lab 1 answers tried (the verdict suite's
variants, the tests' einsum and matmul answers) at or under 0.42, while a
renamed copy scored 1.0 and one copied exercise among four 0.59. The
guarantee equals the noise threshold (window 1: every k-gram is a
fingerprint), as copydetect's README allows when time is no issue: answers
are short, and it makes the result deterministic (copydetect hashes with
Python's hash(), randomized per process, and a wider window would pick
different fingerprints in each run). The pair threshold 0.5 (half of one
side's code found in the other) lies between the two.
"""

from __future__ import annotations

import bisect
import functools
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import find_fingerprint_overlap, get_copied_slices

from autograder.labs import Lab, get_lab

__all__ = [
    "NOISE", "GUARANTEE", "THRESHOLD", "LIMIT", "REFERENCE_PREFIX",
    "Answers", "Snippet", "Match", "Pair", "Pairs",
    "extract_answers", "answer_code", "find_similar",
]

#: Shortest match (in filtered characters) that counts: copydetect's noise_t.
NOISE = 20
#: Every match at least this long is found: copydetect's guarantee_t.
GUARANTEE = 20
#: A pair is listed when either side's similarity reaches this.
THRESHOLD = 0.5
#: Pairs listed at most; the rest are counted (Pairs.more).
LIMIT = 50
#: How a reference file is named in a Pair: "reference:<path relative to the folder>".
REFERENCE_PREFIX = "reference:"


@dataclass(frozen=True)
class Answers:
    """A notebook's answer code, as compared.

    Attributes:
        text: the kept lines, joined by newlines.
        origins: for each line of ``text``, (exercise, line number in that
            exercise's answer cell, from 1). A reference .py file's lines
            carry the exercise whose ``def``/``class`` precedes them ("" before
            any).
    """

    text: str
    origins: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Snippet:
    """Matched lines of one side within one exercise.

    Attributes:
        exercise: the exercise ("" when not known, in a reference .py file).
        lines: their line numbers in the exercise's answer cell (from 1).
        text: those lines (provided lines in between are not shown).
    """

    exercise: str
    lines: tuple[int, ...]
    text: str


@dataclass(frozen=True)
class Match:
    """One block of matching code: a's lines beside b's."""

    a: tuple[Snippet, ...]
    b: tuple[Snippet, ...]


@dataclass(frozen=True)
class Pair:
    """Two notebooks (or a notebook and a reference) whose answers are similar.

    Attributes:
        a, b: student ids, or "reference:<relative path>" (only ever b).
        similarity_a: share of a's fingerprinted code found in b (0..1).
        similarity_b: share of b's fingerprinted code found in a (0..1).
        tokens: filtered characters of a that overlap b.
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
        """The larger of the two sides' similarities (what the order and threshold use)."""
        return max(self.similarity_a, self.similarity_b)


class Pairs(list):
    """find_similar's answer: the listed Pairs, highest similarity first, and the counts.

    Attributes:
        threshold, noise, guarantee: the settings used.
        notebooks: how many students' notebooks were compared.
        references: how many reference files were compared.
        more: how many pairs reached the threshold but are not listed (the cap).
        skipped: (student id or "reference:<path>", why) of each file not read.
    """

    def __init__(self, pairs=(), *, threshold: float = THRESHOLD, noise: int = NOISE,
                 guarantee: int = GUARANTEE, notebooks: int = 0, references: int = 0,
                 more: int = 0, skipped: list[tuple[str, str]] | None = None):
        super().__init__(pairs)
        self.threshold, self.noise, self.guarantee = threshold, noise, guarantee
        self.notebooks, self.references, self.more = notebooks, references, more
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


def _answer_cells(notebook, exercises) -> dict[str, str]:
    """exercise -> source of its answer cell (the first one with that grade id)."""
    cells: dict[str, str] = {}
    for cell in notebook.get("cells", []):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.get("cell_type") == "code" and grade_id in exercises and grade_id not in cells:
            source = cell.get("source", "")
            cells[grade_id] = "".join(source) if isinstance(source, list) else str(source)
    return cells


@functools.cache
def _provided(student_path: Path, exercises: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """exercise -> the stripped lines of the blank notebook's answer cell."""
    try:
        blank = nbformat.read(student_path, as_version=4)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"The released blank notebook {student_path} could not be read ({error}); it holds "
            "the provided code that is not compared. Run `make labs` to build it.") from None
    return {exercise: frozenset(line.strip() for line in source.splitlines())
            for exercise, source in _answer_cells(blank, exercises).items()}


def _keep(line, provided: frozenset[str]) -> bool:
    stripped = line.strip()
    return bool(stripped) and stripped not in provided


def extract_answers(notebook, lab: Lab | str) -> Answers:
    """The student's answer code of ``notebook`` (a path or a notebook), with its origins.

    The answer cells of ``lab``'s exercises, in curriculum order, each line
    kept unless it is empty or (stripped) one of the lines the released
    blank notebook (labs/<lab>/<notebook>.ipynb) has in that exercise's answer cell.

    Raises:
        ValueError: ``lab`` is not a lab, or its blank notebook cannot be read.
        OSError, nbformat's errors: ``notebook`` is a path that cannot be read.
    """
    lab = _lab(lab)
    provided = _provided(lab.student_path, lab.exercises)
    cells = _answer_cells(_read(notebook), lab.exercises)
    lines, origins = [], []
    for exercise in lab.exercises:
        given = provided.get(exercise, frozenset())
        for number, line in enumerate(cells.get(exercise, "").splitlines(), start=1):
            if _keep(line, given):
                lines.append(line)
                origins.append((exercise, number))
    return Answers("\n".join(lines), tuple(origins))


def answer_code(notebook, lab: Lab | str) -> str:
    """The student's answer code only (see :func:`extract_answers`), as one text."""
    return extract_answers(notebook, lab).text


def _reference_answers(path: Path, lab: Lab) -> Answers:
    """A reference file's code: a notebook's answer cells (or, without nbgrader
    metadata, all its code cells), or a whole .py file, less every provided line."""
    if path.suffix == ".ipynb":
        notebook = _read(path)
        if _answer_cells(notebook, lab.exercises):
            return extract_answers(notebook, lab)
        source = "\n".join("".join(c.source) if isinstance(c.source, list) else c.source
                           for c in notebook.cells if c.cell_type == "code")
    else:
        source = path.read_text(encoding="utf-8", errors="replace")
    provided = frozenset().union(*_provided(lab.student_path, lab.exercises).values())
    definition = re.compile(r"\s*(?:def|class)\s+(" + "|".join(lab.exercises) + r")\b")
    lines, origins, exercise = [], [], ""
    for number, line in enumerate(source.splitlines(), start=1):
        found = definition.match(line)
        exercise = found.group(1) if found else exercise
        if _keep(line, provided):
            lines.append(line)
            origins.append((exercise, number))
    return Answers("\n".join(lines), tuple(origins))


# --------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------


@dataclass
class _Side:
    """One notebook or reference as fingerprinted: ``rows[i]`` is the index in
    ``answers`` of the fingerprinted text's line i (None for a separator)."""

    name: str
    answers: Answers
    fingerprint: CodeFingerprint
    line_starts: list[int] = field(default_factory=list)
    rows: list[int | None] = field(default_factory=list)


def _separator(number: int) -> str:
    """The line put between two exercises of the ``number``-th notebook or
    reference compared: one character of Unicode's private use plane 15, kept
    as it is by copydetect's filter (it is no Python name) and found in no
    other notebook of the run, so that no match runs from one exercise into
    the next (which would join unrelated lines into one block). One
    character, so it barely adds to the code a similarity is a share of."""
    return chr(0xF0000 + number)


def _coverage(fingerprint: CodeFingerprint, separator: str) -> int:
    """copydetect's token coverage (the filtered characters that some
    fingerprint covers: what a similarity is a share of), counting only the
    fingerprints within one exercise: those across a separator never match,
    and an exercise shorter than the noise threshold then counts for nothing,
    as it could never match."""
    code, k = fingerprint.filtered_code, fingerprint.k
    covered = np.zeros(len(code), dtype=bool)
    for positions in fingerprint.hash_idx.values():
        for position in positions:
            if separator not in code[position:position + k]:
                covered[position:position + k] = True
    return int(covered.sum())


def _side(name: str, number: int, answers: Answers, noise: int, guarantee: int) -> _Side:
    lines, rows = [], []
    text_lines = answers.text.split("\n") if answers.origins else []
    for index, line in enumerate(text_lines):
        if index and answers.origins[index][0] != answers.origins[index - 1][0]:
            lines.append(_separator(number))
            rows.append(None)
        lines.append(line)
        rows.append(index)
    text = "\n".join(lines)
    fingerprint = CodeFingerprint(f"{name}.py", noise, guarantee - noise + 1, language="python",
                                  fp=io.StringIO(text))
    fingerprint.token_coverage = _coverage(fingerprint, _separator(number))
    starts, position = [], 0
    for line in lines:
        starts.append(position)
        position += len(line) + 1
    return _Side(name, answers, fingerprint, starts, rows)


def _to_raw(fingerprint: CodeFingerprint, positions: np.ndarray) -> np.ndarray:
    """Positions in the filtered code -> positions in the text (as compare_files does)."""
    offsets = fingerprint.offsets
    if len(offsets) == 0:
        return positions
    found = np.clip(np.searchsorted(offsets[:, 0], positions), 0, offsets.shape[0] - 1)
    return positions + offsets[:, 1][found]


def _snippets(side: _Side, raw_slices: list[tuple[int, int]]) -> tuple[Snippet, ...]:
    """The lines the raw slices touch, grouped by exercise, in text order."""
    indices: set[int] = set()
    for start, end in raw_slices:
        first = bisect.bisect_right(side.line_starts, start) - 1
        last = bisect.bisect_right(side.line_starts, max(start, end - 1)) - 1
        indices.update(side.rows[row] for row in range(max(first, 0), last + 1)
                       if side.rows[row] is not None)
    text_lines = side.answers.text.split("\n")
    snippets: list[Snippet] = []
    group: list[int] = []
    for index in sorted(indices):
        if group and side.answers.origins[group[-1]][0] != side.answers.origins[index][0]:
            snippets.append(_snippet(side, group, text_lines))
            group = []
        group.append(index)
    if group:
        snippets.append(_snippet(side, group, text_lines))
    return tuple(snippets)


def _snippet(side: _Side, indices: list[int], text_lines: list[str]) -> Snippet:
    return Snippet(side.answers.origins[indices[0]][0],
                   tuple(side.answers.origins[i][1] for i in indices),
                   "\n".join(text_lines[i] for i in indices))


def _matches(a: _Side, b: _Side) -> tuple[Match, ...]:
    """The matching blocks of a and b: each of a's copied slices joined with
    the b slices that share a fingerprint with it (a union-find over slices)."""
    fa, fb = a.fingerprint, b.fingerprint
    slices_a = get_copied_slices(find_fingerprint_overlap(fa.hashes, fb.hashes, fa.hash_idx,
                                                          fb.hash_idx)[0], fa.k)
    slices_b = get_copied_slices(find_fingerprint_overlap(fb.hashes, fa.hashes, fb.hash_idx,
                                                          fa.hash_idx)[0], fb.k)
    count_a = slices_a.shape[1] if slices_a.size else 0
    count_b = slices_b.shape[1] if slices_b.size else 0
    if not (count_a and count_b):
        return ()
    parent = list(range(count_a + count_b))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def slice_of(slices: np.ndarray, position: int) -> int:
        return int(np.searchsorted(slices[0], position, side="right")) - 1

    for shared in fa.hashes & fb.hashes:
        for i in fa.hash_idx[shared]:
            for j in fb.hash_idx[shared]:
                parent[root(slice_of(slices_a, i))] = root(count_a + slice_of(slices_b, j))
    raw_a = _to_raw(fa, slices_a.astype(np.int64))
    raw_b = _to_raw(fb, slices_b.astype(np.int64))
    groups: dict[int, tuple[list, list]] = {}
    for i in range(count_a):
        groups.setdefault(root(i), ([], []))[0].append((int(raw_a[0, i]), int(raw_a[1, i])))
    for j in range(count_b):
        groups.setdefault(root(count_a + j), ([], []))[1].append((int(raw_b[0, j]),
                                                                  int(raw_b[1, j])))
    ordered = sorted(groups.values(), key=lambda group: min(group[0], default=(0, 0)))
    return tuple(Match(_snippets(a, side_a), _snippets(b, side_b))
                 for side_a, side_b in ordered if side_a and side_b)


def _compare(a: _Side, b: _Side) -> Pair:
    tokens, (similarity_a, similarity_b), _ = compare_files(a.fingerprint, b.fingerprint)
    return Pair(a.name, b.name, float(similarity_a), float(similarity_b), int(tokens))


#: Answer code compared per notebook, at most (a notebook padded with
#: megabytes of code is compared on its first part, and said so).
MAX_ANSWER_CHARS = 200_000


def _check_settings(threshold: float, limit: int, noise: int, guarantee: int) -> None:
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold is {threshold!r}: expected a share of the code, above 0 and "
                         f"at most 1 (the default is {THRESHOLD}).")
    if limit < 0:
        raise ValueError(f"limit is {limit!r}: expected the number of pairs to list, 0 or more.")
    if not 1 <= noise <= guarantee:
        raise ValueError(f"noise is {noise!r} and guarantee {guarantee!r}: expected "
                         f"1 <= noise <= guarantee, in filtered characters (defaults {NOISE} "
                         f"and {GUARANTEE}).")


def find_similar(lab: Lab | str, notebooks: dict[str, Path], references: Path | None = None,
                 threshold: float = THRESHOLD, limit: int = LIMIT, noise: int = NOISE,
                 guarantee: int = GUARANTEE) -> Pairs:
    """The pairs whose answers are similar, highest similarity first.

    Every two students of ``notebooks`` are compared, and every student with
    every file of ``references`` (its .ipynb and .py files, searched
    recursively); references are not compared with each other. A pair is
    listed when either side's similarity is at least ``threshold``; at most
    ``limit`` pairs are listed (``Pairs.more`` counts the rest). Everything
    happens in memory: no file is written.

    Args:
        lab: the lab (or its id) the notebooks answer.
        notebooks: student id -> the notebook graded. A file that cannot be
            read as a notebook is skipped and listed in ``Pairs.skipped``.
        references: a folder of earlier terms' notebooks or known solutions.
        threshold: see :data:`THRESHOLD`.
        limit: see :data:`LIMIT`.
        noise, guarantee: copydetect's thresholds, in filtered characters
            (see the module's docstring).

    Raises:
        ValueError: a setting out of range, ``references`` not a folder, or
            an unknown lab.
    """
    _check_settings(threshold, limit, noise, guarantee)
    lab = _lab(lab)
    skipped: list[tuple[str, str]] = []
    students: list[_Side] = []
    for student_id, path in sorted(notebooks.items()):
        try:
            answers = extract_answers(Path(path), lab)
            if len(answers.text) > MAX_ANSWER_CHARS:
                kept = answers.text[:MAX_ANSWER_CHARS].rsplit("\n", 1)[0]
                answers = Answers(kept, answers.origins[:kept.count("\n") + 1])
                skipped.append((student_id, f"answers longer than {MAX_ANSWER_CHARS:,} "
                                            f"characters: only the first are compared"))
            students.append(_side(student_id, len(students), answers, noise, guarantee))
        except (OSError, UnicodeDecodeError, nbformat.reader.NotJSONError) as error:
            skipped.append((student_id, f"not read: {error}"))
        except Exception as error:  # nbformat's validation errors, malformed cells
            skipped.append((student_id, f"not a notebook: {type(error).__name__}: {error}"))
    others: list[_Side] = []
    if references is not None:
        folder = Path(references)
        if not folder.is_dir():
            raise ValueError(f"references is {folder}, which is not a folder: expected a folder "
                             "of earlier notebooks (.ipynb) or solutions (.py), or None.")
        for path in sorted(p for p in folder.rglob("*")
                           if p.suffix in (".ipynb", ".py") and p.is_file()):
            name = REFERENCE_PREFIX + path.relative_to(folder).as_posix()
            try:
                answers = _reference_answers(path, lab)
                others.append(_side(name, len(students) + len(others), answers, noise,
                                    guarantee))
            except Exception as error:  # a reference that cannot be read never stops the run
                skipped.append((name, f"not read: {type(error).__name__}: {error}"))
    found: list[tuple[_Side, _Side, Pair]] = []
    for index, a in enumerate(students):
        for b in students[index + 1:] + others:
            pair = _compare(a, b)
            if pair.similarity >= threshold:
                found.append((a, b, pair))
    found.sort(key=lambda item: (-item[2].similarity, -item[2].tokens, item[2].a, item[2].b))
    listed = [Pair(pair.a, pair.b, pair.similarity_a, pair.similarity_b, pair.tokens,
                   _matches(a, b)) for a, b, pair in found[:limit]]
    return Pairs(listed, threshold=threshold, noise=noise, guarantee=guarantee,
                 notebooks=len(students), references=len(others),
                 more=max(0, len(found) - limit), skipped=skipped)
