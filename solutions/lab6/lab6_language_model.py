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
# # Lab 6 — A decoder-only language model
#
# Lab 5 ended with an encoder-decoder Transformer. Keep only its masked decoder,
# drop the cross-attention (there is no source sentence to attend to) and train
# it to predict the next token of plain text: that is a *language model* of the
# GPT family. In this lab you build a small one in Keras 3, train it on a CPU in
# about half a minute, and make it write, fast:
#
# 1. `RotaryEmbedding`: positions as rotations of the queries and keys;
# 2. `DecoderOnlyBlock`: causal self-attention and a feed-forward block, pre-norm,
#    with a key/value cache;
# 3. `MiniGPT`: a `keras.Model` from token ids to next-token logits;
# 4. `next_token_loss` and `perplexity`: how well it predicts text;
# 5. `top_k_filter` and `top_p_filter`: modern sampling, with lab 5's temperature;
# 6. `generate`: decoding with the key/value cache, exactly the tokens of full
#    recomputation, in a fraction of the time.
#
# **Time:** about 90 minutes. Training takes about 30 s (`model.fit`: 29 to 33 s
# measured on a 2-core Intel Xeon CPU with TensorFlow; a slower laptop takes longer);
# by default the notebook loads weights trained in advance (see `TRAIN`).
#
# **How to work.** Run the cells from top to bottom. Replace each
# `raise NotImplementedError()` with your code, then run the check cell below it.
# A check prints `✓` when it passes. Hidden tests on other inputs grade your
# notebook, so a passing check is necessary, not sufficient. Each exercise's text
# says what is graded and for how many points. Read-only cells (setup, provided
# code, checks, demos) are locked.

# %% nbgrader="locked" grade_id="colab_setup"
# Colab only: installs this lab's helpers (pinned). Does nothing anywhere else.
import importlib.util, subprocess, sys
if "google.colab" in sys.modules and importlib.util.find_spec("labkit") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{LABKIT_REQUIREMENT}}"], check=True)

# %% nbgrader="locked" grade_id="setup"
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quieter TensorFlow start-up

import math
import time

import numpy as np
import labkit

labkit.start_keras()  # Keras, without TensorFlow's start-up notices
import keras
from keras import ops
import matplotlib.pyplot as plt

from labkit import checks, datasets, language, plots
from labkit.masking import large_negative
from labkit.validation import validate_layer_arguments

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% [markdown]
# **Training or not.** With `TRAIN = False` (the default) the notebook loads a
# model trained in advance with this lab's own code and shipped with `labkit`;
# with `TRAIN = True` it trains your `MiniGPT` with your `next_token_loss` from
# scratch. In Colab, edit the cell below; in Jupyter, where it is read-only, add a
# cell `TRAIN = True` right after it. `TRAIN` does not change your grade: grading
# skips the cells that train or only demonstrate.

# %% nbgrader="locked" grade_id="train_flag"
TRAIN = False

# %% [markdown]
# ## 1. The data: a small language whose best perplexity is known
#
# `labkit.language` writes sentences of a little grammar from a seed, nothing
# downloaded: a determiner, maybe an adjective, a noun, a verb, and the same
# again ("the quick fox sees a hen ."). The model reads them **character by
# character**: 28 ids, with 0 for padding, 1 for the start and 2 for the end of
# a sentence.
#
# Because every word is drawn independently, the uncertainty of the language is
# known exactly: `language.floor()` is the lowest average cross-entropy per
# predicted character that *any* model can reach, and its perplexity. Nobody can
# know which noun comes next; a good model knows everything else (the spelling,
# the spaces, the order of the words, the full stop).

# %% nbgrader="locked" grade_id="data"
VOCABULARY = language.VOCABULARY
print(f"{VOCABULARY.size} ids: {VOCABULARY.tokens}")
train_sentences = language.sentences(8000, seed=0)
validation_sentences = language.sentences(1000, seed=1)
LENGTH = 48  # the longest sentence and its start and end tokens fit
train_ids = language.encode(train_sentences, length=LENGTH)
validation_ids = language.encode(validation_sentences, length=LENGTH)
floor_nats, floor_perplexity = language.floor()
for sentence in train_sentences[:3]:
    print(f"  {sentence}")
print(f"train {train_ids.shape}, validation {validation_ids.shape}; the floor: "
      f"{floor_nats:.4f} nats per character, perplexity {floor_perplexity:.3f}")
print(f"ids of {train_sentences[0]!r}:\n{train_ids[0]}")

# %% [markdown]
# ## 2. Provided: the feed-forward block and the heads
#
# The feed-forward block is lab 4's: `dense2(relu(dense1(x)))`, position by
# position (no dropout in this lab: the language is endless, new sentences never
# run out, so the model has little to over-fit). `split_heads` and `merge_heads`
# are lab 2's: head `i` holds the features `i * head_dim` to
# `(i + 1) * head_dim - 1`.

# %% nbgrader="locked" grade_id="provided"
class FeedForward(keras.layers.Layer):
    """dense2(relu(dense1(x))), position by position (lab 4, without dropout)."""

    def __init__(self, d_model, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff)
        self.d_model, self.dff = d_model, dff
        self.dense1 = keras.layers.Dense(dff, activation="relu", name="dense1")
        self.dense2 = keras.layers.Dense(d_model, name="dense2")

    def call(self, x):
        return self.dense2(self.dense1(x))

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "dff": self.dff}


def split_heads(x, num_heads):
    """`(B, T, d_model)` -> `(B, num_heads, T, d_model // num_heads)`."""
    batch, length, d_model = ops.shape(x)[0], ops.shape(x)[1], x.shape[-1]
    x = ops.reshape(x, (batch, length, num_heads, d_model // num_heads))
    return ops.transpose(x, (0, 2, 1, 3))


def merge_heads(x):
    """`(B, num_heads, T, head_dim)` -> `(B, T, num_heads * head_dim)`."""
    num_heads, head_dim = x.shape[1], x.shape[-1]
    x = ops.transpose(x, (0, 2, 1, 3))
    return ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], num_heads * head_dim))


def check_even(name, value):
    """Rotary embeddings turn pairs of features: `value` must be even."""
    if value % 2:
        raise ValueError(f"Received {name}={value}: rotary embeddings rotate pairs of "
                         f"features, so {name} must be even (e.g. {value + 1}).")


# %% [markdown]
# ## 3. Rotary position embeddings
#
# Lab 3 *added* a position vector to each token. Most language models today
# (LLaMA, Mistral, Gemma, GPT-NeoX) instead **rotate** the queries and keys by an
# angle that grows with the position (RoFormer, Su et al. 2021). Split a head's
# `head_dim` features into consecutive pairs `(x[2i], x[2i+1])`,
# `i = 0 .. head_dim/2 - 1`, and turn pair `i` at position `m` by the angle
# $m\,\theta_i$ with $\theta_i = \text{base}^{-2i/\text{head\_dim}}$ (base 10 000),
# counter-clockwise:
#
# $$\begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix} =
#   \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
#   \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}.$$
#
# So `(1, 0)` at position 1 becomes `(cos θ, sin θ)`. Pair 0 turns fastest (one
# radian per position), the last pair slowest, as the sinusoids of lab 3.
#
# **Which features make a pair.** Codebases differ here. This lab pairs
# consecutive features, as Meta's LLaMA reference code does (`apply_rotary_emb` in
# `llama/model.py` reads `(x[2i], x[2i+1])` as one complex number). GPT-NeoX's code
# (`rotate_half` in `megatron/model/positional_embeddings.py`) and keras-hub's
# `RotaryEmbedding` (which its Llama, Mistral, Gemma and GPT-NeoX models use) pair
# feature `i` with feature `i + head_dim/2`: they rotate the two **halves**. It is
# the same rotation with the features in another order (checkpoints converted from
# one layout to the other permute their query and key weights), but not the same
# numbers for the same `x`: here, pair consecutive features.
#
# Why rotations: a rotated query at position $m$ and a rotated key at position
# $n$ have the dot product of the unrotated vectors turned by $(m - n)\theta_i$,
# so **attention scores depend on the relative position $m - n$ only**, and
# rotations keep every vector's length. Nothing is learned: the layer has no
# weights, and it works for any length (this lab's positions stay below 2048).
#
# Write `RotaryEmbedding(head_dim, base=10000.0)`; `call(x, start=0)` takes `x`
# of shape `(..., T, head_dim)` (in the model, `(B, num_heads, T, head_dim)`)
# whose rows are the positions `start, start + 1, ..., start + T - 1`, and returns
# the rotated `x`, same shape. `start` matters when a model continues a sequence
# (the cache of sections 4 and 9): the new tokens do not sit at position 0.
# Computing the angles in float32 is fine: a float32 angle `m θ` is rounded by up
# to about `m · 1e-7` radians, and the checks and the grader allow for that
# (about 2e-4 at position 2000, the largest positions graded).
#
# **What is graded:** the rotated values at positions `0 .. T-1` for several
# shapes and `head_dim`s (1.5 points); the positions counted from `start`, up to
# position 2047 (0.5 points); `get_config()` holding `head_dim` and `base`, so that
# `from_config` rebuilds the layer (0.5 points).

