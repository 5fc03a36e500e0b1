"""Reference implementations of lab 1 ("attention from scratch"), instructor side.

Every function computes in float64 NumPy from whatever it is given, so the only
difference left between a student's float32 result and these values is float32
rounding (see autograder/testkernel/policy.py). They are written independently of the
solution cells in solutions/lab1 (they share the maths, not the code).

This module never ships to students: not in labs/, not in the `labkit` package.
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
    "scale_mistakes",
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


def scale_mistakes(query, key, value_dim: int, mask=None) -> list[tuple[np.ndarray, str]]:
    """The weights that the common mistakes of the scale give, each with what to
    tell the student (the hidden test names them; the picture of the weights too):
    no scale, d_k instead of sqrt(d_k), sqrt(d_v) instead of sqrt(d_k)."""
    query, key = _float64(query), _float64(key)
    scores = np.einsum("...qd,...kd->...qk", query, key)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    d_k = query.shape[-1]
    return [(softmax(guess, axis=-1), hint) for guess, hint in [
        (scores, "the scores are not scaled; divide by sqrt(d_k)"),
        (scores / d_k, "the scores are divided by d_k; divide by sqrt(d_k)"),
        (scores / np.sqrt(value_dim), "the scores are divided by sqrt(d_v), the size of "
         "the values; divide by sqrt(d_k), the size of the queries and keys")]]
