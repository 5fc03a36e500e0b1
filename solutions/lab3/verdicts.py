"""Verdict suite of lab 3 (positional embeddings): correct variants and real mistakes.

Every source is a whole answer cell as a student would fill it. The notebook's
setup cell has already run `import math`, `import numpy as np`, `import keras`,
`from keras import ops`, `import matplotlib.pyplot as plt`,
`from labkit import checks, plots` and
`from labkit.validation import validate_layer_arguments`.
"""

from tests.verdicts import Mistake, own_share, swap


# --- positional_encoding -----------------------------------------------------------------

_TABLE_LOOPS = '''
def positional_encoding(length, depth):
    """Two plain loops with math.sin / math.cos, as in the formula."""
    table = np.zeros((length, depth), dtype=np.float32)
    for pos in range(length):
        for column in range(depth):
            two_i = column - column % 2
            angle = pos / 10000 ** (two_i / depth)
            table[pos, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return table
'''

_TABLE_WHERE = '''
def positional_encoding(length, depth):
    """One angle per column (2i = c - c % 2), then np.where on the column parity."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    c = np.arange(depth)
    angle = pos / 10000.0 ** ((c - c % 2) / depth)
    return np.where(c % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)
'''

_TABLE_EXP_LOG = '''
def positional_encoding(length, depth):
    """The TensorFlow tutorial's exp(-log(10000) 2i / d), interleaved by stacking."""
    half = (depth + 1) // 2
    positions = np.arange(length)[:, np.newaxis]                      # (length, 1)
    rates = np.exp(-math.log(10000.0) * np.arange(0, depth, 2) / depth)  # (half,)
    angles = positions * rates[np.newaxis, :]                         # (length, half)
    pairs = np.stack([np.sin(angles), np.cos(angles)], axis=-1)       # (length, half, 2)
    return pairs.reshape(length, 2 * half)[:, :depth].astype("float32")
'''

_TABLE_OPS = '''
def positional_encoding(length, depth):
    """keras.ops in float32, sines and cosines written into alternate columns."""
    positions = ops.cast(ops.expand_dims(ops.arange(length), 1), "float32")   # (length, 1)
    columns = ops.arange(depth)
    exponents = ops.cast(columns - columns % 2, "float32") / float(depth)     # 2i / depth
    angles = positions / ops.power(10000.0, exponents)                        # (length, depth)
    even = ops.expand_dims(ops.equal(columns % 2, 0), 0)
    return ops.where(even, ops.sin(angles), ops.cos(angles))
'''

_TABLE_COMPREHENSION = '''
def positional_encoding(length, depth):
    """A nested list comprehension over (pos, column), read from the formula."""
    def value(pos, column):
        angle = pos / (10000 ** ((column - column % 2) / depth))
        return math.cos(angle) if column % 2 else math.sin(angle)

    return np.array([[value(pos, column) for column in range(depth)]
                     for pos in range(length)], dtype=np.float32)
'''

# --- PositionalEmbedding -----------------------------------------------------------------

_PE_SLICE = '''
class PositionalEmbedding(keras.layers.Layer):
    """The table from my positional_encoding, kept as a tensor and sliced in call."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(input_dim=vocab_size, output_dim=d_model)
        self.pos_encoding = ops.convert_to_tensor(positional_encoding(max_length, d_model))

    def build(self, input_shape):
        self.token_embedding.build(input_shape)

    def call(self, token_ids):
        length = ops.shape(token_ids)[1]
        x = self.token_embedding(token_ids)
        x = x * ops.sqrt(ops.cast(self.d_model, x.dtype))
        return x + ops.cast(self.pos_encoding[None, :length, :], x.dtype)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        if self.mask_zero:
            return token_ids != 0
        return None

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model,
                      max_length=self.max_length, mask_zero=self.mask_zero)
        return config
'''