# %% nbgrader="solution" grade_id="RotaryEmbedding"
class RotaryEmbedding(keras.layers.Layer):
    """Rotary position embeddings: pairs of features turned by position.

    Args:
        head_dim: features per head, even.
        base: the base of the angles' frequencies, base ** (-2i / head_dim).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        x: `(..., T, head_dim)`; row t is position start + t.
        start: the position of the first row (an int, default 0).

    Returns:
        `x` with each pair (2i, 2i + 1) at position m turned counter-clockwise by
        m * base ** (-2i / head_dim); same shape. No weights.

    Example:

    >>> rotary = RotaryEmbedding(head_dim=2)
    >>> rotary(np.array([[1.0, 0.0], [1.0, 0.0]], "float32"))  # positions 0 and 1
    (cos 0, sin 0) = (1, 0) and (cos 1, sin 1) = (0.5403, 0.8415)

    References:
        Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", section 3.4.
    """

    def __init__(self, head_dim, base=10_000.0, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(head_dim=head_dim)
        check_even("head_dim", head_dim)
        ### BEGIN SOLUTION
        self.head_dim = head_dim
        self.base = base
        ### END SOLUTION

    def call(self, x, start=0):
        ### BEGIN SOLUTION
        length = ops.shape(x)[-2]
        positions = ops.cast(ops.arange(length) + start, "float32")  # (T,)
        exponents = ops.arange(0, self.head_dim, 2, dtype="float32") / self.head_dim
        frequencies = ops.power(float(self.base), -exponents)  # (head_dim / 2,)
        angles = positions[:, None] * frequencies[None, :]  # (T, head_dim / 2)
        x = ops.convert_to_tensor(x)
        cos, sin = ops.cast(ops.cos(angles), x.dtype), ops.cast(ops.sin(angles), x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, head_dim / 2) each
        turned = ops.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
        return ops.reshape(turned, ops.shape(x))  # pairs back in place
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"head_dim": self.head_dim, "base": self.base})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_RotaryEmbedding"
# Visible check: hand-worked angles, the start, lengths, relative positions, the config.
def rotary_hint(turned):
    """A hint that names the mistake when rotary(ones) is turned clockwise or is the
    two-halves layout."""
    angles = np.arange(3.0)[:, None] * np.array([1.0, 0.1])  # positions 0, 1, 2; theta 1, 0.1
    clockwise = np.stack([np.cos(angles), -np.sin(angles)], axis=-1).reshape(3, 4)
    # The other layout pairs x[i] with x[i + 2] (the halves), pair i turned by m theta_i.
    first, second = ones[:, :2], ones[:, 2:]
    halves = np.concatenate([first * np.cos(angles) - second * np.sin(angles),
                             first * np.sin(angles) + second * np.cos(angles)], axis=-1)
    try:
        got = np.asarray(checks.to_numpy(turned), dtype=float)
    except Exception:  # noqa: BLE001 - the check below reports the shape or type
        got = np.zeros(0)
    if got.shape == clockwise.shape and np.allclose(got, clockwise, atol=1e-4):
        return "each pair is turned clockwise; turn it counter-clockwise, (1, 0) -> (cos, sin)."
    if got.shape == halves.shape and np.allclose(got, halves, atol=1e-4):
        return ("these are the two halves rotated (feature i paired with feature "
                "i + head_dim/2: GPT-NeoX's and keras-hub's layout); this lab pairs "
                "consecutive features (x[2i], x[2i+1]), as Meta's LLaMA code does.")
    return ("pair i = (x[2i], x[2i+1]) turns by m * base ** (-2i / head_dim), "
            "counter-clockwise: (cos, sin) for (1, 0); the pairs are consecutive "
            "features, not the two halves.")


rotary = RotaryEmbedding(head_dim=4, base=100.0)  # pair 0 turns by m, pair 1 by m / 10
ones = np.tile(np.array([1.0, 0.0, 1.0, 0.0], "float32"), (3, 1))  # positions 0, 1, 2
c, s = np.cos, np.sin
turned_ones = rotary(ones)
checks.check_close(turned_ones, [[1, 0, 1, 0], [c(1), s(1), c(0.1), s(0.1)],
                                 [c(2), s(2), c(0.2), s(0.2)]],
                   "RotaryEmbedding(4, base=100) on (1, 0, 1, 0) at positions 0, 1, 2",
                   hint=rotary_hint(turned_ones))
checks.check_close(rotary(np.array([[0.0, 1.0, 0.0, 1.0]], "float32"), start=1),
                   [[-s(1), c(1), -s(0.1), c(0.1)]],
                   "RotaryEmbedding: (0, 1) at start=1 becomes (-sin 1, cos 1)",
                   hint="x'[2i] = x[2i] cos - x[2i+1] sin; x'[2i+1] = x[2i] sin + x[2i+1] cos; "
                        "the first row is position start.")
# Far positions: float32 angles near 2000 radians are rounded by about 2e-4 (allowed).
checks.check_close(rotary(ones[:2], start=2000),
                   [[c(2000), s(2000), c(200), s(200)], [c(2001), s(2001), c(200.1), s(200.1)]],
                   "RotaryEmbedding at start=2000, positions 2000 and 2001", atol=1e-3,
                   hint="the angle of row t is (start + t) * theta_i: add start to the "
                        "positions before multiplying.")
x = np.random.default_rng(0).normal(size=(2, 3, 5, 8)).astype("float32")  # (B, H, T, D)
turned = checks.check_shape(RotaryEmbedding(head_dim=8)(x), x.shape,
                            "RotaryEmbedding(8) on (2, 3, 5, 8)")
checks.check_close(np.linalg.norm(turned, axis=-1), np.linalg.norm(x, axis=-1),
                   "rotations keep every vector's length")
checks.check_close(RotaryEmbedding(head_dim=8)(x[:, :, 2:], start=2), turned[:, :, 2:],
                   "start=2 on the last three rows: the same as those rows of the whole",
                   hint="row t is position start + t.")
# Scores depend on relative positions only: the query at m and the key at n,
# both rotated, give the same score for (m, n) = (3, 1) and (6, 4).
q, k = np.random.default_rng(1).normal(size=(2, 8)).astype("float32")
rotary8 = RotaryEmbedding(head_dim=8)
at = checks.to_numpy(rotary8(np.stack([q] * 7)))  # q at positions 0..6
kt = checks.to_numpy(rotary8(np.stack([k] * 7)))  # k at positions 0..6
checks.check_close([at[3] @ kt[1], at[5] @ kt[5]], [at[6] @ kt[4], q @ k],
                   "scores depend on m - n only: (3, 1) as (6, 4), and (5, 5) as unrotated")
checks.check_config(RotaryEmbedding, RotaryEmbedding(head_dim=6, base=500.0),
                    {"head_dim": 6, "base": 500.0})

# %% nbgrader="tests" grade_id="test_RotaryEmbedding"

# %% nbgrader="tests" grade_id="test_RotaryEmbedding__start"

# %% nbgrader="tests" grade_id="test_RotaryEmbedding__config"

# %% [markdown]
# ## 4. The decoder-only block, with a key/value cache
#
# Lab 4's decoder layer had three sublayers: causal self-attention,
# cross-attention to the encoder, feed-forward. Alone, the decoder has no encoder:
# keep self-attention and feed-forward. And put each normalisation **before** its
# sublayer (*pre-norm*, as GPT-2 and nearly every language model since):
#
# $$h = x + \operatorname{attention}(\operatorname{norm}_1(x)), \qquad
#   \text{out} = h + \operatorname{ffn}(\operatorname{norm}_2(h)).$$
#
# Why pre-norm: the residual stream `x -> h -> out` is never normalised, so
# gradients reach the first layers unchanged through the additions, and deep
# stacks train without lab 5's warm-up (Xiong et al. 2020). Post-norm (lab 4)
# normalises the stream itself after every sublayer.
#
# **The attention**, written out (lab 2 used `MultiHeadAttention`; here you need
# the keys and values themselves):
#
# 1. `n = norm1(x)`; `q, k, v` = `query_dense(n)`, `key_dense(n)`,
#    `value_dense(n)` (each `Dense(d_model)`), split into heads with
#    `split_heads`: `(B, num_heads, T, head_dim)`, `head_dim = d_model // num_heads`;
# 2. rotate `q` and `k` (not `v`) with `self.rotary`, a
#    `RotaryEmbedding(head_dim)`, from position `start`;
# 3. scores `q k^T / sqrt(head_dim)`, **causal**: the query at position `m` sees
#    the keys at positions `0 .. m`, never a later one (lab 4's look-ahead mask;
#    the others get `large_negative(scores.dtype)`, as in labs 1 and 4);
#    softmax over the keys (keep the weights in `self.last_attention_scores`,
#    `(B, num_heads, T, keys)`: section 7 plots them; they are not graded);
#    weights times `v`;
# 4. `merge_heads`, then `output_dense` (`Dense(d_model)`).
#
# **The key/value cache.** To write a new token, a language model needs its
# logits at the last position only. Its keys and values at the earlier positions
# were computed at the earlier steps, and (causal attention) they never change:
# keep them. `call(x, cache=None, return_cache=False)`:
#
# - `cache` is `None` or a tuple `(keys, values)`, each `(B, num_heads, P,
#   head_dim)`: the **rotated** keys and the values of the `P` positions before
#   `x`. Then `x` holds the positions `P, P + 1, ...`: rotate from `start = P`,
#   put the cached keys and values before the new ones (`ops.concatenate` on axis
#   2), and let the new query at position `P + t` see keys `0 .. P + t`.
# - with `return_cache=True` it returns `(out, (keys, values))`, the keys and
#   values of all `P + T` positions, ready for the next call; otherwise `out`
#   alone.
#
# So `block(x)` and, for any split, `out1, cache = block(x[:, :P],
# return_cache=True)` then `block(x[:, P:], cache=cache)` give the same outputs.
#
# Keep the sublayers' names: `norm1`, `query_dense`, `key_dense`, `value_dense`,
# `output_dense`, `rotary`, `norm2` and `ffn` (the provided `FeedForward(d_model,
# dff)`); both LayerNormalizations with `epsilon=1e-6`. The shipped weights and
# the grader set weights by these names.
#
# **What is graded:** the outputs without a cache, with the grader's weights
# (1.5 points); causality: changing the token at position `t` changes no output
# before `t` (0.5 points); the cache: outputs after a cache equal the full
# computation's, and the returned keys and values are those of every position
# (1 point); `get_config()` holding `d_model`, `num_heads` and `dff` (0.5 points).
# The weights in `self.last_attention_scores` are for section 7's plot only: not
# graded (an answer that computes the attention without them, with
# `ops.dot_product_attention`, loses no point, and no plot).

