"""Sample submissions of lab 5 (the Transformer): the interface is tests/samples.py's.

Correct answers written differently from the solution (implicit `training`, a
fixed-size token buffer in greedy decoding, NumPy Gumbel-max sampling, a beam
search that keeps finished sentences in a list and scores one beam per call),
the mistakes students really make, and the untouched notebook. An exercise's
points are split between its tests cells, one per property (its main
computation, its training mode, its config...), so each mistake names the
cells it fails. `python data/sample_submissions/build.py lab5` rebuilds
data/sample_submissions/lab5/ after the lab changes.
"""

from tests.samples import mistake, swap

# Correct answers, written differently from the solution. The attribute names
# stay those of the lab, so the shipped weights load into these models too.
CORRECT = {
    "Encoder": '''
class Encoder(keras.layers.Layer):
    """Layers appended in a loop; `training` left to Keras's call context."""

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.num_layers, self.d_model, self.num_heads, self.dff = num_layers, d_model, num_heads, dff
        self.vocab_size, self.max_length, self.dropout_rate = vocab_size, max_length, dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.enc_layers = []
        for _ in range(num_layers):
            self.enc_layers.append(EncoderLayer(d_model, num_heads, dff, dropout_rate))

    def call(self, token_ids, training=None):
        real = ops.greater(token_ids, 0)
        x = self.dropout(self.pos_embedding(token_ids))
        for layer in self.enc_layers:
            x = layer(x, padding_mask=real)
        return x

    def get_config(self):
        names = ["num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                 "dropout_rate"]
        return {**super().get_config(), **{name: getattr(self, name) for name in names}}
''',
    "Decoder": '''
class Decoder(keras.layers.Layer):
    """Same shape as my encoder; the scores read from the layer after the loop."""

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        self.num_layers, self.d_model, self.num_heads, self.dff = num_layers, d_model, num_heads, dff
        self.vocab_size, self.max_length, self.dropout_rate = vocab_size, max_length, dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.dec_layers = [DecoderLayer(d_model, num_heads, dff, dropout_rate)
                           for _ in range(num_layers)]

    def call(self, token_ids, context, context_padding_mask=None, training=None):
        target_mask = ops.greater(token_ids, 0)
        x = self.dropout(self.pos_embedding(token_ids), training=training)
        for layer in self.dec_layers:
            x = layer(x, context, context_padding_mask=context_padding_mask,
                      x_padding_mask=target_mask, training=training)
        last = self.dec_layers[len(self.dec_layers) - 1]
        self.last_attention_scores = last.last_attention_scores
        return x

    def get_config(self):
        config = super().get_config()
        for name in ["num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                     "dropout_rate"]:
            config[name] = getattr(self, name)
        return config
''',
    "Transformer": '''
class Transformer(keras.Model):
    """Parts created with keyword arguments; the context mask as ids > 0."""

    def __init__(self, num_layers, d_model, num_heads, dff, input_vocab_size,
                 target_vocab_size, max_length=2048, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, input_vocab_size=input_vocab_size,
                                 target_vocab_size=target_vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        shared = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                      max_length=max_length, dropout_rate=dropout_rate)
        self.settings = dict(shared, input_vocab_size=input_vocab_size,
                             target_vocab_size=target_vocab_size)
        self.encoder = Encoder(vocab_size=input_vocab_size, **shared)
        self.decoder = Decoder(vocab_size=target_vocab_size, **shared)
        self.final_layer = keras.layers.Dense(units=target_vocab_size)

    def call(self, inputs, training=None):
        context_ids, target_ids = inputs[0], inputs[1]
        encoded = self.encoder(context_ids, training=training)
        decoded = self.decoder(target_ids, encoded, training=training,
                               context_padding_mask=ops.greater(context_ids, 0))
        return self.final_layer(decoded)

    def get_config(self):
        return {**super().get_config(), **self.settings}
''',
    "masked_loss": '''
def masked_loss(y_true, y_pred):
    """log_softmax and take_along_axis, by hand."""
    log_probabilities = ops.log_softmax(y_pred, axis=-1)
    labels = ops.expand_dims(ops.cast(y_true, "int32"), -1)
    picked = ops.squeeze(ops.take_along_axis(log_probabilities, labels, axis=-1), -1)
    weights = ops.cast(ops.greater(y_true, 0), log_probabilities.dtype)
    return -ops.sum(picked * weights) / ops.sum(weights)
''',
    "masked_accuracy": '''
def masked_accuracy(y_true, y_pred):
    """Hits and real tokens as float32 masks."""
    real = ops.cast(ops.not_equal(y_true, 0), "float32")
    guesses = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
    hits = ops.cast(ops.equal(ops.cast(y_true, "int32"), guesses), "float32")
    return ops.sum(hits * real) / ops.sum(real)
''',
    "greedy_decode": '''
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    """A fixed buffer of max_length + 1 ids; finished rows keep getting 0."""
    context_ids = np.asarray(context_ids)
    buffer = np.zeros((len(context_ids), max_length + 1), dtype="int32")
    buffer[:, 0] = start_id
    done = np.zeros(len(context_ids), dtype=bool)
    for step in range(max_length):
        logits = ops.convert_to_numpy(model((context_ids, buffer[:, : step + 1]), training=False))
        choice = logits[:, -1].argmax(axis=-1)
        buffer[:, step + 1] = np.where(done, 0, choice)
        done = done | (choice == end_id)
    return buffer[:, 1:]
''',
    "sample_with_temperature": '''
def sample_with_temperature(logits, temperature, seed=None):
    """The Gumbel-max trick in NumPy: argmax(z / T + Gumbel noise)."""
    z = np.asarray(ops.convert_to_numpy(logits), dtype="float64")
    if temperature == 0:
        return z.argmax(axis=-1)
    noise = np.random.default_rng(seed).uniform(size=z.shape)
    return np.argmax(z / temperature - np.log(-np.log(noise)), axis=-1)
''',
    "beam_search": '''
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    """Finished sentences in a list of their own; one model call per open beam."""
    context = np.asarray(context_ids).reshape(1, -1)
    beams, finished = [(0.0, [start_id])], []
    for _ in range(max_length):
        candidates = []
        for score, tokens in beams:
            logits = ops.convert_to_numpy(model((context, np.array([tokens])), training=False))
            z = logits[0, -1].astype("float64")
            log_p = z - z.max() - np.log(np.exp(z - z.max()).sum())
            candidates += [(score + log_p[token], tokens + [token]) for token in range(len(z))]
        candidates.sort(key=lambda candidate: candidate[0], reverse=True)
        finished += [c for c in candidates[:beam_width] if c[1][-1] == end_id]
        beams = [c for c in candidates if c[1][-1] != end_id][:beam_width]
        if finished and max(score for score, _ in finished) >= beams[0][0]:
            break
    beams = sorted(finished + beams, key=lambda candidate: candidate[0], reverse=True)
    return np.array(beams[0][1][1:])
''',
}

