"""Verdict suite of lab 5 (a whole Transformer): correct variants and real mistakes.

Every source is a whole answer cell as a student would fill it. Earlier cells
of the notebook have put in scope: `math`, `time`, `np`, `keras`, `ops`, `plt`,
`labkit` (`checks`, `datasets`, `plots`), and the provided
`validate_layer_arguments`, `positional_encoding`, `PositionalEmbedding`,
`FeedForward`, `EncoderLayer` and `DecoderLayer`.

The notebook loads the shipped weights into the student's Transformer by
attribute name (Keras's `.weights.h5` is stored by the object tree), so every
Encoder, Decoder and Transformer variant keeps the attribute names the lab asks
for (`pos_embedding`, `dropout`, `enc_layers` / `dec_layers`, `encoder`,
`decoder`, `final_layer`) and creates exactly the same weights.

Honest readings (answers written from the notebook's text alone) are among the
variants: the config kept in a dict, `training` left to Keras (which hands it
down), finished beams in a list of their own with the beam refilled from the
unfinished candidates (the text's one algorithm since issue 47). A beam that
shrinks as its beams finish was one until issue 32, finished beams kept among
the beams (where open ones push them out) until issue 47: both are mistakes
now, with finished beams that hold their places in the beam and keras-hub's
BeamSampler, which extends beams after their end id. Mistakes in a secondary property (training mode,
get_config, what beam search does with finished beams) name the tests cells
they must fail (`fails`); the others keep their points. Every mistake fails its
exercise's visible check too.
"""

from tests.verdicts import Mistake, own_share, swap


# --- Encoder ---------------------------------------------------------------------------

_ENCODER_INIT = '''
class Encoder(keras.layers.Layer):
    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.vocab_size = vocab_size
        self.max_length = max_length
        self.dropout_rate = dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.enc_layers = []
        for i in range(num_layers):
            self.enc_layers.append(EncoderLayer(d_model, num_heads, dff, dropout_rate=dropout_rate))
'''

# A loop that appends the layers; the mask as ids > 0; the config from a list of names.
ENCODER_LOOP = _ENCODER_INIT + '''
    def call(self, token_ids, training=None):
        mask = ops.greater(token_ids, 0)
        x = self.pos_embedding(token_ids)
        x = self.dropout(x, training=training)
        for layer in self.enc_layers:
            x = layer(x, padding_mask=mask, training=training)
        return x

    def get_config(self):
        config = super().get_config()
        for name in ["num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                     "dropout_rate"]:
            config[name] = getattr(self, name)
        return config
'''

# Sublayers created in build(), once the input shape is known.
ENCODER_BUILD = '''
class Encoder(keras.layers.Layer):
    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.num_layers, self.d_model, self.num_heads = num_layers, d_model, num_heads
        self.dff, self.vocab_size = dff, vocab_size
        self.max_length, self.dropout_rate = max_length, dropout_rate

    def build(self, input_shape):
        self.pos_embedding = PositionalEmbedding(self.vocab_size, self.d_model,
                                                 max_length=self.max_length)
        self.dropout = keras.layers.Dropout(self.dropout_rate)
        self.enc_layers = [EncoderLayer(self.d_model, self.num_heads, self.dff,
                                        self.dropout_rate) for _ in range(self.num_layers)]
        self.pos_embedding.build(input_shape)
        vectors = tuple(input_shape) + (self.d_model,)
        for layer in self.enc_layers:
            layer.build(vectors)

    def call(self, token_ids, training=None):
        token_ids = ops.convert_to_tensor(token_ids)
        keep = token_ids != 0
        h = self.dropout(self.pos_embedding(token_ids), training=training)
        for encoder_layer in self.enc_layers:
            h = encoder_layer(h, padding_mask=keep, training=training)
        return h

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, d_model=self.d_model,
                      num_heads=self.num_heads, dff=self.dff, vocab_size=self.vocab_size,
                      max_length=self.max_length, dropout_rate=self.dropout_rate)
        return config
'''

# Arguments stored with setattr; layers built by map; `training` left to Keras's call
# context; an index loop.
ENCODER_MAP = '''
class Encoder(keras.layers.Layer):
    ARGUMENTS = ("num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                 "dropout_rate")

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        values = (num_layers, d_model, num_heads, dff, vocab_size, max_length, dropout_rate)
        for name, value in zip(self.ARGUMENTS, values):
            setattr(self, name, value)
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                                 max_length=max_length, mask_zero=True)
        self.dropout = keras.layers.Dropout(rate=dropout_rate)
        self.enc_layers = list(map(
            lambda index: EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                                       dropout_rate=dropout_rate, name=f"block_{index}"),
            range(num_layers)))

    def call(self, token_ids, training=None):
        real_tokens = ops.logical_not(ops.equal(token_ids, 0))
        out = self.dropout(self.pos_embedding(token_ids))
        for index in range(len(self.enc_layers)):
            out = self.enc_layers[index](out, padding_mask=real_tokens)
        return out

    def get_config(self):
        base = super().get_config()
        return {**base, **{name: getattr(self, name) for name in self.ARGUMENTS}}
'''

# --- Decoder ---------------------------------------------------------------------------

_DECODER_INIT = '''
class Decoder(keras.layers.Layer):
    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.vocab_size = vocab_size
        self.max_length = max_length
        self.dropout_rate = dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.dec_layers = []
        for i in range(num_layers):
            self.dec_layers.append(DecoderLayer(d_model, num_heads, dff, dropout_rate=dropout_rate))
'''

_DECODER_CONFIG = '''
    def get_config(self):
        config = super().get_config()
        for name in ["num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                     "dropout_rate"]:
            config[name] = getattr(self, name)
        return config
'''

# The scores overwritten in the loop: the last layer's stay; keyword arguments reordered.
DECODER_LOOP = _DECODER_INIT + '''
    def call(self, token_ids, context, context_padding_mask=None, training=None):
        target_mask = ops.greater(token_ids, 0)
        x = self.pos_embedding(token_ids)
        x = self.dropout(x, training=training)
        for layer in self.dec_layers:
            x = layer(x, context, training=training, context_padding_mask=context_padding_mask,
                      x_padding_mask=target_mask)
            self.last_attention_scores = layer.last_attention_scores
        return x
''' + _DECODER_CONFIG

# Sublayers created in build(); the scores read from the list's last element.
DECODER_BUILD = '''
class Decoder(keras.layers.Layer):
    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.num_layers, self.d_model, self.num_heads = num_layers, d_model, num_heads
        self.dff, self.vocab_size = dff, vocab_size
        self.max_length, self.dropout_rate = max_length, dropout_rate

    def build(self, input_shape):
        self.pos_embedding = PositionalEmbedding(self.vocab_size, self.d_model,
                                                 max_length=self.max_length)
        self.dropout = keras.layers.Dropout(self.dropout_rate)
        self.dec_layers = [DecoderLayer(self.d_model, self.num_heads, self.dff,
                                        dropout_rate=self.dropout_rate)
                           for _ in range(self.num_layers)]
        self.pos_embedding.build(input_shape)

    def call(self, token_ids, context, context_padding_mask=None, training=None):
        token_ids = ops.convert_to_tensor(token_ids)
        h = self.dropout(self.pos_embedding(token_ids), training=training)
        for block in self.dec_layers:
            h = block(h, context, x_padding_mask=token_ids != 0,
                      context_padding_mask=context_padding_mask, training=training)
        last = self.dec_layers[len(self.dec_layers) - 1]
        self.last_attention_scores = last.last_attention_scores
        return h

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, d_model=self.d_model,
                      num_heads=self.num_heads, dff=self.dff, vocab_size=self.vocab_size,
                      max_length=self.max_length, dropout_rate=self.dropout_rate)
        return config
'''