# %% nbgrader="solution" grade_id="DecoderOnlyBlock"
class DecoderOnlyBlock(keras.layers.Layer):
    """A pre-norm Transformer block: causal self-attention (rotary) and feed-forward.

    Args:
        d_model: size of the token vectors.
        num_heads: attention heads; d_model // num_heads must be even.
        dff: hidden units of the feed-forward block.
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        x: `(B, T, d_model)`, the positions after the cache.
        cache: None, or `(keys, values)`, each `(B, num_heads, P, head_dim)`: the
            rotated keys and the values of the P positions before `x`.
        return_cache: whether to return the keys and values too.

    Returns:
        `(B, T, d_model)`; with return_cache=True, `(out, (keys, values))` with
        the keys and values of all P + T positions.

    `get_config()` returns d_model, num_heads and dff under their own names.
    """

    def __init__(self, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff)
        check_even("d_model // num_heads", d_model // num_heads)
        ### BEGIN SOLUTION
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.head_dim = d_model // num_heads
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.query_dense = keras.layers.Dense(d_model, name="query_dense")
        self.key_dense = keras.layers.Dense(d_model, name="key_dense")
        self.value_dense = keras.layers.Dense(d_model, name="value_dense")
        self.output_dense = keras.layers.Dense(d_model, name="output_dense")
        self.rotary = RotaryEmbedding(self.head_dim, name="rotary")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.ffn = FeedForward(d_model, dff, name="ffn")
        self.last_attention_scores = None
        ### END SOLUTION

    def call(self, x, cache=None, return_cache=False):
        ### BEGIN SOLUTION
        x = ops.convert_to_tensor(x)
        start = 0 if cache is None else ops.shape(cache[0])[2]  # P, the cached positions
        normed = self.norm1(x)
        q = split_heads(self.query_dense(normed), self.num_heads)  # (B, H, T, head_dim)
        k = split_heads(self.key_dense(normed), self.num_heads)
        v = split_heads(self.value_dense(normed), self.num_heads)
        q, k = self.rotary(q, start=start), self.rotary(k, start=start)
        if cache is not None:
            k = ops.concatenate([ops.cast(cache[0], k.dtype), k], axis=2)  # (B, H, P + T, hd)
            v = ops.concatenate([ops.cast(cache[1], v.dtype), v], axis=2)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / math.sqrt(self.head_dim)
        query_positions = ops.arange(ops.shape(q)[2]) + start  # (T,)
        key_positions = ops.arange(ops.shape(k)[2])  # (P + T,)
        allowed = key_positions[None, :] <= query_positions[:, None]  # (T, P + T)
        scores = ops.where(allowed, scores, large_negative(scores.dtype))
        weights = ops.softmax(scores, axis=-1)  # (B, H, T, P + T)
        self.last_attention_scores = weights
        h = x + self.output_dense(merge_heads(ops.matmul(weights, v)))
        out = h + self.ffn(self.norm2(h))  # (B, T, d_model)
        return (out, (k, v)) if return_cache else out
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"d_model": self.d_model, "num_heads": self.num_heads, "dff": self.dff})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_DecoderOnlyBlock"
# Visible check: sublayers, shapes, weights, pre-norm, causality, the cache, the config.
block = DecoderOnlyBlock(d_model=16, num_heads=2, dff=32)
x = np.random.default_rng(2).normal(size=(2, 6, 16)).astype("float32")
out = checks.check_shape(block(x), (2, 6, 16), "DecoderOnlyBlock(16, 2, 32) on x (2, 6, 16)")
names = ["norm1", "query_dense", "key_dense", "value_dense", "output_dense", "rotary",
         "norm2", "ffn"]
missing = [name for name in names if not isinstance(getattr(block, name, None),
                                                    keras.layers.Layer)]
checks.check_true(not missing, "the sublayers norm1, query_dense, ..., ffn",
                  f"missing: {missing}", hint="create each in __init__ under that name.")
expected_count = 4 * (16 * 16 + 16) + 2 * 2 * 16 + (16 * 32 + 32) + (32 * 16 + 16)
checks.check_true(block.count_params() == expected_count,
                  f"{expected_count} weights: four projections, two norms, the feed-forward",
                  f"found {block.count_params()}",
                  hint="Dense(d_model) for each of query, key, value and output; no "
                       "MultiHeadAttention, no other layer with weights.")
# Causal: changing the last two tokens changes no output before them.
changed = x.copy()
changed[:, 4:] += 1.0
checks.check_close(checks.to_numpy(block(changed))[:, :4], out[:, :4],
                   "causal: a change at positions 4 and 5 changes no output at 0 .. 3",
                   hint="the query at position m sees the keys 0 .. m: keep the scores where "
                        "key position <= query position, large_negative(scores.dtype) elsewhere, "
                        "before the softmax.")
checks.check_true(not np.allclose(checks.to_numpy(block(changed))[:, 4:], out[:, 4:]),
                  "and the outputs at 4 and 5 change", "they did not",
                  hint="a position must see itself: key position <= query position.")
# Pre-norm: the output at position 0 with every projection and the FFN silenced is x.
quiet = DecoderOnlyBlock(d_model=16, num_heads=2, dff=32)
quiet(x)
quiet.output_dense.set_weights([np.zeros((16, 16), "float32"), np.zeros(16, "float32")])
quiet.ffn.dense2.set_weights([np.zeros((32, 16), "float32"), np.zeros(16, "float32")])
checks.check_close(quiet(x), x, "pre-norm: with the sublayers silenced the block returns x",
                   hint="out = h + ffn(norm2(h)) with h = x + attention(norm1(x)): the "
                        "residual stream itself is never normalised.")
# The norms: LayerNormalization(epsilon=1e-6), as the shipped weights were trained.
checks.check_true(all(isinstance(norm, keras.layers.LayerNormalization)
                      and math.isclose(norm.epsilon, 1e-6) for norm in (block.norm1, block.norm2)),
                  "norm1 and norm2: LayerNormalization(epsilon=1e-6)",
                  f"epsilon {getattr(block.norm1, 'epsilon', None)} and "
                  f"{getattr(block.norm2, 'epsilon', None)}",
                  hint="keras.layers.LayerNormalization(epsilon=1e-6): Keras's default is 1e-3.")
# The attention weights kept for section 7's plot: not graded, so a note, never a failure.
try:
    kept_weights = checks.to_numpy(block.last_attention_scores)
except Exception:  # noqa: BLE001 - missing, None or not an array: the plot cannot use it
    kept_weights = None
if kept_weights is None or kept_weights.shape != (2, 2, 6, 6) or \
        not np.allclose(kept_weights.sum(axis=-1), 1.0, atol=1e-4):
    print("Note (not graded): your DecoderOnlyBlock does not keep its attention weights "
          "(the softmax's output, (B, num_heads, T, keys)) in self.last_attention_scores; "
          "section 7's plot needs them.")
# The outputs, worked out here in NumPy from the block's own sublayers (its rotary too):
# q and k rotated (v not), scores / sqrt(head_dim), the future masked, softmax, times v.
normed = block.norm1(x)
q_turned, k_turned = (checks.to_numpy(block.rotary(split_heads(dense(normed), 2)))
                      for dense in (block.query_dense, block.key_dense))
v_heads = checks.to_numpy(split_heads(block.value_dense(normed), 2))
scores = q_turned.astype("float64") @ k_turned.transpose(0, 1, 3, 2) / np.sqrt(8)
scores = np.where(np.tril(np.ones((6, 6), bool)), scores, -np.inf)
attention = np.exp(scores - scores.max(axis=-1, keepdims=True))
attention /= attention.sum(axis=-1, keepdims=True)
h = x + checks.to_numpy(block.output_dense(merge_heads((attention @ v_heads).astype("float32"))))
checks.check_close(out, h + checks.to_numpy(block.ffn(block.norm2(h))),
                   "the outputs: h = x + output_dense(attention(norm1(x))), h + ffn(norm2(h))",
                   hint="rotate q and k (not v) with self.rotary, divide the scores by "
                        "sqrt(head_dim), mask the keys after each query, softmax over the keys.")
# The cache: the first 4 positions, then the last 2 after them.
first, cache = checks.check_tuple(block(x[:, :4], return_cache=True), 2,
                                  "block(x[:, :4], return_cache=True)",
                                  hint="return (out, (keys, values)) when return_cache is True.")
keys, values = checks.check_tuple(cache, 2, "the cache: (keys, values)")
checks.check_shape(keys, (2, 2, 4, 8), "the cached keys: (B, num_heads, 4, head_dim)")
checks.check_close(keys, k_turned[:, :, :4], "the cached keys: rotated, positions 0 .. 3",
                   hint="cache the keys after the rotation: the next call puts them, as they "
                        "are, before its own rotated keys.")
checks.check_close(values, v_heads[:, :, :4], "the cached values: positions 0 .. 3, not rotated")
checks.check_close(first, out[:, :4], "block(x[:, :4]): the first four outputs")
rest, cache = block(x[:, 4:], cache=cache, return_cache=True)
checks.check_close(rest, out[:, 4:], "block(x[:, 4:], cache=...): the last two outputs",
                   hint="rotate the new q and k from start = P (the cached length), put the "
                        "cached keys and values before the new ones, and let the new query "
                        "at P + t see keys 0 .. P + t.")