VARIANTS: dict[str, tuple[str, str]] = {}

# mistake -> mistake(the exercise it is in, the answer cell with the mistake, the
# tests cells it fails: all of its exercise's unless named)
MISTAKES = {
    # The mean over all B*T positions: padding counts.
    "loss_counts_padding": mistake("masked_loss", '''
def masked_loss(y_true, y_pred):
    losses = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
    return ops.mean(losses)
'''),
    # The padded positions, predicted as padding, count as hits.
    "accuracy_counts_padding": mistake("masked_accuracy", '''
def masked_accuracy(y_true, y_pred):
    guesses = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
    return ops.mean(ops.cast(ops.equal(ops.cast(y_true, "int32"), guesses), "float32"))
'''),
    # Always max_length tokens: end_id is never looked at.
    "greedy_never_stops": mistake("greedy_decode", '''
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    tokens = np.full((len(context_ids), 1), start_id)
    for _ in range(max_length):
        logits = ops.convert_to_numpy(model((context_ids, tokens), training=False))
        tokens = np.concatenate([tokens, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return tokens[:, 1:]
'''),
    # The start id left at the front of every row.
    "greedy_keeps_start": mistake("greedy_decode", swap(
        CORRECT["greedy_decode"], "return buffer[:, 1:]", "return buffer")),
    # logits * T: a high temperature sharpens, T = 0 is uniform.
    "temperature_multiplies": mistake("sample_with_temperature", '''
def sample_with_temperature(logits, temperature, seed=None):
    scaled = ops.convert_to_tensor(logits, "float32") * temperature
    return keras.random.categorical(scaled, 1, seed=seed)[:, 0]
'''),
    # Each candidate scored by its last token's log-probability only: it also
    # returns a longer sentence when a finished one is best (the finished-beams
    # cell): nothing kept.
    "beam_last_step_only": mistake("beam_search", swap(
        CORRECT["beam_search"], "(score + log_p[token], tokens + [token])",
        "(log_p[token], tokens + [token])")),
    # The encoder's layers never see the padding mask: its outputs cost 1.5; its
    # training mode (tested without padding) and its config keep 0.5 each.
    "encoder_no_mask": mistake("Encoder", swap(
        CORRECT["Encoder"], "x = layer(x, padding_mask=real)", "x = layer(x)"),
        ("test_Encoder",)),
    # The decoder attends to the padded positions of the context: only the outputs'
    # 1.5 are lost (training mode is tested without padding).
    "transformer_no_context_mask": mistake("Transformer", swap(
        CORRECT["Transformer"], "decoded = self.decoder(target_ids, encoded, training=training,\n"
        "                               context_padding_mask=ops.greater(context_ids, 0))",
        "decoded = self.decoder(target_ids, encoded, training=training)"),
        ("test_Transformer",)),
    # The first layer's cross-attention weights kept instead of the last one's:
    # the outputs' 1.5 are lost.
    "decoder_first_scores": mistake("Decoder", swap(
        CORRECT["Decoder"], "last = self.dec_layers[len(self.dec_layers) - 1]",
        "last = self.dec_layers[0]"),
        ("test_Decoder",)),
    # get_config left as the stub's `super().get_config()`: no constructor argument;
    # the computation is right (0.5 lost).
    "decoder_config_stub": mistake("Decoder", swap(
        CORRECT["Decoder"], """        for name in ["num_layers", "d_model", "num_heads", "dff", "vocab_size", "max_length",
                     "dropout_rate"]:
            config[name] = getattr(self, name)
""", ""),
        ("test_Decoder__config",)),
    # At max_length, any finished sentence is preferred to a better unfinished one:
    # the ranking is right, the finished-beams cell (1) lost.
    "beam_prefers_finished": mistake("beam_search", swap(
        CORRECT["beam_search"], "    return np.array(beams[0][1][1:])",
        "    finished = [beam for beam in beams if beam[1][-1] == end_id]\n"
        "    return np.array((finished or beams)[0][1][1:])"),
        ("test_beam_search__finished",)),
}