_PE_OWN_TABLE = '''
class PositionalEmbedding(keras.layers.Layer):
    """Its own table made with keras.ops; ops.slice; the Embedding gives the mask."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.max_length, self.mask_zero = max_length, mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model, mask_zero=mask_zero)
        positions = ops.cast(ops.arange(max_length), "float32")[:, None]
        columns = ops.arange(d_model)
        rates = ops.power(10000.0, -ops.cast(columns - columns % 2, "float32") / d_model)
        angles = positions * rates[None, :]
        self.table = ops.where(columns % 2 == 0, ops.sin(angles), ops.cos(angles))

    def build(self, input_shape):
        self.token_embedding.build(input_shape)

    def call(self, token_ids):
        T = ops.shape(token_ids)[-1]
        tokens = self.token_embedding(token_ids) * math.sqrt(self.d_model)
        return tokens + ops.slice(self.table, (0, 0), (T, self.d_model))

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        return self.token_embedding.compute_mask(token_ids)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "d_model": self.d_model,
                "max_length": self.max_length, "mask_zero": self.mask_zero}
'''

_PE_NUMPY_TABLE = '''
class PositionalEmbedding(keras.layers.Layer):
    """The table kept as a NumPy constant; the Embedding made in build."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model,
                                                      name="token_embedding")
        self._table = np.asarray(positional_encoding(max_length, d_model), dtype="float32")

    def build(self, input_shape):
        if not self.token_embedding.built:
            self.token_embedding.build((None, None))
        super().build(input_shape)

    def call(self, token_ids):
        embedded = self.token_embedding(token_ids)
        positions = ops.take(ops.convert_to_tensor(self._table),
                             ops.arange(ops.shape(token_ids)[1]), axis=0)
        return math.sqrt(self.d_model) * embedded + ops.expand_dims(positions, 0)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        if not self.mask_zero:
            return None
        return ops.greater(token_ids, 0)

    def get_config(self):
        config = super().get_config()
        for name in ("vocab_size", "d_model", "max_length", "mask_zero"):
            config[name] = getattr(self, name)
        return config
'''

_PE_TILE = '''
class PositionalEmbedding(keras.layers.Layer):
    """The table built in build; the position rows tiled over the batch."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.table = ops.cast(positional_encoding(self.max_length, self.d_model), "float32")

    def call(self, token_ids):
        batch, length = ops.shape(token_ids)[0], ops.shape(token_ids)[1]
        position_ids = ops.broadcast_to(ops.arange(length)[None, :], (batch, length))
        positions = ops.take(self.table, position_ids, axis=0)        # (B, T, d_model)
        scale = ops.cast(self.d_model, "float32") ** 0.5
        return self.token_embedding(token_ids) * scale + positions

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "d_model": self.d_model,
                       "max_length": self.max_length, "mask_zero": self.mask_zero})
        return config
'''

_PE_CONFIG_DICT = '''
class PositionalEmbedding(keras.layers.Layer):
    """Honest reading: the arguments kept in a dict too, the table made in build."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self._arguments = dict(vocab_size=vocab_size, d_model=d_model,
                               max_length=max_length, mask_zero=mask_zero)
        for name, value in self._arguments.items():
            setattr(self, name, value)
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.sinusoids = ops.convert_to_tensor(
            positional_encoding(self.max_length, self.d_model), dtype="float32")

    def call(self, token_ids):
        tokens = ops.multiply(self.token_embedding(token_ids), ops.sqrt(float(self.d_model)))
        return ops.add(tokens, self.sinusoids[: ops.shape(token_ids)[1]])

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        return None if not self.mask_zero else ops.not_equal(token_ids, 0)

    def get_config(self):
        return {**super().get_config(), **self._arguments}
'''

_PE_AUTO_CONFIG = '''
class PositionalEmbedding(keras.layers.Layer):
    """Honest reading: get_config left out, Keras 3's automatic config returns
    the constructor arguments; the rows looked up with ops.take."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.table = ops.convert_to_tensor(positional_encoding(max_length, d_model))

    def build(self, input_shape):
        self.token_embedding.build(input_shape)

    def call(self, token_ids):
        scale = math.sqrt(self.d_model)
        rows = ops.take(self.table, ops.arange(ops.shape(token_ids)[1]), axis=0)
        return scale * self.token_embedding(token_ids) + rows

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        if self.mask_zero:
            return ops.not_equal(token_ids, 0)
'''

# --- LearnedPositionalEmbedding ----------------------------------------------------------