# Arguments stored with setattr; a list comprehension with names; an index loop that
# keeps the scores when the index is the last one; `training` left to Keras.
DECODER_INDEX = '''
class Decoder(keras.layers.Layer):
    ARGUMENTS = ("num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                 "dropout_rate")

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        values = (num_layers, d_model, num_heads, dff, vocab_size, max_length, dropout_rate)
        for name, value in zip(self.ARGUMENTS, values):
            setattr(self, name, value)
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                                 max_length=max_length)
        self.dropout = keras.layers.Dropout(rate=dropout_rate)
        self.dec_layers = [DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                                        dropout_rate=dropout_rate, name=f"block_{i}")
                           for i in range(num_layers)]

    def call(self, token_ids, context, context_padding_mask=None, training=None):
        own_mask = ops.logical_not(ops.equal(token_ids, 0))
        out = self.dropout(self.pos_embedding(token_ids))
        for index in range(self.num_layers):
            out = self.dec_layers[index](out, context, x_padding_mask=own_mask,
                                         context_padding_mask=context_padding_mask)
            if index == self.num_layers - 1:
                self.last_attention_scores = self.dec_layers[index].last_attention_scores
        return out

    def get_config(self):
        base = super().get_config()
        return {**base, **{name: getattr(self, name) for name in self.ARGUMENTS}}
'''

# --- Transformer -------------------------------------------------------------------------

_TRANSFORMER_INIT = '''
class Transformer(keras.Model):
    def __init__(self, num_layers, d_model, num_heads, dff, input_vocab_size,
                 target_vocab_size, max_length=2048, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, input_vocab_size=input_vocab_size,
                                 target_vocab_size=target_vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.input_vocab_size = input_vocab_size
        self.target_vocab_size = target_vocab_size
        self.max_length = max_length
        self.dropout_rate = dropout_rate
        self.encoder = Encoder(num_layers, d_model, num_heads, dff, input_vocab_size,
                               max_length, dropout_rate)
        self.decoder = Decoder(num_layers, d_model, num_heads, dff, target_vocab_size,
                               max_length, dropout_rate)
        self.final_layer = keras.layers.Dense(target_vocab_size)
'''

_TRANSFORMER_CONFIG = '''
    def get_config(self):
        config = super().get_config()
        for name in ["num_layers", "d_model", "num_heads", "dff", "input_vocab_size",
                     "target_vocab_size", "max_length", "dropout_rate"]:
            config[name] = getattr(self, name)
        return config
'''

# The mask computed first; inputs indexed; the config from a list of names.
TRANSFORMER_INDEXED = _TRANSFORMER_INIT + '''
    def call(self, inputs, training=None):
        context_ids = inputs[0]
        target_ids = inputs[1]
        source_mask = ops.greater(context_ids, 0)
        encoded = self.encoder(context_ids, training=training)
        decoded = self.decoder(target_ids, encoded, context_padding_mask=source_mask,
                               training=training)
        logits = self.final_layer(decoded)
        return logits
''' + _TRANSFORMER_CONFIG

# Shared keyword arguments; one nested expression; a settings dict for the config.
TRANSFORMER_SHARED = '''
class Transformer(keras.Model):
    def __init__(self, num_layers, d_model, num_heads, dff, input_vocab_size,
                 target_vocab_size, max_length=2048, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, input_vocab_size=input_vocab_size,
                                 target_vocab_size=target_vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        common = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                      max_length=max_length, dropout_rate=dropout_rate)
        for name, value in common.items():
            setattr(self, name, value)
        self.input_vocab_size, self.target_vocab_size = input_vocab_size, target_vocab_size
        self.encoder = Encoder(vocab_size=input_vocab_size, **common)
        self.decoder = Decoder(vocab_size=target_vocab_size, **common)
        self.final_layer = keras.layers.Dense(units=target_vocab_size, activation=None)

    def call(self, inputs, training=None):
        source, target = inputs
        return self.final_layer(self.decoder(
            target, self.encoder(source, training=training),
            context_padding_mask=ops.not_equal(source, 0), training=training))

    def get_config(self):
        names = ("num_layers", "d_model", "num_heads", "dff", "input_vocab_size",
                 "target_vocab_size", "max_length", "dropout_rate")
        return {**super().get_config(), **{name: getattr(self, name) for name in names}}
'''

# `training` left to Keras's call context; the mask with logical_not; tuple(inputs).
TRANSFORMER_IMPLICIT = _TRANSFORMER_INIT + '''
    def call(self, inputs, training=None):
        context_ids, target_ids = tuple(inputs)
        context_ids = ops.convert_to_tensor(context_ids)
        real_source = ops.logical_not(ops.equal(context_ids, 0))
        context = self.encoder(context_ids)
        x = self.decoder(target_ids, context, context_padding_mask=real_source)
        return self.final_layer(x)
''' + _TRANSFORMER_CONFIG

# --- masked_loss ----------------------------------------------------------------------------

# The loss object without reduction, ops.where for the mask.
LOSS_OBJECT = '''
def masked_loss(y_true, y_pred):
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                               reduction=None)
    per_token = cross_entropy(y_true, y_pred)
    real = ops.not_equal(y_true, 0)
    total = ops.sum(ops.where(real, per_token, ops.zeros_like(per_token)))
    count = ops.sum(ops.cast(real, per_token.dtype))
    return total / count
'''

# One-hot targets against log_softmax.
LOSS_ONE_HOT = '''
def masked_loss(y_true, y_pred):
    y_pred = ops.convert_to_tensor(y_pred)
    vocabulary = ops.shape(y_pred)[-1]
    log_probabilities = ops.log_softmax(y_pred, axis=-1)
    targets = ops.one_hot(ops.cast(y_true, "int32"), vocabulary, dtype=log_probabilities.dtype)
    per_token = -ops.sum(targets * log_probabilities, axis=-1)
    mask = ops.cast(ops.greater(y_true, 0), per_token.dtype)
    return ops.divide(ops.sum(per_token * mask), ops.sum(mask))
'''

# logsumexp minus the target's logit; the mean of masked terms over the mean of the mask.
LOSS_LOGSUMEXP = '''
def masked_loss(y_true, y_pred):
    y_pred = ops.convert_to_tensor(y_pred, dtype="float32")
    labels = ops.expand_dims(ops.cast(y_true, "int32"), axis=-1)
    target_logit = ops.squeeze(ops.take_along_axis(y_pred, labels, axis=-1), axis=-1)
    per_token = ops.logsumexp(y_pred, axis=-1) - target_logit
    weights = ops.cast(ops.not_equal(y_true, 0), "float32")
    return ops.mean(per_token * weights) / ops.mean(weights)
'''

# --- masked_accuracy ----------------------------------------------------------------------------

# ops.where and integer counts.
ACCURACY_WHERE = '''
def masked_accuracy(y_true, y_pred):
    y_true = ops.cast(y_true, "int32")
    predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
    real = ops.not_equal(y_true, 0)
    hits = ops.where(real, ops.cast(ops.equal(predicted, y_true), "int32"), 0)
    return ops.cast(ops.sum(hits), "float32") / ops.cast(ops.sum(ops.cast(real, "int32")),
                                                         "float32")
'''

