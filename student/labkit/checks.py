"""Visible checks: the cells that follow each exercise in the labs.

Each check prints a short "✓ <what>" when it passes and raises an
AssertionError that says what happened, what was expected and a hint when it
does not. They accept NumPy arrays, Python numbers and lists, and tensors of
any Keras backend.

These checks use small, hand-checkable examples. Your notebook is graded by
other (hidden) tests on other inputs, so passing these is necessary, not
sufficient. They compare numbers with the grader's tolerances (`RTOL`,
`ATOL`): a value that passes here is not failed there for rounding alone.

(For the kit's maintainers: labkit is installed on its own in the students'
notebooks and imports nothing of the grader, so it restates the grader's
numerical policy here; the kit's tests/student/test_student_package.py fails if the
two differ.)
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

__all__ = ["to_numpy", "check_close", "check_shape", "check_true", "check_tuple",
           "check_config", "check_raises", "check_gradient", "relying_on"]

_MAX_SHOWN = 24  # arrays up to this many values are printed in full

#: Relative tolerance of `check_close`: float32 results against float64
#: expectations (the grader's numerical policy; see the module's docstring).
RTOL = 1e-4
#: Absolute tolerance of `check_close` (matters where the expected value is close to 0).
ATOL = 1e-5


def _fail(message: str, hint: str = ""):
    if hint:
        message = f"{message}\nHint: {hint}"
    raise AssertionError(message)


def to_numpy(value, what: str = "value") -> np.ndarray:
    """``value`` (array, number, list or backend tensor) as a NumPy array."""
    if isinstance(value, np.ndarray):
        return value
    if value is None:
        _fail(f"{what}: got None, expected an array or tensor.",
              "did the function forget a `return` statement?")
    if isinstance(value, (tuple, list)) and any(
        not np.isscalar(item) and not isinstance(item, (list, tuple, np.ndarray))
        for item in value
    ):
        # A tuple of tensors, e.g. (output, weights): check each part on its own.
        _fail(f"{what}: got a {type(value).__name__} of {len(value)} items, "
              "expected a single array or tensor.")
    try:
        from keras import ops

        if ops.is_tensor(value):
            return np.asarray(ops.convert_to_numpy(value))
    except ImportError:
        pass
    try:
        array = np.asarray(value)
    except Exception as error:  # noqa: BLE001 - reported to the student
        _fail(f"{what}: could not read {type(value).__name__} as an array ({error}).")
    if array.dtype == object:
        _fail(f"{what}: expected numbers, got {type(value).__name__}.")
    return array


_MAX_WRONG_SHOWN = 6  # for larger arrays, this many wrong values with their index


def _show(array: np.ndarray) -> str:
    if array.size <= _MAX_SHOWN:
        return np.array2string(np.asarray(array, dtype=np.float64), precision=4,
                               suppress_small=True, separator=", ")
    return f"array of shape {array.shape}"


def _show_wrong(values: np.ndarray, expected: np.ndarray, bad: np.ndarray) -> str:
    """The first wrong values of a large array, each with its index."""
    lines = []
    for index in np.argwhere(bad)[:_MAX_WRONG_SHOWN]:
        where = tuple(int(i) for i in index)
        lines.append(f"  at {list(where)}: got {values[where]:.6g}, expected "
                     f"{expected[where]:.6g}")
    more = int(bad.sum()) - len(lines)
    if more > 0:
        lines.append(f"  ... and {more} more")
    return "\n".join(lines)


def check_shape(actual, expected_shape, what: str, hint: str = "") -> np.ndarray:
    """Check the shape of ``actual``; returns it as a NumPy array."""
    array = to_numpy(actual, what)
    expected_shape = tuple(int(n) for n in expected_shape)
    if tuple(array.shape) != expected_shape:
        _fail(f"{what}: the shape is {tuple(array.shape)}, expected {expected_shape}.",
              hint)
    print(f"✓ {what}: shape {expected_shape}")
    return array


def check_close(actual, expected, what: str, rtol: float = RTOL,
                atol: float = ATOL, hint: str = "") -> np.ndarray:
    """Check shape, finiteness and values of ``actual`` against ``expected``.

    Values pass when ``|actual - expected| <= atol + rtol * |expected|``.
    Returns ``actual`` as a NumPy array.
    """
    array = to_numpy(actual, what)
    expected = np.asarray(expected, dtype=np.float64)
    if tuple(array.shape) != tuple(expected.shape):
        _fail(f"{what}: the shape is {tuple(array.shape)}, expected "
              f"{tuple(expected.shape)}.", hint)
    values = array.astype(np.float64)
    if not np.all(np.isfinite(values)):
        count = int(values.size - np.count_nonzero(np.isfinite(values)))
        _fail(f"{what}: {count} of {values.size} values are NaN or infinite.\n"
              f"Got:      {_show(values)}", hint)
    difference = np.abs(values - expected)
    bad = difference > atol + rtol * np.abs(expected)
    if np.any(bad):
        if values.size <= _MAX_SHOWN:
            shown = f"Got:      {_show(values)}\nExpected: {_show(expected)}"
        else:
            shown = f"The first wrong values (shape {values.shape}):\n" + \
                _show_wrong(values, expected, bad)
        _fail(f"{what}: {int(bad.sum())} of {values.size} values are wrong "
              f"(largest difference {float(difference.max()):.3g}).\n{shown}", hint)
    print(f"✓ {what}")
    return array


def check_true(condition, what: str, message: str = "", hint: str = "") -> None:
    """Check a condition; ``message`` says what went wrong when it is false."""
    if not bool(condition):
        _fail(f"{what}: {message or 'the condition does not hold'}.", hint)
    print(f"✓ {what}")


def check_tuple(result, length: int, what: str, hint: str = "") -> tuple:
    """Check that ``result`` is a tuple (or list) of ``length`` items; returns it."""
    if not isinstance(result, (tuple, list)) or len(result) != length:
        got = (f"a {type(result).__name__} of {len(result)} items"
               if isinstance(result, (tuple, list)) else type(result).__name__)
        _fail(f"{what}: returned {got}, expected a tuple of {length} items.", hint)
    return tuple(result)


def check_config(layer_class, layer, expected: dict, hint: str = "") -> None:
    """Check that ``layer.get_config()`` holds ``expected`` (argument -> value)
    and that ``layer_class.from_config`` rebuilds a layer with the same.

    Every lab's visible checks of a config go through here, so that a missing
    or failing ``get_config`` gets the same words in every lab.
    """
    name = layer_class.__name__
    hint = hint or "get_config adds every constructor argument to super().get_config()."
    settings = ", ".join(f"{key}={value!r}" for key, value in expected.items())
    try:
        config = layer.get_config()
    except Exception as error:  # noqa: BLE001 - reported to the student
        check_true(False, f"{name}.get_config() has {settings}",
                   f"it raised {type(error).__name__}", hint=hint + (
                       " A keras.Model (or a layer with arguments Keras cannot read) needs a "
                       "get_config of its own." if isinstance(error, NotImplementedError) else ""))
    found = {key: config.get(key) for key in expected} if isinstance(config, dict) else config
    check_true(found == expected, f"{name}.get_config() has {settings}", f"it has {found}",
               hint=hint)
    try:
        clone = layer_class.from_config(config)
    except Exception as error:  # noqa: BLE001 - reported to the student
        check_true(False, f"{name}.from_config(layer.get_config()) rebuilds the layer",
                   f"it raised {type(error).__name__}: {error}",
                   hint="__init__ takes every argument get_config() returns under the same "
                        "names (and **kwargs for the base layer's).")
    check_true({key: clone.get_config().get(key) for key in expected} == expected,
               f"{name}.from_config(layer.get_config()) rebuilds the layer",
               "the clone has other arguments")


def check_raises(error_type, make, what: str, hint: str = "") -> None:
    """Check that ``make()`` raises ``error_type`` (e.g. ValueError for a bad argument)."""
    try:
        make()
        problem = "it raised nothing"
    except error_type:
        problem = ""
    except Exception as error:  # noqa: BLE001 - reported to the student
        problem = f"it raised {type(error).__name__}: {error}"
    check_true(not problem, f"{what} raises a {error_type.__name__}", problem, hint=hint)


def _gradient(function, value, others):
    """d function(value, *others) / d value, taken as Keras's ``fit`` takes it on the
    current backend: TensorFlow traced in a tf.function, JAX jit-compiled, PyTorch by
    autograd. None under a backend without gradients (numpy)."""
    import keras
    from keras import ops

    backend = keras.config.backend()
    value = np.asarray(value, dtype="float32")
    if backend == "tensorflow":
        import tensorflow as tf

        try:  # autograph, as fit applies it (Python control flow on tensors)
            converted = tf.autograph.to_graph(function)
        except Exception:  # noqa: BLE001 - no source to convert: called as it is
            converted = function

        @tf.function(autograph=False)
        def traced(x, *rest):
            with tf.GradientTape() as tape:
                tape.watch(x)
                result = converted(x, *rest)
            if not tf.is_tensor(result):
                raise TypeError(f"it returned {type(result).__name__}, not a tensor")
            gradient = tape.gradient(result, x)
            return tf.zeros_like(x) if gradient is None else gradient

        return np.asarray(traced(tf.constant(value), *(tf.constant(o) for o in others)))
    if backend == "jax":
        import jax

        def scalar(x, *rest):
            return jax.numpy.reshape(function(x, *rest), ())

        gradient = jax.jit(jax.grad(scalar))(jax.numpy.asarray(value),
                                             *(jax.numpy.asarray(o) for o in others))
        return np.asarray(gradient)
    if backend == "torch":
        import torch

        x = ops.convert_to_tensor(value)
        x.requires_grad_(True)
        result = function(x, *(ops.convert_to_tensor(o) for o in others))
        if not torch.is_tensor(result):
            raise TypeError(f"it returned {type(result).__name__}, not a tensor")
        if not result.requires_grad:
            raise TypeError("no gradient flows from what it returned back to its input")
        (gradient,) = torch.autograd.grad(result.sum(), x, allow_unused=True)
        return np.zeros_like(value) if gradient is None else ops.convert_to_numpy(gradient)
    return None


def check_gradient(function, value, expected, what: str, others=(), hint: str = ""):
    """Check that a gradient flows through ``function`` as ``model.fit`` needs it.

    ``function(x, *others)`` gets ``value`` and ``others`` as tensors of the Keras
    backend and must return a scalar tensor; its gradient with respect to ``x``,
    taken as ``fit`` takes it (TensorFlow: in a ``tf.function``; JAX: jit; PyTorch:
    autograd), must equal ``expected``. A function that leaves ``keras.ops`` (NumPy,
    ``float()``) fails here with its own name, not later inside ``fit``. Returns the
    gradient (None, unchecked, under the numpy backend, which has no gradients).
    """
    try:
        gradient = _gradient(function, value, others)
    except Exception as error:  # noqa: BLE001 - reported to the student
        text = str(error).strip()
        first = text.splitlines()[0][:300] if text else ""
        _fail(f"{what}: no gradient could be taken through it ({type(error).__name__}"
              f"{': ' + first if first else ''}).", hint)
    if gradient is None:
        print(f"… {what}: not checked (this backend has no gradients)")
        return None
    if not np.any(gradient) and np.any(np.asarray(expected)):
        _fail(f"{what}: the gradient is 0 everywhere: nothing flows from the result back "
              "to its input.", hint)
    return check_close(gradient, expected, what, hint=hint)


#: {exercise: [other exercises]}: checks whose failure ``relying_on`` did not count
#: against their exercise, because an exercise they call fails its own check.
#: labkit.ready reads it after each check.
WAITING: dict[str, list[str]] = {}


@contextlib.contextmanager
def relying_on(exercise: str, others, lab: str, scope: dict):
    """Run the part of ``exercise``'s check that calls the student's ``others``.

    The grader tests ``exercise`` with correct versions of the exercises it calls,
    so a mistake in one of those never costs ``exercise`` its points. The check
    does the same in its own way: when this part fails while one of ``others``
    fails its own visible check (run again here, from labkit's copy of the lab's
    checks, in a copy of ``scope``), the failure is shown but not raised, and the
    student is told which exercise to fix first. Otherwise the failure is raised
    as usual. A stub's NotImplementedError is always raised (not answered yet).
    """
    others = [others] if isinstance(others, str) else list(others)
    WAITING.pop(exercise, None)
    try:
        yield
    except Exception as error:  # noqa: BLE001 - raised again unless another exercise is wrong
        if _behind_a_stub(error):
            raise
        broken = [name for name in others if _fails_own_check(lab, name, scope)]
        if not broken:
            raise
        WAITING[exercise] = broken
        names = " and ".join(f"`{name}`" for name in broken)
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        print(f"… {first}\n  Not counted against `{exercise}`: your {names} "
              f"{'fail' if len(broken) > 1 else 'fails'} {'their' if len(broken) > 1 else 'its'} "
              f"own check above, and `{exercise}` may call {'them' if len(broken) > 1 else 'it'}. "
              f"Fix {names} first, then run this cell again.")


def _behind_a_stub(error: BaseException | None) -> bool:
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, NotImplementedError):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def _fails_own_check(lab: str, name: str, scope: dict) -> bool:
    """Whether exercise ``name``'s visible check (labkit's copy) fails in a copy of
    ``scope``; False when it cannot tell (no such check, or the check itself needs a
    cell that was not run)."""
    from labkit.readiness import lab_checks

    try:
        sources = {item["name"]: item["check"] for item in lab_checks(lab)["exercises"]}
    except Exception:  # noqa: BLE001 - no checks carried for the lab: cannot tell
        return False
    if name not in sources:
        return False
    if name not in scope:
        return True  # not answered (its cell not run): it fails its check too
    filename = f"<check of {name}>"
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(sources[name], filename, "exec"), dict(scope))
    except NameError as error:
        traceback = error.__traceback__
        while traceback is not None and traceback.tb_next is not None:
            traceback = traceback.tb_next
        return traceback is None or traceback.tb_frame.f_code.co_filename != filename
    except Exception:  # noqa: BLE001 - any failure of its check
        return True
    return False