checks.check_shape(cache[1], (2, 2, 6, 8), "the returned values: all 6 positions")
checks.check_config(DecoderOnlyBlock, DecoderOnlyBlock(d_model=12, num_heads=3, dff=20),
                    {"d_model": 12, "num_heads": 3, "dff": 20})

# %% nbgrader="tests" grade_id="test_DecoderOnlyBlock"

# %% nbgrader="tests" grade_id="test_DecoderOnlyBlock__causal"

# %% nbgrader="tests" grade_id="test_DecoderOnlyBlock__cache"

# %% nbgrader="tests" grade_id="test_DecoderOnlyBlock__config"

# %% [markdown]
# ## 5. MiniGPT
#
# The whole model, from token ids `(B, T)` to next-token logits `(B, T,
# vocab_size)`:
#
# 1. `token_embedding`, a `keras.layers.Embedding(vocab_size, d_model)`; no
#    position vector (the blocks rotate by position) and no scaling;
# 2. `blocks`, a list of `num_layers` separate `DecoderOnlyBlock(d_model,
#    num_heads, dff)`, one after the other;
# 3. `final_norm`, a `LayerNormalization(epsilon=1e-6)`: with pre-norm blocks the
#    residual stream is never normalised, so the model normalises it once at the
#    end;
# 4. the output layer **tied** to the embedding: `logits = x @ E^T`, with `E` the
#    embedding's table (`self.token_embedding.embeddings`, `(vocab_size,
#    d_model)`), no bias. The same vectors read tokens in and write them out
#    (Press & Wolf 2017); it saves `vocab_size * d_model` weights.
#
# `call(token_ids, cache=None, return_cache=False, training=None)`: `cache` is
# `None` or the list of the blocks' caches, one per block, as this call returned
# them; with `return_cache=True` it returns `(logits, caches)`, a list of
# `num_layers` `(keys, values)` tuples. Padding needs no mask here: sentences are
# padded at the end, and a causal model never looks ahead, so no real token sees
# padding (the loss, section 6, ignores what is predicted at padded positions).
#
# **What is graded:** the logits with the grader's weights and the number of
# weights (1.5 points); the cache: `return_cache=True` returns one cache per block,
# that block's `(keys, values)`, each `(B, num_heads, positions, head_dim)`, and a call
# given caches computes from their keys and values (the grader also hands it caches of
# its own), its logits equal to the full computation's (0.5 points);
# `get_config()` holding the five constructor arguments (0.5 points).

# %% nbgrader="solution" grade_id="MiniGPT"
class MiniGPT(keras.Model):
    """A decoder-only language model: embedding, pre-norm blocks, tied output.

    Args:
        vocab_size: number of token ids.
        num_layers: number of DecoderOnlyBlocks.
        d_model, num_heads, dff: each block's sizes.
        **kwargs: other `keras.Model` arguments (`name`).

    Call arguments:
        token_ids: integer `(B, T)`, the positions after the cache.
        cache: None or the list of the blocks' caches (as returned).
        return_cache: whether to return the caches too.
        training: unused (no dropout); kept for Keras.

    Returns:
        logits `(B, T, vocab_size)`; with return_cache=True, `(logits, caches)`.
    """

    def __init__(self, vocab_size, num_layers, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                                 num_heads=num_heads, dff=dff)
        ### BEGIN SOLUTION
        self.vocab_size, self.num_layers = vocab_size, num_layers
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model,
                                                      name="token_embedding")
        self.blocks = [DecoderOnlyBlock(d_model, num_heads, dff, name=f"block_{index}")
                       for index in range(num_layers)]
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")
        ### END SOLUTION

    def call(self, token_ids, cache=None, return_cache=False, training=None):
        ### BEGIN SOLUTION
        x = self.token_embedding(token_ids)  # (B, T, d_model)
        caches = []
        for index, block in enumerate(self.blocks):
            x, block_cache = block(x, cache=None if cache is None else cache[index],
                                   return_cache=True)
            caches.append(block_cache)
        x = self.final_norm(x)
        table = self.token_embedding.embeddings  # (vocab_size, d_model)
        logits = ops.matmul(x, ops.transpose(table))  # (B, T, vocab_size)
        return (logits, caches) if return_cache else logits
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"vocab_size": self.vocab_size, "num_layers": self.num_layers,
                       "d_model": self.d_model, "num_heads": self.num_heads, "dff": self.dff})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_MiniGPT"
# Visible check: a keras.Model, shapes, weights (tied), the cache, the config.
tiny = MiniGPT(vocab_size=VOCABULARY.size, num_layers=2, d_model=16, num_heads=2, dff=32)
ids = train_ids[:2, :12]
logits = checks.check_shape(tiny(ids), (2, 12, VOCABULARY.size),
                            "MiniGPT(28, 2 layers, d_model 16) on ids (2, 12)")
checks.check_true(isinstance(tiny, keras.Model), "MiniGPT is a keras.Model", "it is not",
                  hint="class MiniGPT(keras.Model).")
blocks = list(getattr(tiny, "blocks", []))
checks.check_true(len(blocks) == 2 and all(isinstance(b, DecoderOnlyBlock) for b in blocks)
                  and blocks[0] is not blocks[1], "blocks: 2 separate DecoderOnlyBlocks",
                  f"found {len(blocks)}", hint="[DecoderOnlyBlock(...) for _ in range(num_layers)]")
one_block = 4 * (16 * 16 + 16) + 2 * 2 * 16 + (16 * 32 + 32) + (32 * 16 + 16)
expected_count = VOCABULARY.size * 16 + 2 * one_block + 2 * 16
checks.check_true(tiny.count_params() == expected_count,
                  f"{expected_count} weights: the embedding, 2 blocks, the final norm",
                  f"found {tiny.count_params()}",
                  hint="the output layer is tied: logits = x @ embeddings^T, no Dense and no "
                       "bias of its own.")
checks.check_true(np.all(np.isfinite(logits)), "the logits are finite", "they are not")
final_norm = getattr(tiny, "final_norm", None)
checks.check_true(isinstance(final_norm, keras.layers.LayerNormalization)
                  and math.isclose(final_norm.epsilon, 1e-6),
                  "final_norm: LayerNormalization(epsilon=1e-6)",
                  f"found {type(final_norm).__name__} with epsilon "
                  f"{getattr(final_norm, 'epsilon', None)}",
                  hint="self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6): "
                       "Keras's default epsilon is 1e-3.")
# The logits, composed here from tiny's own layers: the embedding's vectors (no scaling),
# the blocks in order, final_norm, then the embedding's table transposed (tied).
table = checks.to_numpy(tiny.token_embedding.embeddings)  # (vocab_size, d_model)
stream = table[ids]
for each_block in blocks:
    stream = each_block(stream)
checks.check_close(logits, checks.to_numpy(tiny.final_norm(stream)) @ table.T,
                   "the logits: final_norm(blocks(token_embedding(ids))) @ embeddings^T",
                   hint="no scaling of the embedding's vectors, no position vector, no "
                        "softmax: the logits are the last norm's output times E^T.")
prompt_logits, caches = checks.check_tuple(tiny(ids[:, :8], return_cache=True), 2,
                                           "tiny(ids[:, :8], return_cache=True)",
                                           hint="return (logits, caches) with return_cache.")
checks.check_true(isinstance(caches, (list, tuple)) and len(caches) == 2,
                  "the caches: one per block", f"got {type(caches).__name__}")
first_keys, _ = checks.check_tuple(caches[0], 2, "caches[0]: block 0's (keys, values)",
                                   hint="each block's cache is the (keys, values) its "
                                        "DecoderOnlyBlock returned, not the token ids.")
checks.check_shape(first_keys, (2, 2, 8, 8),
                   "block 0's cached keys: (B, num_heads, 8 positions, head_dim)")
checks.check_close(tiny(ids[:, 8:], cache=caches), logits[:, 8:],
                   "tiny(ids[:, 8:], cache=caches): the full computation's last 4 logits",
                   hint="give block i its own cache, cache[i], and collect the new ones.")
checks.check_config(MiniGPT, MiniGPT(vocab_size=9, num_layers=3, d_model=8, num_heads=2, dff=4),
                    {"vocab_size": 9, "num_layers": 3, "d_model": 8, "num_heads": 2, "dff": 4})

# %% nbgrader="tests" grade_id="test_MiniGPT"

# %% nbgrader="tests" grade_id="test_MiniGPT__cache"

# %% nbgrader="tests" grade_id="test_MiniGPT__config"

# %% [markdown]
# ## 6. The next-token loss and perplexity
#
# A language model is trained to predict each token from the ones before it. The
# logits at position `t` predict the token at `t + 1`, so the targets are the ids
# shifted left by one: compare `logits[:, :-1]` with `token_ids[:, 1:]` (the last
# position predicts nothing we know, the first token is never predicted). The
# loss is the cross-entropy averaged over the targets that are **not padding**
# (`pad_id`), over the whole batch (not sentence by sentence):
#
# $$\mathcal{L} = \frac{\sum_{b,t} m_{b,t+1}\big(-\log p_{b,t}(y_{b,t+1})\big)}
#   {\sum_{b,t} m_{b,t+1}}, \qquad m = [\,y \ne \text{pad\_id}\,].$$
#
# `next_token_loss(logits, token_ids, pad_id=0)` returns that scalar with
# `keras.ops`: `logits` are raw scores, not probabilities. It trains the model
# (section 7), so it must stay **differentiable**: `model.fit` passes it tensors
# (traced, under TensorFlow and JAX) and takes the gradient of its result with
# respect to the logits, so compute on those tensors with `keras.ops`, without
# NumPy or `float()` (a NumPy loss gives the right number and no gradient).
#
# **What is graded:** the loss on padded batches, with other `pad_id`s (1.5
# points); differentiable: the gradient of the loss with respect to the logits,
# taken as `model.fit` takes it (0.5 points).

