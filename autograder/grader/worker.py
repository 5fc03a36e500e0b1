"""A grading worker: one process that grades one submission at a time.

The batch (autograder.grader.batch) starts ``--jobs`` of them (or grades in
its own process with one): each is handed a `WorkerSetup` once
(`start_worker`, the initializer of the process pool), keeps one `Worker`
with a private nbgrader course folder, and grades the submissions sent to
it (`work`), returning each one's result, the scores of its graded cells,
its course folder (where the autograded notebook is) and its timings.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import tempdirs
from autograder.grader import course, intake, submissions
from autograder.grader.normalize import normalize
from autograder.grader.pictures import drawn
from autograder.grader.options import GradingOptions
from autograder.grader.reports import OUTPUT_TRUNCATED
from autograder.grader.results import (GRADED, NEEDS_REGRADING, ExerciseResult, PropertyResult,
                                      SubmissionResult)
from autograder.limits import KERNEL_TASKS, MAX_STATUS_CHARS
from autograder.labs import Lab, get_lab
from autograder.text import StudentMessage, clean_text, megabytes, said_once, student_message

#: The parts of a tests cell's profile kept in a submission's timings, by the
#: prefix of their key ("calls:<grade id>"...): the requests it sent to the
#: student's kernel, the seconds spent writing them, waiting for the answers
#: (of which the student's code ran, as that kernel reports it), and reading
#: them back; and how many were answered on the pipe (none with `--plain`).
PROFILE_PARTS = {"calls": "requests", "piped": "piped", "send": "send_s", "wait": "wait_s",
                 "student": "student_s", "decode": "decode_s"}


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker of a run is given once (sent to each process).

    Args:
        lab_id: the lab graded.
        seed: the run's seed of the hidden tests' inputs (the instructor's,
            or the secret one the batch drew).
        hidden: folders the student's kernel must not see (the class's
            course folder and OUT, the kit, the submissions).
        skip_cells: grade_ids of the provided cells not to run (demonstrations
            and visible checks: autograder.grader.source.skipped_when_grading),
            unless a submission's own cells read what they define.
        options: the run's options (timeouts, kernels).
        workers_dir: where each worker makes its private course folder.
        jobs: how many workers run at once (they share the cores).
        isolation: the student kernels' isolation layer the run chose
            (autograder.kernels.isolation.choose_isolation; "" to choose here).
        protected: what the user layer keeps from the kernels (the run's).
    """

    lab_id: str
    seed: str
    hidden: tuple[str, ...]
    skip_cells: tuple[str, ...]
    options: GradingOptions
    workers_dir: str
    jobs: int = 1
    isolation: str = ""
    protected: tuple[str, ...] = ()


