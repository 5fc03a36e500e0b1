"""StudentKernel: the test kernel's client of one student's kernel.

It binds the exercises' names to remote objects (bind), writes each call's
request in the exchange folder (wire's encoding), has it served by a
transport chosen once (transports: an execute request a call under `grade
--plain`, else a tests cell's calls on a pipe), reads the answer back within
its limits and turns a failure into the student's redacted message
(messages). While a call waits it answers the callbacks of the student's
code to the grader's objects kept here (host).
"""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np
from jupyter_client import BlockingKernelClient

# The time a call may take (what and why: autograder.limits). The caps on an
# answer and on a student's message are names of wire and messages, read
# there at each use (tests lower them there: wire.MAX_ANSWER_BYTES).
from autograder.limits import CALL_TIMEOUT_S
from autograder.kernels.probe import messages, wire
from autograder.kernels.probe.errors import StudentCodeError
from autograder.kernels.probe.exchange import ExchangeFolder
from autograder.kernels.probe.messages import _describe_failure, redact
from autograder.kernels.probe.transports import ExecuteTransport, PipeTransport, Transport
from autograder.kernels.probe.wire import (HostedObject, RemoteObject, _decode, _encode,
                                           _from_student, _to_student, read_arrays, ship_code)

#: A callback file of the exchange folder (StudentKernel._serve_callbacks).
_CALLBACK = re.compile(r"cb-([0-9]{1,9})\.call\.json")


def _new_profile() -> dict:
    return {"requests": 0, "piped": 0, "ops": {}, "send_s": 0.0, "wait_s": 0.0,
            "student_s": 0.0, "decode_s": 0.0}


