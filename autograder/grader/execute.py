"""nbgrader's Execute step, split over two kernels.

`IsolatedExecute` replaces nbgrader's `Execute` preprocessor in autograde:

* every cell the student can change or see run (solution, provided and
  visible-check cells) runs in the student's kernel, started inside the
  sandbox (autograder.kernels.isolation);
* every graded test cell runs in a separate *test kernel*: a clean Python
  process that never runs student code, where each exercise name is a proxy
  into the student's kernel (autograder.kernels.probe). Its outputs are replaced by
  the grader's own record: an error when the test failed, nothing when it
  passed. Log lines on stderr, display hooks or printed numbers cannot
  change a score.

It also survives a dead kernel (the tests after it fail with the reason, the
points before it stay), enforces a time limit for the whole notebook, bounds
what it reads of the student kernel's output (`StudentOutputChannel`), and
writes what happened to `report_file` (JSON) for the grader's reports.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import builtins
import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from queue import Empty

import zmq
import zmq.asyncio
from jupyter_client import KernelManager
from jupyter_core.utils import ensure_async, run_sync
from nbclient.client import timestamp
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from traitlets import Bool, Integer, List, Unicode

from nbgrader.preprocessors import Execute
from nbgrader.utils import is_grade, is_solution

from autograder import cputime, limits
from autograder.grader import tempdirs
from autograder.grader.cellnames import cells_needed
from autograder.labs import checked_exercise
from autograder.kernels.probe import hide_data
from autograder.kernels.jupyter import (BoundedKernelClient, SandboxKernelManager,
                                       StudentOutputChannel, in_mb)
# The test kernel's memory cap, named here too (tests/test_execute.py, docs/security.md);
# why 3 GiB: autograder.limits.
from autograder.limits import TESTS_KERNEL_MEMORY_BYTES

#: Run once in a new test kernel. A failed hidden test's traceback is kept in
#: the autograded notebook for the instructor (the student reads only its
#: message): as Python prints it (IPython's "Plain" mode), not with IPython's
#: default context, whose source highlighting took 25 to 100 ms a failed
#: tests cell (lab 5's sample class: about 0.24 s a submission in the test
#: kernel).
TESTS_KERNEL_STARTUP = f"""
get_ipython().InteractiveTB.set_mode(mode="Plain")
import os, resource, sys, warnings
_, _hard = resource.getrlimit(resource.RLIMIT_DATA)
_cap = {TESTS_KERNEL_MEMORY_BYTES}
_cap = _cap if _hard == resource.RLIM_INFINITY else min(_cap, _hard)
resource.setrlimit(resource.RLIMIT_DATA, (_cap, _cap))
del _hard, _cap
warnings.filterwarnings("ignore")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy
import autograder.kernels.probe, autograder.testkernel.testing
"""

#: Run in the test kernel before each submission's tests: a clean namespace
#: (nothing of the previous submission's tests is left), NumPy's error
#: settings reset, and a client of this submission's student kernel. What
#: outlives the reset (the modules imported, the references computed once)
#: is frozen out of the garbage collector: IPython's reset runs a full
#: collection, which with TensorFlow imported by a reference (labs 2, 4-6)
#: walked some 400,000 objects again for every submission. That collection
#: runs before the reset empties the namespace, so the previous
#: submission's cycles are collected here first (nothing of it is frozen).
TESTS_SESSION_START = """
get_ipython().reset(new_session=False)
import gc as __autograder_gc
__autograder_gc.collect()
__autograder_gc.freeze()
del __autograder_gc
import numpy as __autograder_numpy
__autograder_numpy.seterr(all="warn", under="ignore")
del __autograder_numpy
from autograder.kernels.probe import StudentKernel as __AutograderStudentKernel
__autograder_kernel__ = __AutograderStudentKernel(%r, %r, %r, %r, exchange_identity=%r,
                                                  clock=%r, plain=%r)
del __AutograderStudentKernel


def construct_in_student_kernel(source, name, *args, **kwargs):
    # Build a grader-written object (e.g. a tiny model) in the student's kernel.
    return __autograder_kernel__.construct(source, name, *args, **kwargs)
