"""Proxies for the student's functions and layers, used by hidden tests.

Hidden tests run in the grader's test kernel, a clean process that never
runs student code. There, each exercise name is bound to a `RemoteObject`:
calling it sends the arguments (NumPy arrays, numbers, strings, None, lists,
tuples, dicts, other remote objects) to the student's kernel, which runs the
student's code and sends back plain data. Objects that are not data (a
layer, a bound method) stay in the student's kernel and come back as new
remote objects, so `layer = MultiHeadAttention(2, 4); layer(x, x)` works.

While an exercise is tested, the other exercises it may call are replaced in
the student's kernel by correct stand-ins (autograder.references.<lab>), so
that a mistake costs points in one exercise only.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import time
from pathlib import Path

import numpy as np
from jupyter_client import BlockingKernelClient

from autograder import policy

#: Answers larger than this are refused unread (a student's kernel could
#: otherwise exhaust the test kernel's memory).
MAX_ANSWER_BYTES = 256 * 2**20

GLUE_SOURCE = (Path(__file__).with_name("glue.py")).read_text(encoding="utf-8")
#: Where the student's kernel keeps the compiled glue between requests (in
#: its builtins). Compiling it for every request cost about 5 ms a call, most
#: of a call's overhead; keeping it there trusts nothing new, since the glue
#: runs in the student's process anyway and only ever returns data.
GLUE_KEY = "__autograder_glue_%s__" % hashlib.sha256(GLUE_SOURCE.encode()).hexdigest()[:12]
#: The user expression of one request: the kept glue's handle(), or the glue
#: compiled (and kept) first.
GLUE_CALL = (
    "(lambda b, k, src, request: (getattr(b, k) if callable(getattr(b, k, None)) else "
    "(lambda ns: (exec(compile(src, '<autograder>', 'exec'), ns), "
    "setattr(b, k, ns['handle']), ns['handle'])[2])({}))(request, globals()))"
    "(__import__('builtins'), %r, %r, %r)"
)


class StudentCodeError(Exception):
    """The student's code raised, timed out or could not be reached."""


class Tensor:
    """Marks an argument to be passed as a backend tensor, not a NumPy array."""

    def __init__(self, array):
        self.array = np.asarray(array)


