import numpy as np
from keras import ops


def greedy_decode(model, context_ids, max_length, start_id, end_id):
    """Stand-in: (B, L) ids after start_id, end_id included, 0 after it."""
    context_ids = np.asarray(ops.convert_to_numpy(context_ids))
    batch = context_ids.shape[0]
    generated = np.full((batch, 1), start_id, dtype="int32")
    finished = np.zeros(batch, dtype=bool)
    for _ in range(max_length):
        logits = np.asarray(ops.convert_to_numpy(model((context_ids, generated),
                                                       training=False)))
        token = np.argmax(logits[:, -1, :], axis=-1).astype("int32")
        token = np.where(finished, 0, token)
        generated = np.concatenate([generated, token[:, None]], axis=1)
        finished = finished | (token == end_id)
        if finished.all():
            break
    return generated[:, 1:]