# %% nbgrader="solution" grade_id="next_token_loss"
def next_token_loss(logits, token_ids, pad_id=0):
    """Mean cross-entropy of each next token, padding ignored.

    Args:
        logits: float `(B, T, V)`; position t predicts token t + 1.
        token_ids: integer `(B, T)`, padded with pad_id.
        pad_id: the padding id.

    Returns:
        A scalar tensor: the mean over the non-padding targets token_ids[:, 1:],
        computed with keras.ops so that it stays differentiable with respect to the
        logits (model.fit trains through it).
    """
    ### BEGIN SOLUTION
    targets = token_ids[:, 1:]  # (B, T - 1)
    per_token = keras.losses.sparse_categorical_crossentropy(
        targets, logits[:, :-1, :], from_logits=True)  # (B, T - 1)
    mask = ops.cast(ops.not_equal(targets, pad_id), per_token.dtype)
    return ops.sum(per_token * mask) / ops.maximum(ops.sum(mask), 1.0)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_next_token_loss"
# Visible check: hand-worked values. Uniform logits over 4 ids cost log 4 per target.
token_ids = np.array([[1, 3, 2, 0]])  # start, 3, end, padding: targets 3 and 2 (not 0)
logits = np.zeros((1, 4, 4), "float32")
logits[0, 2] = [9.0, -9.0, 0.0, 0.0]  # predicts the padding: must not count
logits[0, 3] = [0.0, 5.0, 5.0, 0.0]  # the last position predicts nothing
checks.check_close(next_token_loss(logits, token_ids), np.log(4.0),
                   "next_token_loss: two targets, uniform logits",
                   hint="compare logits[:, :-1] with token_ids[:, 1:] and leave out the "
                        "targets equal to pad_id.")
logits[0, 0] = [0.0, 0.0, 0.0, np.log(7.0)]  # predicts the 3 with probability 7/10
checks.check_close(next_token_loss(logits, token_ids), (-np.log(0.7) + np.log(4.0)) / 2,
                   "next_token_loss: the logits at position 0 predict the token at 1",
                   hint="the logits at t predict token t + 1: shift the targets left.")
checks.check_close(next_token_loss(logits, np.array([[1, 3, 2, 1]]), pad_id=1),
                   (-np.log(0.7) + np.log(4.0)) / 2, "next_token_loss with pad_id=1",
                   hint="use pad_id, not 0, to find the padding.")
batch = np.zeros((2, 4, 4), "float32")
batch[0] = logits[0]
pair_ids = np.array([[1, 3, 2, 0], [1, 2, 2, 2]])
checks.check_close(next_token_loss(batch, pair_ids), (-np.log(0.7) + 4 * np.log(4.0)) / 5,
                   "next_token_loss: 2 and 3 targets, averaged over the 5",
                   hint="sum over every real target of the batch and divide by their number.")
# Differentiable: model.fit passes tensors and trains through the gradient, which must
# reach the logits: (softmax(logits[b, t]) - one_hot(target)) / 5 at the 5 real targets,
# 0 at the padding and at the last position.
real = pair_ids[:, 1:] != 0
predicted = np.exp(batch[:, :-1]) / np.exp(batch[:, :-1]).sum(axis=-1, keepdims=True)
wanted = np.zeros(batch.shape)
wanted[:, :-1] = (predicted - np.eye(4)[pair_ids[:, 1:]]) * real[..., None] / real.sum()
_ = checks.check_gradient(next_token_loss, batch, wanted,
                          "next_token_loss is differentiable: its gradient with respect to "
                          "the logits", others=(pair_ids.astype("int32"),),
                          hint="model.fit gives the loss tensors and needs its gradient: "
                               "compute with keras.ops on the tensors given (no np.asarray, "
                               "ops.convert_to_numpy or float() on them) and return the "
                               "tensor.")

# %% nbgrader="tests" grade_id="test_next_token_loss"

# %% nbgrader="tests" grade_id="test_next_token_loss__differentiable"

# %% [markdown]
# **Perplexity** is the exponential of that loss over a whole corpus: the number
# of equally likely tokens the model is, on average, hesitating between. A model
# that knows nothing has the vocabulary's size (28); a perfect one has this
# language's floor (section 1).
#
# Write `perplexity(model, token_ids, batch_size=64, pad_id=0)`: run
# `model(batch, training=False)` on the corpus `batch_size` rows at a time and
# return `exp(total cross-entropy / number of targets)` over **every** non-padding
# target of the corpus, as a Python float. Batches hold different numbers of
# targets: the mean of the batches' losses weighs them wrongly (weigh each by its
# number of targets). `next_token_loss` may help.
#
# **What is graded:** the perplexity of hand-made models (no weights) on padded
# corpora, with several batch sizes and `pad_id`s (1.5 points).

# %% nbgrader="solution" grade_id="perplexity"
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    """exp(mean next-token cross-entropy) over every non-padding target of a corpus.

    Args:
        model: called as `model(token_ids, training=False)`, returns logits `(B, T, V)`.
        token_ids: integer `(N, T)`, padded with pad_id.
        batch_size: rows per call of the model.
        pad_id: the padding id.

    Returns:
        A float >= 1.
    """
    ### BEGIN SOLUTION
    token_ids = np.asarray(ops.convert_to_numpy(token_ids))
    total, count = 0.0, 0
    for first in range(0, len(token_ids), batch_size):
        batch = token_ids[first:first + batch_size]
        targets = int(np.sum(batch[:, 1:] != pad_id))
        if targets == 0:
            continue
        loss = next_token_loss(model(batch, training=False), batch, pad_id=pad_id)
        total += float(ops.convert_to_numpy(loss)) * targets
        count += targets
    if count == 0:
        raise ValueError("every target is padding: there is nothing to predict.")
    return math.exp(total / count)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_perplexity"
# Visible check: a hand-made model that gives every id the same logit has the
# vocabulary's size as perplexity; one that is sure of the next id, 1.
class UniformModel:
    """Equal logits for the 5 ids, at every position."""

    def __call__(self, token_ids, training=False):
        return np.zeros(np.shape(token_ids) + (5,), "float32")


class CopyModel:
    """Predicts that the next id is this one plus 1, with probability 0.9."""

    def __call__(self, token_ids, training=False):
        ids = checks.to_numpy(token_ids).astype(int)
        logits = np.full(ids.shape + (5,), np.log(0.1 / 4), "float32")
        np.put_along_axis(logits, ((ids + 1) % 5)[..., None], np.log(0.9), axis=-1)
        return logits


# Your perplexity may call your next_token_loss: if a case fails while next_token_loss
# fails its own check, the failure is not counted against perplexity (the grader tests
# perplexity with a correct next_token_loss); fix next_token_loss first.
with checks.relying_on("perplexity", "next_token_loss", lab="lab6", scope=globals()):
    corpus = np.array([[1, 2, 3, 4, 0], [1, 2, 0, 0, 0], [1, 2, 3, 0, 0]])  # 3 + 1 + 2 targets
    checks.check_close(perplexity(UniformModel(), corpus), 5.0,
                       "perplexity of a uniform model over 5 ids: 5",
                       hint="return math.exp of the mean cross-entropy over the targets.")
    checks.check_close(perplexity(CopyModel(), corpus), 1 / 0.9,
                       "perplexity of a model right with probability 0.9: 1 / 0.9")
    padded_with_4 = np.array([[1, 2, 3, 4, 4], [1, 3, 4, 4, 4]])  # targets 2, 3, 3 (not 4)
    checks.check_close(perplexity(CopyModel(), padded_with_4, pad_id=4),
                       math.exp(-(2 * np.log(0.9) + np.log(0.1 / 4)) / 3),
                       "perplexity with pad_id=4: two targets right, one wrong",
                       hint="leave out the targets equal to pad_id (here 4, not 0).")
    mixed = np.array([[1, 3, 0, 0, 0], [1, 2, 3, 4, 0]])  # the first target wrong, 3 right
    wanted = math.exp(-(np.log(0.1 / 4) + 3 * np.log(0.9)) / 4)
    checks.check_close(perplexity(CopyModel(), mixed, batch_size=1), wanted,
                       "perplexity with batch_size=1: every target weighs the same",
                       hint="sum the batches' losses weighted by their number of targets; "
                            "do not average the batches' means.")

# %% nbgrader="tests" grade_id="test_perplexity"

# %% [markdown]
# ## 7. Training, or the shipped weights
#
# Two blocks, `d_model` 64, 4 heads: about 70 000 weights. Adam at 0.003, batches
# of 64, 4 epochs of the 8 000 training sentences: about 30 s of `model.fit` on a
# 2-core Intel Xeon CPU with TensorFlow (29 to 33 s measured). With `TRAIN = True`
# the cell below trains your `MiniGPT` with your `next_token_loss` (Keras calls the
# loss as `loss(y_true, y_pred)`: here the ids, as float32, which the cell turns
# back into integers, and the logits); otherwise it loads the
# weights that come with `labkit` into your model, which works when your
# attribute names are those of sections 4 and 5. Either way the validation
# perplexity, measured with your `perplexity`, is printed against the floor.

# %% nbgrader="locked" grade_id="train_or_load" grading="skip"
HYPERPARAMETERS = {"vocab_size": VOCABULARY.size, "num_layers": 2, "d_model": 64,
                   "num_heads": 4, "dff": 128}
