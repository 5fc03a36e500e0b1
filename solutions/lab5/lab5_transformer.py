# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 5 — A whole Transformer
#
# Labs 1 to 4 built the parts: attention, multi-head attention, positional
# embeddings, masks, the encoder layer and the masked decoder layer. In this lab
# you assemble them into the Transformer of "Attention Is All You Need", train it
# to translate human-written dates ("Dienstag, 3. März 2020", "03/03/20",
# "2020年3月3日") into ISO dates ("2020-03-03"), and make it write:
#
# 1. `Encoder` and `Decoder`: an embedding and a stack of layers each;
# 2. `Transformer`: a `keras.Model` from source ids and target ids to logits;
# 3. `masked_loss` and `masked_accuracy`: training signals that ignore padding;
# 4. `greedy_decode`: the most likely token, one step at a time;
# 5. `sample_with_temperature`: sampling, from careful to adventurous;
# 6. `beam_search`: several hypotheses at once, ranked by total log-probability.
#
# Along the way you train on the lecture's toy dialogue ("how are you" → "i am
# fine"), watch training curves, and plot where the decoder looks in the source
# while it writes each digit.
#
# **Time:** about 90–120 minutes. Training the date translator took 156 s on the
# machine the kit was measured on (2 cores of an AMD EPYC CPU, Linux, TensorFlow
# backend; section 7 says more); by default the notebook loads weights trained in
# advance instead (see `TRAIN` below). So loaded, the solution ran from top to
# bottom in about a minute on that machine (57 and 67 s in two runs, with other
# work sharing its 2 cores): TensorFlow's start in the setup cell took 4 to 10 s
# of it, the last cell's rerun of every check 11 to 14 s.
#
# **How to work.** Run the cells from top to bottom. Replace each
# `raise NotImplementedError()` with your code, then run the check cell below it.
# A check prints `✓` when it passes. Hidden tests on other inputs grade your
# notebook, so a passing check is necessary, not sufficient. Read-only cells
# (setup, provided layers, checks, demos) are locked.

# %% nbgrader="locked" grade_id="colab_setup"
# Colab only: installs this lab's helpers (pinned). Does nothing anywhere else.
import importlib.util, subprocess, sys
if "google.colab" in sys.modules and importlib.util.find_spec("labkit") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{LABKIT_REQUIREMENT}}"], check=True)

# %% nbgrader="locked" grade_id="setup"
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quieter TensorFlow start-up

import inspect
import math
import time

import numpy as np
import labkit

labkit.start_keras()  # Keras, without TensorFlow's start-up notices
import keras
from keras import ops
import matplotlib.pyplot as plt

from labkit import checks, datasets, plots
from labkit.validation import validate_layer_arguments

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% [markdown]
# **Training or not.** With `TRAIN = False` (the default) the notebook loads the
# date translator's weights, trained in advance with this lab's own code and
# shipped with `labkit`; with `TRAIN = True` it trains the models from scratch
# with your `Transformer`, `masked_loss` and `masked_accuracy` (156 s on the
# 2-core CPU of section 7; slower or faster on yours). In Colab, edit the cell
# below; in Jupyter, where it is read-only, add a cell `TRAIN = True` right after
# it. `TRAIN` does not change your grade: grading skips the cells that train or
# only demonstrate (the smoke test, the training, the plots and the decoding
# demos), so a graded notebook never trains.

# %% nbgrader="locked" grade_id="train_flag"
TRAIN = False

# %% [markdown]
# ## 1. The data: dates in many languages, and ISO dates
#
# `labkit.datasets` writes dates in 13 formats and 5 languages, from a seed: the
# same seed gives the same pairs on every machine, and nothing is downloaded. The
# task is a small translation problem with everything a real one has: word order
# changes (the year comes first in ISO and in Japanese, last in the others),
# words become numbers ("März" → `03`), some input is noise for the output (the
# weekday), and "03/04/21" must be read the American way (month first) while
# "03.04.2021" is read the German way (day first).
#
# The split holds out whole *dates*: a date in the test part never appears in
# training, in any format, so a good test score means the model reads dates, not
# that it remembers them.

# %% nbgrader="locked" grade_id="data"
for format_name in datasets.FORMATS:
    print(f"{format_name:>18}: {datasets.format_date('2020-03-03', format_name)}")

pairs = datasets.dates(30_000, seed=0)
train_pairs, validation_pairs, test_pairs = datasets.split(
    pairs, validation_fraction=0.1, test_fraction=0.1, seed=0)
print(f"\n{len(train_pairs)} training, {len(validation_pairs)} validation and "
      f"{len(test_pairs)} test pairs, e.g. {train_pairs[0]}")

SOURCE = datasets.SOURCE_VOCABULARY  # characters of the human-written dates
TARGET = datasets.TARGET_VOCABULARY  # digits and "-"
(train_context, train_target_in), train_target_out = datasets.encode_pairs(train_pairs)
(validation_context, validation_target_in), validation_target_out = \
    datasets.encode_pairs(validation_pairs)
(test_context, test_target_in), test_target_out = datasets.encode_pairs(test_pairs)
print(f"source vocabulary: {SOURCE.size} ids, target vocabulary: {TARGET.size} ids")
print("context ids", train_context.shape, " decoder input", train_target_in.shape,
      " target", train_target_out.shape)

# %% [markdown]
# Each character becomes an id (`SOURCE.encode`, padded with
# `keras.utils.pad_sequences`, so it runs on any backend); ids 0, 1 and 2 are
# padding, start (`<SOS>`) and end (`<EOS>`). As in the lecture's toy example,
# the decoder reads the target shifted right by one: at each position it sees the
# start token and the tokens before, and must predict the next one. This is
# *teacher forcing*: during training the decoder reads the true previous tokens,
# not its own guesses.
#
# The lecture's dialogue uses <SOS>=0, <EOS>=1, <PAD>=2. Here the models mask id
# 0 as padding, so `datasets.toy_dialogue()` swaps the three special tokens:
# <PAD>=0, <SOS>=1, <EOS>=2. Every word keeps its id: "how are you" is still
# `[5, 8, 9]`.

# %% nbgrader="locked" grade_id="demo_data"
human, iso = train_pairs[0]
(context_ids, target_in), target_out = datasets.encode_pairs([(human, iso)])
print(f"{human!r} -> context ids {context_ids[0]}")
print(f"decoder input  {target_in[0]} = {[TARGET.tokens[i] for i in target_in[0]]}")
print(f"target output  {target_out[0]} = {[TARGET.tokens[i] for i in target_out[0]]}")

toy = datasets.toy_dialogue()
TOY = toy["vocabulary"]
question, answer = toy["pairs"][0]
print(f"\nlecture ids: {toy['lecture_ids']}")
print(f"{question!r} -> {TOY.encode([question])[0]}")
print(f"{answer!r}: decoder input {TOY.encode([answer], start=True)[0]}, "
      f"target {TOY.encode([answer], end=True)[0]}")

# %% [markdown]
# ## 2. The building blocks (provided, from labs 3 and 4)
#
# The cells below are the answers to labs 3 and 4, read-only: the positional
# embedding (token vectors scaled by $\sqrt{d_{model}}$ plus the sinusoidal
# table), the feed-forward block, and the post-norm encoder and decoder layers
# built on `keras.layers.MultiHeadAttention`. Everything is `keras.ops`, so it
# runs on TensorFlow, JAX and PyTorch.
#
# Padding travels **explicitly**: each layer takes boolean padding masks as
# arguments (True for real tokens, passed by keyword) rather than relying on
# Keras's implicit masks, which only some backends carry along. That is why the
# encoder and decoder layers return no Keras mask (`compute_mask` gives `None`).

# %% nbgrader="locked" grade_id="provided_embedding"
def positional_encoding(length, depth):
    """The sinusoidal table `(length, depth)`, float32 (lab 3).

    PE[pos, 2i] = sin(pos / 10000^(2i / depth)), PE[pos, 2i + 1] = cos(same).
    """
    positions = np.arange(length)[:, None]  # (length, 1)
    columns = np.arange(depth)[None, :]  # (1, depth)
    angles = positions / np.power(10000.0, (columns - columns % 2) / depth)
    table = np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype("float32")  # (length, depth)


class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model), plus the sinusoidal table (lab 3).

    Args:
        vocab_size: number of token ids; id 0 is padding.
        d_model: size of each output vector.
        max_length: number of positions the sinusoidal table covers.
        mask_zero: whether `compute_mask` returns `token_ids != 0`.

    Call arguments:
        token_ids: integer tensor `(B, T)`, T <= max_length.

    Returns:
        `(B, T, d_model)`. The only weight is the token table
        `token_embedding` `(vocab_size, d_model)`.
    """

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
        self.positional_table = positional_encoding(max_length, d_model)  # a constant

    def build(self, input_shape):
        self.token_embedding.build(input_shape)

    def call(self, token_ids):
        length = ops.shape(token_ids)[1]
        token_vectors = self.token_embedding(token_ids) * math.sqrt(self.d_model)  # (B, T, d_model)
        positions = ops.convert_to_tensor(self.positional_table)[:length]  # (T, d_model)
        return token_vectors + ops.cast(positions, token_vectors.dtype)

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "d_model": self.d_model, "max_length": self.max_length,
                "mask_zero": self.mask_zero}


class FeedForward(keras.layers.Layer):
    """dropout(relu(x W1 + b1) W2 + b2), position by position (lab 4)."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        self.d_model = d_model
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.dense1 = keras.layers.Dense(dff, activation="relu", name="dense1")
        self.dense2 = keras.layers.Dense(d_model, name="dense2")
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))

    def call(self, x, training=None):
        return self.dropout(self.dense2(self.dense1(x)), training=training)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "dff": self.dff,
                "dropout_rate": self.dropout_rate}


# %% nbgrader="locked" grade_id="provided_layers"
class EncoderLayer(keras.layers.Layer):
    """Self-attention and feed-forward, each with dropout, residual and norm (lab 4).

    x = norm1(x + dropout(self_attention(x))); x = norm2(x + ffn(x)).

    Call arguments:
        x: `(B, S, d_model)`.
        padding_mask: optional bool `(B, S)`, True for real tokens; padded
            tokens are never attended to.
        training: whether dropout is active.

    Returns:
        `(B, S, d_model)` (meaningless at padded positions).
    """

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, name="self_attention")
        self.ffn = FeedForward(d_model, dff, dropout_rate=dropout_rate, name="ffn")
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")

    def build(self, input_shape):
        self.self_attention.build(input_shape, input_shape)
        self.ffn.build(input_shape)
        self.norm1.build(input_shape)
        self.norm2.build(input_shape)

    def compute_mask(self, x, previous_mask=None):
        return None  # padding travels as an explicit argument

    def call(self, x, padding_mask=None, training=None):
        attention_mask = None
        if padding_mask is not None:
            attention_mask = ops.expand_dims(padding_mask, 1)  # (B, 1, S): keys only
        attention = self.self_attention(query=x, value=x, key=x, attention_mask=attention_mask,
                                        training=training)  # (B, S, d_model)
        x = self.norm1(x + self.dropout(attention, training=training))
        return self.norm2(x + self.ffn(x, training=training))  # (B, S, d_model)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "num_heads": self.num_heads,
                "dff": self.dff, "dropout_rate": self.dropout_rate}