# Keras's own token accuracy, then the mask.
ACCURACY_KERAS = '''
def masked_accuracy(y_true, y_pred):
    per_token = keras.metrics.sparse_categorical_accuracy(y_true, y_pred)  # (B, T) of 0/1
    per_token = ops.reshape(ops.cast(per_token, "float32"), ops.shape(y_true))
    mask = ops.cast(ops.greater(y_true, 0), "float32")
    return ops.sum(per_token * mask) / ops.sum(mask)
'''

# The mean of the masked hits over the mean of the mask.
ACCURACY_MEANS = '''
def masked_accuracy(y_true, y_pred):
    guesses = ops.argmax(y_pred, axis=-1)
    truth = ops.cast(y_true, guesses.dtype)
    right = ops.cast(ops.equal(guesses, truth), "float32")
    mask = ops.cast(ops.logical_not(ops.equal(truth, 0)), "float32")
    return ops.mean(right * mask) / ops.mean(mask)
'''

# --- greedy_decode -----------------------------------------------------------------------------

# Python lists per row; NumPy's argmax; padded at the end.
GREEDY_LISTS = '''
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    context_ids = np.asarray(ops.convert_to_numpy(context_ids))
    rows = [[start_id] for _ in range(len(context_ids))]
    done = [False] * len(context_ids)
    for _ in range(max_length):
        if all(done):
            break
        width = max(len(row) for row in rows)
        tokens = np.array([row + [0] * (width - len(row)) for row in rows], dtype="int32")
        logits = np.asarray(ops.convert_to_numpy(model((context_ids, tokens), training=False)))
        for b, row in enumerate(rows):
            if done[b]:
                continue
            token = int(np.argmax(logits[b, len(row) - 1]))
            row.append(token)
            done[b] = token == end_id
    width = max(len(row) for row in rows) - 1
    out = np.zeros((len(rows), width), dtype="int32")
    for b, row in enumerate(rows):
        out[b, : len(row) - 1] = row[1:]
    return out
'''

# keras.ops all the way: argmax, where, concatenate, all.
GREEDY_OPS = '''
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    batch = ops.shape(context_ids)[0]
    generated = ops.full((batch, 1), start_id, dtype="int32")
    finished = ops.zeros((batch,), dtype="bool")
    for _ in range(max_length):
        logits = model((context_ids, generated), training=False)
        next_ids = ops.cast(ops.argmax(logits[:, -1, :], axis=-1), "int32")
        next_ids = ops.where(finished, ops.zeros_like(next_ids), next_ids)
        generated = ops.concatenate([generated, ops.expand_dims(next_ids, 1)], axis=1)
        finished = ops.logical_or(finished, ops.equal(next_ids, end_id))
        if bool(ops.convert_to_numpy(ops.all(finished))):
            break
    return generated[:, 1:]
'''

# Decode until every row has written end_id, then blank what follows each row's first end.
GREEDY_AFTERWARDS = '''
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    context_ids = np.asarray(context_ids)
    sequences = np.full((context_ids.shape[0], 1), start_id, dtype=np.int64)
    while sequences.shape[1] <= max_length:
        logits = ops.convert_to_numpy(model((context_ids, sequences), training=False))
        best = np.argmax(logits[:, -1, :], axis=-1)
        sequences = np.column_stack([sequences, best])
        written = sequences[:, 1:]
        if (written == end_id).any(axis=1).all():
            break
    written = sequences[:, 1:]
    ended_before = np.cumsum(written == end_id, axis=1) - (written == end_id)
    return np.where(ended_before > 0, 0, written)
'''

# --- sample_with_temperature --------------------------------------------------------------------

# log-probabilities / T: softmax(log p / T) = p^(1/T) normalised = softmax(z / T).
SAMPLE_LOG_PROBABILITIES = '''
def sample_with_temperature(logits, temperature, seed=None):
    logits = ops.convert_to_tensor(logits, "float32")
    if temperature == 0:
        return np.argmax(ops.convert_to_numpy(logits), axis=-1)
    log_p = ops.log_softmax(logits, axis=-1)
    draws = keras.random.categorical(log_p / temperature, 1, seed=seed)
    return ops.reshape(draws, (-1,))
'''

# The inverse CDF in NumPy, from a stable softmax.
SAMPLE_INVERSE_CDF = '''
def sample_with_temperature(logits, temperature, seed=None):
    z = np.asarray(ops.convert_to_numpy(logits), dtype=np.float64)
    if temperature <= 0:
        return z.argmax(axis=-1)
    scaled = z / temperature
    p = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    cdf = np.cumsum(p, axis=-1)
    cdf = cdf / cdf[:, -1:]
    u = np.random.default_rng(seed).random((z.shape[0], 1))
    return (cdf <= u).sum(axis=-1)
'''

# A tiny floor on the temperature (its argmax at 0), and a SeedGenerator.
SAMPLE_FLOOR = '''
def sample_with_temperature(logits, temperature, seed=None):
    temperature = max(float(temperature), 1e-6)
    generator = keras.random.SeedGenerator(seed)
    scaled = ops.divide(ops.convert_to_tensor(logits, "float32"), temperature)
    return ops.squeeze(keras.random.categorical(scaled, num_samples=1, seed=generator), axis=1)
'''

# --- beam_search ---------------------------------------------------------------------------------

# A flat top-k over (beams x vocabulary), divmod back to (beam, token); finished aside.
BEAM_FLAT = '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    context = np.asarray(context_ids).reshape(1, -1)
    sequences = np.array([[start_id]], dtype="int32")
    scores = np.zeros(1)
    finished = []
    for _ in range(max_length):
        logits = ops.convert_to_numpy(model((np.repeat(context, len(sequences), axis=0),
                                             sequences), training=False))[:, -1, :]
        z = logits.astype("float64")
        log_p = z - z.max(axis=1, keepdims=True)
        log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))
        total = (scores[:, None] + log_p).reshape(-1)
        vocabulary = log_p.shape[1]
        order = np.argsort(-total, kind="stable")[:beam_width]
        keep_sequences, keep_scores = [], []
        for flat in order:
            beam, token = divmod(int(flat), vocabulary)
            sequence = list(sequences[beam]) + [token]
            if token == end_id:
                finished.append((float(total[flat]), sequence))
            else:
                keep_sequences.append(sequence)
                keep_scores.append(total[flat])
        if not keep_sequences:
            sequences, scores = sequences[:0], scores[:0]  # every beam has ended
            break
        sequences = np.array(keep_sequences, dtype="int32")
        scores = np.array(keep_scores)
        if finished and max(score for score, _ in finished) >= scores.max():
            break
    candidates = finished + [(float(s), list(q)) for s, q in zip(scores, sequences)]
    best = max(candidates, key=lambda pair: pair[0])[1]
    return np.array(best[1:], dtype="int32")
'''

# Finished beams stay in the beam with their score, competing with the open candidates;
# one call for the open ones. A correct variant until issue 47; now a mistake (MISTAKES,
# "finished-evicted"): the text puts finished sentences in a list of their own, and on the
# evicted model open beams push the best sentence out of the beam.
BEAM_STAY = '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    import heapq

    context_ids = np.asarray(context_ids)
    beams = [(0.0, (start_id,))]
    for _ in range(max_length):
        open_beams = [beam for beam in beams if beam[1][-1] != end_id]
        if not open_beams:
            break
        prefixes = np.array([tokens for _, tokens in open_beams])
        contexts = np.repeat(context_ids, len(open_beams), axis=0)
        logits = ops.log_softmax(model((contexts, prefixes), training=False)[:, -1, :], axis=-1)
        log_p = np.asarray(ops.convert_to_numpy(logits), dtype="float64")
        candidates = [beam for beam in beams if beam[1][-1] == end_id]
        for (score, tokens), row in zip(open_beams, log_p):
            candidates += [(score + row[t], tokens + (t,)) for t in range(len(row))]
        beams = heapq.nlargest(beam_width, candidates, key=lambda beam: beam[0])
    best_score, best_tokens = max(beams, key=lambda beam: beam[0])
    return np.array(best_tokens[1:])
'''

