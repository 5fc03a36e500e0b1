"""Helpers for hidden tests.

Hidden tests run in the grader's clean test kernel, never in the student's
process: there, each student name (``dot_scores``, ``MultiHeadAttention``...)
is a proxy that calls into the student's sandboxed kernel with the inputs the
test gives it and brings back plain NumPy arrays. The comparisons below
therefore run on code the student cannot touch.

The messages they raise end up in the student's feedback: they say what was
called, what was wrong (shape, NaN, values) and by how much, and never print
the reference values in full.

The same hidden tests also run in place, when the source notebook runs top
to bottom: student names are then the solution's own objects and results
are backend tensors. ``to_numpy``, ``tensor``, ``raised`` and ``constructor``
let one test serve both (autograder.testkernel.layers does the same for
layers and their sublayers).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from autograder.testkernel import policy

__all__ = [
    "rng",
    "not_numeric",
    "as_array",
    "assert_shape",
    "assert_finite",
    "assert_close",
    "assert_true",
    "to_numpy",
    "tensor",
    "raised",
    "constructor",
    "computed_once",
    "keep",
    "kept",
]


def rng(label: str) -> np.random.Generator:
    """A random generator for the inputs of one test.

    The seed mixes a secret of the submission (``AUTOGRADER_SEED``: the
    grader draws one for each grading run and mixes it with the submission's
    code for each submission, autograder.grader.worker.submission_seed) with
    ``label``, so the inputs cannot be known in advance by a submission, are
    not those of any other submission, yet a run can be replayed with the
    same seed.
    """
    secret = os.environ.get("AUTOGRADER_SEED", "0")
    digest = hashlib.sha256(f"{secret}:{label}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


#: dtype kinds a comparison accepts: bool, signed and unsigned int, float.
NUMERIC_KINDS = "biuf"

_KIND_WORDS = {"U": "text", "S": "bytes (text)", "O": "Python objects",
               "M": "dates", "m": "time spans", "c": "complex numbers",
               "V": "raw records"}


def not_numeric(dtype, what: str) -> str:
    """Why an array of ``dtype`` cannot be compared with numbers ("" when it can).

    Only bool, int and float arrays are compared: converted to float64, text
    such as "nan" becomes NaN, and NaN fails no tolerance test (NaN > allowed
    is False), so a text answer would pass wherever it is not refused first.
    autograder.kernels.probe refuses such arrays as they come back from the
    student's kernel; this covers the tests run in place.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in NUMERIC_KINDS:
        return ""
    words = _KIND_WORDS.get(dtype.kind, "values that are not numbers")
    return (f"{what}: returned an array of {words} (dtype {dtype}), expected numbers "
            f"(bool, int or float). Compute the result from the inputs with keras.ops "
            f"or NumPy and return it as a float array (e.g. ops.cast(x, \"float32\")), "
            f"not as text or objects.")


def as_array(value, what: str) -> np.ndarray:
    """``value`` as a numeric NumPy array, or an AssertionError that says why not."""
    if isinstance(value, np.ndarray):
        array = value
    else:
        if type(value).__module__.startswith("torch"):
            # Run in place (not graded), a layer's output under the torch backend
            # requires grad or lives on a GPU, which np.asarray refuses.
            value = value.detach().cpu()
        try:
            array = np.asarray(value)
        except Exception as error:  # noqa: BLE001 - reported to the student
            raise AssertionError(
                f"{what}: expected an array or tensor, got {type(value).__name__} "
                f"({error})."
            ) from None
        if array.dtype == object:
            raise AssertionError(
                f"{what}: expected a numeric array or tensor, got {type(value).__name__}."
            )
    problem = not_numeric(array.dtype, what)
    if problem:
        raise AssertionError(problem)
    return array


def assert_shape(actual, expected_shape, what: str) -> np.ndarray:
    """Check the shape of ``actual``; returns it as an array."""
    array = as_array(actual, what)
    expected_shape = tuple(int(n) for n in expected_shape)
    if tuple(array.shape) != expected_shape:
        raise AssertionError(
            f"{what}: returned shape {tuple(array.shape)}, expected {expected_shape}."
        )
    return array


