"""The grader's test kernel: the clean kernel the hidden tests run in.

It never runs student code: there each exercise name is a proxy into the
student's kernel (autograder.kernels.probe), and each graded tests cell runs
as one request. `TestsKernel` is the kernel itself, kept from one submission
to the next; `TestsSession` is one submission's turn in it, and all that
nbgrader's Execute step (autograder.grader.execute.IsolatedExecute) asks of
it:

* `TestsSession.start`: the kept kernel (or a new one), its namespace reset
  and bound to this submission's student kernel;
* `TestsSession.run_tests_cell`: a graded tests cell, and what the student's
  kernel spent on it (the profile);
* `TestsSession.pictures`: the pictures of the exercises that lost points;
* `TestsSession.end`: the kernel handed back for the next submission (or
  stopped if it did not come back clean).

The session reports through callbacks: a failure of the grader or the
machine (``on_fault``), and its waits for the test kernel (``on_wait``: the
grader drops what the student's kernel printed meanwhile). Nothing here
knows about nbgrader.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable

from jupyter_client import KernelManager

from autograder import cputime, limits
# The test kernel's memory cap, named here too (tests/kernels/test_execute.py, docs/security.md);
# why 3 GiB: autograder.limits.
from autograder.limits import TESTS_KERNEL_MEMORY_BYTES

#: Run once in a new test kernel. A failed hidden test's traceback is kept in
#: the autograded notebook for the instructor (the student reads only its
#: message): as Python prints it (IPython's "Plain" mode), not with IPython's
#: default context, whose source highlighting of every frame cost a failed
#: tests cell more than the test itself (docs/performance.md, "Why the code
#: is shaped this way").
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
#: walked every object of the libraries again for every submission
#: (docs/performance.md). That collection
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
#: (a stop and a start cost two round trips to it a cell: docs/performance.md).
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
#: printed meanwhile (TestsSession's ``on_wait``: IsolatedExecute's
#: _drop_student_output, autograder.kernels.jupyter.drop_pending_output).
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
    once per submission saves a Python start and its imports a submission
    (docs/performance.md). Its namespace is reset between submissions; a kernel that
    timed out or died is replaced.
    """

    __test__ = False    # a kernel, not a pytest test class

    _kept: "TestsKernel | None" = None

    def __init__(self, settings: tuple):
        from autograder import tempdirs

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


