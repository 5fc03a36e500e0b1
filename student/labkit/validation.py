"""Argument checks for the layers of the labs, with Keras's error messages.

A layer that checks its constructor arguments at once fails with a clear
message where the mistake is, not with a shape error three cells later:

    ValueError: Received an invalid value for argument `num_heads`, expected a
    positive integer. Received: num_heads=0

Each check takes the argument's name and value, raises that ValueError (the
argument, what was expected, what was received) or returns the value as a
plain Python number, ready to be stored and returned by `get_config()`:

    self.num_heads = positive_int("num_heads", num_heads)
    self.dropout = rate("dropout", dropout)

`validate_layer_arguments(**arguments)` checks all the arguments of a
Transformer layer in one call, by their names (see its docstring).

Writing the checks by hand is just as good: the labs' tests accept any
ValueError.
"""

from __future__ import annotations

import numbers

__all__ = ["multiple_of", "positive_int", "rate", "validate_layer_arguments"]

_MAX_DIVISOR = 64  # the divisors a message lists, at most up to this one


def _invalid(name: str, expected: str, value) -> ValueError:
    return ValueError(f"Received an invalid value for argument `{name}`, expected "
                      f"{expected}. Received: {name}={value!r}")


def positive_int(name: str, value, allow_none: bool = False):
    """Check that ``value`` is an integer >= 1 (a size, a count).

    Args:
        name: the argument's name, for the error message.
        value: the value received; a Python or NumPy integer (not a bool).
        allow_none: accept None as well (an optional size, such as
            `value_dim`), and return it unchanged.

    Returns:
        ``value`` as a Python int (or None).

    Raises:
        ValueError: when ``value`` is not a positive integer.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        expected = "a positive integer" + (" or None" if allow_none else "")
        raise _invalid(name, expected, value)
    return int(value)


def rate(name: str, value) -> float:
    """Check that ``value`` is a number in [0, 1) (a dropout rate).

    A rate of 1 would drop everything, and Dropout's scale 1 / (1 - rate)
    would divide by zero, hence the open upper end.

    Returns:
        ``value`` as a Python float.

    Raises:
        ValueError: when ``value`` is not a number in [0, 1).
    """
    # The ignore: numbers.Real's stub has no __ge__ for `0 <= value`.
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 <= value < 1):  # type: ignore[operator]
        raise _invalid(name, "a number in [0, 1), such as 0.1", value)
    return float(value)


def multiple_of(name: str, value: int, divisor_name: str, divisor: int) -> int:
    """Check that ``value`` is a multiple of ``divisor`` (both positive ints).

    For `d_model` and `num_heads`: each head gets `d_model // num_heads`
    features, which covers `d_model` only when the division is exact.

    Returns:
        ``value``.

    Raises:
        ValueError: when ``divisor`` does not divide ``value``.
    """
    if value % divisor:
        divisors = [str(d) for d in range(1, min(value, _MAX_DIVISOR) + 1) if value % d == 0]
        raise ValueError(
            f"Received {name}={value!r} and {divisor_name}={divisor!r}: `{name}` must be a "
            f"multiple of `{divisor_name}`. Choose {divisor_name} among the divisors of "
            f"{name} ({', '.join(divisors)}{', ...' if value > _MAX_DIVISOR else ''}).")
    return value


def _is_rate(name: str) -> bool:
    return name == "dropout" or name.endswith("_rate")


def validate_layer_arguments(**arguments) -> None:
    """Check a Transformer layer's constructor arguments, by their names.

    - `dropout` and every name ending in `_rate` (`dropout_rate`) is a rate
      in [0, 1) (`rate`);
    - every other argument is a size or a count: a positive integer
      (`positive_int`);
    - when both are given, `d_model` must be a multiple of `num_heads`
      (`multiple_of`).

    Example:

    >>> validate_layer_arguments(d_model=6, num_heads=2, dff=24, dropout_rate=0.1)
    >>> validate_layer_arguments(d_model=6, num_heads=4)
    Traceback (most recent call last):
    ...
    ValueError: Received d_model=6 and num_heads=4: `d_model` must be a multiple of `num_heads`. ...

    Raises:
        ValueError: for the first invalid argument, naming it, what was
            expected and what was received.
    """
    for name, value in arguments.items():
        if _is_rate(name):
            rate(name, value)
        else:
            positive_int(name, value)
    if "d_model" in arguments and "num_heads" in arguments:
        multiple_of("d_model", arguments["d_model"], "num_heads", arguments["num_heads"])
