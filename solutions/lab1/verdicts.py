"""Verdict suite of lab 1 (attention from scratch): correct variants and real mistakes.

Every source is a whole answer cell as a student would fill it. The notebook's
setup cell has already run `import numpy as np`, `import keras`,
`from keras import ops`, `import matplotlib.pyplot as plt` and
`from labkit import checks, plots`.
"""

from tests.verdicts import Mistake, own_share

VARIANTS = {
    "dot_scores": [
        '''
def dot_scores(query, keys):
    """einsum: contract the feature axis, keep the key axis."""
    return np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
''',
        '''
def dot_scores(query, keys):
    """Batched matrix-vector product: keys (..., n, d) @ query (..., d, 1)."""
    query, keys = np.asarray(query), np.asarray(keys)
    return (keys @ query[..., :, None])[..., 0]
''',
        '''
def dot_scores(query, keys):
    """A loop over the keys, one dot product per key."""
    query, keys = np.asarray(query), np.asarray(keys)
    scores = []
    for i in range(keys.shape[-2]):
        scores.append(np.sum(query * keys[..., i, :], axis=-1))
    return np.stack(scores, axis=-1)
''',
        '''
def dot_scores(query, keys):
    """keras.ops: broadcast the query over the keys, then sum."""
    return ops.sum(ops.expand_dims(query, axis=-2) * ops.convert_to_tensor(keys), axis=-1)
''',
    ],
    "softmax": [
        '''
def softmax(x, axis=-1):
    """keras.ops has a stable softmax; -inf gets weight 0."""
    return ops.softmax(ops.convert_to_tensor(x), axis=axis)
''',
        '''
def softmax(x, axis=-1):
    """exp(x - logsumexp(x)), the log-sum-exp made stable with the max."""
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=axis, keepdims=True)
    log_total = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return np.exp(x - log_total)
''',
        '''
def softmax(x, axis=-1):
    """Move `axis` to the end, work on the last axis, move it back."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    e = np.exp(x - x.max(axis=-1)[..., None])
    out = e / e.sum(axis=-1)[..., None]
    return np.moveaxis(out, -1, axis)
''',
        '''
def softmax(x, axis=-1):
    """One 1-D softmax per slice with np.apply_along_axis."""
    def one(row):
        e = np.exp(row - np.max(row))
        return e / e.sum()
    return np.apply_along_axis(one, axis, np.asarray(x))
''',
    ],
    "attention_pool": [
        '''
def attention_pool(query, keys, values):
    """Self-contained: einsum scores, stable softmax, einsum context."""
    query, keys, values = np.asarray(query), np.asarray(keys), np.asarray(values)
    scores = np.einsum("...d,...nd->...n", query, keys)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("...n,...nv->...v", weights, values)
    return context, weights
''',
        '''
def attention_pool(query, keys, values):
    """My helpers for the weights; the context as a (1, n) @ (n, d_v) product."""
    weights = softmax(dot_scores(query, keys))
    context = (weights[..., None, :] @ np.asarray(values))[..., 0, :]
    return (context, weights)
''',
        '''
def attention_pool(query, keys, values):
    """keras.ops throughout."""
    scores = ops.squeeze(ops.matmul(ops.convert_to_tensor(keys),
                                    ops.expand_dims(query, -1)), -1)   # (..., n)
    weights = ops.softmax(scores, axis=-1)
    context = ops.sum(ops.expand_dims(weights, -1) * ops.convert_to_tensor(values), axis=-2)
    return context, weights
''',
        '''
def attention_pool(query, keys, values):
    """The context accumulated key by key."""
    values = np.asarray(values)
    weights = np.asarray(softmax(dot_scores(query, keys), axis=-1))
    context = np.zeros(values.shape[:-2] + values.shape[-1:])
    for i in range(values.shape[-2]):
        context = context + weights[..., i:i + 1] * values[..., i, :]
    return context, weights
''',
    ],
    "bilinear_scores": [
        '''
def bilinear_scores(query, keys, W):
    """One einsum for q^T W k_i."""
    return np.einsum("...a,ab,...nb->...n", np.asarray(query), np.asarray(W),
                     np.asarray(keys))
''',
        '''
def bilinear_scores(query, keys, W):
    """Project the keys with W (W k_i), then the dot product with the query."""
    query, keys, W = np.asarray(query), np.asarray(keys), np.asarray(W)
    projected_keys = keys @ W.T                      # (..., n, d_q)
    return np.sum(query[..., None, :] * projected_keys, axis=-1)
''',
        '''
def bilinear_scores(query, keys, W):
    """q^T W is a query the size of a key: reuse my dot_scores."""
    return dot_scores(np.asarray(query) @ np.asarray(W), keys)
''',
        '''
def bilinear_scores(query, keys, W):
    """keras.ops: (1, d_q) @ W @ K^T, then drop the row axis."""
    row = ops.expand_dims(ops.convert_to_tensor(query), -2)          # (..., 1, d_q)
    scores = ops.matmul(ops.matmul(row, W), ops.swapaxes(keys, -1, -2))  # (..., 1, n)
    return ops.squeeze(scores, axis=-2)
''',
    ],
    "additive_scores": [
        '''
def additive_scores(query, keys, W1, w2):
    """A loop over the keys: stack [q; k_i], one hidden layer, dot with w2."""
    query, keys, W1, w2 = map(np.asarray, (query, keys, W1, w2))
    scores = []
    for i in range(keys.shape[-2]):
        stacked = np.concatenate([query, keys[..., i, :]], axis=-1)   # (..., d_q + d_k)
        scores.append(np.tanh(stacked @ W1) @ w2)
    return np.stack(scores, axis=-1)
''',
        '''
def additive_scores(query, keys, W1, w2):
    """np.repeat the query once per key, then einsum."""
    query, keys, W1, w2 = map(np.asarray, (query, keys, W1, w2))
    n = keys.shape[-2]
    repeated = np.repeat(query[..., None, :], n, axis=-2)            # (..., n, d_q)
    stacked = np.concatenate((repeated, keys), axis=-1)
    hidden = np.tanh(np.einsum("...nc,ch->...nh", stacked, W1))
    return np.einsum("...nh,h->...n", hidden, w2)
''',
        '''
def additive_scores(query, keys, W1, w2):
    """keras.ops: broadcast, concatenate, tanh, matmul."""
    query, keys = ops.convert_to_tensor(query), ops.convert_to_tensor(keys)
    shape = tuple(keys.shape[:-1]) + (query.shape[-1],)
    repeated = ops.broadcast_to(ops.expand_dims(query, -2), shape)
    hidden = ops.tanh(ops.matmul(ops.concatenate([repeated, keys], axis=-1), W1))
    return ops.matmul(hidden, ops.expand_dims(w2, -1))[..., 0]
''',
        '''
def additive_scores(query, keys, W1, w2):
    """W1^T [q; k] written as W1_q^T q + W1_k^T k with transposes."""
    query, keys, W1, w2 = map(np.asarray, (query, keys, W1, w2))
    W_q, W_k = np.split(W1, [query.shape[-1]], axis=0)
    from_query = np.einsum("hq,...q->...h", W_q.T, query)
    from_keys = np.einsum("hk,...nk->...nh", W_k.T, keys)
    return np.tanh(from_query[..., None, :] + from_keys) @ w2
''',
    ],
    "scaled_dot_product_attention": [
        '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """einsum; masked scores set to -inf and the all-masked rows set back to 0."""
    import math

    query = ops.convert_to_tensor(query)
    scores = ops.einsum("...qd,...kd->...qk", query, ops.convert_to_tensor(key))
    scores = scores / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = ops.where(mask, scores, float("-inf"))
    weights = ops.nan_to_num(ops.softmax(scores, axis=-1), nan=0.0)
    output = ops.einsum("...qk,...kv->...qv", weights, ops.convert_to_tensor(value))
    return output, weights
''',
        '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """Scale the queries first; an additive mask (1 - mask) * -1e9."""
    query = ops.convert_to_tensor(query)
    d_k = ops.shape(query)[-1]
    query = query / ops.sqrt(ops.cast(d_k, query.dtype))
    scores = ops.matmul(query, ops.swapaxes(ops.convert_to_tensor(key), -2, -1))
    if mask is not None:
        scores = scores + (1.0 - ops.cast(mask, scores.dtype)) * -1e9
    weights = ops.softmax(scores)
    return ops.matmul(weights, ops.convert_to_tensor(value)), weights
''',
        '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """ops.transpose with an explicit permutation, my own stable softmax."""
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    rank = len(key.shape)
    permutation = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = ops.matmul(query, ops.transpose(key, permutation)) * (key.shape[-1] ** -0.5)
    if mask is not None:
        scores = ops.where(ops.cast(mask, "bool"), scores, -1e9 * ops.ones_like(scores))
    scores = scores - ops.max(scores, axis=-1, keepdims=True)
    exps = ops.exp(scores)
    weights = exps / ops.sum(exps, axis=-1, keepdims=True)
    output = ops.matmul(weights, value)
    return output, weights
''',
        '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """Masked with the dtype's lowest finite value; the product written as a sum."""
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    scale = 1.0 / np.sqrt(float(ops.shape(key)[-1]))
    scores = ops.sum(ops.expand_dims(query, -2) * ops.expand_dims(key, -3), axis=-1) * scale
    if mask is not None:
        lowest = float(np.finfo(keras.backend.standardize_dtype(scores.dtype)).min)
        scores = ops.where(ops.logical_not(ops.cast(mask, "bool")), lowest, scores)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''',
    ],
}