# ops.top_k per beam; a dict of candidates, finished sentences in a dict of their own;
# the open ones among the beam_width best go on (no refill: the same answer, since what
# ranks below a finished sentence ends below it); all max_length steps unless all beams
# ended (the same answer too: an open beam ahead of the best finished sentence at the end
# was ahead at every step).
BEAM_TOP_K = '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    context_ids = ops.convert_to_numpy(context_ids)
    alive = {(start_id,): 0.0}
    done = {}
    for step in range(max_length):
        if not alive:
            break
        prefixes = list(alive)
        batch = np.array(prefixes, dtype="int32")
        logits = model((np.tile(context_ids, (len(prefixes), 1)), batch), training=False)
        log_p = ops.log_softmax(ops.cast(logits[:, -1, :], "float32"), axis=-1)
        values, indices = ops.top_k(log_p, k=beam_width)
        values, indices = ops.convert_to_numpy(values), ops.convert_to_numpy(indices)
        candidates = {}
        for i, prefix in enumerate(prefixes):
            for value, token in zip(values[i], indices[i]):
                candidates[prefix + (int(token),)] = alive[prefix] + float(value)
        pool = sorted(candidates.items(), key=lambda item: item[1], reverse=True)[:beam_width]
        alive = {seq: s for seq, s in pool if seq[-1] != end_id}
        done.update({seq: s for seq, s in pool if seq[-1] == end_id})
    best = max({**alive, **done}.items(), key=lambda item: item[1])[0]
    return np.array(best[1:], dtype="int32")
'''

# --- honest readings: answers written from the notebook's text alone -------------------

# The config kept in a dict from the start; dropout and the layers called without
# `training` (Keras hands it down); the layers built with keyword arguments only.
ENCODER_CONFIG_DICT = '''
class Encoder(keras.layers.Layer):
    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.settings = {"num_layers": num_layers, "d_model": d_model, "num_heads": num_heads,
                         "dff": dff, "vocab_size": vocab_size, "max_length": max_length,
                         "dropout_rate": dropout_rate}
        for name, value in self.settings.items():
            setattr(self, name, value)
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                                 max_length=max_length)
        self.dropout = keras.layers.Dropout(rate=dropout_rate)
        self.enc_layers = [EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                                        dropout_rate=dropout_rate)
                           for _ in range(num_layers)]

    def call(self, token_ids, training=None):
        keep = ops.not_equal(token_ids, 0)
        vectors = self.dropout(self.pos_embedding(token_ids))
        for block in self.enc_layers:
            vectors = block(vectors, padding_mask=keep)
        return vectors

    def get_config(self):
        config = super().get_config()
        config.update(self.settings)
        return config
'''

DECODER_CONFIG_DICT = '''
class Decoder(keras.layers.Layer):
    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.settings = {"num_layers": num_layers, "d_model": d_model, "num_heads": num_heads,
                         "dff": dff, "vocab_size": vocab_size, "max_length": max_length,
                         "dropout_rate": dropout_rate}
        for name, value in self.settings.items():
            setattr(self, name, value)
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                                 max_length=max_length)
        self.dropout = keras.layers.Dropout(rate=dropout_rate)
        self.dec_layers = [DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                                        dropout_rate=dropout_rate)
                           for _ in range(num_layers)]

    def call(self, token_ids, context, context_padding_mask=None, training=None):
        own = ops.not_equal(token_ids, 0)
        x = self.dropout(self.pos_embedding(token_ids), training=training)
        for block in self.dec_layers:
            x = block(x, context=context, x_padding_mask=own,
                      context_padding_mask=context_padding_mask, training=training)
        self.last_attention_scores = self.dec_layers[-1].last_attention_scores
        return x

    def get_config(self):
        return {**super().get_config(), **self.settings}
'''

# The config in a dict; the parts called with training by keyword, the mask as a
# separate name; the logits of the final layer returned as they are.
TRANSFORMER_CONFIG_DICT = '''
class Transformer(keras.Model):
    def __init__(self, num_layers, d_model, num_heads, dff, input_vocab_size,
                 target_vocab_size, max_length=2048, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, input_vocab_size=input_vocab_size,
                                 target_vocab_size=target_vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.settings = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                             dff=dff, input_vocab_size=input_vocab_size,
                             target_vocab_size=target_vocab_size, max_length=max_length,
                             dropout_rate=dropout_rate)
        for name, value in self.settings.items():
            setattr(self, name, value)
        shared = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                      max_length=max_length, dropout_rate=dropout_rate)
        self.encoder = Encoder(vocab_size=input_vocab_size, **shared)
        self.decoder = Decoder(vocab_size=target_vocab_size, **shared)
        self.final_layer = keras.layers.Dense(target_vocab_size)

    def call(self, inputs, training=None):
        context_ids, target_ids = inputs
        real_source = ops.not_equal(context_ids, 0)
        context = self.encoder(context_ids, training=training)
        decoded = self.decoder(target_ids, context, context_padding_mask=real_source,
                               training=training)
        return self.final_layer(decoded)

    def get_config(self):
        return {**super().get_config(), **self.settings}
'''

# Finished beams in a list of their own; the beam refilled with the best UNFINISHED
# candidates; stops when the best finished one beats every open beam.
BEAM_SEPARATE_REFILL = '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    context_ids = np.asarray(context_ids).reshape(1, -1)
    beams = [(0.0, [start_id])]
    finished = []
    for _ in range(max_length):
        batch = np.array([tokens for _, tokens in beams], dtype="int32")
        logits = model((np.repeat(context_ids, len(beams), axis=0), batch), training=False)
        log_p = np.asarray(ops.convert_to_numpy(ops.log_softmax(
            ops.convert_to_tensor(logits)[:, -1, :], axis=-1)), dtype="float64")
        candidates = []
        for (score, tokens), row in zip(beams, log_p):
            for token in range(len(row)):
                candidates.append((score + row[token], tokens + [token]))
        candidates.sort(key=lambda candidate: -candidate[0])
        finished += [c for c in candidates[:beam_width] if c[1][-1] == end_id]
        beams = [c for c in candidates if c[1][-1] != end_id][:beam_width]
        if finished and max(score for score, _ in finished) >= beams[0][0]:
            break
    best = max(finished + beams, key=lambda candidate: candidate[0])
    return np.array(best[1][1:], dtype="int32")
'''

