from keras import ops


def combine_masks(query_mask=None, key_mask=None, causal=False):
    """(B, T_q, T_k) bool tensor: rows AND columns AND (causal) look-ahead.

    A missing mask allows everything and gives a length-1 axis, which
    broadcasts (with causal=True both lengths are the given mask's).
    """
    if query_mask is None and key_mask is None:
        raise ValueError("combine_masks needs query_mask or key_mask; got neither.")
    mask = None
    if query_mask is not None:
        mask = ops.expand_dims(ops.cast(query_mask, "bool"), 2)  # (B, T_q, 1)
    if key_mask is not None:
        columns = ops.expand_dims(ops.cast(key_mask, "bool"), 1)  # (B, 1, T_k)
        mask = columns if mask is None else ops.logical_and(mask, columns)
    if causal:
        given = query_mask if query_mask is not None else key_mask
        rows_length = ops.shape(given)[1]
        cols_length = ops.shape(key_mask if key_mask is not None else given)[1]
        rows = ops.expand_dims(ops.arange(rows_length), 1)
        cols = ops.expand_dims(ops.arange(cols_length), 0)
        mask = ops.logical_and(mask, ops.expand_dims(ops.greater_equal(rows, cols), 0))
    return mask