"""

#: Run after TESTS_SESSION_START: this submission's seed of the hidden tests'
#: inputs (autograder.testkernel.testing.rng reads it), drawn from the run's
#: seed and the submission (autograder.grader.worker.submission_seed), so
#: that what one notebook recorded of its inputs answers no other's. The
#: kernel, and what its references keep that the inputs do not change, stay.
TESTS_SESSION_SEED = """
__import__("os").environ["AUTOGRADER_SEED"] = %r
"""

#: Evaluated in the test kernel after each tests cell (a user expression of
#: the cell, or of an empty request after a cell that failed): the student's
#: kernel stops serving the cell's requests, and what they cost
#: (StudentKernel.end_cell) is kept with the cell's seconds for `make bench`.
TESTS_CELL_END = "__autograder_kernel__.end_cell()"
#: The same after a tests cell that passed and whose next cell to run is
#: another tests cell (an exercise's properties, one cell each): the
#: student's kernel goes on serving, since none of its cells runs in between
#: (a stop and a start cost two round trips to it, 10 to 30 ms a cell).
TESTS_CELL_NEXT = "__autograder_kernel__.profile()"


def _read_profile(expressions) -> dict:
    """The profile TESTS_CELL_END returned; {} when none."""
    try:
        found = json.loads(ast.literal_eval(
            expressions["profile"]["data"]["text/plain"]))
    except (KeyError, TypeError, ValueError, SyntaxError):
        return {}
    return found if isinstance(found, dict) else {}


#: While a test runs, how often the grader drops what the student's kernel
#: printed meanwhile (IsolatedExecute._drop_student_output).
STUDENT_OUTPUT_DROP_S = 0.05

#: Run after them: this submission's student kernel is done with (the next
#: TESTS_SESSION_START empties the namespace).
TESTS_SESSION_END = "__autograder_kernel__.close()"

#: In the test kernel's folder (its path in the test kernel's environment,
#: AUTOGRADER_STUDENT_CELLS): the sources of the submission's cells that run
#: in the student's kernel (every code cell but the graded tests), as a JSON
#: list, rewritten before each submission's tests. Hidden tests read what an
#: answer is made of from the submitted text, which the grader holds, rather
#: than from what the student's kernel says about its objects. The sandboxed
#: student kernel has a private /tmp and cannot reach this folder.
STUDENT_CELLS_FILE = "student_cells.json"


class TestsKernel:
    """The grader's test kernel, kept from one submission to the next.

    It never runs student code: it runs the hidden tests, which reach the
    student's kernel only through autograder.kernels.probe and read back only JSON
    and NumPy arrays (allow_pickle=False). So one submission cannot change
    it for the next, and starting it once per grading process instead of
    once per submission saves a Python start and its imports (about 0.6 s a
    submission). Its namespace is reset between submissions; a kernel that
    timed out or died is replaced.
    """

    __test__ = False    # a kernel, not a pytest test class

    _kept: "TestsKernel | None" = None

    def __init__(self, settings: tuple):
        self.settings = settings
        lab_id, seed = settings
        self.folder = tempdirs.make_folder("labkit-tests-")
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("AUTOGRADER_")}
        env.update(
            AUTOGRADER_LAB=lab_id,
            AUTOGRADER_SEED=seed,
            AUTOGRADER_STUDENT_CELLS=str(Path(self.folder) / STUDENT_CELLS_FILE),
            TF_CPP_MIN_LOG_LEVEL="3",
            PYTHONWARNINGS="ignore",
            MPLBACKEND="Agg",
        )
        self.km = KernelManager(kernel_name="python3", transport="ipc",
                                ip=str(Path(self.folder) / "tests"),
                                connection_file=str(Path(self.folder) / "tests.json"))
        # Like the student kernel's, its fd 1 and 2 are not the instructor's
        # terminal (TensorFlow's C++ logs when the references import Keras).
        self.km.start_kernel(env=env, cwd=self.folder,
                             extra_arguments=["--HistoryManager.hist_file=:memory:"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=limits.TESTS_KERNEL_START_TIMEOUT_S)

    @classmethod
    def get(cls, settings: tuple) -> tuple["TestsKernel", bool]:
        """The kept kernel for ``settings`` (lab, seed), or a new one; and
        whether it is new."""
        kept = cls._kept
        if kept is not None and kept.settings == settings and kept.alive():
            return kept, False
        cls.discard()
        cls._kept = cls(settings)
        return cls._kept, True

    @classmethod
    def discard(cls) -> None:
        kept, cls._kept = cls._kept, None
        if kept is not None:
            kept.shutdown()

    def alive(self) -> bool:
        try:
            return bool(self.km.is_alive())
        except Exception:  # noqa: BLE001
            return False

    def shutdown(self) -> None:
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


atexit.register(TestsKernel.discard)


def _error_output(ename: str, evalue: str, traceback: list[str] | None = None) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=traceback or [f"{ename}: {evalue}"])


def followed_by_tests(nb, skipped: set[str]) -> set[int]:
    """The indices of the tests cells whose next code cell to run is another
    tests cell (none of the student's cells, nor a provided one, runs in
    between; a skipped demonstration or check does not run)."""
    runs = []   # (index, is a tests cell) of each code cell that runs
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        nbgrader = cell.metadata.get("nbgrader", {})
        if nbgrader.get("locked") and nbgrader.get("grade_id") in skipped \
                and not (is_grade(cell) and not is_solution(cell)):
            continue
        runs.append((index, is_grade(cell) and not is_solution(cell)))
    return {index for (index, tests), (_, next_tests) in zip(runs, runs[1:])
            if tests and next_tests}


def names_used(source: str) -> set[str]:
    """Names a cell reads (so that only those get bound to proxies)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