# Each finished beam takes one place away for good (the beam shrinks), as in some
# course notes; one model call per beam. A correct variant until issue 32; now a
# mistake (MISTAKES, "beam-shrinks"): the text says a finished beam holds no place
# for good, and the makes-room model shows the difference.
BEAM_SHRINKING = '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    context = np.asarray(ops.convert_to_numpy(context_ids)).reshape(1, -1)
    width = beam_width
    beams = [([start_id], 0.0)]
    done = []
    step = 0
    while width > 0 and beams and step < max_length:
        step += 1
        pool = []
        for tokens, score in beams:
            z = np.asarray(ops.convert_to_numpy(model((context, np.array([tokens])),
                                                      training=False)))[0, -1]
            z = z.astype("float64")
            log_p = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
            pool += [(tokens + [t], score + log_p[t]) for t in range(len(z))]
        pool.sort(key=lambda item: item[1], reverse=True)
        beams = []
        for tokens, score in pool[:width]:
            if tokens[-1] == end_id:
                done.append((tokens, score))
            else:
                beams.append((tokens, score))
        width -= sum(1 for tokens, _ in pool[:width] if tokens[-1] == end_id)
    tokens, _ = max(done + beams, key=lambda item: item[1])
    return np.array(tokens[1:])
'''

# keras-hub's BeamSampler, ported: a flat top-k over (beams x vocabulary) at every step,
# finished beams extended like the others (their scores go on changing: probabilities
# after the end id), until every beam holds end_id; the best beam cut after its first
# end_id (as keras-hub's generate masks what follows the end). A mistake (MISTAKES,
# "extended-after-end") of the finished-beam part only: it also keeps finished beams
# among the open ones, the other rule of that part.
BEAM_KERAS_HUB = '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    context = np.asarray(ops.convert_to_numpy(context_ids)).reshape(1, -1)
    prompt = np.full((1, 1), start_id, dtype="int32")
    log_probs = np.zeros(1)
    for _ in range(max_length):
        logits = model((np.repeat(context, len(prompt), axis=0), prompt), training=False)
        step = ops.convert_to_numpy(ops.log_softmax(ops.cast(logits[:, -1, :], "float32"),
                                                    axis=-1)).astype("float64")
        vocab_size = step.shape[-1]
        next_log_probs = (step + log_probs[:, None]).reshape(-1)
        indices = np.argsort(-next_log_probs, kind="stable")[:beam_width]
        prompt = np.concatenate([prompt[indices // vocab_size],
                                 (indices % vocab_size)[:, None]], axis=1).astype("int32")
        log_probs = next_log_probs[indices]
        if all(end_id in row[1:] for row in prompt.tolist()):
            break
    best = [int(t) for t in prompt[int(np.argmax(log_probs))][1:]]
    if end_id in best:
        best = best[:best.index(end_id) + 1]
    return np.array(best, dtype="int32")
'''

VARIANTS = {
    "Encoder": [ENCODER_LOOP, ENCODER_BUILD, ENCODER_MAP, ENCODER_CONFIG_DICT],
    "Decoder": [DECODER_LOOP, DECODER_BUILD, DECODER_INDEX, DECODER_CONFIG_DICT],
    "Transformer": [TRANSFORMER_INDEXED, TRANSFORMER_SHARED, TRANSFORMER_IMPLICIT,
                    TRANSFORMER_CONFIG_DICT],
    "masked_loss": [LOSS_OBJECT, LOSS_ONE_HOT, LOSS_LOGSUMEXP],
    "masked_accuracy": [ACCURACY_WHERE, ACCURACY_KERAS, ACCURACY_MEANS],
    "greedy_decode": [GREEDY_LISTS, GREEDY_OPS, GREEDY_AFTERWARDS],
    "sample_with_temperature": [SAMPLE_LOG_PROBABILITIES, SAMPLE_INVERSE_CDF, SAMPLE_FLOOR],
    "beam_search": [BEAM_FLAT, BEAM_TOP_K, BEAM_SEPARATE_REFILL],
}

_ENCODER_EMBED = '''
        x = self.pos_embedding(token_ids)
        x = self.dropout(x, training=training)
'''
_ENCODER_LOOP_BODY = '''
        for layer in self.enc_layers:
            x = layer(x, padding_mask=mask, training=training)
        return x
'''
_DECODER_EMBED = '''
        x = self.pos_embedding(token_ids)
        x = self.dropout(x, training=training)
'''
_TRANSFORMER_CALL = '''
        decoded = self.decoder(target_ids, encoded, context_padding_mask=source_mask,
                               training=training)
'''

_ARGUMENTS_LOOP = '''        for name in ["num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                     "dropout_rate"]:
            config[name] = getattr(self, name)
'''

