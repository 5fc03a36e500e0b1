"""The large negative number that masks attention scores, for every dtype.

Masked scores get a large negative number before the softmax, so that their
weights come out as 0. `-inf` would do the same for most rows, but a row whose
keys are all masked is then all `-inf`, and the softmax gives 0 / 0 = NaN.
A finite number such as -1e9 keeps that row finite (its weights are uniform).

-1e9 is finite in float32 and bfloat16, but float16 stops at 65504: there
-1e9 rounds to `-inf`, and the NaN rows come back. `large_negative(dtype)`
gives -3e4 in float16 and -1e9 otherwise, as `keras.layers.Softmax` does
(keras/src/layers/activations/softmax.py, `_large_negative_number`).
"""

from __future__ import annotations

__all__ = ["large_negative"]


def large_negative(dtype) -> float:
    """A large negative number that is finite in ``dtype``.

    Args:
        dtype: the scores' dtype, in any form Keras reads: `"float32"`,
            `scores.dtype` of any backend, a NumPy dtype.

    Returns:
        -3e4 for float16, -1e9 for every other dtype.

    Example:

    >>> scores = ops.where(mask, scores, large_negative(scores.dtype))
    """
    from keras import backend

    if backend.standardize_dtype(dtype) == "float16":
        return -3e4
    return -1e9
