"""Reference implementations of lab 1 ("attention from scratch"), instructor side.

Every function computes in float64 NumPy from whatever it is given, so the only
difference left between a student's float32 result and these values is float32
rounding (see autograder/testkernel/policy.py). They are written independently of the
solution cells in solutions/lab1 (they share the maths, not the code).

This module never ships to students: not in labs/, not in the `labkit` package.

Besides the references it holds what the grader needs so that a mistake costs
points in one exercise only:

- ``STAND_INS``: for each exercise, the OTHER exercises its solution may call.
- ``STAND_IN_SOURCES``: for each exercise that may be called that way, the
  source of a correct, self-contained function with the curriculum signature.
  While the grader tests an exercise, it defines these in the student's kernel
  in place of the student's own versions. A stand-in returns what it is given:
  NumPy in, NumPy out; a backend tensor in, a tensor out (``keras.ops``).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "dot_scores",
    "softmax",
    "attention_pool",
    "bilinear_scores",
    "additive_scores",
    "scaled_dot_product_attention",
    "STAND_INS",
    "STAND_IN_SOURCES",
    "HINTS",
]


def _float64(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def dot_scores(query, keys):
    """q . k_i for every key: query `(..., d)`, keys `(..., n, d)` -> `(..., n)`."""
    query, keys = _float64(query), _float64(keys)
    return np.einsum("...d,...nd->...n", query, keys)


def softmax(x, axis=-1):
    """Stable softmax along ``axis``; -inf gets weight 0.

    A slice where every entry is -inf (a fully masked row) gets all zeros, so
    the result is always finite. Such rows are not graded.
    """
    x = _float64(x)
    with np.errstate(all="ignore"):
        largest = np.max(x, axis=axis, keepdims=True)
        largest = np.where(np.isfinite(largest), largest, 0.0)
        exponentials = np.exp(x - largest)
        total = np.sum(exponentials, axis=axis, keepdims=True)
        return exponentials / np.where(total > 0, total, 1.0)


def attention_pool(query, keys, values):
    """Dot-product attention of one query (per batch entry), no scaling.

    query `(..., d)`, keys `(..., n, d)`, values `(..., n, d_v)` ->
    ``(context (..., d_v), weights (..., n))``.
    """
    weights = softmax(dot_scores(query, keys), axis=-1)  # (..., n)
    context = np.einsum("...n,...nv->...v", weights, _float64(values))
    return context, weights


def bilinear_scores(query, keys, W):
    """q^T W k_i for every key: query `(..., d_q)`, keys `(..., n, d_k)`,
    W `(d_q, d_k)` -> `(..., n)`."""
    query, keys, W = _float64(query), _float64(keys), _float64(W)
    return np.einsum("...q,qk,...nk->...n", query, W, keys)


def additive_scores(query, keys, W1, w2):
    """w2^T tanh(W1^T [q; k_i]) for every key.

    query `(..., d_q)`, keys `(..., n, d_k)`, W1 `(d_q + d_k, h)`, w2 `(h,)`
    -> `(..., n)`.
    """
    query, keys = _float64(query), _float64(keys)
    W1, w2 = _float64(W1), _float64(w2)
    d_q = query.shape[-1]
    # W1^T [q; k] = W1[:d_q]^T q + W1[d_q:]^T k, with q repeated for every key.
    from_query = query @ W1[:d_q]  # (..., h)
    from_keys = keys @ W1[d_q:]  # (..., n, h)
    hidden = np.tanh(from_query[..., None, :] + from_keys)  # (..., n, h)
    return hidden @ w2  # (..., n)


def scaled_dot_product_attention(query, key, value, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V with an optional boolean mask.

    query `(..., T_q, d_k)`, key `(..., T_k, d_k)`, value `(..., T_k, d_v)`,
    mask broadcastable to `(..., T_q, T_k)` (True = may attend) ->
    ``(output (..., T_q, d_v), weights (..., T_q, T_k))``. Fully masked rows
    get zero weights (finite; not graded).
    """
    query, key, value = _float64(query), _float64(key), _float64(value)
    d_k = query.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", query, key) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k)
    output = np.einsum("...qk,...kv->...qv", weights, value)
    return output, weights