TRAINING = {"epochs": 4, "batch_size": 64, "learning_rate": 3e-3}


def load_shipped_weights(model, name):
    """Load the weights `name` that come with labkit; returns their metadata."""
    weights_path, metadata = datasets.pretrained_checkpoint(name)
    try:
        model.load_weights(weights_path)
    except Exception as error:  # a model whose parts are named differently
        raise RuntimeError(
            f"The trained weights {weights_path.name} do not fit your MiniGPT: keep the "
            "attribute names token_embedding, blocks and final_norm, and the blocks' "
            "sublayer names, or set TRAIN = True to train your own.") from error
    return metadata


keras.utils.set_random_seed(0)
language_model = MiniGPT(**HYPERPARAMETERS)
language_model(train_ids[:1])  # builds the weights
print(f"{language_model.count_params()} weights")
if TRAIN:
    language_model.compile(optimizer=keras.optimizers.Adam(TRAINING["learning_rate"]),
                           # Keras hands the loss the ids as float32: back to integers
                           loss=lambda ids, logits: next_token_loss(logits,
                                                                    ops.cast(ids, "int32")))
    started = time.perf_counter()
    history = language_model.fit(train_ids, train_ids, validation_data=(validation_ids,
                                                                        validation_ids),
                                 epochs=TRAINING["epochs"],
                                 batch_size=TRAINING["batch_size"], verbose=2)
    training_seconds = time.perf_counter() - started
    curves = {name: [float(v) for v in values] for name, values in history.history.items()}
    language_model.save_weights("tiny_gpt.weights.h5")
    print(f"trained in {training_seconds:.0f} s; weights saved to tiny_gpt.weights.h5")
else:
    checkpoint = load_shipped_weights(language_model, "tiny_gpt")
    curves = checkpoint["history"]
    training_seconds = checkpoint["training_seconds"]
    print(f"loaded the shipped weights: trained for {len(curves['loss'])} epochs in "
          f"{training_seconds:.0f} s on a {checkpoint['trained_on']}")
validation_perplexity = perplexity(language_model, validation_ids, batch_size=256)
print(f"validation perplexity {validation_perplexity:.3f} (the floor: "
      f"{floor_perplexity:.3f}; a model that knows nothing: {VOCABULARY.size})")

# %% nbgrader="locked" grade_id="training_curves" grading="skip"
figure, ax = plt.subplots(figsize=(5, 3.5))
epochs = np.arange(1, len(curves["loss"]) + 1)
ax.plot(epochs, np.exp(curves["loss"]), "o-", label="training")
ax.plot(epochs, np.exp(curves["val_loss"]), "o-", label="validation")
ax.axhline(floor_perplexity, color="grey", linestyle="--", label="the floor")
ax.set(xlabel="epoch", ylabel="perplexity", title="perplexity per epoch", yscale="log")
ax.legend()
ax.grid(alpha=0.3)
plt.tight_layout()
plt.show()

# %% [markdown]
# Where does a trained head look? Each row is a character of the sentence, each
# column a character it may attend to; the upper triangle is empty (causal).
# Heads specialise: some look at the previous character or two (spelling), some
# at the start of the current word or at the last space (which word comes next).

# %% nbgrader="locked" grade_id="demo_attention" grading="skip"
sentence = validation_sentences[0]
ids = language.encode([sentence], length=len(sentence) + 2)
language_model(ids)
labels = ["<s>"] + list(sentence) + ["</s>"]
stored = getattr(language_model.blocks[-1], "last_attention_scores", None)
if stored is None:
    print("No plot: your DecoderOnlyBlock does not keep its attention weights in "
          "self.last_attention_scores; the plot needs them (section 4; not graded).")
else:
    figure, axes = plt.subplots(1, 2, figsize=(13, 6))
    for head, ax in zip((0, 1), axes):
        weights = checks.to_numpy(stored)[0, head]
        plots.heatmap(weights, labels, labels, title=f"last block, head {head}", ax=ax)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## 8. Sampling: top-k and top-p
#
# Lab 5 sampled from `softmax(logits / T)`. With a large vocabulary, the long
# tail of unlikely tokens together holds real probability, and sampling from it
# now and then derails a text. Two filters cut the tail before sampling, each
# setting the logits it removes to `-inf` (`large_negative(logits.dtype)` works
# too), so their probability becomes 0:
#
# - **top-k** keeps the `k` largest logits of each row (Fan et al. 2018). Ties:
#   keep every logit at least as large as the `k`-th largest, so at least `k`
#   survive;
# - **top-p**, *nucleus* sampling (Holtzman et al. 2020), keeps the smallest set
#   of most probable tokens whose total probability reaches `p`: sort by
#   probability, largest first, and keep tokens until the running total is at
#   least `p`, **the token that crosses `p` included** (so the most probable
#   token always stays). Equal probabilities: the lower id first. The set adapts:
#   few tokens where the model is sure, many where it hesitates.
#
# Both take logits `(..., V)` (one row, or a batch of rows; NumPy or a tensor)
# and return the same shape, the kept logits unchanged. The probabilities of
# top-p are those of the logits given: a temperature is applied before, by the
# caller.
#
# **What is graded:** `top_k_filter`: the distributions `softmax(filtered)` on
# batches with ties, `k` from 1 to `V` (1.5 points). `top_p_filter`: the
# distributions on batches, `p` from small to 1, the crossing token kept, equal
# probabilities taken the lower id first (1.5 points).

# %% nbgrader="solution" grade_id="top_k_filter"
def top_k_filter(logits, k):
    """Keep the k largest logits of each row (ties with the k-th kept); -inf elsewhere.

    Args:
        logits: float `(..., V)`.
        k: an int >= 1 (k >= V keeps everything).

    Returns:
        The same shape: the kept logits unchanged, the others -inf.
    """
    ### BEGIN SOLUTION
    if k < 1:
        raise ValueError(f"k must be 1 or more, got {k}.")
    logits = np.asarray(ops.convert_to_numpy(logits)).astype("float32")
    k = min(int(k), logits.shape[-1])
    kth_largest = np.sort(logits, axis=-1)[..., -k][..., None]  # (..., 1)
    return np.where(logits >= kth_largest, logits, -np.inf).astype("float32")
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_top_k_filter"
# Visible check: hand-worked rows, ties, a batch, k >= V.
row = np.array([1.0, 3.0, 2.0, 0.5, 2.0], "float32")
inf = -np.inf


def probabilities(filtered):
    """softmax of filtered logits, removed ones at 0."""
    z = checks.to_numpy(filtered).astype("float64")
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def softmax_of(values):
    z = np.exp(np.asarray(values, "float64") - np.max(values))
    return z / z.sum()


checks.check_close(probabilities(top_k_filter(row, 1)), [0, 1, 0, 0, 0],
                   "top_k_filter(k=1): the largest only")
checks.check_close(probabilities(top_k_filter(row, 2)), softmax_of([inf, 3, 2, inf, 2]),
                   "top_k_filter(k=2): 3 and both 2s (a tie with the 2nd largest is kept)",
                   hint="keep every logit >= the k-th largest value of its row.")
checks.check_close(probabilities(top_k_filter(row, 4)), softmax_of([1, 3, 2, inf, 2]),
                   "top_k_filter(k=4): all but the smallest")
checks.check_close(probabilities(top_k_filter(row, 9)), softmax_of(row), "top_k_filter(k=9 > V)")
checks.check_close(checks.to_numpy(top_k_filter(row, 3))[[1, 2, 4]], [3, 2, 2],
                   "top_k_filter: the kept logits unchanged")
batch = np.stack([row, row[::-1] - 2.0])  # the second row's logits all below the first's max
_ = checks.check_close(probabilities(top_k_filter(batch, 1)), [[0, 1, 0, 0, 0], [0, 0, 0, 1, 0]],
                       "top_k_filter on a batch (2, 5): each row on its own",
                       hint="find the k-th largest along the last axis only.")

# %% nbgrader="tests" grade_id="test_top_k_filter"

