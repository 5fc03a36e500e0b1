"""Verdict suite of lab2 (self-attention and multi-head attention).

VARIANTS: correct answers written differently from the solution and from each
other; each must get full marks. MISTAKES: what students really get wrong;
each must lose points in its own exercise and nowhere else. Sources are whole
answer cells, as a student fills them in labs/lab2/lab2_multihead_attention.ipynb,
where the setup cell has already imported math, numpy as np, keras and
`from keras import ops`.
"""

from __future__ import annotations

from tests.verdicts import Mistake, own_share


def _edit(source: str, *changes: tuple[str, str]) -> str:
    """``source`` with each (old, new) applied; old must occur exactly once."""
    for old, new in changes:
        assert source.count(old) == 1, f"{old!r} occurs {source.count(old)} times"
        source = source.replace(old, new)
    return source


# --- mha_weight_shapes ---------------------------------------------------------------

_SHAPES_V1 = '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """All eight shapes written out, one line per projection."""
    v = key_dim if value_dim is None else value_dim
    return [
        (d_model, num_heads, key_dim), (num_heads, key_dim),  # query
        (d_model, num_heads, key_dim), (num_heads, key_dim),  # key
        (d_model, num_heads, v), (num_heads, v),              # value
        (num_heads, v, d_model), (d_model,),                  # output
    ]
'''

_SHAPES_V2 = '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """A kernel is the input size followed by the bias shape."""
    if value_dim is None:
        value_dim = key_dim
    per_head = {"query": key_dim, "key": key_dim, "value": value_dim}
    shapes = []
    for name, size in per_head.items():
        bias = (num_heads, size)
        shapes.append((d_model,) + bias)
        shapes.append(bias)
    shapes.extend([(num_heads, value_dim, d_model), (d_model,)])
    return shapes
'''

_SHAPES_V3 = '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """Kernels and biases listed apart, then interleaved with zip."""
    sizes = [key_dim, key_dim, key_dim if value_dim is None else value_dim]
    kernels = [(d_model, num_heads, s) for s in sizes] + [(num_heads, sizes[-1], d_model)]
    biases = [(num_heads, s) for s in sizes] + [(d_model,)]
    return [shape for pair in zip(kernels, biases) for shape in pair]
'''

_SHAPES = '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    if value_dim is None:
        value_dim = key_dim
    query = [(d_model, num_heads, key_dim), (num_heads, key_dim)]
    key = [(d_model, num_heads, key_dim), (num_heads, key_dim)]
    value = [(d_model, num_heads, value_dim), (num_heads, value_dim)]
    output = [(num_heads, value_dim, d_model), (d_model,)]
    return query + key + value + output
'''

# --- SelfAttention --------------------------------------------------------------------

_SELF_V1 = '''
class SelfAttention(keras.layers.Layer):
    """Projections created in build; einsum products; -inf masking with a NaN guard."""

    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if isinstance(key_dim, bool) or not isinstance(key_dim, int) or key_dim < 1:
            raise ValueError(f"key_dim must be a positive integer, received key_dim={key_dim!r}")
        self.key_dim = key_dim

    def build(self, input_shape):
        self.query_dense = keras.layers.Dense(self.key_dim, name="query_dense")
        self.key_dense = keras.layers.Dense(self.key_dim, name="key_dense")
        self.value_dense = keras.layers.Dense(self.key_dim, name="value_dense")
        for dense in (self.query_dense, self.key_dense, self.value_dense):
            dense.build(input_shape)

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q = self.query_dense(inputs)
        k = self.key_dense(inputs)
        v = self.value_dense(inputs)
        logits = ops.einsum("bik,bjk->bij", q, k) / ops.sqrt(ops.cast(self.key_dim, q.dtype))
        if attention_mask is not None:
            logits = ops.where(ops.cast(attention_mask, "bool"), logits, float("-inf"))
        weights = ops.softmax(logits, axis=-1)
        weights = ops.where(ops.isnan(weights), ops.zeros_like(weights), weights)  # no key left
        output = ops.einsum("bij,bjk->bik", weights, v)
        if return_attention_scores:
            return output, weights
        return output

    def get_config(self):
        config = super().get_config()
        config["key_dim"] = self.key_dim
        return config
'''

_SELF_V2 = '''
class SelfAttention(keras.layers.Layer):
    """Queries scaled first, an additive -1e9 mask, a softmax written by hand, no build."""

    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(key_dim, int) or key_dim <= 0:
            raise ValueError(f"SelfAttention: key_dim must be a positive int, got {key_dim!r}")
        self.key_dim = key_dim
        self.query_dense, self.key_dense, self.value_dense = (
            keras.layers.Dense(key_dim, name=name) for name in ("q", "k", "v"))

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        queries = self.query_dense(inputs) * (self.key_dim ** -0.5)
        keys = self.key_dense(inputs)
        values = self.value_dense(inputs)
        logits = ops.matmul(queries, ops.transpose(keys, (0, 2, 1)))
        if attention_mask is not None:
            logits = logits - 1e9 * (1.0 - ops.cast(attention_mask, logits.dtype))
        logits = logits - ops.max(logits, axis=-1, keepdims=True)
        exps = ops.exp(logits)
        weights = exps / ops.sum(exps, axis=-1, keepdims=True)
        output = ops.matmul(weights, values)
        return (output, weights) if return_attention_scores else output

    def get_config(self):
        return dict(super().get_config(), key_dim=self.key_dim)
'''

_SELF_V3 = '''
class SelfAttention(keras.layers.Layer):
    """Broadcast multiply-and-sum for Q K^T, a log-sum-exp softmax."""

    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if int(key_dim) != key_dim or key_dim < 1:
            raise ValueError("key_dim must be a positive integer (the size of each head); "
                             f"received {key_dim}")
        self.key_dim = int(key_dim)
        self.scale = 1.0 / math.sqrt(self.key_dim)
        self.query_dense = keras.layers.Dense(self.key_dim)
        self.key_dense = keras.layers.Dense(self.key_dim)
        self.value_dense = keras.layers.Dense(self.key_dim)

    def build(self, input_shape):
        self.query_dense.build(input_shape)
        self.key_dense.build(input_shape)
        self.value_dense.build(input_shape)
        self.built = True

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q = ops.expand_dims(self.query_dense(inputs), 2)  # (B, T, 1, k)
        k = ops.expand_dims(self.key_dense(inputs), 1)  # (B, 1, T, k)
        scores = ops.sum(q * k, axis=-1) * self.scale  # (B, T, T)
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, ops.full_like(scores, -1e9))
        weights = ops.exp(scores - ops.logsumexp(scores, axis=-1, keepdims=True))
        output = ops.matmul(weights, self.value_dense(inputs))
        if not return_attention_scores:
            return output
        return output, weights

    def get_config(self):
        config = super().get_config()
        config.update(key_dim=self.key_dim)
        return config
'''

