"""Grade a lab: submissions in, gradebook, CSVs, feedback and report out.

The steps, for `python -m autograder grade LAB SUBMISSIONS --out OUT`:

1. Lay out an nbgrader course folder (OUT/nbgrader unless --course-dir) and
   register the lab with nbgrader's generate_assignment (source notebook,
   graded cells and their checksums go into the gradebook).
2. Find the submissions and their student ids (autograder.grader.names).
3. For each student: check the notebook can be read, put it in
   submitted/<student>/<lab>/ and run nbgrader's autograde, whose Execute step
   is autograder.grader.execute.IsolatedExecute (student code in the sandbox, tests
   in a clean kernel). nbgrader restores deleted or edited test cells from
   the source.
4. Read the scores back from nbgrader's gradebook and the messages from the
   grader's own record, and write OUT/grades.csv, OUT/exercises.csv,
   OUT/feedback/<student>.html and OUT/report.html.

A student whose notebook cannot be graded still gets a row, with the reason
in `status`: every step of one submission (reading, normalizing, checking
metadata, grading, recording) runs inside the error handling that turns a
failure into that row, so no notebook stops the batch or its resumption.

The hidden tests' inputs come from a seed. Unless the instructor gives one
(--seed, which shards need, so that they agree), every run draws a fresh
secret seed that is written nowhere: not in run.json, not in results/, so a
later run into the same OUT (a resumption, --regrade) draws another, and
inputs leaked from one run's feedback do not answer the next. A resumption
keeps the finished results without needing their seed. An instructor's seed
is recorded only as a slow keyed hash (`seed_check`), which `merge`
compares across shards.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import secrets
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

import nbformat

from autograder.grader import course, names, reports, tempdirs
from autograder.labs import KIT_ROOT, Lab, get_lab
from autograder.grader.normalize import normalize
from autograder.grader.reports import clean_text
from autograder.grader.source import skipped_when_grading
from autograder.grader.results import GRADED, ExerciseResult, SubmissionResult


def _lab_points(api, lab: Lab) -> dict[str, float]:
    """Points of each exercise, from the gradebook (nbgrader's source of truth)."""
    from nbgrader.api import Gradebook

    points: dict[str, float] = {}
    with Gradebook(api.coursedir.db_url) as gradebook:
        notebook = gradebook.find_notebook(lab.notebook, lab.id)
        for cell in notebook.grade_cells:
            exercise = _exercise_of(cell.name)
            if exercise in lab.exercises:
                points[exercise] = points.get(exercise, 0.0) + float(cell.max_score)
    return points


def _exercise_of(grade_id: str) -> str:
    return grade_id.removeprefix("test_").split("__")[0]


#: PBKDF2 rounds of seed_check: a guessed seed costs this many hashes.
SEED_CHECK_ROUNDS = 200_000


def seed_check(seed: str, lab_id: str) -> str:
    """What OUT keeps of an instructor's --seed: a slow keyed hash, never the seed.

    Shards graded with one seed have equal checks, which is all `merge`
    needs; the seed itself (the hidden inputs) cannot be read back from
    OUT, short of guessing it (so give a long random one).
    """
    return hashlib.pbkdf2_hmac("sha256", seed.encode("utf-8", "surrogatepass"),
                               f"labkit seed check {lab_id}".encode(),
                               SEED_CHECK_ROUNDS).hex()


def _friendly(ename: str, evalue: str) -> str:
    """The failure message a student reads (terminal control sequences removed)."""
    ename, evalue = clean_text(ename), clean_text(evalue)
    if "raised NotImplementedError" in evalue:
        name = evalue.split("`")[1] if "`" in evalue else "this exercise"
        return f"Not answered yet: `{name}` still raises NotImplementedError."
    if ename in ("AssertionError", "StudentCodeError", "NotGraded"):
        return evalue or "A hidden test failed."
    return f"{ename}: {evalue}" if evalue else ename


def _failed(student_id: str, lab: Lab, points: dict[str, float], status: str,
            source_name: str, notes=()) -> SubmissionResult:
    exercises = [ExerciseResult(name, 0.0, points.get(name, 0.0), status)
                 for name in lab.exercises if name in points]
    return SubmissionResult(student_id, lab.id, 0.0, sum(points.values()), status,
                            source_name, exercises, list(notes))


def _other_lab(notebook, lab: Lab) -> str | None:
    """The id of another lab whose answer cells this notebook has, if it has none of ``lab``'s."""
    from autograder.labs import LABS

    ids = set()
    for cell in notebook.cells:
        nbgrader = cell.get("metadata", {}).get("nbgrader")
        if isinstance(nbgrader, dict) and isinstance(nbgrader.get("grade_id"), str):
            ids.add(nbgrader["grade_id"])
    if ids & set(lab.exercises):
        return None
    for other in LABS.values():
        if other.id != lab.id and len(ids & set(other.exercises)) >= 2:
            return other.id
    return None


def _read_notebook(data: bytes) -> tuple[nbformat.NotebookNode | None, str]:
    """The notebook in ``data``, or None and why it cannot be read."""
    if not data or not data.strip():
        return None, "empty file: upload the .ipynb saved from Jupyter or Colab"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text; upload the .ipynb"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        return None, (
            f"invalid notebook: not complete JSON (line {error.lineno}, column "
            f"{error.colno}: {error.msg}); the file may be cut short: download the "
            f".ipynb again and resubmit"
        )
    if not isinstance(parsed, dict) or "cells" not in parsed:
        return None, ("invalid notebook: the file is JSON but not a notebook (no list of "
                      "cells); upload the .ipynb saved from Jupyter or Colab")
    try:
        notebook = nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file
        first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return None, f"invalid notebook (not readable as .ipynb JSON: {first_line})"
    if not isinstance(notebook.get("cells"), list):
        return None, "invalid notebook: it has no list of cells"
    for index, cell in enumerate(notebook.cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str) \
                or not isinstance(cell.get("source", ""), (str, list)):
            return None, (f"invalid notebook: cell {index + 1} is not a notebook cell (no "
                          f"cell_type and source); open the .ipynb in Jupyter, save it and "
                          f"resubmit")
    return notebook, ""


