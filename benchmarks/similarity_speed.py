"""How long autograder.term.similarity.find_similar takes on a class of notebooks.

Builds a synthetic class of lab 1 notebooks in a temporary folder (removed
afterwards) from the released blank notebook, filled (tests.verdicts.fill)
with, per exercise, the solution or one of the verdict suite's correct
variants (solutions/lab1/verdicts.py), chosen at random (seeded):

- "own" notebooks: a random choice per exercise;
- "copy" notebooks: an own notebook with every assigned name renamed and
  its comments rewritten (what a copier does first);
- "blank" notebooks: some exercises left as released.

Then times find_similar on them (all pairs; once with the default cap on
the pairs listed, once listing all) and prints the figures: the times, the pairs compared, the pairs flagged, and how many of the planted
copies were flagged. An own notebook may well be flagged with another own
one: with five answers per exercise, two random picks share some. Run:

    .venv/bin/python benchmarks/similarity_speed.py [--students 120] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.labs import get_lab  # noqa: E402
from autograder.term.similarity import THRESHOLD, answer_code, find_similar  # noqa: E402
from solutions.lab1.verdicts import VARIANTS  # noqa: E402
from tests.verdicts import fill, solution_answers  # noqa: E402

ASSIGNED = re.compile(r"^\s+(\w+)(?:\s*,\s*(\w+))?\s*=[^=]", re.M)


def renamed(cell: str, suffix: str) -> str:
    """``cell`` with the names its body assigns renamed and comments rewritten
    (the signature and docstring, before the body, are left as they are)."""
    head, separator, body = cell.rpartition('"""\n')
    names = {name for match in ASSIGNED.finditer(body) for name in match.groups() if name}
    for name in sorted(names, key=len, reverse=True):
        body = re.sub(rf"\b{name}\b", f"{name}_{suffix}", body)
    body = re.sub(r"#.*", "# (my working)", body)
    return head + separator + body


def build(folder: Path, students: int, seed: int) -> tuple[dict[str, Path], set[frozenset]]:
    """Write the class; return student id -> notebook, and the planted copy pairs."""
    lab = get_lab("lab1")
    blank = nbformat.read(lab.student_path, as_version=4)
    solution = solution_answers("lab1")
    choices = {e: [solution[e], *VARIANTS.get(e, [])] for e in lab.exercises}
    rng = random.Random(seed)
    own_count, copy_count = students // 2, students // 3
    notebooks: dict[str, Path] = {}
    answers: dict[str, dict[str, str]] = {}
    planted: set[frozenset] = set()

    def write(student: str, cells: dict[str, str]) -> None:
        path = folder / f"{student}.ipynb"
        nbformat.write(fill(blank, cells), path)
        notebooks[student], answers[student] = path, cells

    for i in range(own_count):
        write(f"own{i:03d}", {e: rng.choice(options) for e, options in choices.items()})
    for i in range(copy_count):
        source = f"own{rng.randrange(own_count):03d}"
        write(f"copy{i:03d}", {e: renamed(cell, "x") for e, cell in answers[source].items()})
        planted.add(frozenset((source, f"copy{i:03d}")))
    for i in range(students - own_count - copy_count):
        kept = rng.sample(list(lab.exercises), rng.randrange(len(lab.exercises)))
        write(f"blank{i:03d}", {e: rng.choice(choices[e]) for e in kept})
    return notebooks, planted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="similarity-speed-") as tmp:
        notebooks, planted = build(Path(tmp), args.students, args.seed)
        start = time.perf_counter()
        for path in notebooks.values():
            answer_code(path, "lab1")
        extract = time.perf_counter() - start
        start = time.perf_counter()
        listed = find_similar("lab1", notebooks)
        total = time.perf_counter() - start
        start = time.perf_counter()
        found = find_similar("lab1", notebooks, limit=10**9)
        every = time.perf_counter() - start
    n = len(notebooks)
    flagged = {frozenset((p.a, p.b)) for p in found}
    print(f"notebooks: {n} ({len(planted)} planted copies), pairs compared: {n * (n - 1) // 2}")
    print(f"find_similar: {total:.2f} s listing {len(listed)} pairs with their matching lines "
          f"(reading and extracting the answers: about {extract:.2f} s of it); "
          f"{every:.2f} s with every flagged pair's lines")
    print(f"pairs flagged (similarity >= {THRESHOLD}): {len(found)}; planted copies flagged: "
          f"{len(planted & flagged)} of {len(planted)}")
    if found:
        print(f"highest: {found[0].a} / {found[0].b} {found[0].similarity:.2f}; lowest flagged: "
              f"{found[-1].similarity:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