class Worker:
    """Grades one submission at a time in a private nbgrader course folder.

    Every worker has its own course folder and SQLite gradebook, so that
    workers never write to one database at once (nbgrader's SQLite is not
    safe for concurrent writers); the batch records what they found in the
    class's gradebook, one submission at a time.
    """

    def __init__(self, setup: WorkerSetup, root: Path):
        self.setup = setup
        self.lab = get_lab(setup.lab_id)
        self.root = Path(root).resolve()
        self.db_url = f"sqlite:///{self.root / 'gradebook.db'}"
        self.hidden = [Path(path) for path in setup.hidden] + [self.root]
        self.last_grades: dict[str, float] = {}
        self.last_timings: dict[str, float] = {}
        # What went wrong in the last grading that is not the notebook's own
        # doing ("" when nothing), and how its kernel was killed, if it was.
        self._trouble = ""
        self._death: tuple[str, str] | None = None
        shutil.rmtree(self.root, ignore_errors=True)
        unsynced_sqlite(self.root / "gradebook.db")
        self.api = course.prepare_course(self.root, self.lab, self.db_url)
        self.points = lab_points(self.api, self.lab)
        self.sentences = tests_sentences(self.root, self.lab)

    def grade_one(self, submission: submissions.Submission) -> SubmissionResult:
        self.last_grades = {}
        self.last_timings = {}
        started = time.monotonic()
        resident = reset_peak_memory()
        try:
            result = self._grade_one(submission)
            if self._trouble:
                result = self._again(submission, self._trouble, self._death)
            return result
        finally:
            self.last_timings["total"] = round(time.monotonic() - started, 3)
            peak = peak_memory()
            if resident is not None and peak is not None:
                # (MiB, kept with the timings: this process's memory, see peak_memory)
                self.last_timings["grader_start_mib"] = resident
                self.last_timings["grader_peak_mib"] = peak

    def _again(self, submission: submissions.Submission, first: str,
               first_death: tuple[str, str] | None) -> SubmissionResult:
        """Grade a submission again whose grading met a failure that is not
        its code's (``first``: a test kernel lost or restarted, a kernel
        starved of CPU past the wall clock's backstop, a kernel that did not
        start, or was killed by a signal): the second grading's row, with a
        note; where the second fails too, a row that says it must be graded
        again (results.NEEDS_REGRADING), never points taken for it. A kernel
        killed by the same signal at the same place twice is the notebook's
        own doing (a memory bomb the kernel's OOM killer ends, a notebook that
        kills itself): then the row stands, the signal named."""
        result = self._grade_one(submission)
        if not self._trouble:
            result.notes.append(f"graded twice: the first grading met a failure that was not "
                                f"the notebook's ({first}); these are the second grading's "
                                f"scores")
        elif first_death is not None and self._death == first_death \
                and self._trouble == first:
            result.notes.append(f"its kernel was {first_death[1]} at the same place in two "
                                f"gradings ({first_death[0]}): taken as the notebook's doing")
        else:
            result.status = f"{NEEDS_REGRADING}: {self._trouble}"[:MAX_STATUS_CHARS]
            result.notes.append(f"graded twice, and both gradings met a failure that was not "
                                f"the notebook's (first: {first}; then: {self._trouble}); "
                                f"run the same command again to grade it again")
        return result

    def _grade_one(self, submission: submissions.Submission) -> SubmissionResult:
        """Every step of one submission, any failure becoming its row."""
        notes = [submission.note] if submission.note else []
        self._trouble, self._death = "", None
        try:
            notebook, problem = intake.take(submission, self.lab)
            if notebook is None:
                return self._failed(submission, problem, notes)
            return self._autograde(submission, notebook, notes)
        except Exception as error:  # noqa: BLE001 - never lose a student to a grader bug
            self._trouble = f"the grader failed: {type(error).__name__}: {error}"
            return self._failed(submission,
                                intake.grader_error(f"{type(error).__name__}: {error}"), notes)

    def _note_trouble(self, record: dict) -> None:
        """What in the Execute step's record was not the notebook's doing
        (self._trouble), and how its kernel was killed (self._death)."""
        found = [str(fault) for fault in record.get("grader_faults") or []]
        if record.get("grader_error"):
            found.append(str(record["grader_error"]))
        death = record.get("kernel_death") or {}
        how = str(death.get("how") or "")
        if how.startswith("killed by signal"):
            self._death = (str(death.get("where") or ""), how)
            found.append(f"the notebook's kernel was {how} ({self._death[0]})")
        self._trouble = "; ".join(dict.fromkeys(found))

    def _failed(self, submission: submissions.Submission, status: str, notes) -> SubmissionResult:
        return intake.failed(submission.student_id, self.lab, self.points, status,
                             submission.source_name, notes)

    def _autograde(self, submission, notebook, notes) -> SubmissionResult:
        """Put the notebook where nbgrader looks and run its autograde on it."""
        student_id = submission.student_id
        repairs, seed = self._submit(student_id, notebook)
        notes = list(notes) + repairs
        # The student's kernel passes through the work folder to its own
        # scratch and ipc folders (0o711); what the grader keeps of the
        # submission is in a folder of its own (0o700) and its own alone
        # (0o600), so that no kernel, of this submission or one graded beside
        # it, reads it (its path is in the kernels' command lines).
        work = Path(tempdirs.make_folder("lk-", mode=0o711))
        record_path = private_file(work / "grader", "record.json")
        try:
            config = self._config(work, record_path)
            config.IsolatedExecute.session_seed = seed
            api = course.make_api(self.root, self.db_url, config)
            outcome = api.autograde(self.lab.id, student_id, force=True, create=True)
            text = record_path.read_text() if record_path.exists() else ""
            record = json.loads(text) if text.strip() else {}
            self._note_timings(record)
            self._note_trouble(record)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if record.get("grader_error"):
            return self._failed(submission, intake.grader_error(record["grader_error"]), notes)
        if not outcome["success"]:
            reason = _last_error_line(outcome.get("error") or outcome.get("log") or "")
            return self._failed(submission,
                                f"not graded: nbgrader could not autograde it ({reason})", notes)
        return self._collect(student_id, submission.source_name, record, notes)

    def _submit(self, student_id: str, notebook) -> tuple[list[str], str]:
        """Write the (repaired) notebook into submitted/; the repairs made, as
        notes, and the submission's seed of the hidden tests (submission_seed)."""
        target = self.root / "submitted" / student_id / self.lab.id / f"{self.lab.notebook}.ipynb"
        if target.parent.exists():
            shutil.rmtree(target.parent)
        target.parent.mkdir(parents=True)
        release_path = self.root / "release" / self.lab.id / f"{self.lab.notebook}.ipynb"
        notebook, repairs = normalize(notebook, nbformat.read(release_path, as_version=4))
        nbformat.write(notebook, target)
        (target.parent / "timestamp.txt").write_text(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        return repairs, submission_seed(self.setup.seed, notebook)

    def _note_timings(self, record: dict) -> None:
        """Keep the Execute step's timings (seconds by phase and by test)."""
        self.last_timings.update(record.get("timings", {}))
        self.last_timings.update({f"test:{grade_id}": test["seconds"] for grade_id, test
                                  in record.get("tests", {}).items() if "seconds" in test})
        # Where a passed tests cell's time went (its requests to the student's
        # kernel: StudentKernel.profile), as "<part>:<grade id>".
        for grade_id, test in record.get("tests", {}).items():
            for part in PROFILE_PARTS:
                value = (test.get("probe") or {}).get(PROFILE_PARTS[part])
                if isinstance(value, (int, float)):
                    self.last_timings[f"{part}:{grade_id}"] = float(value)
        self.last_timings["execute"] = record.get("seconds", 0.0)
        # (counts, kept with the timings: demonstrations and visible checks not
        # run, and those run because the submission's own cells read them)
        self.last_timings["cells_skipped"] = float(record.get("cells_skipped", 0))
        self.last_timings["cells_needed"] = float(record.get("cells_needed", 0))

    def _config(self, work: Path, record_path: Path):
        """nbgrader's configuration of one autograde: the Execute step and its options."""
        from nbconvert.preprocessors import ClearMetadataPreprocessor
        from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata,
                                            LimitOutput, SaveAutoGrades)

        from autograder.grader.execute import IsolatedExecute

        options = self.setup.options
        config = course.make_config(self.root, self.db_url)
        config.OverwriteCells.add_missing_cells = True
        config.Autograde.autograde_preprocessors = [
            IsolatedExecute, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
            AssignLatePenalties, CheckCellMetadata,
        ]
        config.IsolatedExecute.report_file = str(record_path)
        config.IsolatedExecute.lab_id = self.lab.id
        config.IsolatedExecute.exercise_names = list(self.lab.exercises)
        config.IsolatedExecute.seed = self.setup.seed
        config.IsolatedExecute.timeout = options.cell_timeout
        config.IsolatedExecute.notebook_timeout = options.notebook_timeout
        config.IsolatedExecute.skip_cells = list(self.setup.skip_cells)
        config.SandboxKernelManager.fork_kernels = options.kernels == "fork"
        config.IsolatedExecute.plain = options.plain
        # Each kernel's cgroup gets the machine's cores over the run's jobs.
        from autograder.kernels.cgroups.groups import kernel_cpu_cores
        config.SandboxKernelManager.cpu_cores = kernel_cpu_cores(self.setup.jobs)
        config.SandboxKernelManager.isolation = self.setup.isolation
        config.SandboxKernelManager.scratch = str(work / "scratch")
        config.SandboxKernelManager.ipc_dir = str(work / "ipc")
        config.SandboxKernelManager.hidden = [str(path) for path in self.hidden]
        return config

    def _collect(self, student_id: str, source_name: str, record: dict, notes) -> SubmissionResult:
        """The result of a finished autograde: scores from the gradebook, messages from the record."""
        from nbgrader.api import Gradebook

        from autograder.kernels.isolation import notes_for

        tests = record.get("tests", {})
        found: dict[str, list[tuple[PropertyResult, str]]] = {}
        with Gradebook(self.db_url) as gradebook:
            notebook = gradebook.find_submission_notebook(self.lab.notebook, self.lab.id,
                                                          student_id)
            order = {name: index for index, name in enumerate(self.sentences)}
            for grade in sorted(notebook.grades, key=lambda g: order.get(g.name, len(order))):
                self.last_grades[grade.name] = float(grade.score or 0.0)
                exercise = exercise_of(grade.name)
                if exercise not in self.lab.exercises:
                    continue
                score, points = float(grade.score or 0.0), float(grade.max_score or 0.0)
                outcome = tests.get(grade.name)
                said = StudentMessage("")
                if outcome is None:
                    said = StudentMessage("The hidden tests did not run.")
                elif not outcome.get("passed"):
                    said = student_message(friendly(outcome.get("ename", ""),
                                                    outcome.get("evalue", "")))
                found.setdefault(exercise, []).append((PropertyResult(
                    grade.name, self.sentences.get(grade.name, ""), score, points,
                    said.text, said.details), said.error))
        pictures = drawn(record.get("pictures", ""))
        exercises = []
        bounded = ""
        if record.get("pids_limit_hits"):
            bounded = (f"(Your notebook started more than {KERNEL_TASKS} processes and threads "
                       f"at once; the grader allows {KERNEL_TASKS}, and refused the others.)")
            notes.append(f"its processes hit the kernel's task limit ({KERNEL_TASKS}) "
                         f"{record['pids_limit_hits']} time(s)")
        for name in self.lab.exercises:
            if name not in self.points:
                continue
            properties = [p for p, _ in found.get(name, [])]
            score = sum(p.score for p in properties)
            # one line per distinct error of the exercise's failed tests cells
            lines = said_once([(error, p.message) for p, error in found.get(name, [])
                               if p.message])
            same_as(found.get(name, []))
            message = "\n".join(lines + [bounded] if bounded else lines) \
                if score < self.points[name] else ""
            exercises.append(ExerciseResult(name, score, self.points[name], message,
                                            properties=properties,
                                            picture=pictures.get(name, "")
                                            if score < self.points[name] else ""))
        status = GRADED
        if record.get("stopped"):
            status = f"partly graded: {record['stopped']}"
        elif not record:
            status = "partly graded: the grader kept no record of the run"
        notes = list(notes) + notes_for(str(record.get("sandbox")))
        dropped = record.get("output_dropped") or {}
        if dropped.get("cells"):
            notes.append(f"{OUTPUT_TRUNCATED} in {dropped['cells']} cell(s): "
                         f"{megabytes(dropped.get('bytes', 0))} dropped"
                         + (f", {dropped['resets']} message(s) over the size cap"
                            if dropped.get("resets") else ""))
        total = sum(e.score for e in exercises)
        return SubmissionResult(student_id, self.lab.id, total, sum(self.points.values()),
                                status, source_name, exercises, list(notes))