class Worker:
    """Grades one submission at a time in a private nbgrader course folder.

    Every worker has its own course folder and SQLite gradebook, so that
    workers never write to one database at once (nbgrader's SQLite is not
    safe for concurrent writers); `Grader` records what they found in the
    class's gradebook, one submission at a time.
    """

    def __init__(self, lab_id: str, root: Path, seed: str, hidden: list[Path],
                 cell_timeout: int = 120, notebook_timeout: int = 900, kernels: str = "fork",
                 skip_cells: list[str] = ()):
        self.lab = get_lab(lab_id)
        self.root = Path(root).resolve()
        self.db_url = f"sqlite:///{self.root / 'gradebook.db'}"
        self.seed = seed
        self.cell_timeout = cell_timeout
        self.notebook_timeout = notebook_timeout
        self.kernels = kernels
        # The provided demonstration cells not to run (Grader.skip_cells).
        self.skip_cells = list(skip_cells)
        self.hidden = [Path(path) for path in hidden] + [self.root]
        self.last_grades: dict[str, float] = {}
        self.last_timings: dict[str, float] = {}
        shutil.rmtree(self.root, ignore_errors=True)
        self.api = course.prepare_course(self.root, self.lab, self.db_url)
        self.points = _lab_points(self.api, self.lab)

    def grade_one(self, submission: names.Submission) -> SubmissionResult:
        self.last_grades = {}
        self.last_timings = {}
        started = time.monotonic()
        try:
            return self._grade_one(submission)
        finally:
            self.last_timings["total"] = round(time.monotonic() - started, 3)

    def _grade_one(self, submission: names.Submission) -> SubmissionResult:
        """Every step of one submission, any failure becoming its row."""
        notes = [submission.note] if submission.note else []
        try:
            if submission.problem:
                return _failed(submission.student_id, self.lab, self.points,
                               submission.problem, submission.source_name, notes)
            data, problem = submission.read()
            if data is None:
                return _failed(submission.student_id, self.lab, self.points, problem,
                               submission.source_name, notes)
            notebook, problem = _read_notebook(data)
            del data
            if notebook is None:
                return _failed(submission.student_id, self.lab, self.points, problem,
                               submission.source_name, notes)
            other = _other_lab(notebook, self.lab)
            if other:
                return _failed(submission.student_id, self.lab, self.points,
                               f"wrong notebook: this is {other}'s notebook, not "
                               f"{self.lab.id}'s; submit {self.lab.notebook}.ipynb",
                               submission.source_name, notes)
            return self._autograde(submission, notebook, notes)
        except Exception as error:  # noqa: BLE001 - never lose a student to a grader bug
            return _failed(submission.student_id, self.lab, self.points,
                           f"grader error: {type(error).__name__}: {error}"[:300],
                           submission.source_name, notes)

    def _autograde(self, submission, notebook, notes) -> SubmissionResult:
        student_id = submission.student_id
        target = self.root / "submitted" / student_id / self.lab.id / f"{self.lab.notebook}.ipynb"
        if target.parent.exists():
            shutil.rmtree(target.parent)
        target.parent.mkdir(parents=True)
        release_path = self.root / "release" / self.lab.id / f"{self.lab.notebook}.ipynb"
        notebook, repairs = normalize(notebook, nbformat.read(release_path, as_version=4))
        notes = list(notes) + repairs
        nbformat.write(notebook, target)
        (target.parent / "timestamp.txt").write_text(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        work = Path(tempdirs.make_folder("lk-"))
        record_path = work / "record.json"
        try:
            config = self._config(work, record_path)
            api = course.make_api(self.root, self.db_url, config)
            outcome = api.autograde(self.lab.id, student_id, force=True, create=True)
            record = json.loads(record_path.read_text()) if record_path.exists() else {}
            self.last_timings.update(record.get("timings", {}))
            self.last_timings.update({f"test:{grade_id}": test["seconds"] for grade_id, test
                                      in record.get("tests", {}).items() if "seconds" in test})
            self.last_timings["execute"] = record.get("seconds", 0.0)
            # (a count, kept with the timings: demonstrations not run)
            self.last_timings["cells_skipped"] = float(record.get("cells_skipped", 0))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if record.get("grader_error"):
            return _failed(student_id, self.lab, self.points,
                           f"grader error: {record['grader_error']}"[:300],
                           submission.source_name, notes)
        if not outcome["success"]:
            reason = _last_error_line(outcome.get("error") or outcome.get("log") or "")
            return _failed(student_id, self.lab, self.points,
                           f"not graded: nbgrader could not autograde it ({reason})",
                           submission.source_name, notes)
        return self._collect(student_id, submission.source_name, record, notes)

    def _config(self, work: Path, record_path: Path):
        from nbconvert.preprocessors import ClearMetadataPreprocessor
        from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata,
                                            LimitOutput, SaveAutoGrades)

        from autograder.grader.execute import IsolatedExecute

        config = course.make_config(self.root, self.db_url)
        config.OverwriteCells.add_missing_cells = True
        config.Autograde.autograde_preprocessors = [
            IsolatedExecute, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
            AssignLatePenalties, CheckCellMetadata,
        ]
        config.IsolatedExecute.report_file = str(record_path)
        config.IsolatedExecute.lab_id = self.lab.id
        config.IsolatedExecute.exercise_names = list(self.lab.exercises)
        config.IsolatedExecute.seed = self.seed
        config.IsolatedExecute.timeout = self.cell_timeout
        config.IsolatedExecute.notebook_timeout = self.notebook_timeout
        config.IsolatedExecute.skip_cells = list(self.skip_cells)
        config.SandboxKernelManager.fork_kernels = self.kernels == "fork"
        config.SandboxKernelManager.scratch = str(work / "scratch")
        config.SandboxKernelManager.ipc_dir = str(work / "ipc")
        config.SandboxKernelManager.hidden = [str(path) for path in self.hidden]
        return config

    def _collect(self, student_id: str, source_name: str, record: dict, notes) -> SubmissionResult:
        from nbgrader.api import Gradebook

        tests = record.get("tests", {})
        scores: dict[str, float] = {}
        messages: dict[str, list[str]] = {}
        with Gradebook(self.db_url) as gradebook:
            notebook = gradebook.find_submission_notebook(self.lab.notebook, self.lab.id,
                                                          student_id)
            for grade in notebook.grades:
                self.last_grades[grade.name] = float(grade.score or 0.0)
                exercise = _exercise_of(grade.name)
                if exercise not in self.lab.exercises:
                    continue
                scores[exercise] = scores.get(exercise, 0.0) + float(grade.score or 0.0)
                outcome = tests.get(grade.name)
                if outcome is None:
                    messages.setdefault(exercise, []).append("The hidden tests did not run.")
                elif not outcome.get("passed"):
                    messages.setdefault(exercise, []).append(
                        _friendly(outcome.get("ename", ""), outcome.get("evalue", "")))
        exercises = []
        for name in self.lab.exercises:
            if name not in self.points:
                continue
            score = scores.get(name, 0.0)
            # one message per failed tests cell of the exercise, each said once
            said = list(dict.fromkeys(messages.get(name, [])))
            message = " ".join(said) if score < self.points[name] else ""
            exercises.append(ExerciseResult(name, score, self.points[name], message))
        status = GRADED
        if record.get("stopped"):
            status = f"partly graded: {record['stopped']}"
        elif not record:
            status = "partly graded: the grader kept no record of the run"
        if record.get("sandbox") == "none":
            notes = list(notes) + ["graded without the bubblewrap sandbox"]
        total = sum(e.score for e in exercises)
        return SubmissionResult(student_id, self.lab.id, total, sum(self.points.values()),
                                status, source_name, exercises, list(notes))


