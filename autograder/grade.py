"""Grade a lab: submissions in, gradebook, CSVs, feedback and report out.

The steps, for `python -m autograder grade LAB SUBMISSIONS --out OUT`:

1. Lay out an nbgrader course folder (OUT/nbgrader unless --course-dir) and
   register the lab with nbgrader's generate_assignment (source notebook,
   graded cells and their checksums go into the gradebook).
2. Find the submissions and their student ids (autograder.names).
3. For each student: check the notebook can be read, put it in
   submitted/<student>/<lab>/ and run nbgrader's autograde, whose Execute step
   is autograder.execute.IsolatedExecute (student code in the sandbox, tests
   in a clean kernel). nbgrader restores deleted or edited test cells from
   the source.
4. Read the scores back from nbgrader's gradebook and the messages from the
   grader's own record, and write OUT/grades.csv, OUT/exercises.csv,
   OUT/feedback/<student>.html and OUT/report.html.

A student whose notebook cannot be graded still gets a row, with the reason
in `status`.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import course, names, reports
from autograder.labs import KIT_ROOT, Lab, get_lab
from autograder.normalize import normalize
from autograder.results import GRADED, ExerciseResult, SubmissionResult


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


def _friendly(ename: str, evalue: str) -> str:
    """The failure message a student reads."""
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


def _read_notebook(data: bytes) -> tuple[nbformat.NotebookNode | None, str]:
    """The notebook in ``data``, or None and why it cannot be read."""
    if not data or not data.strip():
        return None, "empty file: upload the .ipynb saved from Jupyter or Colab"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text; upload the .ipynb"
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return None, (
            f"invalid notebook: not complete JSON (line {error.lineno}, column "
            f"{error.colno}: {error.msg}); the file may be cut short: download the "
            f".ipynb again and resubmit"
        )
    try:
        notebook = nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file
        first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return None, f"invalid notebook (not readable as .ipynb JSON: {first_line})"
    if not isinstance(notebook.get("cells"), list):
        return None, "invalid notebook: it has no list of cells"
    return notebook, ""


class Grader:
    """Grades the submissions of one lab into one output folder."""

    def __init__(self, lab_id: str, out_dir: Path, db_url: str | None = None,
                 course_dir: Path | None = None, seed: str | None = None,
                 cell_timeout: int = 120, notebook_timeout: int = 900):
        self.lab = get_lab(lab_id)
        self.out_dir = Path(out_dir).resolve()
        self.root = Path(course_dir).resolve() if course_dir else self.out_dir / "nbgrader"
        self.db_url = db_url or f"sqlite:///{self.root / 'gradebook.db'}"
        self.seed = seed or secrets.token_hex(8)
        self.cell_timeout = cell_timeout
        self.notebook_timeout = notebook_timeout
        self.hidden: list[Path] = [self.root, self.out_dir, KIT_ROOT]

    def prepare(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.api = course.prepare_course(self.root, self.lab, self.db_url)
        self.points = _lab_points(self.api, self.lab)
        (self.out_dir / "run.json").write_text(json.dumps(
            {"lab": self.lab.id, "seed": self.seed, "db_url": _redact(self.db_url),
             "course_dir": str(self.root)}, indent=1))

    def grade_all(self, submissions_path: Path, progress: bool = True) -> list[SubmissionResult]:
        self.hidden.append(Path(submissions_path).resolve())
        self.prepare()
        submissions = names.collect_submissions(submissions_path, self.lab.id,
                                                self.lab.notebook)
        results = []
        bar = _progress(submissions, progress)
        for submission in bar:
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(submission.student_id[:20])
            results.append(self.grade_one(submission))
        return results

    def grade_one(self, submission: names.Submission) -> SubmissionResult:
        notes = [submission.note] if submission.note else []
        if submission.problem or submission.data is None:
            return _failed(submission.student_id, self.lab, self.points,
                           submission.problem or "no file", submission.source_name, notes)
        notebook, problem = _read_notebook(submission.data)
        if notebook is None:
            return _failed(submission.student_id, self.lab, self.points, problem,
                           submission.source_name, notes)
        try:
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
        work = Path(tempfile.mkdtemp(prefix="lk-"))
        record_path = work / "record.json"
        try:
            config = self._config(work, record_path)
            api = course.make_api(self.root, self.db_url, config)
            outcome = api.autograde(self.lab.id, student_id, force=True, create=True)
            record = json.loads(record_path.read_text()) if record_path.exists() else {}
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

        from autograder.execute import IsolatedExecute

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
            message = " ".join(messages.get(name, [])) if score < self.points[name] else ""
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


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no details"


def _redact(db_url: str) -> str:
    if "@" in db_url and "://" in db_url:
        scheme, rest = db_url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return db_url


def _progress(items, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc="grading", unit="notebook", file=sys.stderr, dynamic_ncols=True)


def grade(lab_id: str, submissions: Path, out_dir: Path, db_url: str | None = None,
          course_dir: Path | None = None, seed: str | None = None, progress: bool = True,
          hints: dict[str, str] | None = None, cell_timeout: int = 120,
          notebook_timeout: int = 900) -> tuple[list[SubmissionResult], dict]:
    """Grade ``submissions`` of ``lab_id`` and write every report into ``out_dir``."""
    submissions = Path(submissions)
    if not submissions.exists():
        raise ValueError(
            f"Submissions not found: {submissions} does not exist. Give a folder of "
            f".ipynb files or a .zip downloaded from your LMS."
        )
    grader = Grader(lab_id, out_dir, db_url=db_url, course_dir=course_dir, seed=seed,
                    cell_timeout=cell_timeout, notebook_timeout=notebook_timeout)
    results = grader.grade_all(submissions, progress=progress)
    if hints is None:
        hints = _hints(grader.lab)
    paths = reports.write_reports(results, grader.out_dir, grader.lab.title, hints)
    return results, paths


def _hints(lab: Lab) -> dict[str, str]:
    import importlib

    try:
        module = importlib.import_module(f"autograder.references.{lab.id}")
    except ImportError:
        return {}
    return dict(getattr(module, "HINTS", {}))
