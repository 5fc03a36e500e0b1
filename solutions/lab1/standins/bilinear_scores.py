import numpy as np
from keras import ops


def bilinear_scores(query, keys, W):
    """q^T W k_i for every key -> (..., n)."""
    if ops.is_tensor(query) or ops.is_tensor(keys) or ops.is_tensor(W):
        projected = ops.matmul(query, W)  # (..., d_k)
        return ops.sum(ops.expand_dims(projected, -2) * keys, axis=-1)
    projected = np.asarray(query) @ np.asarray(W)
    return np.sum(projected[..., None, :] * np.asarray(keys), axis=-1)