class DecoderLayer(keras.layers.Layer):
    """Causal self-attention, cross-attention to the encoder, feed-forward (lab 4).

    Call arguments:
        x: the target so far, `(B, T, d_model)`.
        context: the encoder's output, `(B, S, d_model)`.
        x_padding_mask: optional bool `(B, T)`, True for real target tokens.
        context_padding_mask: optional bool `(B, S)`, True for real source tokens.
        training: whether dropout is active.

    Returns:
        `(B, T, d_model)`. The cross-attention weights of the call are kept in
        `last_attention_scores`, `(B, num_heads, T, S)`.
    """

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.last_attention_scores = None
        key_dim = d_model // num_heads
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=key_dim, name="self_attention")
        self.cross_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=key_dim, name="cross_attention")
        self.ffn = FeedForward(d_model, dff, dropout_rate=dropout_rate, name="ffn")
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm3")
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")

    def build(self, x_shape, context_shape):
        self.self_attention.build(x_shape, x_shape)
        self.cross_attention.build(x_shape, context_shape)
        self.ffn.build(x_shape)
        for norm in (self.norm1, self.norm2, self.norm3):
            norm.build(x_shape)

    def compute_mask(self, x, previous_mask=None):
        return None  # padding travels as an explicit argument

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        positions = ops.arange(ops.shape(x)[1])
        self_mask = ops.expand_dims(positions[:, None] >= positions[None, :], 0)  # (1, T, T)
        if x_padding_mask is not None:
            self_mask = ops.logical_and(self_mask, ops.expand_dims(x_padding_mask, 1))
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = ops.expand_dims(context_padding_mask, 1)  # (B, 1, S)
        attention = self.self_attention(query=x, value=x, key=x, attention_mask=self_mask,
                                        training=training)  # (B, T, d_model)
        x = self.norm1(x + self.dropout(attention, training=training))
        attention, scores = self.cross_attention(
            query=x, value=context, key=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)  # (B, T, d_model)
        self.last_attention_scores = scores  # (B, num_heads, T, S)
        x = self.norm2(x + self.dropout(attention, training=training))
        return self.norm3(x + self.ffn(x, training=training))  # (B, T, d_model)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "num_heads": self.num_heads,
                "dff": self.dff, "dropout_rate": self.dropout_rate}


# %% [markdown]
# ## 3. The encoder
#
# The encoder turns source ids into one contextual vector per token: embed the
# ids (`PositionalEmbedding`), apply dropout, then run `num_layers` encoder
# layers one after the other, each reading the previous one's output:
#
# $$x^{(0)} = \operatorname{dropout}(\operatorname{embed}(\text{ids})), \qquad
#   x^{(\ell)} = \operatorname{EncoderLayer}_\ell\big(x^{(\ell - 1)}\big).$$
#
# Every layer gets the padding mask `token_ids != 0` as `padding_mask=...` (by
# keyword), so no token ever attends to padding. The layers are *separate*
# objects with their own weights: a list comprehension that calls `EncoderLayer`
# `num_layers` times, not one layer used twice.
#
# **Training mode.** `call(token_ids, training=None)` passes `training` on, to
# `self.dropout` and to every layer (by keyword; a layer called without it gets
# it from Keras, which hands the outer call's `training` down). With
# `training=True`, dropout acts right after the embedding (before the first
# layer; nothing comes after the last layer) and inside every layer; with
# `training=False`, or left out, it acts nowhere and the output is the same at
# every call.
#
# **The config.** Store each constructor argument under its own name
# (`self.num_layers`, ...) and return all seven from `get_config()`, added to
# `super().get_config()`, so that `Encoder.from_config(encoder.get_config())`
# rebuilds the same encoder.
#
# Keep these attribute names: `pos_embedding`, `dropout` (a `keras.layers.Dropout`)
# and `enc_layers` (a list). The trained weights that come with this lab are
# stored by them, and loading fails if they differ.

# %% nbgrader="solution" grade_id="Encoder"
class Encoder(keras.layers.Layer):
    """The Transformer's encoder: positional embedding and a stack of layers.

    Args:
        num_layers: number of `EncoderLayer`s, a positive integer.
        d_model: size of the token vectors.
        num_heads: attention heads per layer; must divide `d_model`.
        dff: hidden units of each feed-forward block.
        vocab_size: number of source token ids (id 0 is padding).
        max_length: longest sequence the positional table covers.
        dropout_rate: dropout after the embedding and inside each layer.
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        token_ids: integer `(B, S)`, padded with 0.
        training: passed on to `self.dropout` and to every layer. True: dropout
            after the embedding and inside every layer; False or None
            (default): no dropout anywhere.

    Returns:
        `(B, S, d_model)`: one vector per source token (the last layer's output).

    `get_config()` returns the seven constructor arguments under their own
    names (with `super().get_config()`), so that `from_config` rebuilds it.

    Example:

    >>> encoder = Encoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=20)
    >>> tuple(encoder(np.array([[5, 3, 9, 0]])).shape)
    (1, 4, 8)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.1.
    """

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        ### BEGIN SOLUTION
        self.num_layers, self.d_model, self.num_heads = num_layers, d_model, num_heads
        self.dff, self.vocab_size = dff, vocab_size
        self.max_length, self.dropout_rate = max_length, dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length=max_length,
                                                 name="pos_embedding")
        self.dropout = keras.layers.Dropout(rate=dropout_rate, name="dropout")
        self.enc_layers = [EncoderLayer(d_model, num_heads, dff, dropout_rate=dropout_rate,
                                        name=f"encoder_layer_{index}")
                           for index in range(num_layers)]
        ### END SOLUTION

    def call(self, token_ids, training=None):
        ### BEGIN SOLUTION
        padding_mask = ops.not_equal(token_ids, 0)  # (B, S), True for real tokens
        x = self.pos_embedding(token_ids)  # (B, S, d_model)
        x = self.dropout(x, training=training)
        for layer in self.enc_layers:
            x = layer(x, padding_mask=padding_mask, training=training)  # (B, S, d_model)
        return x
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"num_layers": self.num_layers, "d_model": self.d_model,
                       "num_heads": self.num_heads, "dff": self.dff,
                       "vocab_size": self.vocab_size, "max_length": self.max_length,
                       "dropout_rate": self.dropout_rate})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_Encoder"
# Visible check: structure, shape, weights, padding, the embedding, training mode and
# the config.
def silence(attention_layers, feed_forward):
    """Zero what the sublayers add to the residual stream: each layer then only normalises."""
    for attention in attention_layers:
        weights = attention.get_weights()  # the value and output projections become 0
        attention.set_weights(weights[:4] + [np.zeros_like(w) for w in weights[4:]])
    feed_forward.dense2.set_weights([np.zeros_like(w) for w in feed_forward.dense2.get_weights()])


def normalise(x):
    """LayerNormalization(epsilon=1e-6) at initialisation, over the last axis."""
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-6)


encoder = Encoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=SOURCE.size)
source_ids = SOURCE.encode(["3 March 2021", "3.3.2021"], length=14)  # the second is padded
real = source_ids != 0
encoded = checks.check_shape(encoder(source_ids, training=False), (2, 14, 8),
                             "Encoder(num_layers=2, d_model=8, ...) on ids (2, 14)")
checks.check_true(isinstance(getattr(encoder, "pos_embedding", None), PositionalEmbedding)
                  and isinstance(getattr(encoder, "dropout", None), keras.layers.Dropout),
                  "pos_embedding (PositionalEmbedding) and dropout (Dropout)",
                  "a sublayer is missing or of another kind")
layers = list(getattr(encoder, "enc_layers", []))
checks.check_true(len(layers) == 2 and all(isinstance(layer, EncoderLayer) for layer in layers)
                  and layers[0] is not layers[1],
                  "enc_layers: a list of 2 separate EncoderLayers",
                  f"found {len(layers)} item(s)",
                  hint="[EncoderLayer(...) for _ in range(num_layers)].")
one_layer = EncoderLayer(d_model=8, num_heads=2, dff=16)
one_layer(np.zeros((1, 3, 8), "float32"))
expected_count = SOURCE.size * 8 + 2 * one_layer.count_params()
checks.check_true(encoder.count_params() == expected_count,
                  f"{expected_count} weights: the embedding table and two layers",
                  f"found {encoder.count_params()}",
                  hint="no other layer with weights: the layers are post-norm, so nothing "
                       "(no final LayerNormalization) comes after the last one.")
checks.check_close(encoder(source_ids, training=False), encoded,
                   "Encoder, training=False: the same output at every call (no dropout)",
                   hint="pass training=training to self.dropout: with training=False it "
                        "must not drop anything.")
checks.check_close(encoder(source_ids), encoded,
                   "Encoder, training left out: the output of training=False",
                   hint="keep call(self, token_ids, training=None): None means inference.")
longer = np.pad(source_ids, ((0, 0), (0, 4)))  # four more padded columns
checks.check_close(checks.to_numpy(encoder(longer, training=False))[:, :14][real], encoded[real],
                   "Encoder: more padding changes no output at a real token",
                   hint="pass padding_mask=ops.not_equal(token_ids, 0) to every layer, by keyword.")

# The embedding: with its layer silenced (attention and feed-forward add 0), the
# encoder returns the provided embedding of the ids, normalised by norm1 and norm2.
quiet = Encoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=SOURCE.size)
quiet(source_ids, training=False)  # builds the weights
silence([quiet.enc_layers[0].self_attention], quiet.enc_layers[0].ffn)
embedded = checks.to_numpy(quiet.pos_embedding(source_ids))  # the provided embedding
checks.check_close(checks.to_numpy(quiet(source_ids, training=False))[real],
                   normalise(normalise(embedded))[real], atol=1e-4,
                   what="Encoder with its layer silenced: the normalised embedding",
                   hint="embed with x = self.pos_embedding(token_ids): the provided layer "
                        "scales the token vectors by sqrt(d_model) and adds the sinusoids.")

# Training mode, with dropout_rate=0.5: the dropout after the embedding and the
# layers' own dropouts are switched off (rate 0) in turn, to see where each acts.
lively = Encoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=SOURCE.size,
                 dropout_rate=0.5)
calm = checks.to_numpy(lively(source_ids, training=False))


def set_dropout_rates(after_embedding, in_layers):
    lively.dropout.rate = after_embedding
    for layer in lively.enc_layers:
        layer.dropout.rate = layer.ffn.dropout.rate = in_layers


set_dropout_rates(0.5, 0.0)
checks.check_true(not np.allclose(checks.to_numpy(lively(source_ids, training=True))[real],
                                  calm[real]),
                  "training=True, only the dropout after the embedding on: the output changes",
                  "it is the training=False output: nothing was dropped",
                  hint="apply self.dropout, with training passed on, to the embedded ids.")
set_dropout_rates(0.0, 0.5)
checks.check_true(not np.allclose(checks.to_numpy(lively(source_ids, training=True))[real],
                                  calm[real]),
                  "training=True, only the layers' own dropout on: the output changes",
                  "it is the training=False output: the layers did not train",
                  hint="call each layer with training=training (or without it: Keras passes "
                       "the outer call's training down), never training=False.")
set_dropout_rates(0.5, 0.5)
trained = checks.to_numpy(lively(source_ids, training=True))[real]  # (real tokens, 8)
checks.check_close(np.stack([trained.mean(axis=-1), trained.var(axis=-1)], axis=-1),
                   np.tile([0.0, 1.0], (len(trained), 1)), atol=1e-3,
                   what="training=True: each output is the last layer's, normalised "
                        "(mean 0, variance 1 per token at initialisation)",
                   hint="dropout goes after the embedding, before the layers; nothing comes "
                        "after the last layer.")

