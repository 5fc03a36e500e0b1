"""Proxies for the student's functions and layers, used by hidden tests.

Hidden tests run in the grader's test kernel, a clean process that never
runs student code. There, each exercise name is bound to a `RemoteObject`:
calling it sends the arguments (NumPy arrays, numbers, strings, None, lists,
tuples, dicts, other remote objects) to the student's kernel, which runs the
student's code and sends back plain data. Objects that are not data (a
layer, a bound method) stay in the student's kernel and come back as new
remote objects, so `layer = MultiHeadAttention(2, 4); layer(x, x)` works.

While an exercise is tested, the other exercises it may call are replaced in
the student's kernel by correct stand-ins (autograder.testkernel.standins), so
that a mistake costs points in one exercise only. Stand-ins and grader
fixtures are compiled here and sent as code objects (ship_code), never as
source; what comes back is checked before it is read (read_arrays: numbers
only, sizes by the .npy headers) and the student's exception messages are
redacted before they reach a feedback page (redact).

The requests and answers are specified in one place, the docstring of
autograder/studentkernel/__init__.py; glue.py is the other end.
"""

from __future__ import annotations

import ast
import base64
import errno
import functools
import hashlib
import importlib.util
import io
import itertools
import json
import marshal
import math
import os
import stat
import re
import secrets
import select
import time
import types
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from jupyter_client import BlockingKernelClient

# The time a call may take and the caps on an answer and on a student's
# message (what and why: autograder.limits); names of this module too, read
# at each use (tests lower them here).
from autograder.limits import (CALL_TIMEOUT_S, MAX_ANSWER_BYTES, MAX_ANSWER_JSON_BYTES,
                               MAX_MESSAGE_CHARS)
from autograder.cputime import Clock, Limit, ProcessWatch
from autograder.testkernel.testing import not_numeric, to_numpy
from autograder.text import MARKS, cut_words, split_error, strip_escapes, student_error

GLUE_SOURCE = (Path(__file__).parent.parent / "studentkernel" / "glue.py").read_text(encoding="utf-8")
#: Where the student's kernel keeps the compiled glue between requests (in
#: its builtins). Compiling it for every request cost about 5 ms a call, most
#: of a call's overhead; keeping it there trusts nothing new, since the glue
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


def _new_profile() -> dict:
    return {"requests": 0, "piped": 0, "ops": {}, "send_s": 0.0, "wait_s": 0.0,
            "student_s": 0.0, "decode_s": 0.0}


#: The user expression that starts serving (glue.serve): the requests of a
#: tests cell are then named, one a line, on a pipe the student's kernel
#: reads, and their answers announced on another, instead of one execute
#: request each (ipykernel's round trip alone took 2.9 ms of a call's 3.7).
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


class StudentCodeError(Exception):
    """The student's code raised, timed out or could not be reached."""


class GraderFault(Exception):
    """A test could not run for a reason that is not the student's code (the
    machine starved the student's kernel of CPU past the wall clock's
    backstop). Not a StudentCodeError, so that no test takes it for the
    student's failure; the grader also reads it from the kernel's profile
    (StudentKernel.faults) and grades the submission again."""


class Tensor:
    """Marks an argument to be passed as a backend tensor, not a NumPy array."""

    def __init__(self, array):
        self.array = np.asarray(array)


