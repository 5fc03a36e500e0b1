import keras
from keras import ops


def masked_softmax(scores, mask):
    """Softmax over the last axis; mask False gets exactly 0; an all-False row -> 0."""
    from labkit.masking import large_negative

    scores = ops.convert_to_tensor(scores)
    if not keras.backend.is_float_dtype(scores.dtype):
        scores = ops.cast(scores, "float32")
    allowed = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(scores))
    hidden = ops.where(allowed, scores, large_negative(scores.dtype))
    weights = ops.softmax(hidden, axis=-1)
    return ops.where(allowed, weights, ops.zeros_like(weights))