_SELF = '''
class SelfAttention(keras.layers.Layer):
    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if key_dim <= 0:
            raise ValueError(f"key_dim must be a positive integer, got key_dim={key_dim}")
        self.key_dim = key_dim
        self.query_dense = keras.layers.Dense(key_dim)
        self.key_dense = keras.layers.Dense(key_dim)
        self.value_dense = keras.layers.Dense(key_dim)

    def build(self, input_shape):
        self.query_dense.build(input_shape)
        self.key_dense.build(input_shape)
        self.value_dense.build(input_shape)

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q = self.query_dense(inputs)
        k = self.key_dense(inputs)
        v = self.value_dense(inputs)
        scores = ops.matmul(q, ops.transpose(k, (0, 2, 1)))
        scores = scores / math.sqrt(self.key_dim)
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, -1e9)
        weights = ops.softmax(scores, axis=-1)
        output = ops.matmul(weights, v)
        if return_attention_scores:
            return output, weights
        return output

    def get_config(self):
        config = super().get_config()
        config.update({"key_dim": self.key_dim})
        return config
'''

# --- split_heads / merge_heads --------------------------------------------------------

_SPLIT_V1 = '''
def split_heads(x, num_heads):
    """Cut the features into num_heads equal pieces and stack them on a new axis 1."""
    return ops.stack(ops.split(x, num_heads, axis=-1), axis=1)
'''

_SPLIT_V2 = '''
def split_heads(x, num_heads):
    """Reshape with an open batch size, then an einsum that only permutes axes."""
    x = ops.convert_to_tensor(x)
    length, features = x.shape[1], x.shape[2]
    x = ops.reshape(x, (-1, length, num_heads, features // num_heads))
    return ops.einsum("bthd->bhtd", x)
'''

_SPLIT_V3 = '''
def split_heads(x, num_heads):
    """One slice of the features per head, in a loop."""
    depth = x.shape[-1] // num_heads
    heads = [x[..., h * depth:(h + 1) * depth] for h in range(num_heads)]
    return ops.stack(heads, axis=1)
'''

_SPLIT_V4 = '''
def split_heads(x, num_heads):
    """Let reshape infer the depth, then move the heads axis in front of time."""
    batch, length = ops.shape(x)[0], ops.shape(x)[1]
    x = ops.reshape(x, (batch, length, num_heads, -1))
    return ops.moveaxis(x, 2, 1)
'''

_MERGE_V1 = '''
def merge_heads(x):
    """The heads side by side along the features, one slice per head."""
    return ops.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)
'''

_MERGE_V2 = '''
def merge_heads(x):
    """An einsum that only permutes axes, then a reshape with an open batch size."""
    x = ops.einsum("bhtd->bthd", ops.convert_to_tensor(x))
    _, length, heads, depth = x.shape
    return ops.reshape(x, (-1, length, heads * depth))
'''

_MERGE_V3 = '''
def merge_heads(x):
    """Unstack the heads and concatenate them."""
    heads = ops.unstack(ops.convert_to_tensor(x), axis=1)  # H tensors (B, T, depth)
    return ops.concatenate(heads, axis=-1)
'''

# --- MultiHeadAttention ---------------------------------------------------------------

_MHA_V1 = '''
class MultiHeadAttention(keras.layers.Layer):
    """add_weight and einsum everywhere; -inf masking; keras.random.dropout."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive integer, got num_heads={num_heads!r}")
        if not isinstance(key_dim, int) or key_dim < 1:
            raise ValueError(f"key_dim must be a positive integer, got key_dim={key_dim!r}")
        if value_dim is not None and (not isinstance(value_dim, int) or value_dim < 1):
            raise ValueError(f"value_dim must be a positive integer or None, got {value_dim!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be a rate in [0, 1), got dropout={dropout!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.seed_generator = keras.random.SeedGenerator(1234)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        h, k = self.num_heads, self.key_dim
        v = k if self.value_dim is None else self.value_dim
        d = query_shape[-1]
        specs = [("query", (d, h, k), (h, k)), ("key", (key_shape[-1], h, k), (h, k)),
                 ("value", (value_shape[-1], h, v), (h, v)), ("out", (h, v, d), (d,))]
        for name, kernel_shape, bias_shape in specs:
            setattr(self, name + "_kernel", self.add_weight(
                name=name + "_kernel", shape=kernel_shape, initializer="glorot_uniform"))
            if self.use_bias:
                setattr(self, name + "_bias", self.add_weight(
                    name=name + "_bias", shape=bias_shape, initializer="zeros"))

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        key = value if key is None else key
        q = ops.einsum("btd,dhk->bhtk", query, self.query_kernel)
        k = ops.einsum("bsd,dhk->bhsk", key, self.key_kernel)
        v = ops.einsum("bsd,dhv->bhsv", value, self.value_kernel)
        if self.use_bias:
            q = q + self.query_bias[:, None, :]
            k = k + self.key_bias[:, None, :]
            v = v + self.value_bias[:, None, :]
        logits = ops.einsum("bhtk,bhsk->bhts", q, k) / math.sqrt(self.key_dim)
        allowed = None
        if use_causal_mask:
            t_q, t_k = ops.shape(logits)[2], ops.shape(logits)[3]
            allowed = ops.arange(t_q)[:, None] >= ops.arange(t_k)[None, :]
        if attention_mask is not None:
            given = ops.cast(attention_mask, "bool")[:, None, :, :]
            allowed = given if allowed is None else ops.logical_and(given, allowed)
        if allowed is not None:
            logits = ops.where(allowed, logits, float("-inf"))
        probs = ops.softmax(logits, axis=-1)
        probs = ops.where(ops.isnan(probs), 0.0, probs)  # a query with no visible key
        kept = probs
        if training and self.dropout > 0:
            kept = keras.random.dropout(probs, self.dropout, seed=self.seed_generator)
        context = ops.einsum("bhts,bhsv->bthv", kept, v)
        out = ops.einsum("bthv,hvd->btd", context, self.out_kernel)
        if self.use_bias:
            out = out + self.out_bias
        return (out, probs) if return_attention_scores else out

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,
                       "value_dim": self.value_dim, "dropout": self.dropout,
                       "use_bias": self.use_bias})
        return config
'''

