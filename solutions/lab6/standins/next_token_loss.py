import keras
from keras import ops


def next_token_loss(logits, token_ids, pad_id=0):
    """Stand-in: mean cross-entropy of logits[:, :-1] against token_ids[:, 1:], padding left out."""
    targets = token_ids[:, 1:]
    per_token = keras.losses.sparse_categorical_crossentropy(targets, logits[:, :-1, :],
                                                             from_logits=True)
    mask = ops.cast(ops.not_equal(targets, pad_id), per_token.dtype)
    return ops.sum(per_token * mask) / ops.maximum(ops.sum(mask), 1.0)