# %% nbgrader="solution" grade_id="top_p_filter"
def top_p_filter(logits, p):
    """Keep the fewest most probable tokens whose probability reaches p; -inf elsewhere.

    Args:
        logits: float `(..., V)`.
        p: in (0, 1]; the token whose probability takes the running total to p
            or beyond is kept, and so is the most probable one. Tokens are taken
            most probable first, equal probabilities the lower id first.

    Returns:
        The same shape: the kept logits unchanged, the others -inf.
    """
    ### BEGIN SOLUTION
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}.")
    logits = np.asarray(ops.convert_to_numpy(logits)).astype("float32")
    z = logits.astype("float64")
    probabilities = np.exp(z - z.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    order = np.argsort(-probabilities, axis=-1, kind="stable")  # most probable first
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    before = np.cumsum(ranked, axis=-1) - ranked  # the total of the tokens ranked before
    keep_ranked = before < p  # still short of p when this token comes: keep it
    keep = np.zeros_like(keep_ranked)
    np.put_along_axis(keep, order, keep_ranked, axis=-1)
    return np.where(keep, logits, -np.inf).astype("float32")
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_top_p_filter"
# Visible check: probabilities 0.5, 0.25, 0.15, 0.1 (ids 2, 0, 3, 1), from logits that
# are not log-probabilities (the logs plus 2: the softmax is the same).
row = np.log(np.array([0.25, 0.1, 0.5, 0.15])) + 2.0
for p, kept, why in [(0.3, [2], "0.5 reaches 0.3"),
                     (0.6, [2, 0], "0.5 is short of 0.6; 0.5 + 0.25 crosses it: both kept"),
                     (0.8, [2, 0, 3], "0.75 is short of 0.8: the 0.15 that crosses it kept"),
                     (1.0, [0, 1, 2, 3], "p = 1 keeps everything")]:
    expected = np.zeros(4)
    expected[kept] = np.exp(row[kept]) / np.exp(row[kept]).sum()
    checks.check_close(probabilities(top_p_filter(row, p)), expected,
                       f"top_p_filter(p={p}): keeps ids {kept} ({why})",
                       hint="the probabilities are the softmax of the logits; sort them, "
                            "largest first; keep a token while the total of the tokens BEFORE "
                            "it is still below p (the crossing token stays).")
checks.check_close(probabilities(top_p_filter(np.stack([row, row[::-1]]), 0.6)),
                   [[1 / 3, 0, 2 / 3, 0], [0, 2 / 3, 0, 1 / 3]],
                   "top_p_filter on a batch (2, 4): each row on its own",
                   hint="softmax and sort along the last axis only.")
# Equal probabilities, the lower id first: after id 1 (0.4), ids 0 and 2 tie at 0.25.
# With p = 0.6 the crossing falls inside the tie: id 0 crosses p and stays, id 2 does not.
tied = np.log(np.array([0.25, 0.4, 0.25, 0.1])).astype("float32")
_ = checks.check_close(probabilities(top_p_filter(tied, 0.6)), [0.25 / 0.65, 0.4 / 0.65, 0, 0],
                       "top_p_filter(p=0.6) with ids 0 and 2 tied at 0.25: id 0 kept, "
                       "id 2 removed (equal probabilities: the lower id first)",
                       hint="order the tokens by probability, largest first, and equal "
                            "probabilities by id, lower first: np.argsort(-probabilities, "
                            "kind='stable') (sorting upwards and reversing puts the higher "
                            "id first).")

# %% nbgrader="tests" grade_id="test_top_p_filter"

# %% [markdown]
# What the filters do to one of the trained model's distributions: the next
# character after "the quick ", at temperature 1, after top-k with k = 3, and after
# top-p with p = 0.9. A noun comes next, and the 8 nouns (cat, dog, fox, hen, bird,
# mouse, horse, frog) start with 6 letters, so the model hesitates between b, c, d,
# f, h and m; the language gives f and h 2/8 each (fox and frog, hen and horse) and
# the other four 1/8. (On the axis, ␣ is the space; PAD, SOS and EOS the special ids.)

# %% nbgrader="locked" grade_id="demo_filters" grading="skip"
prefix = "the quick "
prefix_ids = language.encode([prefix], length=len(prefix) + 2)[:, :-1]  # no end token
next_logits = checks.to_numpy(language_model(prefix_ids))[0, -1]
# Short tick labels: PAD, SOS, EOS for the special ids, ␣ for the space.
tick_labels = [token.strip("<>") if len(token) > 1 else token.replace(" ", "␣")
               for token in VOCABULARY.tokens]
figure, axes = plt.subplots(3, 1, figsize=(12, 7.5))
for ax, (title, filtered) in zip(axes, [("temperature 1", next_logits),
                                        ("top-k, k = 3", top_k_filter(next_logits, 3)),
                                        ("top-p, p = 0.9", top_p_filter(next_logits, 0.9))]):
    plots.bars(probabilities(filtered), tick_labels, title=f"after {prefix!r}: {title}",
               ax=ax, ylabel="probability", hide_below=0.005)  # no "0.00" on empty bars
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 9. Generating with the key/value cache
#
# To write `n` tokens after a prompt of `P`, recomputing the whole prefix at
# every step costs `P + 1`, `P + 2`, ... positions: quadratic in the length. With
# the blocks' caches, each step computes **one** new position:
#
# 1. call `model(prompt_ids, return_cache=True)` once: the logits and the caches;
# 2. choose the next token from the logits at the **last** position;
# 3. call `model(next_ids, cache=caches, return_cache=True)` with the new tokens
#    alone, `(B, 1)`, and repeat from 2.
#
# Choosing a token: with `temperature=0` (the default) the argmax (greedy);
# otherwise divide the logits by `temperature`, apply `top_k_filter` (when `top_k`
# is not None), then `top_p_filter` (when `top_p` is not None), and draw one token
# per row from the softmax, with a NumPy generator `np.random.default_rng(seed)`
# made once per call (the same seed gives the same tokens; each step draws anew, not
# the first step's draws again).
#
# `generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None,
# top_p=None, end_id=None, seed=None)` returns the prompt and the new tokens, `(B,
# P + n)` with `n <= max_new_tokens`. When `end_id` is given, a row that wrote it
# keeps it and gets 0 (padding) after it, and the generation stops as soon as every
# row has ended. The prompts of a batch have the same length (no padding).
#
# **The calling convention** (the grader's hand-made models use it too):
# `model(token_ids, cache=None, return_cache=False, training=False)`; treat the
# caches as opaque: give back exactly what the model returned.
#
# **What is graded:** greedy generation gives the tokens of full recomputation,
# stopping rows at `end_id` (1.5 points); the cache is used: one call with the
# prompt, then one call per new token with that token alone (1 point); sampling
# with temperature, top-k and top-p in that order: the frequencies of the first
# new token over thousands of rows follow the filtered distribution, those of the
# first two new tokens follow a new draw at each step (one generator per call), and
# a seed repeats them (1 point).

# %% nbgrader="solution" grade_id="generate"
def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    """Continue each prompt, one token at a time, with the key/value cache.

    Args:
        model: called as `model(token_ids, cache=None, return_cache=False,
            training=False)`.
        prompt_ids: integer `(B, P)`, no padding.
        max_new_tokens: the most tokens to add.
        temperature: 0 for greedy; otherwise the logits are divided by it.
        top_k, top_p: the filters (None: not applied), after the temperature.
        end_id: the id that ends a row (None: rows never end).
        seed: for np.random.default_rng.

    Returns:
        Integer `(B, P + n)`, n <= max_new_tokens: the prompts, the new tokens, 0
        after a row's end_id.
    """
    ### BEGIN SOLUTION
    tokens = np.asarray(ops.convert_to_numpy(prompt_ids)).astype("int32")
    generator = np.random.default_rng(seed)
    finished = np.zeros(len(tokens), dtype=bool)
    logits, caches = model(tokens, return_cache=True, training=False)
    for step in range(max_new_tokens):
        last = np.asarray(ops.convert_to_numpy(logits[:, -1, :])).astype("float64")  # (B, V)
        if temperature == 0:
            chosen = np.argmax(last, axis=-1)
        else:
            scaled = last / temperature
            if top_k is not None:
                scaled = top_k_filter(scaled, top_k)
            if top_p is not None:
                scaled = top_p_filter(scaled, top_p)
            scaled = np.asarray(ops.convert_to_numpy(scaled)).astype("float64")
            probabilities = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            draws = generator.random(len(tokens))[:, None]
            chosen = np.argmax(np.cumsum(probabilities, axis=-1) > draws, axis=-1)
        chosen = np.where(finished, 0, chosen).astype("int32")
        tokens = np.concatenate([tokens, chosen[:, None]], axis=1)
        if end_id is not None:
            finished |= chosen == end_id
            if finished.all():
                break
        if step + 1 < max_new_tokens:
            logits, caches = model(chosen[:, None], cache=caches, return_cache=True,
                                   training=False)
    return tokens
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_generate"
# Visible check: a hand-made model (no weights) whose next token depends on every
# token so far AND on the position, so a cache that is lost or off by one position
# shows. Its cache is the list of the tokens so far.
class CountingModel:
    """Next token = (sum of the tokens so far + position of the last one) % 7."""

    def __init__(self):
        self.calls = []  # (cached length, new length) of each call

    def __call__(self, token_ids, cache=None, return_cache=False, training=False):
        ids = checks.to_numpy(token_ids).astype(int)
        past = np.zeros((len(ids), 0), int) if cache is None else cache[0]
        self.calls.append((past.shape[1], ids.shape[1]))
        whole = np.concatenate([past, ids], axis=1)
        logits = np.zeros(ids.shape + (7,), "float32")
        for t in range(ids.shape[1]):
            position = past.shape[1] + t
            wanted = (whole[:, :position + 1].sum(axis=1) + position) % 7
            logits[np.arange(len(ids)), t, wanted] = 5.0
        return (logits, [whole]) if return_cache else logits


def recompute(prompt, n, end_id=None):
    """Greedy tokens of CountingModel, the whole prefix recomputed at each step;
    0 after a row's end_id."""
    sequence, done = np.array(prompt), np.zeros(len(prompt), bool)
    while sequence.shape[1] < len(prompt[0]) + n and not done.all():
        best = CountingModel()(sequence)[:, -1].argmax(-1)
        sequence = np.hstack([sequence, np.where(done, 0, best)[:, None]])
        done = done | (sequence[:, -1] == end_id)
    return sequence


prompts = np.array([[3, 1, 4], [1, 5, 2]])
counting = CountingModel()
written = checks.check_shape(generate(counting, prompts, max_new_tokens=5), (2, 8),
                             "generate(model, prompts (2, 3), max_new_tokens=5)",
                             hint="return the prompts and the new tokens, (B, P + n).")
checks.check_close(written, recompute(prompts, 5),
                   "generate: the tokens of full recomputation",
                   hint="pass the cache back each step; feed the new token alone.")
cached_calls = [(0, 3), (3, 1), (4, 1), (5, 1), (6, 1)]  # a call after the last token may follow
checks.check_true(counting.calls in (cached_calls, cached_calls + [(7, 1)]),
                  "generate: one call with the prompt, then one per new token, alone",
                  f"the calls' (cached, new) lengths were {counting.calls}",
                  hint="model(prompt, return_cache=True) once, then model(new[:, None], "
                       "cache=caches, return_cache=True) with the cache the last call returned.")
# Rows that end at different steps: after its first new token, CountingModel goes
# x -> 2x + 1 (mod 7), here 2, 5, 4, 2, ... and 4, 2, 5, 4, ...
ending = np.array([[3, 2, 2], [5, 3, 1]])
for end_id in (5, 4):
    ended = checks.to_numpy(generate(CountingModel(), ending, max_new_tokens=9, end_id=end_id))
    wanted = recompute(ending, 9, end_id=end_id)
    checks.check_close(ended[:, :wanted.shape[1]], wanted,
                       f"generate(end_id={end_id}): a row keeps {end_id} and gets 0 after it",
                       hint="after a row writes end_id, write 0 in it; stop when every row "
                            "has ended.")
    checks.check_true(not ended[:, wanted.shape[1]:].any(),
                      f"generate(end_id={end_id}) stops when every row has ended",
                      f"it goes on: {ended.tolist()}")


class FixedModel:
    """The same logits (1, 0.5, 0, -0.5, -1) at every position."""

    def __call__(self, token_ids, cache=None, return_cache=False, training=False):
        ids = checks.to_numpy(token_ids)
        logits = np.tile(np.array([1.0, 0.5, 0.0, -0.5, -1.0], "float32"), ids.shape + (1,))
        return (logits, [None]) if return_cache else logits


# Sampling: 4000 rows, one new token each, at temperature 0.5 with top_k=2 (ids 0 and
# 1 left, logits 2 and 1); at temperature 2 with top_p=0.6 (probabilities 0.31, 0.24,
# 0.19, ...: three ids kept; before the temperature only two would be); at temperature
# 1 with top_k=3 then top_p=0.7 (0.51 and 0.31 among the three: two kept; top-p first
# would keep three).
# These cases run your top_k_filter and top_p_filter: a failure while one of them fails
# its own check is not counted against generate (the grader tests generate with correct
# filters); fix that filter first.
flat = np.zeros((4000, 1), int)
with checks.relying_on("generate", ["top_k_filter", "top_p_filter"], lab="lab6",
                       scope=globals()):
    for options, wanted in [({"temperature": 0.5, "top_k": 2},
                             softmax_of([2, 1, inf, inf, inf])),
                            ({"temperature": 2.0, "top_p": 0.6},
                             softmax_of([0.5, 0.25, 0.0, inf, inf])),
                            ({"temperature": 1.0, "top_k": 3, "top_p": 0.7},
                             softmax_of([1.0, 0.5, inf, inf, inf]))]:
        draws = checks.to_numpy(generate(FixedModel(), flat, 1, seed=3, **options))[:, 1]
        checks.check_close(np.bincount(draws.astype(int), minlength=5)[:5] / 4000, wanted,
                           atol=0.03,
                           what=f"generate({options}): the frequencies of 4000 draws",
                           hint="divide by the temperature, then top_k_filter, then "
                                "top_p_filter, then draw one token per row from the softmax.")
# One generator for the whole call: the two new tokens of a row are independent draws,
# equal with probability sum(p ** 2) = 0.29, not always (the same draw at each step).
pairs = checks.to_numpy(generate(FixedModel(), flat, 2, temperature=1.0, seed=3))[:, 1:]
same = float(np.mean(pairs[:, 0] == pairs[:, 1]))
checks.check_true(abs(same - np.sum(softmax_of([1.0, 0.5, 0.0, -0.5, -1.0]) ** 2)) < 0.04,
                  "generate: the second token is a new draw, independent of the first",
                  f"{same:.2f} of 4000 rows repeat their first new token, expected 0.29",
                  hint="make np.random.default_rng(seed) once per call, before the loop, not "
                       "at every step.")
_ = checks.check_close(generate(FixedModel(), flat[:50], 1, temperature=1.0, seed=3),
                       generate(FixedModel(), flat[:50], 1, temperature=1.0, seed=3),
                       "generate: the same seed gives the same tokens",
                       hint="np.random.default_rng(seed), made once per call.")

# %% nbgrader="tests" grade_id="test_generate"

# %% nbgrader="tests" grade_id="test_generate__cache"

# %% nbgrader="tests" grade_id="test_generate__sampling"

# %% [markdown]
# The cache's speed-up, measured for 64 prompts at once (as a server batches its
# users). First your `generate` against the same loop recomputing the whole prefix
# at every step, for 40 new characters: the same tokens, in less time. Then what
# one step costs after a prefix of `n` positions: with the cache the model
# computes one new position whatever `n` is; recomputing, all `n + 1`, so every
# step costs more as the text grows, and writing `N` tokens costs about `N²/2`
# positions instead of `N`. (For a single short prompt the two take about the same
# time: each step is then mostly the fixed cost of calling Keras, the same with or
# without the cache.)

# %% nbgrader="locked" grade_id="demo_cache" grading="skip"
def generate_without_cache(model, prompt_ids, max_new_tokens):
    """Greedy, the whole prefix recomputed at every step (no cache)."""
    tokens = np.asarray(prompt_ids)
    for _ in range(max_new_tokens):
        logits = checks.to_numpy(model(tokens, training=False))
        tokens = np.concatenate([tokens, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return tokens


def fastest(function, *args, repeat=3, **kwargs):
    """The shortest time, in seconds, of `repeat` calls of function(*args, **kwargs)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function(*args, **kwargs)
        times.append(time.perf_counter() - started)
    return min(times)


prompt = np.repeat(language.encode(["the red cat"], length=13)[:, :-1], 64, axis=0)  # (64, 12)
rows = []  # (new tokens, seconds with the cache, seconds recomputing)
steps = []  # (positions before the step, seconds with the cache, seconds recomputing)
# JAX compiles the model's operations again for every new sequence length, so there
# the timing would measure compilation, not the cache.
if keras.config.backend() == "jax":
    print("JAX compiles again at every new length: run this timing with TensorFlow or "
          "PyTorch (set KERAS_BACKEND before importing keras).")
else:
    new_tokens = 40
    timings = {}
    for name, run in [("cache", generate), ("recompute", generate_without_cache)]:
        run(language_model, prompt, 2)  # warm up
        started = time.perf_counter()
        timings[name] = (run(language_model, prompt, new_tokens),
                         time.perf_counter() - started)
    same = np.array_equal(timings["cache"][0], timings["recompute"][0])
    rows.append((new_tokens, timings["cache"][1], timings["recompute"][1]))
    print(f"64 prompts, {new_tokens} new tokens with your generate: cache "
          f"{rows[0][1]:.2f} s, recompute {rows[0][2]:.2f} s, speed-up "
          f"{rows[0][2] / rows[0][1]:.1f}x; the same tokens: {same}")
    # One step after n positions (the prompt repeated): with the cache the new token
    # alone, given the caches of the n positions; recomputing, all n + 1 positions.
    for n in (25, 50, 100, 200):
        prefix = np.tile(prompt, (1, n // prompt.shape[1] + 1))[:, :n]
        _, caches = language_model(prefix, return_cache=True)
        token = prefix[:, -1:]
        steps.append((n, fastest(language_model, token, cache=caches, repeat=5),
                      fastest(language_model, np.concatenate([prefix, token], axis=1),
                              repeat=5)))
    print("one step after n positions, 64 prompts: " + "; ".join(
        f"n = {n}: cache {cached * 1000:.0f} ms, recompute {whole * 1000:.0f} ms"
        for n, cached, whole in steps))
figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2))
left.bar([0, 1], [rows[0][1], rows[0][2]] if rows else [0, 0],
         color=["tab:blue", "tab:orange"])
left.set_xticks([0, 1], ["with the cache", "recomputing"])
left.set(ylabel="seconds", title="40 new tokens, 64 prompts")  # empty on JAX
right.plot([n for n, _, _ in steps], [1000 * c for _, c, _ in steps], "o-",
           label="with the cache")
right.plot([n for n, _, _ in steps], [1000 * w for _, _, w in steps], "o-",
           label="recomputing")
right.set(xlabel="positions before the step", ylabel="ms per step",
          title="one step, 64 prompts", ylim=(0, None))
right.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Finally, the trained model writes. Greedy decoding always gives the same
# sentence; sampling at temperature 1 with top-p 0.9 gives new ones, nearly
# always grammatical (the floor says some uncertainty is the language's own: a
# sampled sentence is a new draw from the grammar, not a memorised one).

# %% nbgrader="locked" grade_id="demo_generate" grading="skip"
import warnings

warnings.filterwarnings("ignore", message=".*softmax over axis -1.*")  # one key at step 1
START, END = 1, 2
starts = np.full((6, 1), START)
for title, options in [("greedy", {}),
                       ("temperature 1, top-p 0.9", {"temperature": 1.0, "top_p": 0.9,
                                                     "seed": 0})]:
    written = checks.to_numpy(generate(language_model, starts[: 1 if not options else 6], 60,
                                       end_id=END, **options))
    print(f"{title}:")
    for row in written:
        print("   ", VOCABULARY.decode([int(i) for i in row if i > END]))

# %% [markdown]
# ## Conclusion
#
# A decoder-only language model is lab 4's masked decoder without the encoder:
# pre-norm blocks of causal self-attention and feed-forward, positions as
# rotations of the queries and keys, one embedding that reads and writes tokens.
# It is trained only to predict the next token, and measured by perplexity
# against what the data allows. At inference time the key/value cache turns each
# new token into one position's work, and top-k and top-p keep sampling away
# from the long tail. Scale the same code up (more layers, a vocabulary of
# subwords, a great deal of text) and you have the models of today.