_MHA_V2 = '''
class MultiHeadAttention(keras.layers.Layer):
    """One head at a time in a Python loop; an additive mask; a softmax by hand."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        for name, number in (("num_heads", num_heads), ("key_dim", key_dim),
                             ("value_dim", key_dim if value_dim is None else value_dim)):
            if int(number) != number or number <= 0:
                raise ValueError(f"`{name}` must be a positive integer; received {name}={number}")
        if dropout < 0 or dropout >= 1:
            raise ValueError(f"`dropout` must be a rate in [0, 1); received dropout={dropout}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.probability_dropout = keras.layers.Dropout(rate=dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        if key_shape is None:
            key_shape = value_shape
        heads, size = self.num_heads, self.value_dim or self.key_dim
        bias = self.use_bias
        self.wq = self.add_weight(shape=(query_shape[-1], heads, self.key_dim), name="wq")
        self.bq = self.add_weight(shape=(heads, self.key_dim), initializer="zeros", name="bq") if bias else None
        self.wk = self.add_weight(shape=(key_shape[-1], heads, self.key_dim), name="wk")
        self.bk = self.add_weight(shape=(heads, self.key_dim), initializer="zeros", name="bk") if bias else None
        self.wv = self.add_weight(shape=(value_shape[-1], heads, size), name="wv")
        self.bv = self.add_weight(shape=(heads, size), initializer="zeros", name="bv") if bias else None
        self.wo = self.add_weight(shape=(heads, size, query_shape[-1]), name="wo")
        self.bo = self.add_weight(shape=(query_shape[-1],), initializer="zeros", name="bo") if bias else None

    def _project(self, x, kernel, bias, h):
        y = ops.matmul(x, ops.take(kernel, h, axis=1))  # (B, T, size) for head h
        if bias is not None:
            y = y + ops.take(bias, h, axis=0)
        return y

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        if key is None:
            key = value
        t_q, t_k = query.shape[1], key.shape[1]
        visible = ops.ones((t_q, t_k))
        if use_causal_mask:
            visible = ops.tril(visible)
        visible = ops.expand_dims(visible, 0)  # (1, T_q, T_k)
        if attention_mask is not None:
            visible = visible * ops.cast(attention_mask, "float32")
        contexts, all_weights = [], []
        for h in range(self.num_heads):
            q = self._project(query, self.wq, self.bq, h)
            k = self._project(key, self.wk, self.bk, h)
            v = self._project(value, self.wv, self.bv, h)
            logits = ops.matmul(q, ops.transpose(k, (0, 2, 1))) / math.sqrt(self.key_dim)
            logits = logits + (visible - 1.0) * 1e9
            logits = logits - ops.max(logits, axis=-1, keepdims=True)
            e = ops.exp(logits)
            w = e / ops.sum(e, axis=-1, keepdims=True)
            all_weights.append(w)
            contexts.append(ops.matmul(self.probability_dropout(w, training=training), v))
        context = ops.concatenate(contexts, axis=-1)  # (B, T_q, H * value_dim)
        heads, size, d_query = self.wo.shape
        out = ops.matmul(context, ops.reshape(self.wo, (heads * size, d_query)))
        if self.bo is not None:
            out = out + self.bo
        if return_attention_scores:
            return out, ops.stack(all_weights, axis=1)
        return out

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias}
'''

_MHA_V3 = '''
class MultiHeadAttention(keras.layers.Layer):
    """Four EinsumDense sublayers made in build; queries scaled before the product."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        checks = {"num_heads": num_heads > 0, "key_dim": key_dim > 0,
                  "value_dim": value_dim is None or value_dim > 0,
                  "dropout": 0.0 <= dropout < 1.0}
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"invalid {name}: {locals()[name]!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.attention_dropout = keras.layers.Dropout(dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = key_shape or value_shape
        size = self.value_dim or self.key_dim
        heads = self.num_heads

        def projection(name, spec, out, bias_axes, input_shape):
            layer = keras.layers.EinsumDense(spec, output_shape=out,
                                             bias_axes=bias_axes if self.use_bias else None,
                                             name=name)
            layer.build(input_shape)
            return layer

        self.query_proj = projection("query", "abc,cde->abde", (None, heads, self.key_dim),
                                     "de", query_shape)
        self.key_proj = projection("key", "abc,cde->abde", (None, heads, self.key_dim),
                                   "de", key_shape)
        self.value_proj = projection("value", "abc,cde->abde", (None, heads, size), "de",
                                     value_shape)
        self.output_proj = projection("output", "abcd,cde->abe", (None, query_shape[-1]),
                                      "e", (None, None, heads, size))

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        key = value if key is None else key
        q = ops.transpose(self.query_proj(query), (0, 2, 1, 3))  # (B, H, T_q, k)
        k = ops.transpose(self.key_proj(key), (0, 2, 1, 3))  # (B, H, T_k, k)
        v = ops.transpose(self.value_proj(value), (0, 2, 1, 3))  # (B, H, T_k, v)
        q = q * (1.0 / math.sqrt(self.key_dim))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # (B, H, T_q, T_k)
        penalty = ops.zeros_like(scores)
        if attention_mask is not None:
            hidden = 1.0 - ops.cast(attention_mask, scores.dtype)
            penalty = penalty + ops.expand_dims(hidden, axis=1)
        if use_causal_mask:
            rows = ops.expand_dims(ops.arange(ops.shape(scores)[2]), 1)
            cols = ops.expand_dims(ops.arange(ops.shape(scores)[3]), 0)
            penalty = penalty + ops.cast(ops.greater(cols, rows), scores.dtype)
        scores = scores - 1e9 * ops.minimum(penalty, 1.0)
        weights = ops.softmax(scores, axis=-1)
        mixed = ops.matmul(self.attention_dropout(weights, training=training), v)
        out = self.output_proj(ops.transpose(mixed, (0, 2, 1, 3)))  # (B, T_q, d_query)
        if return_attention_scores:
            return out, weights
        return out

    def get_config(self):
        config = super().get_config()
        for name in ("num_heads", "key_dim", "value_dim", "dropout", "use_bias"):
            config[name] = getattr(self, name)
        return config
'''