checks.check_config(Encoder, encoder, dict(
    num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=SOURCE.size, max_length=2048,
    dropout_rate=0.1),
                    hint="config.update(num_layers=self.num_layers, d_model=self.d_model, ...) "
                         "after config = super().get_config().")

# %% nbgrader="tests" grade_id="test_Encoder"

# %% nbgrader="tests" grade_id="test_Encoder__training"

# %% nbgrader="tests" grade_id="test_Encoder__config"

# %% [markdown]
# ## 4. The decoder
#
# The decoder has the same shape: embed the target ids, apply dropout, and run
# `num_layers` decoder layers. Each layer needs two masks, both by keyword: the
# target's own padding (`x_padding_mask=token_ids != 0`; the layer adds the
# look-ahead mask itself) and the source's padding (`context_padding_mask`, which
# the decoder receives from its caller: it sees only the encoder's vectors, not
# the source ids).
#
# After the loop, keep the cross-attention weights of the **last** layer in
# `self.last_attention_scores`, `(B, num_heads, T, S)`: section 11 draws them.
#
# As in the encoder, `training` goes on to `self.dropout` and to every layer:
# with `training=True` dropout acts right after the embedding and inside every
# layer (nothing after the last one); with `training=False`, or left out,
# nowhere. And `get_config()` returns the seven constructor arguments under their
# own names, added to `super().get_config()`, so that
# `Decoder.from_config(decoder.get_config())` rebuilds the same decoder.
#
# Attribute names: `pos_embedding`, `dropout` (a `keras.layers.Dropout`),
# `dec_layers` (a list).

# %% nbgrader="solution" grade_id="Decoder"
class Decoder(keras.layers.Layer):
    """The Transformer's decoder: positional embedding and a stack of layers.

    Args:
        num_layers: number of `DecoderLayer`s, a positive integer.
        d_model: size of the token vectors.
        num_heads: attention heads per layer; must divide `d_model`.
        dff: hidden units of each feed-forward block.
        vocab_size: number of target token ids (id 0 is padding).
        max_length: longest sequence the positional table covers.
        dropout_rate: dropout after the embedding and inside each layer.
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        token_ids: integer `(B, T)`, the target so far (start id first), padded with 0.
        context: the encoder's output, `(B, S, d_model)`.
        context_padding_mask: optional bool `(B, S)`, True for real source tokens.
        training: passed on to `self.dropout` and to every layer. True: dropout
            after the embedding and inside every layer; False or None
            (default): no dropout anywhere.

    Returns:
        `(B, T, d_model)`. The last layer's cross-attention weights stay in
        `last_attention_scores`, `(B, num_heads, T, S)`.

    `get_config()` returns the seven constructor arguments under their own
    names (with `super().get_config()`), so that `from_config` rebuilds it.

    Example:

    >>> decoder = Decoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=14)
    >>> tuple(decoder(np.array([[1, 5, 3]]), np.zeros((1, 4, 8), "float32")).shape)
    (1, 3, 8)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.1.
    """

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, vocab_size=vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        ### BEGIN SOLUTION
        self.num_layers, self.d_model, self.num_heads = num_layers, d_model, num_heads
        self.dff, self.vocab_size = dff, vocab_size
        self.max_length, self.dropout_rate = max_length, dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length=max_length,
                                                 name="pos_embedding")
        self.dropout = keras.layers.Dropout(rate=dropout_rate, name="dropout")
        self.dec_layers = [DecoderLayer(d_model, num_heads, dff, dropout_rate=dropout_rate,
                                        name=f"decoder_layer_{index}")
                           for index in range(num_layers)]
        ### END SOLUTION

    def call(self, token_ids, context, context_padding_mask=None, training=None):
        ### BEGIN SOLUTION
        padding_mask = ops.not_equal(token_ids, 0)  # (B, T)
        x = self.pos_embedding(token_ids)  # (B, T, d_model)
        x = self.dropout(x, training=training)
        for layer in self.dec_layers:
            x = layer(x, context, x_padding_mask=padding_mask,
                      context_padding_mask=context_padding_mask, training=training)
        self.last_attention_scores = self.dec_layers[-1].last_attention_scores  # (B, h, T, S)
        return x
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"num_layers": self.num_layers, "d_model": self.d_model,
                       "num_heads": self.num_heads, "dff": self.dff,
                       "vocab_size": self.vocab_size, "max_length": self.max_length,
                       "dropout_rate": self.dropout_rate})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_Decoder"
# Visible check: shape, the attention weights, the source padding, the look-ahead,
# training mode and the config.
decoder = Decoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=TARGET.size)
target_ids = TARGET.encode(["2021-03-03", "2021"], length=6, start=True)  # (2, 6)
real = target_ids != 0
context = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
context_mask = np.array([[True] * 5, [True, True, True, False, False]])
try:
    decoded = decoder(target_ids, context, context_padding_mask=context_mask, training=False)
except NotImplementedError:
    raise
except Exception as error:
    raise AssertionError(
        f"Decoder(num_layers=2, d_model=8, ...) on ids (2, 6) raised {type(error).__name__}: "
        f"{str(error)[:300]}\nHint: give each layer its masks by keyword (x_padding_mask=..., "
        "context_padding_mask=...): the third positional argument of DecoderLayer.call is "
        "x_padding_mask.") from error
decoded = checks.check_shape(decoded, (2, 6, 8),
                             "Decoder(num_layers=2, d_model=8, ...) on ids (2, 6)")
layers = list(getattr(decoder, "dec_layers", []))
checks.check_true(len(layers) == 2 and all(isinstance(layer, DecoderLayer) for layer in layers)
                  and layers[0] is not layers[1],
                  "dec_layers: a list of 2 separate DecoderLayers", f"found {len(layers)} item(s)",
                  hint="[DecoderLayer(...) for _ in range(num_layers)].")
checks.check_true(decoder.last_attention_scores is not None, "last_attention_scores is set",
                  "it is still None",
                  hint="after the loop: self.last_attention_scores = "
                       "self.dec_layers[-1].last_attention_scores.")
scores = checks.check_shape(decoder.last_attention_scores, (2, 2, 6, 5),
                            "last_attention_scores (B, num_heads, T, S)",
                            hint="after the loop: self.last_attention_scores = "
                                 "self.dec_layers[-1].last_attention_scores.")
checks.check_close(decoder(target_ids, context, context_padding_mask=context_mask,
                           training=False), decoded,
                   "Decoder, training=False: the same output at every call (no dropout)",
                   hint="pass training=training to self.dropout: with training=False it "
                        "must not drop anything.")
checks.check_close(decoder(target_ids, context, context_padding_mask=context_mask), decoded,
                   "Decoder, training left out: the output of training=False",
                   hint="keep training=None as the default of call: None means inference.")
checks.check_close(scores, checks.to_numpy(decoder.dec_layers[-1].last_attention_scores),
                   "last_attention_scores: the LAST layer's cross-attention weights",
                   hint="after the loop: self.last_attention_scores = "
                        "self.dec_layers[-1].last_attention_scores.")
checks.check_close(scores[1, :, :, 3:], np.zeros((2, 6, 2)),
                   "no attention to the padded source tokens of sentence 2",
                   hint="pass context_padding_mask to every layer, by keyword.")
changed = target_ids.copy()
changed[0, 3:] = TARGET.ids("999")  # new tokens after position 2 of sentence 1
checks.check_close(checks.to_numpy(decoder(changed, context, context_padding_mask=context_mask,
                                           training=False))[0, :3],
                   decoded[0, :3], "Decoder: later tokens never change earlier outputs",
                   hint="give every layer x_padding_mask=ops.not_equal(token_ids, 0) by "
                        "keyword; the provided DecoderLayer adds the look-ahead mask itself.")
# The embedding: with its layer silenced, the decoder returns the provided embedding
# of the ids, normalised three times (norm1, norm2, norm3).
quiet = Decoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=TARGET.size)
quiet(target_ids, context, training=False)  # builds the weights
quiet_layer = quiet.dec_layers[0]
silence([quiet_layer.self_attention, quiet_layer.cross_attention], quiet_layer.ffn)
embedded = checks.to_numpy(quiet.pos_embedding(target_ids))  # the provided embedding
checks.check_close(checks.to_numpy(quiet(target_ids, context, training=False))[real],
                   normalise(normalise(normalise(embedded)))[real], atol=1e-4,
                   what="Decoder with its layer silenced: the normalised embedding",
                   hint="embed with x = self.pos_embedding(token_ids): the provided layer "
                        "scales the token vectors by sqrt(d_model) and adds the sinusoids.")

# Training mode, with dropout_rate=0.5: the dropout after the embedding and the
# layers' own dropouts are switched off (rate 0) in turn, to see where each acts.
lively = Decoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=TARGET.size,
                 dropout_rate=0.5)
calm = checks.to_numpy(lively(target_ids, context, training=False))


def set_dropout_rates(after_embedding, in_layers):
    lively.dropout.rate = after_embedding
    for layer in lively.dec_layers:
        layer.dropout.rate = layer.ffn.dropout.rate = in_layers


set_dropout_rates(0.5, 0.0)
checks.check_true(not np.allclose(checks.to_numpy(lively(target_ids, context,
                                                         training=True))[real], calm[real]),
                  "training=True, only the dropout after the embedding on: the output changes",
                  "it is the training=False output: nothing was dropped",
                  hint="apply self.dropout, with training passed on, to the embedded ids.")
set_dropout_rates(0.0, 0.5)
checks.check_true(not np.allclose(checks.to_numpy(lively(target_ids, context,
                                                         training=True))[real], calm[real]),
                  "training=True, only the layers' own dropout on: the output changes",
                  "it is the training=False output: the layers did not train",
                  hint="call each layer with training=training (or without it: Keras passes "
                       "the outer call's training down), never training=False.")
set_dropout_rates(0.5, 0.5)
trained = checks.to_numpy(lively(target_ids, context, training=True))[real]  # (real, 8)
checks.check_close(np.stack([trained.mean(axis=-1), trained.var(axis=-1)], axis=-1),
                   np.tile([0.0, 1.0], (len(trained), 1)), atol=1e-3,
                   what="training=True: each output is the last layer's, normalised "
                        "(mean 0, variance 1 per token at initialisation)",
                   hint="dropout goes after the embedding, before the layers; nothing comes "
                        "after the last layer.")

checks.check_config(Decoder, decoder, dict(
    num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=TARGET.size, max_length=2048,
    dropout_rate=0.1),
                    hint="config.update(num_layers=self.num_layers, d_model=self.d_model, ...) "
                         "after config = super().get_config().")

# %% nbgrader="tests" grade_id="test_Decoder"

# %% nbgrader="tests" grade_id="test_Decoder__training"

# %% nbgrader="tests" grade_id="test_Decoder__config"

# %% [markdown]
# ## 5. The Transformer
#
# The whole model is a `keras.Model` with three parts: `encoder` (an `Encoder` of
# the source vocabulary), `decoder` (a `Decoder` of the target vocabulary) and
# `final_layer`, a `Dense` layer with `target_vocab_size` units that turns each
# decoder vector into one score (logit) per target token, without a softmax. Its
# `call` takes one argument, the pair `(context_ids, target_ids)`, so that
# `model.fit` can feed it:
#
# $$\text{logits} = \operatorname{final}\Big(\operatorname{Decoder}\big(\text{target},\;
#   \operatorname{Encoder}(\text{context}),\; \text{context} \ne 0\big)\Big).$$
#
# The context's padding mask is the Transformer's job: only it sees both the
# source ids and the decoder. `training` reaches both parts: pass it on by
# keyword, or leave it out and Keras hands it down; never fix it to `True` or
# `False` (`model.fit` calls the model with `training=True`, `predict` and the
# decoding functions with `training=False`). `get_config()` returns the eight
# constructor arguments under their own names, added to `super().get_config()`,
# so that `Transformer.from_config(model.get_config())` rebuilds the same model
# (a `keras.Model` without its own `get_config` cannot give one).
#
# Keep the attribute names `encoder`, `decoder` and `final_layer`.

