import numpy as np
from keras import ops


def split_heads(x, num_heads):
    """(B, T, num_heads * depth) -> (B, num_heads, T, depth)."""
    num_heads = int(num_heads)
    if not isinstance(x, np.ndarray):  # a backend tensor (or a symbolic one)
        batch, length, features = x.shape
        batch = -1 if batch is None else batch
        length = ops.shape(x)[1] if length is None else length
        x = ops.reshape(x, (batch, length, num_heads, features // num_heads))
        return ops.transpose(x, (0, 2, 1, 3))
    batch, length, features = x.shape
    return x.reshape(batch, length, num_heads, features // num_heads).transpose(0, 2, 1, 3)
