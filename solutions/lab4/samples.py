"""Sample submissions of lab 4 (masks, encoder and decoder layers): the interface
is tests/samples.py's.

Correct answers written differently from the solution (a mask from `ops.tril`,
float masks multiplied, a softmax by hand, the ReLU applied in `call`,
dropout inside the attention layer, query rows masked as well as key
columns), the mistakes students really make, and the untouched notebook.

The correct layers call the student's own mask functions and `FeedForward`,
so a sample with a wrong `causal_mask`, `combine_masks` or `FeedForward`
shows that the grader's stand-ins keep the layers' points: each mistake
costs points in its own exercise only. Samples put at most two mistakes
together, and only in exercises that do not call one another.

The layers give per-property credit (tests cells `test_<X>`, `test_<X>__padding`,
`__training`, `__config`), so a mistake in a layer may cost only some of its
points: each mistake names the tests cells it fails, reasoned from what it
breaks. `python data/sample_submissions/build.py lab4` rebuilds
data/sample_submissions/lab4/ after the lab changes.
"""

from tests.samples import mistake, swap

# Correct answers, written differently from the solution.
CORRECT = {
    "causal_mask": '''
def causal_mask(length):
    """The lower triangle of a matrix of ones, as booleans."""
    return ops.cast(ops.tril(ops.ones((length, length))), "bool")
''',
    "padding_mask": '''
def padding_mask(token_ids, pad_id=0):
    """The != operator of the backend tensor."""
    token_ids = ops.convert_to_tensor(token_ids)
    return token_ids != pad_id
''',
    "combine_masks": '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """Float 0/1 masks multiplied together, then back to booleans."""
    mask = ops.ones((1, 1, 1))
    if query_mask is not None:
        mask = mask * ops.cast(query_mask, "float32")[:, :, None]
    if key_mask is not None:
        mask = mask * ops.cast(key_mask, "float32")[:, None, :]
    if causal:
        length = max(mask.shape[1], mask.shape[2])
        mask = mask * ops.cast(causal_mask(length), "float32")[None, :, :]
    return ops.cast(mask, "bool")
''',
    "masked_softmax": '''
def masked_softmax(scores, mask):
    """By hand: exponentials of the allowed scores only, divided by their sum."""
    scores = ops.convert_to_tensor(scores)
    allowed = ops.broadcast_to(ops.convert_to_tensor(mask, "bool"), ops.shape(scores))
    largest = ops.max(ops.where(allowed, scores, -1e9), axis=-1, keepdims=True)
    exponentials = ops.where(allowed, ops.exp(ops.where(allowed, scores - largest, 0.0)), 0.0)
    total = ops.sum(exponentials, axis=-1, keepdims=True)
    return exponentials / ops.maximum(total, 1e-12)
''',
    "FeedForward": '''
class FeedForward(keras.layers.Layer):
    """Linear Dense layers; the ReLU is applied in call."""

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
        return self.dropout(self.dense2(ops.relu(self.dense1(x))), training=training)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "dff": self.dff,
                "dropout_rate": self.dropout_rate}
''',
    "EncoderLayer": '''
class EncoderLayer(keras.layers.Layer):
    """Dropout inside the attention layer; padded query rows masked as well."""

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

    def call(self, x, padding_mask=None, training=None):
        mask = None
        if padding_mask is not None:
            mask = combine_masks(query_mask=padding_mask, key_mask=padding_mask)
        attended = self.self_attention(query=x, value=x, attention_mask=mask,
                                       training=training)
        x = self.norm1(ops.add(x, attended))
        return self.norm2(ops.add(x, self.ffn(x, training=training)))

    def get_config(self):
        config = super().get_config()
        config["d_model"] = self.d_model
        config["num_heads"] = self.num_heads
        config["dff"] = self.dff
        config["dropout_rate"] = self.dropout_rate
        return config
''',
    "DecoderLayer": '''