# %% nbgrader="solution" grade_id="Transformer"
class Transformer(keras.Model):
    """The encoder-decoder Transformer, from ids to logits.

    Args:
        num_layers: encoder and decoder layers (each).
        d_model: size of the token vectors.
        num_heads: attention heads per layer; must divide `d_model`.
        dff: hidden units of each feed-forward block.
        input_vocab_size: number of source ids (id 0 is padding).
        target_vocab_size: number of target ids (id 0 is padding).
        max_length: longest sequence the positional tables cover.
        dropout_rate: dropout rate of every dropout layer.
        **kwargs: other `keras.Model` arguments (`name`).

    Call arguments:
        inputs: the pair `(context_ids (B, S), target_ids (B, T))`.
        training: handed on to the encoder and the decoder. True: dropout
            acts in both; False or None (default): nowhere.

    Returns:
        Logits `(B, T, target_vocab_size)`: at each target position, a score for
        every possible next token.

    `get_config()` returns the eight constructor arguments under their own
    names (with `super().get_config()`), so that `from_config` rebuilds it.

    Example:

    >>> model = Transformer(1, 6, 2, 12, input_vocab_size=11, target_vocab_size=11)
    >>> tuple(model((np.array([[5, 8, 9]]), np.array([[1, 6, 3]]))).shape)
    (1, 3, 11)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.
    """

    def __init__(self, num_layers, d_model, num_heads, dff, input_vocab_size,
                 target_vocab_size, max_length=2048, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                                 dff=dff, input_vocab_size=input_vocab_size,
                                 target_vocab_size=target_vocab_size, max_length=max_length,
                                 dropout_rate=dropout_rate)
        ### BEGIN SOLUTION
        self.num_layers, self.d_model, self.num_heads = num_layers, d_model, num_heads
        self.dff, self.max_length, self.dropout_rate = dff, max_length, dropout_rate
        self.input_vocab_size = input_vocab_size
        self.target_vocab_size = target_vocab_size
        self.encoder = Encoder(num_layers, d_model, num_heads, dff, vocab_size=input_vocab_size,
                               max_length=max_length, dropout_rate=dropout_rate, name="encoder")
        self.decoder = Decoder(num_layers, d_model, num_heads, dff, vocab_size=target_vocab_size,
                               max_length=max_length, dropout_rate=dropout_rate, name="decoder")
        self.final_layer = keras.layers.Dense(target_vocab_size, name="final_layer")
        ### END SOLUTION

    def call(self, inputs, training=None):
        ### BEGIN SOLUTION
        context_ids, target_ids = inputs  # (B, S) and (B, T)
        context = self.encoder(context_ids, training=training)  # (B, S, d_model)
        context_padding_mask = ops.not_equal(context_ids, 0)  # (B, S), True for real tokens
        x = self.decoder(target_ids, context, context_padding_mask=context_padding_mask,
                         training=training)  # (B, T, d_model) for the T target positions
        return self.final_layer(x)  # (B, T, target_vocab_size)
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"num_layers": self.num_layers, "d_model": self.d_model,
                       "num_heads": self.num_heads, "dff": self.dff,
                       "input_vocab_size": self.input_vocab_size,
                       "target_vocab_size": self.target_vocab_size,
                       "max_length": self.max_length, "dropout_rate": self.dropout_rate})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_Transformer"
# Visible check: the lecture's toy model (d_model 6, an output layer of 11). It runs
# your Encoder and Decoder (make their checks pass first), but checks only what the
# Transformer does with them: what it gives each part, and what it returns.
toy_model = Transformer(num_layers=1, d_model=6, num_heads=2, dff=12,
                        input_vocab_size=TOY.size, target_vocab_size=TOY.size)
question_ids = TOY.encode(["how are you"])  # [[5, 8, 9]]
decoder_input = TOY.encode(["i am"], start=True)  # [[1, 6, 3]]: <SOS> i am
try:
    logits = toy_model((question_ids, decoder_input), training=False)
except NotImplementedError:
    raise
except Exception as error:
    raise AssertionError(
        f"Transformer on 'how are you' and '<SOS> i am' raised {type(error).__name__}: "
        f"{str(error)[:300]}\nHint: call unpacks inputs = (context_ids, target_ids), encodes "
        "context_ids and gives the decoder target_ids and the encoder's output (B, S, "
        "d_model) as its context.") from error
logits = checks.check_shape(logits, (1, 3, 11),
                            "Transformer: logits for 'how are you' and '<SOS> i am'",
                            hint="call unpacks inputs = (context_ids, target_ids).")
checks.check_true(isinstance(toy_model, keras.Model), "Transformer is a keras.Model")
parts = [getattr(toy_model, name, None) for name in ("encoder", "decoder", "final_layer")]
checks.check_true(isinstance(parts[0], Encoder) and isinstance(parts[1], Decoder)
                  and isinstance(parts[2], keras.layers.Dense) and parts[2].units == 11,
                  "encoder (Encoder), decoder (Decoder), final_layer (Dense, 11 units)",
                  "a part is missing or of another kind")
checks.check_true(toy_model.count_params() == parts[0].count_params()
                  + parts[1].count_params() + 6 * 11 + 11,
                  "weights: encoder + decoder + final_layer (6 x 11 + 11)",
                  f"found {toy_model.count_params()}")


def record_calls(part):
    """Make `part` (a layer) note the arguments of each of its calls, by name."""
    calls, original = [], part.call
    signature = inspect.signature(original)

    def recording_call(*args, **kwargs):
        output = original(*args, **kwargs)
        calls.append({**signature.bind(*args, **kwargs).arguments, "output": output})
        return output

    part.call = recording_call
    return calls


wired = Transformer(num_layers=1, d_model=6, num_heads=2, dff=12, input_vocab_size=TOY.size,
                    target_vocab_size=TOY.size, dropout_rate=0.5)
encoder_calls, decoder_calls = record_calls(wired.encoder), record_calls(wired.decoder)
padded_question = np.pad(question_ids, ((0, 0), (0, 2)))  # [[5, 8, 9, 0, 0]]
logits = checks.to_numpy(wired((padded_question, decoder_input), training=False))
encoded, decoded = encoder_calls[-1], decoder_calls[-1]
checks.check_close(encoded["token_ids"], padded_question, "the encoder reads the context ids",
                   hint="inputs is the pair (context_ids, target_ids): encode context_ids.")
checks.check_close(decoded["token_ids"], decoder_input, "the decoder reads the target ids",
                   hint="inputs is the pair (context_ids, target_ids): decode target_ids.")
checks.check_close(decoded["context"], checks.to_numpy(encoded["output"]),
                   "the decoder's context is the encoder's output",
                   hint="self.decoder(target_ids, self.encoder(context_ids), ...).")
given_mask = decoded.get("context_padding_mask")
checks.check_close(np.zeros(0) if given_mask is None else checks.to_numpy(given_mask).astype(float),
                   padded_question != 0,
                   "the decoder gets context_padding_mask = context_ids != 0 ([[1 1 1 0 0]])",
                   hint="give the decoder context_padding_mask=ops.not_equal(context_ids, 0), "
                        "by keyword: True for the real source tokens.")
checks.check_close(logits, checks.to_numpy(wired.final_layer(decoded["output"])),
                   "logits = final_layer(the decoder's output)",
                   hint="return self.final_layer(decoder output) as it is: no softmax.")
checks.check_true(not np.allclose(logits.sum(axis=-1), 1.0, atol=1e-3),
                  "logits, not probabilities (no softmax)",
                  "every row of the output sums to 1",
                  hint="final_layer = keras.layers.Dense(target_vocab_size), no activation: "
                       "masked_loss and the decoding functions take logits.")
for training, wanted in [(True, True), (False, False), (None, False)]:
    if training is None:
        wired((padded_question, decoder_input))  # training left out: inference
    else:
        wired((padded_question, decoder_input), training=training)
    got = {"encoder": bool(encoder_calls[-1].get("training")),
           "decoder": bool(decoder_calls[-1].get("training"))}
    called = "without training" if training is None else f"with training={training}"
    checks.check_true(got == {"encoder": wanted, "decoder": wanted},
                      f"Transformer called {called}: the encoder and the decoder run with "
                      f"training={wanted}", f"they got {got}",
                      hint="pass training=training to both (or leave it out: Keras hands it "
                           "down); never a fixed True or False.")

checks.check_config(Transformer, toy_model, dict(
    num_layers=1, d_model=6, num_heads=2, dff=12, input_vocab_size=TOY.size,
    target_vocab_size=TOY.size, max_length=2048, dropout_rate=0.1),
                    hint="config.update(num_layers=self.num_layers, d_model=self.d_model, ...) "
                         "after config = super().get_config().")

# %% nbgrader="tests" grade_id="test_Transformer"

# %% nbgrader="tests" grade_id="test_Transformer__training"

# %% nbgrader="tests" grade_id="test_Transformer__config"

# %% [markdown]
# How big is the date translator? Embedding tables grow with the vocabularies,
# every layer adds its attention and feed-forward weights, and the positional
# tables add nothing (they are constants).

# %% nbgrader="locked" grade_id="demo_Transformer" grading="skip"
HYPERPARAMETERS = dict(num_layers=2, d_model=64, num_heads=4, dff=128, max_length=64,
                       dropout_rate=0.1)


def build_date_model():
    """The date translator of this lab, built on one batch so that it has weights."""
    model = Transformer(**HYPERPARAMETERS, input_vocab_size=SOURCE.size,
                        target_vocab_size=TARGET.size)
    model((train_context[:1], train_target_in[:1]))
    return model


def load_shipped_weights(model, name):
    """Load the weights `name` that come with labkit; returns their metadata."""
    weights_path, metadata = datasets.pretrained_checkpoint(name)
    try:
        model.load_weights(weights_path)
    except Exception as error:  # a model whose parts are named differently
        raise RuntimeError(
            f"The trained weights {weights_path.name} do not fit your Transformer: keep the "
            "attribute names encoder, decoder, final_layer, pos_embedding, dropout, "
            "enc_layers and dec_layers, or set TRAIN = True to train your own.") from error
    return metadata


date_model = build_date_model()
for name in ("encoder", "decoder", "final_layer"):
    print(f"{name:>12}: {getattr(date_model, name).count_params():>7} weights")
print(f"{'total':>12}: {date_model.count_params():>7} weights")

# %% [markdown]
# ## 6. A loss that ignores padding
#
# The model predicts a token at *every* position, padded ones included. Those
# predictions must not count: the loss is the cross-entropy averaged over the
# real tokens only,
#
# $$\mathcal{L} = \frac{\sum_{b,t} m_{bt}\,\big(-\log p_{bt}(y_{bt})\big)}{\sum_{b,t} m_{bt}},
#   \qquad m_{bt} = [\,y_{bt} \ne 0\,],$$
#
# where $p_{bt}$ is the softmax of the logits `y_pred[b, t]`. Averaging over all
# $B \times T$ positions instead would reward the model for predicting padding
# and make short sentences weigh less. `keras.losses.sparse_categorical_crossentropy`
# with `from_logits=True` gives the per-token terms.

