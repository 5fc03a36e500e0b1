"""Grades independent of the machine's load (issue 45, item 8).

A grade may depend on the notebook alone. Each student kernel runs in a
cgroup of its own (a CPU quota, 512 tasks), its limits count CPU seconds
with the wall clock as a backstop, and a grading that met a failure not the
notebook's is graded again, then flagged "needs regrading". This measures
that, and asserts it:

1. busy loops: COUNT correct lab 2 notebooks (solutions/lab2/samples.py's
   CORRECT answers, filled in the released notebook as a student does)
   graded while LOOPS busy loops, each in a session of its own (``setsid``:
   autogroup gives each session an equal share), run on the machine's
   cores; once for each ``--jobs`` (default 2, then 8). Every notebook must
   get full marks, every exercise, status "graded", no note "graded twice";
   the run must exit 0. Prints the wall time, seconds a submission, the
   load average (1 min, sampled every 2 s: mean and peak) and the rows
   graded twice;
2. the 300-process notebook: a lab 1 notebook whose first answer cell
   (``dot_scores``) starts PROCESSES busy processes, each in a session of
   its own (a refusal, the cgroup's task limit, is caught so the notebook
   goes on), then answers correctly, graded with BESIDE correct lab 1
   notebooks (``--jobs`` the first of ``--jobs``), while a second CLI
   process grades another class into another OUT (OTHER correct lab 4
   notebooks, same ``--jobs``). Every correct notebook of both runs must
   get full marks and not be flagged, and neither run may exit 75 for a
   correct notebook; prints what the 300-process notebook got (score,
   status, notes, the exercises' messages). After the runs no busy process
   of that notebook may be left on the machine (each carries a marker in
   its command line; /proc is read).

Then a summary table. The busy loops (and any process of the notebook's
left over) are always killed, their whole sessions, on an error or Ctrl-C
too. Exits 1, saying which notebook got what, where an assertion fails (the
OUT folders are then kept and named).

    .venv/bin/python benchmarks/load.py                       # the full check
    .venv/bin/python benchmarks/load.py --count 2 --loops 8 --jobs 2 --skip-hostile
    make test-load

--write-docs also rewrites the block "load" of docs/performance.md
("Grading under load"), dated, with this machine and the bound the CLI said.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import nbformat  # noqa: E402

import _docs  # noqa: E402
from autograder.labs import LABS  # noqa: E402

#: The marker in the command line of this script's busy loops, and the one
#: in the command line of the 300-process notebook's (so /proc tells them
#: apart from everything else on the machine).
BUSY_MARKER = f"labkit-load-busy-{os.getpid()}"
HOSTILE_MARKER = f"labkit-load-hostile-{os.getpid()}"
#: What the CLI prints on stderr about each student kernel's bound.
BOUND_PREFIX = "CPU and processes of each student kernel:"
#: The CLI's exit status when rows need grading again (autograder.cli.EXIT_REGRADE).
EXIT_REGRADE = 75
HOSTILE_STUDENT = "hostile300"


def hostile_cell(processes: int, correct: str) -> str:
    """The 300-process notebook's ``dot_scores`` answer: PROCESSES busy
    processes in sessions of their own, refusals caught, then a right answer."""
    return f'''
import subprocess, sys

_started, _refused = 0, []
for _ in range({processes}):
    try:
        subprocess.Popen([sys.executable, "-c", "while True: pass  # {HOSTILE_MARKER}"],
                         start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _started += 1
    except Exception as error:  # the cgroup's task limit: fork refused
        _refused.append(type(error).__name__)
print(f"started {{_started}} busy processes, {{len(_refused)}} refused")
{correct.strip()}
'''


def write_class(lab_id: str, folder: Path, count: int, prefix: str,
                extra: dict[str, dict[str, str]] | None = None) -> list[str]:
    """COUNT correct notebooks of ``lab_id`` (the samples' CORRECT answers in
    the released notebook) as ``<prefix>NN.ipynb``, plus ``extra``
    ({student: answers changed}); the student ids of the correct ones."""
    from tests.samples import load
    from tests.verdicts import fill

    lab = LABS[lab_id]
    released = nbformat.read(lab.student_path, as_version=4)
    correct = load(lab_id).CORRECT
    folder.mkdir(parents=True, exist_ok=True)
    students = [f"{prefix}{index + 1:02d}" for index in range(count)]
    for student in students:
        nbformat.write(fill(released, correct), folder / f"{student}.ipynb")
    for student, changes in (extra or {}).items():
        nbformat.write(fill(released, {**correct, **changes}), folder / f"{student}.ipynb")
    return students


# -- processes ---------------------------------------------------------------

def start_busy_loops(count: int) -> list[subprocess.Popen]:
    """COUNT busy loops, each a session (and process group) of its own."""
    loops = []
    for _ in range(count):
        loops.append(subprocess.Popen(
            [sys.executable, "-c", f"while True: pass  # {BUSY_MARKER}"],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
    return loops


def kill_session(pid: int) -> None:
    """SIGKILL the process group (= session) led by ``pid``; never raises."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_busy_loops(loops: list[subprocess.Popen]) -> None:
    for loop in loops:
        kill_session(loop.pid)
    for loop in loops:
        try:
            loop.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    loops.clear()


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """(pid, state) of every live process (zombies left out) whose command
    line holds ``marker``, this process excepted."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "cmdline").read_bytes():
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state = stat[stat.rfind(")") + 2:].split()[0]
        if state != "Z":
            found.append((int(entry.name), state))
    return found


def kill_marked(marker: str) -> int:
    """SIGKILL every process whose command line holds ``marker`` (and its
    session); how many there were."""
    found = marked_processes(marker)
    for pid, _state in found:
        kill_session(pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(found)


class LoadSampler:
    """The 1-minute load average, sampled every 2 s while a phase runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(2.0)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def text(self) -> str:
        if not self.samples:
            return "-"
        return (f"{sum(self.samples) / len(self.samples):.1f} mean, "
                f"{max(self.samples):.1f} peak")