_MHA_V4 = '''
class MultiHeadAttention(keras.layers.Layer):
    """Kernels as 2-D matrices with tensordot; heads by reshape; float32-min masking."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if num_heads < 1:
            raise ValueError(f"Expected num_heads >= 1, received num_heads={num_heads}")
        if key_dim < 1:
            raise ValueError(f"Expected key_dim >= 1, received key_dim={key_dim}")
        if value_dim is not None and value_dim < 1:
            raise ValueError(f"Expected value_dim >= 1, received value_dim={value_dim}")
        if dropout < 0.0 or dropout >= 1.0:
            raise ValueError(f"Expected 0 <= dropout < 1, received dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        self.drop = keras.layers.Dropout(dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        size = self.key_dim if self.value_dim is None else self.value_dim
        h, d = self.num_heads, query_shape[-1]
        self.params = {}
        for name, kernel_shape, bias_shape in [
                ("q", (query_shape[-1], h, self.key_dim), (h, self.key_dim)),
                ("k", (key_shape[-1], h, self.key_dim), (h, self.key_dim)),
                ("v", (value_shape[-1], h, size), (h, size)),
                ("o", (h, size, d), (d,))]:
            self.params[name + "_kernel"] = self.add_weight(shape=kernel_shape, name=name + "_kernel")
            if self.use_bias:
                self.params[name + "_bias"] = self.add_weight(
                    shape=bias_shape, initializer="zeros", name=name + "_bias")

    def _heads(self, x, name):
        kernel = self.params[name + "_kernel"]
        d_in, h, size = kernel.shape
        y = ops.tensordot(x, ops.reshape(kernel, (d_in, h * size)), axes=[[2], [0]])
        if self.use_bias:
            y = y + ops.reshape(self.params[name + "_bias"], (h * size,))
        batch, length = ops.shape(y)[0], ops.shape(y)[1]
        return ops.transpose(ops.reshape(y, (batch, length, h, size)), (0, 2, 1, 3))

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        if key is None:
            key = value
        q, k, v = self._heads(query, "q"), self._heads(key, "k"), self._heads(value, "v")
        scores = ops.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(self.key_dim)
        visible = None
        if attention_mask is not None:
            visible = ops.cast(attention_mask, "bool")[:, None]
        if use_causal_mask:
            t_q, t_k = scores.shape[-2], scores.shape[-1]
            future = ops.triu(ops.ones((t_q, t_k)), k=1)
            causal = ops.equal(future, 0.0)
            visible = causal if visible is None else ops.logical_and(visible, causal)
        if visible is not None:
            scores = ops.where(visible, scores, np.finfo("float32").min)
        weights = keras.activations.softmax(scores, axis=-1)
        context = ops.einsum("bhqk,bhkd->bhqd", self.drop(weights, training=training), v)
        batch, heads, length, size = ops.shape(context)
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, length, heads * size))
        kernel = self.params["o_kernel"]
        out = ops.tensordot(context, ops.reshape(kernel, (heads * size, -1)), axes=1)
        if self.use_bias:
            out = out + self.params["o_bias"]
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim,
                      value_dim=self.value_dim, dropout=self.dropout, use_bias=self.use_bias)
        return config
'''

_MHA = '''
class MultiHeadAttention(keras.layers.Layer):
    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if num_heads <= 0:
            raise ValueError(f"num_heads must be positive, got num_heads={num_heads}")
        if key_dim <= 0:
            raise ValueError(f"key_dim must be positive, got key_dim={key_dim}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.dropout_layer = keras.layers.Dropout(dropout)

    def _pair(self, name, kernel_shape, bias_shape):
        kernel = self.add_weight(shape=kernel_shape, initializer="glorot_uniform", name=name + "_kernel")
        bias = None
        if self.use_bias:
            bias = self.add_weight(shape=bias_shape, initializer="zeros", name=name + "_bias")
        return kernel, bias

    def build(self, query_shape, value_shape, key_shape=None):
        if key_shape is None:
            key_shape = value_shape
        value_dim = self.value_dim if self.value_dim is not None else self.key_dim
        heads, key_dim, d_query = self.num_heads, self.key_dim, query_shape[-1]
        self.wq, self.bq = self._pair("query", (d_query, heads, key_dim), (heads, key_dim))
        self.wk, self.bk = self._pair("key", (key_shape[-1], heads, key_dim), (heads, key_dim))
        self.wv, self.bv = self._pair("value", (value_shape[-1], heads, value_dim), (heads, value_dim))
        self.wo, self.bo = self._pair("output", (heads, value_dim, d_query), (d_query,))

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        if key is None:
            key = value
        q = ops.einsum("btd,dhk->bhtk", query, self.wq)
        k = ops.einsum("bsd,dhk->bhsk", key, self.wk)
        v = ops.einsum("bsd,dhv->bhsv", value, self.wv)
        if self.use_bias:
            q = q + ops.expand_dims(self.bq, 1)
            k = k + ops.expand_dims(self.bk, 1)
            v = v + ops.expand_dims(self.bv, 1)
        scores = ops.einsum("bhtk,bhsk->bhts", q, k) / math.sqrt(self.key_dim)
        mask = None
        if attention_mask is not None:
            mask = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
        if use_causal_mask:
            t_q, t_k = ops.shape(scores)[2], ops.shape(scores)[3]
            causal = ops.cast(ops.tril(ops.ones((t_q, t_k))), "bool")
            mask = causal if mask is None else ops.logical_and(mask, causal)
        if mask is not None:
            scores = ops.where(mask, scores, -1e9)
        weights = ops.softmax(scores, axis=-1)
        dropped = self.dropout_layer(weights, training=training)
        context = ops.einsum("bhts,bhsv->bthv", dropped, v)
        output = ops.einsum("bthv,hvd->btd", context, self.wo)
        if self.use_bias:
            output = output + self.bo
        if return_attention_scores:
            return output, weights
        return output

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,
                       "value_dim": self.value_dim, "dropout": self.dropout,
                       "use_bias": self.use_bias})
        return config
'''