class StudentKernel:
    """A client of the student's (sandboxed) kernel for hidden tests."""

    def __init__(self, connection_file: str, exchange_dir: str, pgid: int | None = None,
                 lab_id: str | None = None, timeout: float = CALL_TIMEOUT_S,
                 exchange_identity: tuple[int, int] | None = None,
                 clock: tuple | None = None, plain: bool = False):
        self.exchange = Path(exchange_dir)
        self.exchange.mkdir(parents=True, exist_ok=True)
        # The exchange folder is the student's kernel's to write, so every
        # file in it is reached through this one descriptor, never followed
        # through a link (O_NOFOLLOW), and written only as a new file
        # (O_EXCL): a notebook that puts links there, or swaps the folder
        # for a link to one of the grader's, gets nothing written or read
        # outside it. ``exchange_identity`` (device, inode) is the folder
        # the grader made before the notebook ran.
        self._tampered = None
        self._dir_fd: int | None   # None: closed, or the folder could not be opened
        try:
            self._dir_fd = os.open(self.exchange, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as error:
            self._dir_fd, self._tampered = None, f"{type(error).__name__}"
        else:
            found = os.fstat(self._dir_fd)
            if exchange_identity and (found.st_dev, found.st_ino) != tuple(exchange_identity):
                self._tampered = "another folder"
        self.pgid = pgid
        self.timeout = timeout
        # `grade --plain`: every call an execute request (no pipe), and Keras's
        # own first build in the student's kernel (no eager build: glue).
        self.plain = plain
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
        self.lab_id = lab_id
        self._counter = itertools.count()
        self._nonce = secrets.token_hex(4)
        # Grader objects handed to the student's code that stay here (host()),
        # by id; and the callbacks already served (their numbers).
        self._hosted: dict[int, Any] = {}
        self._served: set[int] = set()
        # What the requests of the current tests cell cost (profile(); reset
        # by bind, which opens every tests cell).
        self._profile = _new_profile()
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
        self.connection_file = connection_file
        self.client = BlockingKernelClient()
        self.client.load_connection_file(connection_file)
        # No iopub (nor stdin): nothing here reads what the student's kernel
        # prints, and a subscribed client queues every message in memory (a
        # thread printing during the tests grew this kernel by the flood).
        self.client.start_channels(iopub=False, stdin=False)

    def close(self) -> None:
        """Stop talking to this student's kernel (the test kernel goes on to
        the next submission)."""
        self.end_cell()
        self.client.stop_channels()
        if self._watch is not None:
            self._watch.close()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def _write_new(self, name: str, data: bytes) -> None:
        """Write a new file ``name`` in the exchange folder (never through a link)."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                     dir_fd=self._dir_fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    def _read_answer_file(self, name: str, limit: int, label: str) -> bytes | None:
        """The bytes of the regular file ``name`` of the exchange folder, at
        most ``limit`` of them; None when there is no such file."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self._dir_fd)
        except FileNotFoundError:
            return None
        except OSError:
            raise StudentCodeError(
                f"`{label}`'s answer is not a file the grader may read (a link or a "
                f"special file was put in its place).") from None
        with os.fdopen(fd, "rb") as handle:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise StudentCodeError(
                    f"`{label}`'s answer is not a regular file (something else was put "
                    f"in its place).")
            if found.st_size > limit:
                raise StudentCodeError(
                    f"`{label}` returned {found.st_size // 2**20} MiB of data; the tests "
                    f"expect small results (arrays, numbers).")
            return handle.read(limit + 1)[:limit + 1]

    # -- binding names -------------------------------------------------------
    def stand_ins_for(self, name: str) -> dict[str, str]:
        """The correct stand-ins for what exercise ``name`` may call, compiled
        (see ship_code)."""
        from autograder.labs import lab_folder
        from autograder.testkernel import standins

        folder = lab_folder(self.lab_id) if self.lab_id else None
        if folder is None:
            return {}
        return {dependency: ship_code(source, f"<stand-in {dependency}>")
                for dependency, source in standins.for_exercise(folder, name).items()}

    def bind(self, namespace: dict, names) -> None:
        """Bind each of ``names`` in ``namespace`` to the student's object
        (the start of a tests cell: its profile starts at zero)."""
        self._profile = _new_profile()
        for name in names:
            namespace[name] = RemoteObject(self, {"name": name}, name,
                                           self.stand_ins_for(name))

    # -- the wire ------------------------------------------------------------
    def construct(self, source: str, name: str, *args, **kwargs) -> "RemoteObject":
        """Build a grader-written object inside the student's kernel.

        ``source`` (self-contained Python, imports inside) is executed in a
        fresh namespace there and ``name(*args, **kwargs)`` is returned as a
        remote object, e.g. a tiny model with hand-set weights to pass to the
        student's decoding functions.
        """
        return self.request("construct", {}, name, {}, attr=name, args=args,
                            kwargs=kwargs, code=ship_code(source, "<grader fixture>"))

    def host(self, obj, label: str = "the grader's model") -> "HostedObject":
        """Hand ``obj`` (a grader's model) to the student's code without
        sending it there.

        Passed to a student function, it arrives in the student's kernel as a
        proxy whose only operation is a call: each call comes back here (a
        callback, served while the request waits, see _serve_callbacks) and
        ``obj`` answers it in this kernel. The student's code can neither read
        nor change ``obj``: its attributes, its methods and its call log stay
        here, and what it returns that is not data (a cache) goes to the
        student's kernel as an opaque handle, which only this kernel can
        resolve.
        """
        return HostedObject(self, self._keep(obj), label)

    def _keep(self, obj) -> int:
        handle = len(self._hosted) + 1
        self._hosted[handle] = obj
        return handle

    def request(self, op: str, target: dict, label: str, stand_ins: dict,
                attr: str | None = None, args=(), kwargs=None, code: str | None = None):
        """One request of the protocol (autograder/studentkernel/__init__.py),
        served by the student's kernel; its answer decoded."""
        if self._tampered:
            raise StudentCodeError(
                f"`{label}` could not be called: the notebook replaced the folder through "
                f"which the tests talk to its kernel ({self._tampered}). Do not touch the "
                f"grader's folders; run the notebook as released.")
        name = f"{self._nonce}-{next(self._counter)}"
        started = time.perf_counter()
        request_path = self._send(name, {
            "op": op, "target": target, "attr": attr, "stand_ins": stand_ins, "code": code,
            "eager": not self.plain,
        }, args, kwargs)
        sent = time.perf_counter()
        reply = None if self.plain else self._via_pipe(name, request_path, label)
        self._profile["piped"] += reply is not None
        if reply is None:
            reply = self._execute(GLUE_CALL % (GLUE_KEY, GLUE_SOURCE, request_path), label)
        replied = time.perf_counter()
        shipped = [blob for blob in [code, *stand_ins.values()] if blob]
        answer = self._answer(name, reply, label, shipped)
        self._count(op, sent - started, replied - sent, answer.get("seconds"))
        if not answer.get("ok"):
            if op == "many" and isinstance(answer.get("index"), int) \
                    and 0 <= answer["index"] < len(args):
                label = f"{label}.{args[answer['index']][0]}"
            raise StudentCodeError(_describe_failure(label, answer, shipped))
        arrays_out = {}
        if answer.get("arrays"):
            # Where the glue writes them, whatever the answer says.
            packed = self._read_answer_file(name + ".answer.json.npz", MAX_ANSWER_BYTES, label)
            if packed is None:
                raise StudentCodeError(f"`{label}`'s answer could not be read.")
            arrays_out = read_arrays(packed, label)
        decoded = _decode(answer["value"], arrays_out, self, label, stand_ins)
        self._profile["decode_s"] += time.perf_counter() - replied
        return decoded

    def _count(self, op: str, send_s: float, wait_s: float, student_s) -> None:
        profile = self._profile
        profile["requests"] += 1
        profile["ops"][op] = profile["ops"].get(op, 0) + 1
        profile["send_s"] += send_s
        profile["wait_s"] += wait_s
        # The seconds the student's kernel says its code ran: a figure for
        # the benchmark's profile only (a notebook could change it; nothing
        # is graded on it), capped by the wait it lies within.
        if isinstance(student_s, (int, float)) and math.isfinite(student_s):
            profile["student_s"] += min(max(float(student_s), 0.0), wait_s)

    def profile(self) -> str:
        """What the current tests cell's requests cost, as JSON: how many
        (and of which operations), the seconds spent writing them, waiting for
        the student's kernel (of which its code ran ``student_s``, as that
        kernel reports it) and reading the answers. The grader keeps it in
        the submission's timings (``make bench`` prints it)."""
        found = {key: round(value, 4) if isinstance(value, float) else value
                 for key, value in self._profile.items()}
        if self.death:
            found["death"] = self.death
        if self.faults:
            found["faults"] = list(self.faults)
        return json.dumps(found)

    def _send(self, name: str, payload: dict, args, kwargs) -> str:
        """Write request ``name`` (its arrays beside it); the request file's path."""
        arrays: dict[str, np.ndarray] = {}
        stem = str(self.exchange / name)
        payload = dict(payload, args=_encode(list(args), arrays),
                       kwargs=_encode(dict(kwargs or {}), arrays), magic=MAGIC,
                       answer=stem + ".answer.json", arrays=None)
        if arrays:
            buffer = io.BytesIO()
            # The ignore: the arrays' names (a0, a1...) are never savez's allow_pickle.
            np.savez(buffer, **arrays)  # type: ignore[arg-type]
            self._write_new(name + ".args.npz", buffer.getvalue())
            payload["arrays"] = stem + ".args.npz"
        self._write_new(name + ".request.json", json.dumps(payload).encode("utf-8"))
        return stem + ".request.json"

    def _answer(self, name: str, reply: dict, label: str, shipped) -> dict:
        """The JSON answer of request ``name``, read within its size limit."""
        data = self._read_answer_file(name + ".answer.json", MAX_ANSWER_JSON_BYTES, label)
        if data is None:
            content = reply.get("content", {})
            content = content.get("user_expressions", {}).get("call", content)
            raise StudentCodeError(redact(
                f"`{label}` could not be run in your notebook's kernel "
                f"({content.get('ename', 'no answer')}: {content.get('evalue', '')}).",
                shipped))
        try:
            answer = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):
            raise StudentCodeError(f"`{label}`'s answer could not be read.") from None
        if not isinstance(answer, dict):
            raise StudentCodeError(f"`{label}`'s answer could not be read.")
        return answer

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

    # -- serving: a tests cell's requests on a pipe -------------------------
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
            os.stat(name + ".answer.json", dir_fd=self._dir_fd, follow_symlinks=False)
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
        if self._serve_broken or self._dir_fd is None or self._tampered:
            return False
        number = next(self._serve_count)
        names = (f"{self._nonce}-serve-{number}.requests",
                 f"{self._nonce}-serve-{number}.answers")
        try:
            for pipe in names:
                os.mkfifo(pipe, 0o600, dir_fd=self._dir_fd)
            out = os.open(names[1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW,
                          dir_fd=self._dir_fd)
        except OSError:
            self._serve_broken = True
            return False
        self._serve_out, self._serve_names = out, names
        # The student's kernel runs as a user of its own (isolation.common.kernel_user):
        # it may read the requests pipe and write the answers pipe.
        try:
            os.fchmod(out, 0o622)
            requests = os.open(names[0], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW,
                               dir_fd=self._dir_fd)
            os.fchmod(requests, 0o644)
            os.close(requests)
        except OSError:
            self._serve_stop(broken=True)
            return False
        stem = str(self.exchange)
        self._serve_msg = self.client.execute(
            "", silent=True, store_history=False, allow_stdin=False, stop_on_error=False,
            user_expressions={"serve": GLUE_SERVE % (
                GLUE_KEY, GLUE_SOURCE, (f"{stem}/{names[0]}", f"{stem}/{names[1]}"))})
        deadline = time.monotonic() + SERVE_START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                self._serve_in = os.open(names[0], os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW,
                                         dir_fd=self._dir_fd)
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
        if self._serve_names and self._dir_fd is not None:
            for pipe in self._serve_names:
                try:
                    os.unlink(pipe, dir_fd=self._dir_fd)
                except OSError:
                    pass
        self._serve_names = None
        deadline = time.monotonic() + SERVE_END_TIMEOUT_S
        while self._serve_msg is not None and time.monotonic() < deadline:
            self._serve_ended(0.1)
            if self._serve_msg is not None and self._ended():
                break
        self._serve_msg = None

    def end_cell(self) -> str:
        """The end of a tests cell: the student's kernel stops serving (its
        next cell may run); what the cell's requests cost (profile())."""
        if self._serve_in is not None or self._serve_msg is not None:
            self._serve_stop()
        return self.profile()

    # -- callbacks: the student's code calling a hosted object ----------------
    def _serve_callbacks(self, label: str) -> bool:
        """Answer every new callback file of the exchange folder; whether
        there was one.

        The student's kernel writes ``cb-<n>.call.json`` (and ``.call.npz``)
        and waits for ``cb-<n>.reply.json``. Only hosted objects are called,
        only with data (numbers, strings, arrays checked by their headers,
        handles this kernel issued), and what the call raises goes back as a
        message: a hostile call costs the student's own test its time, never
        the grader anything else.
        """
        if self._dir_fd is None:
            return False
        served = False
        for entry in sorted(os.listdir(self._dir_fd)):
            match = _CALLBACK.fullmatch(entry)
            if not match or int(match.group(1)) in self._served:
                continue
            number = int(match.group(1))
            self._served.add(number)
            served = True
            reply, arrays = self._callback(entry, f"{label}: a call of the grader's model")
            for name in (entry, entry[:-len(".json")] + ".npz"):
                try:
                    os.unlink(name, dir_fd=self._dir_fd)
                except OSError:
                    pass
            stem = f"cb-{number}.reply"
            try:
                if arrays:
                    buffer = io.BytesIO()
                    np.savez(buffer, **arrays)
                    self._write_new(stem + ".npz", buffer.getvalue())
                    reply["arrays"] = True
                self._write_new(stem + ".tmp", json.dumps(reply).encode("utf-8"))
                os.rename(stem + ".tmp", stem + ".json", src_dir_fd=self._dir_fd,
                          dst_dir_fd=self._dir_fd)
            except OSError:  # the student's kernel put something in the way
                continue
        return served

    def _callback(self, entry: str, label: str) -> tuple[dict, dict]:
        """The reply to callback file ``entry`` and its arrays."""
        try:
            data = self._read_answer_file(entry, MAX_ANSWER_JSON_BYTES, label)
            request = json.loads((data or b"").decode("utf-8"))
            if not isinstance(request, dict):
                raise ValueError("not an object")
            arrays_in = {}
            if request.get("arrays"):
                packed = self._read_answer_file(entry[:-len(".json")] + ".npz",
                                                MAX_HOSTED_CALL_BYTES, label)
                if packed is None:
                    raise ValueError("its arrays are missing")
                arrays_in = read_arrays(packed, label, MAX_HOSTED_CALL_BYTES)
            handle = request.get("id")
            target = self._hosted.get(handle) if isinstance(handle, int) else None
            if target is None:
                raise ValueError("it names no object the grader handed to your code")
            args = self._from_student(request.get("args"), arrays_in)
            kwargs = self._from_student(request.get("kwargs"), arrays_in)
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ValueError("malformed arguments")
        except (StudentCodeError, ValueError, TypeError, KeyError, RecursionError) as error:
            return {"ok": False, "type": "ValueError",
                    "message": f"the grader could not read this call ({error})"}, {}
        try:
            result = target(*args, **kwargs)
            arrays_out: dict[str, np.ndarray] = {}
            return {"ok": True, "value": self._to_student(result, arrays_out)}, arrays_out
        except Exception as error:  # noqa: BLE001 - reported to the student's code
            kind = type(error).__name__ if type(error).__name__ in (
                "ValueError", "TypeError") else "RuntimeError"
            return {"ok": False, "type": kind, "message": str(error)[:MAX_MESSAGE_CHARS]}, {}

    def _from_student(self, encoded, arrays):
        """An argument of a callback: data, or a handle this kernel issued."""
        if not isinstance(encoded, dict):
            raise ValueError("malformed argument")
        kind = encoded.get("t")
        if kind == "plain" and (encoded.get("v") is None
                                or isinstance(encoded.get("v"), (bool, int, float, str))):
            return encoded["v"]
        if kind in ("list", "tuple") and isinstance(encoded.get("v"), list):
            items = [self._from_student(item, arrays) for item in encoded["v"]]
            return items if kind == "list" else tuple(items)
        if kind == "dict" and isinstance(encoded.get("v"), dict):
            return {str(key): self._from_student(item, arrays)
                    for key, item in encoded["v"].items()}
        if kind == "array" and encoded.get("key") in arrays:
            return arrays[encoded["key"]]
        if kind == "hosted" and encoded.get("id") in self._hosted:
            return self._hosted[encoded["id"]]
        raise ValueError(f"an argument of kind {kind!r} the grader does not take")

    def _to_student(self, value, arrays):
        """A hosted object's answer, encoded for the student's kernel: data as
        data (backend tensors as tensors), anything else as a new handle."""
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"t": "plain", "v": value}
        if isinstance(value, (np.integer, np.floating)):
            return {"t": "plain", "v": value.item()}
        if isinstance(value, (list, tuple)):
            return {"t": type(value).__name__,
                    "v": [self._to_student(item, arrays) for item in value]}
        if isinstance(value, Tensor):   # data to be a backend tensor there
            key = f"a{len(arrays)}"
            arrays[key] = value.array
            return {"t": "tensor", "key": key}
        if isinstance(value, np.ndarray) or _is_backend_tensor(value):
            key = f"a{len(arrays)}"
            arrays[key] = np.asarray(value) if isinstance(value, np.ndarray) \
                else np.asarray(to_numpy(value))
            return {"t": "array" if isinstance(value, np.ndarray) else "tensor", "key": key}
        return {"t": "hosted", "id": self._keep(value)}

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
            if reply.get("parent_header", {}).get("msg_id") == self._serve_msg:
                self._serve_msg = None   # the interrupt ended serving


