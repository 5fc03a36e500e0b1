import math

import numpy as np
from keras import ops


def scaled_dot_product_attention(query, key, value, mask=None):
    """(output (..., T_q, d_v), weights (..., T_q, T_k)); fully masked rows -> 0."""
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