# -- a grading run -------------------------------------------------------------

@dataclass
class Run:
    """One CLI grading run: what it printed and wrote."""

    name: str
    lab_id: str
    out: Path
    jobs: int
    process: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None
    stderr: str = ""
    rows: list[dict] = field(default_factory=list)
    exercises: dict[str, list[dict]] = field(default_factory=dict)

    def start(self, submissions: Path) -> None:
        self.started = time.monotonic()
        self._stderr_path = self.out.with_name(self.out.name + ".stderr")
        self._stderr_file = open(self._stderr_path, "w", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder", "grade", self.lab_id, str(submissions),
             "--out", str(self.out), "--quiet", "--seed", "load", "--jobs", str(self.jobs)],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._stderr_file)

    def poll(self) -> bool:
        """Whether the run has ended (its files then read, its time taken)."""
        if self.process is None:
            return True
        if self.process.poll() is None:
            return False
        self.returncode = self.process.returncode
        self.seconds = time.monotonic() - self.started
        self.process = None
        self._stderr_file.close()
        self.stderr = self._stderr_path.read_text(encoding="utf-8", errors="replace")
        grades, exercises = self.out / "grades.csv", self.out / "exercises.csv"
        if grades.exists():
            with open(grades, encoding="utf-8", newline="") as handle:
                self.rows = list(csv.DictReader(handle))
        if exercises.exists():
            with open(exercises, encoding="utf-8", newline="") as handle:
                for row in csv.DictReader(handle):
                    self.exercises.setdefault(row["student_id"], []).append(row)
        return True

    def wait(self) -> None:
        while not self.poll():
            time.sleep(0.2)

    def printed(self, student: str, words: str) -> str:
        """The first line holding ``words`` that a cell of ``student``'s graded
        notebook printed ("" when none)."""
        for path in (self.out / "nbgrader" / "autograded" / student).rglob("*.ipynb"):
            for cell in nbformat.read(path, as_version=4).cells:
                for output in cell.get("outputs", []):
                    for line in str(output.get("text", "")).splitlines():
                        if words in line:
                            return line.strip()
        return ""

    def stop(self) -> None:
        """End a run still going (an error or Ctrl-C here): SIGINT, SIGTERM, then SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        for number, wait in ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, None)):
            self.process.send_signal(number)
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def bound(self) -> str:
        for line in self.stderr.splitlines():
            if line.startswith(BOUND_PREFIX):
                return line.removeprefix(BOUND_PREFIX).strip()
        return "(the CLI did not say)"

    def row(self, student: str) -> dict | None:
        return next((row for row in self.rows if row["student_id"] == student), None)

    def graded_twice(self) -> int:
        return sum("graded twice" in row.get("notes", "") for row in self.rows)

    def check_correct(self, students: list[str]) -> list[str]:
        """What is wrong with the rows of these correct notebooks (empty: nothing)."""
        failures = []
        for student in students:
            row = self.row(student)
            if row is None:
                failures.append(f"{self.name}: {student}: no row in grades.csv")
                continue
            said = (f"score {row['score']}/{row['max_score']}, status {row['status']!r}, "
                    f"notes {row.get('notes', '')!r}")
            wrong = []
            if float(row["score"]) != float(row["max_score"]):
                wrong.append("not full marks")
            if row["status"] != "graded":
                wrong.append("status not 'graded'")
            if "graded twice" in row.get("notes", ""):
                wrong.append("graded twice")
            lost = [f"{x['exercise']} {x['score']}/{x['max_score']}: {x['message']}"
                    for x in self.exercises.get(student, [])
                    if float(x["score"]) != float(x["max_score"])]
            if lost:
                wrong.append("exercises lost: " + "; ".join(lost))
            if wrong:
                failures.append(f"{self.name}: {student}: {', '.join(wrong)} ({said})")
        return failures

    def check_exit(self) -> list[str]:
        if self.returncode == 0:
            return []
        tail = " | ".join(self.stderr.strip().splitlines()[-5:])
        return [f"{self.name}: the CLI exited {self.returncode}"
                + (" (rows need regrading)" if self.returncode == EXIT_REGRADE else "")
                + f"; its stderr ends: {tail}"]


# -- the two checks ------------------------------------------------------------------

@dataclass
class Outcome:
    rows: list[str] = field(default_factory=list)      # summary table rows
    failures: list[str] = field(default_factory=list)
    bounds: list[str] = field(default_factory=list)


def busy_loops(work: Path, count: int, loops: int, jobs: int, outcome: Outcome,
               live: list[subprocess.Popen]) -> None:
    """Check 1 for one --jobs."""
    folder = work / f"lab2-class-{jobs}"
    students = write_class("lab2", folder, count, "correct")
    run = Run(f"lab2 under {loops} busy loops, --jobs {jobs}", "lab2", work / f"out-lab2-j{jobs}",
              jobs)
    print(f"\n## {run.name}: {count} correct notebooks", flush=True)
    live.extend(start_busy_loops(loops))
    try:
        time.sleep(2)       # the loops get going (and the load average up)
        with LoadSampler() as load:
            run.start(folder)
            run.wait()
    finally:
        run.stop()
        stop_busy_loops(live)
    outcome.bounds.append(run.bound())
    full = sum(1 for s in students if (row := run.row(s)) and row["score"] == row["max_score"]
               and row["status"] == "graded")
    print(f"exit {run.returncode}; {run.seconds:.1f} s wall, {run.seconds / count:.2f} "
          f"s/submission; load average {load.text()}; full marks {full}/{count}; "
          f"graded twice {run.graded_twice()}")
    failures = run.check_correct(students) + run.check_exit()
    outcome.failures += failures
    outcome.rows.append(f"| {loops} busy loops (a session each), lab 2 | {jobs} | {count} correct "
                        f"| {run.seconds:.0f} s, {run.seconds / count:.2f} s/sub | {load.text()} "
                        f"| {full}/{count} | {run.graded_twice()} | "
                        f"{'**fail**' if failures else 'pass'} |")


def hostile(work: Path, processes: int, beside: int, other: int, jobs: int,
            outcome: Outcome) -> None:
    """Check 2: the 300-process notebook, and another class graded at the same time."""
    from tests.samples import load

    lab1_folder, lab4_folder = work / "lab1-class", work / "lab4-class"
    cell = hostile_cell(processes, load("lab1").CORRECT["dot_scores"])
    lab1_students = write_class("lab1", lab1_folder, beside, "correct",
                                {HOSTILE_STUDENT: {"dot_scores": cell}})
    lab4_students = write_class("lab4", lab4_folder, other, "correct")
    lab1 = Run(f"lab1 with the {processes}-process notebook, --jobs {jobs}", "lab1",
               work / "out-lab1-hostile", jobs)
    lab4 = Run(f"lab4 at the same time, --jobs {jobs}", "lab4", work / "out-lab4-beside", jobs)
    print(f"\n## {lab1.name}: {beside} correct notebooks and {HOSTILE_STUDENT}; "
          f"{lab4.name}: {other} correct notebooks", flush=True)
    try:
        with LoadSampler() as sampled:
            lab1.start(lab1_folder)
            lab4.start(lab4_folder)
            left_at_exit: list[tuple[int, str]] | None = None
            while True:
                lab1_done, lab4_done = lab1.poll(), lab4.poll()   # each run's own time
                if lab1_done and left_at_exit is None:
                    left_at_exit = marked_processes(HOSTILE_MARKER)
                if lab1_done and lab4_done:
                    break
                time.sleep(0.2)
    finally:
        lab1.stop()
        lab4.stop()
    # a process of the notebook's may be on its way out (SIGKILL sent by the
    # cgroup's removal): look again for a few seconds before calling it left
    deadline = time.monotonic() + 5
    left = marked_processes(HOSTILE_MARKER)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = marked_processes(HOSTILE_MARKER)
    outcome.bounds.append(lab1.bound())
    for run in (lab1, lab4):
        print(f"{run.name}: exit {run.returncode}; {run.seconds:.1f} s wall")
    print(f"load average while both ran: {sampled.text()}")
    row = lab1.row(HOSTILE_STUDENT)
    if row is None:
        got = "no row in grades.csv"
    else:
        got = (f"{row['score']}/{row['max_score']}, status {row['status']!r}, "
               f"notes {row.get('notes', '')!r}")
    print(f"{HOSTILE_STUDENT} got: {got}")
    said = lab1.printed(HOSTILE_STUDENT, "busy processes")
    print(f"  its first answer cell printed: {said or '(nothing)'}")
    messages = [f"{x['exercise']} {x['score']}/{x['max_score']}: {x['message']}"
                for x in lab1.exercises.get(HOSTILE_STUDENT, []) if x["message"]]
    for message in messages:
        print(f"  {message}")
    print(f"busy processes of {HOSTILE_STUDENT} alive when lab1's CLI exited: "
          f"{len(left_at_exit or [])}; after both runs (up to 5 s later): {len(left)}")
    if row is not None and row["status"].startswith("needs regrading"):
        print(f"NOTE: {HOSTILE_STUDENT}'s own doing was flagged as the machine's "
              f"(status {row['status']!r}); lab1's CLI exited {lab1.returncode}")
    failures = lab1.check_correct(lab1_students) + lab4.check_correct(lab4_students)
    # a flagged row or exit 75 counts against the run only where a correct
    # notebook caused it (the 300-process notebook's row is reported above)
    flagged = [r["student_id"] for r in lab1.rows
               if r["status"].startswith("needs regrading") and r["student_id"] != HOSTILE_STUDENT]
    if lab1.returncode not in (0, EXIT_REGRADE) or (lab1.returncode == EXIT_REGRADE and flagged):
        failures += lab1.check_exit()
    failures += lab4.check_exit()
    if left:
        failures.append(f"{HOSTILE_STUDENT}: {len(left)} of its busy processes still run after "
                        f"the runs (pids {', '.join(str(p) for p, _ in left[:10])})")
    outcome.failures += failures
    correct = sum(1 for run, students in ((lab1, lab1_students), (lab4, lab4_students))
                  for s in students if (r := run.row(s)) and r["score"] == r["max_score"]
                  and r["status"] == "graded")
    twice = lab1.graded_twice() + lab4.graded_twice()
    hostile_text = got.replace("|", "/") + (f"; its cell printed \"{said}\"" if said else "")
    if messages:
        hostile_text += "; " + "; ".join(m.replace("|", "/") for m in messages)
    outcome.rows.append(
        f"| a notebook starting {processes} busy processes (a session each), lab 1, beside "
        f"{other} lab 4 notebooks graded by another CLI | {jobs} and {jobs} | {beside} + {other} "
        f"correct | lab1 {lab1.seconds:.0f} s, lab4 {lab4.seconds:.0f} s | {sampled.text()} | "
        f"{correct}/{beside + other} | {twice} | {'**fail**' if failures else 'pass'} |")
    outcome.rows.append(f"|  | | the {processes}-process notebook got | {hostile_text}; its busy "
                        f"processes left after the runs: {len(left)} | | | | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=12,
                        help="correct lab 2 notebooks under the busy loops (default 12)")
    parser.add_argument("--loops", type=int, default=48, help="busy loops (default 48)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[2, 8],
                        help="the CLI's --jobs under the busy loops, one run each (default 2 8); "
                             "the first also for the 300-process notebook's runs")
    parser.add_argument("--processes", type=int, default=300,
                        help="busy processes the hostile notebook starts (default 300)")
    parser.add_argument("--beside", type=int, default=4,
                        help="correct lab 1 notebooks graded with it (default 4)")
    parser.add_argument("--other", type=int, default=6,
                        help="correct lab 4 notebooks graded by the second CLI (default 6)")
    parser.add_argument("--skip-loops", action="store_true", help="leave out check 1")
    parser.add_argument("--skip-hostile", action="store_true", help="leave out check 2")
    parser.add_argument("--keep", action="store_true",
                        help="keep the classes and OUT folders (kept anyway when a check fails)")
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["load"])

    # Ctrl-C raises KeyboardInterrupt; SIGTERM and SIGHUP the same, so that
    # the finally below kills the busy loops whatever ends this script.
    def interrupted(number, _frame):
        raise KeyboardInterrupt(f"signal {number}")
    signal.signal(signal.SIGINT, signal.default_int_handler)   # even where started ignoring it
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    cores = os.cpu_count()
    load_before = os.getloadavg()[0]
    print(f"machine: nproc {len(os.sched_getaffinity(0))}, {cores} cores, {cpu}; "
          f"load average now {load_before:.1f}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    outcome = Outcome()
    live: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        if not args.skip_loops:
            for jobs in args.jobs:
                busy_loops(work, args.count, args.loops, jobs, outcome, live)
        if not args.skip_hostile:
            hostile(work, args.processes, args.beside, args.other, args.jobs[0], outcome)
    finally:
        stop_busy_loops(live)
        killed = kill_marked(BUSY_MARKER) + kill_marked(HOSTILE_MARKER)
        if killed:
            print(f"killed {killed} busy process(es) left over", file=sys.stderr)
    out = _docs.Recorder()
    bounds = list(dict.fromkeys(outcome.bounds))
    out(f"CPU and processes of each student kernel (the CLI's stderr): "
        f"{'; '.join(bounds) or '-'}. Load average (1 min) when this began, before any "
        f"busy loop: {load_before:.1f} (the machine's other work).\n")
    out("| load | --jobs | notebooks | wall time | load average (1 min) | full marks, not flagged "
        "| graded twice | result |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in outcome.rows:
        out(row)
    print(f"\n{time.monotonic() - started:.0f} s in all")
    if outcome.failures:
        print(f"\nFAILED ({len(outcome.failures)}); the classes and OUT folders are kept in {work}:")
        for failure in outcome.failures:
            print(f"  - {failure}")
    elif args.keep:
        print(f"\nkept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if args.write_docs:
        _docs.write("load", out.text(),
                    machine_line=_docs.machine(f"nproc {len(os.sched_getaffinity(0))}"))
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main())