def _describe_failure(label: str, answer: dict, shipped=()) -> str:
    """The student's exception, with the last line of their code that ran,
    redacted (see redact): it goes to their feedback page. Written with
    autograder.text.student_error's marks: the exception's type and first
    line, and where in the student's code, are what the student reads;
    what the framework added (Keras's wrapper, TensorFlow's internals) is
    kept apart for a "details" fold (autograder.text.student_message)."""
    where = code = ""
    traceback = answer.get("traceback", "")
    lines = (traceback if isinstance(traceback, str) else "").splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("File ") and "<autograder>" not in stripped \
                and "<stand-in" not in stripped:
            where = stripped
            # the frame's source line, as the traceback quotes it (indented)
            following = lines[index + 1] if index + 1 < len(lines) else ""
            code = following.strip() if following.startswith("    ") \
                and not following.strip().startswith(("File ", "^", "~")) else ""
    kind = redact(str(answer.get("type")), shipped, limit=60)
    headline, details = split_error(str(answer.get("message")))
    frame = ""
    if where and "ipykernel" in where or "tmp/ipykernel" in where:
        place = where.split(", ", 1)[-1]
        number = re.match(r"line (\d+)", place)
        cell = _student_cell(int(number.group(1)), code) if number else ""
        # (the line's code is not quoted: the cell and line say where, and a
        # page quoting code reads to the leak scanner as code shown)
        frame = (f"your cell of `{cell}`, " if cell else "your code, ") \
            + redact(place, shipped, limit=80)
    return student_error(label, kind, redact(headline, shipped) or "(no message)", frame,
                         redact(details, shipped, limit=2 * MAX_MESSAGE_CHARS))