def private_file(folder: Path, name: str) -> Path:
    """``folder/name``: the folder made 0o700 and the file, empty, 0o600 (a
    later write into it keeps the mode)."""
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    path = folder / name
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600))
    path.chmod(0o600)
    return path


def submission_seed(run_seed: str, notebook) -> str:
    """The seed of the hidden tests' inputs for one submission: the run's
    secret seed mixed with a SHA-256 of the code the submission runs (its
    code cells, repaired, in order).

    Every submission of a run drew the same inputs before: a notebook that
    recorded its inputs and answers somewhere another kernel could read
    (a shared folder, System V shared memory, while graded beside it) gave
    a notebook with no implementation its answers. Now each submission's
    inputs are its own; the same notebook graded again with the same seed
    (a resumed run with ``--seed``) gets the same inputs, and the same grade.
    """
    code = hashlib.sha256()
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            code.update(hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest())
    return hashlib.sha256(f"{run_seed}:{code.hexdigest()}".encode()).hexdigest()


#: The SQLite files written without fsync (unsynced_sqlite), by their real path.
_UNSYNCED: set[str] = set()


def unsynced_sqlite(path: Path) -> None:
    """Have SQLite write the database file ``path`` without waiting for the
    disk (no fsync at each commit; its journal in memory).

    A worker's gradebook is its own scratch copy, made again by every run
    (Worker.__init__): nbgrader commits some 60 times a submission there,
    and each commit's fsync held up the other writes of the machine (the
    kernels' exchange files, the results) under load. The class's gradebook,
    which the instructor keeps, is written as before (any other path).
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not _UNSYNCED:
        event.listen(Engine, "connect", _unsynced_on_connect)
    _UNSYNCED.add(os.path.realpath(path))


def _unsynced_on_connect(connection, _record) -> None:
    if not isinstance(connection, sqlite3.Connection):
        return
    files = {os.path.realpath(row[2]) for row in connection.execute("PRAGMA database_list")
             if row[2]}
    if files & _UNSYNCED:
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute("PRAGMA journal_mode = MEMORY")


# -- the worker process ----------------------------------------------------------

_WORKER: Worker | None = None


def share_cores(jobs: int) -> None:
    """Give each of ``jobs`` student kernels its share of the cores.

    PyTorch, TensorFlow and BLAS each start one thread per core in every
    kernel; with several kernels at once they outnumber the cores and spin
    against each other (five times slower, measured under PyTorch:
    docs/performance.md, "Why the code is shaped this way"). Settings the
    instructor made in the environment are kept.
    """
    if jobs <= 1:
        return
    from autograder.kernels.isolation.common import THREAD_ENV

    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    for name in THREAD_ENV:
        os.environ.setdefault(name, threads)


def start_worker(setup: WorkerSetup) -> None:
    """Initializer of a worker process: its own private course folder, and
    the run's isolation set up for its own kernel user."""
    global _WORKER
    import warnings

    from autograder.kernels import isolation

    warnings.filterwarnings("ignore", message=".*not in session.*")
    share_cores(setup.jobs)
    if setup.isolation:
        isolation.use_isolation(setup.isolation, setup.protected or setup.hidden)
    if setup.options.kernels == "fork" and setup.jobs > 1:
        # A worker process of a pool: its fork server imports while the
        # worker, and the batch, set themselves up. (Grading in the batch's
        # own process, the class is set up already: nothing to overlap.)
        isolation.prestart_fork_server(isolation.layer_for(setup.isolation))
    _WORKER = Worker(setup, Path(setup.workers_dir) / f"w{os.getpid()}")


