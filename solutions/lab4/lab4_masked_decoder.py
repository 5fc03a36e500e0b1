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
# notebook, so a passing check is necessary, not sufficient. Read-only cells
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
import keras
from keras import ops
import matplotlib.pyplot as plt

import labkit
from labkit import checks, plots

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% nbgrader="locked" grade_id="helpers"
# Two helpers for this lab: draw a boolean mask, and check a layer's arguments.


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


def validate_layer_arguments(**arguments):
    """Raise a ValueError at once for an invalid layer argument.

    Sizes (`d_model`, `num_heads`, `dff`) must be positive integers,
    `dropout_rate` a number in [0, 1), and `d_model` a multiple of `num_heads`.
    """
    for name, value in arguments.items():
        if name == "dropout_rate":
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 <= value < 1:
                raise ValueError(
                    f"Received an invalid value for argument `{name}`, expected a "
                    f"number in [0, 1) (the fraction of values dropped while "
                    f"training). Received: {name}={value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or value <= 0:
            raise ValueError(
                f"Received an invalid value for argument `{name}`, expected a "
                f"positive integer. Received: {name}={value!r}")
    if "num_heads" in arguments and arguments["d_model"] % arguments["num_heads"]:
        raise ValueError(
            f"Received d_model={arguments['d_model']} and "
            f"num_heads={arguments['num_heads']}: d_model must be a multiple of "
            f"num_heads, since each head gets key_dim = d_model // num_heads "
            f"features. Choose num_heads among the divisors of d_model.")


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

# %% nbgrader="tests" grade_id="test_causal_mask" points=1
# Hidden tests of `causal_mask` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_causal_mask():
    import numpy as np
    from autograder.testing import assert_shape, assert_true
    from autograder.references import lab4 as reference

    def check(length, expected):
        what = f"causal_mask({length})"
        mask = assert_shape(reference.to_numpy(causal_mask(length)), (length, length), what)
        assert_true(mask.dtype == bool, f"{what}: the dtype is {mask.dtype}, expected bool.")
        expected = np.asarray(expected, dtype=bool)
        if np.array_equal(mask, np.tril(np.ones((length, length), bool), k=-1)) and length > 0:
            raise AssertionError(f"{what}: the diagonal is False; a token may attend to "
                                 "itself (key j <= query i).")
        if np.array_equal(mask, expected.T) and length > 1:
            raise AssertionError(f"{what}: the mask is transposed; rows are queries, "
                                 "columns keys, and query i sees keys j <= i.")
        wrong = mask != expected
        if wrong.any():
            raise AssertionError(f"{what}: {int(wrong.sum())} of {mask.size} entries are "
                                 f"wrong (first at {tuple(int(i) for i in np.argwhere(wrong)[0])}).")

    check(1, [[True]])
    check(2, [[True, False],
              [True, True]])
    check(4, [[True, False, False, False],
              [True, True, False, False],
              [True, True, True, False],
              [True, True, True, True]])
    check(9, reference.causal_mask(9))


_hidden_test_causal_mask()
del _hidden_test_causal_mask
### END HIDDEN TESTS

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

# %% nbgrader="tests" grade_id="test_padding_mask" points=1
# Hidden tests of `padding_mask` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_padding_mask():
    import numpy as np
    from autograder.testing import rng, assert_shape, assert_true
    from autograder.references import lab4 as reference

    def check(result, token_ids, pad_id, what):
        mask = assert_shape(reference.to_numpy(result), np.shape(token_ids), what)
        assert_true(mask.dtype == bool, f"{what}: the dtype is {mask.dtype}, expected bool.")
        expected = reference.padding_mask(token_ids, pad_id)
        if np.array_equal(mask, ~expected):
            raise AssertionError(f"{what}: the mask is inverted; True marks the real "
                                 "tokens, False the padding.")
        wrong = mask != expected
        assert_true(not wrong.any(), f"{what}: {int(wrong.sum())} of {mask.size} entries "
                                     "are wrong.")

    ids = np.array([[5, 8, 9, 0], [6, 3, 0, 0]], dtype="int32")
    check(padding_mask(ids), ids, 0, "padding_mask(ids (2, 4))")
    r = rng("padding_mask")
    for pad_id, shape, dtype in [(0, (3, 7), "int64"), (2, (4, 5), "int32"),
                                 (7, (2, 9), "int64")]:
        ids = r.integers(0, 11, size=shape).astype(dtype)
        ids[:, 0] = (pad_id + 1) % 11
        ids[0, -2:] = pad_id
        what = f"padding_mask(ids {shape} {dtype}, pad_id={pad_id})"
        check(padding_mask(ids, pad_id=pad_id), ids, pad_id, what)
    ids = np.array([[0, 4, 2, 2], [0, 1, 9, 2]], dtype="int32")
    check(padding_mask(reference.tensor(ids, padding_mask), pad_id=2), ids, 2,
          "padding_mask(a backend tensor of ids (2, 4), pad_id=2)")


_hidden_test_padding_mask()
del _hidden_test_padding_mask
### END HIDDEN TESTS

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
# `(B, 1, T_k)` and fits any number of queries. With `causal=True` both axes are
# full. Use `ops.expand_dims` and `ops.logical_and`; you may call your
# `causal_mask`.

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
        A missing mask leaves its axis of length 1 (e.g. `(B, 1, T_k)`).
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
                   hint="AND the padding masks with causal_mask(T)[None].")
only_keys = checks.to_numpy(combine_masks(key_mask=np.array([[True, True, False]])))
checks.check_true(only_keys.ndim == 3 and only_keys.shape[0] == 1 and only_keys.shape[2] == 3
                  and only_keys.shape[1] in (1, 3),
                  "combine_masks(key_mask (1, 3)) has shape (1, 1, 3)",
                  f"the shape is {only_keys.shape}",
                  hint="a missing query mask leaves an axis of length 1: key_mask[:, None, :].")
only_keys = checks.check_close(np.broadcast_to(only_keys, (1, 3, 3)),
                               [[[1, 1, 0], [1, 1, 0], [1, 1, 0]]], "combine_masks(key_mask=...) only")

