"""The wire format: what a request to the student's kernel carries, and how
an answer is read back.

Values travel as JSON (``{"t": kind, ...}``: _encode, _decode) with their
arrays beside them in an .npz. What is not data stays where it lives and
travels as a handle: a RemoteObject (the student's object, in their kernel)
or a HostedObject (the grader's, in the test kernel, whose callbacks'
values are _from_student and _to_student). Stand-ins and grader fixtures
travel compiled (ship_code; the glue checks MAGIC); answers are checked
before they are read (read_arrays) and capped (the limits below).

The requests and answers are specified in one place, the docstring of
autograder/studentkernel/__init__.py; glue.py is the other end.
"""

from __future__ import annotations

import ast
import base64
import functools
import importlib.util
import io
import marshal
import math
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

# The caps on an answer (what and why: autograder.limits); names of this
# module too, read at each use, here and by the client as wire.NAME (tests
# lower them here: wire.MAX_ANSWER_BYTES).
from autograder.limits import MAX_ANSWER_BYTES
from autograder.limits import MAX_ANSWER_JSON_BYTES as MAX_ANSWER_JSON_BYTES
from autograder.kernels.probe.errors import StudentCodeError
from autograder.testkernel.testing import not_numeric, to_numpy

if TYPE_CHECKING:
    from autograder.kernels.probe.client import StudentKernel

#: The arrays of one callback, at most: a hosted model's inputs are token ids
#: (a few thousand), so 16 MiB only stops a call meant to tie up the test kernel.
MAX_HOSTED_CALL_BYTES = 16 * 2**20

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


class Tensor:
    """Marks an argument to be passed as a backend tensor, not a NumPy array."""

    def __init__(self, array):
        self.array = np.asarray(array)


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


def _from_student(encoded, arrays, hosted: dict):
    """An argument of a callback: data, or a handle this kernel issued (a key
    of ``hosted``, StudentKernel's hosted objects)."""
    if not isinstance(encoded, dict):
        raise ValueError("malformed argument")
    kind = encoded.get("t")
    if kind == "plain" and (encoded.get("v") is None
                            or isinstance(encoded.get("v"), (bool, int, float, str))):
        return encoded["v"]
    if kind in ("list", "tuple") and isinstance(encoded.get("v"), list):
        items = [_from_student(item, arrays, hosted) for item in encoded["v"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict" and isinstance(encoded.get("v"), dict):
        return {str(key): _from_student(item, arrays, hosted)
                for key, item in encoded["v"].items()}
    if kind == "array" and encoded.get("key") in arrays:
        return arrays[encoded["key"]]
    if kind == "hosted" and encoded.get("id") in hosted:
        return hosted[encoded["id"]]
    raise ValueError(f"an argument of kind {kind!r} the grader does not take")


def _to_student(value, arrays, keep: Callable[[object], int]):
    """A hosted object's answer, encoded for the student's kernel: data as
    data (backend tensors as tensors), anything else as a new handle
    (``keep``: StudentKernel._keep)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"t": "plain", "v": value}
    if isinstance(value, (np.integer, np.floating)):
        return {"t": "plain", "v": value.item()}
    if isinstance(value, (list, tuple)):
        return {"t": type(value).__name__,
                "v": [_to_student(item, arrays, keep) for item in value]}
    if isinstance(value, Tensor):   # data to be a backend tensor there
        key = f"a{len(arrays)}"
        arrays[key] = value.array
        return {"t": "tensor", "key": key}
    if isinstance(value, np.ndarray) or _is_backend_tensor(value):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(value) if isinstance(value, np.ndarray) \
            else np.asarray(to_numpy(value))
        return {"t": "array" if isinstance(value, np.ndarray) else "tensor", "key": key}
    return {"t": "hosted", "id": keep(value)}
