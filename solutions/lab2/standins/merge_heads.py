import numpy as np
from keras import ops


def merge_heads(x):
    """(B, num_heads, T, depth) -> (B, T, num_heads * depth)."""
    if not isinstance(x, np.ndarray):  # a backend tensor (or a symbolic one)
        batch, num_heads, length, depth = x.shape
        batch = -1 if batch is None else batch
        length = ops.shape(x)[2] if length is None else length
        x = ops.transpose(x, (0, 2, 1, 3))
        return ops.reshape(x, (batch, length, num_heads * depth))
    batch, num_heads, length, depth = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, num_heads * depth)
