"""Sample submissions of lab 3 (positional embeddings): the interface is tests/samples.py's.

Correct answers written differently from the solution (a `keras.ops` table
returned as a tensor, the table made in `build`, the mask delegated to the
Embedding), the mistakes students really make, and the untouched notebook.
Every exercise is graded in parts (tests cells test_<exercise>__<property>),
so a mistake in one property keeps the points of the others: each mistake
names the tests cells it fails. `python data/sample_submissions/build.py lab3`
rebuilds data/sample_submissions/lab3/ after the lab changes.
"""

from tests.samples import mistake, swap

# Correct answers, written differently from the solution.
CORRECT = {
    "positional_encoding": '''
def positional_encoding(length, depth):
    """keras.ops: the angles of each pair, then (sin, cos) stacked and flattened."""
    half = (depth + 1) // 2
    positions = ops.cast(ops.arange(length), "float32")[:, None]          # (length, 1)
    exponents = ops.cast(2 * ops.arange(half), "float32") / depth          # 2i / depth
    angles = positions * ops.power(10000.0, -exponents)[None, :]           # (length, half)
    pairs = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)         # (length, half, 2)
    return ops.reshape(pairs, (length, 2 * half))[:, :depth]
''',
    "PositionalEmbedding": '''
class PositionalEmbedding(keras.layers.Layer):
    """The table is made in build, from my positional_encoding, and kept as a tensor."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.max_length, self.mask_zero = max_length, mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.table = ops.convert_to_tensor(positional_encoding(self.max_length, self.d_model))

    def call(self, token_ids):
        x = self.token_embedding(token_ids) * self.scale
        return x + ops.cast(self.table, x.dtype)[None, : ops.shape(x)[1], :]

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None

    def get_config(self):
        config = super().get_config()
        config["vocab_size"] = self.vocab_size
        config["d_model"] = self.d_model
        config["max_length"] = self.max_length
        config["mask_zero"] = self.mask_zero
        return config
''',
    "LearnedPositionalEmbedding": '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Positions as a (1, T) batch; the mask comes from the token Embedding."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model, mask_zero=mask_zero)
        self.position_embedding = keras.layers.Embedding(max_length, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.position_embedding.build(input_shape)

    def call(self, token_ids):
        T = token_ids.shape[-1]
        if T is not None and T > self.max_length:
            raise ValueError(f"sequence length {T} exceeds max_length={self.max_length}")
        positions = ops.expand_dims(ops.arange(ops.shape(token_ids)[-1]), 0)   # (1, T)
        return self.token_embedding(token_ids) + self.position_embedding(positions)

    def compute_mask(self, token_ids, mask=None):
        return self.token_embedding.compute_mask(token_ids)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "d_model": self.d_model, "max_length": self.max_length,
                "mask_zero": self.mask_zero}
''',
}


VARIANTS: dict[str, tuple[str, str]] = {}

_SOLUTION_TABLE = '''
def positional_encoding(length, depth):
    positions = np.arange(length)[:, None]
    i = np.arange(depth)[None, :] // 2
    angles = positions / np.power(10000.0, 2 * i / depth)
    table = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype("float32")
'''

# mistake -> mistake(the exercise it is in, the answer cell with the mistake, the
# hidden tests cells it fails)
MISTAKES = {
    # cos in the even columns, sin in the odd ones: every value is wrong, for
    # even and odd depths; the table is still float32. Wrong for even depths too,
    # it loses the values' points only: the odd-depth cell then grades that an
    # odd depth runs and gives depth columns (the text says so, issue 47).
    "sin_cos_swapped": mistake("positional_encoding", swap(
        _SOLUTION_TABLE, "np.sin(angles), np.cos(angles)", "np.cos(angles), np.sin(angles)"),
        ("test_positional_encoding",)),
    # pos / 10000^(i / depth) with i the pair index: the frequencies fall too slowly,
    # at any depth; still float32.
    "exponent_i": mistake("positional_encoding", swap(
        _SOLUTION_TABLE, "2 * i / depth", "i / depth"),
        ("test_positional_encoding",)),
    # The right values in float64: only the dtype is wrong.
    "float64_table": mistake("positional_encoding", swap(
        _SOLUTION_TABLE, 'return table.astype("float32")', "return table"),
        ("test_positional_encoding__dtype",)),
    # Token vectors added as they are: the values are wrong, the weights, the mask
    # and the config are right.
    "no_sqrt_scaling": mistake("PositionalEmbedding", swap(
        CORRECT["PositionalEmbedding"], "self.scale = math.sqrt(d_model)", "self.scale = 1.0"),
        ("test_PositionalEmbedding",)),
    # The sinusoidal table as a trainable weight: right numbers, wrong weights (the
    # values-and-weights cell), right mask and config.
    "trainable_table": mistake("PositionalEmbedding", swap(
        CORRECT["PositionalEmbedding"],
        "self.table = ops.convert_to_tensor(positional_encoding(self.max_length, self.d_model))",
        "self.table = self.add_weight(shape=(self.max_length, self.d_model),\n"
        "                                     initializer=\"zeros\", trainable=True)\n"
        "        self.table.assign(positional_encoding(self.max_length, self.d_model))"),
        ("test_PositionalEmbedding",)),
    # get_config left as the base config (the stub's lines kept, nothing added):
    # only the config is wrong.
    "no_get_config": mistake("PositionalEmbedding", swap(
        CORRECT["PositionalEmbedding"],
        '''        config["vocab_size"] = self.vocab_size
        config["d_model"] = self.d_model
        config["max_length"] = self.max_length
        config["mask_zero"] = self.mask_zero
''', ""),
        ("test_PositionalEmbedding__config",)),
    # No check of the length: the look-up past the table fails (TensorFlow) or
    # silently clamps (JAX), never with a clear ValueError. Only the length limit
    # is wrong.
    "learned_no_length_check": mistake("LearnedPositionalEmbedding", swap(
        CORRECT["LearnedPositionalEmbedding"],
        "        if T is not None and T > self.max_length:\n"
        "            raise ValueError(f\"sequence length {T} exceeds max_length={self.max_length}\")\n",
        ""),
        ("test_LearnedPositionalEmbedding__validation",)),
    # The scaling of the sinusoidal layer copied into the learned one: the values
    # are wrong; the length limit, the mask and the config are right.
    "learned_scaled": mistake("LearnedPositionalEmbedding", swap(
        CORRECT["LearnedPositionalEmbedding"],
        "return self.token_embedding(token_ids) + self.position_embedding(positions)",
        "return self.token_embedding(token_ids) * math.sqrt(self.d_model) + "
        "self.position_embedding(positions)"),
        ("test_LearnedPositionalEmbedding",)),
}

# student file -> mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    # bob's PositionalEmbedding calls his wrong positional_encoding: the grader's
    # stand-in keeps that from costing him a second time.
    "bob.ipynb": {"sin_cos_swapped"},
    "carol.ipynb": {"exponent_i", "learned_no_length_check"},
    "erin.ipynb": {"no_sqrt_scaling"},
    "frank.ipynb": {"trainable_table"},
    "grace.ipynb": {"learned_scaled"},
    # Right computations, two secondary properties missed.
    "heidi.ipynb": {"float64_table", "no_get_config"},
}

UNTOUCHED = "dave.ipynb"
COLAB = None
CUT_SHORT = None

FEEDBACK_WORDS = [
    ("bob", "positional_encoding", "swapped"),
    ("carol", "positional_encoding", "2i / depth"),
    ("carol", "LearnedPositionalEmbedding", "ValueError"),
    ("erin", "PositionalEmbedding", "sqrt(d_model)"),
    ("frank", "PositionalEmbedding", "not a weight"),
    ("grace", "LearnedPositionalEmbedding", "unscaled"),
    ("heidi", "positional_encoding", "float32"),
    ("heidi", "PositionalEmbedding", "get_config()"),
]
FEEDBACK_PAGE_WORDS: list[tuple[str, str]] = []
