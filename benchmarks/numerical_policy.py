"""Measure how much of the numerical tolerance correct answers use.

Grades, for each lab, the solution and the verdict suite's correct variants
(tests/verdicts/<lab>.py) through `python -m autograder grade`, with
LABKIT_PRECISION_LOG set so that every `assert_close` of the hidden tests
records its worst element: the absolute difference, the relative difference
(where |expected| >= 1e-3), and the fraction of the allowed difference
(atol + rtol * |expected|, autograder/testkernel/policy.py) that it used. Prints one row
per lab for the Keras backend of the environment:

    .venv/bin/python benchmarks/numerical_policy.py            # TensorFlow
    KERAS_BACKEND=torch .venv/bin/python benchmarks/numerical_policy.py --labs lab1 lab2

--write-docs also rewrites the backend's table in docs/verdicts.md (block
"numerical_policy-<backend>"), dated, with this machine.

A correct answer must stay well under 1.0 ("used"); the margin is what the
policy leaves for other float32 orderings (GPU kernels, another backend).

The solution notebook gets one more cell that prints the backend and the
device of a tensor made in the student kernel, read back from the graded
notebook ("device" column): on a GPU machine it shows that the kernel, inside
the sandbox, computed on the GPU (cuda:0) rather than falling back to CPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from autograder.testkernel import policy  # noqa: E402
from autograder.labs import LABS  # noqa: E402
from tests import verdicts  # noqa: E402
import _docs  # noqa: E402


def submissions(lab_id: str, folder: Path) -> int:
    """The solution and the correct variants of ``lab_id`` in ``folder``."""
    folder.mkdir(parents=True)
    nbformat.write(verdicts.solution_reporting_device(lab_id), folder / "solution.ipynb")
    count = 1
    if verdicts.spec(lab_id) is not None:
        expected = verdicts.build(lab_id, folder / "all")
        for student in expected:
            if student.startswith("variant"):
                (folder / "all" / f"{student}.ipynb").rename(folder / f"{student}.ipynb")
                count += 1
    return count


def _tf32(x):
    """``x`` (float32) rounded to TF32's 10-bit mantissa, as Ampere tensor cores read it."""
    import numpy as np

    bits = np.asarray(x, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def simulated_tf32(out=print) -> None:
    """Attention (d_k 64, 128 keys) in float32 and in simulated TF32 vs float64."""
    import numpy as np

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((8, 128, 64)).astype(np.float32) for _ in range(3))

    def attention(q, k, v, rounding):
        scores = rounding(q) @ np.swapaxes(rounding(k), -1, -2) / np.float32(8.0)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        return rounding(weights.astype(q.dtype)) @ rounding(v)

    exact = attention(*(a.astype(np.float64) for a in (q, k, v)), lambda a: a)
    allowed = policy.ATOL + policy.RTOL * np.abs(exact)
    for name, rounding in (("float32", lambda a: a), ("TF32 (simulated)", _tf32)):
        difference = np.abs(attention(q, k, v, rounding) - exact)
        out(f"scaled dot-product attention in {name}: largest abs. difference "
            f"{difference.max():.2e}, tolerance used {float((difference / allowed).max()):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labs", nargs="+", default=list(LABS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="parallel student kernels (default: the number of cores)")
    _docs.add_option(parser)
    args = parser.parse_args()
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    block = f"numerical_policy-{backend}"
    if args.write_docs:
        _docs.check([block])
    print(f"backend {backend}; {platform.platform()}; rtol {policy.RTOL:g}, atol {policy.ATOL:g}\n")
    out = _docs.Recorder()
    simulated_tf32(out)
    out()
    out("| lab | notebooks (full marks) | comparisons | largest abs. difference | "
        "largest rel. difference | tolerance used (max) | where | device | seconds |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for lab_id in args.labs:
        work = Path(tempfile.mkdtemp(prefix=f"precision-{lab_id}-"))
        count = submissions(lab_id, work / "in")
        log = work / "precision.jsonl"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autograder", "grade", lab_id, str(work / "in"),
                        "--out", str(work / "out"), "--quiet", "--seed", "precision",
                        "--jobs", str(args.jobs)],
                       cwd=ROOT, check=True, capture_output=True,
                       env={**os.environ, "LABKIT_PRECISION_LOG": str(log)})
        seconds = time.perf_counter() - started
        device = verdicts.device_reported(work / "out", lab_id)
        rows = list(csv.DictReader(open(work / "out" / "grades.csv", encoding="utf-8")))
        full = sum(float(row["score"]) >= float(row["max_score"]) for row in rows)
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        if not entries:
            out(f"| {lab_id} | {full}/{count} | 0 | | | | | {device} | {seconds:.0f} |")
            continue
        worst = max(entries, key=lambda e: e["used"])
        out(f"| {lab_id} | {full}/{count} | {len(entries)} | "
            f"{max(e['max_abs'] for e in entries):.2e} | "
            f"{max(e['max_rel'] for e in entries):.2e} | {worst['used']:.3f} | "
            f"{worst['what'][:60]} | {device} | {seconds:.0f} |")
    if args.write_docs:
        import keras
        _docs.write(block, out.text(), machine_line=_docs.machine(
            f"Keras {keras.__version__} ({backend}); rtol {policy.RTOL:g}, atol {policy.ATOL:g}"))


if __name__ == "__main__":
    main()