class StudentKernel:
    """A client of the student's (sandboxed) kernel for hidden tests."""

    def __init__(self, connection_file: str, exchange_dir: str, pgid: int | None = None,
                 lab_id: str | None = None, timeout: float = CALL_TIMEOUT_S,
                 exchange_identity: tuple[int, int] | None = None,
                 clock: tuple | None = None, plain: bool = False):
        self.exchange = Path(exchange_dir)
        # Every file of the exchange folder is reached through one descriptor
        # (ExchangeFolder); ``exchange_identity`` (device, inode) is the
        # folder the grader made before the notebook ran.
        self._folder = ExchangeFolder(self.exchange, exchange_identity)
        self.pgid = pgid
        # `grade --plain`: every call an execute request (no pipe), and Keras's
        # own first build in the student's kernel (no eager build: glue).
        self.plain = plain
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
        self.connection_file = connection_file
        self.client = BlockingKernelClient()
        self.client.load_connection_file(connection_file)
        # How the requests reach the student's kernel, chosen once here
        # (transports): an execute request each under `grade --plain`, else a
        # tests cell's on a pipe. The transport also watches the kernel's
        # process and limits each call by the CPU time it uses (``clock``: the
        # grader's Clock.spec(); ``timeout``).
        transport = ExecuteTransport if plain else PipeTransport
        self.transport: Transport = transport(self.client, self._folder, self._nonce, timeout,
                                              clock, self._hosted, self._serve_callbacks)
        # No iopub (nor stdin): nothing here reads what the student's kernel
        # prints, and a subscribed client queues every message in memory (a
        # thread printing during the tests grew this kernel by the flood).
        self.client.start_channels(iopub=False, stdin=False)

    @property
    def timeout(self) -> float:
        """The CPU seconds a call may take."""
        return self.transport.timeout

    @property
    def death(self) -> dict | None:
        """How the kernel ended, if it did while a call ran (for the grader)."""
        return self.transport.death

    @property
    def faults(self) -> list[str]:
        """Failures of the machine, not of the student's code (for the grader)."""
        return self.transport.faults

    def close(self) -> None:
        """Stop talking to this student's kernel (the test kernel goes on to
        the next submission)."""
        self.end_cell()
        self.client.stop_channels()
        self.transport.close()
        self._folder.close()

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
        if self._folder.tampered:
            raise StudentCodeError(
                f"`{label}` could not be called: the notebook replaced the folder through "
                f"which the tests talk to its kernel ({self._folder.tampered}). Do not touch "
                f"the grader's folders; run the notebook as released.")
        name = f"{self._nonce}-{next(self._counter)}"
        started = time.perf_counter()
        request_path = self._send(name, {
            "op": op, "target": target, "attr": attr, "stand_ins": stand_ins, "code": code,
            "eager": not self.plain,
        }, args, kwargs)
        sent = time.perf_counter()
        reply, piped = self.transport.call(name, request_path, label)
        self._profile["piped"] += piped
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
            packed = self._folder.read_answer_file(name + ".answer.json.npz",
                                                    wire.MAX_ANSWER_BYTES, label)
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
                       kwargs=_encode(dict(kwargs or {}), arrays), magic=wire.MAGIC,
                       answer=stem + ".answer.json", arrays=None)
        if arrays:
            buffer = io.BytesIO()
            # The ignore: the arrays' names (a0, a1...) are never savez's allow_pickle.
            np.savez(buffer, **arrays)  # type: ignore[arg-type]
            self._folder.write_new(name + ".args.npz", buffer.getvalue())
            payload["arrays"] = stem + ".args.npz"
        self._folder.write_new(name + ".request.json", json.dumps(payload).encode("utf-8"))
        return stem + ".request.json"

    def _answer(self, name: str, reply: dict, label: str, shipped) -> dict:
        """The JSON answer of request ``name``, read within its size limit."""
        data = self._folder.read_answer_file(name + ".answer.json", wire.MAX_ANSWER_JSON_BYTES,
                                             label)
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

    def end_cell(self) -> str:
        """The end of a tests cell: the student's kernel stops serving (its
        next cell may run); what the cell's requests cost (profile())."""
        self.transport.end_cell()
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
        if self._folder.fd is None:
            return False
        served = False
        for entry in sorted(os.listdir(self._folder.fd)):
            match = _CALLBACK.fullmatch(entry)
            if not match or int(match.group(1)) in self._served:
                continue
            number = int(match.group(1))
            self._served.add(number)
            served = True
            reply, arrays = self._callback(entry, f"{label}: a call of the grader's model")
            for name in (entry, entry[:-len(".json")] + ".npz"):
                try:
                    os.unlink(name, dir_fd=self._folder.fd)
                except OSError:
                    pass
            stem = f"cb-{number}.reply"
            try:
                if arrays:
                    buffer = io.BytesIO()
                    np.savez(buffer, **arrays)
                    self._folder.write_new(stem + ".npz", buffer.getvalue())
                    reply["arrays"] = True
                self._folder.write_new(stem + ".tmp", json.dumps(reply).encode("utf-8"))
                os.rename(stem + ".tmp", stem + ".json", src_dir_fd=self._folder.fd,
                          dst_dir_fd=self._folder.fd)
            except OSError:  # the student's kernel put something in the way
                continue
        return served

    def _callback(self, entry: str, label: str) -> tuple[dict, dict]:
        """The reply to callback file ``entry`` and its arrays."""
        try:
            data = self._folder.read_answer_file(entry, wire.MAX_ANSWER_JSON_BYTES, label)
            request = json.loads((data or b"").decode("utf-8"))
            if not isinstance(request, dict):
                raise ValueError("not an object")
            arrays_in = {}
            if request.get("arrays"):
                packed = self._folder.read_answer_file(entry[:-len(".json")] + ".npz",
                                                       wire.MAX_HOSTED_CALL_BYTES, label)
                if packed is None:
                    raise ValueError("its arrays are missing")
                arrays_in = read_arrays(packed, label, wire.MAX_HOSTED_CALL_BYTES)
            handle = request.get("id")
            target = self._hosted.get(handle) if isinstance(handle, int) else None
            if target is None:
                raise ValueError("it names no object the grader handed to your code")
            args = _from_student(request.get("args"), arrays_in, self._hosted)
            kwargs = _from_student(request.get("kwargs"), arrays_in, self._hosted)
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ValueError("malformed arguments")
        except (StudentCodeError, ValueError, TypeError, KeyError, RecursionError) as error:
            return {"ok": False, "type": "ValueError",
                    "message": f"the grader could not read this call ({error})"}, {}
        try:
            result = target(*args, **kwargs)
            arrays_out: dict[str, np.ndarray] = {}
            return {"ok": True, "value": _to_student(result, arrays_out, self._keep)}, arrays_out
        except Exception as error:  # noqa: BLE001 - reported to the student's code
            kind = type(error).__name__ if type(error).__name__ in (
                "ValueError", "TypeError") else "RuntimeError"
            return {"ok": False, "type": kind,
                    "message": str(error)[:messages.MAX_MESSAGE_CHARS]}, {}