class TestsSession:
    """One submission's turn in the test kernel (TestsKernel): made by
    `start`, ended by `end`.

    ``student_clock`` gives the CPU clock of the submission's student kernel
    (None where it has none); ``on_wait`` is called every
    STUDENT_OUTPUT_DROP_S while a request waits for the test kernel;
    ``on_fault`` is told of a failure of the grader or the machine, not of
    the notebook.
    """

    __test__ = False    # a kernel's session, not a pytest test class

    def __init__(self, kernel: TestsKernel, student_clock: Callable[[], cputime.Clock | None],
                 on_wait: Callable[[], None], on_fault: Callable[[str], None]):
        self.kernel = kernel
        self.student_clock = student_clock
        self.on_wait = on_wait
        self.on_fault = on_fault
        #: A request timed out or the kernel died: not handed on to the next
        #: submission.
        self.dirty = False

    @classmethod
    def start(cls, *, lab_id: str, seed: str, session_seed: str, plain: bool, student_km,
              student_cells: list[str], student_clock: Callable[[], cputime.Clock | None],
              on_wait: Callable[[], None], on_fault: Callable[[str], None]) -> "TestsSession":
        """The test kernel of the run (``lab_id``, ``seed``), kept or new,
        ready for the submission whose student kernel ``student_km`` runs
        and whose cells (those that run there) are ``student_cells``; its
        hidden inputs drawn from ``session_seed`` (empty: ``seed``). Raises
        RuntimeError when the kernel fails to start."""
        pgid = getattr(getattr(student_km, "provisioner", None), "pgid", None)
        clock = student_clock()
        session = TESTS_SESSION_START % (student_km.connection_file,
                                         str(Path(student_km.ipc_dir) / "exchange"),
                                         pgid, lab_id,
                                         getattr(student_km, "exchange_identity", None),
                                         None if clock is None else clock.spec(), plain)
        session += TESTS_SESSION_SEED % (session_seed or seed)
        kernel, new = TestsKernel.get((lab_id, seed))
        tests = cls(kernel, student_clock, on_wait, on_fault)
        (Path(kernel.folder) / STUDENT_CELLS_FILE).write_text(
            json.dumps(student_cells), encoding="utf-8")
        for code in ([TESTS_KERNEL_STARTUP] if new else []) + [session]:
            status, error = tests.execute(code, limits.TESTS_KERNEL_START_TIMEOUT_S)
            if status != "ok":
                TestsKernel.discard()
                on_fault(f"the grader's test kernel failed to start: {error}")
                raise RuntimeError(f"the grader's test kernel failed to start: {error}")
        return tests

    def end(self) -> None:
        """Hand the test kernel back for the next submission (or stop it if it
        did not come back clean)."""
        status = "dirty"
        if not self.dirty:
            status, _ = self.execute(TESTS_SESSION_END, limits.TESTS_SESSION_END_TIMEOUT_S)
        if status != "ok":
            TestsKernel.discard()

    def execute_limited(self, code: str, timeout: float, expressions: dict):
        """execute for a tests cell: its limit counts the CPU the
        student's kernel (the hidden tests' calls) and the test kernel use,
        with the wall clock as the backstop; a backstop reached with little
        CPU used is the grader's or the machine's fault."""
        clock = self.student_clock()
        tests_pid = getattr(getattr(self.kernel.km, "provisioner", None), "pid", None)
        if clock is not None and tests_pid:
            # The test kernel's own work counts too (the references it
            # computes): a loaded machine slows both.
            clock.also = (tests_pid,)
        limit = cputime.Limit(clock, timeout)
        return self.execute(code, timeout, expressions, limit)

    def execute(self, code: str, timeout: float, expressions: dict | None = None,
                limit: cputime.Limit | None = None):
        """Run ``code`` in the test kernel: ("ok", None) or ("error", content);
        with ``expressions`` (user expressions, evaluated after the code),
        ("ok", their results) when it ran. Without ``limit``, ``timeout`` is
        on the wall clock (the grader's own work: past it, the grader's fault)."""
        kc = self.kernel.kc
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
                self.kernel.km.interrupt_kernel()
                self.dirty = True   # not handed on to the next submission
                # The student's calls have limits of their own (probe); a tests
                # cell past its wall-clock backstop without the student's CPU
                # spent is the grader's (its test kernel) or the machine's.
                if limit.clock is None or limit.by == "wall":
                    self.on_fault(f"the hidden tests could not finish in {timeout:.0f} s"
                                  + (f": {limit.starved_words()}" if limit.by == "wall" else ""))
                return "timeout", {"ename": "CellTimeoutError",
                                   "evalue": f"the tests took longer than {timeout:.0f} s"
                                   + (" of CPU time" if limit.clock is not None else ""),
                                   "traceback": []}
            self.on_wait()   # (the grader drops what the student's kernel printed)
            try:
                reply = kc.get_shell_msg(timeout=STUDENT_OUTPUT_DROP_S)
            except Exception:  # noqa: BLE001 - queue.Empty
                if not self.kernel.km.is_alive():
                    self.dirty = True
                    self.on_fault("the grader's test kernel died")
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

    def _drain_iopub(self) -> None:
        """Drop what the test kernel has published so far (nothing reads it;
        what comes later goes with the next drain). Without waiting: even a
        short wait per request added up over a submission (docs/performance.md)."""
        while True:
            try:
                self.kernel.kc.get_iopub_msg(timeout=0)
            except Exception:  # noqa: BLE001 - queue.Empty
                return

    def run_tests_cell(self, source: str, names: list[str], timeout: float,
                       then_tests: bool) -> tuple[str, dict, dict]:
        """Run a graded tests cell, ``names`` bound to the student's objects
        first (a proxy each), its limit ``timeout`` (in CPU seconds where
        the student's kernel has a clock). ``then_tests``: the next cell to
        run is another tests cell (TESTS_CELL_NEXT). Returns ("ok", the
        user expressions' results, the profile) or (the status, the error's
        content, the profile)."""
        status, content = self.execute(
            f"__autograder_kernel__.bind(globals(), {names!r})", limits.TESTS_BIND_TIMEOUT_S)
        if status == "ok":
            status, content = self.execute_limited(
                source, timeout, {"profile": TESTS_CELL_NEXT if then_tests else TESTS_CELL_END})
        if status == "ok":
            return status, content, _read_profile(content)
        _, ended = self.execute("", limits.TESTS_SESSION_END_TIMEOUT_S,
                                {"profile": TESTS_CELL_END})
        return status, content, _read_profile(ended)

    def pictures(self, lab_id: str, exercises: list[str]):
        """The pictures of ``exercises`` (autograder.testkernel.pictures.make),
        made of the student's values on the visible examples; None when they
        failed or timed out. On the wall clock: a picture is a call or two on
        a small example, and a notebook that sleeps in it must not hold its
        grading for long."""
        status, content = self.execute(
            "from autograder.testkernel.pictures import make as __autograder_pictures",
            limits.PICTURES_TIMEOUT_S,
            {"pictures": f"__autograder_pictures(__autograder_kernel__, {lab_id!r}, "
                         f"{exercises!r})", "profile": TESTS_CELL_END})
        found = (content or {}).get("pictures", {}) if status == "ok" else {}
        if found.get("status") == "ok":
            try:
                return ast.literal_eval(found["data"]["text/plain"])
            except (KeyError, ValueError, SyntaxError, MemoryError):
                pass
        return None
