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
numerical policy here; the kit's tests/test_student_package.py fails if the
two differ.)
"""

from __future__ import annotations

import numpy as np

__all__ = ["to_numpy", "check_close", "check_shape", "check_true", "check_tuple",
           "check_config", "check_raises"]

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
    and that ``layer_class.from_config`` rebuilds a layer with the same."""
    name = layer_class.__name__
    config = layer.get_config()
    found = {key: config.get(key) for key in expected} if isinstance(config, dict) else config
    settings = ", ".join(f"{key}={value!r}" for key, value in expected.items())
    check_true(found == expected, f"{name}.get_config() has {settings}", f"it has {found}",
               hint=hint or "get_config adds every constructor argument to "
                            "super().get_config().")
    clone = layer_class.from_config(config)
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
