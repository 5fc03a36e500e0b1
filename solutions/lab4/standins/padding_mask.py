from keras import ops


def padding_mask(token_ids, pad_id=0):
    """(B, T) bool tensor, True for real tokens (ids other than pad_id)."""
    return ops.not_equal(ops.convert_to_tensor(token_ids), pad_id)
