import numpy as np
from keras import ops


def top_p_filter(logits, p):
    """Stand-in: the fewest most probable tokens reaching p kept (the crossing one too)."""
    values = np.asarray(ops.convert_to_numpy(logits)).astype("float32")
    z = values.astype("float64")
    probabilities = np.exp(z - z.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    keep = np.zeros(values.shape, dtype=bool)
    np.put_along_axis(keep, order, np.cumsum(ranked, axis=-1) - ranked < p, axis=-1)
    return np.where(keep, values, -np.inf).astype("float32")
