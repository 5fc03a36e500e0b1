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
# # Lab 4 — Masks, the encoder layer and the masked decoder layer
#
# A Transformer layer is multi-head attention plus a few plain parts: a small
# feed-forward network, residual connections and layer normalization. What makes
# the decoder different is *masking*: it must not look at the future, and no
# layer may look at padding. In this lab you write the masks first, then the two
# layers of the original Transformer, with `keras.ops` and Keras layers:
#
# 1. `causal_mask`: the look-ahead mask of the decoder;
# 2. `padding_mask`: which tokens of a padded batch are real;
# 3. `combine_masks`: one `(B, T_q, T_k)` mask from both kinds;
# 4. `masked_softmax`: attention weights that ignore masked keys;
# 5. `FeedForward`: the position-wise feed-forward block;
# 6. `EncoderLayer`: self-attention and feed-forward, each with a residual and a norm;
# 7. `DecoderLayer`: causal self-attention, cross-attention to the encoder, feed-forward.
#
# Along the way you reproduce the lecture's look-ahead table for "I am a student",
# draw every mask as a matrix, and plot which source words a decoder looks at.
#
# **Time:** about 90–120 minutes.
#
# **How to work.** Run the cells from top to bottom. Replace each
# `raise NotImplementedError()` with your code, then run the check cell below it.
# A check prints `✓` when it passes. Hidden tests on other inputs grade your
# notebook, so a passing check is necessary, not sufficient. Each exercise's text
# says what is graded and for how many points: 16 points in all. Read-only cells
# (setup, checks, demos) are locked.
#
# **Masks in this lab** are boolean, and `True` means "may attend" (the Keras
# convention). A mask broadcasts against attention scores of shape
# `(..., T_q, T_k)`: one row per query, one column per key. Masks and optional
# arguments are always passed by keyword.

# %% nbgrader="locked" grade_id="colab_setup"
# Colab only: installs this lab's helpers (pinned). Does nothing anywhere else.
import importlib.util, subprocess, sys
if "google.colab" in sys.modules and importlib.util.find_spec("labkit") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{LABKIT_REQUIREMENT}}"], check=True)

# %% nbgrader="locked" grade_id="setup"
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quieter TensorFlow start-up

import numpy as np
import labkit

labkit.start_keras()  # Keras, without TensorFlow's start-up notices
import keras
from keras import ops
import matplotlib.pyplot as plt

from labkit import checks, plots
from labkit.masking import large_negative
from labkit.validation import validate_layer_arguments

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% nbgrader="locked" grade_id="helpers"
# A helper for this lab: draw a boolean mask.


def show_mask(mask, row_labels=None, col_labels=None, title="", ax=None,
              xlabel="key", ylabel="query"):
    """Draw a boolean matrix: dark cells (1) may attend, light cells (0) may not."""
    values = checks.to_numpy(mask, "mask").astype(float)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * values.shape[1] + 1.6,
                                      0.5 * values.shape[0] + 1.2))
    ax.imshow(values, cmap="Blues", vmin=-0.2, vmax=1.2)
    for (i, j), value in np.ndenumerate(values):
        ax.text(j, i, f"{value:.0f}", ha="center", va="center",
                color="white" if value else "black", fontsize=9)
    ax.set_xticks(range(values.shape[1]))
    ax.set_yticks(range(values.shape[0]))
    if col_labels is not None:
        ax.set_xticklabels(col_labels, rotation=45, ha="right")
    if row_labels is not None:
        ax.set_yticklabels(row_labels)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    return ax


# %% nbgrader="locked" grade_id="numpy_helpers"
# NumPy helpers for the visible checks: they compute what a layer should give
# with known weights, without calling any of your answers.


def likely_hint(actual, guesses, default=""):
    """The hint of the first `(value, hint)` of `guesses` that `actual` matches
    (a known mistake gives a known value), else `default`."""
    actual = np.asarray(checks.to_numpy(actual), dtype=np.float64)
    for value, hint in guesses:
        value = np.asarray(value, dtype=np.float64)
        if value.shape == actual.shape and np.allclose(actual, value, rtol=1e-4, atol=1e-5):
            return hint
    return default


def attempt(function, *args, **kwargs):
    """`(function(*args, **kwargs), "")`, or `(None, "it raised ...")` when it
    raises, so that a check can say what happened and why."""
    try:
        return function(*args, **kwargs), ""
    except Exception as error:  # noqa: BLE001 - reported by the check
        return None, f"it raised {type(error).__name__}: {str(error).strip()[:600]}"