# %% nbgrader="tests" grade_id="test_combine_masks" points=2
# Hidden tests of `combine_masks` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_combine_masks():
    import numpy as np
    from autograder.testing import rng, assert_shape, assert_true
    from autograder.references import lab4 as reference

    def check(result, expected, what, exact_shape=True):
        mask = reference.to_numpy(result)
        swapped_shape = (expected.shape[0], expected.shape[2], expected.shape[1])
        if mask.shape == swapped_shape != expected.shape:
            raise AssertionError(f"{what}: returned shape {mask.shape}, expected "
                                 f"{expected.shape}; the query mask gives the rows "
                                 "(query_mask[:, :, None]) and the key mask the columns "
                                 "(key_mask[:, None, :]).")
        if exact_shape:
            assert_shape(mask, expected.shape, what)
        else:
            assert_true(mask.ndim == 3 and all(m in (1, e) for m, e in
                                               zip(mask.shape, expected.shape)),
                        f"{what}: returned shape {mask.shape}, expected "
                        f"{expected.shape} (or 1 on the side of the missing mask).")
            mask = np.broadcast_to(mask, expected.shape)
        assert_true(mask.dtype == bool, f"{what}: the dtype is {mask.dtype}, expected bool.")
        wrong = mask != expected
        if wrong.any():
            if np.array_equal(mask, np.swapaxes(expected, 1, 2)):
                raise AssertionError(f"{what}: rows and columns are swapped; the query mask "
                                     "gives the rows (query_mask[:, :, None]), the key mask "
                                     "the columns (key_mask[:, None, :]).")
            raise AssertionError(f"{what}: {int(wrong.sum())} of {mask.size} entries are "
                                 f"wrong (first at {tuple(int(i) for i in np.argwhere(wrong)[0])}).")

    # The visible check's example, written out.
    query = np.array([[True, True, False]])
    key = np.array([[True, False, True, True]])
    check(combine_masks(query_mask=query, key_mask=key),
          np.array([[[True, False, True, True],
                     [True, False, True, True],
                     [False, False, False, False]]]),
          "combine_masks(query_mask (1, 3), key_mask (1, 4))")

    r = rng("combine_masks")

    def random_mask(batch, length):
        mask = r.random(size=(batch, length)) < 0.7
        mask[:, 0] = True
        return mask

    # Both masks, T_q != T_k: rows from the query mask, columns from the key mask.
    query, key = random_mask(3, 4), random_mask(3, 6)
    expected = reference.combine_masks(query, key)
    check(combine_masks(query_mask=query, key_mask=key), expected,
          "combine_masks(query_mask (3, 4), key_mask (3, 6))")
    check(combine_masks(query_mask=query, key_mask=key, causal=False), expected,
          "combine_masks(query_mask (3, 4), key_mask (3, 6), causal=False)")

    # Both masks and the look-ahead mask (self-attention of a decoder).
    target = random_mask(3, 5)
    target[1, 3:] = False
    check(combine_masks(query_mask=target, key_mask=target, causal=True),
          reference.combine_masks(target, target, causal=True),
          "combine_masks(query_mask (3, 5), key_mask (3, 5), causal=True)")

    # One mask only (self-attention, T = 5): the missing side allows everything.
    check(combine_masks(key_mask=target), reference.combine_masks(None, target),
          "combine_masks(key_mask (3, 5))", exact_shape=False)
    check(combine_masks(query_mask=target), reference.combine_masks(target, None),
          "combine_masks(query_mask (3, 5))", exact_shape=False)
    check(combine_masks(key_mask=target, causal=True),
          reference.combine_masks(None, target, causal=True),
          "combine_masks(key_mask (3, 5), causal=True)", exact_shape=False)
    check(combine_masks(query_mask=target, causal=True),
          reference.combine_masks(target, None, causal=True),
          "combine_masks(query_mask (3, 5), causal=True): only the query mask is given, "
          "the look-ahead still applies", exact_shape=False)


_hidden_test_combine_masks()
del _hidden_test_combine_masks
### END HIDDEN TESTS

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
# The usual way: replace masked scores with a large negative number (`-1e9`)
# before `ops.softmax(..., axis=-1)`. A row whose keys are *all* masked (a padded
# query) has no sensible answer, but it must stay finite: no NaN. `-inf` gives
# NaN there, and `-1e9` gives a uniform row; either way, setting the masked
# weights to 0 afterwards (`ops.where`) makes every masked weight exactly 0.
# `mask` broadcasts against `scores`, e.g. `(T_q, T_k)` or `(B, 1, T_k)`.

# %% nbgrader="solution" grade_id="masked_softmax"
def masked_softmax(scores, mask):
    """Softmax over the keys (last axis) that gives masked keys weight 0.

    Args:
        scores: float tensor `(..., T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`; True where a query may
            attend to a key.

    Returns:
        Weights of the shape of `scores`: 0 where `mask` is False; each row
        with at least one allowed key sums to 1; rows with none are finite.
    """
    ### BEGIN SOLUTION
    scores = ops.convert_to_tensor(scores)
    allowed = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(scores))  # (..., T_q, T_k)
    hidden = ops.where(allowed, scores, ops.full_like(scores, -1e9))
    weights = ops.softmax(hidden, axis=-1)  # (..., T_q, T_k)
    return ops.where(allowed, weights, ops.zeros_like(weights))  # masked: exactly 0
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_masked_softmax"
# Visible check: the lecture's look-ahead example, then a row with every key masked.
weights = checks.check_close(
    masked_softmax(raw_scores, causal_mask(4)),
    [[1.0, 0.0, 0.0, 0.0],
     [0.37754, 0.62246, 0.0, 0.0],
     [0.25839, 0.31560, 0.42601, 0.0],
     [0.21440, 0.26187, 0.26187, 0.26187]],
    "masked_softmax(scores of 'I am a student', causal_mask(4))",
    hint="masked scores get a large negative value before a softmax over the last axis.")
checks.check_true(np.all(weights[~np.tril(np.ones((4, 4), bool))] == 0.0),
                  "masked weights are exactly 0", "some masked weights are not 0",
                  hint="finish with ops.where(mask, weights, 0).")
all_masked = masked_softmax(np.array([[1.0, 2.0], [3.0, 4.0]]),
                            np.array([[False, False], [True, False]]))  # the first row: no key
checks.check_true(np.all(np.isfinite(checks.to_numpy(all_masked))),
                  "a fully masked row stays finite", "it contains NaN",
                  hint="use -1e9 rather than -inf, or set masked weights to 0 with ops.where.")
padded_keys = np.array([[[True, True, False, True]], [[True, False, False, False]]])  # (2, 1, 4)
weights = checks.check_shape(masked_softmax(np.ones((2, 3, 4)), padded_keys), (2, 3, 4),
                             "masked_softmax(scores (2, 3, 4), mask (2, 1, 4))",
                             hint="broadcast the mask to the shape of the scores (ops.broadcast_to).")