MISTAKES = [
    # --- dot_scores --------------------------------------------------------------------
    Mistake("dot_scores", "keys_at_query_batch",
            "keys @ query: right for one query, but matmul treats a batch of queries as a matrix",
            '''
def dot_scores(query, keys):
    return np.asarray(keys) @ np.asarray(query).T
'''),
    Mistake("dot_scores", "tensordot_outer_batch",
            "np.tensordot over the last axes: every query meets every batch's keys",
            '''
def dot_scores(query, keys):
    return np.tensordot(np.asarray(query), np.asarray(keys), axes=([-1], [-1]))
'''),
    Mistake("dot_scores", "sum_over_keys",
            "the product is summed over the key axis instead of the feature axis",
            '''
def dot_scores(query, keys):
    query, keys = np.asarray(query), np.asarray(keys)
    return np.sum(query[..., None, :] * keys, axis=-2)
'''),
    Mistake("dot_scores", "cosine",
            "cosine similarity (both vectors normalised) instead of the dot product",
            '''
def dot_scores(query, keys):
    query, keys = np.asarray(query), np.asarray(keys)
    dots = np.sum(query[..., None, :] * keys, axis=-1)
    return dots / (np.linalg.norm(query, axis=-1, keepdims=True) * np.linalg.norm(keys, axis=-1))
'''),
    Mistake("dot_scores", "scaled_sqrt_d",
            "the scores divided by sqrt(d): that is the scaled dot product, not this exercise",
            '''
def dot_scores(query, keys):
    query, keys = np.asarray(query), np.asarray(keys)
    return np.sum(query[..., None, :] * keys, axis=-1) / np.sqrt(query.shape[-1])
'''),
    Mistake("dot_scores", "swapaxes_batch",
            "query @ keys^T without a key axis on the query: batches broadcast against each other",
            '''
def dot_scores(query, keys):
    return np.asarray(query) @ np.swapaxes(np.asarray(keys), -1, -2)
'''),
    # --- softmax -----------------------------------------------------------------------
    Mistake("softmax", "no_max_overflow",
            "no maximum subtracted: exp(1000) overflows to inf and the weights are NaN",
            '''
def softmax(x, axis=-1):
    e = np.exp(np.asarray(x))
    return e / np.sum(e, axis=axis, keepdims=True)
''', fails=("test_softmax__overflow",)),
    Mistake("softmax", "axis_ignored",
            "the `axis` argument is ignored: always the last axis",
            '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)
'''),
    Mistake("softmax", "no_keepdims",
            "keepdims forgotten: the max and the sum broadcast along the wrong axis",
            '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis)
'''),
    Mistake("softmax", "global_max",
            "the maximum of the whole array, not of each slice: rows far below it underflow to 0/0",
            '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x))
    return e / np.sum(e, axis=axis, keepdims=True)
''', fails=("test_softmax__overflow",)),
    Mistake("softmax", "global_sum",
            "divided by the sum of the whole array instead of the sum along `axis`",
            '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e)
'''),
    Mistake("softmax", "max_in_numerator_only",
            "the maximum subtracted in the numerator but not in the denominator",
            '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    return np.exp(x - m) / np.sum(np.exp(x), axis=axis, keepdims=True)
'''),
    Mistake("softmax", "log_softmax",
            "returns the log-softmax (the final exp forgotten)",
            '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
'''),
    # --- attention_pool ----------------------------------------------------------------
    Mistake("attention_pool", "scaled_scores",
            "the scores divided by sqrt(d): attention_pool uses plain dot scores",
            '''
def attention_pool(query, keys, values):
    query = np.asarray(query)
    weights = softmax(dot_scores(query, keys) / np.sqrt(query.shape[-1]), axis=-1)
    context = np.sum(weights[..., None] * np.asarray(values), axis=-2)
    return context, weights
'''),
    Mistake("attention_pool", "order_swapped",
            "returns (weights, context) instead of (context, weights)",
            '''
def attention_pool(query, keys, values):
    weights = softmax(dot_scores(query, keys), axis=-1)
    context = np.sum(weights[..., None] * np.asarray(values), axis=-2)
    return weights, context
'''),
    Mistake("attention_pool", "softmax_axis0",
            "the softmax taken over axis 0 (the batch) instead of the keys",
            '''
def attention_pool(query, keys, values):
    weights = softmax(dot_scores(query, keys), axis=0)
    context = np.sum(weights[..., None] * np.asarray(values), axis=-2)
    return context, weights
'''),
    Mistake("attention_pool", "context_wrong_axis",
            "the weighted values summed over the feature axis instead of the keys",
            '''
def attention_pool(query, keys, values):
    weights = softmax(dot_scores(query, keys), axis=-1)
    context = np.sum(weights[..., None] * np.asarray(values), axis=-1)
    return context, weights
'''),
    Mistake("attention_pool", "no_softmax",
            "the raw dot scores used as weights (softmax forgotten)",
            '''
def attention_pool(query, keys, values):
    weights = dot_scores(query, keys)
    context = np.sum(weights[..., None] * np.asarray(values), axis=-2)
    return context, weights
'''),
    Mistake("attention_pool", "context_from_scores",
            "the context weighted by the raw scores while the softmax weights are returned",
            '''
def attention_pool(query, keys, values):
    scores = dot_scores(query, keys)
    weights = softmax(scores, axis=-1)
    context = np.sum(scores[..., None] * np.asarray(values), axis=-2)
    return context, weights
'''),
    # --- bilinear_scores ---------------------------------------------------------------
    Mistake("bilinear_scores", "W_transposed",
            "q^T W^T k: W transposed (same shape only when W is square)",
            '''
def bilinear_scores(query, keys, W):
    query, keys, W = np.asarray(query), np.asarray(keys), np.asarray(W)
    projected = keys @ W                        # (..., n, d_q) only if W is square
    return np.sum(query[..., None, :] * projected, axis=-1)
'''),
    Mistake("bilinear_scores", "W_forgotten",
            "W left out: the plain dot product",
            '''
def bilinear_scores(query, keys, W):
    query, keys = np.asarray(query), np.asarray(keys)
    return np.sum(query[..., None, :] * keys, axis=-1)
'''),
    Mistake("bilinear_scores", "keys_T_all_axes",
            "q W K.T with .T, which reverses every axis of a batch of keys",
            '''
def bilinear_scores(query, keys, W):
    return np.asarray(query) @ np.asarray(W) @ np.asarray(keys).T
'''),
    Mistake("bilinear_scores", "sum_wrong_axis",
            "q^T W multiplied with the keys and summed over the key axis",
            '''
def bilinear_scores(query, keys, W):
    projected = np.asarray(query) @ np.asarray(W)
    return np.sum(projected[..., None, :] * np.asarray(keys), axis=-2)
'''),
    Mistake("bilinear_scores", "elementwise_W",
            "W applied entry by entry to the query (q * diag) instead of a matrix product",
            '''
def bilinear_scores(query, keys, W):
    query, keys, W = np.asarray(query), np.asarray(keys), np.asarray(W)
    projected = query * np.diag(W)
    return np.sum(projected[..., None, :] * keys, axis=-1)
'''),
    Mistake("bilinear_scores", "scaled",
            "an extra 1/sqrt(d_k) scaling that the bilinear score does not have",
            '''
def bilinear_scores(query, keys, W):
    keys = np.asarray(keys)
    projected = np.asarray(query) @ np.asarray(W)
    return np.sum(projected[..., None, :] * keys, axis=-1) / np.sqrt(keys.shape[-1])
'''),
    # --- additive_scores ---------------------------------------------------------------
    Mistake("additive_scores", "no_tanh",
            "tanh forgotten: w2^T W1^T [q; k]",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:])
    return (np.concatenate([repeated, keys], axis=-1) @ W1) @ w2