# Honest readings: layers written from the notebook's text alone, by students
# who had not read the solution. Each computes what Keras computes; they differ
# in what the text leaves to the reader.

# Checks num_heads and key_dim itself and leaves the rate to keras.layers.Dropout
# (whose ValueError names `rate`, not `dropout`); keeps its config in a dict.
_MHA_HONEST_DROPOUT = _edit(
    _MHA,
    ("        if not 0.0 <= dropout < 1.0:\n"
     "            raise ValueError(f\"dropout must be in [0, 1), got dropout={dropout}\")\n", ""),
    ("        self.num_heads = num_heads\n",
     "        self._settings = dict(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim,\n"
     "                              dropout=dropout, use_bias=use_bias)\n"
     "        self.num_heads = num_heads\n"),
    ('        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,\n'
     '                       "value_dim": self.value_dim, "dropout": self.dropout,\n'
     '                       "use_bias": self.use_bias})\n',
     "        config.update(self._settings)\n"))

# One generic message for every bad argument; -inf masking with a guard for rows
# that hide every key.
_MHA_HONEST_GENERIC = _edit(
    _MHA,
    ('        if num_heads <= 0:\n'
     '            raise ValueError(f"num_heads must be positive, got num_heads={num_heads}")\n'
     '        if key_dim <= 0:\n'
     '            raise ValueError(f"key_dim must be positive, got key_dim={key_dim}")\n'
     '        if not 0.0 <= dropout < 1.0:\n'
     '            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")\n',
     '        if num_heads < 1 or key_dim < 1 or not 0 <= dropout < 1:\n'
     '            raise ValueError("invalid argument")\n'),
    ("            scores = ops.where(mask, scores, -1e9)\n        weights = ops.softmax(scores, axis=-1)\n",
     "            scores = ops.where(mask, scores, float('-inf'))\n"
     "        weights = ops.softmax(scores, axis=-1)\n"
     "        weights = ops.where(ops.isnan(weights), 0.0, weights)\n"))

# get_config left out altogether: Keras 3 then makes the config from the
# constructor's arguments, which is all this layer needs.
_MHA_HONEST_NO_GET_CONFIG = _edit(
    _MHA,
    ('    def get_config(self):\n'
     '        config = super().get_config()\n'
     '        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,\n'
     '                       "value_dim": self.value_dim, "dropout": self.dropout,\n'
     '                       "use_bias": self.use_bias})\n'
     '        return config\n', ""))

# value_dim=None replaced by key_dim when stored, as keras.layers.MultiHeadAttention
# does (get_config() then returns key_dim): the text says either is fine.
_MHA_HONEST_VALUE_DIM_RESOLVED = _edit(
    _MHA,
    ("        self.value_dim = value_dim\n",
     "        self.value_dim = key_dim if value_dim is None else value_dim\n"))

VARIANTS = {
    "mha_weight_shapes": [_SHAPES_V1, _SHAPES_V2, _SHAPES_V3],
    "SelfAttention": [_SELF_V1, _SELF_V2, _SELF_V3],
    "split_heads": [_SPLIT_V1, _SPLIT_V2, _SPLIT_V3, _SPLIT_V4],
    "merge_heads": [_MERGE_V1, _MERGE_V2, _MERGE_V3],
    "MultiHeadAttention": [_MHA_V1, _MHA_V2, _MHA_V3, _MHA_V4, _MHA, _MHA_HONEST_DROPOUT,
                           _MHA_HONEST_GENERIC, _MHA_HONEST_NO_GET_CONFIG,
                           _MHA_HONEST_VALUE_DIM_RESOLVED],
}

# --- mistakes ---------------------------------------------------------------------------

_W = "mha_weight_shapes"
_S = "SelfAttention"
_SP = "split_heads"
_MG = "merge_heads"
_M = "MultiHeadAttention"

