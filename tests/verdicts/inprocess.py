"""The verdict suite's fast tier: hidden tests run in this process, no kernels.

With the hidden tests as functions (``solutions/<lab>/hidden.py``), a
variant's or a mistake's verdict no longer needs a graded notebook: the
lab's student notebook, filled with the solution, runs once here into a
namespace (its demonstrations skipped, as the grader skips them); each answer
then runs in a copy of it, its exercise's visible check after it, and each
hidden test of the exercise is called with the answer's objects, the stand-ins
of standins.toml in place of the exercises it may call, as the test kernel
binds them. What it yields is what the grader's cells would score.

It is the same hidden code the grader runs, in place (autograder.testkernel.
testing: "the same hidden tests also run in place"), so a disagreement with
the full-kernel suite (tests/labs/test_verdicts.py) is a property of the kernels'
boundary, not of the tests: the kernel tier keeps a sample of every lab in
``make test`` and all of it in ``make test-verdicts``.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


from autograder import hidden
from autograder.grader.source import READY_ID, skipped_when_grading
from autograder.labs import LABS, checked_exercise
from autograder.studentkernel import glue
from autograder.testkernel import standins
from tests import verdicts

#: Cells a student's notebook runs that the grader's kernels do not need here:
#: Colab's install cell (it does nothing elsewhere) and the ready cell.
NOT_RUN = {"colab_setup", READY_ID}
#: Seconds a hidden test, an answer cell or a check may run (an endless loop in a
#: mistake fails its test, as the grader's cell timeout fails the cell).
TIMEOUT_S = 120


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _limit(seconds: int):
    def expire(signum, frame):
        raise _Timeout(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _as_graded():
    """A hidden test's calls as the fast grading answers them: each layer's
    first build by its eager call (autograder.studentkernel.glue's, which the
    student's kernel applies to every call of a hidden test; `grade --plain`
    turns it off, and tests/grader/test_plain.py shows both give every score).
    Most of this tier's time was Keras's symbolic first builds."""
    undo = glue._eager_builds()
    try:
        yield
    finally:
        if undo is not None:
            undo()


def _run(source: str, namespace: dict, label: str) -> str:
    """Run ``source`` in ``namespace``; "" or the error it raised, in one line."""
    try:
        with _limit(TIMEOUT_S), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            exec(compile(source, label, "exec"), namespace)
    except BaseException as error:  # noqa: BLE001 - a student's answer may raise anything
        if isinstance(error, KeyboardInterrupt):
            raise
        return f"{type(error).__name__}: {error}"[:2000]
    return ""


@dataclass
class Outcome:
    """One answer's verdict: each tests cell's score, why a cell failed, and
    whether the exercise's visible check raised."""

    exercise: str
    #: tests cell -> its points, and what the answer scored in it.
    points: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    #: The error the visible check (or the answer cell itself) raised; "" if none.
    check_error: str = ""

    @property
    def full(self) -> bool:
        """Full marks in every tests cell of the exercise (a cell not run has none)."""
        return all(self.scores.get(name, 0.0) >= self.points[name] for name in self.points)


