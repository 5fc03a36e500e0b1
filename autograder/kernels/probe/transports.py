"""How a request reaches the student's kernel, and how its answer is awaited.

Two transports behind one interface (Transport: call, end_cell, close),
chosen once, when StudentKernel starts (``plain``, `grade --plain`):

* ExecuteTransport (plain): every call an execute request of the student's
  kernel, whose user expression runs the glue's handle() (GLUE_CALL).
* PipeTransport (the default): the calls of a tests cell named, one a line,
  on a pipe the student's kernel serves (GLUE_SERVE, glue.serve) from the
  cell's first call to its end (end_cell); where serving is not possible,
  or broke, one execute request a call, as ExecuteTransport.

Either way the request and its answer are files of the exchange folder,
which the client writes and reads; a transport gets the request served and
waits until its answer is written, within the call's limits (the CPU time
its processes use, autograder.cputime; the kernel's death), answering the
callbacks of the student's code to hosted objects meanwhile.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import select
import stat
import time
from pathlib import Path
from typing import Any, Callable

from jupyter_client import BlockingKernelClient

from autograder.cputime import Clock, Limit, ProcessWatch
from autograder.kernels.probe.errors import GraderFault, StudentCodeError
from autograder.kernels.probe.exchange import ExchangeFolder

GLUE_SOURCE = (Path(__file__).parent.parent.parent / "studentkernel" / "glue.py").read_text(
    encoding="utf-8")
#: Where the student's kernel keeps the compiled glue between requests (in
#: its builtins). Compiling it for every request was most of a call's
#: overhead (docs/performance.md, "Why the code is shaped this way"); keeping it there trusts nothing new, since the glue
#: runs in the student's process anyway and only ever returns data.
GLUE_KEY = "__autograder_glue_%s__" % hashlib.sha256(GLUE_SOURCE.encode()).hexdigest()[:12]
#: The user expression of one request: the kept glue's handle(), or the glue
#: compiled (and kept) first.
#: Both user expressions below start with it: the glue's handle() kept in
#: the student's kernel's builtins, or compiled and kept there first.
_GLUE_HANDLE = (
    "(getattr(b, k) if callable(getattr(b, k, None)) else "
    "(lambda ns: (exec(compile(src, '<autograder>', 'exec'), ns), "
    "setattr(b, k, ns['handle']), ns['handle'])[2])({}))"
)
GLUE_CALL = (
    "(lambda b, k, src, request: " + _GLUE_HANDLE + "(request, globals()))"
    "(__import__('builtins'), %r, %r, %r)"
)

#: The user expression that starts serving (glue.serve): the requests of a
#: tests cell are then named, one a line, on a pipe the student's kernel
#: reads, and their answers announced on another, instead of one execute
#: request each (ipykernel's round trip was most of a call: docs/performance.md).
GLUE_SERVE = (
    "(lambda b, k, src, pipes: " + _GLUE_HANDLE + ".serve(*pipes, globals()))"
    "(__import__('builtins'), %r, %r, %r)"
)
#: Seconds for the student's kernel to open the request pipe, and to end
#: serving when asked; past them the tests go on one execute request a call.
SERVE_START_TIMEOUT_S = 10
SERVE_END_TIMEOUT_S = 5
#: Seconds to wait for the student's kernel's process to end once its
#: answers pipe closed without an answer (it died, or closed the pipe).
DEATH_WAIT_S = 2.0


class Transport:
    """How StudentKernel's requests reach the student's kernel: the one
    interface of both transports (call, end_cell, close), and what they
    share, waiting within a call's limits."""

    def __init__(self, client: BlockingKernelClient, folder: ExchangeFolder, nonce: str,
                 timeout: float, clock: tuple | None, hosted: dict[int, Any],
                 serve_callbacks: Callable[[str], bool]):
        self.client = client
        self.timeout = timeout
        self._folder = folder
        self._nonce = nonce
        # The student's kernel is dead when its process has ended, never
        # because a heartbeat was late (autograder.cputime); its calls are
        # limited by the CPU time its processes use. ``clock`` is the
        # grader's Clock.spec(): the kernel's top process (bubblewrap, or the
        # kernel), its user and its cgroup's CPU count.
        self._clock = Clock(*clock) if clock else None
        self._watch = ProcessWatch(clock[0]) if clock and clock[0] else None
        #: How the kernel ended, if it did while a call ran (for the grader).
        self.death: dict | None = None
        #: Failures of the machine, not of the student's code (for the grader).
        self.faults: list[str] = []
        # The grader objects hosted in the test kernel (StudentKernel.host,
        # by id): while there is one, the student's code may call back during
        # a call, and waiting answers its callbacks (serve_callbacks).
        self._hosted = hosted
        self._serve_callbacks = serve_callbacks

    def call(self, name: str, request_path: str, label: str) -> tuple[dict, bool]:
        """Have request ``name`` (written at ``request_path``) served by the
        student's kernel and wait until its answer is written: the execute
        request's reply ({} for one served on the pipe), and whether the pipe
        served it.

        Raises StudentCodeError (time out, kernel died) or GraderFault (the
        machine starved the kernel).
        """
        raise NotImplementedError

    def end_cell(self) -> None:
        """The end of a tests cell: the student's kernel may run its next cell."""

    def close(self) -> None:
        """Stop watching the student's kernel (after end_cell, and once the
        client's channels stopped)."""
        if self._watch is not None:
            self._watch.close()

    def _timed_out(self, label: str, limit: Limit) -> Exception:
        """What a call that ran past its time says (raised by the caller):
        the student's, or the machine's where it starved the kernel."""
        if limit.starved:
            fault = f"`{label}` could not finish: {limit.starved_words()}"
            self.faults.append(fault)
            return GraderFault(fault)
        if limit.by == "wall":
            return StudentCodeError(f"`{label}` did not return: {limit.waited_words()}.")
        return StudentCodeError(
            f"`{label}` did not return within {self.timeout:.0f} s of CPU time (an "
            f"infinite loop, or far too much work for these small inputs?).")

    def _ended(self, wait: float = 0.0) -> bool:
        """Whether the student's kernel's process has ended (waiting up to
        ``wait`` s); without a process to watch, never."""
        if self._watch is None:
            if wait:
                time.sleep(wait)
            return False
        return self._watch.ended(wait)

    def _died(self, label: str) -> StudentCodeError:
        """What a call during which the kernel's process ended says (raised
        by the caller); the grader learns it from ``death``."""
        how = self._watch.describe() if self._watch is not None else ""
        self.death = {"label": label, "how": how,
                      "status": self._watch.status if self._watch is not None else None}
        return StudentCodeError(
            f"Your notebook's kernel died{f' ({how})' if how else ''} while `{label}` ran.")

    def _interrupt(self) -> None:
        """Interrupt the student's kernel by a control message.

        (A signal to its process group would also reach the sandbox's
        bubblewrap process, which exits on SIGINT and takes the kernel along.)
        """
        message = self.client.session.msg("interrupt_request", content={})
        self.client.control_channel.send(message)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:   # let the interrupted call finish
            try:
                reply = self.client.get_shell_msg(timeout=0.5)
            except Exception:  # noqa: BLE001 - queue.Empty
                break
            self._drained(reply)

    def _drained(self, reply: dict) -> None:
        """A shell reply read while an interrupted call finished."""