def work(submission: submissions.Submission):
    """Grade one submission in this worker process: (result, grades, course folder, timings)."""
    assert _WORKER is not None
    result = _WORKER.grade_one(submission)
    return result, dict(_WORKER.last_grades), str(_WORKER.root), dict(_WORKER.last_timings)


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)       # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak_memory() -> float | None:
    """Start a new peak of this process's resident memory (Linux: writing 5
    to /proc/self/clear_refs sets VmHWM to the current VmRSS); the resident
    MiB now, or None where the peak cannot be reset."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_mib("VmRSS")


def peak_memory() -> float | None:
    """This process's peak resident memory (MiB) since reset_peak_memory: what
    grading one submission took in the grader itself (the kernels are other
    processes), e.g. the output a notebook floods it with (hostile case
    ``output_flood``)."""
    return _status_mib("VmHWM")


# -- reading nbgrader's results ------------------------------------------------------

def lab_points(api, lab: Lab) -> dict[str, float]:
    """Points of each exercise, from the gradebook (nbgrader's source of truth)."""
    from nbgrader.api import Gradebook

    points: dict[str, float] = {}
    with Gradebook(api.coursedir.db_url) as gradebook:
        notebook = gradebook.find_notebook(lab.notebook, lab.id)
        for cell in notebook.grade_cells:
            exercise = exercise_of(cell.name)
            if exercise in lab.exercises:
                points[exercise] = points.get(exercise, 0.0) + float(cell.max_score)
    return points


#: The first line of a tests cell (autograder.grader.source.hidden_cell_source).
_TESTS_COMMENT = re.compile(r"#\s*Hidden tests of `[^`]*`:\s*(.*?)\s*\(\d[\d.]*\s+points?\)\.?\s*$")


def tests_sentences(root: Path, lab: Lab) -> dict[str, str]:
    """The sentence of each tests cell of the lab's source notebook (its
    first comment: what the property is, as the student reads it), by
    grade id, in the notebook's order ("" for a cell without one)."""
    path = Path(root) / "source" / lab.id / f"{lab.notebook}.ipynb"
    sentences: dict[str, str] = {}
    for cell in nbformat.read(path, as_version=4).cells:
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not nbgrader.get("grade") or nbgrader.get("solution"):
            continue
        first = (cell.source.strip().splitlines() or [""])[0]
        found = _TESTS_COMMENT.match(first)
        sentences[nbgrader.get("grade_id", "")] = found.group(1) if found else ""
    return sentences


def same_as(found: list) -> None:
    """Mark each property (PropertyResult, error) whose error an earlier one of
    the exercise met already: its ``same_as`` is that one's test."""
    first: dict[str, str] = {}
    for prop, error in found:
        if error and prop.message:
            prop.same_as = first.setdefault(error, prop.test)
            if prop.same_as == prop.test:
                prop.same_as = ""


def exercise_of(grade_id: str) -> str:
    """The exercise a graded cell belongs to: ``test_positional_encoding__dtype``
    -> ``positional_encoding``."""
    return grade_id.removeprefix("test_").split("__")[0]


def friendly(ename: str, evalue: str) -> str:
    """The failure message a student reads (terminal control sequences removed)."""
    ename, evalue = clean_text(ename), clean_text(evalue)
    if "raised NotImplementedError" in evalue:
        name = evalue.split("`")[1] if "`" in evalue else "this exercise"
        return f"Not answered yet: `{name}` still raises NotImplementedError."
    if ename in ("AssertionError", "StudentCodeError", "NotGraded"):
        return evalue or "A hidden test failed."
    return f"{ename}: {evalue}" if evalue else ename


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no details"