MISTAKES = [
    # mha_weight_shapes
    Mistake(_W, "output-kernel-like-inputs",
            "the output kernel written (d_model, num_heads, value_dim) like the input kernels",
            _edit(_SHAPES, ("output = [(num_heads, value_dim, d_model)",
                            "output = [(d_model, num_heads, value_dim)"))),
    Mistake(_W, "value-dim-ignored", "key_dim used for the value and output weights too",
            _edit(_SHAPES, ("    if value_dim is None:\n        value_dim = key_dim\n",
                            "    value_dim = key_dim\n"))),
    Mistake(_W, "output-kernel-key-dim",
            "the output kernel uses key_dim instead of value_dim",
            _edit(_SHAPES, ("output = [(num_heads, value_dim, d_model)",
                            "output = [(num_heads, key_dim, d_model)"))),
    Mistake(_W, "flat-biases", "biases of shape (num_heads * size,) instead of (num_heads, size)",
            _edit(_SHAPES, ("(num_heads, key_dim)]\n    key", "(num_heads * key_dim,)]\n    key"),
                  ("(num_heads, key_dim)]\n    value", "(num_heads * key_dim,)]\n    value"),
                  ("(num_heads, value_dim)]", "(num_heads * value_dim,)]"))),
    Mistake(_W, "kernels-then-biases", "the four kernels first, then the four biases",
            _edit(_SHAPES, ("    return query + key + value + output",
                            "    return (query[:1] + key[:1] + value[:1] + output[:1]\n"
                            "            + query[1:] + key[1:] + value[1:] + output[1:])"))),
    Mistake(_W, "fused-2d-kernels", "kernels as 2-D Dense kernels (d_model, num_heads * size)",
            '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    value_dim = key_dim if value_dim is None else value_dim
    return [(d_model, num_heads * key_dim), (num_heads, key_dim),
            (d_model, num_heads * key_dim), (num_heads, key_dim),
            (d_model, num_heads * value_dim), (num_heads, value_dim),
            (num_heads * value_dim, d_model), (d_model,)]
'''),
    Mistake(_W, "value-dim-none-kept", "value_dim=None is not replaced by key_dim",
            _edit(_SHAPES, ("    if value_dim is None:\n        value_dim = key_dim\n", ""))),
    Mistake(_W, "key-dim-from-d-model", "key_dim recomputed as d_model // num_heads",
            _edit(_SHAPES, ("    if value_dim is None:\n        value_dim = key_dim\n",
                            "    key_dim = d_model // num_heads\n"
                            "    if value_dim is None:\n        value_dim = key_dim\n"))),
    Mistake(_W, "output-bias-per-head", "the output bias given a heads axis (num_heads, d_model)",
            _edit(_SHAPES, ("(d_model,)]", "(num_heads, d_model)]"))),

    # SelfAttention
    Mistake(_S, "softmax-over-queries", "softmax over axis 1 (the queries) instead of the keys",
            _edit(_SELF, ("ops.softmax(scores, axis=-1)", "ops.softmax(scores, axis=1)"))),
    Mistake(_S, "no-scale", "the scores are not divided by sqrt(key_dim)",
            _edit(_SELF, ("        scores = scores / math.sqrt(self.key_dim)\n", ""))),
    Mistake(_S, "scale-sqrt-d-model", "divided by sqrt(d_model) (the input size) instead",
            _edit(_SELF, ("scores / math.sqrt(self.key_dim)", "scores / math.sqrt(inputs.shape[-1])"))),
    Mistake(_S, "scale-key-dim", "divided by key_dim instead of sqrt(key_dim)",
            _edit(_SELF, ("scores / math.sqrt(self.key_dim)", "scores / self.key_dim"))),
    Mistake(_S, "mask-wrong-sign", "True in the mask taken as 'hide'",
            _edit(_SELF, ("ops.where(attention_mask, scores, -1e9)",
                          "ops.where(attention_mask, -1e9, scores)"))),
    Mistake(_S, "mask-ignored", "attention_mask accepted and never used",
            _edit(_SELF, ("        if attention_mask is not None:\n"
                          "            scores = ops.where(attention_mask, scores, -1e9)\n", ""))),
    Mistake(_S, "mask-zeroes-scores", "masked scores set to 0 instead of a large negative number",
            _edit(_SELF, ("ops.where(attention_mask, scores, -1e9)",
                          "ops.where(attention_mask, scores, 0.0)"))),
    Mistake(_S, "mask-after-softmax", "weights multiplied by the mask after the softmax, not renormalized",
            _edit(_SELF, ("        if attention_mask is not None:\n"
                          "            scores = ops.where(attention_mask, scores, -1e9)\n"
                          "        weights = ops.softmax(scores, axis=-1)\n",
                          "        weights = ops.softmax(scores, axis=-1)\n"
                          "        if attention_mask is not None:\n"
                          "            weights = weights * ops.cast(attention_mask, weights.dtype)\n"))),
    Mistake(_S, "neg-inf-nan", "-inf masking: a fully masked row becomes NaN",
            _edit(_SELF, ("ops.where(attention_mask, scores, -1e9)",
                          "ops.where(attention_mask, scores, float('-inf'))"))),
    Mistake(_S, "weights-times-keys", "the weights multiply the keys instead of the values",
            _edit(_SELF, ("output = ops.matmul(weights, v)", "output = ops.matmul(weights, k)"))),
    Mistake(_S, "scores-transposed", "K Q^T instead of Q K^T (row i holds key i against every query)",
            _edit(_SELF, ("ops.matmul(q, ops.transpose(k, (0, 2, 1)))",
                          "ops.matmul(k, ops.transpose(q, (0, 2, 1)))"))),
    Mistake(_S, "returns-logits", "the scaled scores before the softmax returned as the weights",
            _edit(_SELF, ("            return output, weights", "            return output, scores"))),
    Mistake(_S, "config-without-key-dim", "get_config() leaves key_dim out",
            _edit(_SELF, ('        config.update({"key_dim": self.key_dim})\n', "")),
            fails=("test_SelfAttention__config",)),
    Mistake(_S, "validation-by-assert", "key_dim checked with assert (an AssertionError, "
            "not a ValueError)",
            _edit(_SELF, ("        if key_dim <= 0:\n"
                          "            raise ValueError(f\"key_dim must be a positive integer, "
                          "got key_dim={key_dim}\")\n",
                          "        assert key_dim > 0, \"key_dim must be positive\"\n")),
            fails=("test_SelfAttention__validation",)),

    # split_heads
    Mistake(_SP, "reshape-no-transpose", "reshaped straight to (B, H, T, depth): right shape, wrong numbers",
            '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    return ops.reshape(x, (batch, num_heads, length, features // num_heads))
'''),
    Mistake(_SP, "depth-major-reshape", "reshaped to (B, T, depth, H): each head gets every H-th feature",
            '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    x = ops.reshape(x, (batch, length, features // num_heads, num_heads))
    return ops.transpose(x, (0, 3, 1, 2))
'''),
    Mistake(_SP, "transpose-then-reshape", "the axes swapped before the reshape instead of after",
            '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    x = ops.swapaxes(x, 1, 2)  # (B, features, T)
    return ops.reshape(x, (batch, num_heads, length, features // num_heads))
'''),
    Mistake(_SP, "true-division", "depth = features / num_heads, a float",
            '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    x = ops.reshape(x, (batch, length, num_heads, features / num_heads))
    return ops.transpose(x, (0, 2, 1, 3))
'''),
    Mistake(_SP, "heads-left-behind-time", "reshaped to (B, T, H, depth) and not transposed",
            '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    return ops.reshape(x, (batch, length, num_heads, features // num_heads))
'''),
    Mistake(_SP, "split-time-axis", "ops.split along the time axis instead of the features",
            '''
def split_heads(x, num_heads):
    return ops.stack(ops.split(x, num_heads, axis=1), axis=1)
'''),

    # merge_heads
    Mistake(_MG, "reshape-no-transpose", "reshaped straight to (B, T, H * depth): right shape, wrong numbers",
            '''
def merge_heads(x):
    batch, heads, length, depth = ops.shape(x)
    return ops.reshape(x, (batch, length, heads * depth))
'''),
    Mistake(_MG, "wrong-permutation", "transposed to (B, T, depth, H): features of the heads interleaved",
            '''
def merge_heads(x):
    batch, heads, length, depth = ops.shape(x)
    x = ops.transpose(x, (0, 2, 3, 1))
    return ops.reshape(x, (batch, length, heads * depth))
'''),
    Mistake(_MG, "sum-heads", "the heads summed instead of concatenated",
            '''
def merge_heads(x):
    return ops.sum(x, axis=1)
'''),
    Mistake(_MG, "concat-on-time", "the heads concatenated along time",
            '''
def merge_heads(x):
    return ops.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)
'''),
    Mistake(_MG, "swap-last-axes", "the last two axes swapped instead of heads and time",
            '''
def merge_heads(x):
    batch, heads, length, depth = ops.shape(x)
    return ops.reshape(ops.swapaxes(x, 2, 3), (batch, length, heads * depth))
'''),
    Mistake(_MG, "axes-misnamed", "the input read as (B, T, H, depth): lengths and heads confused",
            '''
def merge_heads(x):
    batch, length, heads, depth = ops.shape(x)
    x = ops.transpose(x, (0, 2, 1, 3))
    return ops.reshape(x, (batch, length, heads * depth))
'''),

    # MultiHeadAttention
    Mistake(_M, "scale-sqrt-d-model", "scores divided by sqrt(d_model) instead of sqrt(key_dim)",
            _edit(_MHA, ("/ math.sqrt(self.key_dim)", "/ math.sqrt(query.shape[-1])"))),
    Mistake(_M, "no-scale", "scores not scaled",
            _edit(_MHA, (" / math.sqrt(self.key_dim)", ""))),
    Mistake(_M, "scale-precedence", "self.key_dim ** 1/2: divides by key_dim, then by 2",
            _edit(_MHA, ("/ math.sqrt(self.key_dim)", "/ self.key_dim ** 1/2"))),
    Mistake(_M, "scale-sqrt-value-dim", "scaled by the value size instead of key_dim",
            _edit(_MHA, ("/ math.sqrt(self.key_dim)", "/ math.sqrt(v.shape[-1])"))),
    Mistake(_M, "softmax-over-queries", "softmax over the queries axis",
            _edit(_MHA, ("ops.softmax(scores, axis=-1)", "ops.softmax(scores, axis=-2)"))),
    Mistake(_M, "mask-wrong-sign", "True in attention_mask taken as 'hide'",
            _edit(_MHA, ("ops.where(mask, scores, -1e9)", "ops.where(mask, -1e9, scores)")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "mask-ignored", "attention_mask accepted and never used",
            _edit(_MHA, ('        if attention_mask is not None:\n'
                         '            mask = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)\n',
                         "")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "mask-without-head-axis", "attention_mask not given a head axis before the broadcast",
            _edit(_MHA, ('mask = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)',
                         'mask = ops.cast(attention_mask, "bool")')),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "causal-ignored", "use_causal_mask accepted and never used",
            _edit(_MHA, ("        if use_causal_mask:\n"
                         "            t_q, t_k = ops.shape(scores)[2], ops.shape(scores)[3]\n"
                         "            causal = ops.cast(ops.tril(ops.ones((t_q, t_k))), \"bool\")\n"
                         "            mask = causal if mask is None else ops.logical_and(mask, causal)\n",
                         "")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "causal-upper-triangle", "the causal mask lets queries see the future, not the past",
            _edit(_MHA, ("ops.tril(ops.ones((t_q, t_k)))", "ops.triu(ops.ones((t_q, t_k)))")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "causal-replaces-mask", "with use_causal_mask the attention_mask is dropped",
            _edit(_MHA, ("mask = causal if mask is None else ops.logical_and(mask, causal)",
                         "mask = causal")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "causal-bottom-right", "the causal diagonal aligned to the last key when T_q != T_k",
            _edit(_MHA, ("ops.tril(ops.ones((t_q, t_k)))", "ops.tril(ops.ones((t_q, t_k)), k=t_k - t_q)")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "neg-inf-nan", "-inf masking: a fully masked row becomes NaN",
            _edit(_MHA, ("ops.where(mask, scores, -1e9)", "ops.where(mask, scores, float('-inf'))")),
            fails=("test_MultiHeadAttention__masks",)),
    Mistake(_M, "projection-biases-not-added", "biases created but never added to the projections",
            _edit(_MHA, ("        if self.use_bias:\n"
                         "            q = q + ops.expand_dims(self.bq, 1)\n"
                         "            k = k + ops.expand_dims(self.bk, 1)\n"
                         "            v = v + ops.expand_dims(self.bv, 1)\n", ""))),
    Mistake(_M, "output-bias-not-added", "the output bias created but never added",
            _edit(_MHA, ("        if self.use_bias:\n            output = output + self.bo\n", ""))),
    Mistake(_M, "use-bias-ignored", "biases created even when use_bias=False",
            _edit(_MHA, ("        bias = None\n        if self.use_bias:\n            bias = self.add_weight(",
                         "        bias = self.add_weight("))),
    Mistake(_M, "value-dim-ignored", "value kernel and output kernel built with key_dim",
            _edit(_MHA, ("value_dim = self.value_dim if self.value_dim is not None else self.key_dim",
                         "value_dim = self.key_dim"))),
    Mistake(_M, "key-built-on-value", "the key kernel sized from the value input, the key input ignored",
            _edit(_MHA, ("        if key is None:\n            key = value\n        q =",
                         "        key = value\n        q ="),
                  ('self._pair("key", (key_shape[-1],', 'self._pair("key", (value_shape[-1],'))),
    Mistake(_M, "output-to-value-size", "the output projected to the value's size, not the query's",
            _edit(_MHA, ("heads, key_dim, d_query = self.num_heads, self.key_dim, query_shape[-1]",
                         "heads, key_dim, d_query = self.num_heads, self.key_dim, value_shape[-1]"))),
    Mistake(_M, "no-output-projection", "heads merged and returned without the output kernel",
            _edit(_MHA, ('        output = ops.einsum("bthv,hvd->btd", context, self.wo)\n',
                         '        output = ops.reshape(context, (ops.shape(context)[0], ops.shape(context)[1], -1))\n'))),
    Mistake(_M, "merge-without-transpose", "context reshaped from (B, H, T, v) without moving heads back",
            _edit(_MHA, ('        context = ops.einsum("bhts,bhsv->bthv", dropped, v)\n'
                         '        output = ops.einsum("bthv,hvd->btd", context, self.wo)\n',
                         '        context = ops.matmul(dropped, v)  # (B, H, T_q, value_dim)\n'
                         '        batch, heads, t_q, size = ops.shape(context)\n'
                         '        context = ops.reshape(context, (batch, t_q, heads * size))\n'
                         '        output = ops.matmul(context, ops.reshape(self.wo, (heads * size, -1)))\n'))),
    Mistake(_M, "split-without-transpose", "projections reshaped to (B, H, T, k) without a transpose",
            _edit(_MHA, ('        q = ops.einsum("btd,dhk->bhtk", query, self.wq)\n'
                         '        k = ops.einsum("bsd,dhk->bhsk", key, self.wk)\n'
                         '        v = ops.einsum("bsd,dhv->bhsv", value, self.wv)\n',
                         '        def heads(x, kernel):\n'
                         '            y = ops.einsum("btd,dhk->bthk", x, kernel)\n'
                         '            b, t, h, size = ops.shape(y)\n'
                         '            return ops.reshape(y, (b, h, t, size))\n'
                         '        q = heads(query, self.wq)\n'
                         '        k = heads(key, self.wk)\n'
                         '        v = heads(value, self.wv)\n'))),
    Mistake(_M, "dropout-at-inference", "dropout applied whatever `training` says",
            _edit(_MHA, ("self.dropout_layer(weights, training=training)",
                         "self.dropout_layer(weights, training=True)")),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "dropout-on-output", "dropout on the layer's output instead of the probabilities",
            _edit(_MHA, ("dropped = self.dropout_layer(weights, training=training)",
                         "dropped = weights"),
                  ("        if return_attention_scores:\n            return output, weights",
                   "        output = self.dropout_layer(output, training=training)\n"
                   "        if return_attention_scores:\n            return output, weights")),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "dropout-on-context", "dropout on the heads' context vectors, not the probabilities",
            _edit(_MHA, ("dropped = self.dropout_layer(weights, training=training)",
                         "dropped = weights"),
                  ('        output = ops.einsum("bthv,hvd->btd", context, self.wo)\n',
                   '        context = self.dropout_layer(context, training=training)\n'
                   '        output = ops.einsum("bthv,hvd->btd", context, self.wo)\n')),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "dropout-on-values", "dropout on the projected values, not the probabilities",
            _edit(_MHA, ("dropped = self.dropout_layer(weights, training=training)",
                         "dropped = weights\n"
                         "        v = self.dropout_layer(v, training=training)")),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "dropout-before-softmax", "dropout on the raw scores before the softmax",
            _edit(_MHA, ("        weights = ops.softmax(scores, axis=-1)\n"
                         "        dropped = self.dropout_layer(weights, training=training)\n",
                         "        scores = self.dropout_layer(scores, training=training)\n"
                         "        weights = ops.softmax(scores, axis=-1)\n"
                         "        dropped = weights\n")),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "dropout-not-rescaled", "a Bernoulli mask on the probabilities without 1 / (1 - rate)",
            _edit(_MHA, ("dropped = self.dropout_layer(weights, training=training)",
                         "dropped = weights\n"
                         "        if training and self.dropout > 0:\n"
                         "            keep = keras.random.uniform(ops.shape(weights)) >= self.dropout\n"
                         "            dropped = weights * ops.cast(keep, weights.dtype)")),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "scores-after-dropout", "the probabilities returned after dropout instead of before",
            _edit(_MHA, ("            return output, weights", "            return output, dropped")),
            fails=("test_MultiHeadAttention__dropout",)),
    Mistake(_M, "dropout-rate-overwritten", "self.dropout holds the Dropout layer, not the rate",
            _edit(_MHA, ("        self.dropout_layer = keras.layers.Dropout(dropout)\n",
                         "        self.dropout = keras.layers.Dropout(dropout)\n"
                         "        self.dropout_layer = self.dropout\n")),
            fails=("test_MultiHeadAttention__config",)),
    Mistake(_M, "config-without-value-dim", "get_config() leaves value_dim and dropout out",
            _edit(_MHA, ('                       "value_dim": self.value_dim, "dropout": self.dropout,\n',
                         "")),
            fails=("test_MultiHeadAttention__config",)),
    Mistake(_M, "get-config-stub-emptied", "a correct layer whose get_config returns the base "
            "layer's config only (the stub's lines kept, nothing added)",
            _edit(_MHA, ('        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,\n'
                         '                       "value_dim": self.value_dim, "dropout": self.dropout,\n'
                         '                       "use_bias": self.use_bias})\n', "")),
            fails=("test_MultiHeadAttention__config",)),
    Mistake(_M, "no-validation", "a correct layer that checks none of its arguments",
            _edit(_MHA, ('        if num_heads <= 0:\n'
                         '            raise ValueError(f"num_heads must be positive, got num_heads={num_heads}")\n'
                         '        if key_dim <= 0:\n'
                         '            raise ValueError(f"key_dim must be positive, got key_dim={key_dim}")\n'
                         '        if not 0.0 <= dropout < 1.0:\n'
                         '            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")\n',
                         "")),
            fails=("test_MultiHeadAttention__validation",)),
]

#: Mistakes the visible check may let through, with the reason: none; every
#: mistake above fails the visible check of its exercise too.
HIDDEN_ONLY: dict[str, str] = {}

# Issue 47: each rule its own share. Every mistake above without `fails` loses its
# exercise's main tests cell and no other (the masks cell judges a layer against
# itself); these are wrong in every value they give, masked or not.
_EVERY_VALUE = ("test_MultiHeadAttention", "test_MultiHeadAttention__masks")
MISTAKES = own_share(MISTAKES, {
    # A query's weights do not sum to 1 over its keys.
    ("MultiHeadAttention", "softmax-over-queries"): _EVERY_VALUE,
    # Heads and positions mixed by a reshape: a query's output holds other queries'.
    ("MultiHeadAttention", "merge-without-transpose"): _EVERY_VALUE,
    ("MultiHeadAttention", "split-without-transpose"): _EVERY_VALUE,
    # The layer raises where the query's and value's sizes differ.
    ("MultiHeadAttention", "output-to-value-size"): _EVERY_VALUE,
    ("MultiHeadAttention", "no-output-projection"): _EVERY_VALUE,
})