#: For each exercise, the other exercises its solution may call. While the
#: grader tests the key, it replaces each listed name in the student's kernel
#: by its stand-in (STAND_IN_SOURCES), so an error there costs nothing here.
STAND_INS = {
    "dot_scores": [],
    "softmax": [],
    "attention_pool": ["dot_scores", "softmax"],
    # q^T W k = (q^T W) . k: a natural solution calls dot_scores.
    "bilinear_scores": ["dot_scores"],
    # w2 . tanh(...) for every key can also be written with dot_scores.
    "additive_scores": ["dot_scores"],
    "scaled_dot_product_attention": ["softmax", "dot_scores"],
}


_DOT_SCORES_SOURCE = '''
def dot_scores(query, keys):
    """q . k_i for every key: query (..., d), keys (..., n, d) -> (..., n)."""
    import numpy as np
    from keras import ops

    if ops.is_tensor(query) or ops.is_tensor(keys):
        return ops.sum(ops.expand_dims(query, -2) * keys, axis=-1)
    query, keys = np.asarray(query), np.asarray(keys)
    return np.sum(query[..., None, :] * keys, axis=-1)
'''

_SOFTMAX_SOURCE = '''
def softmax(x, axis=-1):
    """Stable softmax along axis; -inf gets weight 0; an all -inf slice gets 0."""
    import numpy as np
    from keras import ops

    if ops.is_tensor(x):
        import keras

        if not keras.backend.is_float_dtype(x.dtype):
            x = ops.cast(x, "float32")
        largest = ops.max(x, axis=axis, keepdims=True)
        largest = ops.where(ops.isfinite(largest), largest, ops.zeros_like(largest))
        exponentials = ops.exp(x - ops.stop_gradient(largest))
        total = ops.sum(exponentials, axis=axis, keepdims=True)
        return exponentials / ops.where(total > 0, total, ops.ones_like(total))
    x = np.asarray(x)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        largest = np.max(x, axis=axis, keepdims=True)
        largest = np.where(np.isfinite(largest), largest, 0.0)
        exponentials = np.exp(x - largest)
        total = np.sum(exponentials, axis=axis, keepdims=True)
        return (exponentials / np.where(total > 0, total, 1.0)).astype(dtype)
'''

_ATTENTION_POOL_SOURCE = '''
def attention_pool(query, keys, values):
    """(context (..., d_v), weights (..., n)) of unscaled dot-product attention."""
    import numpy as np
    from keras import ops

    if ops.is_tensor(query) or ops.is_tensor(keys) or ops.is_tensor(values):
        scores = ops.sum(ops.expand_dims(query, -2) * keys, axis=-1)
        weights = ops.softmax(scores, axis=-1)
        context = ops.sum(ops.expand_dims(weights, -1) * values, axis=-2)
        return context, weights
    query, keys, values = np.asarray(query), np.asarray(keys), np.asarray(values)
    scores = np.sum(query[..., None, :] * keys, axis=-1)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    context = np.sum(weights[..., None] * values, axis=-2)
    return context, weights
'''

_BILINEAR_SCORES_SOURCE = '''
def bilinear_scores(query, keys, W):
    """q^T W k_i for every key -> (..., n)."""
    import numpy as np
    from keras import ops

    if ops.is_tensor(query) or ops.is_tensor(keys) or ops.is_tensor(W):
        projected = ops.matmul(query, W)  # (..., d_k)
        return ops.sum(ops.expand_dims(projected, -2) * keys, axis=-1)
    projected = np.asarray(query) @ np.asarray(W)
    return np.sum(projected[..., None, :] * np.asarray(keys), axis=-1)
'''

