"""Verdict suite of lab4 (masks, encoder and masked decoder layers).

Answer cells as a student fills them: the whole `def` / `class` with the
curriculum's name. Earlier cells of the notebook put `np`, `keras`, `ops`,
`validate_layer_arguments` (and the student's own earlier exercises) in scope.

VARIANTS are correct answers written differently from the solution (ops.tril,
NumPy, comparison operators; -inf, additive -1e9, renormalising by hand;
sublayers created in `build`, `use_causal_mask=True`, dropout inside the
attention, ...), and "honest readings": answers written from the notebook's
text alone (the config kept in a dict of the constructor's arguments, padded
query rows masked too, -inf with the NaN of empty rows removed afterwards).
MISTAKES are the slips students really make, each a small change of a correct
answer, and each must cost points in its own exercise only; a mistake in a
secondary property (no get_config, no dropout while training, padding
ignored) names the tests cells it fails in `fails` and keeps the others.
Every mistake fails its exercise's visible check as well (HIDDEN_ONLY is
empty).
"""

from __future__ import annotations

from tests.verdicts import Mistake, own_share, swap


# --- causal_mask ------------------------------------------------------------------

CAUSAL_TRIL = '''
def causal_mask(length):
    """The lower triangle of a matrix of ones (ops.tril), as booleans."""
    ones = ops.ones((length, length), dtype="int32")
    return ops.cast(ops.tril(ones), "bool")
'''

CAUSAL_NUMPY = '''
def causal_mask(length):
    """NumPy draws the triangle; keras.ops makes it a tensor."""
    triangle = np.tril(np.ones((length, length), dtype=bool))
    return ops.convert_to_tensor(triangle)
'''

CAUSAL_OPERATORS = '''
def causal_mask(length):
    """Key positions compared with query positions, by broadcasting."""
    query_positions = ops.reshape(ops.arange(length), (length, 1))  # (T, 1)
    key_positions = ops.reshape(ops.arange(length), (1, length))  # (1, T)
    return key_positions <= query_positions
'''

# --- padding_mask -----------------------------------------------------------------

PADDING_NOT_EQUAL = '''
def padding_mask(token_ids, pad_id=0):
    """Not (id == pad_id)."""
    return ops.logical_not(ops.equal(token_ids, pad_id))
'''

PADDING_NUMPY = '''
def padding_mask(token_ids, pad_id=0):
    """Compared in NumPy, returned as a tensor."""
    ids = ops.convert_to_numpy(token_ids)
    return ops.convert_to_tensor(ids != pad_id)
'''

PADDING_DIFFERENCE = '''
def padding_mask(token_ids, pad_id=0):
    """A nonzero difference from pad_id is a real token."""
    difference = ops.abs(ops.convert_to_tensor(token_ids) - pad_id)
    return ops.cast(difference, "bool")
'''

# --- combine_masks ----------------------------------------------------------------

COMBINE_ONES = '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """A missing mask becomes all True of length 1; rows AND columns AND the look-ahead."""
    if query_mask is None and key_mask is None:
        raise ValueError("combine_masks needs query_mask or key_mask")
    given = key_mask if key_mask is not None else query_mask
    batch = ops.shape(given)[0]
    if query_mask is None:
        query_mask = ops.ones((batch, 1), dtype="bool")
    if key_mask is None:
        key_mask = ops.full((batch, 1), True)
    rows = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # (B, T_q, 1)
    cols = ops.expand_dims(ops.cast(key_mask, "bool"), -2)  # (B, 1, T_k)
    mask = ops.logical_and(rows, cols)  # (B, T_q, T_k), an axis of 1 for a missing mask
    if causal:
        mask = ops.logical_and(mask, causal_mask(ops.shape(given)[1])[None])
    return mask
'''

# A missing mask made all True at full length: right for self-attention only
# (the mistake "missing-mask-square").
COMBINE_SQUARE = '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """A missing mask becomes all True; rows AND columns AND the look-ahead."""
    if query_mask is None and key_mask is None:
        raise ValueError("combine_masks needs query_mask or key_mask")
    if query_mask is None:
        query_mask = ops.ones_like(ops.cast(key_mask, "bool"))
    if key_mask is None:
        key_mask = ops.ones_like(ops.cast(query_mask, "bool"))
    rows = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # (B, T_q, 1)
    cols = ops.expand_dims(ops.cast(key_mask, "bool"), -2)  # (B, 1, T_k)
    mask = ops.logical_and(rows, cols)  # (B, T_q, T_k)
    if causal:
        mask = ops.logical_and(mask, causal_mask(ops.shape(mask)[-1])[None])
    return mask
'''

