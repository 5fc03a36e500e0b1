import numpy as np
from keras import ops


def attention_pool(query, keys, values):
    """(context (..., d_v), weights (..., n)) of unscaled dot-product attention."""
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