# %% nbgrader="tests" grade_id="test_masked_softmax" points=2
# Hidden tests of `masked_softmax` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_masked_softmax():
    import numpy as np
    from autograder.testing import (rng, assert_close, assert_shape, assert_finite,
                                    assert_true)
    from autograder.references import lab4 as reference

    def check(scores, mask, what, as_tensors=False):
        if as_tensors:
            result = masked_softmax(reference.tensor(scores, masked_softmax),
                                    reference.tensor(mask, masked_softmax))
        else:
            result = masked_softmax(scores, mask)
        weights = assert_shape(reference.to_numpy(result), scores.shape, what)
        weights = assert_finite(weights, what).astype(np.float64)
        allowed = np.broadcast_to(mask, scores.shape)
        live = allowed.any(axis=-1)  # rows with at least one key (the others: finite only)
        hidden = ~allowed & live[..., None]
        assert_true(np.all(weights[hidden] == 0.0),
                    f"{what}: masked keys (mask False) must get weight exactly 0; "
                    f"{int(np.count_nonzero(weights[hidden]))} of {int(hidden.sum())} do not.")
        sums = weights.sum(axis=-1)[live]
        assert_true(np.allclose(sums, 1.0, atol=1e-4),
                    f"{what}: the weights of a row do not sum to 1 over the allowed keys "
                    f"(sums from {sums.min():.3g} to {sums.max():.3g}); renormalise after "
                    "masking.")
        expected = reference.masked_softmax(scores, mask)
        assert_close(weights[live], expected[live], what)
        return weights

    # The lecture's look-ahead example: 1 / 0.38 0.62 / 0.26 0.32 0.43 / 0.21 0.26 ...
    lecture = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1],
                        [0.1, 0.3, 0.6, 0.1], [0.1, 0.3, 0.3, 0.3]], dtype="float32")
    weights = check(lecture, reference.causal_mask(4),
                    "masked_softmax(the lecture's scores for 'I am a student', causal mask)")
    rounded = np.array([[1, 0, 0, 0], [0.38, 0.62, 0, 0], [0.26, 0.32, 0.43, 0],
                        [0.21, 0.26, 0.26, 0.26]])
    assert_true(np.allclose(weights, rounded, atol=0.01),
                "masked_softmax: the lecture's look-ahead rows are not reproduced.")

    r = rng("masked_softmax")
    # A (T_q, T_k) mask broadcast over a batch; a (B, 1, T_k) padding mask; a full
    # (B, T_q, T_k) mask; 4-D scores (B, heads, T_q, T_k) with a (B, 1, 1, T_k) mask.
    cases = [((2, 4, 6), (4, 6)), ((3, 5, 7), (3, 1, 7)), ((2, 3, 5), (2, 3, 5)),
             ((2, 3, 4, 5), (2, 1, 1, 5))]
    for scores_shape, mask_shape in cases:
        scores = (3 * r.normal(size=scores_shape)).astype("float32")
        mask = r.random(size=mask_shape) < 0.6
        mask[..., 0] = True
        check(scores, mask, f"masked_softmax(scores {scores_shape}, mask {mask_shape})")

    # Rows whose keys are all masked are not graded, but must be finite.
    scores = (3 * r.normal(size=(2, 4, 5))).astype("float32")
    mask = r.random(size=(2, 4, 5)) < 0.6
    mask[..., 1] = True
    mask[0, 2, :] = False
    mask[1, 0, :] = False
    check(scores, mask, "masked_softmax(scores (2, 4, 5), mask with 2 fully masked rows)")
    check(scores[0], np.array([True, False, True, False, False]),
          "masked_softmax(scores (4, 5), mask (5,))")
    check(scores, np.ones((2, 4, 5), bool), "masked_softmax with nothing masked")
    check(scores, mask, "masked_softmax(backend tensors (2, 4, 5))", as_tensors=True)


_hidden_test_masked_softmax()
del _hidden_test_masked_softmax
### END HIDDEN TESTS

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
# - `__init__` checks its arguments at once (`validate_layer_arguments`, given),
#   stores each one under its own name (`self.d_model`, `self.dff`,
#   `self.dropout_rate`), and creates the sublayers `dense1` (`dff` units, ReLU),
#   `dense2` (`d_model` units) and `dropout`;
# - `build` (given) builds the sublayers, so the weights exist before the first
#   call;
# - `call` applies them: `dropout(dense2(dense1(x)))`, passing `training` on;
#   no residual here, the layers below add it;
# - `get_config` returns every constructor argument, so that
#   `FeedForward.from_config(layer.get_config())` rebuilds the layer.

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
        training: whether dropout is active (default: inference).

    Returns:
        `(B, T, d_model)`.

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
# Visible check: sublayers, shapes, and one position by hand.
ffn = FeedForward(d_model=6, dff=24, dropout_rate=0.1)
checks.check_true(isinstance(getattr(ffn, "dense1", None), keras.layers.Dense)
                  and isinstance(getattr(ffn, "dense2", None), keras.layers.Dense)
                  and isinstance(getattr(ffn, "dropout", None), keras.layers.Dropout),
                  "FeedForward has sublayers dense1, dense2 (Dense) and dropout (Dropout)",
                  "a sublayer is missing or of another class",
                  hint="create them in __init__: self.dense1 = keras.layers.Dense(...).")
checks.check_true((ffn.d_model, ffn.dff, ffn.dropout_rate) == (6, 24, 0.1),
                  "FeedForward stores d_model, dff and dropout_rate",
                  "self.d_model, self.dff or self.dropout_rate is wrong")
checks.check_shape(ffn(np.zeros((2, 3, 6), "float32")), (2, 3, 6),
                   "FeedForward(d_model=6, dff=24) on x (2, 3, 6)")
# dense1 copies the 6 inputs into its first 6 units, dense2 copies them back:
# the output is relu(x), so the negative entry becomes 0.
ffn.dense1.set_weights([np.eye(6, 24, dtype="float32"), np.zeros(24, "float32")])
ffn.dense2.set_weights([np.eye(24, 6, dtype="float32"), np.zeros(6, "float32")])
checks.check_close(ffn(np.array([[1.0, -1.0, 2.0, 0.5, -3.0, 0.0]], "float32"), training=False),
                   [[1.0, 0.0, 2.0, 0.5, 0.0, 0.0]], "FeedForward: relu between dense1 and dense2",
                   hint="dense1 has activation='relu'; dense2 has none; no residual.")
clone = FeedForward.from_config(ffn.get_config())
checks.check_true((clone.d_model, clone.dff, clone.dropout_rate) == (6, 24, 0.1),
                  "FeedForward.from_config(ffn.get_config())", "the arguments did not survive",
                  hint="get_config adds d_model, dff and dropout_rate to super().get_config().")