class DecoderLayer(keras.layers.Layer):
    """The look-ahead mask from my causal_mask, AND-ed with the target padding."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.dropout_rate = dropout_rate
        head_size = d_model // num_heads
        self.self_attention = keras.layers.MultiHeadAttention(num_heads, head_size)
        self.cross_attention = keras.layers.MultiHeadAttention(num_heads, head_size)
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.norm1, self.norm2, self.norm3 = [
            keras.layers.LayerNormalization(epsilon=1e-6) for _ in range(3)]
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
        self_mask = causal_mask(x.shape[1])[None, :, :]
        if x_padding_mask is not None:
            self_mask = ops.logical_and(self_mask, ops.cast(x_padding_mask, "bool")[:, None, :])
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = ops.cast(context_padding_mask, "bool")[:, None, :]
        h = self.self_attention(query=x, value=x, attention_mask=self_mask, training=training)
        x = self.norm1(x + self.dropout1(h, training=training))
        h, self.last_attention_scores = self.cross_attention(
            query=x, key=context, value=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)
        x = self.norm2(x + self.dropout2(h, training=training))
        return self.norm3(x + self.ffn(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dff=self.dff,
                      dropout_rate=self.dropout_rate)
        return config
''',
}

VARIANTS: dict[str, tuple[str, str]] = {}

# mistake name -> mistake(the exercise it is in, the answer cell with the mistake,
# the tests cells it fails: all of its exercise's unless named)
MISTAKES = {
    # The diagonal left out: a token may not look at itself.
    "causal_no_diagonal": mistake("causal_mask", '''
def causal_mask(length):
    return ops.cast(ops.tril(ops.ones((length, length)), k=-1), "bool")
'''),
    # pad_id ignored: always compares with 0.
    "padding_fixed_zero": mistake("padding_mask", '''
def padding_mask(token_ids, pad_id=0):
    return ops.not_equal(ops.convert_to_tensor(token_ids), 0)
'''),
    # Padding mask on the wrong axis: the key mask hides rows, the query mask columns
    # (the main cell's share: a missing mask still leaves an axis of length 1).
    "combine_wrong_axis": mistake("combine_masks", '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    mask = None
    for m, axis in ((query_mask, 1), (key_mask, 2)):
        if m is not None:
            m = ops.expand_dims(ops.cast(m, "bool"), axis)
            mask = m if mask is None else ops.logical_and(mask, m)
    if causal:
        length = max(mask.shape[1], mask.shape[2])
        mask = ops.logical_and(mask, causal_mask(length)[None])
    return mask
''', ("test_combine_masks",)),
    # The softmax is taken first and the masked weights zeroed: rows no longer sum to 1
    # (fully masked rows are 0, finite: that share is kept).
    "softmax_not_renormalised": mistake("masked_softmax", '''
def masked_softmax(scores, mask):
    weights = ops.softmax(ops.convert_to_tensor(scores), axis=-1)
    return weights * ops.cast(mask, weights.dtype)
''', ("test_masked_softmax",)),
    # A residual inside the feed-forward block: the outputs at inference are wrong,
    # the main cell's 1.5 of 2; the dropout on dense2's output is right (the
    # training cell sees it with x taken off) and so is the config.
    "ffn_residual_inside": mistake("FeedForward", swap(
        CORRECT["FeedForward"],
        "        return self.dropout(self.dense2(ops.relu(self.dense1(x))), training=training)",
        "        return x + self.dropout(self.dense2(ops.relu(self.dense1(x))), training=training)"),
        ("test_FeedForward",)),
    # Padding mask on the wrong axis in the layer: (B, T, 1) hides padded queries,
    # not padded keys. It only matters with padding: the padding cell (0.5) is lost,
    # 3.5 of 4 kept.
    "encoder_padding_wrong_axis": mistake("EncoderLayer", swap(
        CORRECT["EncoderLayer"],
        "            mask = combine_masks(query_mask=padding_mask, key_mask=padding_mask)",
        "            mask = ops.expand_dims(ops.cast(padding_mask, 'bool'), -1)  # (B, T, 1)"),
        ("test_EncoderLayer__padding",)),
    # The residual around the feed-forward block is missing: wrong values, the main
    # cell's (2.75 of 4) only. The padding cell judges the layer against itself, and
    # the training cell sees that no dropout can reach an output that no longer
    # depends on x (issue 47: each rule its own share).
    "encoder_no_residual": mistake("EncoderLayer", swap(
        CORRECT["EncoderLayer"],
        "        return self.norm2(ops.add(x, self.ffn(x, training=training)))",
        "        return self.norm2(self.ffn(x, training=training))"),
        ("test_EncoderLayer",)),
    # Cross-attention with its queries from the encoder, keys and values from the
    # decoder. The queries from the encoder (S != T) break every call: only
    # get_config and the argument checks are kept (0.5 of 4).
    "cross_queries_from_encoder": mistake("DecoderLayer", swap(
        CORRECT["DecoderLayer"],
        "            query=x, key=context, value=context, attention_mask=cross_mask,",
        "            query=context, key=x, value=x, attention_mask=cross_mask,"),
        ("test_DecoderLayer", "test_DecoderLayer__padding", "test_DecoderLayer__training")),
    # Pre-norm (normalise before each sublayer) instead of the paper's post-norm:
    # wrong values, the main cell's 2.75 of 4; padding (judged against the layer
    # itself), dropout and get_config are right.
    "decoder_pre_norm": mistake("DecoderLayer", '''
class DecoderLayer(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.cross_attention = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        self_mask = None if x_padding_mask is None else ops.cast(x_padding_mask, "bool")[:, None, :]
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = ops.cast(context_padding_mask, "bool")[:, None, :]
        h = self.norm1(x)                                    # normalised first (pre-norm)
        x = x + self.dropout(self.self_attention(query=h, value=h, attention_mask=self_mask,
                                                 use_causal_mask=True, training=training),
                             training=training)
        h = self.norm2(x)
        attended, self.last_attention_scores = self.cross_attention(
            query=h, value=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)
        x = x + self.dropout(attended, training=training)
        return x + self.ffn(self.norm3(x), training=training)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dff=self.dff,
                      dropout_rate=self.dropout_rate)
        return config
''', ("test_DecoderLayer",)),
    # The mask passed positionally to MultiHeadAttention: there it is query_mask.
    # Without a padding mask Keras gets query_mask twice and raises (values,
    # training), with one it attends to padded source tokens (padding): only the
    # config cell is kept.
    "cross_mask_positional": mistake("DecoderLayer", swap(
        CORRECT["DecoderLayer"],
        "            query=x, key=context, value=context, attention_mask=cross_mask,",
        "            x, context, context, cross_mask,"),
        ("test_DecoderLayer", "test_DecoderLayer__padding", "test_DecoderLayer__training")),
}

# student file -> the mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    # DecoderLayer and combine_masks call bob's causal_mask: they keep their points.
    "bob.ipynb": {"causal_no_diagonal", "softmax_not_renormalised"},
    # EncoderLayer calls carol's combine_masks, both layers her FeedForward.
    "carol.ipynb": {"combine_wrong_axis", "ffn_residual_inside"},
    "erin.ipynb": {"padding_fixed_zero", "encoder_padding_wrong_axis"},
    "frank.ipynb": {"encoder_no_residual", "decoder_pre_norm"},
    "grace.ipynb": {"cross_queries_from_encoder"},
    "heidi.ipynb": {"cross_mask_positional"},
}

UNTOUCHED = "dave.ipynb"
COLAB = None
CUT_SHORT = None

FEEDBACK_WORDS = [
    ("bob", "causal_mask", "diagonal"),
    ("bob", "masked_softmax", "hide the masked scores BEFORE the softmax"),
    ("carol", "FeedForward", "residual"),
    ("erin", "EncoderLayer", "padded"),
    ("frank", "DecoderLayer", "pre-norm"),
    ("grace", "DecoderLayer", "queries come from x"),
]
FEEDBACK_PAGE_WORDS: list[tuple[str, str]] = []