class ExecuteTransport(Transport):
    """Every call an execute request (`grade --plain`; and PipeTransport's
    calls where serving is not possible)."""

    def call(self, name: str, request_path: str, label: str) -> tuple[dict, bool]:
        return self._execute(GLUE_CALL % (GLUE_KEY, GLUE_SOURCE, request_path), label), False

    def _execute(self, code: str, label: str) -> dict:
        # Sent as a user expression, not as code: IPython evaluates user
        # expressions with a plain eval, past the input and AST transformers,
        # custom exception handlers and execution hooks a notebook may set up.
        # stop_on_error=False: never aborted because the request before it failed.
        msg_id = self.client.execute("", silent=True, store_history=False,
                                     user_expressions={"call": code}, allow_stdin=False,
                                     stop_on_error=False)
        limit = Limit(self._clock, self.timeout)
        # With grader objects hosted here, the student's code may call back
        # while the request runs: look for callbacks every millisecond (a
        # directory listing: cheap, and only while such a request runs).
        while True:
            if limit.reached():
                self._interrupt()
                raise self._timed_out(label, limit)
            try:
                wait = min(max(limit.wall_left(), 0.25), 0.001 if self._hosted else 1.0)
                reply = self.client.get_shell_msg(timeout=wait)
            except Exception:  # noqa: BLE001 - queue.Empty
                if self._ended():
                    raise self._died(label) from None
                if self._hosted:
                    self._serve_callbacks(label)
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return reply