def assert_finite(actual, what: str) -> np.ndarray:
    """Check that ``actual`` has no NaN or infinity."""
    array = as_array(actual, what)
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        count = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
        raise AssertionError(
            f"{what}: {count} of {array.size} values are NaN or infinite."
        )
    return array


def assert_close(actual, expected, what: str, rtol: float | None = None,
                 atol: float | None = None) -> None:
    """Check shape, finiteness and values of ``actual`` against ``expected``.

    Tolerances default to the grader's numerical policy (autograder.testkernel.policy).
    """
    rtol = policy.RTOL if rtol is None else rtol
    atol = policy.ATOL if atol is None else atol
    expected = np.asarray(expected, dtype=np.float64)
    array = assert_shape(actual, expected.shape, what)
    array = assert_finite(array, what).astype(np.float64)
    difference = np.abs(array - expected)
    allowed = atol + rtol * np.abs(expected)
    bad = difference > allowed
    _log_precision(what, difference, allowed, expected)
    if np.any(bad):
        worst = np.unravel_index(np.argmax(difference - allowed), difference.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {array.size} values differ from the "
            f"expected ones (largest difference {float(difference[worst]):.3g} at "
            f"index {tuple(int(i) for i in worst)})."
        )


def _log_precision(what: str, difference, allowed, expected) -> None:
    """Append the comparison's worst case to $LABKIT_PRECISION_LOG, when set.

    benchmarks/numerical_policy.py sets it in the grader's environment (the
    test kernel inherits it; the student's sandboxed kernel never sees it) to
    measure how close correct float32 answers come to the tolerances.
    """
    log = os.environ.get("LABKIT_PRECISION_LOG")
    if not log or difference.size == 0:
        return
    import json

    sizeable = np.abs(expected) >= 1e-3     # relative error where it means something
    relative = difference[sizeable] / np.abs(expected[sizeable])
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({
            "what": what[:200],
            "max_abs": float(difference.max()),
            "max_rel": float(relative.max()) if relative.size else 0.0,
            "used": float((difference / allowed).max()),   # 1.0 = at the tolerance
        }) + "\n")


def assert_true(condition, message: str) -> None:
    """``assert`` that survives ``python -O`` and always carries a message."""
    if not bool(condition):
        raise AssertionError(message)


# --- one hidden test under the grader and in the source notebook ------------------