_LPE_TAKE = '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """The position rows taken straight from the position table's variable."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.position_embedding = keras.layers.Embedding(max_length, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.position_embedding.build((None,))

    def call(self, token_ids):
        length = token_ids.shape[1]
        if length is not None and length > self.max_length:
            raise ValueError(f"got {length} tokens but max_length is {self.max_length}")
        positions = ops.take(self.position_embedding.embeddings,
                             ops.arange(ops.shape(token_ids)[1]), axis=0)
        return self.token_embedding(token_ids) + positions

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        if self.mask_zero:
            return ops.not_equal(token_ids, 0)
        return None

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model,
                      max_length=self.max_length, mask_zero=self.mask_zero)
        return config
'''

_LPE_BROADCAST = '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Position ids broadcast to (B, T); a check on the static shape."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.max_length, self.mask_zero = max_length, mask_zero
        self.token_embedding = keras.layers.Embedding(input_dim=vocab_size, output_dim=d_model,
                                                      name="token_embedding")
        self.position_embedding = keras.layers.Embedding(input_dim=max_length,
                                                         output_dim=d_model,
                                                         name="position_embedding")

    def build(self, input_shape):
        for sublayer in (self.token_embedding, self.position_embedding):
            sublayer.build(input_shape)

    def call(self, token_ids):
        T = ops.shape(token_ids)[-1]
        if isinstance(T, int) and T > self.max_length:
            raise ValueError(
                f"LearnedPositionalEmbedding: sequence length {T} > max_length {self.max_length}")
        position_ids = ops.broadcast_to(ops.arange(T), ops.shape(token_ids))
        return ops.add(self.token_embedding(token_ids), self.position_embedding(position_ids))

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "d_model": self.d_model,
                "max_length": self.max_length, "mask_zero": self.mask_zero}
'''

_LPE_ONEHOT = '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Positions through the Embedding as (T,), the length checked before anything."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model,
                                                      mask_zero=mask_zero)
        self.position_embedding = keras.layers.Embedding(max_length, d_model)

    def build(self, input_shape):
        self.token_embedding.build((None, None))
        self.position_embedding.build((None,))

    def _check_length(self, length):
        if length is not None and int(length) > self.max_length:
            raise ValueError(f"The sequence has {int(length)} positions; this layer has "
                             f"learned only {self.max_length} (max_length).")

    def call(self, token_ids):
        token_ids = ops.convert_to_tensor(token_ids)
        self._check_length(token_ids.shape[-1])
        positions = self.position_embedding(ops.arange(ops.shape(token_ids)[-1]))
        return self.token_embedding(token_ids) + ops.expand_dims(positions, axis=0)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        if not self.mask_zero:
            return None
        return self.token_embedding.compute_mask(token_ids)

    def get_config(self):
        config = super().get_config()
        config["vocab_size"] = self.vocab_size
        config["d_model"] = self.d_model
        config["max_length"] = self.max_length
        config["mask_zero"] = self.mask_zero
        return config
'''

_LPE_CONFIG_DICT = '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Honest reading: a config dict, the length checked in build and in call
    with a message of its own."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.config_arguments = {"vocab_size": vocab_size, "d_model": d_model,
                                 "max_length": max_length, "mask_zero": mask_zero}
        self.vocab_size, self.d_model = vocab_size, d_model
        self.max_length, self.mask_zero = max_length, mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.position_embedding = keras.layers.Embedding(max_length, d_model)

    def _too_long(self, length):
        if isinstance(length, int) and length > self.max_length:
            raise ValueError("too long")

    def build(self, input_shape):
        self._too_long(input_shape[-1])
        self.token_embedding.build(input_shape)
        self.position_embedding.build(input_shape)

    def call(self, token_ids):
        T = ops.shape(token_ids)[1]
        self._too_long(T)
        return self.token_embedding(token_ids) + self.position_embedding(ops.arange(T))[None]

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None

    def get_config(self):
        config = super().get_config()
        config.update(self.config_arguments)
        return config
'''