_WORKER: Worker | None = None


def share_cores(jobs: int) -> None:
    """Give each of ``jobs`` student kernels its share of the cores.

    PyTorch, TensorFlow and BLAS each start one thread per core in every
    kernel; with several kernels at once they outnumber the cores and spin
    against each other (lab5 under torch, 4 submissions with --jobs 2 on 2
    cores: 358 s with the default threads, 67 s with one each). Settings the
    instructor made in the environment are kept.
    """
    if jobs <= 1:
        return
    from autograder.grader.sandbox import THREAD_ENV

    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    for name in THREAD_ENV:
        os.environ.setdefault(name, threads)


def _start_worker(settings: dict) -> None:
    """Initializer of a worker process: its own private course folder."""
    global _WORKER
    import warnings

    warnings.filterwarnings("ignore", message=".*not in session.*")
    share_cores(settings["jobs"])
    root = Path(settings["workers_dir"]) / f"w{os.getpid()}"
    _WORKER = Worker(settings["lab_id"], root, settings["seed"], settings["hidden"],
                     settings["cell_timeout"], settings["notebook_timeout"], settings["kernels"],
                     settings["skip_cells"])


def _work(submission: names.Submission):
    """Grade one submission in this worker process."""
    assert _WORKER is not None
    result = _WORKER.grade_one(submission)
    return result, dict(_WORKER.last_grades), str(_WORKER.root), dict(_WORKER.last_timings)