# %% nbgrader="solution" grade_id="masked_loss"
def masked_loss(y_true, y_pred):
    """Sparse cross-entropy from logits, averaged over the real (non-0) tokens.

    Args:
        y_true: integer `(B, T)`, the target ids, 0 for padding.
        y_pred: float `(B, T, V)`, logits.

    Returns:
        A scalar.
    """
    ### BEGIN SOLUTION
    per_token = keras.losses.sparse_categorical_crossentropy(
        y_true, y_pred, from_logits=True)  # (B, T)
    mask = ops.cast(ops.not_equal(y_true, 0), per_token.dtype)  # 1 for real tokens
    return ops.sum(per_token * mask) / ops.maximum(ops.sum(mask), 1.0)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_masked_loss"
# Visible check: uniform logits over V = 4 ids cost log(4) = 1.3863 per real token.
y_true = np.array([[3, 0]])
y_pred = np.zeros((1, 2, 4), "float32")
y_pred[0, 1] = [9.0, -9.0, 0.0, 0.0]  # anything at the padded position
checks.check_close(masked_loss(y_true, y_pred), np.log(4.0),
                   "masked_loss: one real token with uniform logits",
                   hint="the padded position must not count: multiply by the mask y_true != 0 "
                        "and divide by the number of real tokens.")
y_pred[0, 0] = [0.0, 0.0, 0.0, np.log(7.0)]  # the right id gets probability 7 / 10
checks.check_close(masked_loss(y_true, y_pred), -np.log(0.7), "masked_loss: probability 0.7",
                   hint="y_pred holds logits: give them as they are to the cross-entropy, "
                        "with from_logits=True (no softmax of your own).")
# Two sentences of 1 and 3 real tokens: the average is over the 4 real tokens of the
# batch, (-log 0.7 + 3 log 4) / 4 = 1.1289, not over the sentences (0.8715).
y_true = np.array([[3, 0, 0], [1, 2, 3]])
y_pred = np.zeros((2, 3, 4), "float32")  # uniform: log(4) per token
y_pred[0, 0] = [0.0, 0.0, 0.0, np.log(7.0)]
_ = checks.check_close(masked_loss(y_true, y_pred), (-np.log(0.7) + 3 * np.log(4.0)) / 4,
                       "masked_loss: two sentences, 1 and 3 real tokens",
                       hint="sum the losses of all the real tokens of the batch and divide by "
                            "their number; do not average sentence by sentence.")

# %% nbgrader="tests" grade_id="test_masked_loss"

# %% [markdown]
# The token accuracy follows the same rule: the fraction of *real* tokens whose
# highest logit is the right id. Counting padding would inflate it, since a
# model learns quickly that padding follows the end token.

# %% nbgrader="solution" grade_id="masked_accuracy"
def masked_accuracy(y_true, y_pred):
    """Fraction of the real (non-0) tokens where argmax(y_pred) equals y_true.

    Args:
        y_true: integer `(B, T)`, 0 for padding.
        y_pred: float `(B, T, V)`, logits (or probabilities).

    Returns:
        A scalar in [0, 1].
    """
    ### BEGIN SOLUTION
    predicted = ops.argmax(y_pred, axis=-1)  # (B, T)
    y_true = ops.cast(y_true, predicted.dtype)
    real = ops.not_equal(y_true, 0)
    correct = ops.logical_and(ops.equal(predicted, y_true), real)
    return ops.sum(ops.cast(correct, "float32")) / ops.maximum(
        ops.sum(ops.cast(real, "float32")), 1.0)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_masked_accuracy"
# Visible check: no padding first (3 of 4 right), then two real tokens, one right,
# where the padded positions would match.
y_true = np.array([[1, 2, 3, 1]])
y_pred = np.eye(4, dtype="float32")[[[1, 2, 3, 0]]]  # argmax: 1, 2, 3, 0
checks.check_close(masked_accuracy(y_true, y_pred), 0.75, "masked_accuracy: 3 of 4 tokens",
                   hint="compare y_true with the argmax over the LAST axis (the vocabulary): "
                        "ops.argmax(y_pred, axis=-1).")
y_true = np.array([[1, 2, 0, 0]])
y_pred = np.eye(4, dtype="float32")[[[1, 3, 0, 0]]]  # argmax: 1, 3, 0, 0
checks.check_close(masked_accuracy(y_true, y_pred), 0.5, "masked_accuracy: 1 of 2 real tokens",
                   hint="count only the positions where y_true != 0, and divide by their number.")
# Two sentences: 1 of 1 right, then 1 of 4 right: 2 of the 5 real tokens (0.4), not the
# average of the sentences' accuracies (0.625).
y_true = np.array([[1, 0, 0, 0], [1, 2, 3, 1]])
y_pred = np.eye(4, dtype="float32")[[[1, 0, 0, 0], [1, 3, 1, 2]]]
_ = checks.check_close(masked_accuracy(y_true, y_pred), 0.4,
                       "masked_accuracy: two sentences, 2 of 5 real tokens right",
                       hint="count the hits over the whole batch and divide by the number of real "
                            "tokens; do not average sentence by sentence.")

# %% nbgrader="tests" grade_id="test_masked_accuracy"

# %% [markdown]
# ## 7. Training
#
# **A smoke test first.** Before spending minutes on the dates, check that the
# pieces fit on the lecture's dialogue: two pairs and the lecture's tiny model
# (d_model 6, an output layer of 11 tokens). With `TRAIN = True` your model learns
# the two pairs by heart in 150 steps (a model that cannot has a bug); otherwise
# it loads weights trained that way. Either way, on the two pairs the masked loss
# should be near 0 and the masked accuracy 1.

# %% nbgrader="locked" grade_id="smoke_test" grading="skip"
questions = [question for question, _ in toy["pairs"]]
answers = [answer for _, answer in toy["pairs"]]
toy_context = TOY.encode(questions)  # (2, 3)
toy_target_in = TOY.encode(answers, start=True)  # (2, 4): <SOS> then the answer
toy_target_out = TOY.encode(answers, end=True)  # (2, 4): the answer then <EOS>
keras.utils.set_random_seed(0)
toy_model = Transformer(num_layers=1, d_model=6, num_heads=2, dff=12,
                        input_vocab_size=TOY.size, target_vocab_size=TOY.size, dropout_rate=0.0)
toy_model((toy_context, toy_target_in))  # builds the weights
if TRAIN:
    repeats = 150  # one epoch of 150 steps, each on both pairs
    toy_model.compile(optimizer=keras.optimizers.Adam(0.02), loss=masked_loss,
                      metrics=[masked_accuracy])
    toy_model.fit((np.tile(toy_context, (repeats, 1)), np.tile(toy_target_in, (repeats, 1))),
                  np.tile(toy_target_out, (repeats, 1)), batch_size=2, verbose=0)
    toy_model.save_weights("toy_dialogue.weights.h5")
else:
    load_shipped_weights(toy_model, "toy_dialogue")
toy_logits = toy_model((toy_context, toy_target_in), training=False)
print(f"on the two pairs: masked loss "
      f"{float(checks.to_numpy(masked_loss(toy_target_out, toy_logits))):.4f}, masked accuracy "
      f"{float(checks.to_numpy(masked_accuracy(toy_target_out, toy_logits))):.2f}")

# %% [markdown]
# **The learning rate.** The paper warms the learning rate up linearly, then lets
# it decay with the inverse square root of the step:
#
# $$\text{lr}(s) = d_{model}^{-0.5}\,\min\big(s^{-0.5},\; s \cdot w^{-1.5}\big),$$
#
# with $w$ warm-up steps. Large steps at the very start would push the freshly
# initialized attention layers into saturation; the warm-up avoids that. With
# Adam's $\beta_2 = 0.98$ and $\epsilon = 10^{-9}$, as in the paper.