'''),
    Mistake("additive_scores", "key_first",
            "stacked as [k; q] instead of [q; k]",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:])
    return np.tanh(np.concatenate([keys, repeated], axis=-1) @ W1) @ w2
'''),
    Mistake("additive_scores", "tanh_outside",
            "tanh applied to the final score instead of the hidden layer",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:])
    return np.tanh(np.concatenate([repeated, keys], axis=-1) @ W1 @ w2)
'''),
    Mistake("additive_scores", "relu",
            "ReLU instead of tanh in the hidden layer",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:])
    return np.maximum(np.concatenate([repeated, keys], axis=-1) @ W1, 0.0) @ w2
'''),
    Mistake("additive_scores", "split_at_d_k",
            "W1 split after d_k rows instead of d_q (right only when d_q == d_k)",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys, W1 = np.asarray(query), np.asarray(keys), np.asarray(W1)
    d_k = keys.shape[-1]
    hidden = np.tanh((query @ W1[:d_k])[..., None, :] + keys @ W1[d_k:])
    return hidden @ w2
'''),
    Mistake("additive_scores", "w2_ignored",
            "the hidden units summed instead of weighted by w2",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:])
    return np.sum(np.tanh(np.concatenate([repeated, keys], axis=-1) @ W1), axis=-1)
'''),
    Mistake("additive_scores", "repeat_batch_first",
            "the query repeated along a new first axis: right for one query, wrong for a batch",
            '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.repeat(query[None], keys.shape[-2], axis=0)     # (n, ..., d_q)
    return np.tanh(np.concatenate([repeated, keys], axis=-1) @ W1) @ w2
'''),
    # --- scaled_dot_product_attention --------------------------------------------------
    Mistake("scaled_dot_product_attention", "no_scaling",
            "the scores not divided by sqrt(d_k)",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
    Mistake("scaled_dot_product_attention", "scale_by_dk",
            "the scores divided by d_k instead of sqrt(d_k)",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / d_k
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
    Mistake("scaled_dot_product_attention", "precedence_half_dk",
            "scores / d_k ** 1/2: operator precedence makes it d_k / 2, not sqrt(d_k)",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / (d_k ** 1/2)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
    Mistake("scaled_dot_product_attention", "scale_by_dv",
            "the scores divided by sqrt(d_v), the size of the values, not of the keys",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d = ops.shape(value)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / np.sqrt(d)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
    Mistake("scaled_dot_product_attention", "mask_inverted",
            "the mask read the wrong way round: True entries are the ones hidden",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, -1e9, scores)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''', fails=("test_scaled_dot_product_attention__masks",)),
    Mistake("scaled_dot_product_attention", "mask_ignored",
            "the mask argument accepted but never used",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / np.sqrt(d_k)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''', fails=("test_scaled_dot_product_attention__masks",)),
    Mistake("scaled_dot_product_attention", "softmax_over_queries",
            "the softmax taken over the queries (axis -2) instead of the keys",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-2)
    return ops.matmul(weights, value), weights
'''),
    # -inf masking: right wherever a query sees a key, NaN where it sees none. The
    # values keep their points; only the fully masked rows' share is lost.
    Mistake("scaled_dot_product_attention", "neg_inf_nan",
            "-inf masking without care: a query whose keys are all masked gets NaN",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, scores, float("-inf"))
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''', fails=("test_scaled_dot_product_attention__masked_rows",)),
    Mistake("scaled_dot_product_attention", "log_mask_nan",
            "an additive mask log(mask): 0 where allowed, -inf where masked, NaN on a query "
            "that sees no key",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    scores = ops.einsum("...qd,...kd->...qk", query, key) / np.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores + ops.log(ops.cast(mask, scores.dtype))   # log(0) = -inf
    weights = ops.softmax(scores, axis=-1)
    return ops.einsum("...qk,...kv->...qv", weights, value), weights
''', fails=("test_scaled_dot_product_attention__masked_rows",)),
    Mistake("scaled_dot_product_attention", "neg_inf_own_softmax",
            "-inf masking and a hand-written softmax: max - max = -inf - -inf = NaN on a query "
            "that sees no key",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    scores = scores / ops.sqrt(ops.cast(ops.shape(key)[-1], scores.dtype))
    if mask is not None:
        scores = ops.where(ops.cast(mask, "bool"), scores, -np.inf)
    exps = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
    weights = exps / ops.sum(exps, axis=-1, keepdims=True)
    return ops.matmul(weights, value), weights
''', fails=("test_scaled_dot_product_attention__masked_rows",)),
    Mistake("scaled_dot_product_attention", "mask_after_softmax",
            "the weights multiplied by the mask after the softmax, not renormalised",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / np.sqrt(d_k)
    weights = ops.softmax(scores, axis=-1)
    if mask is not None:
        weights = weights * ops.cast(mask, weights.dtype)
    return ops.matmul(weights, value), weights
''', fails=("test_scaled_dot_product_attention__masks",)),
    Mistake("scaled_dot_product_attention", "transpose_all_axes",
            "ops.transpose(key) reverses every axis, not only the last two",
            '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(query)[-1]
    scores = ops.matmul(query, ops.transpose(key)) / np.sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
]

#: Mistakes the visible check may let through, with the reason: none; every
#: mistake above fails the visible check of its exercise too.
HIDDEN_ONLY: dict[str, str] = {}

# Issue 47: each rule its own share. Every mistake above without `fails` loses its
# exercise's main tests cell and no other; these are wrong in every value they give.
MISTAKES = own_share(MISTAKES, {
    # Not a softmax at all: the weights do not sum to 1 (or are logarithms).
    ("softmax", "max_in_numerator_only"): ("test_softmax", "test_softmax__overflow",
                                           "test_softmax__masks"),
    ("softmax", "log_softmax"): ("test_softmax", "test_softmax__overflow",
                                 "test_softmax__masks"),
    # A query's weights do not sum to 1 over its keys, masked or not.
    ("scaled_dot_product_attention", "softmax_over_queries"): (
        "test_scaled_dot_product_attention", "test_scaled_dot_product_attention__masks"),
    # Raises on every input with a batch axis.
    ("scaled_dot_product_attention", "transpose_all_axes"): (),
})