COMBINE_EINSUM = '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """An outer product of 0/1 floats (einsum), then back to booleans; a missing
    mask is a single 1 (length 1)."""
    given = query_mask if query_mask is not None else key_mask
    one = ops.ones((ops.shape(given)[0], 1))
    rows = one if query_mask is None else ops.cast(query_mask, "float32")
    cols = one if key_mask is None else ops.cast(key_mask, "float32")
    mask = ops.einsum("bq,bk->bqk", rows, cols)
    if causal:
        length = ops.shape(given)[1]
        mask = mask * ops.tril(ops.ones((length, length)))
    return mask > 0.5
'''

COMBINE_NUMPY = '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """NumPy broadcasting; a missing side keeps a length-1 axis."""
    q = None if query_mask is None else np.asarray(ops.convert_to_numpy(query_mask), bool)
    k = None if key_mask is None else np.asarray(ops.convert_to_numpy(key_mask), bool)
    if q is None and k is None:
        raise ValueError("combine_masks needs query_mask or key_mask")
    rows = np.ones((k.shape[0], 1, 1), bool) if q is None else q[:, :, None]
    cols = np.ones((q.shape[0], 1, 1), bool) if k is None else k[:, None, :]
    mask = rows & cols
    if causal:
        n = (q if q is not None else k).shape[1]
        mask = mask & np.tril(np.ones((n, n), bool))[None]
    return ops.convert_to_tensor(mask)
'''

# --- masked_softmax ---------------------------------------------------------------

SOFTMAX_INF = '''
def masked_softmax(scores, mask):
    """-inf for masked scores; the NaN of a fully masked row is replaced by 0."""
    scores = ops.convert_to_tensor(scores)
    allowed = ops.broadcast_to(ops.convert_to_tensor(mask, "bool"), ops.shape(scores))
    weights = ops.softmax(ops.where(allowed, scores, float("-inf")), axis=-1)
    return ops.where(allowed, weights, 0.0)
'''

SOFTMAX_ADDITIVE = '''
def masked_softmax(scores, mask):
    """An additive mask of -1e9, then the weights multiplied by the 0/1 mask."""
    scores = ops.convert_to_tensor(scores)
    keep = ops.cast(mask, scores.dtype)
    weights = ops.softmax(scores + (1.0 - keep) * -1e9, axis=-1)
    return weights * keep
'''

SOFTMAX_BY_HAND = '''
def masked_softmax(scores, mask):
    """Exponentials of the allowed scores only, renormalised by their own sum."""
    scores = ops.convert_to_tensor(scores)
    keep = ops.cast(ops.broadcast_to(mask, ops.shape(scores)), scores.dtype)
    shifted = scores - ops.max(scores, axis=-1, keepdims=True)
    numerators = ops.exp(shifted) * keep
    totals = ops.sum(numerators, axis=-1, keepdims=True)
    return numerators / ops.where(totals > 0, totals, 1.0)
'''

SOFTMAX_INF_ISNAN = '''
def masked_softmax(scores, mask):
    """-inf for masked scores as the lecture writes it; the NaN of a row with no
    allowed key (0 / 0) replaced by 0 afterwards."""
    scores = ops.convert_to_tensor(scores)
    allowed = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(scores))
    masked = ops.where(allowed, scores, ops.full_like(scores, float("-inf")))
    weights = ops.softmax(masked, axis=-1)
    return ops.where(ops.isnan(weights), ops.zeros_like(weights), weights)
'''

# --- FeedForward ------------------------------------------------------------------

FFN_ACTIVATION = '''
class FeedForward(keras.layers.Layer):
    """relu given as a function; the config merged with ** ."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.d_model = d_model
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.dense1 = keras.layers.Dense(units=dff, activation=keras.activations.relu)
        self.dense2 = keras.layers.Dense(units=d_model)
        self.dropout = keras.layers.Dropout(rate=dropout_rate)

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))

    def call(self, x, training=None):
        for layer in (self.dense1, self.dense2):
            x = layer(x)
        return self.dropout(x, training=training)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "dff": self.dff,
                "dropout_rate": self.dropout_rate}
'''

FFN_MAXIMUM = '''
class FeedForward(keras.layers.Layer):
    """Linear Dense layers; max(0, h) in call."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.d_model, self.dff, self.dropout_rate = d_model, dff, dropout_rate
        self.dense1 = keras.layers.Dense(dff)
        self.dense2 = keras.layers.Dense(d_model)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))

    def call(self, x, training=None):
        hidden = ops.maximum(self.dense1(x), 0.0)
        return self.dropout(self.dense2(hidden), training=training)

    def get_config(self):
        config = super().get_config()
        config["d_model"] = self.d_model
        config["dff"] = self.dff
        config["dropout_rate"] = self.dropout_rate
        return config
'''

FFN_RELU_LAYER = '''
class FeedForward(keras.layers.Layer):
    """My own argument checks; dropout only applied when training is true."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        for name, size in (("d_model", d_model), ("dff", dff)):
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise ValueError(f"{name} must be a positive integer, got {size!r}")
        if not 0 <= dropout_rate < 1:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate!r}")
        self.d_model = d_model
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.dense1 = keras.layers.Dense(dff, activation="relu")
        self.dense2 = keras.layers.Dense(d_model, activation=None, use_bias=True)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))

    def call(self, x, training=None):
        output = self.dense2(self.dense1(x))
        if training:
            output = self.dropout(output, training=True)
        return output

    def get_config(self):
        config = super().get_config()
        config.update(dict(d_model=self.d_model, dff=self.dff,
                           dropout_rate=self.dropout_rate))
        return config
'''

FFN_CONFIG_DICT = '''
class FeedForward(keras.layers.Layer):
    """Honest reading: the arguments kept in one dict that get_config returns;
    the sublayers made in build."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.arguments = {"d_model": d_model, "dff": dff, "dropout_rate": dropout_rate}
        self.dense1 = keras.layers.Dense(dff, activation="relu")
        self.dense2 = keras.layers.Dense(d_model)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.arguments["dff"],))

    def call(self, x, training=None):
        return self.dropout(self.dense2(self.dense1(x)), training=training)

    def get_config(self):
        return {**super().get_config(), **self.arguments}
'''

# A correct FeedForward the mistakes are made in.
FFN_BASE = '''
class FeedForward(keras.layers.Layer):
    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.d_model = d_model
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.dense1 = keras.layers.Dense(dff, activation="relu")
        self.dense2 = keras.layers.Dense(d_model)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))

    def call(self, x, training=None):
        out = self.dense2(self.dense1(x))
        return self.dropout(out, training=training)

    def get_config(self):
        config = super().get_config()
        config.update({"d_model": self.d_model, "dff": self.dff,
                       "dropout_rate": self.dropout_rate})
        return config
'''

# --- EncoderLayer -----------------------------------------------------------------

ENCODER_BUILD = '''
class EncoderLayer(keras.layers.Layer):
    """Sublayers created in build; the key mask made with expand_dims."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate

    def build(self, input_shape):
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=self.num_heads, key_dim=self.d_model // self.num_heads)
        self.ffn = FeedForward(self.d_model, self.dff, self.dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(self.dropout_rate)
        self.self_attention.build(input_shape, input_shape)
        self.ffn.build(input_shape)
        self.norm1.build(input_shape)
        self.norm2.build(input_shape)

    def call(self, x, padding_mask=None, training=None):
        mask = None
        if padding_mask is not None:
            mask = ops.expand_dims(ops.cast(padding_mask, "bool"), axis=1)  # (B, 1, T)
        attended = self.self_attention(query=x, value=x, attention_mask=mask,
                                       training=training)
        attended = self.dropout(attended, training=training)
        x = self.norm1(ops.add(x, attended))
        return self.norm2(ops.add(x, self.ffn(x, training=training)))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dff=self.dff,
                      dropout_rate=self.dropout_rate)
        return config
