"""How fast the kit grades a class, against plain serial `nbgrader autograde`.

For each lab: a class of COUNT generated submissions (the lab's sample
submissions that are valid notebooks, repeated under new student ids), graded
in one run

- by plain nbgrader 0.9.6, as an instructor would: a course folder, the lab's
  source notebook, `nbgrader generate_assignment`, every notebook in
  submitted/<student>/<lab>/, one serial `nbgrader autograde` (the hidden
  tests run in the student's kernel, with no sandbox and no repairs);
- by the kit: `python -m autograder grade LAB FOLDER --jobs JOBS` (sandboxed
  student kernel, clean test kernel, one writer to the gradebook), with its
  student kernels forked from a fork server (the default), and for
  comparison with every cell run as plain nbgrader does (`--run-demos`: the
  kit skips the provided cells that only demonstrate by default) and with
  student kernels started fresh (`--kernels fresh`).

Also times each lab's solution notebook run top to bottom in a plain kernel
(the student's experience of "Run all"). Prints a Markdown table with seconds
per submission, the ratio, and the projected time for 200 submissions.

    .venv/bin/python benchmarks/grading_speed.py                # labs 1-5, 40 each
    .venv/bin/python benchmarks/grading_speed.py --labs lab1 --count 10
    make bench

--write-docs also rewrites the tables in docs/performance.md (block
"grading_speed"), dated, with this machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")   # the solution runs' kernels inherit it

import nbformat  # noqa: E402

from autograder.labs import LABS  # noqa: E402
from autograder.grader.source import build_source_notebook  # noqa: E402
from autograder.grader.worker import PROFILE_PARTS  # noqa: E402
import plain_nbgrader as plain  # noqa: E402
import _docs  # noqa: E402


def class_of(lab, count: int, folder: Path) -> list[str]:
    """COUNT submissions of ``lab`` in ``folder``; returns the student ids."""
    samples = []
    for path in sorted((ROOT / "data" / "sample_submissions" / lab.id).rglob("*.ipynb")):
        try:
            nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - the deliberately broken samples
            continue
        samples.append(path)
    if not samples:
        raise SystemExit(f"{lab.id}: no sample submissions; run data/sample_submissions/build.py")
    folder.mkdir(parents=True, exist_ok=True)
    students = []
    for index in range(count):
        student = f"student{index + 1:03d}"
        shutil.copy(samples[index % len(samples)], folder / f"{student}.ipynb")
        students.append(student)
    return students


def plain_nbgrader(lab, batch: Path, students: list[str], work: Path) -> tuple[float, float]:
    """Seconds of one serial `nbgrader autograde` over the class; mean score."""
    course = plain.make_course(lab, work / "plain")
    for student in students:
        target = course / "submitted" / student / lab.id
        target.mkdir(parents=True)
        shutil.copy(batch / f"{student}.ipynb", target / f"{lab.notebook}.ipynb")
    started = time.monotonic()
    plain.autograde(course, lab)
    seconds = time.monotonic() - started
    scores = [found[0] if found else 0.0 for found in plain.grades(course, lab, students).values()]
    return seconds, sum(scores) / len(scores)


#: The phases of one submission in the kit (OUT/results/<student>.json
#: "timings", written by the grading worker), in the order they happen.
PHASES = ("student_kernel_start", "student_cells", "tests_kernel_start", "tests", "total")


def kit(lab, batch: Path, work: Path, jobs: int, kernels: str = "fork",
        run_demos: bool = False) -> tuple[float, float, dict[str, float]]:
    """Seconds of `python -m autograder grade` over the class; mean score; mean
    seconds of each phase of a submission (in its worker)."""
    import csv
    import json

    out = work / f"kit-{kernels}{'-all-cells' if run_demos else ''}"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "autograder", "grade", lab.id, str(batch), "--out",
                    str(out), "--quiet", "--seed", "bench", "--jobs", str(jobs),
                    "--kernels", kernels] + (["--run-demos"] if run_demos else []),
                   cwd=ROOT, check=True, capture_output=True)
    seconds = time.monotonic() - started
    rows = list(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
    timings = [json.loads(path.read_text()).get("timings", {})
               for path in (out / "results").glob("*.json")]
    timings = [entry for entry in timings if "student_cells" in entry]   # notebooks that ran
    phases = {phase: sum(entry.get(phase, 0.0) for entry in timings) / max(len(timings), 1)
              for phase in PHASES}
    # Each hidden test's mean seconds (the worker times each tests cell: "test:<grade id>")
    # and its profile ("calls:<grade id>"..., autograder.grader.worker.PROFILE_PARTS).
    prefixes = tuple(f"{part}:" for part in ("test", *PROFILE_PARTS))
    tests = sorted({key for entry in timings for key in entry if key.startswith(prefixes)})
    phases.update({key: sum(entry.get(key, 0.0) for entry in timings) / max(len(timings), 1)
                   for key in tests})
    return seconds, sum(float(row["score"]) for row in rows) / len(rows), phases


def _calls(mean: float) -> str:
    """A test's mean calls a submission, as words."""
    return f"{mean:.0f} call" + ("" if round(mean) == 1 else "s")