# student file -> the mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    "bob.ipynb": {"loss_counts_padding"},
    "carol.ipynb": {"greedy_never_stops", "temperature_multiplies"},
    # erin's beam search could hand beam_width=1 to her wrong greedy decoder;
    # the grader's stand-in keeps that from costing her twice.
    "erin.ipynb": {"greedy_keeps_start", "beam_last_step_only"},
    "frank.ipynb": {"encoder_no_mask", "accuracy_counts_padding"},
    # grace's Transformer uses her Encoder and Decoder; stand-ins replace them
    # while it is tested, so only the missing context mask costs points there.
    "grace.ipynb": {"transformer_no_context_mask", "decoder_first_scores"},
    # Right computations, two secondary properties missed.
    "heidi.ipynb": {"decoder_config_stub", "beam_prefers_finished"},
}

UNTOUCHED = "dave.ipynb"
COLAB = None
CUT_SHORT = None

FEEDBACK_WORDS = [
    ("bob", "masked_loss", "padded positions count"),
    ("carol", "greedy_decode", "after the end id"),
    ("carol", "sample_with_temperature", "Divide the logits by the temperature"),
    ("erin", "greedy_decode", "starts with the start id"),
    ("erin", "beam_search", "TOTAL log-probability"),
    ("frank", "Encoder", "padding_mask"),
    ("frank", "masked_accuracy", "padded positions count"),
    ("grace", "Transformer", "context_padding_mask"),
    ("grace", "Decoder", "LAST layer"),
    ("heidi", "Decoder", "get_config()"),
    ("heidi", "beam_search", "finished or not"),
]
FEEDBACK_PAGE_WORDS: list[tuple[str, str]] = []