MISTAKES = [
    # --- Encoder
    Mistake("Encoder", "no-sqrt-scaling",
            "embeds by hand without the sqrt(d_model) scaling of the token vectors",
            swap(ENCODER_LOOP, _ENCODER_EMBED, '''
        length = token_ids.shape[1]
        x = self.pos_embedding.token_embedding(token_ids)
        x = x + positional_encoding(length, self.d_model)[None, :, :]
        x = self.dropout(x, training=training)
''')),
    Mistake("Encoder", "no-positional-encoding",
            "scaled token vectors only: the sinusoidal positions are never added",
            swap(ENCODER_LOOP, _ENCODER_EMBED, '''
        x = self.pos_embedding.token_embedding(token_ids) * math.sqrt(self.d_model)
        x = self.dropout(x, training=training)
''')),
    Mistake("Encoder", "dropout-always-on",
            "dropout after the embedding with training=True, also at inference",
            swap(ENCODER_LOOP, "x = self.dropout(x, training=training)",
                  "x = self.dropout(x, training=True)")),
    Mistake("Encoder", "no-padding-mask",
            "the layers never get the padding mask: tokens attend to padding",
            swap(ENCODER_LOOP, "x = layer(x, padding_mask=mask, training=training)",
                  "x = layer(x, training=training)")),
    Mistake("Encoder", "one-layer-repeated",
            "[EncoderLayer(...)] * num_layers: one layer (one set of weights) used num_layers times",
            swap(ENCODER_LOOP, '''        self.enc_layers = []
        for i in range(num_layers):
            self.enc_layers.append(EncoderLayer(d_model, num_heads, dff, dropout_rate=dropout_rate))
''', '''        self.enc_layers = [EncoderLayer(d_model, num_heads, dff, dropout_rate=dropout_rate)] * num_layers
''')),
    Mistake("Encoder", "extra-final-norm",
            "a final LayerNormalization after the stack (pre-norm habit); the post-norm contract has none",
            swap(swap(ENCODER_LOOP, "        self.enc_layers = []\n",
                        "        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)\n"
                        "        self.enc_layers = []\n"),
                  "            x = layer(x, padding_mask=mask, training=training)\n        return x\n",
                  "            x = layer(x, padding_mask=mask, training=training)\n"
                  "        return self.final_norm(x)\n")),
    # training mode and the config (secondary properties: their own tests cells)
    Mistake("Encoder", "no-embedding-dropout",
            "never applies self.dropout: no dropout after the embedding while training",
            swap(ENCODER_LOOP, "        x = self.dropout(x, training=training)\n", ""),
            fails=("test_Encoder__training",)),
    Mistake("Encoder", "layers-at-inference",
            "calls every layer with training=False: the layers never drop while training",
            swap(ENCODER_LOOP, "x = layer(x, padding_mask=mask, training=training)",
                  "x = layer(x, padding_mask=mask, training=False)"),
            fails=("test_Encoder__training",)),
    Mistake("Encoder", "dropout-after-stack",
            "the dropout after the last layer instead of after the embedding",
            swap(swap(ENCODER_LOOP, "        x = self.dropout(x, training=training)\n", ""),
                  "            x = layer(x, padding_mask=mask, training=training)\n        return x\n",
                  "            x = layer(x, padding_mask=mask, training=training)\n"
                  "        return self.dropout(x, training=training)\n"),
            fails=("test_Encoder__training",)),
    Mistake("Encoder", "training-default-true",
            "call(self, token_ids, training=True): dropout acts when training is left out",
            swap(ENCODER_LOOP, "def call(self, token_ids, training=None):",
                  "def call(self, token_ids, training=True):"),
            fails=("test_Encoder__training",)),
    Mistake("Encoder", "config-stub-empty",
            "get_config returns super().get_config() only: none of the seven arguments",
            swap(ENCODER_LOOP, _ARGUMENTS_LOOP, ""),
            fails=("test_Encoder__config",)),
    # --- Decoder
    Mistake("Decoder", "no-sqrt-scaling",
            "embeds by hand without the sqrt(d_model) scaling of the token vectors",
            swap(DECODER_LOOP, _DECODER_EMBED, '''
        length = token_ids.shape[1]
        x = self.pos_embedding.token_embedding(token_ids)
        x = x + positional_encoding(length, self.d_model)[None, :, :]
        x = self.dropout(x, training=training)
''')),
    Mistake("Decoder", "dropout-always-on",
            "dropout after the embedding with training=True, also at inference",
            swap(DECODER_LOOP, "x = self.dropout(x, training=training)",
                  "x = self.dropout(x, training=True)")),
    Mistake("Decoder", "context-mask-dropped",
            "the layers never get context_padding_mask: the decoder attends to padded source tokens",
            swap(DECODER_LOOP, "context_padding_mask=context_padding_mask,\n"
                  "                      x_padding_mask=target_mask)",
                  "x_padding_mask=target_mask)")),
    Mistake("Decoder", "context-mask-positional",
            "context_padding_mask passed positionally, where DecoderLayer takes x_padding_mask",
            swap(DECODER_LOOP, '''            x = layer(x, context, training=training, context_padding_mask=context_padding_mask,
                      x_padding_mask=target_mask)''', '''            x = layer(x, context, context_padding_mask, training=training)''')),
    Mistake("Decoder", "first-layer-scores",
            "keeps the first layer's cross-attention weights, not the last one's",
            swap(DECODER_BUILD, "last = self.dec_layers[len(self.dec_layers) - 1]",
                  "last = self.dec_layers[0]")),
    Mistake("Decoder", "scores-not-kept",
            "never sets last_attention_scores (it stays None)",
            swap(DECODER_LOOP, "            self.last_attention_scores = layer.last_attention_scores\n",
                  "")),
    # training mode and the config (secondary properties: their own tests cells)
    Mistake("Decoder", "no-embedding-dropout",
            "never applies self.dropout: no dropout after the embedding while training",
            swap(DECODER_LOOP, "        x = self.dropout(x, training=training)\n", ""),
            fails=("test_Decoder__training",)),
    Mistake("Decoder", "layers-at-inference",
            "calls every layer with training=False: the layers never drop while training",
            swap(DECODER_LOOP, "x = layer(x, context, training=training,",
                  "x = layer(x, context, training=False,"),
            fails=("test_Decoder__training",)),
    Mistake("Decoder", "dropout-after-each-layer",
            "applies self.dropout again after every layer, the last one included",
            swap(DECODER_LOOP, "            self.last_attention_scores = layer.last_attention_scores\n",
                  "            self.last_attention_scores = layer.last_attention_scores\n"
                  "            x = self.dropout(x, training=training)\n"),
            fails=("test_Decoder__training",)),
    Mistake("Decoder", "config-stub-empty",
            "get_config returns super().get_config() only (the issue's Decoder without get_config)",
            swap(DECODER_LOOP, _ARGUMENTS_LOOP, ""),
            fails=("test_Decoder__config",)),
    Mistake("Decoder", "config-missing-arguments",
            "get_config forgets max_length and dropout_rate",
            swap(DECODER_LOOP, '"dff", "vocab_size", "max_length",\n                     "dropout_rate"]',
                  '"dff", "vocab_size"]'),
            fails=("test_Decoder__config",)),
    # --- Transformer
    Mistake("Transformer", "no-context-mask",
            "the decoder gets no context_padding_mask: it attends to the padded source tokens",
            swap(TRANSFORMER_INDEXED, _TRANSFORMER_CALL, '''
        decoded = self.decoder(target_ids, encoded, training=training)
''')),
    Mistake("Transformer", "mask-inverted",
            "context_padding_mask is True at the padding (context_ids == 0)",
            swap(TRANSFORMER_INDEXED, "source_mask = ops.greater(context_ids, 0)",
                  "source_mask = ops.equal(context_ids, 0)")),
    Mistake("Transformer", "softmax-output",
            "final_layer with a softmax: returns probabilities, not logits",
            swap(TRANSFORMER_INDEXED, "self.final_layer = keras.layers.Dense(target_vocab_size)",
                  'self.final_layer = keras.layers.Dense(target_vocab_size, activation="softmax")')),
    Mistake("Transformer", "inputs-swapped",
            "unpacks inputs as (target_ids, context_ids)",
            swap(swap(TRANSFORMER_INDEXED, "context_ids = inputs[0]", "context_ids = inputs[1]"),
                  "target_ids = inputs[1]", "target_ids = inputs[0]")),
    Mistake("Transformer", "encoder-output-not-passed",
            "the decoder's context is the source ids, not the encoder's output",
            swap(TRANSFORMER_INDEXED, _TRANSFORMER_CALL, '''
        decoded = self.decoder(target_ids, context_ids, context_padding_mask=source_mask,
                               training=training)
''')),
    Mistake("Transformer", "dropout-always-on",
            "calls the encoder and decoder with training=True, also at inference",
            swap(swap(TRANSFORMER_INDEXED, "encoded = self.encoder(context_ids, training=training)",
                        "encoded = self.encoder(context_ids, training=True)"),
                  _TRANSFORMER_CALL, '''
        decoded = self.decoder(target_ids, encoded, context_padding_mask=source_mask,
                               training=True)
''')),
    # training mode and the config (secondary properties: their own tests cells)
    Mistake("Transformer", "encoder-at-inference",
            "calls the encoder with training=False: it never drops while training",
            swap(TRANSFORMER_INDEXED, "encoded = self.encoder(context_ids, training=training)",
                  "encoded = self.encoder(context_ids, training=False)"),
            fails=("test_Transformer__training",)),
    Mistake("Transformer", "decoder-at-inference",
            "calls the decoder with training=False: it never drops while training",
            swap(TRANSFORMER_INDEXED, _TRANSFORMER_CALL, _TRANSFORMER_CALL.replace(
                "training=training)", "training=False)")),
            fails=("test_Transformer__training",)),
    Mistake("Transformer", "no-get-config",
            "no get_config at all: a keras.Model cannot build its config (NotImplementedError)",
            swap(TRANSFORMER_INDEXED, _TRANSFORMER_CONFIG, "\n"),
            fails=("test_Transformer__config",)),
    # --- masked_loss
    Mistake("masked_loss", "mean-over-all-tokens",
            "ops.mean over all B*T positions: padding counts",
            '''
def masked_loss(y_true, y_pred):
    per_token = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
    return ops.mean(per_token)
'''),
    Mistake("masked_loss", "divides-by-all-positions",
            "masks the terms but divides by B*T instead of the number of real tokens",
            swap(LOSS_ONE_HOT, "return ops.divide(ops.sum(per_token * mask), ops.sum(mask))",
                  "return ops.mean(per_token * mask)")),
    Mistake("masked_loss", "sample-weight-reduction",
            "the loss object with sample_weight=mask: Keras divides by B*T, not by the real tokens",
            '''
def masked_loss(y_true, y_pred):
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    mask = ops.cast(ops.not_equal(y_true, 0), "float32")
    return loss(y_true, y_pred, sample_weight=mask)
'''),
    Mistake("masked_loss", "not-from-logits",
            "sparse_categorical_crossentropy with the default from_logits=False on logits",
            '''
def masked_loss(y_true, y_pred):
    per_token = keras.losses.sparse_categorical_crossentropy(y_true, y_pred)
    mask = ops.cast(ops.not_equal(y_true, 0), per_token.dtype)
    return ops.sum(per_token * mask) / ops.sum(mask)
'''),
    Mistake("masked_loss", "softmax-twice",
            "normalises y_pred to probabilities by hand, then uses from_logits=True",
            '''
def masked_loss(y_true, y_pred):
    exponentials = ops.exp(y_pred)
    probabilities = exponentials / ops.sum(exponentials, axis=-1, keepdims=True)
    per_token = keras.losses.sparse_categorical_crossentropy(y_true, probabilities,
                                                             from_logits=True)
    mask = ops.cast(ops.not_equal(y_true, 0), per_token.dtype)
    return ops.sum(per_token * mask) / ops.sum(mask)
'''),
    Mistake("masked_loss", "mean-of-sentence-means",
            "averages each sentence over its real tokens, then the sentences: short ones weigh more",
            '''
def masked_loss(y_true, y_pred):
    per_token = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
    mask = ops.cast(ops.not_equal(y_true, 0), per_token.dtype)
    per_sentence = ops.sum(per_token * mask, axis=1) / ops.sum(mask, axis=1)
    return ops.mean(per_sentence)
'''),
    # --- masked_accuracy
    Mistake("masked_accuracy", "counts-padding",
            "the mean of the hits over all B*T positions: padding predicted as 0 counts as right",
            '''
def masked_accuracy(y_true, y_pred):
    predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
    return ops.mean(ops.cast(ops.equal(predicted, ops.cast(y_true, "int32")), "float32"))
'''),
    Mistake("masked_accuracy", "divides-by-all-positions",
            "masks the hits but divides by B*T",
            swap(ACCURACY_KERAS, "return ops.sum(per_token * mask) / ops.sum(mask)",
                  "return ops.mean(per_token * mask)")),
    Mistake("masked_accuracy", "hits-not-masked",
            "divides by the real tokens but counts the hits at padded positions too",
            swap(ACCURACY_KERAS, "return ops.sum(per_token * mask) / ops.sum(mask)",
                  "return ops.sum(per_token) / ops.sum(mask)")),
    Mistake("masked_accuracy", "argmax-wrong-axis",
            "argmax over the time axis (axis=1) instead of the vocabulary",
            swap(ACCURACY_MEANS, "guesses = ops.argmax(y_pred, axis=-1)",
                  "guesses = ops.argmax(y_pred, axis=1)")),
    Mistake("masked_accuracy", "mean-of-sentence-means",
            "averages each sentence's accuracy, then the sentences: short ones weigh more",
            '''
def masked_accuracy(y_true, y_pred):
    predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
    y_true = ops.cast(y_true, "int32")
    mask = ops.cast(ops.not_equal(y_true, 0), "float32")
    hits = ops.cast(ops.equal(predicted, y_true), "float32") * mask
    return ops.mean(ops.sum(hits, axis=1) / ops.sum(mask, axis=1))
'''),
    # --- greedy_decode
    Mistake("greedy_decode", "never-stops",
            "ignores end_id: every row runs to max_length",
            '''
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    tokens = np.full((len(context_ids), 1), start_id)
    for _ in range(max_length):
        logits = ops.convert_to_numpy(model((context_ids, tokens), training=False))
        tokens = np.concatenate([tokens, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return tokens[:, 1:]
'''),
    Mistake("greedy_decode", "no-padding-after-end",
            "stops when every row has ended but keeps writing tokens after a row's end_id",
            swap(GREEDY_OPS, "        next_ids = ops.where(finished, ops.zeros_like(next_ids), next_ids)\n",
                  "")),
    Mistake("greedy_decode", "stops-at-first-end",
            "stops the whole batch as soon as one row writes end_id",
            swap(GREEDY_OPS, "ops.all(finished)", "ops.any(finished)")),
    Mistake("greedy_decode", "keeps-start-id",
            "returns the start id at the front of every row",
            swap(GREEDY_OPS, "return generated[:, 1:]", "return generated")),
    Mistake("greedy_decode", "first-position-logits",
            "takes the argmax at position 0 instead of the last position",
            swap(GREEDY_OPS, "logits[:, -1, :]", "logits[:, 0, :]")),
    Mistake("greedy_decode", "one-step-short",
            "range(max_length - 1): rows that never end get one id too few",
            swap(GREEDY_OPS, "for _ in range(max_length):", "for _ in range(max_length - 1):")),
    # --- sample_with_temperature
    Mistake("sample_with_temperature", "multiplies",
            "logits * temperature: a high temperature sharpens, 0 gives uniform draws",
            '''
def sample_with_temperature(logits, temperature, seed=None):
    scaled = ops.convert_to_tensor(logits, "float32") * temperature
    return keras.random.categorical(scaled, 1, seed=seed)[:, 0]
'''),
    Mistake("sample_with_temperature", "zero-not-handled",
            "divides by the temperature even when it is 0",
            '''
def sample_with_temperature(logits, temperature, seed=None):
    scaled = ops.convert_to_tensor(logits, "float32") / temperature
    return keras.random.categorical(scaled, 1, seed=seed)[:, 0]
'''),
    Mistake("sample_with_temperature", "seed-ignored",
            "never passes the seed on: the same seed gives different draws",
            swap(SAMPLE_LOG_PROBABILITIES, "keras.random.categorical(log_p / temperature, 1, seed=seed)",
                  "keras.random.categorical(log_p / temperature, 1)")),
    Mistake("sample_with_temperature", "probabilities-as-logits",
            "passes softmax(logits) / T to keras.random.categorical, which expects logits",
            '''
def sample_with_temperature(logits, temperature, seed=None):
    logits = ops.convert_to_tensor(logits, "float32")
    if temperature == 0:
        return ops.argmax(logits, axis=-1)
    probabilities = ops.softmax(logits, axis=-1)
    return keras.random.categorical(probabilities / temperature, 1, seed=seed)[:, 0]
'''),
    Mistake("sample_with_temperature", "shape-b-by-1",
            "returns keras.random.categorical's (B, 1) without taking the column",
            '''
def sample_with_temperature(logits, temperature, seed=None):
    logits = ops.convert_to_tensor(logits, "float32")
    if temperature == 0:
        return ops.argmax(logits, axis=-1)
    return keras.random.categorical(logits / temperature, num_samples=1, seed=seed)
'''),
    Mistake("sample_with_temperature", "unstable-softmax",
            "exp(z / T) without subtracting the max: overflow (NaN) at small temperatures",
            '''
def sample_with_temperature(logits, temperature, seed=None):
    z = np.asarray(ops.convert_to_numpy(logits), dtype="float32")
    if temperature == 0:
        return z.argmax(axis=-1)
    e = np.exp(z / temperature)
    p = e / e.sum(axis=-1, keepdims=True)
    generator = np.random.default_rng(seed)
    return np.array([generator.choice(len(row), p=row) for row in p])
'''),

    # --- beam_search
    Mistake("beam_search", "last-step-only",
            "ranks the candidates by the new token's log-probability, not the total",
            swap(BEAM_FLAT, "total = (scores[:, None] + log_p).reshape(-1)",
                  "total = (0 * scores[:, None] + log_p).reshape(-1)")),
    Mistake("beam_search", "one-beam-kept",
            "keeps only the best candidate at each step (greedy decoding)",
            swap(BEAM_FLAT, "order = np.argsort(-total, kind=\"stable\")[:beam_width]",
                  "order = np.argsort(-total, kind=\"stable\")[:1]")),
    Mistake("beam_search", "probabilities-summed",
            "adds probabilities (softmax) instead of log-probabilities",
            swap(BEAM_FLAT, "total = (scores[:, None] + log_p).reshape(-1)",
                  "total = (scores[:, None] + np.exp(log_p)).reshape(-1)")),
    Mistake("beam_search", "raw-logits-summed",
            "adds the raw logits of each step, never normalised with log_softmax",
            swap(BEAM_FLAT, '''        log_p = z - z.max(axis=1, keepdims=True)
        log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))
''', '''        log_p = z
''')),
    Mistake("beam_search", "stops-at-first-finished",
            "stops the search as soon as one beam writes end_id, though open beams may still win",
            swap(BEAM_FLAT, "        if finished and max(score for score, _ in finished) >= scores.max():\n",
                  "        if finished:\n"),
            fails=("test_beam_search__finished",)),
    Mistake("beam_search", "finished-beams-extended",
            "no end bookkeeping: beams that wrote end_id keep being extended, and the answer "
            "goes on after its end id (the finished-beam part's only, since issue 47: after "
            "the end the ranking models make the end id certain)",
            swap(BEAM_FLAT, '''            if token == end_id:
                finished.append((float(total[flat]), sequence))
            else:
                keep_sequences.append(sequence)
                keep_scores.append(total[flat])
''', '''            keep_sequences.append(sequence)
            keep_scores.append(total[flat])
'''),
            fails=("test_beam_search__finished",)),
    Mistake("beam_search", "length-normalised",
            "ranks the candidates and the answer by the average log-probability per token "
            "instead of the total",
            swap(swap(BEAM_SEPARATE_REFILL,
                      "        candidates.sort(key=lambda candidate: -candidate[0])",
                      "        candidates.sort(key=lambda candidate: -candidate[0] / (len(candidate[1]) - 1))"),
                 "    best = max(finished + beams, key=lambda candidate: candidate[0])",
                 "    best = max(finished + beams, key=lambda candidate: candidate[0] / (len(candidate[1]) - 1))")),
    Mistake("beam_search", "mean-log-probability",
            "returns the sentence with the best AVERAGE log-probability per token, though it "
            "stops by the total as the text says (3/3 before the short-wins-late model)",
            swap(BEAM_FLAT, "best = max(candidates, key=lambda pair: pair[0])[1]",
                  "best = max(candidates, key=lambda pair: pair[0] / (len(pair[1]) - 1))[1]")),
    Mistake("beam_search", "stop-rule-worst-open",
            "stops once the best finished beam beats the WORST open beam, not the best one",
            swap(BEAM_FLAT, "if finished and max(score for score, _ in finished) >= scores.max():",
                  "if finished and max(score for score, _ in finished) >= scores.min():"),
            fails=("test_beam_search__finished",)),
    Mistake("beam_search", "finished-dropped",
            "a beam that writes end_id is dropped, never kept: only unfinished beams come back",
            swap(BEAM_FLAT, "                finished.append((float(total[flat]), sequence))\n",
                  "                pass\n")),
    Mistake("beam_search", "finished-preferred",
            "returns the best finished sentence whenever there is one, even when max_length "
            "stopped the search and an unfinished beam scores higher",
            swap(BEAM_FLAT, "    candidates = finished + [",
                  "    candidates = finished or ["),
            fails=("test_beam_search__finished",)),
    # Issue 32: the text says a finished beam kept among the beams "competes for a
    # place like any other"; these hold theirs without competing.
    Mistake("beam_search", "finished-hold-places",
            "finished beams stay in the beam and keep their places for good, without "
            "competing for them: only the places left go to the open candidates",
            swap(swap(BEAM_STAY,
                        "        candidates = [beam for beam in beams if beam[1][-1] == end_id]\n",
                        "        held = [beam for beam in beams if beam[1][-1] == end_id]\n"
                        "        candidates = []\n"),
                  "        beams = heapq.nlargest(beam_width, candidates, key=lambda beam: beam[0])",
                  "        beams = held + heapq.nlargest(beam_width - len(held), candidates,\n"
                  "                                      key=lambda beam: beam[0])"),
            fails=("test_beam_search__finished",)),
    Mistake("beam_search", "beam-shrinks",
            "finished beams set aside in a list, each taking one place from the beam for "
            "good: the width shrinks as beams finish",
            BEAM_SHRINKING,
            fails=("test_beam_search__finished",)),
    # Issue 47: one algorithm, finished sentences in a list of their own.
    Mistake("beam_search", "finished-evicted",
            "finished beams stay among the beams, where open candidates that score higher "
            "push them out (the evicted model's best sentence is lost)",
            BEAM_STAY,
            fails=("test_beam_search__finished",)),
    Mistake("beam_search", "extended-after-end",
            "keras-hub's BeamSampler: every beam extended at every step, finished or not, "
            "the answer cut after its end id",
            BEAM_KERAS_HUB,
            fails=("test_beam_search__finished",)),
    Mistake("beam_search", "keeps-start-id",
            "returns the start id too, before the ids written after it",
            swap(BEAM_SEPARATE_REFILL, 'return np.array(best[1][1:], dtype="int32")',
                 'return np.array(best[1], dtype="int32")')),
]