def numpy_layer_norm(x, gamma, beta, epsilon=1e-6):
    """keras.layers.LayerNormalization over the last axis, in NumPy."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + epsilon) * gamma + beta


def identity_attention_weights(d_model, num_heads):
    """The 8 weights of keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
    whose kernels are the identity and biases 0: head h reads and writes the features
    h * key_dim ... (h + 1) * key_dim."""
    key_dim = d_model // num_heads
    kernel = np.eye(d_model, dtype="float32").reshape(d_model, num_heads, key_dim)
    bias = np.zeros((num_heads, key_dim), "float32")
    return [kernel, bias] * 3 + [kernel.reshape(num_heads, key_dim, d_model),
                                 np.zeros(d_model, "float32")]


def numpy_identity_attention(query, value, allowed, num_heads):
    """MultiHeadAttention with identity_attention_weights, in NumPy.

    `allowed` (bool, broadcastable to (B, T, S)) says which keys each query may
    attend to; a query with none gets weights 0. Returns (output (B, T, d_model),
    weights (B, num_heads, T, S)).
    """
    query, value = np.asarray(query, np.float64), np.asarray(value, np.float64)
    (batch, length, d_model), key_dim = query.shape, query.shape[-1] // num_heads
    q = query.reshape(batch, length, num_heads, key_dim).transpose(0, 2, 1, 3)
    v = value.reshape(batch, value.shape[1], num_heads, key_dim).transpose(0, 2, 1, 3)
    scores = q @ v.transpose(0, 1, 3, 2) / np.sqrt(key_dim)  # (B, heads, T, S)
    allowed = np.broadcast_to(np.asarray(allowed, bool)[:, None], scores.shape)
    weights = np.where(allowed, np.exp(scores - scores.max(axis=-1, keepdims=True)), 0.0)
    weights = weights / np.maximum(weights.sum(axis=-1, keepdims=True), 1e-30)
    output = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, length, d_model)
    return output, weights


# %% [markdown]
# ## 1. The look-ahead mask
#
# The decoder writes the target sentence one token at a time: when it predicts
# "a", it has seen "I am" but not "student". During training the whole target
# goes in at once, so attention must *hide the future*: query $i$ may attend to
# key $j$ only when $j \le i$. The lecture's raw self-attention scores for
# "I am a student" show how: add a look-ahead matrix that is $0$ on and below
# the diagonal and $-\infty$ above it, and every future score becomes
# $-\infty$, which the softmax turns into a weight of exactly 0.

# %% nbgrader="locked" grade_id="demo_look_ahead_table"
tokens = ["I", "am", "a", "student"]
raw_scores = np.array([
    [0.7, 0.1, 0.1, 0.1],
    [0.1, 0.6, 0.2, 0.1],
    [0.1, 0.3, 0.6, 0.1],
    [0.1, 0.3, 0.3, 0.3],
])
look_ahead = np.triu(np.full((4, 4), -np.inf), k=1)  # -inf above the diagonal, 0 elsewhere
print("look-ahead matrix:\n", look_ahead)
print("masked scores (raw scores + look-ahead):\n", raw_scores + look_ahead)

figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
plots.heatmap(raw_scores, tokens, tokens, "raw scores", ax=left, vmax=0.7)
plots.heatmap(raw_scores + look_ahead, tokens, tokens,
              "masked scores (blank = -inf)", ax=right, vmax=0.7)
plt.tight_layout()
plt.show()

# %% [markdown]
# As a boolean mask the look-ahead matrix is simply "True on and below the
# diagonal": row $i$ (a query) keeps the columns $j \le i$ (the keys), the
# diagonal included, since a token may look at itself.
#
# Write `causal_mask(length)` with `keras.ops`: compare row and column positions
# (`ops.arange`, `ops.expand_dims`, `ops.greater_equal`), or keep the lower
# triangle of a matrix of ones (`ops.tril`) and cast it to `"bool"`.
#
# **Graded** (1 point): the boolean mask `(T, T)`, True on and below the diagonal,
# for lengths from 1 to 9.

# %% nbgrader="solution" grade_id="causal_mask"
def causal_mask(length):
    """The look-ahead mask of a sequence of `length` tokens.

    Args:
        length: the number of tokens T, a positive integer.

    Returns:
        A bool tensor `(T, T)`: entry `[i, j]` is True when query i may attend
        to key j, i.e. when `j <= i` (on and below the diagonal).
    """
    ### BEGIN SOLUTION
    positions = ops.arange(length)  # (T,)
    rows = ops.expand_dims(positions, 1)  # (T, 1): the query's position
    cols = ops.expand_dims(positions, 0)  # (1, T): the key's position
    return ops.greater_equal(rows, cols)  # (T, T): key j <= query i
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_causal_mask"
# Visible check: three tokens, then one.
mask = checks.to_numpy(causal_mask(3), "causal_mask(3)")
checks.check_true(mask.dtype == bool, "causal_mask(3) is boolean",
                  f"the dtype is {mask.dtype}, expected bool",
                  hint="compare positions with ops.greater_equal, or cast with "
                       "ops.cast(mask, 'bool').")
checks.check_close(mask, [[1, 0, 0], [1, 1, 0], [1, 1, 1]], "causal_mask(3)",
                   hint="row i is a query, column j a key: True when j <= i. "
                        "The diagonal is True too (a token sees itself).")
mask = checks.check_close(causal_mask(1), [[1]], "causal_mask(1)")

# %% nbgrader="tests" grade_id="test_causal_mask"

# %% [markdown]
# Your mask, drawn as a matrix, and applied to the lecture's scores with
# `ops.where`: where the mask is False the score becomes $-\infty$, exactly the
# table above.

# %% nbgrader="locked" grade_id="demo_causal_mask" grading="skip"
look_ahead_mask = causal_mask(4)
masked_scores = ops.where(look_ahead_mask, raw_scores, -np.inf)
print(checks.to_numpy(masked_scores))
show_mask(look_ahead_mask, tokens, tokens, "causal_mask(4)")
plt.show()

# %% [markdown]
# ## 2. Padding masks
#
# Sentences in a batch have different lengths, so the shorter ones are filled up
# with a padding token to make a rectangular array of token ids `(B, T)`. Padding
# means nothing: no query may attend to it. A padding mask says which tokens are
# real:
#
# $$\text{mask}[b, t] = (\text{ids}[b, t] \ne \text{pad\_id}).$$
#
# Lab 5 pads with id 0 (the default); the lecture's toy vocabulary uses
# `<PAD> = 2`, where id 0 is `<SOS>`, a real token. Write `padding_mask` with
# `keras.ops` and use `pad_id`.
#
# **Graded** (1 point): the boolean mask `(B, T)`, True for real tokens, for
# int32 and int64 ids given as NumPy arrays or backend tensors, with the default
# `pad_id=0` and with other `pad_id`s.

# %% nbgrader="solution" grade_id="padding_mask"
def padding_mask(token_ids, pad_id=0):
    """Which tokens of a padded batch are real.

    Args:
        token_ids: integer array or tensor `(B, T)`.
        pad_id: the id of the padding token.

    Returns:
        A bool tensor `(B, T)`, True for real tokens and False for padding.
    """
    ### BEGIN SOLUTION
    return ops.not_equal(ops.convert_to_tensor(token_ids), pad_id)  # (B, T)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_padding_mask"
# Visible check: two sentences padded with 0, then the lecture's <PAD> = 2.
mask = checks.to_numpy(padding_mask(np.array([[5, 8, 9, 0, 0], [6, 3, 0, 0, 0]])),
                       "padding_mask")
checks.check_true(mask.dtype == bool, "padding_mask is boolean",
                  f"the dtype is {mask.dtype}, expected bool",
                  hint="ops.not_equal gives a bool tensor.")
checks.check_close(mask, [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]],
                   "padding_mask(ids) with the default pad_id=0",
                   hint="True for real tokens, False where the id equals pad_id.")
mask = checks.check_close(padding_mask(np.array([[0, 6, 3], [0, 5, 2]]), pad_id=2),
                          [[1, 1, 1], [1, 1, 0]],
                          "padding_mask(ids, pad_id=2): <SOS> = 0 is a real token here",
                          hint="compare with the pad_id argument, not with a fixed 0.")

# %% nbgrader="tests" grade_id="test_padding_mask"

# %% [markdown]
# The lecture's toy vocabulary, and a batch of three source sentences of
# different lengths, padded with `<PAD> = 2`:

# %% nbgrader="locked" grade_id="demo_padding_mask" grading="skip"
vocabulary = ["<SOS>", "<EOS>", "<PAD>", "am", "fine", "how", "i", "about", "are",
              "you", "yourself"]
token_id = {word: index for index, word in enumerate(vocabulary)}
sentences = ["how are you", "i am", "you"]
length = max(len(sentence.split()) for sentence in sentences)
source_ids = np.full((len(sentences), length), token_id["<PAD>"])  # padded with <PAD> = 2
for row, sentence in enumerate(sentences):
    words = sentence.split()
    source_ids[row, :len(words)] = [token_id[w] for w in words]
print("token ids:\n", source_ids)  # "how are you" = [5, 8, 9]
source_mask = padding_mask(source_ids, pad_id=token_id["<PAD>"])
show_mask(source_mask, sentences, [f"t={t}" for t in range(length)],
          "padding_mask(ids, pad_id=2)", xlabel="position", ylabel="sentence")
plt.show()

# %% [markdown]
# ## 3. One mask for the attention scores
#
# Attention needs a mask with one row per query and one column per key,
# `(B, T_q, T_k)`. Build it from the pieces with a logical AND:
#
# - the **key mask** `(B, T_k)` hides columns: no query may look at a padded key,
#   so it becomes `key_mask[:, None, :]`, the same for every row;
# - the **query mask** `(B, T_q)` hides rows: the output of a padded query is
#   thrown away anyway, and masking it keeps the picture clean
#   (`query_mask[:, :, None]`);
# - with `causal=True`, the look-ahead mask `(T_q, T_k)` as well.
#
# At least one of the two masks is given. A missing one allows everything: leave
# its axis of length 1 (it broadcasts), so `combine_masks(key_mask=m)` is
# `(B, 1, T_k)` and fits any number of queries, and `combine_masks(query_mask=m)`
# is `(B, T_q, 1)`. (A full `(B, T_k, T_k)` would only fit self-attention: the
# decoder's cross-attention has `T_q != T_k`.) With `causal=True` both axes are
# full, whichever mask is given. Use `ops.expand_dims` and `ops.logical_and`; you
# may call your `causal_mask`.
#
# **Graded** (2 points): the values of the combined mask, compared after
# broadcasting (1.5 points); the axis of length 1 on the side of a missing mask
# (0.5).

# %% nbgrader="solution" grade_id="combine_masks"
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """One attention mask from a query mask, a key mask and the look-ahead mask.

    Args:
        query_mask: optional bool `(B, T_q)`, True for real query tokens.
        key_mask: optional bool `(B, T_k)`, True for real key tokens. At least
            one of the two masks is given.
        causal: also hide keys after the query's position (self-attention of
            the decoder, where T_q == T_k).

    Returns:
        A bool tensor `(B, T_q, T_k)`: True where query i may attend to key j.
        A missing mask leaves its axis of length 1 (`(B, 1, T_k)` or
        `(B, T_q, 1)`); with `causal=True` the result is `(B, T, T)`.
    """
    ### BEGIN SOLUTION
    if query_mask is None and key_mask is None:
        raise ValueError("combine_masks needs query_mask or key_mask; got neither.")
    mask = None
    if query_mask is not None:
        mask = ops.expand_dims(ops.cast(query_mask, "bool"), 2)  # (B, T_q, 1): rows
    if key_mask is not None:
        columns = ops.expand_dims(ops.cast(key_mask, "bool"), 1)  # (B, 1, T_k): columns
        mask = columns if mask is None else ops.logical_and(mask, columns)
    if causal:
        length = ops.shape(key_mask if key_mask is not None else query_mask)[1]
        look_ahead = ops.expand_dims(causal_mask(length), 0)  # (1, T, T)
        mask = ops.logical_and(mask, look_ahead)  # (B, T, T)
    return mask
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_combine_masks"
# Visible check: 3 queries (the last is padding) and 4 keys (the second is padding).
query_mask = np.array([[True, True, False]])
key_mask = np.array([[True, False, True, True]])
combined = checks.check_shape(combine_masks(query_mask=query_mask, key_mask=key_mask),
                              (1, 3, 4), "combine_masks(query (1, 3), key (1, 4))",
                              hint="rows: query_mask[:, :, None]; columns: key_mask[:, None, :].")
checks.check_true(combined.dtype == bool, "combine_masks is boolean",
                  f"the dtype is {combined.dtype}, expected bool")
checks.check_close(combined, [[[1, 0, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]]],
                   "combine_masks: padded key hidden in every row, padded query row hidden",
                   hint="the key mask hides a column, the query mask a row.")
padded = np.array([[True, True, True, False]])
checks.check_close(combine_masks(query_mask=padded, key_mask=padded, causal=True),
                   [[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]]],
                   "combine_masks(causal=True) for a target with one padded token",
                   hint="AND the padding masks with the look-ahead mask causal_mask(T)[None] "
                        "(if you call your causal_mask, its own check must pass first).")
only_keys = checks.to_numpy(combine_masks(key_mask=np.array([[True, True, False]])))
checks.check_true(only_keys.shape == (1, 1, 3),
                  "combine_masks(key_mask (1, 3)) has shape (1, 1, 3)",
                  f"the shape is {only_keys.shape}",
                  hint="a missing query mask leaves an axis of length 1: key_mask[:, None, :], "
                       "which fits any number of queries (cross-attention has T_q != T_k).")
only_keys = checks.check_close(only_keys, [[[1, 1, 0]]], "combine_masks(key_mask=...) only",
                               hint="a missing mask allows everything: leave its axis of length 1.")
only_queries, problem = attempt(combine_masks, query_mask=padded, causal=True)
checks.check_true(not problem, "combine_masks(query_mask (1, 4), causal=True)", problem,
                  hint="only the query mask is given: take the length T from whichever mask "
                       "is given.")
only_queries = checks.check_close(only_queries,
                                  [[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]]],
                                  "combine_masks(query_mask (1, 4), causal=True): the look-ahead "
                                  "applies with the query mask alone",
                                  hint="with causal=True both axes are full (B, T, T): the "
                                       "query mask's rows AND the look-ahead mask.")

# %% nbgrader="tests" grade_id="test_combine_masks"

# %% nbgrader="tests" grade_id="test_combine_masks__broadcast"

# %% [markdown]
# The decoder's self-attention mask for the target "<SOS> i am" padded to 4
# tokens: the padding mask (padded key column and query row), the look-ahead
# mask, and their combination.

# %% nbgrader="locked" grade_id="demo_combine_masks" grading="skip"
target_tokens = ["<SOS>", "i", "am", "<PAD>"]
target_ids = np.array([[token_id[w] for w in target_tokens]])  # [[0, 6, 3, 2]]
target_mask = padding_mask(target_ids, pad_id=token_id["<PAD>"])  # (1, 4)
figure, axes = plt.subplots(1, 3, figsize=(12, 3.6))
show_mask(combine_masks(query_mask=target_mask, key_mask=target_mask)[0],
          target_tokens, target_tokens, "padding only", ax=axes[0])
show_mask(causal_mask(4), target_tokens, target_tokens, "look-ahead only", ax=axes[1])
show_mask(combine_masks(query_mask=target_mask, key_mask=target_mask, causal=True)[0],
          target_tokens, target_tokens, "combined (causal=True)", ax=axes[2])
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. A masked softmax
#
# Attention weights come from a softmax over the keys. With a mask, the hidden
# keys must get weight exactly 0 and the visible ones share all of it:
#
# $$w_{ij} = \frac{m_{ij}\, e^{s_{ij}}}{\sum_k m_{ik}\, e^{s_{ik}}}, \qquad m_{ij} \in \{0, 1\}.$$
#
# The usual way: replace masked scores with a large negative number before
# `ops.softmax(..., axis=-1)`: `large_negative(scores.dtype)` (from
# `labkit.masking`) is -1e9, or -3e4 in float16, where -1e9 rounds to `-inf`. A
# row whose keys are *all* masked (a padded query) has no sensible answer, but it
# must stay finite: no NaN. `-inf` gives NaN there, and a large negative number
# gives a uniform row; either way, setting the masked weights to 0 afterwards
# (`ops.where`) makes every masked weight exactly 0. Such a row is graded only
# for being finite: a uniform row and a row of zeros both pass.
# `mask` broadcasts against `scores`, e.g. `(T_q, T_k)` or `(B, 1, T_k)`.
#
# **Graded** (2 points): for scores of 2 to 4 dimensions, NumPy arrays or backend
# tensors, and masks that broadcast (`(T_k,)`, `(T_q, T_k)`, `(B, 1, T_k)`,
# `(B, 1, 1, T_k)`, or the shape of the scores): in every row with at least one
# allowed key, masked weights exactly 0 and the allowed ones equal to the softmax
# of their scores (the lecture's look-ahead example among them) (1.5 points); in a
# row whose keys are all masked, finite numbers, whatever their values (0.5
# points: a `-inf` mask that gives NaN there costs only these).

# %% nbgrader="solution" grade_id="masked_softmax"
def masked_softmax(scores, mask):
    """Softmax over the keys (last axis) that gives masked keys weight 0.

    Args:
        scores: float tensor `(..., T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`; True where a query may
            attend to a key.

    Returns:
        Weights of the shape of `scores`. In each row with at least one
        allowed key: exactly 0 where `mask` is False, summing to 1 over the
        allowed keys. A row with no allowed key must hold finite numbers (no
        NaN); their values are not graded (zeros or a uniform row both pass).
    """
    ### BEGIN SOLUTION
    scores = ops.convert_to_tensor(scores)
    allowed = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(scores))  # (..., T_q, T_k)
    masked_scores = ops.where(allowed, scores, large_negative(scores.dtype))
    weights = ops.softmax(masked_scores, axis=-1)  # (..., T_q, T_k)
    return ops.where(allowed, weights, ops.zeros_like(weights))  # masked: exactly 0
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_masked_softmax"
# Visible check: the lecture's look-ahead example, then a row with every key masked,
# then a padding mask (B, 1, T_k) that broadcasts.
lecture_scores = raw_scores.astype("float32")
look_ahead = np.tril(np.ones((4, 4), bool))  # the look-ahead mask, written out


def numpy_softmax(scores, axis=-1):
    exponentials = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return exponentials / exponentials.sum(axis=axis, keepdims=True)


weights = checks.to_numpy(masked_softmax(lecture_scores, look_ahead))
checks.check_close(
    weights,
    [[1.0, 0.0, 0.0, 0.0],
     [0.37754, 0.62246, 0.0, 0.0],
     [0.25839, 0.31560, 0.42601, 0.0],
     [0.21440, 0.26187, 0.26187, 0.26187]],
    "masked_softmax(scores of 'I am a student', the look-ahead mask)",
    hint=likely_hint(weights, [
        (numpy_softmax(raw_scores) * look_ahead,
         "renormalise: hide the masked scores BEFORE the softmax, so that the allowed "
         "keys share all the weight."),
        (numpy_softmax(np.where(look_ahead, raw_scores, large_negative("float32")), axis=0)
         * look_ahead,
         "the softmax runs over the last axis (the keys), axis=-1."),
        (numpy_softmax(raw_scores * look_ahead),
         "a masked score becomes a large negative number "
         "(large_negative(scores.dtype)), not 0."),
        (numpy_softmax(np.where(look_ahead, large_negative("float32"), raw_scores)),
         "True means 'may attend': the large negative value goes where the mask is False."),
        (numpy_softmax(np.where(look_ahead, raw_scores / 2, large_negative("float32"))),
         "no scaling here: the scores come already scaled.")],
        "masked scores get a large negative value before a softmax over the last axis."))
checks.check_true(np.all(weights[~look_ahead] == 0.0),
                  "masked weights are exactly 0", "some masked weights are not 0",
                  hint="finish with ops.where(mask, weights, 0).")
all_masked = masked_softmax(np.array([[1.0, 2.0], [3.0, 4.0]], "float32"),
                            np.array([[False, False], [True, False]]))  # the first row: no key
checks.check_true(np.all(np.isfinite(checks.to_numpy(all_masked))),
                  "a fully masked row stays finite", "it contains NaN",
                  hint="use large_negative(scores.dtype) rather than -inf, or set masked "
                       "weights to 0 with ops.where.")
padded_keys = np.array([[[True, True, False, True]], [[True, False, False, False]]])  # (2, 1, 4)
weights = checks.check_close(masked_softmax(np.ones((2, 3, 4), "float32"), padded_keys),
                             np.broadcast_to([[[1 / 3, 1 / 3, 0, 1 / 3]], [[1, 0, 0, 0]]],
                                             (2, 3, 4)),
                             "masked_softmax(equal scores (2, 3, 4), mask (2, 1, 4))",
                             hint="broadcast the mask to the shape of the scores "
                                  "(ops.broadcast_to); the allowed keys share the weight.")

# %% nbgrader="tests" grade_id="test_masked_softmax"

# %% nbgrader="tests" grade_id="test_masked_softmax__masked_rows"

# %% [markdown]
# Your masked softmax reproduces the lecture's "normalized masked
# self-attention scores": each word spreads its attention over itself and the
# words before it.

# %% nbgrader="locked" grade_id="demo_masked_softmax" grading="skip"
look_ahead_weights = masked_softmax(raw_scores, causal_mask(4))
print(checks.to_numpy(look_ahead_weights).round(2))  # [1], [0.38 0.62], [0.26 0.32 0.43], ...
plots.heatmap(look_ahead_weights, tokens, tokens, "masked_softmax of the look-ahead scores",
              vmax=1.0)
plt.show()

# %% [markdown]
# ## 5. The feed-forward block
#
# Attention mixes information *between* positions. After it, every position goes
# on its own through the same small two-layer network:
#
# $$\operatorname{FFN}(x) = \max(0,\; x W_1 + b_1)\, W_2 + b_2,$$
#
# with `dff` hidden units (the paper uses `dff = 4 * d_model`) and dropout on
# the output while training. Write it as a Keras layer, the way `keras.layers`
# are written:
#
# - `__init__` checks its arguments at once (`validate_layer_arguments` from
#   `labkit`, given: `d_model` and `dff` must be positive integers and
#   `dropout_rate` a number in [0, 1), anything else raises a `ValueError`),
#   stores each one under its own name (`self.d_model`, `self.dff`,
#   `self.dropout_rate`; `build` reads `self.dff`), and creates the sublayers
#   `dense1` (`dff` units, ReLU), `dense2` (`d_model` units) and `dropout`, a
#   `keras.layers.Dropout(dropout_rate)`;
# - `build` (given) builds the sublayers, so the weights exist before the first
#   call;
# - `call` applies them: `dropout(dense2(dense1(x)))`, passing `training` on;
#   no residual here, the layers below add it. Dropout acts only while training
#   (`training=True`): `dropout_rate` is the fraction of the outputs set to 0,
#   and the kept ones are divided by `1 - dropout_rate`. At inference
#   (`training=False`, or left out) the output is exactly
#   `dense2(dense1(x))`;
# - `get_config` returns every constructor argument under its own name
#   (`d_model`, `dff`, `dropout_rate`, added to `super().get_config()`), so that
#   `FeedForward.from_config(layer.get_config())` rebuilds the layer.
#
# **Graded** (2 points): the outputs at inference, with the grader's weights in
# `dense1` and `dense2` (1.5 points); dropout on the output while training
# (0.25); `get_config()` / `from_config()` and the argument checks (0.25).

# %% nbgrader="solution" grade_id="FeedForward"
class FeedForward(keras.layers.Layer):
    """The position-wise feed-forward block of a Transformer layer.

    Every position goes through the same two Dense layers, independently of
    the other positions: `dropout(relu(x W1 + b1) W2 + b2)`. The residual
    connection and the normalization belong to the layer that uses it.

    Args:
        d_model: size of the input and output vectors, a positive integer.
        dff: number of hidden units, a positive integer (often 4 * d_model).
        dropout_rate: fraction of the outputs dropped while training, in [0, 1).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        x: `(B, T, d_model)` (any number of leading axes).
        training: whether dropout is active (default: inference, nothing
            dropped).

    Returns:
        `(B, T, d_model)`.

    `get_config()` returns `d_model`, `dff` and `dropout_rate` (with the base
    layer's config), so that `FeedForward.from_config(layer.get_config())`
    rebuilds the layer. An invalid argument raises a `ValueError` at once.

    Example:
        >>> ffn = FeedForward(d_model=6, dff=24)
        >>> tuple(ffn(np.zeros((2, 3, 6), "float32")).shape)
        (2, 3, 6)

    References:
        Vaswani et al., 2017, "Attention is all you need", section 3.3.
    """

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, dff=dff, dropout_rate=dropout_rate)
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.dense1 = keras.layers.Dense(dff, activation="relu", name="dense1")
        self.dense2 = keras.layers.Dense(d_model, name="dense2")
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        ### END SOLUTION

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))

    def call(self, x, training=None):
        ### BEGIN SOLUTION
        hidden = self.dense1(x)  # (B, T, dff), ReLU
        output = self.dense2(hidden)  # (B, T, d_model)
        return self.dropout(output, training=training)
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"d_model": self.d_model, "dff": self.dff,
                       "dropout_rate": self.dropout_rate})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_FeedForward"
# Visible check: sublayers and weight shapes, values with known weights, dropout
# while training, get_config() and one invalid argument.
ffn = FeedForward(d_model=6, dff=16, dropout_rate=0.25)
x = np.random.default_rng(0).normal(size=(8, 6)).astype("float32")
checks.check_shape(ffn(x, training=False), (8, 6), "FeedForward(d_model=6, dff=16) on x (8, 6)",
                   hint="dense1 has dff units, dense2 d_model units: the output has d_model "
                        "features.")
checks.check_true(isinstance(getattr(ffn, "dense1", None), keras.layers.Dense)
                  and isinstance(getattr(ffn, "dense2", None), keras.layers.Dense)
                  and isinstance(getattr(ffn, "dropout", None), keras.layers.Dropout),
                  "FeedForward has sublayers dense1, dense2 (Dense) and dropout (Dropout)",
                  "a sublayer is missing or of another class",
                  hint="create them in __init__: self.dense1 = keras.layers.Dense(...).")
shapes = [tuple(w.shape) for w in ffn.dense1.weights] + [tuple(w.shape) for w in ffn.dense2.weights]
checks.check_true(shapes == [(6, 16), (16,), (16, 6), (6,)],
                  "dense1 has weights (6, 16), (16,) and dense2 (16, 6), (6,)",
                  f"they are {shapes}",
                  hint="dense1 has dff units, dense2 d_model units, both with a bias.")
# Known weights: dense1 copies x into its first 6 units and adds 0.5, dense2
# copies them back and subtracts 1: the output is relu(x + 0.5) - 1.
ffn.dense1.set_weights([np.eye(6, 16, dtype="float32"), np.full(16, 0.5, "float32")])
ffn.dense2.set_weights([np.eye(16, 6, dtype="float32"), np.full(6, -1.0, "float32")])
expected = np.maximum(x + 0.5, 0.0) - 1.0
output = checks.to_numpy(ffn(x, training=False))
checks.check_true(np.array_equal(checks.to_numpy(ffn(x, training=False)), output),
                  "FeedForward: two calls with training=False give the same output",
                  "they differ: something is dropped at inference",
                  hint="pass training on: self.dropout(..., training=training).")
output = checks.check_close(output, expected, "FeedForward at inference: relu(x W1 + b1) W2 + b2",
                            hint=likely_hint(output, [
                                (x - 0.5, "dense1 needs activation='relu'."),
                                (np.maximum(expected, 0.0), "dense2 has no activation: the "
                                                            "ReLU comes after dense1 only."),
                                (expected + x, "no residual inside the block: the encoder and "
                                               "decoder layers add x themselves.")],
                                "dropout(dense2(dense1(x))), with the ReLU in dense1."))
# While training, each output is 0 (dropped) or its inference value / (1 - 0.25).
trained = checks.to_numpy(ffn(x, training=True)).astype(np.float64)
dropped = np.abs(trained) <= 1e-6
kept = np.isclose(trained, expected / 0.75, rtol=1e-4, atol=1e-5)
ratio = np.median(trained[~dropped] / expected[~dropped]) if (~dropped).any() else 0.0
checks.check_true(np.all(dropped | kept) and 0 < dropped.sum() < dropped.size,
                  "FeedForward(dropout_rate=0.25), training=True: each output is 0 or "
                  "its inference value / 0.75",
                  f"{int(dropped.sum())} of {dropped.size} outputs are 0, and the others are "
                  f"about {ratio:.4g} times their inference value",
                  hint="dropout acts when training=True" if not dropped.any() else
                       "dropout_rate is the fraction DROPPED: keras.layers.Dropout(dropout_rate), "
                       "on the output of dense2.")
checks.check_config(FeedForward, ffn, {"d_model": 6, "dff": 16, "dropout_rate": 0.25})
try:
    FeedForward(d_model=6, dff=0)
    problem = "it raised nothing"
except ValueError:
    problem = ""
except Exception as error:  # noqa: BLE001 - reported below
    problem = f"it raised {type(error).__name__}"
checks.check_true(not problem, "FeedForward(d_model=6, dff=0) raises a ValueError", problem,
                  hint="keep the given validate_layer_arguments(...) call in __init__.")

# %% nbgrader="tests" grade_id="test_FeedForward"

# %% nbgrader="tests" grade_id="test_FeedForward__training"

# %% nbgrader="tests" grade_id="test_FeedForward__config"

# %% [markdown]
# "Position-wise" means exactly that: the same vector at two positions gives the
# same output, whatever surrounds it. With the lecture's `d_model = 6` and
# `dff = 24`, the block has 6·24 + 24 + 24·6 + 6 = 318 weights.

# %% nbgrader="locked" grade_id="demo_FeedForward" grading="skip"
keras.utils.set_random_seed(4)
ffn = FeedForward(d_model=6, dff=24)
x = np.random.default_rng(0).normal(size=(1, 3, 6)).astype("float32")
x[0, 2] = x[0, 0]  # positions 0 and 2 hold the same vector
output = checks.to_numpy(ffn(x, training=False))
print("weights:", [tuple(w.shape) for w in ffn.get_weights()], "->", ffn.count_params(), "numbers")
print("position 0:", output[0, 0])
print("position 2:", output[0, 2])

# %% [markdown]
# ## 6. The encoder layer
#
# An encoder layer has two sublayers. Each one is wrapped the same way: dropout
# on its output, a **residual** connection (add the sublayer's input back) and a
# **layer normalization** after the sum. This is the original "post-norm"
# Transformer:
#
# $$x \leftarrow \operatorname{norm}_1\big(x + \operatorname{dropout}(\operatorname{MultiHead}(x, x, x))\big), \qquad
#   x \leftarrow \operatorname{norm}_2\big(x + \operatorname{FFN}(x)\big).$$
#
# (Many recent models normalise *before* each sublayer instead, "pre-norm";
# this lab follows the paper: the layer's output is the output of `norm2`.)
#
# Sublayers, with exactly these names: `self_attention`, a
# `keras.layers.MultiHeadAttention` with `num_heads` heads of
# `key_dim = d_model // num_heads`; `ffn`, your `FeedForward`; `norm1` and
# `norm2`, `keras.layers.LayerNormalization(epsilon=1e-6)`; and `dropout`, a
# `keras.layers.Dropout(dropout_rate)` for the attention output.
#
# **The padding mask.** `call(x, padding_mask=None, training=None)` takes
# `padding_mask` `(B, T)`, True for real tokens. No query may attend to a padded
# key, so give the attention the mask `(B, 1, T)` (`combine_masks(key_mask=...)`).
# Padding may come anywhere in a sentence, first as well as last: a padded
# position is any `False` of the mask. The outputs at padded positions are
# computed but meaningless; the next layers ignore them (and the grader does
# not look at them).
#
# **Pass the mask by keyword.** `keras.layers.MultiHeadAttention` is called as
# `mha(query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
# attention_mask=None, ...)`: in `mha(x, x, x, mask)` the mask is a
# *query_mask*. Given a mask, Keras runs without complaint, silently attending to
# padding; given `None` (no padding), Keras 3.15 raises a `TypeError`
# ("got multiple values for argument 'query_mask'"). Write `self.self_attention(query=x, value=x, key=x, attention_mask=mask,
# training=training)`.
#
# **Training and inference.** Pass `training` on to every sublayer. While
# training (`training=True`) dropout acts on the attention's output (and inside
# `ffn`); at inference (`training=False`, or left out) nothing is dropped and
# two calls give the same output.
#
# **Config.** Like `FeedForward`: keep the given `validate_layer_arguments` call
# (sizes positive integers, `d_model` a multiple of `num_heads`, `dropout_rate`
# in [0, 1); anything else raises a `ValueError`), and make `get_config()`
# return every constructor argument under its own name (`d_model`, `num_heads`,
# `dff`, `dropout_rate`, added to `super().get_config()`), so that
# `EncoderLayer.from_config(layer.get_config())` rebuilds the layer.
#
# **Graded** (4 points): the sublayers and the outputs at inference without
# padding, with the grader's weights in your sublayers (2.75 points); the
# outputs with a padding mask, at the real positions (0.5); dropout while
# training (0.25); `get_config()` / `from_config()` and the argument checks (0.5).

# %% nbgrader="solution" grade_id="EncoderLayer"
class EncoderLayer(keras.layers.Layer):
    """One layer of the Transformer encoder (post-norm, as in the paper).

    Self-attention over the whole (unpadded) input, then the feed-forward
    block, each followed by dropout, a residual connection and layer
    normalization: `x = norm1(x + dropout(attention(x)))`, then
    `x = norm2(x + ffn(x))`.

    Args:
        d_model: size of the token vectors, a positive integer.
        num_heads: number of attention heads; must divide `d_model`.
        dff: hidden units of the feed-forward block, a positive integer.
        dropout_rate: dropout after each sublayer while training, in [0, 1).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        x: `(B, T, d_model)`.
        padding_mask: optional bool `(B, T)`, True for real tokens; padded
            tokens (anywhere in the sentence, first or last) are never
            attended to.
        training: whether dropout is active (default: inference, nothing
            dropped).

    Returns:
        `(B, T, d_model)`; the vectors at padded positions are meaningless.

    `get_config()` returns `d_model`, `num_heads`, `dff` and `dropout_rate`
    (with the base layer's config), so that
    `EncoderLayer.from_config(layer.get_config())` rebuilds the layer. An
    invalid argument raises a `ValueError` at once.

    Example:
        >>> layer = EncoderLayer(d_model=6, num_heads=2, dff=24)
        >>> tuple(layer(np.zeros((2, 5, 6), "float32")).shape)
        (2, 5, 6)

    References:
        Vaswani et al., 2017, "Attention is all you need", section 3.1.
    """

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, name="self_attention")
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate, name="ffn")
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        ### END SOLUTION

    def build(self, input_shape):
        self.self_attention.build(input_shape, input_shape)
        self.ffn.build(input_shape)
        self.norm1.build(input_shape)
        self.norm2.build(input_shape)

    def call(self, x, padding_mask=None, training=None):
        ### BEGIN SOLUTION
        attention_mask = None
        if padding_mask is not None:
            attention_mask = combine_masks(key_mask=padding_mask)  # (B, 1, T)
        attention = self.self_attention(query=x, value=x, key=x,
                                        attention_mask=attention_mask,
                                        training=training)  # (B, T, d_model)
        x = self.norm1(x + self.dropout(attention, training=training))  # (B, T, d_model)
        return self.norm2(x + self.ffn(x, training=training))  # (B, T, d_model)
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"d_model": self.d_model, "num_heads": self.num_heads,
                       "dff": self.dff, "dropout_rate": self.dropout_rate})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_EncoderLayer"
# Visible check: sublayers; values with known weights (post-norm); padding first
# and last; dropout while training; get_config() and one invalid argument.
encoder_layer = EncoderLayer(d_model=6, num_heads=2, dff=24, dropout_rate=0.5)
x = np.random.default_rng(1).normal(size=(2, 5, 6)).astype("float32")
by_keyword = ("pass every mask to MultiHeadAttention BY KEYWORD (attention_mask=...): its "
              "fourth positional argument is query_mask.")
output, problem = attempt(encoder_layer, x, training=False)
checks.check_true(not problem, "EncoderLayer(d_model=6, num_heads=2, dff=24) on x (2, 5, 6)",
                  problem, hint=by_keyword if "multiple values" in problem else "")
checks.check_shape(output, (2, 5, 6), "EncoderLayer(d_model=6, num_heads=2, dff=24) on x (2, 5, 6)")
attention = getattr(encoder_layer, "self_attention", None)
checks.check_true(isinstance(attention, keras.layers.MultiHeadAttention)
                  and attention.num_heads == 2 and attention.key_dim == 3,
                  "self_attention is keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)",
                  "it is missing or built with other arguments",
                  hint="key_dim = d_model // num_heads.")
checks.check_true(all(isinstance(getattr(encoder_layer, n, None), keras.layers.LayerNormalization)
                      and getattr(encoder_layer, n).epsilon == 1e-6 for n in ("norm1", "norm2"))
                  and isinstance(getattr(encoder_layer, "ffn", None), FeedForward),
                  "norm1, norm2 (LayerNormalization, epsilon=1e-6) and ffn (FeedForward)",
                  "a sublayer is missing or of another kind")
# Known weights: attention with identity projections (numpy_identity_attention),
# ffn giving 0 (dense2 all zeros), and a scale and shift of its own in each norm.
encoder_layer.self_attention.set_weights(identity_attention_weights(6, 2))
dense2 = encoder_layer.ffn.dense2
dense2.set_weights([np.zeros_like(w) for w in dense2.get_weights()])  # ffn(x) = 0
gamma1 = np.linspace(0.5, 1.5, 6, dtype="float32")
beta1 = np.linspace(-0.3, 0.3, 6, dtype="float32")
gamma2 = np.linspace(2.0, 1.0, 6, dtype="float32")
beta2 = np.linspace(0.4, -0.1, 6, dtype="float32")
encoder_layer.norm1.set_weights([gamma1, beta1])
encoder_layer.norm2.set_weights([gamma2, beta2])


def encoder_expected(x, allowed):
    """norm2(h + ffn(h)) with h = norm1(x + attention(x)), ffn giving 0 (NumPy)."""
    h = numpy_layer_norm(x + numpy_identity_attention(x, x, allowed, 2)[0], gamma1, beta1)
    return numpy_layer_norm(h, gamma2, beta2)


everything = np.ones((2, 5, 5), bool)
output = checks.to_numpy(encoder_layer(x, training=False))
checks.check_true(np.array_equal(checks.to_numpy(encoder_layer(x, training=False)), output),
                  "EncoderLayer: two calls with training=False give the same output",
                  "they differ: something is dropped at inference",
                  hint="pass training on to every dropout: self.dropout(..., training=training).")
expected = encoder_expected(x, everything)
attended = numpy_identity_attention(x, x, everything, 2)[0]
before = numpy_layer_norm(x, gamma1, beta1)  # pre-norm: x + attention(norm1(x)), ffn giving 0
checks.check_close(output, expected, "EncoderLayer at inference, no padding (post-norm)",
                   hint=likely_hint(output, [
                       (x + numpy_identity_attention(before, before, everything, 2)[0],
                        "post-norm: normalise AFTER each residual sum, x = norm1(x + "
                        "attention), not before each sublayer (pre-norm)."),
                       (numpy_layer_norm(numpy_layer_norm(attended, gamma1, beta1), gamma2, beta2),
                        "add x back: x = norm1(x + dropout(attention)), a residual around "
                        "the attention."),
                       (numpy_layer_norm(numpy_layer_norm(x + attended, gamma1, beta1),
                                         gamma1, beta1),
                        "norm2 (not norm1 again) follows the feed-forward block."),
                       (np.broadcast_to(beta2, output.shape),
                        "add x back around the feed-forward block: norm2(x + ffn(x)).")],
                       "x = norm1(x + dropout(self_attention(query=x, value=x, key=x))); "
                       "x = norm2(x + ffn(x))."))
# Padding last in the first sentence, first in the second.
real = np.array([[True, True, True, False, False], [False, False, True, True, True]])
output, problem = attempt(encoder_layer, x, padding_mask=real, training=False)
checks.check_true(not problem, "EncoderLayer on x (2, 5, 6) with padding_mask (2, 5)", problem,
                  hint=by_keyword if "multiple values" in problem else
                  "the attention mask must broadcast to (B, T, T): the padding mask (B, T) "
                  "hides key columns as (B, 1, T), e.g. combine_masks(key_mask=padding_mask).")
output = checks.to_numpy(output)
changed = x.copy()
changed[~real] = 100.0  # new vectors at the padded positions
checks.check_close(checks.to_numpy(encoder_layer(changed, padding_mask=real, training=False))[real],
                   output[real], "EncoderLayer: changing padded tokens (last, then first in a "
                   "sentence) changes no real output",
                   hint="no query may attend to a padded key, first or last in the sentence "
                        "(any False of the mask): attention_mask=combine_masks(key_mask="
                        "padding_mask), (B, 1, T), passed BY KEYWORD.")
checks.check_close(output[real], encoder_expected(x, real[:, None, :])[real],
                   "EncoderLayer with padding_mask, at the real positions",
                   hint="the padding mask hides key columns (B, 1, T), for every query.")
# While training, with ffn giving 0, only the attention's dropout can change the output.
trained = checks.to_numpy(encoder_layer(x, training=True))
checks.check_true(not np.allclose(trained, expected, rtol=1e-4, atol=1e-5),
                  "EncoderLayer(dropout_rate=0.5), training=True: dropout changes the output "
                  "(ffn giving 0)", "it gave the inference output",
                  hint="x = norm1(x + self.dropout(attention, training=training)).")
checks.check_config(EncoderLayer, encoder_layer, {"d_model": 6, "num_heads": 2, "dff": 24, "dropout_rate": 0.5})
checks.check_raises(ValueError, lambda: EncoderLayer(d_model=6, num_heads=4, dff=24),
                    "EncoderLayer(d_model=6, num_heads=4, dff=24) (6 is not a multiple of 4)",
                    hint="keep the given validate_layer_arguments(...) call in __init__.")

# %% nbgrader="tests" grade_id="test_EncoderLayer"

# %% nbgrader="tests" grade_id="test_EncoderLayer__padding"

# %% nbgrader="tests" grade_id="test_EncoderLayer__training"

# %% nbgrader="tests" grade_id="test_EncoderLayer__config"

# %% [markdown]
# The source sentences of section 2 through an encoder layer (random token
# vectors for now; lab 5 learns them and adds positions). Padding makes no
# difference to the real tokens: replace the padded vectors with anything and
# the outputs at real positions stay the same.

# %% nbgrader="locked" grade_id="demo_EncoderLayer" grading="skip"
keras.utils.set_random_seed(0)
d_model = 6  # as in the lecture's toy Transformer
embedding = keras.layers.Embedding(len(vocabulary), d_model)
encoder_layer = EncoderLayer(d_model=d_model, num_heads=2, dff=24)
source_vectors = checks.to_numpy(embedding(source_ids))  # (3, 3, 6)
encoded = checks.to_numpy(encoder_layer(source_vectors, padding_mask=source_mask))
noisy = source_vectors.copy()
noisy[~checks.to_numpy(source_mask)] = 42.0  # garbage at every padded position
encoded_noisy = checks.to_numpy(encoder_layer(noisy, padding_mask=source_mask))
real = checks.to_numpy(source_mask)
print("encoded:", encoded.shape)
print("largest change at real positions:", np.abs(encoded_noisy - encoded)[real].max())
print("largest change at padded positions:", np.abs(encoded_noisy - encoded)[~real].max())

# %% [markdown]
# ## 7. The masked decoder layer
#
# A decoder layer has three sublayers, each with dropout, a residual and a layer
# normalization *after* the residual sum (post-norm again, as in the encoder
# layer; not pre-norm):
#
# 1. **causal self-attention** over the target: `self_attention`, with the
#    look-ahead mask (the diagonal included: a token sees itself) AND the
#    target's padding mask on the keys, so position $i$ only sees the real
#    positions $\le i$;
# 2. **cross-attention** (encoder-decoder attention): `cross_attention`, whose
#    **queries come from the decoder** (the output of step 1, after `norm1`)
#    while **keys and values come from the encoder's output** `context`. Each
#    target position asks "which source words matter for me?"; padded source
#    tokens are hidden;
# 3. the feed-forward block `ffn`.
#
# $$x \leftarrow \operatorname{norm}_1(x + \operatorname{dropout}(\operatorname{SelfAttn}_{\text{causal}}(x))),\quad
#   x \leftarrow \operatorname{norm}_2(x + \operatorname{dropout}(\operatorname{CrossAttn}(x, \text{context}))),\quad
#   x \leftarrow \operatorname{norm}_3(x + \operatorname{FFN}(x)).$$
#
# `call(x, context, x_padding_mask=None, context_padding_mask=None,
# training=None)`: `x` is `(B, T, d_model)`, `context` `(B, S, d_model)`, the
# padding masks `(B, T)` and `(B, S)` are True for real tokens. As in the
# encoder, padding may come first in a sentence as well as last: a padded
# token is any `False`, and no query attends to it. The outputs at padded
# target positions are not graded. Keep the cross-attention weights of the last
# call in `self.last_attention_scores`, `(B, num_heads, T, S)` (ask for them
# with `return_attention_scores=True`).
# Sublayers: `self_attention`, `cross_attention` (both
# `keras.layers.MultiHeadAttention`, `key_dim = d_model // num_heads`), `ffn`,
# `norm1`, `norm2`, `norm3` (epsilon 1e-6), `dropout`. Pass every mask by keyword.
#
# **Training and config**, as in the encoder layer: dropout acts on the output
# of each attention sublayer while training only; `get_config()` returns
# `d_model`, `num_heads`, `dff` and `dropout_rate` under their own names, so that
# `DecoderLayer.from_config(layer.get_config())` rebuilds the layer; an invalid
# argument raises a `ValueError` (the given `validate_layer_arguments`).
#
# **Graded** (4 points): the sublayers, the outputs and `last_attention_scores`
# at inference without padding (causal self-attention included), with the
# grader's weights in your sublayers (2.75 points); the outputs and scores with
# both padding masks, at the real target positions (0.5); dropout while training
# (0.25); `get_config()` / `from_config()` and the argument checks (0.5).

# %% nbgrader="solution" grade_id="DecoderLayer"
class DecoderLayer(keras.layers.Layer):
    """One layer of the Transformer decoder (post-norm, as in the paper).

    Causal self-attention over the target, cross-attention from the target
    (queries) to the encoder's output (keys and values), then the
    feed-forward block; each followed by dropout, a residual connection and
    layer normalization (after the residual sum: post-norm).

    Args:
        d_model: size of the token vectors, a positive integer.
        num_heads: number of attention heads; must divide `d_model`.
        dff: hidden units of the feed-forward block, a positive integer.
        dropout_rate: dropout after each sublayer while training, in [0, 1).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        x: the target so far, `(B, T, d_model)`.
        context: the encoder's output, `(B, S, d_model)`.
        x_padding_mask: optional bool `(B, T)`, True for real target tokens
            (padding anywhere, first or last).
        context_padding_mask: optional bool `(B, S)`, True for real source tokens.
        training: whether dropout is active (default: inference, nothing
            dropped).

    Returns:
        `(B, T, d_model)`. The cross-attention weights of the call are kept in
        `last_attention_scores`, `(B, num_heads, T, S)`.

    `get_config()` returns `d_model`, `num_heads`, `dff` and `dropout_rate`
    (with the base layer's config), so that
    `DecoderLayer.from_config(layer.get_config())` rebuilds the layer. An
    invalid argument raises a `ValueError` at once.

    Example:
        >>> layer = DecoderLayer(d_model=6, num_heads=2, dff=24)
        >>> out = layer(np.zeros((2, 3, 6), "float32"), np.zeros((2, 5, 6), "float32"))
        >>> tuple(out.shape), tuple(layer.last_attention_scores.shape)
        ((2, 3, 6), (2, 2, 3, 5))

    References:
        Vaswani et al., 2017, "Attention is all you need", section 3.1.
    """

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff,
                                 dropout_rate=dropout_rate)
        self.last_attention_scores = None
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        key_dim = d_model // num_heads  # the size of each head
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=key_dim, name="self_attention")
        self.cross_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=key_dim, name="cross_attention")
        self.ffn = FeedForward(d_model=d_model, dff=dff, dropout_rate=dropout_rate, name="ffn")
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm3")
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        ### END SOLUTION

    def build(self, x_shape, context_shape):
        self.self_attention.build(x_shape, x_shape)
        self.cross_attention.build(x_shape, context_shape)
        self.ffn.build(x_shape)
        for norm in (self.norm1, self.norm2, self.norm3):
            norm.build(x_shape)

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        ### BEGIN SOLUTION
        if x_padding_mask is None:
            length = ops.shape(x)[1]
            self_mask = ops.expand_dims(causal_mask(length), 0)  # (1, T, T)
        else:
            self_mask = combine_masks(key_mask=x_padding_mask, causal=True)  # (B, T, T)
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = combine_masks(key_mask=context_padding_mask)  # (B, 1, S)

        attention = self.self_attention(query=x, value=x, key=x, attention_mask=self_mask,
                                        training=training)  # (B, T, d_model)
        x = self.norm1(x + self.dropout(attention, training=training))

        attention, scores = self.cross_attention(
            query=x, value=context, key=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)  # (B, T, d_model)
        self.last_attention_scores = scores  # (B, num_heads, T, S)
        x = self.norm2(x + self.dropout(attention, training=training))

        return self.norm3(x + self.ffn(x, training=training))  # (B, T, d_model)
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"d_model": self.d_model, "num_heads": self.num_heads,
                       "dff": self.dff, "dropout_rate": self.dropout_rate})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_DecoderLayer"
# Visible check: shapes and sublayers; values with known weights (causal, post-norm);
# target padding first and source padding; dropout while training; get_config().
decoder_layer = DecoderLayer(d_model=6, num_heads=2, dff=24, dropout_rate=0.5)
demo_rng = np.random.default_rng(2)
x = demo_rng.normal(size=(2, 4, 6)).astype("float32")
context = demo_rng.normal(size=(2, 5, 6)).astype("float32")
output, problem = attempt(decoder_layer, x, context, training=False)
checks.check_true(not problem, "DecoderLayer(d_model=6, num_heads=2, dff=24) on x (2, 4, 6), "
                  "context (2, 5, 6)", problem,
                  hint="pass every mask to MultiHeadAttention BY KEYWORD (attention_mask=...): "
                       "its fourth positional argument is query_mask."
                  if "multiple values" in problem else
                  "queries come from x (T = 4), keys and values from context (S = 5): "
                  "cross_attention(query=x, value=context, key=context, ...).")
checks.check_shape(output, (2, 4, 6), "DecoderLayer: the output has the shape of x (2, 4, 6)",
                   hint="queries come from x, keys and values from context.")
scores = checks.check_shape(decoder_layer.last_attention_scores, (2, 2, 4, 5),
                            "last_attention_scores (B, num_heads, T, S)",
                            hint="cross_attention(..., return_attention_scores=True) returns "
                                 "(output, scores); keep the CROSS-attention's scores, not the "
                                 "self-attention's (B, num_heads, T, T).")
sublayers = {n: getattr(decoder_layer, n, None) for n in ("self_attention", "cross_attention",
                                                        "norm1", "norm2", "norm3", "ffn")}
checks.check_true(all(isinstance(sublayers[n], keras.layers.MultiHeadAttention)
                      and sublayers[n].key_dim == 3 for n in ("self_attention", "cross_attention"))
                  and all(isinstance(sublayers[n], keras.layers.LayerNormalization)
                          and sublayers[n].epsilon == 1e-6 for n in ("norm1", "norm2", "norm3"))
                  and isinstance(sublayers["ffn"], FeedForward),
                  "self_attention, cross_attention (MultiHeadAttention, key_dim=3), norm1..3 "
                  "(epsilon 1e-6) and ffn (FeedForward)",
                  "a sublayer is missing or of another kind")
# Known weights: both attentions with identity projections (numpy_identity_attention),
# ffn giving 0 (dense2 all zeros), and a scale and shift of its own in each norm.
decoder_layer.self_attention.set_weights(identity_attention_weights(6, 2))
decoder_layer.cross_attention.set_weights(identity_attention_weights(6, 2))
dense2 = decoder_layer.ffn.dense2
dense2.set_weights([np.zeros_like(w) for w in dense2.get_weights()])  # ffn(x) = 0
gamma1 = np.linspace(0.5, 1.5, 6, dtype="float32")
beta1 = np.linspace(-0.3, 0.3, 6, dtype="float32")
gamma2 = np.linspace(2.0, 1.0, 6, dtype="float32")
beta2 = np.linspace(0.4, -0.1, 6, dtype="float32")
gamma3, beta3 = np.linspace(0.8, 1.2, 6, dtype="float32"), np.full(6, 0.1, "float32")
for norm, weights in [("norm1", [gamma1, beta1]), ("norm2", [gamma2, beta2]),
                      ("norm3", [gamma3, beta3])]:
    getattr(decoder_layer, norm).set_weights(weights)


def decoder_expected(x, context, self_allowed, cross_allowed, mistake=None):
    """The layer's output and cross-attention weights with these weights (NumPy):
    h1 = norm1(x + self-attention(x)), h2 = norm2(h1 + cross-attention(h1, context)),
    norm3(h2 + ffn(h2)) with ffn giving 0; or, with `mistake`, a known mistake's."""
    if mistake == "pre-norm":
        h = numpy_layer_norm(x, gamma1, beta1)
        x1 = x + numpy_identity_attention(h, h, self_allowed, 2)[0]
        attended, weights = numpy_identity_attention(numpy_layer_norm(x1, gamma2, beta2),
                                                     context, cross_allowed, 2)
        return x1 + attended, weights
    attended = numpy_identity_attention(x, x, self_allowed, 2)[0]
    h1 = numpy_layer_norm(attended + (0 if mistake == "no self residual" else x), gamma1, beta1)
    query = x if mistake == "cross queries from x" else h1
    attended, weights = numpy_identity_attention(query, context, cross_allowed, 2)
    h2 = numpy_layer_norm(attended + (0 if mistake == "no cross residual" else h1), gamma2, beta2)
    return numpy_layer_norm(h2, gamma3, beta3), weights


causal = np.tril(np.ones((4, 4), bool))[None]  # (1, T, T): key j <= query i
every_source = np.ones((2, 4, 5), bool)
output = checks.to_numpy(decoder_layer(x, context, training=False))
scores = checks.to_numpy(decoder_layer.last_attention_scores)
again = checks.to_numpy(decoder_layer(x, context, training=False))
checks.check_true(np.array_equal(again, output),
                  "DecoderLayer: two calls with training=False give the same output",
                  "they differ: something is dropped at inference",
                  hint="pass training on to every dropout: self.dropout(..., training=training).")
future = x.copy()
future[:, 2:] = 7.0  # new target tokens at positions 2 and 3
moved = checks.to_numpy(decoder_layer(future, context, training=False))
changed = ~np.isclose(moved[:, :2], output[:, :2], rtol=1e-4, atol=1e-5).all(axis=(0, 2))
checks.check_close(moved[:, :2], output[:, :2],
                   "DecoderLayer: changing future tokens changes no earlier output",
                   hint="the look-ahead mask keeps the diagonal (key j <= query i): with the "
                        "diagonal hidden too, the first token has no key left at all (if the "
                        "layer calls your causal_mask, its own check must pass first)."
                   if changed.tolist() == [True, False] else
                   "the self-attention needs the look-ahead mask: query i sees keys j <= i.")
expected, expected_scores = decoder_expected(x, context, causal, every_source)
checks.check_close(output, expected, "DecoderLayer at inference, no padding (causal, post-norm)",
                   hint=likely_hint(output, [
                       (np.concatenate([output[:, :1], decoder_expected(  # row 0: no key left
                           x, context, np.tril(causal, -1), every_source)[0][:, 1:]], axis=1),
                        "the look-ahead mask keeps the diagonal: a token attends to itself "
                        "(key j <= query i)."),
                       (decoder_expected(x, context, causal, every_source, "pre-norm")[0],
                        "post-norm: normalise AFTER each residual sum, x = norm1(x + "
                        "attention), not before each sublayer (pre-norm)."),
                       (decoder_expected(x, context, causal, every_source,
                                         "cross queries from x")[0],
                        "the cross-attention's queries are the output of the first sublayer "
                        "(after norm1), not the layer's input."),
                       (decoder_expected(x, context, causal, every_source,
                                         "no self residual")[0],
                        "add x back around the self-attention: norm1(x + dropout(...))."),
                       (decoder_expected(x, context, causal, every_source,
                                         "no cross residual")[0],
                        "add x back around the cross-attention: norm2(x + dropout(...)).")],
                       "x = norm1(x + dropout(self_attention(x, causal))); x = norm2(x + "
                       "dropout(cross_attention(query=x, value=context))); x = norm3(x + ffn(x))."))
checks.check_close(scores, expected_scores, "last_attention_scores: the cross-attention weights",
                   hint="keep the scores that cross_attention(..., return_attention_scores=True) "
                        "returned in this call.")
# Target padding first in sentence 0 and last in sentence 1; source padding
# last in sentence 0 and first in sentence 1.
target_real = np.array([[False, True, True, True], [True, True, True, False]])
source_real = np.array([[True, True, True, False, False], [False, True, True, True, True]])
masks = dict(x_padding_mask=target_real, context_padding_mask=source_real)
output, problem = attempt(decoder_layer, x, context, training=False, **masks)
checks.check_true(not problem, "DecoderLayer with x_padding_mask (2, 4) and "
                  "context_padding_mask (2, 5)", problem,
                  hint="each attention mask must broadcast to (B, T, S) (T = 4, S = 5): the "
                       "source padding (B, S) hides key columns as (B, 1, S); check the shape "
                       "your combine_masks(key_mask=...) gives.")
output = checks.to_numpy(output)
scores = checks.to_numpy(decoder_layer.last_attention_scores)
padded_sources = target_real[:, None, :, None] & ~source_real[:, None, None, :]  # (B, 1, T, S)
checks.check_close(np.where(padded_sources, scores, 0.0), np.zeros((2, 2, 4, 5)),
                   "cross-attention gives the padded source tokens weight 0",
                   hint="cross_attention(..., attention_mask=combine_masks(key_mask="
                        "context_padding_mask)), BY KEYWORD.")
padded = context.copy()
padded[~source_real] = -9.0  # new vectors at the padded source positions
moved = checks.to_numpy(decoder_layer(x, padded, training=False, **masks))
checks.check_close(moved[target_real], output[target_real],
                   "DecoderLayer: changing padded source tokens changes no real output",
                   hint="hide the padded source keys from the cross-attention (B, 1, S).")
padded = x.copy()
padded[~target_real] = 7.0  # new vectors at the padded target positions (the first of sentence 0)
moved = checks.to_numpy(decoder_layer(padded, context, training=False, **masks))
checks.check_close(moved[target_real], output[target_real],
                   "DecoderLayer: changing padded target tokens (first in sentence 0) changes "
                   "no real output",
                   hint="the self-attention hides padded target keys as well as the future: "
                        "the look-ahead mask AND x_padding_mask on the keys (padding may come "
                        "first).")
checks.check_close(output[target_real],
                   decoder_expected(x, context, causal & target_real[:, None, :],
                                    source_real[:, None, :])[0][target_real],
                   "DecoderLayer with both padding masks, at the real target positions")
# While training, with the other sublayers giving 0, each attention's dropout
# must change the output.
for kept, silenced in [("self_attention", "cross_attention"),
                       ("cross_attention", "self_attention")]:
    silent = getattr(decoder_layer, silenced)
    silent.set_weights([np.zeros_like(w) for w in silent.get_weights()])
    quiet = checks.to_numpy(decoder_layer(x, context, training=False))
    trained = checks.to_numpy(decoder_layer(x, context, training=True))
    silent.set_weights(identity_attention_weights(6, 2))
    checks.check_true(not np.allclose(trained, quiet, rtol=1e-4, atol=1e-5),
                      f"DecoderLayer(dropout_rate=0.5), training=True: dropout on the output of "
                      f"{kept} changes the output ({silenced} and ffn giving 0)",
                      "it gave the inference output",
                      hint=f"x = norm(x + self.dropout({kept}(...), training=training)).")
checks.check_config(DecoderLayer, decoder_layer, {"d_model": 6, "num_heads": 2, "dff": 24, "dropout_rate": 0.5})
checks.check_raises(ValueError, lambda: DecoderLayer(d_model=6, num_heads=4, dff=24),
                    "DecoderLayer(d_model=6, num_heads=4, dff=24) (6 is not a multiple of 4)",
                    hint="keep the given validate_layer_arguments(...) call in __init__.")

# %% nbgrader="tests" grade_id="test_DecoderLayer"

# %% nbgrader="tests" grade_id="test_DecoderLayer__padding"

# %% nbgrader="tests" grade_id="test_DecoderLayer__training"

# %% nbgrader="tests" grade_id="test_DecoderLayer__config"

# %% [markdown]
# The lecture's toy translation: the source "how are you" (padded to 4 tokens)
# goes through the encoder layer, and the decoder reads "<SOS> i am". Below, the
# cross-attention weights of each head: one row per target token, one column per
# source token. The weights are random-looking because nothing is trained yet
# (lab 5 trains a whole Transformer), but the structure is already right: every
# row sums to 1 and the `<PAD>` column gets nothing.

# %% nbgrader="locked" grade_id="demo_DecoderLayer" grading="skip"
keras.utils.set_random_seed(1)
source_tokens = ["how", "are", "you", "<PAD>"]
target_tokens = ["<SOS>", "i", "am"]
source = np.array([[token_id[w] for w in source_tokens]])  # [[5, 8, 9, 2]]
target = np.array([[token_id[w] for w in target_tokens]])  # [[0, 6, 3]]
source_real = padding_mask(source, pad_id=token_id["<PAD>"])
context = encoder_layer(embedding(source), padding_mask=source_real)  # (1, 4, 6)
decoder_layer = DecoderLayer(d_model=d_model, num_heads=2, dff=24)
decoded = decoder_layer(embedding(target), context, context_padding_mask=source_real)
scores = checks.to_numpy(decoder_layer.last_attention_scores)  # (1, 2, 3, 4)
print("decoded:", tuple(decoded.shape), " cross-attention scores:", scores.shape)

figure, axes = plt.subplots(1, 2, figsize=(10, 3.4))
for head, ax in enumerate(axes):
    plots.heatmap(scores[0, head], target_tokens, source_tokens,
                  f"cross-attention, head {head}", ax=ax, vmax=1.0)
    ax.set(xlabel="source token (key)", ylabel="target token (query)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Conclusion
#
# Masks are small boolean matrices with a big job: the look-ahead mask keeps the
# decoder from reading the answer it is asked to predict, and padding masks keep
# filler tokens out of every attention. With them you built the two layers of
# the original Transformer: the encoder layer (self-attention, feed-forward) and
# the decoder layer (causal self-attention, cross-attention to the encoder,
# feed-forward), each sublayer wrapped in dropout, a residual connection and
# layer normalization. Lab 5 stacks them, adds embeddings and positions, trains
# the whole model, and decodes with it.
