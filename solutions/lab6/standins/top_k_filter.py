import numpy as np
from keras import ops


def top_k_filter(logits, k):
    """Stand-in: logits below the k-th largest of their row set to -inf (NumPy out)."""
    values = np.asarray(ops.convert_to_numpy(logits)).astype("float32")
    k = min(int(k), values.shape[-1])
    kth = np.sort(values, axis=-1)[..., -k][..., None]
    return np.where(values >= kth, values, -np.inf).astype("float32")