def solution_run(lab, work: Path) -> float:
    """Seconds to run the lab's solution notebook top to bottom (Run all)."""
    from nbclient import NotebookClient

    notebook = build_source_notebook(lab)
    folder = work / "solution"
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labs", nargs="+", default=list(LABS), help="default: every lab")
    parser.add_argument("--count", type=int, default=40, help="submissions per lab (default 40)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="the kit's --jobs (default: the number of cores)")
    parser.add_argument("--skip-plain", action="store_true", help="time the kit only")
    parser.add_argument("--skip-run-demos", action="store_true",
                        help="do not also time the kit with every cell run (--run-demos)")
    parser.add_argument("--skip-fresh", action="store_true",
                        help="do not also time the kit with fresh kernels (--kernels fresh)")
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["grading_speed"])

    import keras
    import nbgrader
    versions = (f"nbgrader {nbgrader.__version__}, Keras {keras.__version__} "
                f"({keras.backend.backend()}); kit --jobs {args.jobs}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {versions}\n")
    out = _docs.Recorder()
    out("| lab | submissions | plain nbgrader s/sub | kit s/sub | kit vs plain | "
          "200 submissions (kit) | kit, every cell (--run-demos): s/sub, vs plain | "
          "kit, fresh kernels: s/sub | solution notebook, Run all |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    phase_rows = []
    for lab_id in args.labs:
        lab = LABS[lab_id]
        work = Path(tempfile.mkdtemp(prefix=f"bench-{lab_id}-"))
        try:
            batch = work / "class"
            students = class_of(lab, args.count, batch)
            run_all = solution_run(lab, work)
            kit_s, kit_mean, phases = kit(lab, batch, work, args.jobs)
            phase_rows.append((lab_id, "fork", phases))
            every_text = fresh_text = "not run"
            if not args.skip_run_demos:
                every_s, every_mean, every_phases = kit(lab, batch, work, args.jobs,
                                                        run_demos=True)
                phase_rows.append((lab_id, "fork, every cell", every_phases))
                every_text = f"{every_s / args.count:.2f} (mean score {every_mean:.1f})"
            if not args.skip_fresh:
                fresh_s, fresh_mean, fresh_phases = kit(lab, batch, work, args.jobs, "fresh")
                phase_rows.append((lab_id, "fresh", fresh_phases))
                fresh_text = f"{fresh_s / args.count:.2f} (mean score {fresh_mean:.1f})"
            if args.skip_plain:
                plain_text, ratio = "not run", ""
            else:
                plain_s, plain_mean = plain_nbgrader(lab, batch, students, work)
                plain_text = f"{plain_s / args.count:.2f} (mean score {plain_mean:.1f})"
                ratio = f"{plain_s / kit_s:.2f}x"
                if not args.skip_run_demos:
                    every_text += f", {plain_s / every_s:.2f}x"
            per = kit_s / args.count
            out(f"| {lab_id} | {args.count} | {plain_text} | {per:.2f} (mean score "
                f"{kit_mean:.1f}) | {ratio} | {200 * per / 60:.1f} min | {every_text} | "
                f"{fresh_text} | {run_all:.1f} s |")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out("\nWhere a submission's time goes in the kit (mean seconds in its worker, "
        "notebooks that ran):\n")
    out("| lab | kernels | " + " | ".join(PHASES) + " | other (nbgrader, files) |")
    out("| --- " * (len(PHASES) + 3) + "|")
    for lab_id, kernels, phases in phase_rows:
        other = phases["total"] - sum(phases[p] for p in PHASES if p != "total")
        out(f"| {lab_id} | {kernels} | " + " | ".join(f"{phases[p]:.2f}" for p in PHASES)
            + f" | {other:.2f} |")
    out("\nThe hidden tests, slowest first (mean seconds a submission in the test kernel, "
        "forked kernels; the rest of the lab's tests together):\n")
    out("| lab | tests | slowest | second | third | the others |")
    out("| --- | --- | --- | --- | --- | --- |")
    for lab_id, kernels, phases in phase_rows:
        if kernels != "fork":
            continue
        tests = sorted(((seconds, key.removeprefix("test:")) for key, seconds in phases.items()
                        if key.startswith("test:")), reverse=True)
        top = [f"`{name}` {seconds:.2f} ({_calls(phases.get(f'calls:{name}', 0.0))})"
               for seconds, name in tests[:3]]
        top += ["-"] * (3 - len(top))
        rest = sum(seconds for seconds, _ in tests[3:])
        out(f"| {lab_id} | {sum(s for s, _ in tests):.2f} | " + " | ".join(top)
            + f" | {rest:.2f} ({max(len(tests) - 3, 0)}) |")
    out("\nWhere the hidden tests' time goes (mean seconds a submission, forked kernels, the "
        "tests cells that passed): the calls to the student's kernel, the seconds writing "
        "them, the student's code running (as its kernel reports it), the rest of the "
        "wait (the kernels' messages, the glue, encoding the answers), reading the answers, "
        "and the test kernel's own work (references, comparisons, binding names):\n")
    out("| lab | tests cells | calls | writing | student's code | rest of the wait | reading "
        "| test kernel's own |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for lab_id, kernels, phases in phase_rows:
        if kernels != "fork":
            continue
        profiled = [key.removeprefix("calls:") for key in phases if key.startswith("calls:")]
        part = {name: sum(phases.get(f"{name}:{test}", 0.0) for test in profiled)
                for name in ("test", *PROFILE_PARTS)}
        own = part["test"] - part["send"] - part["wait"] - part["decode"]
        out(f"| {lab_id} | {part['test']:.2f} | {part['calls']:.0f} | {part['send']:.2f} | "
            f"{part['student']:.2f} | {part['wait'] - part['student']:.2f} | "
            f"{part['decode']:.2f} | {own:.2f} |")
    if args.write_docs:
        _docs.write("grading_speed", out.text(), machine_line=_docs.machine(versions))


if __name__ == "__main__":
    main()
