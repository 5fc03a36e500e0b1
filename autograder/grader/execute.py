"""nbgrader's Execute step, split over two kernels.

`IsolatedExecute` replaces nbgrader's `Execute` preprocessor in autograde:

* every cell the student can change or see run (solution, provided and
  visible-check cells) runs in the student's kernel, started inside the
  sandbox (autograder.kernels.isolation);
* every graded test cell runs in a separate *test kernel*
  (autograder.kernels.testskernel): a clean Python process that never runs
  student code, where each exercise name is a proxy into the student's
  kernel (autograder.kernels.probe). Its outputs are replaced by the
  grader's own record: an error when the test failed, nothing when it
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
import builtins
import json
import time
from contextlib import contextmanager
from pathlib import Path
from queue import Empty

from jupyter_core.utils import ensure_async, run_sync
from nbclient.client import timestamp
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from traitlets import Bool, Integer, List, Unicode

from nbgrader.preprocessors import Execute
from nbgrader.utils import is_grade, is_solution

from autograder import cputime, limits
from autograder.grader.cellnames import cells_needed
from autograder.labs import checked_exercise
from autograder.kernels.probe import hide_data
from autograder.kernels.jupyter import (BoundedKernelClient, SandboxKernelManager,
                                       drop_pending_output, student_output_channel)
from autograder.kernels.testskernel import TestsSession
from autograder.text import megabytes


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

    #: This submission's turn in the test kernel, from its first tests cell on.
    _tests: TestsSession | None = None

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = SandboxKernelManager
        super().__init__(*args, **kwargs)
        self._tests = None
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
        if (folder is None or not (folder / "pictures.py").is_file() or self._tests is None
                or self._tests.dirty):
            return
        faults = len(self._record["grader_faults"])
        pictures = self._tests.pictures(self.lab_id, wanted)
        del self._record["grader_faults"][faults:]
        if pictures is not None:
            self._record["pictures"] = pictures

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
            # provided cell reads what it defines (tests/grader/test_release.py), and
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
        channel = student_output_channel(self.kc)
        if channel is None:
            return 0, 0
        dropped, reset = channel.end_cell()
        reset = reset if resets else 0
        if not dropped and not reset:
            return dropped, reset
        said = []
        if dropped:
            said.append(f"{megabytes(dropped)} more dropped")
        if reset:
            said.append(f"{'a message' if reset == 1 else f'{reset} messages'} over "
                        f"{megabytes(limits.MAX_OUTPUT_MESSAGE_BYTES)} dropped")
        cap = (f"{megabytes(limits.MAX_NOTEBOOK_OUTPUT_BYTES)} a notebook"
               if channel.cell_full == "notebook"
               else f"{megabytes(limits.MAX_CELL_OUTPUT_BYTES)} a cell")
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

    # -- the test kernel (autograder.kernels.testskernel) ---------------------
    def _start_tests_kernel(self) -> TestsSession:
        with self._timed("tests_kernel_start"):
            self._tests = TestsSession.start(
                lab_id=self.lab_id, seed=self.seed, session_seed=self.session_seed,
                plain=self.plain, student_km=self.km, student_cells=self._student_cells,
                student_clock=self._student_clock, on_wait=self._drop_student_output,
                on_fault=self._fault)
        return self._tests

    def _shutdown_tests_kernel(self) -> None:
        """Hand the test kernel back for the next submission (or stop it if it
        did not come back clean)."""
        if self._tests is not None:
            self._tests.end()
        self._tests = None

    def _drop_student_output(self) -> None:
        """Drop what the student's kernel has published while the tests run
        (autograder.kernels.jupyter.drop_pending_output)."""
        drop_pending_output(self.kc)

    def _run_test_cell(self, cell, index: int) -> None:
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        tests = self._tests or self._start_tests_kernel()
        started = time.monotonic()
        names = sorted(set(self.exercise_names) & names_used(cell.source)
                       - set(dir(builtins)))
        status, content, profile = tests.run_tests_cell(
            cell.source, names, self.timeout or limits.TESTS_CELL_TIMEOUT_UNSET_S,
            then_tests=index in self._tests_then_tests)
        if status == "ok":
            cell.outputs = []
            self._record["tests"][grade_id] = {"passed": True}
        else:
            self._fail(cell, content.get("ename", "Error"), content.get("evalue", ""),
                       content.get("traceback"))
            self._picture_exercises.append(grade_id.removeprefix("test_").split("__")[0])
        self._record["tests"][grade_id]["seconds"] = round(time.monotonic() - started, 3)
        for fault in profile.pop("faults", None) or []:
            self._fault(str(fault))
        death = profile.pop("death", None)
        self._record["tests"][grade_id]["probe"] = profile
        if isinstance(death, dict):
            how = self._kernel_died(f"the hidden tests of {grade_id}", str(death.get("how") or ""))
            self._stop(f"the notebook's kernel {how} while the hidden tests of {grade_id} ran")