#: Mistakes that the visible check of their exercise may let through, with the
#: reason. None: every mistake above fails its visible check too.
HIDDEN_ONLY: dict[str, str] = {}

# Issue 47: each rule its own share. Every mistake above without `fails` loses its
# exercise's main tests cell and no other (the training cells judge a model against
# itself where its values are wrong); these break more than one rule.
_BEAM = ("test_beam_search", "test_beam_search__finished")
MISTAKES = own_share(MISTAKES, {
    # Dropout at inference: random values at inference, and a left-out `training`
    # that drops.
    ("Encoder", "dropout-always-on"): ("test_Encoder", "test_Encoder__training"),
    ("Decoder", "dropout-always-on"): ("test_Decoder", "test_Decoder__training"),
    ("Transformer", "dropout-always-on"): ("test_Transformer", "test_Transformer__training"),
    # The model raises on every call.
    ("Transformer", "inputs-swapped"): ("test_Transformer", "test_Transformer__training"),
    ("Transformer", "encoder-output-not-passed"): ("test_Transformer",
                                                   "test_Transformer__training"),
    # The answer is chosen by another score, or the search is another one (greedy,
    # last step only, finished sentences lost), or every answer carries the start id:
    # which sentence is returned differs in every hand-made model, with finished
    # sentences or not.
    ("beam_search", "last-step-only"): _BEAM,
    ("beam_search", "one-beam-kept"): _BEAM,
    ("beam_search", "probabilities-summed"): _BEAM,
    ("beam_search", "length-normalised"): _BEAM,
    ("beam_search", "mean-log-probability"): _BEAM,
    ("beam_search", "finished-dropped"): _BEAM,
    ("beam_search", "keeps-start-id"): _BEAM,
})
