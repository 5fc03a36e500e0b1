import numpy as np
from keras import ops


def additive_scores(query, keys, W1, w2):
    """w2^T tanh(W1^T [q; k_i]) for every key -> (..., n)."""
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
