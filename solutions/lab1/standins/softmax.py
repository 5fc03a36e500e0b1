import keras
import numpy as np
from keras import ops


def softmax(x, axis=-1):
    """Stable softmax along axis; -inf gets weight 0; an all -inf slice gets 0."""
    if ops.is_tensor(x):
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