# %% nbgrader="tests" grade_id="test_FeedForward" points=2
# Hidden tests of `FeedForward` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_FeedForward():
    import numpy as np
    from autograder.testing import rng, assert_close, assert_shape, assert_true
    from autograder.references import lab4 as reference

    # Invalid arguments: a ValueError at once.
    for arguments in [dict(d_model=0, dff=8), dict(d_model=4, dff=-2),
                      dict(d_model=4, dff=8, dropout_rate=1.5)]:
        text = ", ".join(f"{k}={v}" for k, v in arguments.items())
        name, _ = reference.raised(lambda: FeedForward(**arguments))
        assert_true(name == "ValueError",
                    f"FeedForward({text}) should raise a ValueError at once; it "
                    f"{'raised ' + name if name else 'did not raise'}.")

    r = rng("FeedForward")
    layer = FeedForward(d_model=6, dff=12, dropout_rate=0.5)
    for name, value in [("d_model", 6), ("dff", 12), ("dropout_rate", 0.5)]:
        stored = reference.sublayer(layer, name)
        assert_true(stored == value, f"FeedForward(d_model=6, dff=12, dropout_rate=0.5)."
                                     f"{name} is {stored!r}, expected {value!r}.")
    x = r.normal(size=(2, 5, 6)).astype("float32")
    what = "FeedForward(d_model=6, dff=12, dropout_rate=0.5) on x (2, 5, 6)"
    assert_shape(reference.to_numpy(layer(x, training=False)), (2, 5, 6), what)
    for name, kind in [("dense1", "Dense"), ("dense2", "Dense"), ("dropout", "Dropout")]:
        assert_true(reference.is_keras_layer(reference.sublayer(layer, name), kind),
                    f"{what}: the sublayer `{name}` should be a keras.layers.{kind}.")
    assert_true(reference.sublayer(layer, "dropout.rate") == 0.5,
                f"{what}: dropout.rate should be dropout_rate (0.5).")

    # Values with random weights, at inference: relu(x W1 + b1) W2 + b2.
    weights = reference.randomize_weights(layer, reference.FEED_FORWARD_WEIGHTS, r)
    shapes = [tuple(w.shape) for w in weights["dense1"] + weights["dense2"]]
    assert_true(shapes == [(6, 12), (12,), (12, 6), (6,)],
                f"{what}: the weights of dense1 and dense2 have shapes {shapes}, "
                "expected [(6, 12), (12,), (12, 6), (6,)].")
    expected = reference.feed_forward(x, weights["dense1"], weights["dense2"])
    output = reference.to_numpy(layer(x, training=False))
    if not np.allclose(output, expected, rtol=1e-4, atol=1e-5):
        for guess, hint in [(expected + x, "the input is added to the output; the residual "
                                           "belongs to the encoder and decoder layers"),
                            (x.astype(np.float64) @ weights["dense1"][0] @ weights["dense2"][0]
                             + weights["dense1"][1] @ weights["dense2"][0] + weights["dense2"][1],
                             "ReLU is missing after dense1")]:
            assert_true(not np.allclose(output, guess, rtol=1e-4, atol=1e-5),
                        f"{what}: {hint}.")
    assert_close(output, expected, f"{what}, training=False")
    assert_close(reference.to_numpy(layer(x)), expected,
                 f"{what}, training left out (inference)")
    x2 = r.normal(size=(7, 6)).astype("float32")
    assert_close(reference.to_numpy(layer(x2, training=False)),
                 reference.feed_forward(x2, weights["dense1"], weights["dense2"]),
                 "FeedForward on x (7, 6), training=False")

    # Dropout while training: each output is 0 or 2x (rate 0.5); never at inference.
    trained = reference.to_numpy(layer(x, training=True)).astype(np.float64)
    zero = np.abs(trained) <= 1e-6
    scaled = np.isclose(trained, 2 * expected, rtol=1e-4, atol=1e-5)
    assert_true(np.all(zero | scaled),
                f"{what}, training=True: every output should be either 0 (dropped) or "
                "2x its inference value (kept, scaled by 1/(1 - 0.5)); dropout acts on "
                "the output of dense2.")
    assert_true(5 <= int(zero.sum()) <= 55,
                f"{what}, training=True: {int(zero.sum())} of 60 outputs are dropped; "
                "with dropout_rate=0.5 about half should be. Pass `training` to the "
                "dropout layer.")

    # Config round trip.
    config = layer.get_config()
    assert_true(isinstance(config, dict), f"{what}: get_config() did not return a dict.")
    for name, value in [("d_model", 6), ("dff", 12), ("dropout_rate", 0.5)]:
        assert_true(config.get(name) == value,
                    f"{what}: get_config()[{name!r}] is {config.get(name)!r}, expected {value!r}.")
    clone = FeedForward.from_config(config)
    assert_shape(reference.to_numpy(clone(x, training=False)), (2, 5, 6),
                 "FeedForward.from_config(layer.get_config()) on x (2, 5, 6)")
    assert_true(reference.sublayer(clone, "dff") == 12,
                "FeedForward.from_config(layer.get_config()).dff is not 12.")

    # Another rate: dropout_rate is the fraction DROPPED (not a keep probability).
    layer = FeedForward(d_model=4, dff=8, dropout_rate=0.2)
    what = "FeedForward(d_model=4, dff=8, dropout_rate=0.2)"
    x = r.normal(size=(2, 5, 4)).astype("float32")
    expected = reference.to_numpy(layer(x, training=False)).astype(np.float64)
    rate = reference.sublayer(layer, "dropout.rate")
    assert_true(abs(rate - 0.2) < 1e-9,
                f"{what}: dropout.rate is {rate!r}, expected 0.2; dropout_rate is the "
                "fraction of outputs dropped, passed as it is to keras.layers.Dropout.")
    trained = reference.to_numpy(layer(x, training=True)).astype(np.float64)
    zero = np.abs(trained) <= 1e-6
    scaled = np.isclose(trained, expected / 0.8, rtol=1e-4, atol=1e-5)
    assert_true(np.all(zero | scaled),
                f"{what}, training=True: every output should be either 0 (dropped) or "
                "1.25x its inference value (kept, scaled by 1/(1 - 0.2)).")