# %% nbgrader="locked" grade_id="schedule" grading="skip"
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), step from 1."""

    def __init__(self, d_model, warmup_steps=4000):
        self.d_model = d_model
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0  # Keras counts steps from 0
        scale = ops.minimum(ops.power(step, -0.5), step * self.warmup_steps ** -1.5)
        return self.d_model ** -0.5 * scale

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps}


TRAINING = dict(epochs=5, batch_size=128, warmup_steps=600)
steps_per_epoch = math.ceil(len(train_pairs) / TRAINING["batch_size"])  # the last batch is short
steps = np.arange(1, TRAINING["epochs"] * steps_per_epoch + 1)
schedule = WarmupSchedule(HYPERPARAMETERS["d_model"], TRAINING["warmup_steps"])
plt.figure(figsize=(6, 2.5))
plt.plot(steps, checks.to_numpy(schedule(steps - 1)))
plt.xlabel("training step")
plt.ylabel("learning rate")
plt.title(f"warm-up over {TRAINING['warmup_steps']} steps, then 1/sqrt(step)")
plt.tight_layout()
plt.show()

# %% [markdown]
# **The date translator.** Two encoder and two decoder layers, `d_model` 64, 4
# heads, 173 006 weights: tiny by today's standards, enough for dates. Five
# epochs of 188 steps (the 23 939 training pairs make 187 batches of 128 and one of
# 3), 940 steps in all, with the warm-up over the first 600.
# With `TRAIN = True` the cell below trains it with your `Transformer`,
# `masked_loss` and `masked_accuracy` (Keras's progress bar shows each epoch);
# otherwise it loads the weights that come with `labkit` into your model, which
# works when your attribute names are those of sections 3 to 5.
#
# Measured with this lab's code (`benchmarks/lab5_training.py` in the course
# repository) on an otherwise idle machine with 2 cores of an AMD EPYC CPU (Linux,
# Keras 3.15 on the TensorFlow backend): training takes 156 s (5 epochs; the first
# includes about 30 s of XLA compilation), and greedy decoding then translates 98.8%
# of the 3074 held-out test dates exactly right (every character of the ISO date).
# Six epochs reach 99.8% in about 3 minutes on the same machine; other machines
# take more or less time.

# %% nbgrader="locked" grade_id="train_or_load" grading="skip"
if TRAIN:
    keras.utils.set_random_seed(0)
    date_model = build_date_model()
    optimizer = keras.optimizers.Adam(
        WarmupSchedule(HYPERPARAMETERS["d_model"], TRAINING["warmup_steps"]),
        beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    # XLA about halves a training step on a CPU with TensorFlow (JAX always compiles).
    jit_compile = True if keras.config.backend() == "tensorflow" else "auto"
    date_model.compile(optimizer=optimizer, loss=masked_loss, metrics=[masked_accuracy],
                       jit_compile=jit_compile)
    started = time.perf_counter()
    history = date_model.fit(
        (train_context, train_target_in), train_target_out,
        validation_data=((validation_context, validation_target_in), validation_target_out),
        epochs=TRAINING["epochs"], batch_size=TRAINING["batch_size"], verbose=2)
    training_seconds = time.perf_counter() - started
    curves = {name: [float(v) for v in values] for name, values in history.history.items()}
    date_model.save_weights("dates_transformer.weights.h5")
    print(f"trained in {training_seconds:.0f} s; weights saved to dates_transformer.weights.h5")
else:
    checkpoint = load_shipped_weights(date_model, "dates_transformer")
    curves = checkpoint["history"]
    training_seconds = checkpoint["training_seconds"]
    print(f"loaded the shipped weights: trained for {len(curves['loss'])} epochs in "
          f"{training_seconds:.0f} s on a {checkpoint['trained_on']}")

# %% nbgrader="locked" grade_id="training_curves" grading="skip"
figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
epochs = np.arange(1, len(curves["loss"]) + 1)
left.plot(epochs, curves["loss"], "o-", label="training")
left.plot(epochs, curves["val_loss"], "o-", label="validation")
left.set(xlabel="epoch", ylabel="masked loss", title="loss", yscale="log")
right.plot(epochs, curves["masked_accuracy"], "o-", label="training")
right.plot(epochs, curves["val_masked_accuracy"], "o-", label="validation")
right.set(xlabel="epoch", ylabel="masked accuracy", title="token accuracy")
for ax in (left, right):
    ax.legend()
    ax.grid(alpha=0.3)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 8. Greedy decoding
#
# At inference time there is no target to read: the decoder reads its own
# output. Start every sentence with `start_id`, run the model, take the most
# likely next token (the argmax of the logits at the **last** position), append
# it, and repeat, until a sentence produces `end_id` or `max_length` tokens were
# written.
#
# **How decoding functions call a model** (the convention the hidden tests use
# too): `model((context_ids, target_ids), training=False)` with `context_ids`
# `(B, S)` and the tokens so far `target_ids` `(B, t)`, start id first; it
# returns logits `(B, t, V)`. Call nothing else on the model.
#
# Return the ids **after** the start id, `(B, L)` with `L <= max_length`: a row
# that wrote `end_id` keeps it and is padded with 0 after it; stop as soon as
# every row has ended. NumPy is fine for the bookkeeping; the model's output may
# be a tensor (`ops.convert_to_numpy`).

# %% nbgrader="solution" grade_id="greedy_decode"
def greedy_decode(model, context_ids, max_length, start_id, end_id):
    """Translate a batch by always taking the most likely next token.

    Args:
        model: called as `model((context_ids, target_ids), training=False)`,
            returning logits `(B, t, V)`.
        context_ids: integer `(B, S)`, the source sentences.
        max_length: the most tokens to write after the start id.
        start_id: the id every target starts with.
        end_id: the id that ends a sentence.

    Returns:
        Integer `(B, L)`, L <= max_length: the ids written after start_id, a
        row's end_id included, 0 after it.
    """
    ### BEGIN SOLUTION
    context_ids = np.asarray(ops.convert_to_numpy(context_ids))
    batch_size = context_ids.shape[0]
    tokens = np.full((batch_size, 1), start_id, dtype="int32")  # (B, 1): the start id
    finished = np.zeros(batch_size, dtype=bool)
    for _ in range(max_length):
        logits = model((context_ids, tokens), training=False)  # (B, t, V)
        next_tokens = ops.convert_to_numpy(ops.argmax(logits[:, -1, :], axis=-1))
        next_tokens = np.where(finished, 0, next_tokens).astype("int32")  # padding after the end
        tokens = np.concatenate([tokens, next_tokens[:, None]], axis=1)  # (B, t + 1)
        finished |= next_tokens == end_id
        if finished.all():
            break
    return tokens[:, 1:]
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_greedy_decode"
# Visible check: a hand-made "model" (no weights) that always spells 3, 4, 5 and
# then the end id 2, whatever the context. Its logits at each position depend only
# on the tokens up to that position, like a Transformer's.
class SpellingModel:
    """Next token after the prefix: start(1) -> 3 -> 4 -> 5 -> end(2)."""

    following = {1: 3, 3: 4, 4: 5, 5: 2}

    def __call__(self, inputs, training=False):
        target_ids = checks.to_numpy(inputs[1])  # the context does not matter here
        logits = np.full(target_ids.shape + (7,), -5.0, dtype="float32")
        for (b, t), token in np.ndenumerate(target_ids):
            logits[b, t, self.following.get(int(token), 2)] = 5.0
        return ops.convert_to_tensor(logits)


def trim_padding(ids):
    """ids as NumPy without the padding columns (or entries) at the end."""
    ids = checks.to_numpy(ids)
    while ids.shape[-1] and not np.any(ids[..., -1]):
        ids = ids[..., :-1]
    return ids


contexts = np.array([[3, 3, 0], [4, 0, 0]])
spelled = checks.to_numpy(greedy_decode(SpellingModel(), contexts, max_length=10, start_id=1,
                                        end_id=2))
checks.check_true(spelled.ndim == 2 and len(spelled) == 2,
                  "greedy_decode: one row of ids per context", f"the shape is {spelled.shape}",
                  hint="return an array (B, L): row b holds the ids written for context b.")
checks.check_true(not np.all(spelled[:, 0] == 1), "greedy_decode: the rows start after the "
                  "start id", f"every row starts with the start id 1: {spelled[:, :3].tolist()}",
                  hint="return the ids written after the start id, e.g. tokens[:, 1:].")
checks.check_close(trim_padding(spelled)[:, :3], [[3, 4, 5], [3, 4, 5]],
                   "greedy_decode: spells 3, 4, 5",
                   hint="at each step append the argmax of the LAST position's logits, "
                        "logits[:, -1, :].")
checks.check_close(trim_padding(spelled), [[3, 4, 5, 2], [3, 4, 5, 2]],
                   "greedy_decode: then the end id 2, and nothing after it",
                   hint="stop when every row has written end_id; a row keeps its end_id.")
checks.check_close(greedy_decode(SpellingModel(), contexts, max_length=2, start_id=1, end_id=2),
                   [[3, 4], [3, 4]], "greedy_decode: max_length=2 stops after two ids",
                   hint="write at most max_length ids, even when no row has written end_id.")


class CountingModel:
    """Writes 3 as long as fewer ids than the context's real tokens were written, then end."""

    def __call__(self, inputs, training=False):
        context_ids, target_ids = (checks.to_numpy(part) for part in inputs)
        logits = np.full(target_ids.shape + (7,), -5.0, dtype="float32")
        for (b, t), _ in np.ndenumerate(target_ids):
            logits[b, t, 3 if t < np.count_nonzero(context_ids[b]) else 2] = 5.0
        return ops.convert_to_tensor(logits)


ragged = checks.to_numpy(greedy_decode(CountingModel(), contexts, max_length=10, start_id=1,
                                       end_id=2))  # contexts of 2 and 1 real tokens
checks.check_close(trim_padding(ragged[0]), [3, 3, 2],
                   "greedy_decode: row 1 writes 3, 3, end, though row 2 ends first",
                   hint="go on until EVERY row has written end_id (or max_length ids).")
_ = checks.check_close(trim_padding(ragged[1]), [3, 2],
                       "greedy_decode: row 2 writes 3, end, then only 0 (padding)",
                       hint="once a row has written end_id, put 0 in it at every later step.")

# %% nbgrader="tests" grade_id="test_greedy_decode"

# %% [markdown]
# First the smoke test's model: does it answer the lecture's question? Then the
# date translator on every held-out test date. A small wrapper makes the many
# calls fast: it calls the model exactly as `greedy_decode` does, but through
# Keras's compiled prediction step (`predict_on_batch`) with the target padded to
# a fixed length, which changes no logit before the padding (the model is
# causal, and padding is masked).

# %% nbgrader="locked" grade_id="demo_greedy_decode" grading="skip"
answer_ids = greedy_decode(toy_model, toy_context, max_length=5, start_id=TOY.start_id,
                           end_id=TOY.end_id)
for question, answer in zip(questions, TOY.decode(checks.to_numpy(answer_ids))):
    print(f"{question!r} -> {answer!r}")


class CompiledCalls:
    """model((context_ids, target_ids), training=False), through predict_on_batch."""

    def __init__(self, model, target_length):
        self.model, self.target_length = model, target_length

    def __call__(self, inputs, training=False):
        context_ids, target_ids = (np.asarray(checks.to_numpy(part)) for part in inputs)
        length = max(self.target_length, target_ids.shape[1])
        padded = np.zeros((target_ids.shape[0], length), dtype="int32")
        padded[:, : target_ids.shape[1]] = target_ids
        logits = self.model.predict_on_batch((context_ids.astype("int32"), padded))
        return ops.convert_to_tensor(np.asarray(logits)[:, : target_ids.shape[1]])


def translate(texts, decode=greedy_decode, **options):
    """Human-written dates -> ISO strings with one of the decoding functions."""
    context_ids = SOURCE.encode(texts, length=datasets.SOURCE_LENGTH)
    ids = decode(CompiledCalls(date_model, datasets.TARGET_LENGTH), context_ids,
                 max_length=datasets.TARGET_LENGTH, start_id=TARGET.start_id,
                 end_id=TARGET.end_id, **options)
    return TARGET.decode(checks.to_numpy(ids))


EVALUATED = 500  # held-out test dates decoded here (benchmarks/lab5_training.py: all)
started = time.perf_counter()
evaluated_pairs = test_pairs[:EVALUATED]
test_predictions = []
for first in range(0, len(evaluated_pairs), 500):
    test_predictions += translate([human for human, _ in evaluated_pairs[first: first + 500]])
decoding_seconds = time.perf_counter() - started
right = [prediction == iso for prediction, (_, iso) in zip(test_predictions, evaluated_pairs)]
test_exact_match = float(np.mean(right))
print(f"exact match on {len(evaluated_pairs)} held-out test dates: {test_exact_match:.2%} "
      f"(greedy decoding, {decoding_seconds:.1f} s)")
for (human, iso), prediction in list(zip(evaluated_pairs, test_predictions))[:6]:
    print(f"{human:>32} -> {prediction}  {'✓' if prediction == iso else '✗ ' + iso}")
mistakes = [(h, i, p) for (h, i), p in zip(evaluated_pairs, test_predictions) if p != i]
print(f"\n{len(mistakes)} mistakes, e.g.:")
for human, iso, prediction in mistakes[:5]:
    print(f"{human:>32} -> {prediction}  (expected {iso})")

# %% [markdown]
# Try your own dates (any of the 13 formats, between 1950 and 2049). What does
# the model do with a format it never saw, or a year outside its range?

# %% nbgrader="locked" grade_id="demo_own_dates" grading="skip"
for text in ["14 juillet 2021", "Friday, December 31, 1999", "1er janvier 2000",
             "29 de febrero de 2024", "July 4th, 1976", "12/25/49", "25.12.2049",
             "July 4, 1776"]:
    print(f"{text:>28} -> {translate([text])[0]}")

# %% [markdown]
# ## 9. Sampling with a temperature
#
# Greedy decoding always writes the same answer. Sampling draws the next token
# from the model's probabilities instead, and a **temperature** $T$ makes it more
# careful or more adventurous:
#
# $$p_i(T) = \frac{\exp(z_i / T)}{\sum_j \exp(z_j / T)}.$$
#
# $T = 1$ is the model's own distribution; $T < 1$ sharpens it (as $T \to 0$ it
# puts all the weight on the largest logit: greedy); $T > 1$ flattens it toward
# uniform. Write `sample_with_temperature` for logits `(B, V)`: divide by $T$ and
# draw one id per row with `keras.random.categorical` (which takes logits, and a
# `seed` that makes the draw reproducible). Return the argmax when `temperature`
# is 0.