def _result_from_json(saved: dict) -> SubmissionResult:
    """A SubmissionResult from its ``asdict`` form in OUT/results/<student>.json."""
    exercises = [ExerciseResult(**e) for e in saved["exercises"]]
    return SubmissionResult(**{**saved, "exercises": exercises})


def _digest(submission: names.Submission) -> str:
    """What the result saved for ``submission`` was graded from (read now, not kept)."""
    data, problem = submission.read()
    return hashlib.sha256(data if data is not None else
                          (submission.problem or problem).encode()).hexdigest()


class Grader:
    """Grades the submissions of one lab into one output folder and gradebook.

    Submissions are graded by `jobs` workers (processes), each in a private
    course folder; this object alone writes their results into the class's
    nbgrader gradebook (SQLite by default, any SQLAlchemy URL with `db_url`),
    copies the autograded notebooks into the class's course folder, and keeps
    each finished result in OUT/results/, so that an interrupted run, started
    again, goes on where it stopped without grading anyone twice.
    """

    def __init__(self, lab_id: str, out_dir: Path, db_url: str | None = None,
                 course_dir: Path | None = None, seed: str | None = None,
                 cell_timeout: int = 120, notebook_timeout: int = 900, jobs: int = 1,
                 regrade: bool = False, shard: tuple[int, int] | None = None,
                 kernels: str = "fork", run_demos: bool = False):
        self.lab = get_lab(lab_id)
        self.shard = shard
        self.out_dir = Path(out_dir).resolve()
        self.root = Path(course_dir).resolve() if course_dir else self.out_dir / "nbgrader"
        self.db_url = db_url or f"sqlite:///{self.root / 'gradebook.db'}"
        # The instructor's seed, or a fresh secret one (module docstring).
        self.seed = seed or secrets.token_hex(16)
        self.seed_check = seed_check(seed, self.lab.id) if seed else None
        self.cell_timeout = cell_timeout
        self.notebook_timeout = notebook_timeout
        self.jobs = max(1, int(jobs))
        self.regrade = regrade
        self.kernels = kernels
        # The provided demonstration cells not to run: read once from the
        # lab's source (source.skipped_when_grading), handed to every worker.
        self.skip_cells = [] if run_demos else skipped_when_grading(self.lab)
        self.hidden: list[Path] = [self.root, self.out_dir, KIT_ROOT]

    def prepare(self, students: list[str] | None = None, total: int | None = None) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "results").mkdir(exist_ok=True)
        self.api = course.prepare_course(self.root, self.lab, self.db_url)
        self.points = _lab_points(self.api, self.lab)
        run = {"lab": self.lab.id, "db_url": _redact(self.db_url),
               "course_dir": str(self.root)}
        if self.seed_check:
            run["seed_check"] = self.seed_check
        if self.shard:
            run["shard"] = list(self.shard)
            run["class_size"] = total
        if students is not None:
            run["students"] = students
        (self.out_dir / "run.json").write_text(json.dumps(run, indent=1))

    # -- resuming --------------------------------------------------------------
    def _cache_path(self, student_id: str) -> Path:
        return self.out_dir / "results" / f"{student_id}.json"

    def _cached(self, student_id: str, sha256: str) -> SubmissionResult | None:
        """The finished result of this very file, if an earlier run into OUT saved one.

        Whatever seed it was graded with is kept, except that a run with an
        instructor's --seed regrades results of any other seed (shards must
        agree).
        """
        if self.regrade:
            return None
        try:
            saved = json.loads(self._cache_path(student_id).read_text())
            if saved.get("sha256") != sha256:
                return None
            if self.seed_check and saved.get("seed_check") != self.seed_check:
                return None
            return _result_from_json(saved["result"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _save_result(self, sha256: str, result: SubmissionResult,
                     grades: dict[str, float], timings: dict[str, float] | None = None) -> None:
        path = self._cache_path(result.student_id)
        path.with_suffix(".tmp").write_text(json.dumps(
            {"sha256": sha256, "seed_check": self.seed_check, "result": asdict(result),
             "grades": grades, "timings": timings or {}}))
        path.with_suffix(".tmp").replace(path)

    # -- the batch -------------------------------------------------------------
    def grade_all(self, submissions_path: Path, progress: bool = True) -> list[SubmissionResult]:
        self.hidden.append(Path(submissions_path).resolve())
        submissions = names.collect_submissions(submissions_path, self.lab.id,
                                                self.lab.notebook)
        total = len(submissions)
        if self.shard:
            # Every shard lists the same folder, sorted by student id: shard
            # K of N takes every N-th student from the K-th on.
            index, count = self.shard
            submissions = submissions[index - 1::count]
        self.prepare([s.student_id for s in submissions], total)
        results: dict[str, SubmissionResult] = {}
        pending = []
        # Each file is read here once for its digest (one at a time, not kept).
        digests = {s.student_id: _digest(s) for s in submissions}
        for submission in submissions:
            cached = self._cached(submission.student_id, digests[submission.student_id])
            if cached is not None:
                results[submission.student_id] = cached
            else:
                pending.append(submission)
        bar = _progress(len(submissions), progress, initial=len(results))
        settings = {
            "lab_id": self.lab.id, "seed": self.seed,
            "hidden": [str(path) for path in self.hidden],
            "workers_dir": str(self.root / ".workers"),
            "cell_timeout": self.cell_timeout, "notebook_timeout": self.notebook_timeout,
            "kernels": self.kernels, "skip_cells": self.skip_cells,
        }
        for result, grades, worker_root, timings in self._run(pending, settings):
            try:
                self._record(result, grades, Path(worker_root))
            except Exception as error:  # noqa: BLE001 - the row stays, with the reason
                result = _failed(result.student_id, self.lab, self.points,
                                 f"grader error: recording the grades failed "
                                 f"({type(error).__name__}: {error})"[:300],
                                 result.source_name, result.notes)
            self._save_result(digests[result.student_id], result, grades, timings)
            results[result.student_id] = result
            if bar is not None:
                bar.set_postfix_str(clean_text(result.student_id, keep_lines=False)[:20])
                bar.update(1)
        if bar is not None:
            bar.close()
        shutil.rmtree(self.root / ".workers", ignore_errors=True)
        return [results[submission.student_id] for submission in submissions]

    def _run(self, pending, settings):
        """Yield (result, grades, worker_root) as submissions are graded."""
        if not pending:
            return
        settings = {**settings, "jobs": min(self.jobs, len(pending))}
        if settings["jobs"] == 1:
            _start_worker(settings)
            for submission in pending:
                yield _work(submission)
            return
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=settings["jobs"],
                                 mp_context=context, initializer=_start_worker,
                                 initargs=(settings,)) as pool:
            futures = {pool.submit(_work, submission): submission for submission in pending}
            for future in as_completed(futures):
                try:
                    yield future.result()
                except Exception as error:  # noqa: BLE001 - a worker died: keep the row
                    submission = futures[future]
                    yield (_failed(submission.student_id, self.lab, self.points,
                                   f"grader error: the grading worker failed "
                                   f"({type(error).__name__}: {error})"[:300],
                                   submission.source_name),
                           {}, str(self.root / ".workers" / "lost"), {})

    def _record(self, result: SubmissionResult, grades: dict[str, float],
                worker_root: Path) -> None:
        """Write one result into the class's gradebook and course folder."""
        from nbgrader.api import Gradebook

        student_id = result.student_id
        for stage in ("submitted", "autograded"):
            source = worker_root / stage / student_id / self.lab.id
            target = self.root / stage / student_id / self.lab.id
            if source.exists():
                shutil.rmtree(target, ignore_errors=True)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(source, target)
        with Gradebook(self.db_url) as gradebook:
            gradebook.update_or_create_student(student_id)
            gradebook.update_or_create_submission(self.lab.id, student_id)
            notebook = gradebook.find_submission_notebook(self.lab.notebook, self.lab.id,
                                                          student_id)
            for grade in notebook.grades:
                grade.auto_score = grades.get(grade.name, 0.0)
                grade.needs_manual_grade = False
            gradebook.db.commit()


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no details"


def _redact(db_url: str) -> str:
    if "@" in db_url and "://" in db_url:
        scheme, rest = db_url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return db_url


def _progress(total: int, enabled: bool, initial: int = 0):
    """A progress bar with an ETA on stderr, or None."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc="grading", unit="notebook",
                file=sys.stderr, dynamic_ncols=True)


def grade(lab_id: str, submissions: Path, out_dir: Path, db_url: str | None = None,
          course_dir: Path | None = None, seed: str | None = None, progress: bool = True,
          hints: dict[str, str] | None = None, cell_timeout: int = 120,
          notebook_timeout: int = 900, jobs: int | None = None,
          regrade: bool = False, shard: str | None = None,
          kernels: str = "fork", run_demos: bool = False) -> tuple[list[SubmissionResult], dict]:
    """Grade ``submissions`` of ``lab_id`` and write every report into ``out_dir``.

    ``kernels``: "fork" (student kernels forked from a fork server with the
    libraries imported, autograder.forkserver.server) or "fresh" (a new Python each).
    ``run_demos``: also run the provided demonstration cells marked
    `grading="skip"` in the lab's source (they grade nothing; skipped by default).
    """
    submissions = Path(submissions)
    if not submissions.exists():
        raise ValueError(
            f"Submissions not found: {submissions} does not exist. Give a folder of "
            f".ipynb files or a .zip downloaded from your LMS."
        )
    parsed_shard = parse_shard(shard) if shard else None
    if parsed_shard and not seed:
        raise ValueError(
            f"--shard {shard} needs --seed: every shard of a class must grade with the "
            f"same hidden inputs. Pick a long random word and give it to every shard, e.g. "
            f"--seed {secrets.token_hex(16)} (OUT keeps only a slow hash of it)."
        )
    grader = Grader(lab_id, out_dir, db_url=db_url, course_dir=course_dir, seed=seed,
                    cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                    jobs=jobs or os.cpu_count() or 1, regrade=regrade, shard=parsed_shard,
                    kernels=kernels, run_demos=run_demos)
    results = grader.grade_all(submissions, progress=progress)
    if hints is None:
        hints = _hints(grader.lab)
    paths = reports.write_reports(results, grader.out_dir, grader.lab.title, hints)
    return results, paths


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N), with 1 <= K <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ValueError(
            f"--shard {text!r} is not K/N with 1 <= K <= N. Give this machine's part of "
            f"the class, e.g. --shard 1/4 ... --shard 4/4 on four machines (a Slurm "
            f"array: --shard $((SLURM_ARRAY_TASK_ID+1))/$SLURM_ARRAY_TASK_COUNT)."
        )
    return int(match[1]), int(match[2])


def _read_shard(folder: Path, lab_id: str) -> tuple[dict, dict[str, dict]]:
    """The run.json of a shard's OUT folder and its saved results by student."""
    try:
        run = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        raise ValueError(
            f"{folder} is not the OUT folder of a grading run (no readable run.json). "
            f"Give the folders passed as --out to each `grade ... --shard K/N`."
        ) from None
    if run.get("lab") != lab_id:
        raise ValueError(f"{folder} holds grades of {run.get('lab')!r}, not {lab_id!r}: "
                         f"merge the shards of one lab at a time.")
    saved = {}
    for path in sorted((folder / "results").glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an unfinished write: that student counts as missing
        saved[entry["result"]["student_id"]] = entry
    return run, saved


def merge(lab_id: str, shard_dirs: list[Path], out_dir: Path, db_url: str | None = None,
          course_dir: Path | None = None, allow_missing: bool = False,
          ) -> tuple[list[SubmissionResult], dict]:
    """Merge the OUT folders of `grade --shard K/N` runs into one class's OUT.

    The merged folder is what one unsharded run would have written: one
    gradebook with every student (SQLite, or ``db_url``), the autograded
    notebooks, results/, grades.csv, exercises.csv, feedback and report.
    Refuses shards of another lab, graded with different seeds, that overlap
    with different answers, or (unless ``allow_missing``) a class with a
    shard or a student missing.
    """
    lab = get_lab(lab_id)
    if not shard_dirs:
        raise ValueError("merge needs the OUT folders of the shards to merge.")
    runs, entries, origin = [], {}, {}
    for folder in map(Path, shard_dirs):
        run, saved = _read_shard(folder, lab.id)
        runs.append((folder, run))
        for student_id, entry in saved.items():
            if student_id in entries and entries[student_id]["sha256"] != entry["sha256"]:
                raise ValueError(
                    f"{student_id} was graded in {origin[student_id]} and in {folder} from "
                    f"different notebooks: the shards did not grade the same class folder. "
                    f"Grade every shard from one copy of the submissions.")
            entries[student_id], origin[student_id] = entry, folder
    checks = {run.get("seed_check") for _, run in runs} | \
        {entry.get("seed_check") for entry in entries.values()}
    if None in checks:
        raise ValueError(
            "a shard was graded without --seed (a secret seed of its own, so hidden inputs "
            "of their own): grade every shard with the same --seed, then merge.")
    if len(checks) > 1:
        raise ValueError(
            "the shards were graded with different seeds (different hidden inputs): "
            "grade every shard with the same --seed, then merge.")
    problems = []
    counts = {tuple(run["shard"])[1] for _, run in runs if run.get("shard")}
    if len(counts) > 1:
        problems.append(f"the shards split the class in different ways (N = {sorted(counts)})")
    elif counts:
        have = {tuple(run["shard"])[0] for _, run in runs if run.get("shard")}
        missing = sorted(set(range(1, counts.pop() + 1)) - have)
        if missing:
            problems.append("shard(s) " + ", ".join(map(str, missing)) + " missing")
    for folder, run in runs:
        lost = [s for s in run.get("students", []) if s not in entries]
        if lost:
            problems.append(f"{folder}: {len(lost)} of its {len(run['students'])} students "
                            f"have no result ({', '.join(lost[:5])}"
                            f"{', ...' if len(lost) > 5 else ''}); run its grade command "
                            f"again to resume it")
    if problems and not allow_missing:
        raise ValueError("the merge would lose students: " + "; ".join(problems)
                         + ". Fix that, or pass --allow-missing to merge what there is.")
    # A shard's course folder: OUT/nbgrader unless it was graded with
    # --course-dir (then where run.json says, if this machine sees it).
    roots = {folder: folder / "nbgrader" if (folder / "nbgrader").is_dir()
             else Path(run.get("course_dir", folder / "nbgrader")) for folder, run in runs}
    grader = Grader(lab.id, out_dir, db_url=db_url, course_dir=course_dir)
    grader.seed_check = checks.pop()
    if grader.out_dir in {folder.resolve() for folder, _ in runs}:
        raise ValueError(f"--out {out_dir} is one of the shards: merge into a new folder.")
    grader.prepare(sorted(entries))
    results = []
    for student_id in sorted(entries):
        entry = entries[student_id]
        result = _result_from_json(entry["result"])
        grader._record(result, entry.get("grades", {}), roots[origin[student_id]])
        grader._save_result(entry["sha256"], result, entry.get("grades", {}),
                             entry.get("timings", {}))
        results.append(result)
    paths = reports.write_reports(results, grader.out_dir, lab.title, _hints(lab))
    return results, paths


def _hints(lab: Lab) -> dict[str, str]:
    """exercise -> the hint shown to a student who lost its points: the lab's
    hints.toml, or none when the lab has no such file."""
    import tomllib

    try:
        with open(lab.hints_path, "rb") as handle:
            return {exercise: str(hint) for exercise, hint in tomllib.load(handle).items()}
    except FileNotFoundError:
        return {}