def to_numpy(value):
    """A result of the student's code as NumPy (proxies already give NumPy)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, list, tuple)) or value is None:
        return np.asarray(value)
    from keras import ops  # only in the source notebook, where tensors come back

    return np.asarray(ops.convert_to_numpy(value))


def tensor(array, like):
    """``array`` to be passed as a backend tensor to ``like`` (a student name or
    an object it returned)."""
    from autograder.kernels.probe import RemoteObject, Tensor

    if isinstance(like, RemoteObject):
        return Tensor(array)
    from keras import ops

    return ops.convert_to_tensor(array)


def raised(make) -> tuple[str | None, str]:
    """Run ``make()``; return (the name of the exception it raised or None, message)."""
    import re

    from autograder.kernels.probe import StudentCodeError

    try:
        make()
    except StudentCodeError as error:
        match = re.search(r"raised (\w+)", str(error))
        return (match.group(1) if match else "StudentCodeError"), str(error)
    except Exception as error:  # noqa: BLE001 - the solution run in place
        return type(error).__name__, str(error)
    return None, ""


def constructor(namespace: dict):
    """The test kernel's ``construct_in_student_kernel``, or a local stand-in.

    In the source notebook (no grader) the fixture is simply built in place.
    """
    construct = namespace.get("construct_in_student_kernel")
    if construct is not None:
        return construct

    def construct_locally(source, name, *args, **kwargs):
        scope: dict = {}
        exec(compile(source, "<grader fixture>", "exec"), scope)
        return scope[name](*args, **kwargs)

    return construct_locally


def hoster(namespace: dict):
    """The test kernel's ``StudentKernel.host``, or (in the source notebook, no
    grader) a function that returns the object itself.

    A hidden test hands a grader's model to a student function as
    ``host(model)``: under the grader the model stays in the test kernel and
    the student's code only calls it (autograder.kernels.probe.HostedObject),
    so what the test reads of it afterwards (its call log) is the grader's own.
    """
    kernel = namespace.get("__autograder_kernel__")
    if kernel is not None:
        from autograder.kernels.probe import Tensor

        def host_remotely(obj, label: str = "the grader's model"):
            # A model with an ``as_tensor`` (lab 6's hand-made language models)
            # answers with tensors: sent as data, made backend tensors in the
            # student's kernel, so this kernel need not import Keras for them.
            if hasattr(obj, "as_tensor"):
                obj.as_tensor = Tensor
            return kernel.host(obj, label)

        return host_remotely

    def host_locally(obj, label: str = "the grader's model"):
        return obj

    return host_locally


def hosted(obj):
    """The grader's object behind ``host(obj)``'s result (itself when local)."""
    return getattr(obj, "target", obj) if type(obj).__name__ == "HostedObject" else obj


# --- the student's side: a layer built once a submission --------------------------

#: The key, in a tests cell's globals, of the layers kept for the submission's
#: later tests cells (keep, kept). The test kernel's namespace is reset
#: between submissions, so nothing kept outlives one.
KEPT = "__autograder_kept__"


def _kept_key(name: str, arguments: dict) -> tuple:
    return (name, repr(sorted(arguments.items())))


def keep(namespace: dict, name: str, arguments: dict, layer) -> None:
    """Keep ``layer``, the student's ``name(**arguments)`` already built (its
    first call answered), for the submission's later tests cells (kept).

    Building a Keras layer (its sublayers made, their weights created) costs
    several of its calls; a property test of the same arguments takes this
    one and gives it its own weights. ``namespace``: the tests cell's
    globals, reset between submissions (in the verdict suite's in-process
    tier a copy for each answer; in the source notebook, the notebook's own).
    """
    namespace.setdefault(KEPT, {})[_kept_key(name, arguments)] = layer


def kept(namespace: dict, name: str, arguments: dict):
    """The layer an earlier tests cell of this submission kept for
    ``name(**arguments)``, or None (the test then builds its own, and its
    first call reports what goes wrong in its own feedback)."""
    return namespace.get(KEPT, {}).get(_kept_key(name, arguments))


# --- the reference side, computed once ---------------------------------------------------


def _digest(value, into) -> None:
    """Feed ``value`` (arrays, numbers, text, None, and tuples, lists and dicts of
    them) into the hash ``into``; anything else is refused (not a pure input)."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        array = np.ascontiguousarray(value)
        into.update(f"a{array.dtype.str}{array.shape}".encode())
        into.update(array.tobytes())
    elif value is None or isinstance(value, (bool, int, float, str)):
        into.update(f"{type(value).__name__}:{value!r};".encode())
    elif isinstance(value, (tuple, list)):
        into.update(f"{type(value).__name__}{len(value)}(".encode())
        for item in value:
            _digest(item, into)
        into.update(b")")
    elif isinstance(value, dict):
        into.update(f"d{len(value)}(".encode())
        for key in sorted(value, key=repr):
            _digest(key, into)
            _digest(value[key], into)
        into.update(b")")
    else:
        raise TypeError(f"computed_once: an argument of type {type(value).__name__} "
                        "is not a value it can key on")


def computed_once(function=None, *, entries: int = 256):
    """Keep ``function``'s results by the value of its arguments.

    For the reference side of hidden tests that costs real work (a Keras layer
    given weights): what the same inputs ask again (within a submission, or
    a notebook with the same code, which gets the same inputs) is computed
    once. Each submission's inputs are its own
    (autograder.grader.worker.submission_seed), so what does not depend on
    them (a layer built for a configuration) is better kept apart (lab 2's
    reference: ``functools.lru_cache``). Only the grader's values go in
    (arrays, numbers, text); a result's arrays are handed out as copies, so
    no caller changes what the next one gets.
    """
    import copy
    import functools
    from collections import OrderedDict

    def decorate(inner):
        kept: OrderedDict = OrderedDict()

        @functools.wraps(inner)
        def wrapper(*args, **kwargs):
            key = hashlib.sha256()
            _digest((list(args), kwargs), key)
            digest = key.digest()
            if digest in kept:
                kept.move_to_end(digest)
            else:
                kept[digest] = inner(*args, **kwargs)
                if len(kept) > entries:
                    kept.popitem(last=False)
            return copy.deepcopy(kept[digest])

        wrapper.cache_clear = kept.clear
        return wrapper

    return decorate(function) if function is not None else decorate

