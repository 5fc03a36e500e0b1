"""Calibrates autograder.term.similarity on generated classes with planted copies.

Each class (tests/similarity_class.py) is AUTHORS lab 1 notebooks written
independently, in styles that follow the lab's hints more or less closely
(so that they share the idioms a real class shares), and one planted copy of
each kind: verbatim, renamed, reordered, moved into a new cell, respaced,
disguised (renamed, reordered and moved into new cells) and partial (half the
exercises copied into an own notebook). Nothing is executed. For each class
(one per seed) find_similar runs with its defaults and prints:

- the pairs compared, the planted copies listed out of those planted, the
  independent ("innocent") pairs listed, as a count and a share;
- the rank of each planted copy among every pair (ordered as the report
  orders them), and the highest-ranked independent pair;
- the time find_similar took.

Then, over all the classes: the same figures for other thresholds (what the
default was chosen from), and, for comparison, what the comparison issue 31
found wanting did on the first class (answer cells only, copydetect's share of
the smaller side, threshold 0.5, no code set aside as common). Run:

    .venv/bin/python benchmarks/similarity_calibration.py [--authors 30] [--seeds 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.labs import get_lab  # noqa: E402
from autograder.term import similarity  # noqa: E402
from tests import similarity_class  # noqa: E402

KINDS = similarity_class.COPY_KINDS + similarity_class.MORE_KINDS
SWEEP = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)


def previous_way(notebooks: dict, copies: dict) -> tuple[int, int, list[str]]:
    """(pairs listed, independent pairs listed, copies missed) by the comparison
    before issue 31: the answer cells less their provided lines, copydetect's
    similarity (noise and guarantee 20), listed when either side's share
    reaches 0.5."""
    from copydetect import CodeFingerprint, compare_files

    lab = get_lab("lab1")
    provided = similarity._provided(lab.student_path).lines
    fingerprints = {}
    for student, notebook in notebooks.items():
        kept = []
        for cell in notebook.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if cell.cell_type == "code" and grade_id in lab.exercises:
                kept += [line for line in cell.source.splitlines()
                         if line.strip() and line.strip() not in provided]
        fingerprints[student] = CodeFingerprint(f"{student}.py", 20, 1, language="python",
                                                fp=__import__("io").StringIO("\n".join(kept)))
    listed = set()
    names = sorted(fingerprints)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            _, (share_a, share_b), _ = compare_files(fingerprints[a], fingerprints[b])
            if max(share_a, share_b) >= 0.5:
                listed.add((a, b))
    missed = sorted(kind for pair, kind in copies.items() if pair not in listed)
    return len(listed), len(listed - set(copies)), missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=int, default=30,
                        help="independently written notebooks per class (default 30)")
    parser.add_argument("--seeds", type=int, default=10, help="classes, seeds 0..N-1 (default 10)")
    args = parser.parse_args(argv)
    print(f"similarity defaults: threshold {similarity.THRESHOLD}, min_tokens "
          f"{similarity.MIN_TOKENS}, k-grams of {similarity.NOISE} characters, common code: in "
          f"more than max({similarity.COMMON_AT_LEAST}, {similarity.COMMON_SHARE:.2f} x N) "
          f"notebooks")
    every: list[list[tuple[float, str | None]]] = []
    totals = {"pairs": 0, "copies": 0, "copies listed": 0, "innocent": 0, "innocent listed": 0,
              "seconds": 0.0, "misranked": 0, "weakest copy": 1.0, "closest independent": 0.0}
    first = None
    for seed in range(args.seeds):
        generated = similarity_class.generate(authors=args.authors, kinds=KINDS, seed=seed)
        first = first or generated
        n = len(generated.notebooks)
        start = time.perf_counter()
        listed = similarity.find_similar("lab1", generated.notebooks, limit=10**6)
        seconds = time.perf_counter() - start
        ranked = similarity.find_similar("lab1", generated.notebooks, threshold=1e-9,
                                         min_tokens=0, limit=10**6)
        pairs, copies = n * (n - 1) // 2, generated.copies
        innocent = pairs - len(copies)
        found = {(p.a, p.b) for p in listed}
        copies_listed = len(found & set(copies))
        innocents_listed = len(found - set(copies))
        ranks = {copies[p.a, p.b]: rank for rank, p in enumerate(ranked, start=1)
                 if (p.a, p.b) in copies}
        top_innocent = next(rank for rank, p in enumerate(ranked, start=1)
                            if (p.a, p.b) not in copies)
        misranked = sum(rank > top_innocent for rank in ranks.values())
        print(f"class {seed}: {n} notebooks, {pairs} pairs; copies listed {copies_listed}/"
              f"{len(copies)}; independent pairs listed {innocents_listed}/{innocent} "
              f"({100 * innocents_listed / innocent:.1f}%); ranks "
              + ", ".join(f"{kind} {ranks.get(kind, '-')}" for kind in KINDS)
              + f"; first independent pair {top_innocent} "
              f"({ranked[top_innocent - 1].similarity:.0%}); find_similar {seconds:.2f} s")
        low = similarity.find_similar("lab1", generated.notebooks, threshold=min(SWEEP),
                                      limit=10**6)
        every.append([(p.similarity, copies.get((p.a, p.b))) for p in low])
        totals["pairs"] += pairs
        totals["copies"] += len(copies)
        totals["copies listed"] += copies_listed
        totals["innocent"] += innocent
        totals["innocent listed"] += innocents_listed
        totals["seconds"] += seconds
        totals["misranked"] += misranked
        totals["weakest copy"] = min([totals["weakest copy"]] + [
            p.similarity for p in ranked if (p.a, p.b) in copies])
        totals["closest independent"] = max(totals["closest independent"],
                                            ranked[top_innocent - 1].similarity)
    print(f"all {args.seeds} classes: {totals['pairs']} pairs; copies listed "
          f"{totals['copies listed']}/{totals['copies']}; independent pairs listed "
          f"{totals['innocent listed']}/{totals['innocent']} "
          f"({100 * totals['innocent listed'] / totals['innocent']:.2f}%); copies ranked below "
          f"an independent pair: {totals['misranked']}; similarity of the least similar copy "
          f"{totals['weakest copy']:.0%}, of the most similar independent pair "
          f"{totals['closest independent']:.0%}; find_similar "
          f"{totals['seconds'] / args.seeds:.2f} s a class")
    print("other thresholds (min_tokens as the default):")
    for threshold in SWEEP:
        missed = totals["copies"] - sum(kind is not None and value >= threshold
                                        for rows in every for value, kind in rows)
        flagged = sum(kind is None and value >= threshold for rows in every for value, kind in rows)
        print(f"  threshold {threshold:.2f}: copies missed {missed}/{totals['copies']}, "
              f"independent pairs listed {flagged} ({100 * flagged / totals['innocent']:.2f}%)")
    start = time.perf_counter()
    listed, innocents, missed = previous_way(first.notebooks, first.copies)
    print(f"the comparison before issue 31, class 0: {listed} of "
          f"{len(first.notebooks) * (len(first.notebooks) - 1) // 2} pairs listed, "
          f"{innocents} of them independent; copies missed: {', '.join(missed) or 'none'} "
          f"({time.perf_counter() - start:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