class PipeTransport(ExecuteTransport):
    """A tests cell's calls on a pipe the student's kernel serves (the
    default); an execute request a call where serving is not possible."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Serving (glue.serve): the pipes' descriptors while the student's
        # kernel serves this tests cell, the execute request that runs it,
        # what the answers pipe has said that was not read yet; and whether
        # serving failed once (then every call is an execute request).
        self._serve_in: int | None = None
        self._serve_out: int | None = None
        self._serve_msg: str | None = None
        self._serve_names: tuple[str, str] | None = None
        self._serve_said = b""
        self._serve_count = itertools.count()
        self._serve_broken = False

    def call(self, name: str, request_path: str, label: str) -> tuple[dict, bool]:
        reply = self._via_pipe(name, request_path, label)
        if reply is None:
            return super().call(name, request_path, label)
        return reply, True

    def end_cell(self) -> None:
        if self._serve_in is not None or self._serve_msg is not None:
            self._serve_stop()

    def _drained(self, reply: dict) -> None:
        if reply.get("parent_header", {}).get("msg_id") == self._serve_msg:
            self._serve_msg = None   # the interrupt ended serving

    def _via_pipe(self, name: str, request_path: str, label: str) -> dict | None:
        """Have request ``name`` served on the pipe (starting serving if
        needed) and wait for its answer: {} once it is written; None when
        serving is not possible (the caller sends an execute request).

        Raises StudentCodeError as _execute does (time out, kernel died).
        The pipes are in the exchange folder, reached through its descriptor
        and checked to be pipes; what the student's kernel writes on the
        answers pipe only wakes this kernel, which then reads the answer
        file of the request it is waiting for, as after an execute request.
        """
        if self._serve_in is None and not self._serve_start():
            return None
        assert self._serve_in is not None and self._serve_out is not None
        try:
            os.write(self._serve_in, request_path.encode("utf-8") + b"\n")
        except OSError:   # the student's kernel stopped serving (or fills the pipe)
            self._serve_stop(broken=True)
            return None
        limit = Limit(self._clock, self.timeout)
        poller = select.poll()
        poller.register(self._serve_out, select.POLLIN)
        while True:
            if self._serve_heard(name):
                return {}
            if limit.reached():
                self._interrupt()
                self._serve_stop(broken=True)
                raise self._timed_out(label, limit)
            wait = min(max(limit.wall_left(), 0.25), 0.001 if self._hosted else 1.0)
            events = poller.poll(wait * 1000)
            if events:
                try:
                    said = os.read(self._serve_out, 65536)
                except BlockingIOError:
                    said = None
                if said == b"":   # the student's kernel closed it: serving ended
                    self._serve_stop(broken=True)
                    # A kernel that died: say so (its process ends within
                    # moments of its pipe closing).
                    if not self._answered(name) and self._ended(DEATH_WAIT_S):
                        raise self._died(label)
                    return {}   # no answer: _answer says so
                if said:
                    self._serve_said = (self._serve_said + said)[-65536:]
                continue
            if self._ended():
                self._serve_stop(broken=True)
                raise self._died(label)
            if self._hosted:
                self._serve_callbacks(label)

    def _answered(self, name: str) -> bool:
        """Whether request ``name``'s answer file is there (read later, checked)."""
        try:
            os.stat(name + ".answer.json", dir_fd=self._folder.fd, follow_symlinks=False)
        except (OSError, TypeError):
            return False
        return True

    def _serve_heard(self, name: str) -> bool:
        """Whether the answers pipe announced request ``name``."""
        lines = self._serve_said.split(b"\n")
        self._serve_said = lines.pop()
        return name.encode("utf-8") in lines

    def _serve_start(self) -> bool:
        """Make the two pipes and have the student's kernel serve them."""
        if self._serve_broken or self._folder.fd is None or self._folder.tampered:
            return False
        number = next(self._serve_count)
        names = (f"{self._nonce}-serve-{number}.requests",
                 f"{self._nonce}-serve-{number}.answers")
        try:
            for pipe in names:
                os.mkfifo(pipe, 0o600, dir_fd=self._folder.fd)
            out = os.open(names[1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW,
                          dir_fd=self._folder.fd)
        except OSError:
            self._serve_broken = True
            return False
        self._serve_out, self._serve_names = out, names
        # The student's kernel runs as a user of its own (isolation.common.kernel_user):
        # it may read the requests pipe and write the answers pipe.
        try:
            os.fchmod(out, 0o622)
            requests = os.open(names[0], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW,
                               dir_fd=self._folder.fd)
            os.fchmod(requests, 0o644)
            os.close(requests)
        except OSError:
            self._serve_stop(broken=True)
            return False
        stem = str(self._folder.path)
        self._serve_msg = self.client.execute(
            "", silent=True, store_history=False, allow_stdin=False, stop_on_error=False,
            user_expressions={"serve": GLUE_SERVE % (
                GLUE_KEY, GLUE_SOURCE, (f"{stem}/{names[0]}", f"{stem}/{names[1]}"))})
        deadline = time.monotonic() + SERVE_START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                self._serve_in = os.open(names[0], os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW,
                                         dir_fd=self._folder.fd)
                break
            except OSError as error:
                if error.errno != errno.ENXIO:   # ENXIO: no reader yet
                    break
            if self._serve_ended(0.0005):
                break
        if self._serve_in is None or not all(
                stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (self._serve_in, out)):
            self._serve_stop(broken=True)
            return False
        return True

    def _serve_ended(self, timeout: float) -> bool:
        """Whether the execute request that serves has been answered (serving
        ended), waiting at most ``timeout`` seconds for it."""
        if self._serve_msg is None:
            return True
        try:
            reply = self.client.get_shell_msg(timeout=timeout)
        except Exception:  # noqa: BLE001 - queue.Empty
            return False
        if reply.get("parent_header", {}).get("msg_id") == self._serve_msg:
            self._serve_msg = None
            return True
        return False

    def _serve_stop(self, broken: bool = False) -> None:
        """Ask the student's kernel to stop serving (an empty line), close and
        remove the pipes, and wait a little for the serving request to end."""
        if broken:
            self._serve_broken = True
        if self._serve_in is not None:
            try:
                os.write(self._serve_in, b"\n")
            except OSError:
                pass
        for fd in (self._serve_in, self._serve_out):
            if fd is not None:
                os.close(fd)
        self._serve_in = self._serve_out = None
        self._serve_said = b""
        if self._serve_names and self._folder.fd is not None:
            for pipe in self._serve_names:
                try:
                    os.unlink(pipe, dir_fd=self._folder.fd)
                except OSError:
                    pass
        self._serve_names = None
        deadline = time.monotonic() + SERVE_END_TIMEOUT_S
        while self._serve_msg is not None and time.monotonic() < deadline:
            self._serve_ended(0.1)
            if self._serve_msg is not None and self._ended():
                break
        self._serve_msg = None

