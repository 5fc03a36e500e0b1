"""Sample submissions of lab 2 (multi-head attention): the interface is tests/samples.py's.

Correct answers written differently from the solution (einsum, EinsumDense
projections, -inf masking), a MultiHeadAttention that calls the student's own
split_heads and merge_heads (so a mistake there would cascade into it without
the grader's stand-ins), the mistakes students really make, the untouched
notebook, a copy saved by Colab and a download cut short. A split_heads or
merge_heads bug costs nothing in a MultiHeadAttention that calls them, and a
MultiHeadAttention that wraps Keras's own layer scores 0 there and nowhere
else. `python data/sample_submissions/build.py lab2` rebuilds
data/sample_submissions/lab2/ after the lab changes.
"""

from tests.samples import mistake, swap

CORRECT = {
    "mha_weight_shapes": '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """A kernel then a bias for query, key and value, then the output pair."""
    value_dim = value_dim or key_dim
    shapes = []
    for size in (key_dim, key_dim, value_dim):
        shapes += [(d_model, num_heads, size), (num_heads, size)]
    return shapes + [(num_heads, value_dim, d_model), (d_model,)]
''',
    "SelfAttention": '''
class SelfAttention(keras.layers.Layer):
    """One head; einsum for the products, the mask added to the scores."""

    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if int(key_dim) != key_dim or key_dim < 1:
            raise ValueError(f"key_dim must be a positive integer, got key_dim={key_dim}")
        self.key_dim = key_dim
        self.query_dense = keras.layers.Dense(key_dim)
        self.key_dense = keras.layers.Dense(key_dim)
        self.value_dense = keras.layers.Dense(key_dim)

    def build(self, input_shape):
        for name in ("query_dense", "key_dense", "value_dense"):
            getattr(self, name).build(input_shape)

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q = self.query_dense(inputs) / math.sqrt(self.key_dim)
        k = self.key_dense(inputs)
        v = self.value_dense(inputs)
        scores = ops.einsum("bqd,bkd->bqk", q, k)
        if attention_mask is not None:
            scores = scores + (1.0 - ops.cast(attention_mask, scores.dtype)) * -1e9
        weights = ops.softmax(scores)
        out = ops.einsum("bqk,bkd->bqd", weights, v)
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        return {**super().get_config(), "key_dim": self.key_dim}
''',
    "split_heads": '''
def split_heads(x, num_heads):
    """Reshape, then swap the time and head axes."""
    batch, length, features = ops.shape(x)
    x = ops.reshape(x, (batch, length, num_heads, features // num_heads))
    return ops.swapaxes(x, 1, 2)
''',
    "merge_heads": '''
def merge_heads(x):
    """Move the heads behind time, then flatten the last two axes."""
    x = ops.moveaxis(x, 1, 2)
    return ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], -1))
''',
    "MultiHeadAttention": '''