'''

ENCODER_RESIDUAL_HELPER = '''
class EncoderLayer(keras.layers.Layer):
    """A helper for "dropout, residual, norm"; padded query rows masked as well."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.d_model, self.num_heads = d_model, num_heads
        self.dff, self.dropout_rate = dff, dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = keras.layers.Dropout(dropout_rate)

    def build(self, input_shape):
        self.self_attention.build(input_shape, input_shape)
        self.ffn.build(input_shape)
        self.norm1.build(input_shape)
        self.norm2.build(input_shape)

    def _add_and_norm(self, x, sublayer_output, norm):
        return norm(x + sublayer_output)

    def call(self, x, padding_mask=None, training=None):
        if padding_mask is None:
            mask = None
        else:
            mask = combine_masks(query_mask=padding_mask, key_mask=padding_mask)  # (B, T, T)
        attended = self.self_attention(x, x, attention_mask=mask, training=training)
        x = self._add_and_norm(x, self.dropout1(attended, training=training), self.norm1)
        return self._add_and_norm(x, self.ffn(x, training=training), self.norm2)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model,
                "num_heads": self.num_heads, "dff": self.dff,
                "dropout_rate": self.dropout_rate}
'''

ENCODER_ADD_LAYERS = '''
class EncoderLayer(keras.layers.Layer):
    """Add layers for the residuals; dropout on the attention weights as well."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate)
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.add1 = keras.layers.Add()
        self.add2 = keras.layers.Add()

    def call(self, x, padding_mask=None, training=None):
        mask = None
        if padding_mask is not None:
            mask = ops.convert_to_tensor(padding_mask, "bool")[:, None, :]
        attended = self.self_attention(query=x, key=x, value=x, attention_mask=mask,
                                       training=training)
        x = self.norm1(self.add1([x, self.dropout(attended, training=training)]))
        return self.norm2(self.add2([x, self.ffn(x, training=training)]))

    def get_config(self):
        config = super().get_config()
        config["d_model"] = self.d_model
        config["num_heads"] = self.num_heads
        config["dff"] = self.dff
        config["dropout_rate"] = self.dropout_rate
        return config
'''

ENCODER_CONFIG_DICT = '''
class EncoderLayer(keras.layers.Layer):
    """Honest reading: the arguments kept in one dict (no attribute per argument);
    padded query rows masked as well as padded keys."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.config_arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff,
                                     dropout_rate=dropout_rate)
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads)
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, padding_mask=None, training=None):
        mask = None
        if padding_mask is not None:
            real = ops.cast(padding_mask, "bool")
            mask = ops.logical_and(real[:, :, None], real[:, None, :])  # (B, T, T)
        attended = self.self_attention(query=x, value=x, key=x, attention_mask=mask,
                                       training=training)
        x = self.norm1(x + self.dropout(attended, training=training))
        return self.norm2(x + self.ffn(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(self.config_arguments)
        return config
'''

# A correct EncoderLayer the mistakes are made in.
ENCODER_BASE = '''
class EncoderLayer(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=d_model // num_heads)
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def build(self, input_shape):
        self.self_attention.build(input_shape, input_shape)
        self.ffn.build(input_shape)
        self.norm1.build(input_shape)
        self.norm2.build(input_shape)

    def call(self, x, padding_mask=None, training=None):
        mask = None
        if padding_mask is not None:
            mask = combine_masks(key_mask=padding_mask)
        attention = self.self_attention(query=x, value=x, key=x, attention_mask=mask, training=training)
        x = self.norm1(x + self.dropout(attention, training=training))
        return self.norm2(x + self.ffn(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update({"d_model": self.d_model, "num_heads": self.num_heads,
                       "dff": self.dff, "dropout_rate": self.dropout_rate})
        return config
'''

# --- DecoderLayer -----------------------------------------------------------------

DECODER_USE_CAUSAL = '''
class DecoderLayer(keras.layers.Layer):
    """use_causal_mask=True for the look-ahead; one Dropout per sublayer."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        key_dim = d_model // num_heads
        self.self_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
        self.cross_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = keras.layers.Dropout(dropout_rate)
        self.dropout2 = keras.layers.Dropout(dropout_rate)

    def build(self, x_shape, context_shape):
        self.self_attention.build(x_shape, x_shape)
        self.cross_attention.build(x_shape, context_shape)
        self.ffn.build(x_shape)
        for norm in (self.norm1, self.norm2, self.norm3):
            norm.build(x_shape)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        target_keys = None
        if x_padding_mask is not None:
            target_keys = combine_masks(key_mask=x_padding_mask)  # (B, 1, T)
        source_keys = None
        if context_padding_mask is not None:
            source_keys = combine_masks(key_mask=context_padding_mask)  # (B, 1, S)
        h = self.self_attention(query=x, value=x, attention_mask=target_keys,
                                use_causal_mask=True, training=training)
        x = self.norm1(x + self.dropout1(h, training=training))
        h, scores = self.cross_attention(query=x, value=context, attention_mask=source_keys,
                                         return_attention_scores=True, training=training)
        self.last_attention_scores = scores
        x = self.norm2(x + self.dropout2(h, training=training))
        return self.norm3(x + self.ffn(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dff=self.dff,
                      dropout_rate=self.dropout_rate)
        return config
'''

DECODER_BUILD = '''
class DecoderLayer(keras.layers.Layer):
    """Sublayers created in build; masks by hand; padded query rows masked too."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.dropout_rate = dropout_rate

    def build(self, x_shape, context_shape):
        heads, size = self.num_heads, self.d_model // self.num_heads
        self.self_attention = keras.layers.MultiHeadAttention(heads, size)
        self.cross_attention = keras.layers.MultiHeadAttention(heads, size)
        self.ffn = FeedForward(self.d_model, self.dff, self.dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(self.dropout_rate)
        self.self_attention.build(x_shape, x_shape)
        self.cross_attention.build(x_shape, context_shape)
        self.ffn.build(x_shape)
        for norm in (self.norm1, self.norm2, self.norm3):
            norm.build(x_shape)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        length = x.shape[1]
        look_ahead = ops.cast(ops.tril(ops.ones((length, length))), "bool")[None]  # (1, T, T)
        self_mask, cross_mask = look_ahead, None
        if x_padding_mask is not None:
            target = ops.cast(x_padding_mask, "bool")
            self_mask = ops.logical_and(
                look_ahead, ops.logical_and(target[:, :, None], target[:, None, :]))
        if context_padding_mask is not None:
            source = ops.cast(context_padding_mask, "bool")
            cross_mask = source[:, None, :]  # (B, 1, S)
            if x_padding_mask is not None:
                cross_mask = ops.logical_and(cross_mask, target[:, :, None])  # (B, T, S)
        h = self.self_attention(query=x, value=x, key=x, attention_mask=self_mask,
                                training=training)
        x = self.norm1(x + self.dropout(h, training=training))
        h, self.last_attention_scores = self.cross_attention(
            query=x, value=context, key=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)
        x = self.norm2(x + self.dropout(h, training=training))
        return self.norm3(x + self.ffn(x, training=training))

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model,
                "num_heads": self.num_heads, "dff": self.dff,
                "dropout_rate": self.dropout_rate}
'''

DECODER_POSITIONAL = '''
class DecoderLayer(keras.layers.Layer):
    """query, value, key given positionally (masks by keyword); attention dropout."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate)
        self.cross_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate)
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.norm1, self.norm2, self.norm3 = (
            keras.layers.LayerNormalization(epsilon=1e-6) for _ in range(3))
        self.dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        if x_padding_mask is None:
            self_mask = causal_mask(ops.shape(x)[1])[None, :, :]
        else:
            self_mask = combine_masks(query_mask=x_padding_mask, key_mask=x_padding_mask,
                                      causal=True)
        cross_mask = (None if context_padding_mask is None
                      else combine_masks(key_mask=context_padding_mask))
        attended = self.self_attention(x, x, x, attention_mask=self_mask, training=training)
        x = self.norm1(ops.add(x, self.dropout(attended, training=training)))
        attended, scores = self.cross_attention(x, context, context, attention_mask=cross_mask,
                                                return_attention_scores=True,
                                                training=training)
        self.last_attention_scores = scores
        x = self.norm2(ops.add(x, self.dropout(attended, training=training)))
        return self.norm3(ops.add(x, self.ffn(x, training=training)))

    def get_config(self):
        config = super().get_config()
        for name in ("d_model", "num_heads", "dff", "dropout_rate"):
            config[name] = getattr(self, name)
        return config