def _student_cell(line_number: int, code: str) -> str:
    """The name the student's cell defines (its first class or function) whose
    line ``line_number`` is ``code``: where their error is, as they know it
    ("" when not found). The cells' sources are the grader's file
    (AUTOGRADER_STUDENT_CELLS, autograder.grader.execute); a frame's line is
    counted in its cell, as ipykernel compiles each cell on its own."""
    path = os.environ.get("AUTOGRADER_STUDENT_CELLS", "")
    if not path or not code:
        return ""
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    for source in cells if isinstance(cells, list) else []:
        lines = str(source).splitlines()
        if 0 < line_number <= len(lines) and lines[line_number - 1].strip() == code:
            defined = re.search(r"^(?:class|def)\s+(\w+)", str(source), re.M)
            return defined.group(1) if defined else ""
    return ""


_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+")
_NUMBER = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|…)"
_NUMBER_RUN = re.compile(rf"(?:{_NUMBER}[\s,;:|()\[\]]+){{5,}}{_NUMBER}")
_HEX_RUN = re.compile(r"\b[0-9a-fA-F]{16,}\b|[0-9a-fA-F]{32,}")
_LONG_WORD = re.compile(r"\S{60,}")
_ENCODED = re.compile(r"[A-Za-z0-9+/=]{12,}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def redact(text: str, shipped=(), limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` (a student's exception message) fit to show on their page.

    A student's code sees the hidden tests' inputs and the grader's compiled
    stand-ins; its exception message is the one thing of it that reaches the
    feedback page. So the message keeps its words, names and shapes but not
    data: terminal escape sequences go whole (Keras's bold ``ESC[1m``), other
    control characters become "?"; every number written with a decimal
    point or exponent, every run of six or more numbers, hexadecimal and
    other long unbroken runs become "…";
    any piece of what the grader shipped in the request (``shipped``: the
    encoded code, its string constants) becomes "[grader's code]"; and the
    whole is cut at ``limit`` characters, after a word.
    """
    for blob in shipped:
        for piece in sorted(_shipped_strings(blob), key=len, reverse=True):
            text = text.replace(piece, "[grader's code]")
    if shipped:
        text = _ENCODED.sub(lambda found: "[grader's code]" if any(
            found.group(0) in blob for blob in shipped) else found.group(0), text)
    # Escape sequences whole (Keras's bold "ESC[1m"), then what control
    # bytes are left; the marks of autograder.text.student_error are the
    # grader's alone.
    text = strip_escapes(text).translate({ord(mark): None for mark in MARKS})
    text = _CONTROL.sub("?", text)
    text = _FLOAT.sub("…", text)
    text = _HEX_RUN.sub("…", text)
    text = _LONG_WORD.sub("…", text)
    return hide_data(text, limit)


def hide_data(text: str, limit: int) -> str:
    """``text`` without runs of six or more numbers (any notation), cut at
    ``limit`` characters.

    The grader applies it to every failed test's message (IsolatedExecute):
    a test's message may quote what the student's code returned, and that
    may be the hidden inputs in disguise; a shape or a single difference
    stays readable.
    """
    text = _NUMBER_RUN.sub("…", text)
    return cut_words(text, limit)


@functools.lru_cache(maxsize=64)
def _shipped_strings(blob: str) -> tuple[str, ...]:
    """The string constants of a shipped code object worth hiding: 12
    characters or more, and not a plain name (a keyword argument's name is
    also the student's own wording)."""
    found = []

    def walk(code):
        for const in code.co_consts:
            if isinstance(const, str) and len(const) >= 12 and not const.isidentifier():
                found.append(const)
            elif isinstance(const, types.CodeType):
                walk(const)

    walk(marshal.loads(base64.b64decode(blob)))
    return tuple(found)


#: The bytecode version of this Python: the student's kernel must run the
#: same to execute the code objects shipped to it (autograder.studentkernel.glue checks).
MAGIC = importlib.util.MAGIC_NUMBER.hex()


@functools.lru_cache(maxsize=256)
def ship_code(source: str, filename: str) -> str:
    """``source`` compiled here, docstrings removed, as base64 of marshal.

    The stand-ins and fixtures run in the student's kernel, where the
    student's code can read the request files and the objects they define.
    Sent as source, a layer raising with what it read showed the reference
    solutions on its feedback page; a code object carries no source text,
    and without its docstrings no comment of the references either.
    """
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    code = compile(tree, filename, "exec", dont_inherit=True)
    return base64.b64encode(marshal.dumps(code)).decode("ascii")


def read_arrays(source: Path | bytes, label: str, limit: int | None = None) -> dict[str, np.ndarray]:
    """The arrays of an answer's .npz (a path, or its bytes), each checked by
    its header first.

    The student's kernel writes this file, and may write it compressed: a
    few MB can inflate to gigabytes. Every member's .npy header (shape and
    dtype) is read before any data, and the answer is refused when the
    arrays would take more than ``limit`` (MAX_ANSWER_BYTES) or are not numbers.
    """
    limit = MAX_ANSWER_BYTES if limit is None else limit
    size = len(source) if isinstance(source, bytes) else source.stat().st_size
    if size > limit:
        raise StudentCodeError(
            f"`{label}` returned {size // 2**20} MiB of data; "
            f"the tests expect small arrays.")
    path = io.BytesIO(source) if isinstance(source, bytes) else source
    total = 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                    else:
                        raise ValueError(f"unsupported .npy version {version}")
                problem = not_numeric(dtype, f"`{label}`")
                if problem:
                    raise StudentCodeError(problem)
                total += math.prod(shape) * dtype.itemsize
                if total > limit:
                    raise StudentCodeError(
                        f"`{label}` returned arrays of at least "
                        f"{total // 2**20} MiB once unpacked; the tests expect small "
                        f"arrays (return the result itself, not a large or "
                        f"broadcast array).")
        if isinstance(path, io.BytesIO):
            path.seek(0)
        with np.load(path, allow_pickle=False) as loaded:
            return {key: loaded[key] for key in loaded.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        raise StudentCodeError(f"`{label}`'s answer could not be read.") from None


class RemoteObject:
    """A function, class or object that lives in the student's kernel."""

    def __init__(self, kernel: StudentKernel, target: dict, label: str,
                 stand_ins: dict | None = None, type_name: str | None = None):
        self._kernel = kernel
        self._target = target
        self._label = label
        self._stand_ins = stand_ins or {}
        self._type_name = type_name

    def __call__(self, *args, **kwargs):
        return self._kernel.request("call", self._target, self._label, self._stand_ins,
                                    args=args, kwargs=kwargs)

    def __getattr__(self, attr: str):
        if attr.startswith("__") or attr.startswith("_RemoteObject"):
            raise AttributeError(attr)
        return self._kernel.request("getattr", self._target, f"{self._label}.{attr}",
                                    self._stand_ins, attr=attr)

    def attribute(self, path: str):
        """``obj.a.b`` for the path "a.b", in one round trip."""
        return self._kernel.request("getattr", self._target, f"{self._label}.{path}",
                                    self._stand_ins, attr=path)

    def call_method(self, attr: str, *args, **kwargs):
        """``obj.attr(*args, **kwargs)`` in one round trip (``attr`` may be a
        path: "ffn.dense1.set_weights")."""
        return self._kernel.request("callmethod", self._target,
                                    f"{self._label}.{attr}", self._stand_ins,
                                    attr=attr, args=args, kwargs=kwargs)

    def many(self, calls) -> list:
        """``[obj.path if args is None else obj.path(*args) for path, args in
        calls]`` in one round trip (paths like "ffn.dense1.set_weights"); a
        failure names the call that failed."""
        calls = [(path, None if args is None else list(args)) for path, args in calls]
        return self._kernel.request("many", self._target, self._label, self._stand_ins,
                                    args=calls)

    def describe(self) -> dict:
        """Class, base classes and nested sublayers of the student's object.

        Returns {"class": "module.Name", "bases": [...], "sublayers":
        [{"name", "class", "bases"}, ...]} (sublayers for Keras layers only).
        """
        return self._kernel.request("describe", self._target, self._label,
                                    self._stand_ins)

    @property
    def remote_type(self) -> str | None:
        """The class name of the object in the student's kernel."""
        return self._type_name

    def __repr__(self) -> str:
        return f"<student object {self._label}>"


class HostedObject:
    """A grader object kept in the test kernel (StudentKernel.host): passed to
    a student function, it is a callable proxy there."""

    def __init__(self, kernel: StudentKernel, handle: int, label: str):
        self.kernel, self.handle, self.label = kernel, handle, label

    @property
    def target(self):
        """The grader's object itself (its call log, say: never seen by the
        student's code)."""
        return self.kernel._hosted[self.handle]

    def __repr__(self) -> str:
        return f"<{self.label}, kept in the test kernel>"


#: A callback file of the exchange folder (StudentKernel._serve_callbacks).
_CALLBACK = re.compile(r"cb-([0-9]{1,9})\.call\.json")

#: The arrays of one callback, at most: a hosted model's inputs are token ids
#: (a few thousand), so 16 MiB only stops a call meant to tie up the test kernel.
MAX_HOSTED_CALL_BYTES = 16 * 2**20


def _is_backend_tensor(value) -> bool:
    module = type(value).__module__ or ""
    return module.startswith(("tensorflow", "torch", "jax", "jaxlib", "keras")) \
        and hasattr(value, "shape") and hasattr(value, "dtype")


def _encode(value, arrays):
    if value is None or isinstance(value, (bool, str, int, float)):
        return {"t": "plain", "v": value}
    if isinstance(value, (np.integer,)):
        return {"t": "plain", "v": int(value)}
    if isinstance(value, (np.floating,)):
        return {"t": "plain", "v": float(value)}
    if isinstance(value, (list, tuple)):
        return {"t": type(value).__name__, "v": [_encode(item, arrays) for item in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": {str(key): _encode(item, arrays) for key, item in value.items()}}
    if isinstance(value, RemoteObject):
        if "id" not in value._target:
            raise TypeError("only objects returned by the student's code can be passed back")
        return {"t": "ref", "id": value._target["id"]}
    if isinstance(value, HostedObject):
        return {"t": "hosted", "id": value.handle}
    if isinstance(value, Tensor):
        key = f"a{len(arrays)}"
        arrays[key] = value.array
        return {"t": "tensor", "key": key}
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"cannot send {type(value).__name__} to the student's kernel")
    key = f"a{len(arrays)}"
    arrays[key] = array
    return {"t": "array", "key": key}


def _decode(encoded, arrays, kernel, label, stand_ins):
    kind = encoded.get("t")
    if kind == "plain":
        return encoded["v"]
    if kind in ("list", "tuple"):
        items = [_decode(item, arrays, kernel, f"{label}[{i}]", stand_ins)
                 for i, item in enumerate(encoded["v"])]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {key: _decode(item, arrays, kernel, f"{label}[{key!r}]", stand_ins)
                for key, item in encoded["v"].items()}
    if kind == "array":
        return arrays[encoded["key"]]
    if kind == "ref":
        return RemoteObject(kernel, {"id": int(encoded["id"])}, label, stand_ins,
                            encoded.get("type"))
    if kind == "hosted" and encoded.get("id") in kernel._hosted:
        return kernel._hosted[encoded["id"]]
    raise StudentCodeError(f"`{label}` returned something the grader cannot read.")