_LPE_AUTO_CONFIG = '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Honest reading: get_config left out (Keras 3's automatic config); the
    length compared without isinstance (eager shapes are ints)."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.position_embedding = keras.layers.Embedding(max_length, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.position_embedding.build(input_shape)

    def call(self, token_ids):
        T = token_ids.shape[1]
        if T > self.max_length:
            raise ValueError(f"The input has {T} tokens; at most {self.max_length} fit.")
        return self.token_embedding(token_ids) + self.position_embedding(ops.arange(T))

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None
'''

VARIANTS = {
    "positional_encoding": [_TABLE_LOOPS, _TABLE_WHERE, _TABLE_EXP_LOG, _TABLE_OPS,
                            _TABLE_COMPREHENSION],
    "PositionalEmbedding": [_PE_SLICE, _PE_OWN_TABLE, _PE_NUMPY_TABLE, _PE_TILE,
                            _PE_CONFIG_DICT, _PE_AUTO_CONFIG],
    "LearnedPositionalEmbedding": [_LPE_TAKE, _LPE_BROADCAST, _LPE_ONEHOT, _LPE_CONFIG_DICT,
                                   _LPE_AUTO_CONFIG],
}

MISTAKES = [
    # --- positional_encoding -----------------------------------------------------------
    Mistake("positional_encoding", "sin_cos_swapped",
            "cosine in the even columns and sine in the odd ones",
            swap(_TABLE_WHERE, "np.where(c % 2 == 0, np.sin(angle), np.cos(angle))",
                  "np.where(c % 2 == 0, np.cos(angle), np.sin(angle))"),
            fails=("test_positional_encoding",)),
    Mistake("positional_encoding", "exponent_i",
            "exponent i / depth with i the pair index, instead of 2i / depth",
            swap(_TABLE_WHERE, "((c - c % 2) / depth)", "((c // 2) / depth)"),
            fails=("test_positional_encoding",)),
    Mistake("positional_encoding", "exponent_column",
            "exponent c / depth with c the column index: the cosine gets its own angle",
            swap(_TABLE_WHERE, "((c - c % 2) / depth)", "(c / depth)"),
            fails=("test_positional_encoding",)),
    Mistake("positional_encoding", "concatenated_layout",
            "the TensorFlow tutorial's [sin | cos] layout instead of interleaved columns",
            '''
def positional_encoding(length, depth):
    positions = np.arange(length)[:, np.newaxis]
    rates = 1 / np.power(10000.0, np.arange(0, depth, 2) / depth)
    angles = positions * rates
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    return table[:, :depth].astype(np.float32)
''',
            fails=("test_positional_encoding",)),
    Mistake("positional_encoding", "float64",
            "the table returned in float64 (the cast to float32 forgotten)",
            swap(_TABLE_WHERE, ".astype(np.float32)", ""),
            fails=('test_positional_encoding__dtype',)),
    Mistake("positional_encoding", "odd_depth_breaks",
            "every cosine column filled from all the angles: breaks for an odd depth",
            '''
def positional_encoding(length, depth):
    positions = np.arange(length, dtype=np.float64)[:, None]
    angles = positions / np.power(10000.0, np.arange(0, depth, 2) / depth)
    table = np.zeros((length, depth))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table.astype(np.float32)
''',
            fails=('test_positional_encoding__odd_depth',)),
    Mistake("positional_encoding", "positions_from_one",
            "positions counted from 1 instead of 0",
            swap(_TABLE_WHERE, "np.arange(length, dtype=np.float64)",
                  "np.arange(1, length + 1, dtype=np.float64)"),
            fails=("test_positional_encoding",)),
    Mistake("positional_encoding", "odd_depth_drops_last",
            "depth // 2 pairs only: an odd depth loses its last (sine) column",
            '''
def positional_encoding(length, depth):
    half = depth // 2
    positions = np.arange(length)[:, None]
    angles = positions / np.power(10000.0, 2 * np.arange(half) / depth)
    table = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(length, 2 * half)
    return table.astype(np.float32)
''',
            fails=("test_positional_encoding__odd_depth",)),
    Mistake("positional_encoding", "exponent_sign",
            "pos * 10000^(2i/d): the position multiplied instead of divided",
            swap(_TABLE_WHERE, "pos / 10000.0 **", "pos * 10000.0 **"),
            fails=("test_positional_encoding",)),
    # Issue 47: one mistake per stated rule, each losing its own share only.
    Mistake("positional_encoding", "parameters_renamed",
            "the parameters named (seq_len, d_model): a call by keyword fails",
            '''