_hidden_test_FeedForward()
del _hidden_test_FeedForward
### END HIDDEN TESTS

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
# this lab follows the paper.)
#
# Sublayers, with exactly these names: `self_attention`, a
# `keras.layers.MultiHeadAttention` with `num_heads` heads of
# `key_dim = d_model // num_heads`; `ffn`, your `FeedForward`; `norm1` and
# `norm2`, `keras.layers.LayerNormalization(epsilon=1e-6)`; and `dropout`, a
# `keras.layers.Dropout` for the attention output.
#
# **The padding mask.** `call(x, padding_mask=None, training=None)` takes
# `padding_mask` `(B, T)`, True for real tokens. No query may attend to a padded
# key, so give the attention the mask `(B, 1, T)` (`combine_masks(key_mask=...)`).
# The outputs at padded positions are computed but meaningless; the next layers
# ignore them.
#
# **Pass the mask by keyword.** `keras.layers.MultiHeadAttention` is called as
# `mha(query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
# attention_mask=None, ...)`: in `mha(x, x, x, mask)` the mask is a
# *query_mask*, and Keras runs without complaint, silently attending to padding.
# Write `self.self_attention(query=x, value=x, key=x, attention_mask=mask,
# training=training)`.

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
            tokens are never attended to.
        training: whether dropout is active (default: inference).

    Returns:
        `(B, T, d_model)`; the vectors at padded positions are meaningless.

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
# Visible check: sublayers, shape, post-norm, and padding that changes nothing.
encoder_layer = EncoderLayer(d_model=6, num_heads=2, dff=24)
x = np.random.default_rng(1).normal(size=(2, 5, 6)).astype("float32")
real = np.array([[True, True, True, False, False], [True, True, True, True, True]])
output = checks.check_shape(encoder_layer(x, padding_mask=real), (2, 5, 6),
                            "EncoderLayer(d_model=6, num_heads=2, dff=24) on x (2, 5, 6)")
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
checks.check_close(output.mean(axis=-1), np.zeros((2, 5)),
                   "post-norm: each output vector has mean 0", atol=1e-4,
                   hint="the layer ends with norm2(x + ffn(x)).")
changed = x.copy()
changed[0, 3:] = 100.0  # new vectors at the padded positions of sentence 0
checks.check_close(checks.to_numpy(encoder_layer(changed, padding_mask=real))[real], output[real],
                   "EncoderLayer: changing padded tokens changes no real output",
                   hint="pass attention_mask=combine_masks(key_mask=padding_mask) BY KEYWORD.")
output = checks.check_close(encoder_layer(x, padding_mask=real, training=False), output,
                            "EncoderLayer: training=False gives the same output again")

