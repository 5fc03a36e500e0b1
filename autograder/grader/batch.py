"""A class graded in one batch: the workers, the class's gradebook, the resume cache.

`Grader` lists the submissions, takes this run's part of them (a shard),
sends those not finished before to the workers (autograder.grader.worker)
and writes each result into the class's `ClassGradebook` as it comes back.
`ClassGradebook` is the class's side of OUT: its nbgrader course folder and
gradebook, run.json, and OUT/results/<student>.json, where each finished
result is kept so that an interrupted run, started again, goes on where it
stopped without grading anyone twice. Merging shards
(autograder.grader.shards) writes the same `ClassGradebook`.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import secrets
import shutil
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path

from autograder import lifetime
from autograder.grader import course, faults, intake
from autograder.grader.submissions import Submission, collect
from autograder.grader.options import GradingOptions, seed_check
from autograder.text import clean_text
from autograder.grader.results import SubmissionResult, exercise_from_json, needs_regrading
from autograder.grader.source import skipped_when_grading
from autograder.grader.worker import WorkerSetup, lab_points, start_worker, work
from autograder.labs import KIT_ROOT, Lab, checked_exercise, get_lab


class ClassGradebook:
    """The class's gradebook and saved results in OUT, written one student at a time.

    Args:
        lab: the lab graded.
        out_dir: OUT, where run.json, results/ and the reports go.
        options: where the gradebook goes (``db_url``, ``course_dir``).
        seed_check: what OUT keeps of the instructor's seed
            (autograder.grader.options.seed_check), or None for a secret seed.
    """

    def __init__(self, lab: Lab, out_dir: Path, options: GradingOptions,
                 seed_check: str | None = None):
        self.lab = lab
        self.out_dir = Path(out_dir).resolve()
        self.root = (options.course_dir.resolve() if options.course_dir
                     else self.out_dir / "nbgrader")
        self.db_url = options.db_url or f"sqlite:///{self.root / 'gradebook.db'}"
        self.seed_check = seed_check
        self.points: dict[str, float] = {}
        #: The isolation of the student kernels (isolation.Isolation.to_json()),
        #: kept in run.json and shown in class.json and report.html.
        self.isolation: dict | None = None

    def prepare(self, students: list[str] | None = None,
                shard: tuple[int, int] | None = None, class_size: int | None = None) -> None:
        """Make OUT and the course folder, register the lab, write run.json.

        run.json says what `merge` needs of this run: the lab, the seed's
        check, the shard and the students it was to grade.
        """
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "results").mkdir(exist_ok=True)
        with faults.held():     # nbgrader's step logs an interrupt as a failure
            api = course.prepare_course(self.root, self.lab, self.db_url)
        faults.check()
        # What a run stopped in the middle of a write left (faults.write_atomically
        # removes its own; an older kit's `<student>.tmp`, a killed run's).
        for left in (self.out_dir / "results").glob("*.tmp"):
            left.unlink(missing_ok=True)
        self.points = lab_points(api, self.lab)
        run: dict = {"lab": self.lab.id, "db_url": _redact(self.db_url),
                     "course_dir": str(self.root)}
        if self.seed_check:
            run["seed_check"] = self.seed_check
        if shard:
            run["shard"] = list(shard)
            run["class_size"] = class_size
        if students is not None:
            run["students"] = students
        if self.isolation:
            run["isolation"] = self.isolation
        faults.write_atomically(self.out_dir / "run.json", json.dumps(run, indent=1))

    def saved(self, student_id: str, sha256: str | None) -> SubmissionResult | None:
        """The finished result of this very file, if an earlier run into OUT saved one
        (of whatever file, when ``sha256`` is None: `--only` keeps the others' results).

        Whatever seed it was graded with is kept, except that a run with an
        instructor's --seed regrades results of any other seed (shards must
        agree).
        """
        try:
            entry = json.loads(self._result_path(student_id).read_text())
            if sha256 is not None and entry.get("sha256") != sha256:
                return None
            if self.seed_check and entry.get("seed_check") != self.seed_check:
                return None
            result = result_from_json(entry["result"])
            # A row the grader failed on twice is graded again by the same command.
            return None if needs_regrading(result.status) else result
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, sha256: str, result: SubmissionResult, grades: dict[str, float],
             timings: dict[str, float] | None = None) -> None:
        """Keep ``result`` in OUT/results/ (written whole or not at all: a
        result cut short, by a full disk or a kill, is never left to be read)."""
        faults.write_atomically(self._result_path(result.student_id), json.dumps(
            {"sha256": sha256, "seed_check": self.seed_check, "result": asdict(result),
             "grades": grades, "timings": timings or {}}))

    def record(self, result: SubmissionResult, grades: dict[str, float],
               worker_root: Path) -> None:
        """Write one result into the class's gradebook and course folder.

        ``grades``: the score of each graded cell; ``worker_root``: the
        course folder that holds the student's submitted and autograded
        notebooks (a worker's, or a shard's).
        """
        from nbgrader.api import Gradebook

        student_id = result.student_id
        for stage in ("submitted", "autograded"):
            source = Path(worker_root) / stage / student_id / self.lab.id
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

    def points_of(self, results: list[SubmissionResult]) -> dict[str, float]:
        """Exercise -> points: the gradebook's, or as the results say (when the
        gradebook was not opened)."""
        return self.points or _points_of(results)

    def notebook_path(self, student_id: str) -> Path:
        """Where the class's course folder keeps ``student_id``'s graded notebook."""
        return self.root / "submitted" / student_id / self.lab.id / f"{self.lab.notebook}.ipynb"

    def _result_path(self, student_id: str) -> Path:
        return self.out_dir / "results" / f"{student_id}.json"


class Grader:
    """Grades the submissions of one lab into one output folder and gradebook.

    Submissions are graded by `options.workers` worker processes, each in a
    private course folder; this object alone writes their results into the
    class's gradebook (SQLite by default, any SQLAlchemy URL with
    `options.db_url`), copies the autograded notebooks into the class's
    course folder, and keeps each finished result in OUT/results/.
    """

    def __init__(self, lab_id: str, out_dir: Path, options: GradingOptions):
        self.lab = get_lab(lab_id)
        self.options = options
        # The instructor's seed, or a fresh secret one (autograder.pipeline).
        self.seed = options.seed or secrets.token_hex(16)
        self.gradebook = ClassGradebook(
            self.lab, out_dir, options,
            seed_check(options.seed, self.lab.id) if options.seed else None)
        self.out_dir = self.gradebook.out_dir
        # The provided cells not to run (demonstrations, visible checks): read
        # once from the lab's source (source.skipped_when_grading), handed to
        # every worker; each submission may still need some (cellnames).
        self.skip_cells = [] if options.run_demos else [
            grade_id for grade_id in skipped_when_grading(self.lab)
            if not (options.run_checks and checked_exercise(grade_id))]
        self.hidden: list[Path] = [self.gradebook.root, self.out_dir, KIT_ROOT]

    def find(self, submissions_path: Path, roster=None):
        """List the download and match it to the students (autograder.grader.submissions.collect),
        keeping it in ``self.collected``; OUT/ids.json keeps each entry's id for the next run."""
        from autograder.grader.submissions import IDS_FILE

        self.collected = collect(submissions_path, self.lab.id, self.lab.notebook, roster,
                                 ids_file=self.out_dir / IDS_FILE)
        self._found = Path(submissions_path).resolve()
        return self.collected

    def grade_all(self, submissions_path: Path, roster=None) -> list[SubmissionResult]:
        """Grade this run's part of the class (all of it but for a shard), in order.

        ``roster``: match the files to the enrolled students (``find``, unless
        it was called for this download already). With ``options.only``,
        only those students are graded (again); the others keep their saved
        results.
        """
        self.hidden.append(Path(submissions_path).resolve())
        if getattr(self, "_found", None) != Path(submissions_path).resolve():
            self.find(submissions_path, roster)
        submissions = self.collected.submissions
        total = len(submissions)
        if self.options.only:
            submissions = self._only(submissions)
        if self.options.shard:
            # Every shard lists the same folder, sorted by student id: shard
            # K of N takes every N-th student from the K-th on.
            index, count = self.options.shard
            submissions = submissions[index - 1::count]
        self.gradebook.isolation = self._isolation(submissions)
        # Each file is read here once for its digest (one at a time, not kept).
        digests, sizes = {}, {}
        for submission in submissions:
            digests[submission.student_id], sizes[submission.student_id] = _digest(submission)
        results: dict[str, SubmissionResult] = {}
        pending = []
        for submission in submissions:
            again = self.options.regrade or submission.student_id in self.options.only
            saved = None if again else \
                self.gradebook.saved(submission.student_id, digests[submission.student_id])
            if saved is None and self.options.only and not again:
                saved = self.gradebook.saved(submission.student_id, None)
                if saved is None:
                    continue  # not graded yet, and not asked for: no row this time
            if saved is not None:
                results[submission.student_id] = saved
            else:
                pending.append(submission)
        faults.quiet_gradebook_errors()
        progress = faults.progress
        progress.start(self.out_dir, len(submissions), len(results),
                       sum(sizes[s.student_id] for s in pending))
        # The workers start first: each sets up its course folder and starts
        # its fork server (TensorFlow's import) while this process prepares
        # the class's own.
        pool, futures = self._start(pending)
        bar = None
        try:
            self.gradebook.prepare([s.student_id for s in submissions], self.options.shard,
                                   total)
            progress.prepared()
            bar = _progress(len(submissions), self.options.progress, initial=len(results))
            for result, grades, worker_root, timings in self._results(futures, pending):
                # Graded here (one job), a signal may have been swallowed by
                # nbgrader, making a failed row of it: not kept.
                faults.check()
                if faults.says_disk_full(result.status):
                    # The worker could not write its course folder (in OUT):
                    # the notebook was not graded, and is graded by the next run.
                    raise faults.DiskFull(result.status, faults.quoted_path(result.status))
                with faults.held():     # the gradebook and OUT/results/ agree
                    result = self._record(result, grades, Path(worker_root))
                    try:
                        self.gradebook.save(digests[result.student_id], result, grades,
                                            timings)
                    except OSError as error:
                        if faults.is_disk_full(error):
                            raise faults.DiskFull(str(error), faults.full_path(error)) \
                                from error
                        raise
                results[result.student_id] = result
                progress.one_more()
                if bar is not None:
                    bar.set_postfix_str(clean_text(result.student_id, keep_lines=False)[:20])
                    bar.update(1)
            if bar is not None:
                bar.close()
        except BaseException:
            # A failure here (the class's gradebook, an interrupt, a worker
            # lost, a full disk): what the workers are grading is given up,
            # and nothing more is begun. Each worker's fork server and
            # kernels end with it (faults: they die with their parent).
            if bar is not None:
                bar.close()
            if pool is not None:
                _stop_workers(pool, self._workers)
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        shutil.rmtree(self._workers_dir, ignore_errors=True)
        return [results[s.student_id] for s in submissions if s.student_id in results]

    @property
    def protected(self) -> list[Path]:
        """What the student kernels must not reach: the course folder, OUT, the
        kit, the submissions (self.hidden), and the instructor's term files."""
        files = [getattr(self.options, name) for name in
                 ("course_file", "roster", "times", "extensions", "overrides", "similar_to")]
        database = self.gradebook.db_url
        if database.startswith("sqlite:///"):
            files.append(Path(database.removeprefix("sqlite:///")).parent)
        return list(self.hidden) + [Path(f).resolve() for f in files if f is not None]

    def _isolation(self, submissions: list[Submission]) -> dict | None:
        """Choose the student kernels' isolation (it refuses to grade without
        any unless options.unsandboxed) and say it on the terminal. A run
        with nothing to grade keeps what the last run into OUT said."""
        from autograder.kernels import cgroups, isolation

        if not submissions and not self.options.regrade:
            try:
                return json.loads((self.out_dir / "run.json").read_text()).get("isolation")
            except (OSError, ValueError, AttributeError):
                return None
        chosen = isolation.choose_isolation(self.protected, self.options.unsandboxed)
        print(f"Isolation of the student kernels: {clean_text(chosen.summary)}", file=sys.stderr)
        # What keeps one kernel from taking the machine's CPU from the others.
        bound = cgroups.describe_cpu_bound(self.options.workers)
        print(f"CPU and processes of each student kernel: {clean_text(bound)}", file=sys.stderr)
        return {**chosen.to_json(), "cpu_bound": bound}

    def _only(self, submissions: list[Submission]) -> list[Submission]:
        """The class, checked against ``--only``: every id asked for must be in it."""
        ids = {s.student_id for s in submissions}
        unknown = [student for student in self.options.only if student not in ids]
        if unknown:
            near = sorted(ids, key=lambda i: (not i.lower().startswith(unknown[0][:3].lower()),
                                              i))[:5]
            raise ValueError(
                f"--only {', '.join(unknown)}: no submission of that student id in the "
                f"download. The ids are those of grades.csv (e.g. {', '.join(near) or 'none'}).")
        return submissions

    @property
    def _workers_dir(self) -> Path:
        return self.gradebook.root / ".workers"

    def _record(self, result: SubmissionResult, grades: dict[str, float],
                worker_root: Path) -> SubmissionResult:
        """Record ``result`` in the class's gradebook; the row to keep (failed if that failed)."""
        try:
            self.gradebook.record(result, grades, worker_root)
            return result
        except Exception as error:  # noqa: BLE001 - the row stays, with the reason
            if faults.is_disk_full(error):
                # Not the notebook's: nothing is kept, the next run grades it.
                raise faults.DiskFull(str(error), faults.full_path(error)) from error
            return intake.failed(result.student_id, self.lab, self.gradebook.points,
                                 intake.grader_error(f"recording the grades failed "
                                                     f"({type(error).__name__}: {error})"),
                                 result.source_name, result.notes)

    def _setup(self, pending) -> WorkerSetup:
        """What each worker of this run is given."""
        return WorkerSetup(
            lab_id=self.lab.id, seed=self.seed,
            hidden=tuple(str(path) for path in self.hidden),
            skip_cells=tuple(self.skip_cells), options=self.options,
            isolation=(self.gradebook.isolation or {}).get("layer", ""),
            protected=tuple(str(path) for path in self.protected),
            workers_dir=str(self._workers_dir),
            jobs=min(self.options.workers, len(pending)))

    def _start(self, pending) -> tuple[ProcessPoolExecutor | None, dict]:
        """The worker processes for ``pending``, started, and each one's
        future (None and {}: grading here, one at a time, or nothing to grade)."""
        setup = self._setup(pending)
        if not pending or setup.jobs == 1:
            return None, {}
        # Started with the stop signals held (faults.held): a SIGTERM
        # meanwhile stops the run once they are started, and a Ctrl-C never
        # stops a worker (which ignores it: worker_started): this process
        # stops them.
        faults.quiet_resource_tracker()
        with faults.held(workers=True):
            pool = ProcessPoolExecutor(max_workers=setup.jobs,
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=worker_started,
                                       initargs=(setup, os.getpid()))
            # The pool starts its processes as work is submitted: they start now.
            others = set(multiprocessing.active_children())
            futures = {pool.submit(work_in_pool, submission): submission
                       for submission in pending}
            #: This run's worker processes (not those of another pool in this process).
            self._workers = set(multiprocessing.active_children()) - others
        return pool, futures

    def _results(self, futures: dict, pending):
        """Yield (result, grades, worker_root, timings) as submissions are
        graded: by the workers' ``futures``, or here where there are none."""
        if not pending:
            return
        if not futures:
            start_worker(self._setup(pending))
            for submission in pending:
                yield work(submission)
            return
        for future in as_completed(futures):
            try:
                yield future.result()
            except BrokenProcessPool:
                # A worker process died (killed: the out-of-memory killer's
                # choice); the pool stopped the others. Not the notebooks'
                # fault: no row is kept, the same command grades them.
                stopping = faults.stopping()
                if stopping is not None:       # a signal to the whole group
                    raise faults.Interrupted(stopping) from None
                raise faults.WorkerLost(f"a grading worker died ({self._how_workers_died()}): "
                                        f"{faults.progress.so_far()}; the same command "
                                        f"goes on") from None
            except Exception as error:  # noqa: BLE001 - a worker failed: keep the row
                submission = futures[future]
                yield (intake.failed(submission.student_id, self.lab, self.gradebook.points,
                                     intake.grader_error(
                                         f"the grading worker failed "
                                         f"({type(error).__name__}: {error})"),
                                     submission.source_name),
                       {}, str(self._workers_dir / "lost"), {})


    def _how_workers_died(self) -> str:
        """How this run's dead workers ended, as the terminal says it."""
        workers = list(getattr(self, "_workers", ()))
        for process in workers:
            process.join(timeout=1)
        # The one that died first, not those the pool then ended (SIGTERM).
        workers.sort(key=lambda process: process.exitcode == -signal.SIGTERM)
        for process in workers:
            code = process.exitcode
            if code is not None and code < 0:
                name = signal.Signals(-code).name
                return f"killed by {name}" + (", as the out-of-memory killer does"
                                              if -code == signal.SIGKILL else "")
            if code:
                return f"exit status {code}"
        return "it ended"


