import numpy as np
from keras import ops


def dot_scores(query, keys):
    """q . k_i for every key: query (..., d), keys (..., n, d) -> (..., n)."""
    if ops.is_tensor(query) or ops.is_tensor(keys):
        return ops.sum(ops.expand_dims(query, -2) * keys, axis=-1)
    query, keys = np.asarray(query), np.asarray(keys)
    return np.sum(query[..., None, :] * keys, axis=-1)