class StudentKernel:
    """A client of the student's (sandboxed) kernel for hidden tests."""

    def __init__(self, connection_file: str, exchange_dir: str, pgid: int | None = None,
                 lab_id: str | None = None, timeout: float = policy.CALL_TIMEOUT_S):
        self.exchange = Path(exchange_dir)
        self.exchange.mkdir(parents=True, exist_ok=True)
        self.pgid = pgid
        self.timeout = timeout
        self.lab_id = lab_id
        self._counter = itertools.count()
        self._nonce = secrets.token_hex(4)
        self.client = BlockingKernelClient()
        self.client.load_connection_file(connection_file)
        self.client.start_channels()

    def close(self) -> None:
        """Stop talking to this student's kernel (the test kernel goes on to
        the next submission)."""
        self.client.stop_channels()

    # -- binding names -------------------------------------------------------
    def stand_ins_for(self, name: str) -> dict[str, str]:
        """Sources of the correct stand-ins for what exercise ``name`` may call."""
        if not self.lab_id:
            return {}
        import importlib

        try:
            reference = importlib.import_module(f"autograder.references.{self.lab_id}")
        except ImportError:
            return {}
        names = getattr(reference, "STAND_INS", {}).get(name, [])
        sources = getattr(reference, "STAND_IN_SOURCES", {})
        return {dependency: sources[dependency] for dependency in names}

    def bind(self, namespace: dict, names) -> None:
        """Bind each of ``names`` in ``namespace`` to the student's object."""
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
                            kwargs=kwargs, source=source)

    def request(self, op: str, target: dict, label: str, stand_ins: dict,
                attr: str | None = None, args=(), kwargs=None, source: str | None = None):
        arrays: dict[str, np.ndarray] = {}
        number = next(self._counter)
        stem = self.exchange / f"{self._nonce}-{number}"
        payload = {
            "op": op,
            "target": target,
            "attr": attr,
            "args": _encode(list(args), arrays),
            "kwargs": _encode(dict(kwargs or {}), arrays),
            "stand_ins": stand_ins,
            "source": source,
            "answer": str(stem) + ".answer.json",
            "arrays": None,
        }
        if arrays:
            np.savez(str(stem) + ".args.npz", **arrays)
            payload["arrays"] = str(stem) + ".args.npz"
        request_path = str(stem) + ".request.json"
        Path(request_path).write_text(json.dumps(payload), encoding="utf-8")
        code = GLUE_CALL % (GLUE_KEY, GLUE_SOURCE, request_path)
        reply = self._execute(code, label)
        answer_path = Path(payload["answer"])
        if not answer_path.exists():
            content = reply.get("content", {})
            content = content.get("user_expressions", {}).get("call", content)
            raise StudentCodeError(
                f"`{label}` could not be run in your notebook's kernel "
                f"({content.get('ename', 'no answer')}: {content.get('evalue', '')})."
            )
        for path in (answer_path, Path(str(answer_path) + ".npz")):
            if path.exists() and path.stat().st_size > MAX_ANSWER_BYTES:
                raise StudentCodeError(
                    f"`{label}` returned {path.stat().st_size // 2**20} MiB of data; "
                    f"the tests expect small arrays."
                )
        answer = json.loads(answer_path.read_text(encoding="utf-8"))
        if not answer.get("ok"):
            if op == "many" and isinstance(answer.get("index"), int) \
                    and 0 <= answer["index"] < len(args):
                label = f"{label}.{args[answer['index']][0]}"
            raise StudentCodeError(_describe_failure(label, answer))
        arrays_out = {}
        if answer.get("arrays"):
            with np.load(answer["arrays"], allow_pickle=False) as loaded:
                arrays_out = {key: loaded[key] for key in loaded.files}
        return _decode(answer["value"], arrays_out, self, label, stand_ins)

    def _execute(self, code: str, label: str) -> dict:
        # Sent as a user expression, not as code: IPython evaluates user
        # expressions with a plain eval, past the input and AST transformers,
        # custom exception handlers and execution hooks a notebook may set up.
        # stop_on_error=False: never aborted because the request before it failed.
        msg_id = self.client.execute("", silent=True, store_history=False,
                                     user_expressions={"call": code}, allow_stdin=False,
                                     stop_on_error=False)
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._interrupt()
                raise StudentCodeError(
                    f"`{label}` did not return within {self.timeout:.0f} s (an infinite "
                    f"loop, or far too much work for these small inputs?)."
                )
            try:
                reply = self.client.get_shell_msg(timeout=min(remaining, 1.0))
            except Exception:  # noqa: BLE001 - queue.Empty
                if not self.client.is_alive():
                    raise StudentCodeError(
                        f"Your notebook's kernel died while `{label}` ran."
                    ) from None
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return reply

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
                self.client.get_shell_msg(timeout=0.5)
            except Exception:  # noqa: BLE001 - queue.Empty
                break


def _describe_failure(label: str, answer: dict) -> str:
    """The student's exception, with the last line of their code that ran."""
    where = ""
    for line in answer.get("traceback", "").splitlines():
        stripped = line.strip()
        if stripped.startswith("File ") and "<autograder>" not in stripped \
                and "<stand-in" not in stripped:
            where = stripped
    message = f"`{label}` raised {answer.get('type')}: {answer.get('message')}"
    if where and "ipykernel" in where or "tmp/ipykernel" in where:
        message += f" ({where.split(', ', 1)[-1]})"
    return message


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
    raise StudentCodeError(f"`{label}` returned something the grader cannot read.")