class LabRunner:
    """A lab's solution notebook run once; answers then tested in copies of it."""

    def __init__(self, lab_id: str):
        os.environ.setdefault("AUTOGRADER_SEED", "verdicts")
        self.lab = LABS[lab_id]
        self.folder = self.lab.folder
        module = hidden.load(lab_id)
        assert module is not None, f"{lab_id}: no hidden.py"
        self.tests = hidden.tests_of(module)
        notebook = verdicts.solution_notebook(lab_id)
        skipped = set(skipped_when_grading(self.lab)) | NOT_RUN
        self.checks: dict[str, str] = {}
        #: (grade id, source) of every code cell the student's kernel runs under
        #: the grader (the tests cells are the test kernel's), for the hidden
        #: tests that read the submitted text (AUTOGRADER_STUDENT_CELLS).
        self.cells: list[tuple[str, str]] = []
        self.base: dict = {"__name__": "__main__"}
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type != "code" or grade_id.startswith("test_"):
                continue
            self.cells.append((grade_id, cell.source))
            if checked_exercise(grade_id):
                self.checks[checked_exercise(grade_id)] = cell.source
            if grade_id in skipped:   # the visible checks among them, as under the grader
                continue
            error = _run(cell.source, self.base, f"<{lab_id} cell {grade_id}>")
            assert not error, f"{lab_id}: the solution's cell {grade_id} raised {error}"
        # The hidden tests see self.base: every cell the grader runs, no visible
        # check (it skips them). The visible checks run in a namespace of their
        # own, as in the student's notebook: the solution's, then every check in
        # order (a later check may use what an earlier one defined).
        self.checked = dict(self.base)
        for grade_id, check in self.checks.items():
            error = _run(check, self.checked, f"<{lab_id} check {grade_id}>")
            assert not error, f"{lab_id}: the solution's visible check of {grade_id} raised {error}"
        self._standins = {name: standins.define(self.folder, name)
                          for name in standins.sources(self.folder)}
        folder = tempfile.mkdtemp(prefix=f"verdicts-{lab_id}-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        self._cells_file = Path(folder) / "cells.json"

    def test(self, exercise: str, source: str, every_cell: bool = True) -> Outcome:
        """``source`` as ``exercise``'s answer cell: its visible check and its hidden
        tests; without ``every_cell``, the tests stop at the first cell that fails
        (what a mistake with no ``fails`` needs: points lost), the others unscored."""
        namespace = dict(self.base)
        # The solution's object goes: an answer that raises before defining its
        # name leaves it undefined, as in the student's notebook.
        namespace.pop(exercise, None)
        outcome = Outcome(exercise)
        submitted = [source if grade_id == exercise else cell
                     for grade_id, cell in self.cells]
        self._cells_file.write_text(json.dumps(submitted), encoding="utf-8")
        os.environ["AUTOGRADER_STUDENT_CELLS"] = str(self._cells_file)
        error = _run(source, namespace, f"<answer {exercise}>")
        if not error and exercise in self.checks:
            # The answer again, with the checks' namespace, then its check.
            checked = dict(self.checked)
            checked.pop(exercise, None)
            error = (_run(source, checked, f"<answer {exercise}>")
                     or _run(self.checks[exercise], checked, f"<check {exercise}>"))
        outcome.check_error = error
        for name in standins.calls(self.folder).get(exercise, []):
            namespace[name] = self._standins[name]
        for name, function in self.tests.items():
            declared = hidden.declaration(function)
            if declared.exercise != exercise:
                continue
            outcome.points[name] = float(declared.points)
            arguments = {}
            missing = []
            for parameter in hidden.parameters(function):
                if parameter == hidden.NAMESPACE:
                    arguments[parameter] = namespace
                elif parameter in namespace:
                    arguments[parameter] = namespace[parameter]
                else:
                    missing.append(parameter)
            if missing:
                outcome.scores[name] = 0.0
                outcome.messages[name] = f"NameError: {', '.join(missing)} not defined"
                continue
            try:
                with _limit(TIMEOUT_S), contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()), _as_graded():
                    function(**arguments)
            except BaseException as error:  # noqa: BLE001 - as a failed tests cell
                if isinstance(error, KeyboardInterrupt):
                    raise
                outcome.scores[name] = 0.0
                outcome.messages[name] = f"{type(error).__name__}: {error}"[:2000]
            else:
                outcome.scores[name] = float(declared.points)
            if not every_cell and outcome.scores[name] < outcome.points[name]:
                break
        return outcome


# --- every entry of the verdict suite, in worker processes --------------------------


@dataclass(frozen=True)
class Entry:
    """One answer of the verdict suite: a variant ("variant<k>") or a mistake
    (verdicts.mistake_id) of one exercise."""

    lab_id: str
    name: str
    exercise: str
    source: str
    #: Score every tests cell (variants, secondary-property mistakes), or stop at
    #: the first that fails (a mistake that must only lose points).
    every_cell: bool = True


def entries(lab_id: str) -> list[Entry]:
    """Every variant and mistake of ``lab_id``'s verdict spec."""
    module = verdicts.spec(lab_id)
    found = [Entry(lab_id, f"variant{k + 1}", exercise, source)
             for exercise, sources in module.VARIANTS.items()
             for k, source in enumerate(sources)]
    found += [Entry(lab_id, verdicts.mistake_id(m), m.exercise, m.source, every_cell=bool(m.fails))
              for m in module.MISTAKES]
    return found


_RUNNERS: dict[str, LabRunner] = {}


def run_entries(batch: list[Entry]) -> list[tuple[Entry, Outcome]]:
    """Each entry's outcome; a worker keeps each lab's runner for its next batch."""
    results = []
    for entry in batch:
        if entry.lab_id not in _RUNNERS:
            _RUNNERS[entry.lab_id] = LabRunner(entry.lab_id)
        results.append((entry, _RUNNERS[entry.lab_id].test(entry.exercise, entry.source,
                                                            entry.every_cell)))
    return results


#: Entries per batch handed to a worker: small enough that two workers finish
#: together, large enough that a lab's solution runs in few of them.
BATCH = 16


def run_all(lab_ids: list[str], jobs: int) -> dict[tuple[str, str, str], Outcome]:
    """{(lab, entry name, exercise): outcome} of every entry of ``lab_ids``, in
    ``jobs`` fresh processes (spawned: TensorFlow does not survive a fork)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    batches = []
    for lab_id in lab_ids:
        found = entries(lab_id)
        batches += [found[i:i + BATCH] for i in range(0, len(found), BATCH)]
    # The costliest labs first, so that the cheap ones fill the end.
    order = {lab: rank for rank, lab in enumerate(COST_ORDER)}
    batches.sort(key=lambda batch: order.get(batch[0].lab_id, len(order)))
    outcomes = {}
    if jobs <= 1:
        done = [run_entries(batch) for batch in batches]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            done = list(pool.map(run_entries, batches))
    for results in done:
        for entry, outcome in results:
            outcomes[(entry.lab_id, entry.name, entry.exercise)] = outcome
    return outcomes


#: Labs by the time their entries take (lab 5's layers are the slowest to build).
COST_ORDER = ["lab5", "lab2", "lab6", "lab4", "lab3", "lab1"]