class IsolatedExecute(Execute):
    """Execute student cells in the sandbox and graded tests in a clean kernel."""

    report_file = Unicode("", help="Where to write the JSON record of the run.").tag(config=True)
    lab_id = Unicode("", help="The lab being graded (selects the references).").tag(config=True)
    exercise_names = List(Unicode(), help="Names hidden tests may call.").tag(config=True)
    seed = Unicode("0", help="Secret seed of the hidden tests' inputs.").tag(config=True)
    session_seed = Unicode("", help="This submission's seed of the hidden tests' inputs "
                           "(autograder.grader.worker.submission_seed); empty: "
                           "`seed`.").tag(config=True)
    notebook_timeout = Integer(limits.NOTEBOOK_TIMEOUT_S,
                               help="Seconds for the whole notebook.").tag(config=True)
    skip_cells = List(Unicode(), help="grade_ids of provided cells not to run: demonstrations "
                      "and visible checks (source.skipped_when_grading), unless the "
                      "submission's own cells read them (cellnames).").tag(config=True)
    setup_timeout = Integer(
        limits.SETUP_CELL_TIMEOUT_S,
        help="Seconds for each provided cell before the first answer (imports).").tag(config=True)
    plain = Bool(False, help="The hidden tests' calls as execute requests, and Keras's own "
                 "first build (`grade --plain`).").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = SandboxKernelManager
        super().__init__(*args, **kwargs)
        self._tests_km = None
        self._tests_kc = None
        self._tests_dirty = False
        self._record = {}
        self._deadline = None
        self._stopped = ""
        self._exit_asked = False
        self.on_cell_executed = self._note_exit_request

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.client_factory = BoundedKernelClient
        return km

    # -- the whole notebook --------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        self._record = {
            "sandbox": "",
            "stopped": "",
            "tests": {},
            "cells_run": 0,
            "cells_skipped": 0,
            # Failures of the grader or the machine, not of the notebook: the
            # worker grades the submission again (autograder.grader.worker).
            "grader_faults": [],
            # How the student's kernel ended while it should have run, if it did.
            "kernel_death": None,
            # Output the grader dropped (StudentOutputChannel): bytes, cells.
            "output_dropped": {"bytes": 0, "cells": 0},
            # Seconds spent in each phase (see benchmarks/grading_speed.py).
            "timings": {"student_kernel_start": 0.0, "student_cells": 0.0,
                        "tests_kernel_start": 0.0, "tests": 0.0},
        }
        self._stopped = ""
        self._tests_dirty = False
        self._answers_seen = False
        self._student_cells = [cell.source for cell in nb.cells if cell.cell_type == "code"
                               and not (is_grade(cell) and not is_solution(cell))]
        # The skipped cells this submission's own cells read from (cellnames):
        # run after all, so that skipping changes no grade.
        self._skipped_now = set(self.skip_cells)
        if self.skip_cells:
            cells = [(cell.metadata.get("nbgrader", {}).get("grade_id", ""), cell.source,
                      "tests" if is_grade(cell) and not is_solution(cell) else
                      "provided" if cell.metadata.get("nbgrader", {}).get("locked") else "own")
                     for cell in nb.cells if cell.cell_type == "code"]
            needed = cells_needed(cells, self._skipped_now)
            self._skipped_now -= set(needed)
            self._record["cells_needed"] = len(needed)
        self._tests_then_tests = followed_by_tests(nb, self._skipped_now)
        # The exercises that lost points, for their pictures (make_pictures),
        # drawn once the last cell has run.
        self._picture_exercises: list[str] = []
        self._last_cell = len(nb.cells) - 1
        self._notebook_limit: cputime.Limit | None = None
        self._student_km = None
        self._deadline = time.monotonic() + self.notebook_timeout
        started = time.monotonic()
        try:
            return super().preprocess(nb, resources, km)
        except DeadKernelError:  # the kernel died outside a cell
            how = self._kernel_died("outside a cell")
            self._stop(f"the notebook's kernel {how}")
            return nb, resources
        except RuntimeError as error:
            if self._record["cells_run"]:
                raise
            # The student's kernel never started: the grader's set-up, not the
            # student, is at fault. Say so instead of scoring anything.
            self._record["grader_error"] = f"the student kernel did not start: {error}"
            raise
        finally:
            self._shutdown_tests_kernel()
            # What bounded the kernel's CPU and processes, and whether its
            # processes hit the task limit (read as its cgroup was removed).
            # (nbclient has let go of the manager by now: the one kept at start.)
            self._record["cpu_bound"] = getattr(self._student_km, "cpu_bound_words", "")
            hits = getattr(self._student_km, "pids_limit_hits", 0)
            if hits:
                self._record["pids_limit_hits"] = hits
            self._record["stopped"] = self._stopped
            self._record["seconds"] = round(time.monotonic() - started, 2)
            if self.report_file:
                Path(self.report_file).write_text(json.dumps(self._record, indent=1))

    @contextmanager
    def _timed(self, phase: str):
        """Add the seconds spent in the block to ``phase`` of the record."""
        started = time.monotonic()
        try:
            yield
        finally:
            timings = self._record["timings"]
            timings[phase] = round(timings[phase] + time.monotonic() - started, 3)

    def start_new_kernel(self, **kwargs):
        with self._timed("student_kernel_start"):
            started = super().start_new_kernel(**kwargs)
        # The isolation it ran under (the run's choice: isolation.choose_isolation).
        layer = getattr(self.km, "layer", None)
        self._record["sandbox"] = layer().name if callable(layer) else ""
        # Forked from the fork server, libraries already imported, or fresh.
        self._record["timings"]["student_kernel_forked"] = float(getattr(self.km, "forked", False))
        self._student_km = self.km
        # The notebook's limit counts the CPU its kernel's processes use.
        self._notebook_limit = cputime.Limit(self._student_clock(), self.notebook_timeout)
        return started

    def _student_clock(self) -> cputime.Clock | None:
        clock = getattr(self.km, "cpu_clock", None)
        return clock() if callable(clock) else None

    def _fault(self, reason: str) -> None:
        """A failure of the grader or the machine, not of the notebook (the
        worker grades the submission again)."""
        self._record["grader_faults"].append(hide_data(reason, 400))

    def _kernel_died(self, where: str, how: str = "") -> str:
        """Record that the student's kernel ended ``where``; what the
        messages say of it: "died (killed by signal 9, SIGKILL...)", "died
        (exited with status 1)", or "died" where how is not known."""
        words = getattr(self.km, "exit_words", None)
        how = how or (words() if callable(words) else "")
        if self._record["kernel_death"] is None:
            self._record["kernel_death"] = {"where": where, "how": how}
        return f"died ({how})" if how else "died"

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg,
                                    task_poll_kernel_alive):
        """nbclient's wait for a cell's reply (nbclient 0.10-0.11, whose steps
        this follows), with the cell's limit in CPU seconds of the kernel's
        processes and the wall clock as the backstop (autograder.cputime),
        instead of the wall clock alone: a loaded machine does not time out
        an honest cell; a starved one is the machine's fault (_fault)."""
        clock = self._student_clock() if timeout is not None else None
        if clock is None:
            return await super()._async_poll_for_reply(msg_id, cell, timeout,
                                                       task_poll_output_msg,
                                                       task_poll_kernel_alive)
        limit = cputime.Limit(clock, timeout)
        timed_out = None
        while True:
            if timed_out is not None:
                msg = timed_out
            else:
                try:
                    msg = await ensure_async(self.kc.shell_channel.get_msg(
                        timeout=max(limit.wall_left(), cputime.CHECK_S)))
                except Empty:
                    if not limit.reached():
                        continue
                    task_poll_kernel_alive.cancel()
                    await self._async_check_alive()
                    if limit.starved:
                        self._fault(f"a cell could not finish: {limit.starved_words()}")
                        evalue = f"the grader stopped this cell: {limit.starved_words()}"
                    elif limit.by == "wall":
                        evalue = f"the grader stopped this cell: {limit.waited_words()}"
                    else:
                        evalue = (f"the cell used more than its limit of {timeout} s of "
                                  f"CPU time (an endless loop, or far too much work?)")
                    await ensure_async(self.km.interrupt_kernel())
                    timed_out = {"content": {"status": "error", "ename": "CellTimeoutError",
                                             "evalue": evalue,
                                             "traceback": [f"CellTimeoutError: {evalue}"]},
                                 "parent_header": {"msg_id": msg_id}}
                    msg = timed_out
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if self.record_timing and timed_out is None:
                cell["metadata"]["execution"]["shell.execute_reply"] = timestamp(msg)
            try:
                await asyncio.wait_for(task_poll_output_msg, self.iopub_timeout)
            except (asyncio.TimeoutError, Empty):
                if self.raise_on_iopub_timeout:
                    task_poll_kernel_alive.cancel()
                    raise CellTimeoutError.error_from_timeout_and_cell(
                        "Timeout waiting for IOPub output", self.iopub_timeout, cell
                    ) from None
                self.log.warning("Timeout waiting for IOPub output")
            task_poll_kernel_alive.cancel()
            return msg

    def start_new_kernel_client(self):
        with self._timed("student_kernel_start"):
            return super().start_new_kernel_client()

    def preprocess_cell(self, cell, resources, index):
        result = self._preprocess_cell(cell, resources, index)
        if index == self._last_cell and self._picture_exercises and not self._stopped:
            with self._timed("tests"):
                self._make_pictures()
        return result

    def _make_pictures(self) -> None:
        """The pictures of the exercises that lost points (autograder.grader.pictures),
        into the record: the student's values on the visible examples, asked
        of the test kernel once every cell has run, so that nothing they do
        moves a grade. A picture that fails or times out is left out; it is
        never a fault of the grader's."""
        from autograder.labs import lab_folder

        folder = lab_folder(self.lab_id)
        wanted = list(dict.fromkeys(self._picture_exercises))
        if (folder is None or not (folder / "pictures.py").is_file() or self._tests_kc is None
                or self._tests_dirty):
            return
        faults = len(self._record["grader_faults"])
        # On the wall clock: a picture is a call or two on a small example, and a
        # notebook that sleeps in it must not hold its grading for long.
        status, content = self._tests_execute(
            "from autograder.testkernel.pictures import make as __autograder_pictures",
            limits.PICTURES_TIMEOUT_S,
            {"pictures": f"__autograder_pictures(__autograder_kernel__, {self.lab_id!r}, "
                         f"{wanted!r})", "profile": TESTS_CELL_END})
        del self._record["grader_faults"][faults:]
        found = (content or {}).get("pictures", {}) if status == "ok" else {}
        if found.get("status") == "ok":
            try:
                self._record["pictures"] = ast.literal_eval(found["data"]["text/plain"])
            except (KeyError, ValueError, SyntaxError, MemoryError):
                pass

    def _preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        grade_cell = is_grade(cell) and not is_solution(cell)
        limit = self._notebook_limit
        if not self._stopped and limit is not None and limit.reached():
            if limit.starved:
                self._fault(f"the notebook could not finish: {limit.starved_words()}")
                self._stop("the grader stopped the notebook (the machine was too busy)")
            elif limit.by == "wall":
                self._stop(f"the grader stopped the notebook: {limit.waited_words()}")
            else:
                self._stop(f"the notebook ran past its time limit of {self.notebook_timeout} s "
                           f"of CPU time")
        elif not self._stopped and limit is None and time.monotonic() > self._deadline:
            self._stop(f"the notebook ran past its time limit of {self.notebook_timeout} s")
        if self._stopped:
            cell.outputs = []
            if grade_cell:
                self._fail(cell, "NotGraded", f"Not run: {self._stopped}.")
            return cell, resources
        if grade_cell:
            with self._timed("tests"):
                self._run_test_cell(cell, index)
            return cell, resources
        if is_solution(cell):
            self._answers_seen = True
        nbgrader = cell.metadata.get("nbgrader", {})
        if nbgrader.get("locked") and nbgrader.get("grade_id") in self._skipped_now:
            # The instructor's own demonstration or visible check (OverwriteCells
            # has put the source's code back): it grades nothing, no later
            # provided cell reads what it defines (tests/test_release.py), and
            # none of the student's cells does (preprocess).
            self._record["cells_skipped"] += 1
            what = ("this cell is the exercise's visible check: it grades nothing, the "
                    "hidden tests below grade the exercise. Run it in your notebook to see "
                    "what it says." if checked_exercise(nbgrader["grade_id"]) else
                    "this cell only demonstrates (it grades nothing). Run it in your "
                    "notebook to see its output.")
            cell.outputs = [NotebookNode(output_type="stream", name="stdout",
                                         text=f"Not run by the grader: {what}\n")]
            return cell, resources
        timeout = self.timeout
        if not self._answers_seen and cell.metadata.get("nbgrader", {}).get("locked"):
            # The provided set-up cells (imports of TensorFlow and friends) are
            # the instructor's code: a loaded machine must not time them out.
            self.timeout = max(self.timeout or 0, self.setup_timeout)
        try:
            self._record["cells_run"] += 1
            self._exit_asked = False
            with self._timed("student_cells"):
                result = super().preprocess_cell(cell, resources, index)
            self._note_dropped_output(cell)
            if self._exit_asked:
                # exit() stops the kernel a moment after its reply: how many
                # more cells would run before it dies depends on the machine's
                # load. Stop here so that the verdict does not.
                self._stop(f"the notebook's kernel died in cell {index} (the code called exit())")
            return result
        except CellTimeoutError as error:
            # The kernel did not answer after the interrupt that follows a
            # time-out: treat it as dead if it is, else go on with the next cell.
            # (Or its output never ended: its status was lost with a message
            # too large to read, which the note says instead.)
            if not (self._note_dropped_output(cell)[1] and "IOPub" in str(error)):
                cell.outputs.append(_error_output("CellTimeoutError",
                                                  str(error).splitlines()[0]))
            if not run_sync(self.km.is_alive)():
                self._stop(f"the notebook's kernel stopped answering in cell {index}")
            return cell, resources
        except DeadKernelError as error:
            how = self._kernel_died(f"cell {index}")
            reason = f"the notebook's kernel {how}"
            if how == "died" and "memory" in str(error).lower():
                reason += " (out of memory?)"
            self._note_dropped_output(cell, resets=False)
            cell.outputs.append(_error_output("DeadKernelError", f"{reason}: {error}"))
            self._stop(f"{reason} in cell {index}")
            return cell, resources
        finally:
            self.timeout = timeout

    def _note_dropped_output(self, cell, resets: bool = True) -> tuple[int, int]:
        """End the cell's output: a last line on it saying what the grader
        dropped (StudentOutputChannel), if anything; (bytes, resets)."""
        channel = getattr(self.kc, "_iopub_channel", None)
        if not isinstance(channel, StudentOutputChannel):
            return 0, 0
        dropped, reset = channel.end_cell()
        reset = reset if resets else 0
        if not dropped and not reset:
            return dropped, reset
        said = []
        if dropped:
            said.append(f"{in_mb(dropped)} more dropped")
        if reset:
            said.append(f"{'a message' if reset == 1 else f'{reset} messages'} over "
                        f"{in_mb(limits.MAX_OUTPUT_MESSAGE_BYTES)} dropped")
        cap = (f"{in_mb(limits.MAX_NOTEBOOK_OUTPUT_BYTES)} a notebook"
               if channel.cell_full == "notebook"
               else f"{in_mb(limits.MAX_CELL_OUTPUT_BYTES)} a cell")
        cell.outputs.append(NotebookNode(
            output_type="stream", name="stderr",
            text=f"[output truncated by the grader (it keeps {cap}): "
                 f"{'; '.join(said)}; print less]\n"))
        record = self._record["output_dropped"]
        record["bytes"] += dropped
        record["cells"] += 1
        if reset:
            record["resets"] = record.get("resets", 0) + reset
        return dropped, reset

    def _note_exit_request(self, cell=None, cell_index=None, execute_reply=None, **_) -> None:
        content = (execute_reply or {}).get("content", {})
        for payload in content.get("payload") or []:
            if payload.get("source") == "ask_exit" and not payload.get("keepkernel"):
                self._exit_asked = True

    def _stop(self, reason: str) -> None:
        self._stopped = reason
        self._record["stopped"] = reason

    def _fail(self, cell, ename: str, evalue: str, traceback=None) -> None:
        # What the student's page shows: no run of numbers that could be the
        # hidden inputs returned by the student's code and quoted by a test.
        evalue = hide_data(evalue, 2000)
        cell.outputs = [_error_output(ename, evalue, traceback)]
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        self._record["tests"][grade_id] = {"passed": False, "ename": ename, "evalue": evalue}

    # -- the test kernel -----------------------------------------------------
    def _start_tests_kernel(self) -> None:
        student_km = self.km
        pgid = getattr(getattr(student_km, "provisioner", None), "pgid", None)
        clock = self._student_clock()
        session = TESTS_SESSION_START % (student_km.connection_file,
                                         str(Path(student_km.ipc_dir) / "exchange"),
                                         pgid, self.lab_id,
                                         getattr(student_km, "exchange_identity", None),
                                         None if clock is None else clock.spec(), self.plain)
        session += TESTS_SESSION_SEED % (self.session_seed or self.seed)
        with self._timed("tests_kernel_start"):
            kernel, new = TestsKernel.get((self.lab_id, self.seed))
            self._tests_km, self._tests_kc = kernel.km, kernel.kc
            (Path(kernel.folder) / STUDENT_CELLS_FILE).write_text(
                json.dumps(self._student_cells), encoding="utf-8")
            for code in ([TESTS_KERNEL_STARTUP] if new else []) + [session]:
                status, error = self._tests_execute(code, limits.TESTS_KERNEL_START_TIMEOUT_S)
                if status != "ok":
                    TestsKernel.discard()
                    self._tests_km = self._tests_kc = None
                    self._fault(f"the grader's test kernel failed to start: {error}")
                    raise RuntimeError(f"the grader's test kernel failed to start: {error}")

    def _shutdown_tests_kernel(self) -> None:
        """Hand the test kernel back for the next submission (or stop it if it
        did not come back clean)."""
        if self._tests_kc is not None:
            status = "dirty"
            if not self._tests_dirty:
                status, _ = self._tests_execute(TESTS_SESSION_END,
                                                limits.TESTS_SESSION_END_TIMEOUT_S)
            if status != "ok":
                TestsKernel.discard()
        self._tests_km = self._tests_kc = None

    def _tests_execute_limited(self, code: str, timeout: float, expressions: dict):
        """_tests_execute for a tests cell: its limit counts the CPU the
        student's kernel (the hidden tests' calls) and the test kernel use,
        with the wall clock as the backstop; a backstop reached with little
        CPU used is the grader's or the machine's fault."""
        clock = self._student_clock()
        tests_pid = getattr(getattr(self._tests_km, "provisioner", None), "pid", None)
        if clock is not None and tests_pid:
            # The test kernel's own work counts too (the references it
            # computes): a loaded machine slows both.
            clock.also = (tests_pid,)
        limit = cputime.Limit(clock, timeout)
        return self._tests_execute(code, timeout, expressions, limit)

    def _tests_execute(self, code: str, timeout: float, expressions: dict | None = None,
                       limit: cputime.Limit | None = None):
        """Run ``code`` in the test kernel: ("ok", None) or ("error", content);
        with ``expressions`` (user expressions, evaluated after the code),
        ("ok", their results) when it ran. Without ``limit``, ``timeout`` is
        on the wall clock (the grader's own work: past it, the grader's fault)."""
        kc = self._tests_kc
        # stop_on_error=False: with the default, ipykernel aborts the requests
        # queued right after a failed one, and the `bind` that opens the next
        # tests cell was sometimes dropped ("Error", 0 points for a right
        # property: 8 in 300 after a failed cell with Keras loaded, 0 in 300
        # with this).
        msg_id = kc.execute(code, store_history=False, allow_stdin=False,
                            stop_on_error=False, user_expressions=expressions or {})
        limit = limit or cputime.Limit(None, timeout)
        while True:
            if limit.reached():
                self._tests_km.interrupt_kernel()
                self._tests_dirty = True   # not handed on to the next submission
                # The student's calls have limits of their own (probe); a tests
                # cell past its wall-clock backstop without the student's CPU
                # spent is the grader's (its test kernel) or the machine's.
                if limit.clock is None or limit.by == "wall":
                    self._fault(f"the hidden tests could not finish in {timeout:.0f} s"
                                + (f": {limit.starved_words()}" if limit.by == "wall" else ""))
                return "timeout", {"ename": "CellTimeoutError",
                                   "evalue": f"the tests took longer than {timeout:.0f} s"
                                   + (" of CPU time" if limit.clock is not None else ""),
                                   "traceback": []}
            self._drop_student_output()
            try:
                reply = kc.get_shell_msg(timeout=STUDENT_OUTPUT_DROP_S)
            except Exception:  # noqa: BLE001 - queue.Empty
                if not self._tests_km.is_alive():
                    self._tests_dirty = True
                    self._fault("the grader's test kernel died")
                    return "error", {"ename": "GraderError",
                                     "evalue": "the grader's test kernel died", "traceback": []}
                continue
            if reply["parent_header"].get("msg_id") != msg_id:
                continue
            self._drain_iopub()
            content = reply["content"]
            if content["status"] == "ok":
                return "ok", content.get("user_expressions") if expressions else None
            return "error", content

    def _drop_student_output(self) -> None:
        """Drop what the student's kernel has published while the tests run.

        Nothing reads it (the test cells' outputs are the grader's record),
        yet this process's subscription to the student's iopub queues every
        message until the next student cell: a thread printing during the
        tests held its whole flood here. Read through a plain (blocking
        API) socket on nbclient's asyncio one, without waiting, every
        STUDENT_OUTPUT_DROP_S while a test runs (ZeroMQ holds at most
        limits.OUTPUT_MESSAGES_QUEUED messages in between).
        """
        channel = getattr(self.kc, "_iopub_channel", None)
        if channel is None or channel.socket is None:
            return
        if isinstance(channel, StudentOutputChannel):
            channel.drop_pending()
            return
        socket: zmq.Socket = zmq.Socket.shadow(channel.socket.underlying)
        while True:
            try:
                socket.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return

    def _drain_iopub(self) -> None:
        """Drop what the test kernel has published so far (nothing reads it;
        what comes later goes with the next drain). Without waiting: a
        0.01 s wait per request cost a lab5 submission 0.2 s."""
        while True:
            try:
                self._tests_kc.get_iopub_msg(timeout=0)
            except Exception:  # noqa: BLE001 - queue.Empty
                return

    def _run_test_cell(self, cell, index: int) -> None:
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        if self._tests_kc is None:
            self._start_tests_kernel()
        started = time.monotonic()
        names = sorted(set(self.exercise_names) & names_used(cell.source)
                       - set(dir(builtins)))
        status, content = self._tests_execute(
            f"__autograder_kernel__.bind(globals(), {names!r})", limits.TESTS_BIND_TIMEOUT_S)
        if status == "ok":
            status, content = self._tests_execute_limited(
                cell.source, self.timeout or limits.TESTS_CELL_TIMEOUT_UNSET_S,
                {"profile": TESTS_CELL_NEXT if index in self._tests_then_tests
                 else TESTS_CELL_END})
        if status == "ok":
            cell.outputs = []
            self._record["tests"][grade_id] = {"passed": True}
            profile = _read_profile(content)
        else:
            self._fail(cell, content.get("ename", "Error"), content.get("evalue", ""),
                       content.get("traceback"))
            self._picture_exercises.append(grade_id.removeprefix("test_").split("__")[0])
            _, ended = self._tests_execute("", limits.TESTS_SESSION_END_TIMEOUT_S,
                                           {"profile": TESTS_CELL_END})
            profile = _read_profile(ended)
        self._record["tests"][grade_id]["seconds"] = round(time.monotonic() - started, 3)
        for fault in profile.pop("faults", None) or []:
            self._fault(str(fault))
        death = profile.pop("death", None)
        self._record["tests"][grade_id]["probe"] = profile
        if isinstance(death, dict):
            how = self._kernel_died(f"the hidden tests of {grade_id}", str(death.get("how") or ""))
            self._stop(f"the notebook's kernel {how} while the hidden tests of {grade_id} ran")