def positional_encoding(seq_len, d_model):
    pos = np.arange(seq_len, dtype=np.float64)[:, None]
    c = np.arange(d_model)
    angle = pos / 10000.0 ** ((c - c % 2) / d_model)
    return np.where(c % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)
''',
            fails=("test_positional_encoding",)),
    Mistake("positional_encoding", "odd_depth_rounded_up",
            "an odd depth rounded up to the next even one, then its last column cut: the "
            "angles use 2i / (depth + 1)",
            '''
def positional_encoding(length, depth):
    padded = depth + depth % 2
    positions = np.arange(length)[:, None]
    angles = positions / np.power(10000.0, np.arange(0, padded, 2) / padded)
    table = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(length, padded)
    return table[:, :depth].astype(np.float32)
''',
            fails=("test_positional_encoding__odd_depth",)),
    # --- PositionalEmbedding -----------------------------------------------------------
    Mistake("PositionalEmbedding", "no_sqrt_scaling",
            "the token vectors not multiplied by sqrt(d_model)",
            swap(_PE_SLICE, "        x = x * ops.sqrt(ops.cast(self.d_model, x.dtype))\n", ""),
            fails=("test_PositionalEmbedding",)),
    Mistake("PositionalEmbedding", "scaled_by_d_model",
            "the token vectors multiplied by d_model instead of its square root",
            swap(_PE_SLICE, "x * ops.sqrt(ops.cast(self.d_model, x.dtype))",
                  "x * ops.cast(self.d_model, x.dtype)"),
            fails=("test_PositionalEmbedding",)),
    Mistake("PositionalEmbedding", "sum_scaled",
            "the sum scaled: (tokens + table) * sqrt(d_model)",
            swap(_PE_OWN_TABLE, "        tokens = self.token_embedding(token_ids) * math.sqrt(self.d_model)\n"
                                 "        return tokens + ops.slice(self.table, (0, 0), (T, self.d_model))",
                  "        tokens = self.token_embedding(token_ids)\n"
                  "        return (tokens + ops.slice(self.table, (0, 0), (T, self.d_model))) * "
                  "math.sqrt(self.d_model)"),
            fails=("test_PositionalEmbedding",)),
    Mistake("PositionalEmbedding", "trainable_table",
            "the sinusoidal table made a trainable weight (initialised with the table)",
            swap(_PE_TILE,
                  "        self.table = ops.cast(positional_encoding(self.max_length, self.d_model), \"float32\")",
                  "        self.table = self.add_weight(\n"
                  "            shape=(self.max_length, self.d_model), name=\"positional_table\",\n"
                  "            initializer=keras.initializers.Constant(\n"
                  "                positional_encoding(self.max_length, self.d_model)))"),
            fails=("test_PositionalEmbedding",)),
    Mistake("PositionalEmbedding", "non_trainable_weight",
            "the table a non-trainable weight: still a weight, which the layer must not have",
            swap(_PE_TILE,
                  "        self.table = ops.cast(positional_encoding(self.max_length, self.d_model), \"float32\")",
                  "        self.table = self.add_weight(\n"
                  "            shape=(self.max_length, self.d_model), name=\"positional_table\",\n"
                  "            trainable=False, initializer=keras.initializers.Constant(\n"
                  "                positional_encoding(self.max_length, self.d_model)))"),
            fails=("test_PositionalEmbedding",)),
    Mistake("PositionalEmbedding", "table_by_token_ids",
            "the table's rows looked up with the token ids instead of the positions",
            swap(_PE_TILE, "ops.take(self.table, position_ids, axis=0)",
                  "ops.take(self.table, token_ids, axis=0)"),
            fails=("test_PositionalEmbedding",)),
    Mistake("PositionalEmbedding", "mask_inverted",
            "compute_mask True on the padding (token_ids == 0)",
            swap(_PE_SLICE, "return token_ids != 0", "return token_ids == 0"),
            fails=('test_PositionalEmbedding__mask',)),
    Mistake("PositionalEmbedding", "mask_zero_ignored",
            "compute_mask returns the padding mask even with mask_zero=False",
            swap(_PE_TILE, "return ops.not_equal(token_ids, 0) if self.mask_zero else None",
                  "return ops.not_equal(token_ids, 0)"),
            fails=('test_PositionalEmbedding__mask',)),
    Mistake("PositionalEmbedding", "float_mask",
            "compute_mask cast to float32 (as in older TensorFlow tutorials): masks are boolean",
            swap(_PE_SLICE, "return token_ids != 0",
                  "return ops.cast(ops.not_equal(token_ids, 0), \"float32\")"),
            fails=('test_PositionalEmbedding__mask',)),
    Mistake("PositionalEmbedding", "build_forgotten",
            "build does not build token_embedding: no weight until the first call",
            swap(_PE_SLICE, "        self.token_embedding.build(input_shape)\n", "        pass\n"),
            fails=("test_PositionalEmbedding__weights",)),
    # Issue 32: the values are right, so they keep their points (the grader calls
    # the layer once before it sets its weights); only the build cell is lost.
    Mistake("PositionalEmbedding", "no_build",
            "token_embedding made in __init__ and build left out: the weights appear at the "
            "first call, not in build",
            swap(_PE_SLICE, "    def build(self, input_shape):\n"
                             "        self.token_embedding.build(input_shape)\n\n", ""),
            fails=("test_PositionalEmbedding__weights",)),
    Mistake("PositionalEmbedding", "config_incomplete",
            "get_config leaves out max_length and mask_zero",
            swap(_PE_SLICE, "        config.update(vocab_size=self.vocab_size, d_model=self.d_model,\n"
                             "                      max_length=self.max_length, mask_zero=self.mask_zero)",
                  "        config.update(vocab_size=self.vocab_size, d_model=self.d_model)"),
            fails=('test_PositionalEmbedding__config',)),
    Mistake("PositionalEmbedding", "no_get_config",
            "get_config left as the base config: the four arguments are not added",
            swap(_PE_SLICE, "        config.update(vocab_size=self.vocab_size, d_model=self.d_model,\n"
                             "                      max_length=self.max_length, mask_zero=self.mask_zero)\n",
                  ""),
            fails=("test_PositionalEmbedding__config",)),
    Mistake("PositionalEmbedding", "arguments_renamed",
            "the arguments kept under other names (self._d_model, ...), get_config right",
            swap(swap(swap(_PE_NUMPY_TABLE,
                              "        self.vocab_size = vocab_size\n"
                              "        self.d_model = d_model\n"
                              "        self.max_length = max_length\n"
                              "        self.mask_zero = mask_zero\n",
                              "        self._vocab_size = vocab_size\n"
                              "        self._d_model = d_model\n"
                              "        self._max_length = max_length\n"
                              "        self._mask_zero = mask_zero\n"),
                        "config[name] = getattr(self, name)", "config[name] = getattr(self, \"_\" + name)"),
                  "math.sqrt(self.d_model) * embedded", "math.sqrt(self._d_model) * embedded")
            .replace("if not self.mask_zero:", "if not self._mask_zero:"),
            fails=("test_PositionalEmbedding__config",)),
    Mistake("PositionalEmbedding", "weights_in_init",
            "token_embedding built in __init__: the weights exist before build",
            swap(swap(_PE_SLICE,
                        "        self.pos_encoding = ops",
                        "        self.token_embedding.build((None, None))\n"
                        "        self.pos_encoding = ops"),
                  "    def build(self, input_shape):\n        self.token_embedding.build(input_shape)\n",
                  "    def build(self, input_shape):\n        super().build(input_shape)\n"),
            fails=("test_PositionalEmbedding__weights",)),
    # --- LearnedPositionalEmbedding ----------------------------------------------------
    Mistake("LearnedPositionalEmbedding", "no_length_check",
            "no length check: a look-up past the table, never a clear ValueError",
            swap(_LPE_TAKE, "        if length is not None and length > self.max_length:\n"
                             "            raise ValueError(f\"got {length} tokens but max_length is {self.max_length}\")\n",
                  ""),
            fails=('test_LearnedPositionalEmbedding__validation',)),
    Mistake("LearnedPositionalEmbedding", "check_off_by_one",
            "length >= max_length rejected: a sequence of exactly max_length raises",
            swap(_LPE_TAKE, "length > self.max_length", "length >= self.max_length"),
            fails=('test_LearnedPositionalEmbedding__validation',)),
    Mistake("LearnedPositionalEmbedding", "assert_not_valueerror",
            "the length checked with assert: an AssertionError instead of a ValueError",
            swap(_LPE_TAKE, "        if length is not None and length > self.max_length:\n"
                             "            raise ValueError(f\"got {length} tokens but max_length is {self.max_length}\")\n",
                  "        assert length is None or length <= self.max_length, \"sequence too long\"\n"),
            fails=('test_LearnedPositionalEmbedding__validation',)),
    Mistake("LearnedPositionalEmbedding", "scaled_sqrt_d_model",
            "the token vectors multiplied by sqrt(d_model), copied from the sinusoidal layer",
            swap(_LPE_BROADCAST, "ops.add(self.token_embedding(token_ids), ",
                  "ops.add(self.token_embedding(token_ids) * math.sqrt(self.d_model), "),
            fails=("test_LearnedPositionalEmbedding",)),
    Mistake("LearnedPositionalEmbedding", "positions_by_token_ids",
            "the position table looked up with the token ids instead of 0..T-1",
            swap(_LPE_BROADCAST, "self.position_embedding(position_ids)",
                  "self.position_embedding(token_ids)"),
            fails=("test_LearnedPositionalEmbedding",)),
    Mistake("LearnedPositionalEmbedding", "vocab_rows_positions",
            "the position table given vocab_size rows instead of max_length",
            swap(_LPE_BROADCAST, "keras.layers.Embedding(input_dim=max_length,",
                  "keras.layers.Embedding(input_dim=vocab_size,"),
            fails=("test_LearnedPositionalEmbedding",)),
    Mistake("LearnedPositionalEmbedding", "positions_not_added",
            "the position vectors computed but never added",
            swap(_LPE_ONEHOT, "return self.token_embedding(token_ids) + ops.expand_dims(positions, axis=0)",
                  "return self.token_embedding(token_ids)"),
            fails=("test_LearnedPositionalEmbedding",)),
    Mistake("LearnedPositionalEmbedding", "position_not_built",
            "build builds only the token table: the position table appears at the first call",
            swap(_LPE_ONEHOT, "        self.position_embedding.build((None,))\n", ""),
            fails=("test_LearnedPositionalEmbedding__weights",)),
    Mistake("LearnedPositionalEmbedding", "no_build",
            "both sublayers made in __init__ and build left out: the tables appear at the "
            "first call, not in build",
            swap(_LPE_BROADCAST, "    def build(self, input_shape):\n"
                                  "        for sublayer in (self.token_embedding, "
                                  "self.position_embedding):\n"
                                  "            sublayer.build(input_shape)\n\n", ""),
            fails=("test_LearnedPositionalEmbedding__weights",)),
    Mistake("LearnedPositionalEmbedding", "mask_always",
            "compute_mask ignores mask_zero: a mask even when mask_zero=False",
            swap(_LPE_TAKE, "        if self.mask_zero:\n            return ops.not_equal(token_ids, 0)\n"
                             "        return None",
                  "        return ops.not_equal(token_ids, 0)"),
            fails=('test_LearnedPositionalEmbedding__mask',)),
    Mistake("LearnedPositionalEmbedding", "weights_in_init",
            "both tables built in __init__: the weights exist before build",
            swap(swap(_LPE_TAKE,
                        "        self.position_embedding = keras.layers.Embedding(max_length, d_model)\n",
                        "        self.position_embedding = keras.layers.Embedding(max_length, d_model)\n"
                        "        self.token_embedding.build((None, None))\n"
                        "        self.position_embedding.build((None,))\n"),
                  "    def build(self, input_shape):\n        self.token_embedding.build(input_shape)\n"
                  "        self.position_embedding.build((None,))\n",
                  "    def build(self, input_shape):\n        super().build(input_shape)\n"),
            fails=("test_LearnedPositionalEmbedding__weights",)),
    Mistake("LearnedPositionalEmbedding", "length_check_in_build",
            "the length checked only in build: a built layer no longer checks it",
            swap(swap(_LPE_TAKE,
                        "        if length is not None and length > self.max_length:\n"
                        "            raise ValueError(f\"got {length} tokens but max_length is {self.max_length}\")\n",
                        ""),
                  "        self.position_embedding.build((None,))\n",
                  "        self.position_embedding.build((None,))\n"
                  "        if input_shape[-1] is not None and input_shape[-1] > self.max_length:\n"
                  "            raise ValueError(f\"{input_shape[-1]} tokens, max_length={self.max_length}\")\n"),
            fails=('test_LearnedPositionalEmbedding__validation',)),
    Mistake("LearnedPositionalEmbedding", "int_mask",
            "compute_mask cast to int32 (1 for real tokens): masks are boolean",
            swap(_LPE_TAKE, "return ops.not_equal(token_ids, 0)",
                  "return ops.cast(ops.not_equal(token_ids, 0), \"int32\")"),
            fails=('test_LearnedPositionalEmbedding__mask',)),
    Mistake("LearnedPositionalEmbedding", "config_no_mask_zero",
            "get_config leaves out mask_zero",
            swap(_LPE_ONEHOT, "        config[\"mask_zero\"] = self.mask_zero\n", ""),
            fails=('test_LearnedPositionalEmbedding__config',)),
    Mistake("LearnedPositionalEmbedding", "no_get_config",
            "get_config left as the base config: the four arguments are not added",
            swap(_LPE_BROADCAST, '''        return {**super().get_config(), "vocab_size": self.vocab_size, "d_model": self.d_model,
                "max_length": self.max_length, "mask_zero": self.mask_zero}''',
                  "        return super().get_config()"),
            fails=("test_LearnedPositionalEmbedding__config",)),
    Mistake("LearnedPositionalEmbedding", "position_table_frozen",
            "the position Embedding made with trainable=False: only the token table learns",
            swap(_LPE_TAKE, "self.position_embedding = keras.layers.Embedding(max_length, d_model)",
                  "self.position_embedding = keras.layers.Embedding(max_length, d_model, "
                  "trainable=False)"),
            fails=("test_LearnedPositionalEmbedding",)),
    Mistake("LearnedPositionalEmbedding", "arguments_renamed",
            "the arguments kept under other names (self._max_length, ...), get_config right",
            swap(_LPE_TAKE,
                  "        self.vocab_size = vocab_size\n"
                  "        self.d_model = d_model\n"
                  "        self.max_length = max_length\n"
                  "        self.mask_zero = mask_zero\n",
                  "        self._vocab_size = vocab_size\n"
                  "        self._d_model = d_model\n"
                  "        self._max_length = max_length\n"
                  "        self._mask_zero = mask_zero\n",
                  "if length is not None and length > self.max_length:\n"
                  "            raise ValueError(f\"got {length} tokens but max_length is {self.max_length}\")",
                  "if length is not None and length > self._max_length:\n"
                  "            raise ValueError(f\"got {length} tokens but max_length is {self._max_length}\")",
                  "return (*input_shape, self.d_model)", "return (*input_shape, self._d_model)",
                  "        if self.mask_zero:\n", "        if self._mask_zero:\n",
                  "        config.update(vocab_size=self.vocab_size, d_model=self.d_model,\n"
                  "                      max_length=self.max_length, mask_zero=self.mask_zero)",
                  "        config.update(vocab_size=self._vocab_size, d_model=self._d_model,\n"
                  "                      max_length=self._max_length, mask_zero=self._mask_zero)"),
            fails=("test_LearnedPositionalEmbedding__config",)),
]

#: Mistakes that the visible check of their exercise may let through, with the
#: reason. Every mistake above fails its visible check.
HIDDEN_ONLY: dict[str, str] = {}

# Issue 47: each rule its own share. Every mistake above without `fails` loses its
# exercise's main tests cell and no other.
MISTAKES = own_share(MISTAKES, {})