'''

DECODER_CONFIG_DICT = '''
class DecoderLayer(keras.layers.Layer):
    """Honest reading: the arguments kept in one dict; the masks written with
    combine_masks (padded query rows masked too, in both attentions)."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.config_arguments = {"d_model": d_model, "num_heads": num_heads, "dff": dff,
                                 "dropout_rate": dropout_rate}
        size = d_model // num_heads
        self.self_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=size)
        self.cross_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=size)
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        target = x_padding_mask
        if target is None:
            target = ops.ones(ops.shape(x)[:2], dtype="bool")
        self_mask = combine_masks(query_mask=target, key_mask=target, causal=True)
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = combine_masks(query_mask=target, key_mask=context_padding_mask)
        attended = self.self_attention(query=x, value=x, key=x, attention_mask=self_mask,
                                       training=training)
        x = self.norm1(x + self.dropout(attended, training=training))
        attended, self.last_attention_scores = self.cross_attention(
            query=x, value=context, key=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)
        x = self.norm2(x + self.dropout(attended, training=training))
        return self.norm3(x + self.ffn(x, training=training))

    def get_config(self):
        return {**super().get_config(), **self.config_arguments}
'''

# A correct DecoderLayer the mistakes are made in.
DECODER_BASE = '''
class DecoderLayer(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=d_model // num_heads)
        self.cross_attention = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=d_model // num_heads)
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def build(self, x_shape, context_shape):
        self.self_attention.build(x_shape, x_shape)
        self.cross_attention.build(x_shape, context_shape)
        self.ffn.build(x_shape)
        for norm in (self.norm1, self.norm2, self.norm3):
            norm.build(x_shape)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        length = ops.shape(x)[1]
        self_mask = causal_mask(length)[None, :, :]
        if x_padding_mask is not None:
            self_mask = ops.logical_and(self_mask, combine_masks(key_mask=x_padding_mask))
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = combine_masks(key_mask=context_padding_mask)
        attention = self.self_attention(query=x, value=x, key=x, attention_mask=self_mask, training=training)
        x = self.norm1(x + self.dropout(attention, training=training))
        attention, scores = self.cross_attention(query=x, value=context, key=context, attention_mask=cross_mask, return_attention_scores=True, training=training)
        self.last_attention_scores = scores
        x = self.norm2(x + self.dropout(attention, training=training))
        return self.norm3(x + self.ffn(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update({"d_model": self.d_model, "num_heads": self.num_heads,
                       "dff": self.dff, "dropout_rate": self.dropout_rate})
        return config
'''


VARIANTS = {
    "causal_mask": [CAUSAL_TRIL, CAUSAL_NUMPY, CAUSAL_OPERATORS],
    "padding_mask": [PADDING_NOT_EQUAL, PADDING_NUMPY, PADDING_DIFFERENCE],
    "combine_masks": [COMBINE_ONES, COMBINE_EINSUM, COMBINE_NUMPY],
    "masked_softmax": [SOFTMAX_INF, SOFTMAX_ADDITIVE, SOFTMAX_BY_HAND, SOFTMAX_INF_ISNAN],
    "FeedForward": [FFN_ACTIVATION, FFN_MAXIMUM, FFN_RELU_LAYER, FFN_CONFIG_DICT],
    "EncoderLayer": [ENCODER_BUILD, ENCODER_RESIDUAL_HELPER, ENCODER_ADD_LAYERS,
                     ENCODER_CONFIG_DICT],
    "DecoderLayer": [DECODER_USE_CAUSAL, DECODER_BUILD, DECODER_POSITIONAL,
                     DECODER_CONFIG_DICT],
}

#: Mistakes that may pass their exercise's visible check, with the reason: none
#: in this lab (every mistake below fails the visible check of its exercise).
HIDDEN_ONLY: dict[str, str] = {}


_ENC_CALL = ("        attention = self.self_attention(query=x, value=x, key=x, "
             "attention_mask=mask, training=training)")
_DEC_SELF = ("        attention = self.self_attention(query=x, value=x, key=x, "
             "attention_mask=self_mask, training=training)")

MISTAKES = [
    # causal_mask
    Mistake("causal_mask", "no-diagonal", "the diagonal is left out (tril with k=-1): a token "
            "may not see itself", '''
def causal_mask(length):
    return ops.cast(ops.tril(ops.ones((length, length)), k=-1), "bool")
'''),
    Mistake("causal_mask", "upper-triangle", "the mask is transposed: True on and above the "
            "diagonal (queries see the future)", '''
def causal_mask(length):
    return ops.cast(ops.triu(ops.ones((length, length))), "bool")
'''),
    Mistake("causal_mask", "one-step-ahead", "tril with k=1: each query also sees the next "
            "token", '''
def causal_mask(length):
    return ops.cast(ops.tril(ops.ones((length, length)), k=1), "bool")
'''),
    Mistake("causal_mask", "true-means-masked", "True marks the hidden future (the other "
            "convention) instead of the allowed keys", '''
def causal_mask(length):
    positions = ops.arange(length)
    return ops.greater(ops.expand_dims(positions, 0), ops.expand_dims(positions, 1))
'''),
    Mistake("causal_mask", "float-mask", "the 0/1 triangle is returned as floats, not "
            "booleans", '''
def causal_mask(length):
    return ops.tril(ops.ones((length, length)))
'''),
    Mistake("causal_mask", "additive-mask", "returns the additive look-ahead matrix (0 below, "
            "-inf above) instead of a boolean mask", '''
def causal_mask(length):
    allowed = ops.tril(ops.ones((length, length))) > 0
    return ops.where(allowed, 0.0, float("-inf"))
'''),

    # padding_mask
    Mistake("padding_mask", "inverted", "True marks the padding instead of the real "
            "tokens", '''
def padding_mask(token_ids, pad_id=0):
    return ops.equal(ops.convert_to_tensor(token_ids), pad_id)
'''),
    Mistake("padding_mask", "cast-to-bool", "nonzero ids are real: pad_id is ignored (right "
            "only for pad_id=0)", '''
def padding_mask(token_ids, pad_id=0):
    return ops.cast(token_ids, "bool")
'''),
    Mistake("padding_mask", "greater-than-pad", "ids > pad_id: ids below pad_id count as "
            "padding", '''
def padding_mask(token_ids, pad_id=0):
    return ops.greater(ops.convert_to_tensor(token_ids), pad_id)
'''),
    Mistake("padding_mask", "float-mask", "a 0/1 float mask instead of booleans", '''
def padding_mask(token_ids, pad_id=0):
    return ops.cast(ops.not_equal(ops.convert_to_tensor(token_ids), pad_id), "float32")
'''),
    Mistake("padding_mask", "attention-shaped", "already expanded to (B, 1, T) for the "
            "attention instead of (B, T)", '''
def padding_mask(token_ids, pad_id=0):
    return ops.not_equal(ops.convert_to_tensor(token_ids), pad_id)[:, None, :]
'''),
    Mistake("padding_mask", "additive-mask", "an additive mask (-1e9 at padding, 0 elsewhere) "
            "instead of a boolean one", '''
def padding_mask(token_ids, pad_id=0):
    return ops.where(ops.equal(ops.convert_to_tensor(token_ids), pad_id), -1e9, 0.0)
'''),

    # combine_masks
    Mistake("combine_masks", "or-instead-of-and", "rows and columns combined with OR: a "
            "padded key is visible from real queries", swap(
                COMBINE_ONES, "mask = ops.logical_and(rows, cols)",
                "mask = ops.logical_or(rows, cols)")),
    Mistake("combine_masks", "rows-columns-swapped", "the query mask gives the columns and "
            "the key mask the rows", swap(
                COMBINE_ONES,
                'rows = ops.expand_dims(ops.cast(query_mask, "bool"), -1)',
                'rows = ops.expand_dims(ops.cast(key_mask, "bool"), -1)',
                'cols = ops.expand_dims(ops.cast(key_mask, "bool"), -2)',
                'cols = ops.expand_dims(ops.cast(query_mask, "bool"), -2)')),
    Mistake("combine_masks", "causal-ignored", "the causal flag is never used", swap(
        COMBINE_ONES,
        "    if causal:\n        mask = ops.logical_and(mask, causal_mask(ops.shape(given)[1])[None])\n",
        "")),
    Mistake("combine_masks", "causal-transposed", "the look-ahead part is the upper triangle "
            "(transposed)", swap(
                COMBINE_ONES, "causal_mask(ops.shape(given)[1])[None]",
                "ops.transpose(causal_mask(ops.shape(given)[1]))[None]")),
    Mistake("combine_masks", "query-mask-ignored", "only the key mask is used: padded query "
            "rows stay visible", '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    given = key_mask if key_mask is not None else query_mask
    mask = ops.expand_dims(ops.cast(given, "bool"), 1)  # (B, 1, T_k)
    if causal:
        length = ops.shape(given)[1]
        mask = ops.logical_and(mask, causal_mask(length)[None])
    return mask
'''),
    Mistake("combine_masks", "missing-mask-hides-all", "a missing mask is taken as all False "
            "instead of all True", swap(
                COMBINE_ONES,
                'query_mask = ops.ones((batch, 1), dtype="bool")',
                'query_mask = ops.zeros((batch, 1), dtype="bool")',
                'key_mask = ops.full((batch, 1), True)',
                'key_mask = ops.full((batch, 1), False)')),
    Mistake("combine_masks", "missing-mask-square", "a missing mask made all True at the "
            "length of the other, (B, T_k, T_k): right for self-attention only, it does not "
            "fit a cross-attention with T_q != T_k", COMBINE_SQUARE,
            fails=("test_combine_masks__broadcast",)),
    Mistake("combine_masks", "float-result", "float 0/1 masks multiplied and never cast back "
            "to bool", swap(COMBINE_EINSUM, "    return mask > 0.5", "    return mask")),

    Mistake("combine_masks", "causal-needs-key-mask", "the look-ahead length is read from "
            "key_mask: fails when only query_mask is given with causal=True", '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    mask = None
    if query_mask is not None:
        mask = ops.expand_dims(ops.cast(query_mask, "bool"), 2)  # (B, T_q, 1)
    if key_mask is not None:
        cols = ops.expand_dims(ops.cast(key_mask, "bool"), 1)  # (B, 1, T_k)
        mask = cols if mask is None else ops.logical_and(mask, cols)
    if causal:
        mask = ops.logical_and(mask, causal_mask(ops.shape(key_mask)[1])[None])
    return mask
'''),

    # masked_softmax
    Mistake("masked_softmax", "mask-inverted", "the large negative value goes where the mask "
            "is True", '''
def masked_softmax(scores, mask):
    scores = ops.convert_to_tensor(scores)
    hidden = ops.where(ops.cast(mask, "bool"), -1e9, scores)
    return ops.softmax(hidden, axis=-1)
'''),
    Mistake("masked_softmax", "softmax-over-queries", "the softmax runs over axis -2 (the "
            "queries) instead of the keys", swap(
                SOFTMAX_INF, "float(\"-inf\")), axis=-1)", "float(\"-inf\")), axis=-2)")),
    Mistake("masked_softmax", "nan-rows", "-inf for masked scores and nothing more: a fully "
            "masked row is NaN", '''
def masked_softmax(scores, mask):
    scores = ops.convert_to_tensor(scores)
    return ops.softmax(ops.where(ops.cast(mask, "bool"), scores, float("-inf")), axis=-1)
''', fails=("test_masked_softmax__masked_rows",)),
    Mistake("masked_softmax", "zeroed-not-renormalised", "softmax over all keys, then masked "
            "weights set to 0: rows no longer sum to 1", '''
def masked_softmax(scores, mask):
    weights = ops.softmax(ops.convert_to_tensor(scores), axis=-1)
    return ops.where(ops.cast(mask, "bool"), weights, 0.0)
'''),
    Mistake("masked_softmax", "scores-times-mask", "scores multiplied by the mask: a masked "
            "score becomes 0, not -inf, and keeps weight", '''
def masked_softmax(scores, mask):
    scores = ops.convert_to_tensor(scores)
    return ops.softmax(scores * ops.cast(mask, scores.dtype), axis=-1)
'''),
    Mistake("masked_softmax", "scaled-again", "the scores are divided by sqrt(T_k) inside "
            "the softmax", swap(
                SOFTMAX_ADDITIVE, "weights = ops.softmax(scores + (1.0 - keep) * -1e9, axis=-1)",
                "scale = ops.sqrt(ops.cast(ops.shape(scores)[-1], scores.dtype))\n"
                "    weights = ops.softmax(scores / scale + (1.0 - keep) * -1e9, axis=-1)")),

    # FeedForward
    Mistake("FeedForward", "no-activation", "dense1 without the ReLU", swap(
        FFN_BASE, 'keras.layers.Dense(dff, activation="relu")', "keras.layers.Dense(dff)")),
    Mistake("FeedForward", "relu-on-output", "dense2 has a ReLU too", swap(
        FFN_BASE, "keras.layers.Dense(d_model)", 'keras.layers.Dense(d_model, activation="relu")')),
    Mistake("FeedForward", "residual-inside", "x is added to the output inside the block",
            swap(FFN_BASE, "return self.dropout(out, training=training)",
                  "return x + self.dropout(out, training=training)")),
    Mistake("FeedForward", "dropout-at-inference", "training=True passed to dropout: it "
            "drops at inference too", swap(
                FFN_BASE, "return self.dropout(out, training=training)",
                "return self.dropout(out, training=True)")),
    Mistake("FeedForward", "sizes-swapped", "dense1 has d_model units and dense2 dff", swap(
        FFN_BASE, 'keras.layers.Dense(dff, activation="relu")',
        'keras.layers.Dense(d_model, activation="relu")',
        "self.dense2 = keras.layers.Dense(d_model)", "self.dense2 = keras.layers.Dense(dff)",
        "self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))",
        "self.dense2.build(tuple(input_shape)[:-1] + (self.d_model,))")),
    Mistake("FeedForward", "config-without-arguments", "get_config returns only the base "
            "config: from_config cannot rebuild the layer", swap(
                FFN_BASE, '        config.update({"d_model": self.d_model, "dff": self.dff,\n'
                          '                       "dropout_rate": self.dropout_rate})\n', ""),
            fails=("test_FeedForward__config",)),
    Mistake("FeedForward", "dropout-rate-fixed", "Dropout(0.1) whatever dropout_rate is", swap(
        FFN_BASE, "keras.layers.Dropout(dropout_rate)", "keras.layers.Dropout(0.1)"),
            fails=("test_FeedForward__training",)),

    Mistake("FeedForward", "keep-prob", "Dropout(1 - dropout_rate): the rate taken as a keep "
            "probability", swap(
                FFN_BASE, "keras.layers.Dropout(dropout_rate)",
                "keras.layers.Dropout(1 - dropout_rate)"),
            fails=("test_FeedForward__training",)),
    Mistake("FeedForward", "no-bias", "Dense layers built with use_bias=False", swap(
        FFN_BASE, 'keras.layers.Dense(dff, activation="relu")',
        'keras.layers.Dense(dff, activation="relu", use_bias=False)',
        "self.dense2 = keras.layers.Dense(d_model)",
        "self.dense2 = keras.layers.Dense(d_model, use_bias=False)")),
    Mistake("FeedForward", "dff-ignored", "dense1 has 4 * d_model units (the paper's ratio) "
            "whatever dff is", swap(
                FFN_BASE, 'keras.layers.Dense(dff, activation="relu")',
                'keras.layers.Dense(4 * d_model, activation="relu")',
                "self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))",
                "self.dense2.build(tuple(input_shape)[:-1] + (4 * self.d_model,))")),

    # EncoderLayer
    Mistake("EncoderLayer", "no-attention-residual", "norm1(dropout(attention)) without "
            "adding x back", swap(
                ENCODER_BASE, "x = self.norm1(x + self.dropout(attention, training=training))",
                "x = self.norm1(self.dropout(attention, training=training))")),
    Mistake("EncoderLayer", "pre-norm", "normalises before each sublayer (pre-norm) instead "
            "of after the residual", swap(
                ENCODER_BASE,
                _ENC_CALL + "\n        x = self.norm1(x + self.dropout(attention, training=training))\n"
                "        return self.norm2(x + self.ffn(x, training=training))",
                "        h = self.norm1(x)\n"
                "        attention = self.self_attention(query=h, value=h, key=h, "
                "attention_mask=mask, training=training)\n"
                "        x = x + self.dropout(attention, training=training)\n"
                "        return x + self.ffn(self.norm2(x), training=training)")),
    Mistake("EncoderLayer", "padding-ignored", "the padding mask is built but never given to "
            "the attention", swap(ENCODER_BASE, "attention_mask=mask, ", ""),
            fails=("test_EncoderLayer__padding",)),
    Mistake("EncoderLayer", "mask-positional", "self_attention(x, x, x, padding_mask): the "
            "fourth positional argument is query_mask", swap(
                ENCODER_BASE, _ENC_CALL,
                "        attention = self.self_attention(x, x, x, padding_mask, "
                "training=training)")),
    Mistake("EncoderLayer", "padding-inverted", "the padding mask is negated: only padded "
            "keys are attended to", swap(
                ENCODER_BASE, "mask = combine_masks(key_mask=padding_mask)",
                "mask = combine_masks(key_mask=ops.logical_not(padding_mask))"),
            fails=("test_EncoderLayer__padding",)),
    Mistake("EncoderLayer", "dropout-at-inference", "training=True passed to the dropout "
            "after attention", swap(
                ENCODER_BASE, "x = self.norm1(x + self.dropout(attention, training=training))",
                "x = self.norm1(x + self.dropout(attention, training=True))")),
    Mistake("EncoderLayer", "one-norm-twice", "norm1 used after both sublayers, norm2 never",
            swap(ENCODER_BASE, "return self.norm2(x + self.ffn(x, training=training))",
                  "return self.norm1(x + self.ffn(x, training=training))")),
    Mistake("EncoderLayer", "key-dim-d-model", "key_dim=d_model instead of d_model // "
            "num_heads", swap(ENCODER_BASE, "key_dim=d_model // num_heads", "key_dim=d_model")),

    Mistake("EncoderLayer", "no-attention-dropout", "the attention output is added without "
            "dropout (only the FFN drops while training)", swap(
                ENCODER_BASE, "x = self.norm1(x + self.dropout(attention, training=training))",
                "x = self.norm1(x + attention)"),
            fails=("test_EncoderLayer__training",)),
    Mistake("EncoderLayer", "mask-not-expanded", "the (B, T) padding mask given as the "
            "attention mask without the query axis", swap(
                ENCODER_BASE, "mask = combine_masks(key_mask=padding_mask)",
                "mask = padding_mask"),
            fails=("test_EncoderLayer__padding",)),
    Mistake("EncoderLayer", "padding-on-queries", "the padding mask hides query rows "
            "(B, T, 1) instead of key columns", swap(
                ENCODER_BASE, "mask = combine_masks(key_mask=padding_mask)",
                "mask = combine_masks(query_mask=padding_mask)"),
            fails=("test_EncoderLayer__padding",)),
    Mistake("EncoderLayer", "padding-as-lengths", "the padding mask turned into sentence "
            "lengths (padding assumed last): a sentence padded first hides its real tokens",
            swap(ENCODER_BASE, "mask = combine_masks(key_mask=padding_mask)",
                  "lengths = ops.sum(ops.cast(padding_mask, \"int32\"), axis=1)  # real tokens\n"
                  "            positions = ops.arange(ops.shape(x)[1])\n"
                  "            mask = (positions[None, :] < lengths[:, None])[:, None, :]"),
            fails=("test_EncoderLayer__padding",)),
    Mistake("EncoderLayer", "config-without-arguments", "get_config as given, with only the "
            "NotImplementedError removed: get_config()['d_model'] is None and from_config "
            "cannot rebuild the layer", swap(
                ENCODER_BASE,
                '        config.update({"d_model": self.d_model, "num_heads": self.num_heads,\n'
                '                       "dff": self.dff, "dropout_rate": self.dropout_rate})\n',
                ""),
            fails=("test_EncoderLayer__config",)),

    # DecoderLayer
    Mistake("DecoderLayer", "no-causal-mask", "self-attention gets the padding mask only: "
            "queries see the future", swap(
                DECODER_BASE, "self_mask = causal_mask(length)[None, :, :]",
                "self_mask = None",
                "self_mask = ops.logical_and(self_mask, combine_masks(key_mask=x_padding_mask))",
                "self_mask = combine_masks(key_mask=x_padding_mask)")),
    Mistake("DecoderLayer", "causal-upper-triangle", "the look-ahead mask is built with triu "
            "(queries see only the future)", swap(
                DECODER_BASE, "self_mask = causal_mask(length)[None, :, :]",
                'self_mask = ops.cast(ops.triu(ops.ones((length, length))), "bool")[None, :, :]')),
    Mistake("DecoderLayer", "queries-from-encoder", "cross-attention takes its queries from "
            "the encoder output and keys/values from the decoder", swap(
                DECODER_BASE, "query=x, value=context, key=context,",
                "query=context, value=x, key=x,")),
    Mistake("DecoderLayer", "context-padding-ignored", "no mask in the cross-attention: "
            "padded source tokens get weight", swap(
                DECODER_BASE, "key=context, attention_mask=cross_mask, ", "key=context, "),
            fails=("test_DecoderLayer__padding",)),
    Mistake("DecoderLayer", "target-padding-ignored", "self-attention is causal but ignores "
            "x_padding_mask", swap(
                DECODER_BASE,
                "        if x_padding_mask is not None:\n"
                "            self_mask = ops.logical_and(self_mask, combine_masks(key_mask=x_padding_mask))\n",
                ""),
            fails=("test_DecoderLayer__padding",)),
    Mistake("DecoderLayer", "no-cross-residual", "norm2(dropout(cross-attention)) without "
            "adding x back", swap(
                DECODER_BASE,
                "        self.last_attention_scores = scores\n"
                "        x = self.norm2(x + self.dropout(attention, training=training))",
                "        self.last_attention_scores = scores\n"
                "        x = self.norm2(self.dropout(attention, training=training))")),
    Mistake("DecoderLayer", "keeps-self-attention-scores", "last_attention_scores holds the "
            "self-attention weights (B, H, T, T)", swap(
                DECODER_BASE, _DEC_SELF,
                "        attention, self_scores = self.self_attention(query=x, value=x, key=x, "
                "attention_mask=self_mask, return_attention_scores=True, training=training)",
                "        self.last_attention_scores = scores\n",
                "        self.last_attention_scores = self_scores\n")),
    Mistake("DecoderLayer", "dropout-at-inference", "training=True passed to the dropout "
            "after the self-attention", swap(
                DECODER_BASE,
                "        x = self.norm1(x + self.dropout(attention, training=training))",
                "        x = self.norm1(x + self.dropout(attention, training=True))")),
    Mistake("DecoderLayer", "no-cross-attention-dropout", "the cross-attention output is "
            "added without dropout", swap(
                DECODER_BASE,
                "        self.last_attention_scores = scores\n"
                "        x = self.norm2(x + self.dropout(attention, training=training))",
                "        self.last_attention_scores = scores\n"
                "        x = self.norm2(x + attention)"),
            fails=("test_DecoderLayer__training",)),
    Mistake("DecoderLayer", "cross-query-before-norm1", "the cross-attention queries are the "
            "layer's input, not the output of the first sublayer", swap(
                DECODER_BASE,
                "        x = self.norm1(x + self.dropout(attention, training=training))\n",
                "        x1 = self.norm1(x + self.dropout(attention, training=training))\n",
                "query=x, value=context, key=context,",
                "query=x, value=context, key=context,",
                "        x = self.norm2(x + self.dropout(attention, training=training))",
                "        x = self.norm2(x1 + self.dropout(attention, training=training))")),
    Mistake("DecoderLayer", "no-self-attention-dropout", "the causal self-attention's output "
            "is added without dropout", swap(
                DECODER_BASE,
                "        x = self.norm1(x + self.dropout(attention, training=training))",
                "        x = self.norm1(x + attention)"),
            fails=("test_DecoderLayer__training",)),
    Mistake("DecoderLayer", "causal-no-diagonal", "the look-ahead mask hides the diagonal "
            "(tril with k=-1): a token may not attend to itself", swap(
                DECODER_BASE, "self_mask = causal_mask(length)[None, :, :]",
                'self_mask = ops.cast(ops.tril(ops.ones((length, length)), k=-1), "bool")'
                "[None, :, :]")),
    Mistake("DecoderLayer", "pre-norm", "normalises before each sublayer (pre-norm) instead "
            "of after each residual sum", swap(
                DECODER_BASE,
                _DEC_SELF + "\n"
                "        x = self.norm1(x + self.dropout(attention, training=training))\n"
                "        attention, scores = self.cross_attention(query=x, value=context, "
                "key=context, attention_mask=cross_mask, return_attention_scores=True, "
                "training=training)\n"
                "        self.last_attention_scores = scores\n"
                "        x = self.norm2(x + self.dropout(attention, training=training))\n"
                "        return self.norm3(x + self.ffn(x, training=training))",
                "        h = self.norm1(x)\n"
                "        attention = self.self_attention(query=h, value=h, key=h, "
                "attention_mask=self_mask, training=training)\n"
                "        x = x + self.dropout(attention, training=training)\n"
                "        h = self.norm2(x)\n"
                "        attention, scores = self.cross_attention(query=h, value=context, "
                "key=context, attention_mask=cross_mask, return_attention_scores=True, "
                "training=training)\n"
                "        self.last_attention_scores = scores\n"
                "        x = x + self.dropout(attention, training=training)\n"
                "        return x + self.ffn(self.norm3(x), training=training)")),
    Mistake("DecoderLayer", "config-without-arguments", "get_config as given, with only the "
            "NotImplementedError removed: get_config()['d_model'] is None and from_config "
            "cannot rebuild the layer", swap(
                DECODER_BASE,
                '        config.update({"d_model": self.d_model, "num_heads": self.num_heads,\n'
                '                       "dff": self.dff, "dropout_rate": self.dropout_rate})\n',
                ""),
            fails=("test_DecoderLayer__config",)),
    # Issue 47: the argument checks, graded with the config, lost alone. (FeedForward's
    # own arguments are checked by Keras's Dense and Dropout too: without the call
    # dff=0 and dropout_rate=1.5 still raise a ValueError, so it is no mistake there.)
    Mistake("EncoderLayer", "validation-removed", "the given validate_layer_arguments call "
            "deleted: d_model=6 with num_heads=4 builds heads of key_dim 1 without a word",
            swap(ENCODER_BUILD,
                 "        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,\n"
                 "                                 dropout_rate=dropout_rate)\n", ""),
            fails=("test_EncoderLayer__config",)),
    Mistake("DecoderLayer", "validation-removed", "the given validate_layer_arguments call "
            "deleted: d_model=6 with num_heads=4 builds heads of key_dim 1 without a word",
            swap(DECODER_BASE,
                 "        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,\n"
                 "                                 dropout_rate=dropout_rate)\n", ""),
            fails=("test_DecoderLayer__config",)),
]

# Issue 47: each rule its own share. Every mistake above without `fails` loses its
# exercise's main tests cell and no other; these move more than one rule's values.
MISTAKES = own_share(MISTAKES, {
    # Dropout at inference moves every output at inference: each cell's values.
    ("FeedForward", "dropout-at-inference"): ("test_FeedForward", "test_FeedForward__training"),
    ("EncoderLayer", "dropout-at-inference"): ("test_EncoderLayer", "test_EncoderLayer__padding",
                                               "test_EncoderLayer__training"),
    ("DecoderLayer", "dropout-at-inference"): ("test_DecoderLayer", "test_DecoderLayer__padding",
                                               "test_DecoderLayer__training"),
    # The layer raises on every call (Keras 3.15: "multiple values for argument
    # 'query_mask'"; older Keras reads the mask as the query mask), or cannot add
    # the cross-attention's output (S != T) to x: every cell fails.
    ("EncoderLayer", "mask-positional"): (),
    ("DecoderLayer", "queries-from-encoder"): (),
})