_ADDITIVE_SCORES_SOURCE = '''
def additive_scores(query, keys, W1, w2):
    """w2^T tanh(W1^T [q; k_i]) for every key -> (..., n)."""
    import numpy as np
    from keras import ops

    if any(ops.is_tensor(a) for a in (query, keys, W1, w2)):
        d_q = ops.shape(query)[-1]
        from_query = ops.matmul(query, W1[:d_q])  # (..., h)
        from_keys = ops.matmul(keys, W1[d_q:])  # (..., n, h)
        hidden = ops.tanh(ops.expand_dims(from_query, -2) + from_keys)
        return ops.sum(hidden * w2, axis=-1)
    query, keys = np.asarray(query), np.asarray(keys)
    W1, w2 = np.asarray(W1), np.asarray(w2)
    d_q = query.shape[-1]
    hidden = np.tanh((query @ W1[:d_q])[..., None, :] + keys @ W1[d_q:])
    return hidden @ w2
'''

_SCALED_DOT_PRODUCT_ATTENTION_SOURCE = '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """(output (..., T_q, d_v), weights (..., T_q, T_k)); fully masked rows -> 0."""
    import math
    import numpy as np
    from keras import ops

    tensors = [a for a in (query, key, value, mask) if a is not None]
    if any(ops.is_tensor(a) for a in tensors):
        query = ops.convert_to_tensor(query)
        d_k = query.shape[-1]
        scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / math.sqrt(d_k)
        if mask is not None:
            scores = ops.where(ops.cast(mask, "bool"), scores,
                               ops.full_like(scores, float("-inf")))
        largest = ops.max(scores, axis=-1, keepdims=True)
        largest = ops.where(ops.isfinite(largest), largest, ops.zeros_like(largest))
        exponentials = ops.exp(scores - largest)
        total = ops.sum(exponentials, axis=-1, keepdims=True)
        weights = exponentials / ops.where(total > 0, total, ops.ones_like(total))
        return ops.matmul(weights, value), weights
    query, key, value = np.asarray(query), np.asarray(key), np.asarray(value)
    d_k = query.shape[-1]
    scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(d_k)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    with np.errstate(all="ignore"):
        largest = np.max(scores, axis=-1, keepdims=True)
        largest = np.where(np.isfinite(largest), largest, 0.0)
        exponentials = np.exp(scores - largest)
        total = np.sum(exponentials, axis=-1, keepdims=True)
        weights = exponentials / np.where(total > 0, total, 1.0)
    return weights @ value, weights
'''

#: name -> source of a correct, self-contained function with the curriculum
#: signature (imports inside the body), defined in the student's kernel in
#: place of the student's own while another exercise is tested.
STAND_IN_SOURCES = {
    "dot_scores": _DOT_SCORES_SOURCE.strip() + "\n",
    "softmax": _SOFTMAX_SOURCE.strip() + "\n",
    "attention_pool": _ATTENTION_POOL_SOURCE.strip() + "\n",
    "bilinear_scores": _BILINEAR_SCORES_SOURCE.strip() + "\n",
    "additive_scores": _ADDITIVE_SCORES_SOURCE.strip() + "\n",
    "scaled_dot_product_attention": _SCALED_DOT_PRODUCT_ATTENTION_SOURCE.strip() + "\n",
}

#: exercise -> one sentence shown on the feedback page of a student who lost
#: its points.
HINTS = {
    "dot_scores": (
        "Multiply the query with each key entry by entry and sum over the last axis: "
        "add an axis to the query (query[..., None, :]) so it broadcasts over the n keys."
    ),
    "softmax": (
        "Subtract the maximum along `axis` (keepdims=True) before np.exp, then divide by "
        "the sum along the same axis; -inf entries then get weight 0 and 1000 does not "
        "overflow."
    ),
    "attention_pool": (
        "The weights are the softmax of the plain (unscaled) dot scores over the n keys, "
        "and the context is the sum of the values weighted by them; return "
        "(context, weights) in that order."
    ),
    "bilinear_scores": (
        "Compute q^T W once (it has the size of a key), then take its dot product with "
        "each key."
    ),
    "additive_scores": (
        "Stack the query first, [q; k_i], for every key, apply tanh to W1^T [q; k_i] "
        "and take the dot product with w2."
    ),
    "scaled_dot_product_attention": (
        "Divide Q K^T by sqrt(d_k), give masked scores (mask False) a large negative "
        "value, take the softmax over the keys (last axis) and return (weights @ V, "
        "weights), written with keras.ops."
    ),
}
