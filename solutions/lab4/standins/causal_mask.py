from keras import ops


def causal_mask(length):
    """(length, length) bool tensor, True on and below the diagonal."""
    positions = ops.arange(length)
    return ops.greater_equal(ops.expand_dims(positions, 1), ops.expand_dims(positions, 0))
