"""What a class of 2,000 costs across several machines: measured parts, projected whole.

1. Grades a class of SAMPLE submissions (the lab's valid sample notebooks
   repeated, as benchmarks/grading_speed.py makes it) and takes the cost of
   one submission in core-seconds, and a real `grade --shard K/2` of each
   half (``--jobs JOBS``).
2. Makes two shards of COUNT students in all from those real results (each
   result, its autograded notebooks and run.json copied under new student
   ids) and times `merge` of them: the gradebook rows, the notebooks copied,
   the reports of the whole class.
3. Projects the wall time of a Slurm array (or a Kubernetes indexed Job) of
   N tasks with C cores each: every task grades ceil(COUNT / N) students,
   C at a time, then the merge runs once: ceil(COUNT / N) x cost / C +
   start-up + merge (the start-up, a task's own import and the lab's
   registration in nbgrader). Step 1 measures both on one core: the whole
   sample class, then one of its submissions; the difference is the cost of
   the others.

    .venv/bin/python benchmarks/scaleout.py [--lab lab1] [--count 2000] [--jobs 2]
    .venv/bin/python benchmarks/scaleout.py --write-docs    # docs/performance.md, block "scaleout"
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _docs  # benchmarks/_docs.py: this script's folder is on sys.path
from grading_speed import LABS, class_of  # the same generated class

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def cli(*args: str) -> float:
    """Run `python -m autograder ARGS` from the kit's folder; its wall time."""
    started = time.monotonic()
    subprocess.run([PYTHON, "-m", "autograder", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - started


def replicate(shard: Path, into: Path, lab: str, count: int, start: int) -> list[str]:
    """Copy ``shard``'s results as ``count`` students (s<start>...) into ``into``."""
    run = json.loads((shard / "run.json").read_text())
    saved = sorted((shard / "results").glob("*.json"))
    (into / "results").mkdir(parents=True)
    students = []
    for number in range(count):
        source = saved[number % len(saved)]
        entry = json.loads(source.read_text())
        old, new = entry["result"]["student_id"], f"s{start + number:05d}"
        entry["result"]["student_id"] = new
        entry["sha256"] = f"{entry['sha256'][:48]}{start + number:016x}"
        (into / "results" / f"{new}.json").write_text(json.dumps(entry))
        for stage in ("submitted", "autograded"):
            origin = shard / "nbgrader" / stage / old / lab
            if origin.exists():
                shutil.copytree(origin, into / "nbgrader" / stage / new / lab)
        students.append(new)
    run["students"] = students
    (into / "run.json").write_text(json.dumps(run))
    return students


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="lab1")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=16,
                        help="submissions really graded to measure the cost (default 16)")
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["scaleout"])
    out = _docs.Recorder()
    with tempfile.TemporaryDirectory(prefix="labkit-scaleout-") as work:
        work = Path(work)
        # The class grading_speed.py grades: the lab's samples that are valid
        # notebooks, repeated under new ids.
        samples = work / "class"
        class_size = len(class_of(LABS[args.lab], args.sample, samples))
        walls = []
        for k in (1, 2):
            walls.append(cli("grade", args.lab, str(samples), "--out", str(work / f"shard{k}"),
                             "--shard", f"{k}/2", "--seed", "scaleout", "--jobs",
                             str(args.jobs), "--quiet", "--no-similarity", "--regrade"))
        # One core: the whole class, then one of it; the difference is the cost of
        # the others, the rest the start-up (the import, the lab's registration).
        one = work / "one"
        one.mkdir()
        first = sorted(samples.iterdir())[0]
        shutil.copy(first, one / first.name)
        serial = cli("grade", args.lab, str(samples), "--out", str(work / "serial"), "--seed",
                     "scaleout", "--jobs", "1", "--quiet", "--no-similarity")
        single = cli("grade", args.lab, str(one), "--out", str(work / "single"), "--seed",
                     "scaleout", "--jobs", "1", "--quiet", "--no-similarity")
        graded = class_size
        cost = max(serial - single, 0.1) / (graded - 1)
        startup = max(single - cost, 0.0)
        big = work / "big"
        half = args.count // 2
        replicate(work / "shard1", big / "1", args.lab, half, 1)
        replicate(work / "shard2", big / "2", args.lab, args.count - half, half + 1)
        merged = cli("merge", args.lab, str(big / "1"), str(big / "2"), "--out",
                     str(work / "class"))
        rows = len((work / "class" / "grades.csv").read_text().splitlines()) - 1
    out(f"Lab {args.lab}: one submission costs {cost:.1f} core-seconds and a task's start-up "
        f"{startup:.1f} s (a class of {graded} graded on one core in {serial:.1f} s, "
        f"one of them in {single:.1f} s); its two shards (--jobs {args.jobs}) took "
        f"{walls[0]:.1f} s and {walls[1]:.1f} s. `merge` of {args.count:,} students from two "
        f"shards: {merged:.0f} s ({rows:,} rows).")
    out("")
    out(f"Projected wall time for {args.count:,} submissions of {args.lab} "
        "(grading + merge):")
    out("The grading column assumes a task grades as many submissions at once as it has "
        "cores (`--cpus-per-task`, `--jobs`), each at the cost measured here on one core, "
        "with the memory for them (each student kernel may use up to 6 GiB of address "
        "space: autograder/limits.py).")
    out("")
    out("| array tasks (nodes) | cores each | students a task | grading | + merge | total |")
    out("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for nodes, cores in ((1, 2), (1, 32), (4, 32), (16, 32), (64, 32)):
        per_task = math.ceil(args.count / nodes)
        grading = startup + math.ceil(per_task / cores) * cost
        out(f"| {nodes} | {cores} | {per_task:,} | {grading / 60:.1f} min | "
            f"{merged / 60:.1f} min | {(grading + merged) / 60:.1f} min |")
    if args.write_docs:
        _docs.write("scaleout", out.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