#: Why this worker process could not set itself up (worker_started), said
#: for each submission sent to it.
_START_FAILED: str | None = None


def _stop_workers(pool: ProcessPoolExecutor, workers) -> None:
    """End a pool's processes now: SIGTERM, 5 s, then SIGKILL, and wait for
    each to be reaped, so that none outlives the run's failure.

    The processes are those this run saw start (``workers``) and those the
    pool holds (``pool._processes``, which ``shutdown`` forgets): a process
    the pool started that the run did not see is ended too. After SIGKILL
    the wait has no time limit: the kernel ends such a process, and a
    process left unreaped was the flaw (it outlived a failed run under load).
    """
    processes = set(workers) | set((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + 5
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.exitcode is None:
            process.kill()
    for process in processes:
        process.join()


def worker_started(setup: WorkerSetup, parent_pid: int) -> None:
    """Initializer of a worker process of the pool: it dies with the command
    (lifetime.die_with_parent; the pool's processes are started by the
    command's main thread), leaves Ctrl-C to it (faults.worker_signals),
    then sets itself up (worker.start_worker). A failure to set up is said
    for each submission sent here (work_in_pool) rather than as a traceback
    from the pool."""
    global _START_FAILED
    lifetime.die_with_parent(parent_pid)
    faults.worker_signals()
    faults.quiet_gradebook_errors()
    try:
        start_worker(setup)
    except Exception as error:  # noqa: BLE001 - said with each submission sent here
        _START_FAILED = f"{type(error).__name__}: {error}"


def work_in_pool(submission: Submission):
    """`work` in a worker process of the pool (worker_started)."""
    if _START_FAILED is not None:
        raise RuntimeError(f"the worker could not set itself up ({_START_FAILED})")
    return work(submission)


def result_from_json(saved: dict) -> SubmissionResult:
    """A SubmissionResult from its ``asdict`` form in OUT/results/<student>.json."""
    exercises = [exercise_from_json(e) for e in saved["exercises"]]
    return SubmissionResult(**{**saved, "exercises": exercises})


def _digest(submission: Submission) -> tuple[str, int]:
    """What the result saved for ``submission`` was graded from (read now, not
    kept), and its size in bytes."""
    data, problem = submission.read()
    return (hashlib.sha256(data if data is not None else
                           (submission.problem or problem).encode()).hexdigest(),
            len(data or b""))


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


def _points_of(results: list[SubmissionResult]) -> dict[str, float]:
    """Exercise -> points, as the results say (when the gradebook was not opened)."""
    points: dict[str, float] = {}
    for result in results:
        for x in result.exercises:
            points.setdefault(x.exercise, x.max_score)
    return points