# %% nbgrader="solution" grade_id="sample_with_temperature"
def sample_with_temperature(logits, temperature, seed=None):
    """Draw one token id per row from softmax(logits / temperature).

    Args:
        logits: float `(B, V)`.
        temperature: a number >= 0; 0 gives the argmax (greedy).
        seed: optional integer; the same seed gives the same draw.

    Returns:
        Integer `(B,)`, one id per row.
    """
    ### BEGIN SOLUTION
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0. Received: temperature={temperature}")
    logits = ops.convert_to_tensor(logits, dtype="float32")  # (B, V)
    if temperature == 0:
        return ops.argmax(logits, axis=-1)  # (B,)
    samples = keras.random.categorical(logits / temperature, num_samples=1, seed=seed)  # (B, 1)
    return samples[:, 0]
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_sample_with_temperature"
# Visible check: limits, shape, the seed, and the frequencies of 4000 draws.
logits = np.array([[2.0, 1.0, 0.0, -1.0]] * 4000, dtype="float32")
first = checks.check_shape(sample_with_temperature(logits, 1.0, seed=42), (4000,),
                           "sample_with_temperature(logits (4000, 4), 1.0): one id per row",
                           hint="keras.random.categorical returns (B, 1): take its column.")
checks.check_close(sample_with_temperature(logits[:3], 0.0), [0, 0, 0],
                   "temperature 0: the argmax",
                   hint="when temperature is 0, return the argmax of the logits (logits / 0 "
                        "is not defined).")
checks.check_close(sample_with_temperature(logits[:3], 1e-4, seed=1), [0, 0, 0],
                   "temperature 1e-4: the argmax", hint="divide the logits by T (not multiply).")
checks.check_close(sample_with_temperature(logits, 1.0, seed=42), first,
                   "the same seed gives the same draw", hint="pass seed=seed on.")
for temperature in (0.5, 2.0):
    wanted = np.exp(logits[0] / temperature) / np.exp(logits[0] / temperature).sum()
    draws = checks.to_numpy(sample_with_temperature(logits, temperature, seed=7)).astype(int)
    checks.check_close(np.bincount(draws, minlength=4) / 4000, wanted, atol=0.04,
                       what=f"temperature {temperature}: frequencies near softmax(z / T)",
                       hint="sample from logits / temperature.")

# %% nbgrader="tests" grade_id="test_sample_with_temperature"

# %% [markdown]
# What the temperature does to one distribution: the date translator's
# probabilities for the first digit of a date, at three temperatures. Then whole
# translations, sampled token by token at each temperature.

# %% nbgrader="locked" grade_id="demo_sample_with_temperature" grading="skip"
example = "Sunday, June 7, 1987"
first_logits = checks.to_numpy(date_model(
    (SOURCE.encode([example], length=datasets.SOURCE_LENGTH), np.array([[TARGET.start_id]])),
    training=False))[0, -1] / 3.0  # a softer version of the model's first-digit logits
tokens = [TARGET.tokens[i] for i in range(TARGET.size)]
figure, axes = plt.subplots(3, 1, figsize=(9, 7.5), sharex=True)  # one row per temperature
for ax, temperature in zip(axes, (0.5, 1.0, 2.0)):
    probabilities = np.exp(first_logits / temperature - np.max(first_logits / temperature))
    plots.bars(probabilities / probabilities.sum(), tokens, f"T = {temperature}", ax=ax,
               ylabel="p_i(T)")
    ax.tick_params(axis="x", labelbottom=True)
plt.suptitle(f"first token of {example!r}: softmax(z / T) for logits z / 3")
plt.tight_layout()
plt.show()


def sample_decode(model, context_ids, max_length, start_id, end_id, temperature=1.0, seed=0):
    """Like greedy_decode, but each token is drawn with sample_with_temperature."""
    tokens = np.full((len(context_ids), 1), start_id, dtype="int32")
    finished = np.zeros(len(context_ids), dtype=bool)
    for step in range(max_length):
        logits = checks.to_numpy(model((context_ids, tokens), training=False))[:, -1]
        next_tokens = checks.to_numpy(sample_with_temperature(logits, temperature, seed=seed + step))
        next_tokens = np.where(finished, 0, next_tokens).astype("int32")
        tokens = np.concatenate([tokens, next_tokens[:, None]], axis=1)
        finished = finished | (next_tokens == end_id)
        if finished.all():
            break
    return tokens[:, 1:]


for temperature in (0.5, 1.0, 3.0, 10.0):
    samples = translate([example] * 6, decode=sample_decode, temperature=temperature, seed=1)
    print(f"T = {temperature:>4}: {'  '.join(samples)}")

# %% [markdown]
# ## 10. Beam search
#
# Greedy decoding commits to the best token at each step, and a good first token
# can lead to a poor sentence. Beam search keeps the `beam_width` best open
# (unfinished) partial sentences, the beams. At each step it extends every beam
# with every token and scores each candidate by its **total** log-probability,
#
# $$\text{score}(y_1, \ldots, y_t) = \sum_{s=1}^{t} \log p(y_s \mid y_{<s}, x),$$
#
# where $\log p$ is the `log_softmax` of the model's logits at the last position (a
# model returns logits, not log-probabilities). One algorithm, and its rules,
# each of them graded:
#
# - **No length normalisation.** The score is the plain sum above, never divided
#   by the length: a short sentence beats a longer one whenever its total is
#   higher, even if the longer one has the higher average per token.
# - **Finished sentences leave the beam.** Rank the step's candidates by score.
#   Among the `beam_width` best, a candidate that wrote `end_id` is finished: it
#   leaves the beam for a **list of finished sentences**, with its score, and is
#   never extended again (a sentence ends at its end id; going on after it would
#   change its score). Nothing pushes it out of that list. A candidate that
#   wrote `end_id` below the `beam_width` best is dropped (that is why
#   `beam_width=1` is greedy decoding).
# - **The beam keeps `beam_width` open beams.** The next step's beams are the
#   `beam_width` best candidates that did *not* write `end_id`: finished
#   sentences take no place in the beam, and the beam does not shrink as
#   sentences finish. (Going on with only the open candidates among the
#   `beam_width` best gives the same answer: whatever ranks below a finished
#   sentence ends below it.)
# - **When to stop.** The first finished sentence does not end the search: go on
#   while an open beam still scores higher than the best finished sentence (it
#   may end higher; scores only fall). Stop when none does, or after
#   `max_length` tokens.
# - **What to return.** The finished sentence with the highest total
#   log-probability or, when `max_length` stopped the search, the best of the
#   finished sentences and the open beams: a sentence is not preferred for being
#   finished.
#
# With `beam_width=1` this is exactly greedy decoding.
#
# This function decodes **one** source sentence, `context_ids` `(1, S)`; feed the
# model all beams at once by repeating the context (`np.repeat`). Return the ids
# after the start id, `(L,)`, end id included when written.

# %% nbgrader="solution" grade_id="beam_search"
def beam_search(model, context_ids, beam_width, max_length, start_id, end_id):
    """The most likely translation of one sentence, by beam search.

    Args:
        model: called as `model((context_ids, target_ids), training=False)`,
            returning logits `(B, t, V)`.
        context_ids: integer `(1, S)`, one source sentence.
        beam_width: number of open beams kept at each step, a positive integer.
        max_length: the most tokens to write after the start id.
        start_id, end_id: the ids that start and end a sentence.

    Returns:
        Integer `(L,)`: the ids after start_id of the sequence with the highest
        total log-probability (end_id included when written).

    Candidates are ranked by their total log-probability (the sum of the
    log_softmax of each step's logits), with no length normalisation. Among a
    step's beam_width best candidates, those that wrote end_id leave the beam
    for a list of finished sentences (never extended, their scores kept); the
    next beams are the beam_width best candidates that did not. The search goes
    on while an open beam scores higher than the best finished sentence, at
    most max_length steps; the best sentence, finished or (at max_length) not,
    is returned.
    """
    ### BEGIN SOLUTION
    context_ids = np.asarray(ops.convert_to_numpy(context_ids)).reshape(1, -1)  # (1, S)
    beams = [([start_id], 0.0)]  # open beams: (tokens so far, total log-probability)
    finished = []  # finished sentences, in a list of their own
    for _ in range(max_length):
        prefixes = np.array([tokens for tokens, _ in beams], dtype="int32")  # (k, t)
        contexts = np.repeat(context_ids, len(beams), axis=0)  # (k, S)
        logits = model((contexts, prefixes), training=False)  # (k, t, V)
        log_probabilities = ops.convert_to_numpy(
            ops.log_softmax(ops.cast(logits[:, -1, :], "float32"), axis=-1))  # (k, V)
        candidates = []
        for (tokens, score), row in zip(beams, log_probabilities):
            # each beam's beam_width + 1 best tokens: enough for beam_width open ones
            for token in np.argsort(row)[::-1][:beam_width + 1]:
                candidates.append((tokens + [int(token)], score + float(row[token])))
        candidates.sort(key=lambda candidate: candidate[1], reverse=True)
        finished += [c for c in candidates[:beam_width] if c[0][-1] == end_id]
        beams = [c for c in candidates if c[0][-1] != end_id][:beam_width]
        if not beams:
            break
        if finished and max(score for _, score in finished) >= beams[0][1]:
            break  # scores only fall: no open beam can win any more
    best_tokens, _ = max(finished + beams, key=lambda candidate: candidate[1])
    return np.array(best_tokens[1:], dtype="int32")
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_beam_search"
# Visible check: hand-made models (no weights) over the ids 0..5, start id 1, end id 2.
class HandModel:
    """Hand-set next-token probabilities.

    table: {prefix (start id first): {token: probability}}; after an unlisted
    prefix the end id is certain; unlisted tokens get 1e-6. The logits are the
    log-probabilities plus offsets[prefix] (0 when unlisted): adding a constant
    to a position's logits changes no probability, as with a real model's logits.
    """

    def __init__(self, table, offsets=None):
        self.table, self.offsets = table, offsets or {}

    def __call__(self, inputs, training=False):
        target_ids = checks.to_numpy(inputs[1])  # the context does not matter here
        logits = np.zeros(target_ids.shape + (6,), dtype="float32")
        for b in range(target_ids.shape[0]):
            for t in range(target_ids.shape[1]):
                prefix = tuple(int(x) for x in target_ids[b, : t + 1])
                probabilities = np.full(6, 1e-6)
                for token, p in self.table.get(prefix, {2: 1.0}).items():
                    probabilities[token] = p
                logits[b, t] = (np.log(probabilities / probabilities.sum())
                                + self.offsets.get(prefix, 0.0))
        return ops.convert_to_tensor(logits)


def beam_ids(model, beam_width, max_length=5):
    """beam_search's answer for one context as a list of ids (an (L,) or (1, L)
    array, trailing 0s ignored, as the grader reads it)."""
    try:
        found = beam_search(model, np.array([[5, 5, 0]]), beam_width=beam_width,
                            max_length=max_length, start_id=1, end_id=2)
    except Exception as error:
        raise AssertionError(
            f"beam_search(beam_width={beam_width}, max_length={max_length}) raised "
            f"{type(error).__name__}: {error}\nHint: sentences may finish (write end_id) "
            "before max_length: keep them in a list of finished sentences, refill the beam "
            "with the best open candidates, and stop when no open beam scores above the "
            "best finished sentence.") from error
    ids = [int(token) for token in np.ravel(checks.to_numpy(found, "beam_search's answer"))]
    while ids and ids[-1] == 0:
        ids.pop()
    return ids


# Greedy misses the best sentence: after the start, 3 (0.55) beats 4 (0.45), but after
# 3 the end has 0.4 and after 4 it has 0.95. 3, end: 0.55 * 0.4 = 0.22; 4, end: 0.4275.
FORK = {(1,): {3: 0.55, 4: 0.45}, (1, 3): {2: 0.4, 3: 0.3, 4: 0.3}, (1, 4): {2: 0.95, 3: 0.05}}
found = beam_ids(HandModel(FORK), beam_width=2)
checks.check_true(2 in found, "beam_search(beam_width=2) returns a finished sentence (end id 2)",
                  f"got {found}",
                  hint="a candidate that writes end_id is finished: it leaves the beam for a "
                       "list of finished sentences; return the best of them, end_id included.")