# %% nbgrader="tests" grade_id="test_EncoderLayer" points=4
# Hidden tests of `EncoderLayer` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_EncoderLayer():
    import numpy as np
    from autograder.testing import rng, assert_close, assert_shape, assert_true
    from autograder.references import lab4 as reference

    # Invalid arguments: a ValueError at once.
    for arguments in [dict(d_model=8, num_heads=3, dff=16), dict(d_model=8, num_heads=0, dff=16),
                      dict(d_model=8, num_heads=2, dff=16, dropout_rate=1.5)]:
        text = ", ".join(f"{k}={v}" for k, v in arguments.items())
        name, _ = reference.raised(lambda: EncoderLayer(**arguments))
        assert_true(name == "ValueError",
                    f"EncoderLayer({text}) should raise a ValueError at once; it "
                    f"{'raised ' + name if name else 'did not raise'}.")

    r = rng("EncoderLayer")
    for d_model, num_heads, dff, batch, length in [(8, 2, 16, 3, 5), (12, 3, 20, 2, 7)]:
        what = f"EncoderLayer(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        layer = EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=0.5)
        expected_attributes = dict(d_model=d_model, num_heads=num_heads, dff=dff,
                                   dropout_rate=0.5)
        for (name, value), stored in zip(expected_attributes.items(),
                                         reference.sublayers(layer, expected_attributes)):
            assert_true(stored == value, f"{what}.{name} is {stored!r}, expected {value!r}.")
        x = r.normal(size=(batch, length, d_model)).astype("float32")
        on_x = f"{what} on x {x.shape}"
        real = np.ones((batch, length), dtype=bool)
        real[0, -2:] = False
        real[1, -1:] = False
        for masks in ({}, dict(padding_mask=real)):
            name, message = reference.raised(lambda: layer(x, training=False, **masks))
            if name is not None and name != "NotImplementedError":
                raise AssertionError(f"{on_x}{' with a padding mask' if masks else ''}: "
                                     f"{message}" + reference.explain(message))
        assert_shape(reference.to_numpy(layer(x, training=False)), x.shape, on_x)

        # Sublayers: Keras MultiHeadAttention with key_dim = d_model // num_heads,
        # LayerNormalization with epsilon 1e-6.
        attention, norm1, norm2 = reference.sublayers(layer, ["self_attention", "norm1", "norm2"])
        assert_true(reference.is_keras_layer(attention, "MultiHeadAttention"),
                    f"{what}: `self_attention` should be a keras.layers.MultiHeadAttention.")
        for name, norm in [("norm1", norm1), ("norm2", norm2)]:
            assert_true(reference.is_keras_layer(norm, "LayerNormalization"),
                        f"{what}: `{name}` should be a keras.layers.LayerNormalization.")
        config, *epsilons = reference.calls(layer, [("self_attention.get_config", ()),
                                                    ("norm1.epsilon", None),
                                                    ("norm2.epsilon", None)])
        assert_true((config.get("num_heads"), config.get("key_dim")) ==
                    (num_heads, d_model // num_heads),
                    f"{what}: self_attention has num_heads={config.get('num_heads')}, "
                    f"key_dim={config.get('key_dim')}; expected num_heads={num_heads}, "
                    f"key_dim={d_model // num_heads} (d_model // num_heads).")
        for name, epsilon in zip(("norm1", "norm2"), epsilons):
            assert_true(abs(epsilon - 1e-6) < 1e-12, f"{what}: {name}.epsilon should be 1e-6.")

        # Values with random weights (the student's own, read by sublayer name).
        weights = reference.randomize_weights(layer, reference.ENCODER_WEIGHTS, r)
        expected = reference.encoder_layer(x, weights)
        output = reference.to_numpy(layer(x, training=False))
        if output.shape == expected.shape and not np.allclose(output, expected,
                                                              rtol=1e-4, atol=1e-5):
            pre_norm = reference.encoder_layer(x, weights, pre_norm=True)
            assert_true(not np.allclose(output, pre_norm, rtol=1e-4, atol=1e-5),
                        f"{on_x}: the layer normalises before each sublayer (pre-norm); "
                        "this lab follows the paper: x = norm1(x + attention), "
                        "x = norm2(x + ffn(x)).")
        assert_close(output, expected, f"{on_x}, no padding, training=False (post-norm: "
                                       "x = norm1(x + attention(x)); x = norm2(x + ffn(x)))")
        assert_close(reference.to_numpy(layer(x)), expected,
                     f"{on_x}, training left out (inference)")

        # Padding: the last tokens of the first sentences are padding.
        output = reference.to_numpy(layer(x, padding_mask=real, training=False))
        assert_shape(output, x.shape, f"{on_x} with a padding mask")
        changed = x.copy()
        changed[~real] = 5 * r.normal(size=changed[~real].shape)
        moved = reference.to_numpy(layer(changed, padding_mask=real, training=False))
        assert_true(np.allclose(moved[real], output[real], rtol=1e-4, atol=1e-5),
                    f"{on_x}: changing the vectors at padded positions changed the outputs "
                    "at real positions; padded keys must be hidden from the attention "
                    "(attention_mask (B, 1, T), passed BY KEYWORD: the fourth positional "
                    "argument of MultiHeadAttention is query_mask).")
        assert_close(output[real], reference.encoder_layer(x, weights, padding_mask=real)[real],
                     f"{on_x} with a padding mask (B, T), at the real positions")
        again = reference.to_numpy(layer(x, padding_mask=real, training=False))
        assert_true(np.array_equal(again, output),
                    f"{on_x}: two calls with training=False gave different outputs.")
        trained = reference.to_numpy(layer(x, padding_mask=real, training=True))
        assert_true(not np.allclose(trained, output, rtol=1e-4, atol=1e-5),
                    f"{on_x}: training=True with dropout_rate=0.5 gave the inference output; "
                    "dropout must act while training.")

        # Dropout on the attention's output as well: with the feed-forward block
        # silenced (dense2 all zeros: ffn(x) = 0), training must still change the output.
        reference.set_sublayer_weights(layer, "ffn.dense2",
                                       [np.zeros_like(w) for w in weights["ffn.dense2"]])
        quiet = reference.to_numpy(layer(x, padding_mask=real, training=False))
        trained = reference.to_numpy(layer(x, padding_mask=real, training=True))
        assert_true(not np.allclose(trained, quiet, rtol=1e-4, atol=1e-5),
                    f"{on_x}: with the feed-forward block giving 0, training=True (dropout_rate"
                    "=0.5) gave the inference output; the attention's output needs dropout "
                    "too: x = norm1(x + dropout(attention(x))).")
        reference.set_sublayer_weights(layer, "ffn.dense2", weights["ffn.dense2"])

    # Config round trip.
    config = layer.get_config()
    assert_true(isinstance(config, dict), f"{what}: get_config() did not return a dict.")
    for name, value in [("d_model", d_model), ("num_heads", num_heads), ("dff", dff),
                        ("dropout_rate", 0.5)]:
        assert_true(config.get(name) == value,
                    f"{what}: get_config()[{name!r}] is {config.get(name)!r}, expected {value!r}.")
    clone = EncoderLayer.from_config(config)
    assert_shape(reference.to_numpy(clone(x, training=False)), x.shape,
                 "EncoderLayer.from_config(layer.get_config()) on x")
    assert_true(reference.sublayer(clone, "num_heads") == num_heads,
                "EncoderLayer.from_config(layer.get_config()).num_heads is wrong.")


_hidden_test_EncoderLayer()
del _hidden_test_EncoderLayer
### END HIDDEN TESTS

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
# normalization (post-norm again):
#
# 1. **causal self-attention** over the target: `self_attention`, with the
#    look-ahead mask (and the target's padding mask on the keys), so position
#    $i$ only sees positions $\le i$;
# 2. **cross-attention** (encoder-decoder attention): `cross_attention`, whose
#    **queries come from the decoder** (the output of step 1) while **keys and
#    values come from the encoder's output** `context`. Each target position asks
#    "which source words matter for me?"; padded source tokens are hidden;
# 3. the feed-forward block `ffn`.
#
# $$x \leftarrow \operatorname{norm}_1(x + \operatorname{SelfAttn}_{\text{causal}}(x)),\quad
#   x \leftarrow \operatorname{norm}_2(x + \operatorname{CrossAttn}(x, \text{context})),\quad
#   x \leftarrow \operatorname{norm}_3(x + \operatorname{FFN}(x)).$$
#
# `call(x, context, x_padding_mask=None, context_padding_mask=None,
# training=None)`: `x` is `(B, T, d_model)`, `context` `(B, S, d_model)`, the
# padding masks `(B, T)` and `(B, S)` are True for real tokens. Keep the
# cross-attention weights of the last call in `self.last_attention_scores`,
# `(B, num_heads, T, S)` (ask for them with `return_attention_scores=True`).
# Sublayers: `self_attention`, `cross_attention` (both
# `keras.layers.MultiHeadAttention`, `key_dim = d_model // num_heads`), `ffn`,
# `norm1`, `norm2`, `norm3` (epsilon 1e-6), `dropout`. Pass every mask by keyword.

# %% nbgrader="solution" grade_id="DecoderLayer"
class DecoderLayer(keras.layers.Layer):
    """One layer of the Transformer decoder (post-norm, as in the paper).

    Causal self-attention over the target, cross-attention from the target
    (queries) to the encoder's output (keys and values), then the
    feed-forward block; each followed by dropout, a residual connection and
    layer normalization.

    Args:
        d_model: size of the token vectors, a positive integer.
        num_heads: number of attention heads; must divide `d_model`.
        dff: hidden units of the feed-forward block, a positive integer.
        dropout_rate: dropout after each sublayer while training, in [0, 1).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        x: the target so far, `(B, T, d_model)`.
        context: the encoder's output, `(B, S, d_model)`.
        x_padding_mask: optional bool `(B, T)`, True for real target tokens.
        context_padding_mask: optional bool `(B, S)`, True for real source tokens.
        training: whether dropout is active (default: inference).

    Returns:
        `(B, T, d_model)`. The cross-attention weights of the call are kept in
        `last_attention_scores`, `(B, num_heads, T, S)`.

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
        head_size = d_model // num_heads  # key_dim of each head
        self.self_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=head_size, name="self_attention")
        self.cross_attention = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=head_size, name="cross_attention")
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
# Visible check: shapes, the cross-attention scores, the future and padding.
decoder_layer = DecoderLayer(d_model=6, num_heads=2, dff=24)
demo_rng = np.random.default_rng(2)
x = demo_rng.normal(size=(2, 4, 6)).astype("float32")
context = demo_rng.normal(size=(2, 5, 6)).astype("float32")
source_real = np.array([[True, True, True, False, False], [True, True, True, True, True]])
output = checks.check_shape(decoder_layer(x, context, context_padding_mask=source_real),
                            (2, 4, 6), "DecoderLayer(d_model=6, num_heads=2, dff=24): x (2, 4, 6), "
                                       "context (2, 5, 6)",
                            hint="queries come from x, keys and values from context.")
scores = checks.check_shape(decoder_layer.last_attention_scores, (2, 2, 4, 5),
                            "last_attention_scores (B, num_heads, T, S)",
                            hint="cross_attention(..., return_attention_scores=True) returns "
                                 "(output, scores); keep the scores.")
checks.check_close(scores[0, :, :, 3:], np.zeros((2, 4, 2)),
                   "cross-attention gives the padded source tokens weight 0",
                   hint="attention_mask=combine_masks(key_mask=context_padding_mask), BY KEYWORD.")
checks.check_close(scores.sum(axis=-1), np.ones((2, 2, 4)), "cross-attention rows sum to 1")
checks.check_true(all(isinstance(getattr(decoder_layer, n, None), keras.layers.MultiHeadAttention)
                      for n in ("self_attention", "cross_attention"))
                  and all(getattr(getattr(decoder_layer, n, None), "epsilon", None) == 1e-6
                          for n in ("norm1", "norm2", "norm3")),
                  "self_attention, cross_attention (MultiHeadAttention), norm1..3 (epsilon 1e-6)",
                  "a sublayer is missing or of another kind")
future = x.copy()
future[:, 2:] = 7.0  # new target tokens at positions 2 and 3
moved = checks.to_numpy(decoder_layer(future, context, context_padding_mask=source_real))
checks.check_close(moved[:, :2], output[:, :2],
                   "DecoderLayer: changing future tokens changes no earlier output",
                   hint="self-attention needs the look-ahead mask (causal_mask).")
padded = context.copy()
padded[0, 3:] = -9.0  # new vectors at the padded source positions
output = checks.check_close(decoder_layer(x, padded, context_padding_mask=source_real), output,
                            "DecoderLayer: changing padded source tokens changes nothing")

# %% nbgrader="tests" grade_id="test_DecoderLayer" points=4
# Hidden tests of `DecoderLayer` run when your notebook is graded.
### BEGIN HIDDEN TESTS
def _hidden_test_DecoderLayer():
    import numpy as np
    from autograder.testing import (rng, assert_close, assert_shape, assert_finite,
                                    assert_true)
    from autograder.references import lab4 as reference

    # Invalid arguments: a ValueError at once.
    for arguments in [dict(d_model=8, num_heads=3, dff=16), dict(d_model=8, num_heads=0, dff=16),
                      dict(d_model=8, num_heads=2, dff=16, dropout_rate=-0.1)]:
        text = ", ".join(f"{k}={v}" for k, v in arguments.items())
        name, _ = reference.raised(lambda: DecoderLayer(**arguments))
        assert_true(name == "ValueError",
                    f"DecoderLayer({text}) should raise a ValueError at once; it "
                    f"{'raised ' + name if name else 'did not raise'}.")

    r = rng("DecoderLayer")
    close = dict(rtol=1e-4, atol=1e-5)
    for d_model, num_heads, dff, batch, length, source_length in [(8, 2, 16, 2, 4, 6),
                                                                  (12, 3, 20, 3, 5, 7)]:
        what = f"DecoderLayer(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        layer = DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=0.5)
        expected_attributes = dict(d_model=d_model, num_heads=num_heads, dff=dff,
                                   dropout_rate=0.5)
        for (name, value), stored in zip(expected_attributes.items(),
                                         reference.sublayers(layer, expected_attributes)):
            assert_true(stored == value, f"{what}.{name} is {stored!r}, expected {value!r}.")
        x = r.normal(size=(batch, length, d_model)).astype("float32")
        context = r.normal(size=(batch, source_length, d_model)).astype("float32")
        on_x = f"{what} on x {x.shape}, context {context.shape}"
        name, message = reference.raised(lambda: layer(x, context, training=False))
        if name is not None and name != "NotImplementedError":
            raise AssertionError(f"{on_x}: {message}" + reference.explain(
                message, f"(Here T = {length} target tokens and S = {source_length} source "
                         "tokens: the cross-attention's queries come from x, its keys and "
                         "values from context, and the output has the shape of x.)"))
        assert_shape(reference.to_numpy(layer(x, context, training=False)), x.shape, on_x)
        scores_shape = (batch, num_heads, length, source_length)
        scores = reference.to_numpy(layer.last_attention_scores)
        if scores.shape == (batch, num_heads, source_length, length):
            raise AssertionError(f"{on_x}: last_attention_scores has shape {scores.shape}, "
                                 f"expected {scores_shape}: the cross-attention queries seem "
                                 "to come from the encoder; queries come from the decoder "
                                 "(x), keys and values from context.")
        assert_shape(scores, scores_shape, f"{on_x}: last_attention_scores")

        # Sublayers.
        attentions, norms = ("self_attention", "cross_attention"), ("norm1", "norm2", "norm3")
        found = dict(zip(attentions + norms, reference.sublayers(layer, attentions + norms)))
        for name in attentions:
            assert_true(reference.is_keras_layer(found[name], "MultiHeadAttention"),
                        f"{what}: `{name}` should be a keras.layers.MultiHeadAttention.")
        for name in norms:
            assert_true(reference.is_keras_layer(found[name], "LayerNormalization"),
                        f"{what}: `{name}` should be a keras.layers.LayerNormalization.")
        values = reference.calls(layer, [(f"{name}.get_config", ()) for name in attentions]
                                 + [(f"{name}.epsilon", None) for name in norms])
        for name, config in zip(attentions, values):
            assert_true((config.get("num_heads"), config.get("key_dim")) ==
                        (num_heads, d_model // num_heads),
                        f"{what}: {name} has num_heads={config.get('num_heads')}, "
                        f"key_dim={config.get('key_dim')}; expected num_heads={num_heads}, "
                        f"key_dim={d_model // num_heads}.")
        for name, epsilon in zip(norms, values[len(attentions):]):
            assert_true(abs(epsilon - 1e-6) < 1e-12, f"{what}: {name}.epsilon should be 1e-6.")

        weights = reference.randomize_weights(layer, reference.DECODER_WEIGHTS, r)

        # The future: changing target tokens after position t leaves outputs <= t
        # (for every t at once: the changed copies of x stacked along the batch).
        output = reference.to_numpy(layer(x, context, training=False))
        futures = np.repeat(x[None], length - 1, axis=0)  # (T - 1, B, T, d_model)
        for t in range(length - 1):
            futures[t, :, t + 1:] = 3 * r.normal(size=futures[t, :, t + 1:].shape)
        moved = reference.to_numpy(layer(
            futures.reshape(-1, length, d_model),
            np.tile(context, (length - 1, 1, 1)), training=False))
        assert_shape(moved, ((length - 1) * batch, length, d_model),
                     f"{what} on a batch of {(length - 1) * batch}")
        moved = moved.reshape(length - 1, batch, length, d_model)
        for t in range(length - 1):
            assert_true(np.allclose(moved[t, :, :t + 1], output[:, :t + 1], **close),
                        f"{on_x}: changing the target tokens after position {t} changed "
                        f"the outputs at positions 0..{t}; the self-attention must be "
                        "causal (a query sees keys j <= i only).")

        # Values without padding: output and cross-attention scores.
        expected, expected_scores = reference.decoder_layer(x, context, weights)
        if not np.allclose(output, expected, **close):
            pre_norm, _ = reference.decoder_layer(x, context, weights, pre_norm=True)
            assert_true(not np.allclose(output, pre_norm, **close),
                        f"{on_x}: the layer normalises before each sublayer (pre-norm); "
                        "this lab follows the paper: x = norm(x + sublayer(x)).")
        assert_close(output, expected,
                     f"{on_x}, no padding, training=False (post-norm: norm1(x + causal "
                     "self-attention), norm2(x + cross-attention to context), "
                     "norm3(x + ffn))")
        assert_close(reference.to_numpy(layer(x, context)), expected,
                     f"{on_x}, training left out (inference)")
        assert_close(reference.to_numpy(layer.last_attention_scores), expected_scores,
                     f"{on_x}: last_attention_scores")

        # Padding of the source (right) and of the target (left and right).
        source_real = np.ones((batch, source_length), dtype=bool)
        source_real[0, -3:] = False
        source_real[1, 1] = False
        target_real = np.ones((batch, length), dtype=bool)
        target_real[0, :2] = False  # left padding: only the x_padding_mask hides it
        target_real[1, -1:] = False
        masks = dict(x_padding_mask=target_real, context_padding_mask=source_real)
        output = reference.to_numpy(layer(x, context, training=False, **masks))
        scores = reference.to_numpy(layer.last_attention_scores)
        assert_shape(output, x.shape, f"{on_x} with padding masks")
        assert_shape(scores, scores_shape, f"{on_x} with padding masks: last_attention_scores")

        moved_context = context.copy()
        moved_context[~source_real] = 5 * r.normal(size=moved_context[~source_real].shape)
        moved = reference.to_numpy(layer(x, moved_context, training=False, **masks))
        assert_true(np.allclose(moved[target_real], output[target_real], **close),
                    f"{on_x}: changing the encoder output at padded source positions changed "
                    "the decoder's outputs; cross-attention must hide them "
                    "(attention_mask=..., passed BY KEYWORD: the fourth positional argument "
                    "of MultiHeadAttention is query_mask).")
        moved_x = x.copy()
        moved_x[~target_real] = 5 * r.normal(size=moved_x[~target_real].shape)
        moved = reference.to_numpy(layer(moved_x, context, training=False, **masks))
        assert_true(np.allclose(moved[target_real], output[target_real], **close),
                    f"{on_x}: changing padded target tokens (x_padding_mask False, here at "
                    "the start of a sentence) changed the outputs at real positions; the "
                    "self-attention must hide padded target keys too.")

        expected, expected_scores = reference.decoder_layer(x, context, weights, **masks)
        assert_finite(scores, f"{on_x}: last_attention_scores")
        real_scores = np.moveaxis(scores, 1, 2)[target_real]  # (real targets, heads, S)
        hidden = np.broadcast_to(~source_real[:, None, :],
                                 (batch, length, source_length))[target_real]  # (real, S)
        hidden = np.broadcast_to(hidden[:, None, :], real_scores.shape)
        assert_true(np.all(np.abs(real_scores[hidden]) <= 1e-7),
                    f"{on_x}: the cross-attention gives weight to padded source tokens.")
        assert_true(np.allclose(real_scores.sum(axis=-1), 1.0, atol=1e-4),
                    f"{on_x}: the cross-attention weights of a query do not sum to 1.")
        assert_close(output[target_real], expected[target_real],
                     f"{on_x} with padding masks, at the real target positions")
        assert_close(real_scores, np.moveaxis(expected_scores, 1, 2)[target_real],
                     f"{on_x} with padding masks: last_attention_scores at real targets")

        again = reference.to_numpy(layer(x, context, training=False, **masks))
        assert_true(np.array_equal(again, output),
                    f"{on_x}: two calls with training=False gave different outputs.")
        trained = reference.to_numpy(layer(x, context, training=True, **masks))
        assert_true(not np.allclose(trained, output, **close),
                    f"{on_x}: training=True with dropout_rate=0.5 gave the inference output; "
                    "dropout must act while training.")

        # Dropout after each attention sublayer: with the other sublayers silenced
        # (all-zero weights give an output of exactly 0), training must still change
        # the output.
        for kept, silenced in [("self_attention", ("cross_attention", "ffn.dense2")),
                               ("cross_attention", ("self_attention", "ffn.dense2"))]:
            reference.set_weights(layer, {path: [np.zeros_like(w) for w in weights[path]]
                                          for path in silenced})
            quiet = reference.to_numpy(layer(x, context, training=False))
            trained = reference.to_numpy(layer(x, context, training=True))
            assert_true(not np.allclose(trained, quiet, **close),
                        f"{on_x}: with only {kept} left (the other sublayers giving 0), "
                        "training=True (dropout_rate=0.5) gave the inference output; the "
                        f"output of {kept} needs dropout too: x = norm(x + dropout(...)).")
            reference.set_weights(layer, {path: weights[path] for path in silenced})

    # Config round trip.
    config = layer.get_config()
    assert_true(isinstance(config, dict), f"{what}: get_config() did not return a dict.")
    for name, value in [("d_model", d_model), ("num_heads", num_heads), ("dff", dff),
                        ("dropout_rate", 0.5)]:
        assert_true(config.get(name) == value,
                    f"{what}: get_config()[{name!r}] is {config.get(name)!r}, expected {value!r}.")
    clone = DecoderLayer.from_config(config)
    assert_shape(reference.to_numpy(clone(x, context, training=False)), x.shape,
                 "DecoderLayer.from_config(layer.get_config()) on x, context")


_hidden_test_DecoderLayer()
del _hidden_test_DecoderLayer
### END HIDDEN TESTS

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
