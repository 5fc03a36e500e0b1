"""Sample submissions of lab 1 (attention): the interface is tests/samples.py's.

Correct answers written differently from the solution (einsum scores, a
split W1 in the additive scores, keras.ops attention), the mistakes students
really make (no max in the softmax, the wrong axis, tanh forgotten, d_k for
sqrt(d_k), a typo that raises), the untouched notebook, a copy saved by Colab
and a download cut short. `python data/sample_submissions/build.py lab1`
rebuilds data/sample_submissions/lab1/ after the lab changes.
"""

from tests.samples import mistake

CORRECT = {
    "dot_scores": '''
def dot_scores(query, keys):
    """One score per key: einsum over the last axis."""
    return np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
''',
    "softmax": '''
def softmax(x, axis=-1):
    """Stable softmax: subtract the max before exponentiating."""
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
''',
    "attention_pool": '''
def attention_pool(query, keys, values):
    """Weights from my softmax of my dot scores; context as an einsum."""
    weights = softmax(dot_scores(query, keys), axis=-1)
    context = np.einsum("...n,...nv->...v", weights, np.asarray(values))
    return context, weights
''',
    "bilinear_scores": '''
def bilinear_scores(query, keys, W):
    """q^T W k_i for each key, one loop over the keys."""
    query, keys, W = np.asarray(query), np.asarray(keys), np.asarray(W)
    projected = query @ W                      # (..., d_k)
    scores = [np.sum(projected * keys[..., i, :], axis=-1) for i in range(keys.shape[-2])]
    return np.stack(scores, axis=-1)
''',
    "additive_scores": '''
def additive_scores(query, keys, W1, w2):
    """Split W1 into its query and key halves instead of concatenating."""
    query, keys, W1, w2 = map(np.asarray, (query, keys, W1, w2))
    d_q = query.shape[-1]
    hidden = np.tanh((query @ W1[:d_q])[..., None, :] + keys @ W1[d_q:])
    return hidden @ w2
''',
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """keras.ops throughout; masked scores set to -1e9."""
    d_k = ops.shape(key)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    scores = scores / ops.sqrt(ops.cast(d_k, scores.dtype))
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''',
}

VARIANTS: dict[str, tuple[str, str]] = {}

# Each fails the tests cells it names (none named: every tests cell of its exercise).
MISTAKES = {
    "softmax_overflow": mistake("softmax", '''
def softmax(x, axis=-1):
    exponentials = np.exp(np.asarray(x))          # no max subtracted: overflows at 1000
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
''', fails=("test_softmax__overflow",)),
    "softmax_axis0": mistake("softmax", '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    exponentials = np.exp(x - np.max(x, axis=0, keepdims=True))
    return exponentials / np.sum(exponentials, axis=0, keepdims=True)   # always axis 0
''', fails=("test_softmax",)),
    "additive_no_tanh": mistake("additive_scores", '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    pairs = np.concatenate(
        [np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:]), keys], axis=-1)
    return (pairs @ W1) @ w2                      # tanh forgotten
'''),
    "sdpa_scale_by_dk": mistake("scaled_dot_product_attention", '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(key)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / d_k   # d_k, not sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''', fails=("test_scaled_dot_product_attention",)),
    "dot_scores_typo": mistake("dot_scores", '''
def dot_scores(query, keys):
    return np.asarray(keys) @ np.asarray(queyr)   # typo: NameError when called
'''),
}

# student file -> the mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    "bob.ipynb": {"softmax_overflow"},
    "carol.ipynb": {"softmax_axis0", "additive_no_tanh", "sdpa_scale_by_dk"},
    "frank.ipynb": {"dot_scores_typo"},
}

UNTOUCHED = "dave.ipynb"
COLAB = "erin"
CUT_SHORT = "heidi.ipynb"

FEEDBACK_WORDS: list[tuple[str, str, str]] = []
FEEDBACK_PAGE_WORDS: list[tuple[str, str]] = []