checks.check_true(found.index(2) == len(found) - 1, "nothing after the end id", f"got {found}",
                  hint="a finished beam is never extended: stop extending a beam once it has "
                       "written end_id.")
checks.check_close(found, [4, 2], "beam_search(beam_width=2): 4, end (0.4275 > 0.22)",
                   hint="keep the beam_width best candidates at each step (3 and 4 after the "
                        "first), each scored by its TOTAL log-probability.")
checks.check_close(beam_ids(HandModel(FORK), beam_width=1), [3, 2],
                   "beam_search(beam_width=1) is greedy decoding: 3, end",
                   hint="with beam_width=1 keep only the best candidate at each step.")
checks.check_close(beam_ids(HandModel(FORK, offsets={(1, 3): 3.0}), beam_width=2), [4, 2],
                   "the same probabilities, logits after (start, 3) shifted by +3: 4, end",
                   hint="logits are not log-probabilities: add the log_softmax of each step's "
                        "logits, not the raw logits.")
# The search goes on after the first finished sentence: 3, end (0.5 * 0.5 = 0.25) ends
# at step 2, but the open 4, 4 (0.405) is ahead and ends higher: 4, 4, end (0.3645). With
# beam_width=3 the third beam (3, 3: 0.15) is below 3, end.
GOES_ON = {(1,): {3: 0.5, 4: 0.45, 5: 0.05}, (1, 3): {2: 0.5, 3: 0.3, 4: 0.2},
           (1, 4): {4: 0.9, 2: 0.05, 3: 0.05}, (1, 4, 4): {2: 0.9, 3: 0.1}}
checks.check_close(beam_ids(HandModel(GOES_ON), beam_width=3), [4, 4, 2],
                   "beam_search(beam_width=3) goes on after the first finished sentence: "
                   "4, 4, end",
                   hint="stop only when no open beam scores higher than the best finished "
                        "sentence (compare with the BEST open beam).")
# The short answer wins: 3, end (0.55 * 0.55 = 0.3025) beats 4, 4, end (0.4 * 0.95 * 0.7
# = 0.266), though the long one has the higher average per token (log: -0.44 > -0.60),
# and after two steps 4, 4 (0.38) is still ahead of 3, end: the search goes on.
SHORT = {(1,): {3: 0.55, 4: 0.4, 5: 0.05}, (1, 3): {2: 0.55, 5: 0.45},
         (1, 4): {4: 0.95, 2: 0.05}, (1, 4, 4): {2: 0.7, 3: 0.3}}
checks.check_close(beam_ids(HandModel(SHORT), beam_width=2), [3, 2],
                   "no length normalisation: 3, end (0.3025) beats 4, 4, end (0.266)",
                   hint="a sentence's score is the SUM of the LOG-probabilities of all its "
                        "tokens: not of the probabilities, not the last token's alone, never "
                        "divided by the length.")
# The beam keeps beam_width OPEN beams: 3, end (0.5 * 0.3 = 0.15) finishes at step 2
# beside 4, 4 (0.405) and leaves for the list; at step 3 the open 4, 4, 3 (0.19) and
# 4, 4, 4 (0.18) both go on, and 4, 4, 4, end (0.18) ends best. A finished sentence that
# kept a place in the beam (or a beam that shrank as sentences finish) would let only
# 4, 4, 3 go on, whose sentences all end below 3, end.
MAKES_ROOM = {(1,): {3: 0.5, 4: 0.45, 5: 0.05}, (1, 3): {2: 0.3, 3: 0.24, 4: 0.23, 5: 0.23},
              (1, 4): {4: 0.9, 3: 0.05, 2: 0.05}, (1, 4, 4): {3: 0.47, 4: 0.45, 2: 0.08},
              (1, 4, 4, 3): {2: 0.5, 3: 0.2, 4: 0.2, 5: 0.1}, (1, 4, 4, 4): {2: 0.99, 3: 0.01}}
checks.check_close(beam_ids(HandModel(MAKES_ROOM), beam_width=2), [4, 4, 4, 2],
                   "beam_search(beam_width=2): the beam keeps 2 open beams: 4, 4, 4, end (0.18)",
                   hint="a finished sentence takes no place in the beam: each step the beam "
                        "keeps the beam_width best OPEN candidates, so two open beams that "
                        "score higher than a finished sentence both go on (the beam does not "
                        "shrink as sentences finish).")
# A finished sentence is never extended: 3, end (0.6 * 0.7 = 0.42) beats 4, end (0.36).
# Asked what follows 3, end, this model gives the end id little probability, as a real
# model may: extended after its end, 3, end would fall below 4, end.
EXTENDED = {(1,): {3: 0.6, 4: 0.4}, (1, 3): {2: 0.7, 3: 0.3}, (1, 4): {2: 0.9, 3: 0.1},
            (1, 3, 2): {3: 0.5, 4: 0.5}}
found = beam_ids(HandModel(EXTENDED), beam_width=3, max_length=3)
checks.check_true(found == [3, 2], "beam_search(beam_width=3): 3, end (0.42) beats 4, end (0.36)",
                  f"got {found}",
                  hint="a beam that writes end_id is finished: its sentence and score are final. "
                       "Never extend it: asking the model what follows end_id (as keras-hub's "
                       "BeamSampler does) changes its score.")
# Finished sentences leave the beam for a list of their own: end (0.25) finishes at step 1
# beside 3 (0.6); at step 2 the open 3, 3 (0.3) and 3, 4 (0.27) are both ahead of it, and
# everything after them ends lower (3, 3, end: 0.18; 3, 4, end: 0.135): end alone is the
# answer. Kept among the beams, end would be pushed out at step 2, and 3, 3, end returned.
EVICTED = {(1,): {3: 0.6, 2: 0.25, 4: 0.15}, (1, 3): {3: 0.5, 4: 0.45, 2: 0.05},
           (1, 3, 3): {2: 0.6, 3: 0.2, 4: 0.2}, (1, 3, 4): {2: 0.5, 3: 0.25, 4: 0.25}}
found = beam_ids(HandModel(EVICTED), beam_width=2)
checks.check_true(found == [2], "beam_search(beam_width=2): the finished end alone (0.25) beats "
                  "3, 3, end (0.18)", f"got {found}",
                  hint="a finished sentence was pushed out of the beam by open ones: keep "
                       "finished sentences in their own list, where they take no place in the "
                       "beam and nothing pushes them out." if found == [3, 3, 2] else
                       "a candidate among the beam_width best that writes end_id leaves the "
                       "beam for the list of finished sentences; return the best of them.")
# At max_length=2 the best sentence is unfinished: 4, 4 (0.7 * 0.9 = 0.63) beats the
# finished 3, end (0.3 * 0.9 = 0.27).
LONG = {(1,): {3: 0.3, 4: 0.7}, (1, 3): {2: 0.9, 3: 0.1}, (1, 4): {4: 0.9, 2: 0.1}}
_ = checks.check_close(beam_ids(HandModel(LONG), beam_width=2, max_length=2), [4, 4],
                       "beam_search(max_length=2): the unfinished 4, 4 (0.63) beats 3, end (0.27)",
                       hint="when max_length stops the search, return the best sentence by total "
                            "log-probability, finished or not.")

# %% nbgrader="tests" grade_id="test_beam_search"

# %% nbgrader="tests" grade_id="test_beam_search__finished"

# %% [markdown]
# On the date translator, greedy decoding and beam search mostly agree: the model
# is confident. Where they differ, beam search's answer always has the higher
# total log-probability; whether it is also *right* is another question.

# %% nbgrader="locked" grade_id="demo_beam_search" grading="skip"
fast_date_model = CompiledCalls(date_model, datasets.TARGET_LENGTH)


def total_log_probability(context_ids, tokens):
    """log p(tokens | context) under the date model (tokens after the start id)."""
    target = np.array([[TARGET.start_id] + list(tokens)], dtype="int32")
    logits = checks.to_numpy(fast_date_model((context_ids, target[:, :-1])))[0]  # (t, V)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(sum(log_p[t, token] for t, token in enumerate(tokens)))


started = time.perf_counter()
examples = [human for human, _ in test_pairs[:12]] + [human for human, _, _ in mistakes[:8]]
examples = list(dict.fromkeys(examples))  # each date once (a mistake may be a test date too)
differences = 0
for human in examples:
    context_ids = SOURCE.encode([human], length=datasets.SOURCE_LENGTH)
    greedy_ids = checks.to_numpy(greedy_decode(fast_date_model, context_ids, 11, 1, 2))[0]
    greedy_ids = [int(t) for t in greedy_ids if t != 0]
    beam_tokens = [int(t) for t in checks.to_numpy(
        beam_search(fast_date_model, context_ids, 3, 11, 1, 2))]
    if greedy_ids != beam_tokens:
        differences += 1
        greedy_score = total_log_probability(context_ids, greedy_ids)
        beam_score = total_log_probability(context_ids, beam_tokens)
        print(f"{human:>32}: greedy {TARGET.decode(greedy_ids)} ({greedy_score:.2f}), "
              f"beam {TARGET.decode(beam_tokens)} ({beam_score:.2f})")
print(f"greedy and beam search (width 3) differ on {differences} of {len(examples)} dates "
      f"({time.perf_counter() - started:.1f} s)")

# %% [markdown]
# ## 11. Where the decoder looks
#
# While it writes each character of the ISO date, the decoder's cross-attention
# spreads weights over the source characters. `last_attention_scores` holds
# them for the last decoder layer, one map per head: rows are the decoder's
# positions (the start token, then the digits it wrote), columns the source
# characters. Heads often specialise: one follows the year, another the day or
# the month name.

# %% nbgrader="locked" grade_id="demo_attention" grading="skip"
example = "Dienstag, 14. Juli 1987"
context_ids = SOURCE.encode([example], length=datasets.SOURCE_LENGTH)
written = checks.to_numpy(greedy_decode(CompiledCalls(date_model, datasets.TARGET_LENGTH),
                                        context_ids, 11, TARGET.start_id, TARGET.end_id))[0]
target_ids = np.concatenate([[TARGET.start_id], written[written != 0]])[None, :]
date_model((context_ids, target_ids), training=False)  # keeps the attention weights
scores = checks.to_numpy(date_model.decoder.last_attention_scores)[0]  # (heads, T, S)
source_length = len(example)
rows = ["<SOS>"] + [TARGET.tokens[t] for t in target_ids[0, 1:]]
columns = list(example)
figure, axes = plt.subplots(1, scores.shape[0], figsize=(5.2 * scores.shape[0], 4.2))
for head, ax in enumerate(axes):
    plots.heatmap(scores[head, :, :source_length], rows, columns, f"head {head}", ax=ax,
                  annotate=False, vmax=1.0)
plt.suptitle(f"cross-attention of the last decoder layer: {example!r} -> "
             f"{TARGET.decode(written)}")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Conclusion
#
# A Transformer is the sum of parts you know: embeddings with positions, a stack
# of encoder layers, a stack of masked decoder layers that attend to the
# encoder, and one Dense layer to the vocabulary. You assembled them, trained
# them with a loss that ignores padding and the paper's warm-up schedule, and
# decoded three ways: greedy (fast, one answer), sampling with a temperature
# (varied, from careful to wild), and beam search (several hypotheses, the best
# total log-probability). The same pieces, scaled up and trained on far more
# text, are the encoder-decoder models of machine translation; keep the decoder
# alone and you have the family of GPT.