class MultiHeadAttention(keras.layers.Layer):
    """EinsumDense projections (Keras's own weight layout), -inf masking."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if num_heads < 1:
            raise ValueError(f"num_heads must be at least 1, got num_heads={num_heads}")
        if key_dim < 1:
            raise ValueError(f"key_dim must be at least 1, got key_dim={key_dim}")
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        bias = "hk" if use_bias else None
        size = value_dim or key_dim
        self.q_proj = keras.layers.EinsumDense("btd,dhk->bthk", (None, num_heads, key_dim), bias_axes=bias)
        self.k_proj = keras.layers.EinsumDense("btd,dhk->bthk", (None, num_heads, key_dim), bias_axes=bias)
        self.v_proj = keras.layers.EinsumDense("btd,dhk->bthk", (None, num_heads, size), bias_axes=bias)
        self.drop = keras.layers.Dropout(dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        self.q_proj.build(query_shape)
        self.k_proj.build(key_shape or value_shape)
        self.v_proj.build(value_shape)
        self.o_proj = keras.layers.EinsumDense(
            "bthv,hvd->btd", (None, query_shape[-1]), bias_axes="d" if self.use_bias else None)
        self.o_proj.build((None, None, self.num_heads, self.value_dim or self.key_dim))

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        key = value if key is None else key
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        scores = ops.einsum("bqhk,bshk->bhqs", q, k) / math.sqrt(self.key_dim)
        allowed = None
        if attention_mask is not None:
            allowed = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
        if use_causal_mask:
            t_q, t_k = ops.shape(scores)[2], ops.shape(scores)[3]
            causal = ops.cast(ops.tril(ops.ones((t_q, t_k))), "bool")
            allowed = causal if allowed is None else ops.logical_and(allowed, causal)
        if allowed is not None:
            scores = ops.where(allowed, scores, float("-inf"))
        weights = ops.nan_to_num(ops.softmax(scores, axis=-1))   # all -inf rows: 0, not NaN
        context = ops.einsum("bhqs,bshv->bqhv", self.drop(weights, training=training), v)
        out = self.o_proj(context)
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                      dropout=self.dropout, use_bias=self.use_bias)
        return config
''',
}

# Correct answers written yet another way: a MultiHeadAttention that calls the
# student's own split_heads / merge_heads, so that a mistake there would
# cascade into it without the grader's stand-ins.
VARIANTS = {
    "mha_with_helpers": ("MultiHeadAttention", '''
class MultiHeadAttention(keras.layers.Layer):
    """add_weight in a loop; the heads through my split_heads and merge_heads."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {name}={value}")
        if dropout < 0 or dropout >= 1:
            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        self.dropout_layer = keras.layers.Dropout(dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = key_shape or value_shape
        size = self.value_dim or self.key_dim
        specs = [("query", (query_shape[-1], self.num_heads, self.key_dim)),
                 ("key", (key_shape[-1], self.num_heads, self.key_dim)),
                 ("value", (value_shape[-1], self.num_heads, size)),
                 ("output", (self.num_heads, size, query_shape[-1]))]
        self.projections = []
        for name, shape in specs:
            kernel = self.add_weight(shape=shape, name=name + "_kernel")
            bias = None
            if self.use_bias:
                bias_shape = shape[-1:] if name == "output" else shape[1:]
                bias = self.add_weight(shape=bias_shape, initializer="zeros", name=name + "_bias")
            self.projections.append((kernel, bias))

    def _heads(self, x, index):
        kernel, bias = self.projections[index]
        d, heads, size = kernel.shape
        y = ops.tensordot(x, ops.reshape(kernel, (d, heads * size)), axes=1)
        if bias is not None:
            y = y + ops.reshape(bias, (-1,))
        return split_heads(y, heads)

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        key = value if key is None else key
        q, k, v = self._heads(query, 0), self._heads(key, 1), self._heads(value, 2)
        scores = ops.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(self.key_dim))
        t_q, t_k = q.shape[2], k.shape[2]
        mask = ops.ones((1, 1, t_q, t_k), dtype="bool")
        if attention_mask is not None:
            mask = ops.logical_and(mask, ops.expand_dims(ops.cast(attention_mask, "bool"), 1))
        if use_causal_mask:
            mask = ops.logical_and(mask, ops.cast(ops.tril(ops.ones((t_q, t_k))), "bool"))
        probabilities = ops.softmax(ops.where(mask, scores, -1e9), axis=-1)
        context = merge_heads(ops.matmul(self.dropout_layer(probabilities, training=training), v))
        kernel, bias = self.projections[3]
        heads, size, d_query = kernel.shape
        out = ops.tensordot(context, ops.reshape(kernel, (heads * size, d_query)), axes=1)
        if bias is not None:
            out = out + bias
        return (out, probabilities) if return_attention_scores else out

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias}
'''),
}

# mistake -> mistake(its exercise, the answer cell, the tests cells it fails: all
# of its exercise's unless named)
MISTAKES = {
    "split_heads_no_transpose": mistake("split_heads", '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    # right shape, wrong numbers: head 0 gets whole tokens
    return ops.reshape(x, (batch, num_heads, length, features // num_heads))
'''),
    "merge_heads_no_transpose": mistake("merge_heads", '''
def merge_heads(x):
    batch, heads, length, depth = ops.shape(x)
    return ops.reshape(x, (batch, length, heads * depth))   # forgot to move the heads back
'''),
    "self_attention_softmax_over_queries": mistake("SelfAttention", '''
class SelfAttention(keras.layers.Layer):
    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if key_dim <= 0:
            raise ValueError(f"key_dim must be positive, got key_dim={key_dim}")
        self.key_dim = key_dim
        self.query_dense = keras.layers.Dense(key_dim)
        self.key_dense = keras.layers.Dense(key_dim)
        self.value_dense = keras.layers.Dense(key_dim)

    def build(self, input_shape):
        self.query_dense.build(input_shape)
        self.key_dense.build(input_shape)
        self.value_dense.build(input_shape)

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q, k, v = self.query_dense(inputs), self.key_dense(inputs), self.value_dense(inputs)
        scores = ops.matmul(q, ops.transpose(k, (0, 2, 1))) / math.sqrt(self.key_dim)
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, -1e9)
        weights = ops.softmax(scores, axis=1)        # over the queries, not the keys
        out = ops.matmul(weights, v)
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        return {**super().get_config(), "key_dim": self.key_dim}
''', ("test_SelfAttention",)),   # the values only: the config and argument check are right
    # Every value is wrong: the main cell's share. The masks (judged against the
    # layer itself), dropout (against its own output at inference), the config and
    # the argument checks are right.
    "mha_scaled_by_d_model": mistake("MultiHeadAttention", swap(
        CORRECT["MultiHeadAttention"], "/ math.sqrt(self.key_dim)",
        "/ math.sqrt(query.shape[-1])   # d_model, not key_dim"),
        ("test_MultiHeadAttention",)),
    "mha_weight_shapes_output_kernel": mistake("mha_weight_shapes", '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    value_dim = key_dim if value_dim is None else value_dim
    return [(d_model, num_heads, key_dim), (num_heads, key_dim),
            (d_model, num_heads, key_dim), (num_heads, key_dim),
            (d_model, num_heads, value_dim), (num_heads, value_dim),
            (d_model, num_heads, value_dim), (d_model,)]   # output kernel written like the others
'''),
    "mha_wraps_keras": mistake("MultiHeadAttention", '''
class MultiHeadAttention(keras.layers.Layer):
    """Keras's own layer inside: right numbers, not the exercise."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if num_heads < 1 or key_dim < 1 or not 0 <= dropout < 1:
            raise ValueError(f"invalid num_heads={num_heads}, key_dim={key_dim} or dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        self.inner = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, dropout=dropout,
            use_bias=use_bias)

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        return self.inner(query, value, key=key, attention_mask=attention_mask,
                          return_attention_scores=return_attention_scores,
                          training=training, use_causal_mask=use_causal_mask)

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias}
'''),
}

# student file -> the variants and mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    "bob.ipynb": {"split_heads_no_transpose", "mha_with_helpers"},
    "carol.ipynb": {"self_attention_softmax_over_queries", "mha_scaled_by_d_model",
                    "mha_weight_shapes_output_kernel"},
    "frank.ipynb": {"merge_heads_no_transpose", "mha_with_helpers"},
    "grace.ipynb": {"mha_wraps_keras"},
    "ivan.ipynb": {"mha_with_helpers"},
}

UNTOUCHED = "dave.ipynb"
COLAB = "erin"
CUT_SHORT = "heidi.ipynb"

FEEDBACK_WORDS = [
    ("bob", "split_heads", "each head holds whole tokens"),
    ("frank", "merge_heads", "heads back behind time"),
    ("carol", "SelfAttention", "softmax over the last axis"),
    ("carol", "MultiHeadAttention", "sqrt(d_model)"),
    ("carol", "mha_weight_shapes", "output kernel"),
    ("grace", "MultiHeadAttention",
     "keras.src.layers.attention.multi_head_attention.MultiHeadAttention"),
    ("grace", "MultiHeadAttention", "from scratch"),
]
FEEDBACK_PAGE_WORDS = [("carol", 'class="hint"'), ("carol", "sqrt(key_dim)")]
