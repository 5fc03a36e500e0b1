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
# # Lab 3 — Positional embeddings
#
# Self-attention compares every token with every other token, but nothing in it
# says which token comes first: shuffle a sentence and the outputs shuffle the
# same way. The Transformer fixes this by adding a vector that depends on the
# position to each token's embedding. In this lab you build:
#
# 1. `positional_encoding`: the paper's fixed sinusoidal table;
# 2. `PositionalEmbedding`: a Keras layer, token embedding times
#    $\sqrt{d_{model}}$ plus that table, with a padding mask;
# 3. `LearnedPositionalEmbedding`: the other option, one learned vector per
#    position.
#
# Along the way you see that attention without positions is blind to word order,
# reproduce the lecture's table for $d_{model} = 6$ and embed the lecture's
# toy question "how are you".
#
# **Time:** about 60 minutes.
#
# **How to work.** Run the cells from top to bottom. Replace each
# `raise NotImplementedError()` with your code, then run the check cell below it.
# A check prints `✓` when it passes. Hidden tests on other inputs grade your
# notebook, so a passing check is necessary, not sufficient. Read-only cells
# (setup, checks, demos) are locked.

# %% nbgrader="locked" grade_id="colab_setup"
# Colab only: installs this lab's helpers (pinned). Does nothing anywhere else.
import importlib.util, subprocess, sys
if "google.colab" in sys.modules and importlib.util.find_spec("labkit") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{LABKIT_REQUIREMENT}}"], check=True)

# %% nbgrader="locked" grade_id="setup"
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quieter TensorFlow start-up

import numpy as np
import labkit

labkit.start_keras()  # Keras, without TensorFlow's start-up notices
import keras
from keras import ops
import matplotlib.pyplot as plt

from labkit import checks, plots
from labkit.validation import validate_layer_arguments

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% [markdown]
# ## 1. Self-attention does not see word order
#
# Self-attention builds each output as a weighted sum over all tokens, with
# weights that depend only on the token vectors themselves. Permute the input
# tokens and every score, weight and output is permuted the same way: the layer
# is **permutation equivariant**,
#
# $$\operatorname{SelfAttention}(P X) = P\, \operatorname{SelfAttention}(X)$$
#
# for any permutation matrix $P$. So "dog bites man" and "man bites dog" give
# the same three output vectors, only listed in another order. The cell below
# checks it on a `keras.layers.MultiHeadAttention` with random weights.

# %% nbgrader="locked" grade_id="demo_permutation" grading="skip"
demo_rng = np.random.default_rng(0)
tokens = ["I", "like", "this", "NLP", "class", "a", "lot"]
embeddings = demo_rng.normal(size=(1, len(tokens), 8)).astype("float32")  # (B, T, d_model)
attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, seed=0)

permutation = demo_rng.permutation(len(tokens))  # a shuffled word order
shuffled_tokens = [tokens[i] for i in permutation]
output, scores = attention(embeddings, embeddings, return_attention_scores=True)
shuffled_output, shuffled_scores = attention(embeddings[:, permutation],
                                             embeddings[:, permutation],
                                             return_attention_scores=True)
output, shuffled_output = checks.to_numpy(output), checks.to_numpy(shuffled_output)

print("shuffled sentence:", " ".join(shuffled_tokens))
print("largest |output(shuffled) - shuffled(output)|:",
      np.abs(shuffled_output - output[:, permutation]).max())  # float32 rounding only

figure, axes = plt.subplots(1, 2, figsize=(11, 4.5))
plots.heatmap(checks.to_numpy(scores)[0, 0], tokens, tokens, "head 1, original order",
              ax=axes[0], annotate=False)
plots.heatmap(checks.to_numpy(shuffled_scores)[0, 0], shuffled_tokens, shuffled_tokens,
              "head 1, shuffled tokens", ax=axes[1], annotate=False)
plt.tight_layout()
plt.show()

# %% [markdown]
# The two heat maps hold the same numbers: each cell follows its pair of words
# wherever the shuffle puts them. The fix is to make each input vector depend on
# its position as well as on its token: add a **positional vector** $PE(pos)$ to
# the embedding of the token at position $pos$.

# %% [markdown]
# ## 2. The sinusoidal table
#
# The paper uses a fixed table with one row per position and one column per
# dimension. Columns come in pairs $(2i, 2i+1)$ that share a frequency: a sine in
# the even column, a cosine in the odd one,
#
# $$PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d}}\right), \qquad
#   PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d}}\right).$$
#
# The exponent is $2i/d$, where $2i$ is the index of the pair's **even** column, so
# both columns of a pair use the same angle. Write
# `positional_encoding(length, depth)`, returning an array `(length, depth)`.
# NumPy is fine here (compute in float64, cast at the end).
#
# **What is graded** (3 points), each part on its own:
#
# - *the values* (2 points): the table above for even depths, from one row to
#   2048 rows, called with positional or keyword arguments;
# - *an odd depth* (0.5 points): `positional_encoding(10, 7)` works and its
#   last column is a sine without its cosine (column 6 is $2i$ with $i = 3$); a
#   formula that is wrong for even depths too loses the values' points, not these;
# - *the dtype* (0.5 points): the array is **float32**, whatever you computed in
#   (`.astype(np.float32)`, or `ops.cast(..., "float32")` for a tensor).

# %% nbgrader="solution" grade_id="positional_encoding"
def positional_encoding(length, depth):
    """The sinusoidal positional table of Vaswani et al. (2017).

    Args:
        length: number of positions (rows), 0 .. length - 1.
        depth: number of dimensions (columns); may be odd: the last column is
            then a sine without its cosine.

    Returns:
        A float32 array `(length, depth)`: column 2i holds
        sin(pos / 10000^(2i / depth)), column 2i + 1 the cosine of the same angle.
    """
    ### BEGIN SOLUTION
    positions = np.arange(length, dtype=np.float64)[:, np.newaxis]  # (length, 1)
    pair_starts = np.arange(0, depth, 2, dtype=np.float64)  # 2i: (ceil(depth / 2),)
    angles = positions / np.power(10000.0, pair_starts / depth)  # (length, ceil(depth / 2))
    table = np.zeros((length, depth), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)  # even columns
    table[:, 1::2] = np.cos(angles[:, : depth // 2])  # odd columns (one fewer if depth is odd)
    return table.astype(np.float32)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_positional_encoding"
# Visible check: the lecture's table for d_model = 6 and positions 0, 1, 2
# (shown there rounded to two decimals), here to six decimals; then the dtype
# and an odd depth.
def lecture_table_hint(table):
    """A hint that fits what positional_encoding(3, 6) got wrong."""
    try:
        first_row = np.round(np.asarray(checks.to_numpy(table), dtype=float)[0], 2).tolist()
    except Exception:  # noqa: BLE001 - the check below reports the shape or type
        return "return an array of shape (length, depth)."
    if first_row == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]:
        return "sine and cosine are swapped: the sine goes in the even column 2i."
    if first_row == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]:
        return ("this is the [sin | cos] layout; interleave the columns: sine in column "
                "2i, cosine in column 2i + 1.")
    if first_row[:2] == [0.84, 0.54]:
        return "the positions start at 0: row 0 is sin(0) = 0 and cos(0) = 1."
    return ("row 1, columns 0 and 1 are sin(1) and cos(1); columns 2 and 3 share the "
            "angle 1 / 10000^(2/6) = 0.0464: the exponent is 2i / depth for both "
            "columns of a pair.")


lecture_table = positional_encoding(3, 6)
checks.check_close(lecture_table,
                   [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                    [0.841471, 0.540302, 0.046399, 0.998923, 0.002154, 0.999998],
                    [0.909297, -0.416147, 0.092699, 0.995694, 0.004309, 0.999991]],
                   "positional_encoding(3, 6) (the lecture's table)", atol=2e-6,
                   hint=lecture_table_hint(lecture_table))
try:
    keyword_table, keyword_error = positional_encoding(length=3, depth=6), None
except TypeError as error:
    keyword_table, keyword_error = None, error
checks.check_true(keyword_error is None, "positional_encoding(length=3, depth=6) (by keyword)",
                  f"it raised TypeError: {keyword_error}",
                  hint="keep the parameter names length and depth: the tests call "
                       "positional_encoding(length=..., depth=...) too.")
checks.check_true(checks.to_numpy(lecture_table).dtype == np.float32,
                  "positional_encoding returns float32",
                  f"the dtype is {checks.to_numpy(lecture_table).dtype}",
                  hint="end with .astype(np.float32) (or ops.cast(..., 'float32')).")
try:
    odd_table, odd_error = positional_encoding(2, 5), None
except Exception as error:  # noqa: BLE001 - reported below with a hint
    odd_table, odd_error = None, error
checks.check_true(odd_error is None, "positional_encoding(2, 5) runs (odd depth)",
                  f"it raised {type(odd_error).__name__}: {odd_error}",
                  hint="with depth 5 there are 3 sine columns (0, 2, 4) and 2 cosine "
                       "columns (1, 3): fill the odd columns with the first depth // 2 "
                       "angles only.")
odd_table = checks.check_close(odd_table,
                               [[0.0, 1.0, 0.0, 1.0, 0.0],
                                [0.841471, 0.540302, 0.025116, 0.999685, 0.000631]],
                               "positional_encoding(2, 5) (odd depth: the last column is "
                               "a sine)", atol=2e-6,
                               hint="with depth 5 the angles use the exponents 0, 0, 2/5, "
                                    "2/5, 4/5; the table has 5 columns, the last one a sine.")

# %% nbgrader="tests" grade_id="test_positional_encoding"

# %% nbgrader="tests" grade_id="test_positional_encoding__odd_depth"

# %% nbgrader="tests" grade_id="test_positional_encoding__dtype"

# %% [markdown]
# Each column is a wave over the positions: the first pair turns once every
# $2\pi \approx 6.3$ positions, the last pairs barely move over thousands. Read a
# row as the position written in many "clock hands" of different speeds. The left
# plot shows the table for 50 positions and $d = 64$; the right one the dot
# product $PE(p) \cdot PE(q)$ between every pair of positions: it is largest on
# the diagonal and falls off as $|p - q|$ grows, so nearby positions have
# similar vectors. It depends only on $p - q$ (a sum of $\cos(\omega (p - q))$
# terms), which is why the stripes run parallel to the diagonal.

# %% nbgrader="locked" grade_id="demo_positional_encoding" grading="skip"
table = checks.to_numpy(positional_encoding(50, 64))  # (positions, depth)
similarity = table @ table.T  # (positions, positions)

figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
plots.heatmap(table, title="PE: 50 positions, depth 64", ax=left, annotate=False,
              vmin=-1.0, vmax=1.0, cmap="RdBu")
left.set(xlabel="dimension (column)", ylabel="position")
left.set_xticks(range(0, 64, 8))
left.set_yticks(range(0, 50, 5))
plots.heatmap(similarity, title="PE(p) . PE(q)", ax=right, annotate=False,
              vmin=float(similarity.min()), cmap="viridis")
right.set(xlabel="position q", ylabel="position p")
right.set_xticks(range(0, 50, 5))
right.set_yticks(range(0, 50, 5))
plt.tight_layout()
plt.show()
print("PE(20) . PE(q) for q = 18 .. 22:", similarity[20, 18:23].round(1),
      " and for q = 45:", similarity[20, 45].round(1))

# %% [markdown]
# **Another layout, the same information.** The TensorFlow tutorial on
# Transformers computes the same $d/2$ angles but writes the table as
# $[\sin \mid \cos]$: all the sines in the first half of the columns, then all the
# cosines. Its column $j$ is our column $2j$ and its column $d/2 + j$ is our
# column $2j + 1$, so the two tables differ by a fixed permutation of the columns.
# That permutation changes nothing a model can use: dot products between
# positions (the right plot above) are the same, and the layers that read the
# vectors are learned, so the first projection simply learns its rows in the
# other order. What matters is to use one layout consistently, in training and
# at inference. The cell below checks both claims.

# %% nbgrader="locked" grade_id="demo_layouts" grading="skip"
interleaved = checks.to_numpy(positional_encoding(50, 64))
concatenated = np.concatenate([interleaved[:, 0::2], interleaved[:, 1::2]], axis=-1)
columns = np.concatenate([np.arange(0, 64, 2), np.arange(1, 64, 2)])  # the permutation
print("[sin | cos] is a column permutation:", np.array_equal(concatenated, interleaved[:, columns]))
print("same dot products between positions:",
      np.allclose(concatenated @ concatenated.T, interleaved @ interleaved.T, atol=1e-4))

# %% [markdown]
# ## 3. A layer: token embedding plus positions
#
# The Transformer's input layer looks each token id up in a learned table
# (`keras.layers.Embedding`), multiplies the vectors by $\sqrt{d_{model}}$ (section
# 3.4 of the paper: it keeps the token part from being drowned by the positional
# part, whose entries are of size 1) and adds the first $T$ rows of the
# sinusoidal table:
#
# $$x_{pos} = \sqrt{d_{model}}\; E[\text{token}_{pos}] + PE(pos).$$
#
# Write `PositionalEmbedding(vocab_size, d_model, max_length=2048,
# mask_zero=True)`:
#
# - `__init__`: store each argument under its own name (`self.vocab_size`,
#   `self.d_model`, `self.max_length`, `self.mask_zero`); create the sublayer
#   `self.token_embedding` (an `Embedding` of `vocab_size` rows of size
#   `d_model`); compute the table with your `positional_encoding(max_length,
#   d_model)` once and keep it as a constant tensor (`ops.convert_to_tensor`).
#   It is **not** a weight: the layer's only weight is the token table.
# - `build`: build `token_embedding`, so the weights exist after `build`.
# - `call`: token vectors times $\sqrt{d_{model}}$, plus the first $T$ rows of the
#   table, where `T = ops.shape(token_ids)[1]`.
# - `compute_mask`: `token_ids != 0` when `mask_zero` (id 0 is padding), else
#   `None`. Keras hands this mask to the layers that follow.
# - `get_config`: add the four arguments to the base config.
#
# **What is graded** (4 points), each part on its own:
#
# - *values and weights* (2.5 points): for the grader's token tables (set with
#   `layer.token_embedding.set_weights` after a first call of the layer), the
#   output is $\sqrt{d_{model}}$ times the token vectors plus rows $0 .. T-1$ of
#   the sinusoidal table, for every sentence of the batch. `token_embedding` is a
#   `keras.layers.Embedding`. The layer's only weight is the trainable token
#   table `(vocab_size, d_model)`: the sinusoidal table is neither a trainable
#   nor a non-trainable weight. (These tests lend your layer a correct
#   `positional_encoding`, so a mistake in yours costs points in section 2 only.)
# - *the weights made in `build`* (0.5 points): the layer has no weight before
#   `build`, and the token table exists right after `build((None, T))`, before
#   any call.
# - *the mask* (0.5 points): with `mask_zero=True`, `compute_mask(token_ids)` is
#   the **boolean** tensor `token_ids != 0` (not cast to numbers), `True` for
#   every real token and `False` for every id 0, wherever it is in the sentence
#   (padding may come first); with `mask_zero=False` it is `None`.
# - *the config* (0.5 points): the layer keeps each constructor argument as an
#   attribute of the same name, and `get_config()` returns all four under their
#   own names (added to the base config), so that
#   `PositionalEmbedding.from_config(layer.get_config())` rebuilds the same layer.
#
# The arguments are checked for you (`validate_layer_arguments`, from `labkit`:
# a size that is not a positive integer is a `ValueError` at once), and
# `compute_output_shape` is given (it tells Keras the output shape without running
# `call`). Use `keras.ops` only, so the layer runs on TensorFlow, JAX and PyTorch.

# %% nbgrader="solution" grade_id="PositionalEmbedding"
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model), plus the sinusoidal table.

    The input layer of the Transformer's encoder and decoder: each token id
    becomes a learned vector, multiplied by sqrt(d_model), to which the fixed
    sinusoidal vector of its position is added. The sinusoidal table is a
    constant, not a weight (neither trainable nor non-trainable): the layer's
    only weight is the trainable token table `(vocab_size, d_model)` of the
    sublayer `token_embedding`, created in `build`. Id 0 is padding: with
    `mask_zero=True`, `compute_mask` returns the boolean mask `token_ids != 0`
    (wherever the zeros are), which Keras passes on to the layers that follow;
    with `mask_zero=False` it returns None. Each constructor argument is kept
    as an attribute of the same name, and `get_config()` returns all four, so
    that `from_config(get_config())` rebuilds the layer.

    Args:
        vocab_size: number of token ids; ids are 0 .. vocab_size - 1.
        d_model: size of each output vector.
        max_length: number of positions the sinusoidal table covers.
        mask_zero: whether id 0 is padding, masked in `compute_mask`.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        token_ids: integer tensor `(B, T)` with T <= max_length.

    Returns:
        A float tensor `(B, T, d_model)`.

    Example:

    >>> layer = PositionalEmbedding(vocab_size=11, d_model=6)
    >>> tuple(layer(np.array([[5, 8, 9]])).shape)
    (1, 3, 6)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", sections 3.4 and 3.5.
    """

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        ### BEGIN SOLUTION
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model,
                                                      name="token_embedding")
        # A constant, not a weight: (max_length, d_model).
        self.positional_table = ops.convert_to_tensor(
            positional_encoding(max_length, d_model), dtype="float32")
        ### END SOLUTION

    def build(self, input_shape):
        ### BEGIN SOLUTION
        self.token_embedding.build(input_shape)
        ### END SOLUTION

    def call(self, token_ids):
        ### BEGIN SOLUTION
        length = ops.shape(token_ids)[1]
        token_vectors = self.token_embedding(token_ids)  # (B, T, d_model)
        token_vectors = token_vectors * ops.cast(math.sqrt(self.d_model), token_vectors.dtype)
        # Rows 0 .. T-1, also when T is only known at run time: (T, d_model).
        positions = ops.take(self.positional_table, ops.arange(length), axis=0)
        positions = ops.cast(positions, token_vectors.dtype)
        return token_vectors + positions  # (B, T, d_model), broadcast over B
        ### END SOLUTION

    def compute_output_shape(self, input_shape):
        # Provided: (B, T) -> (B, T, d_model), so that Keras need not trace `call`
        # to learn the output shape (in a model built on keras.Input).
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        ### BEGIN SOLUTION
        if not self.mask_zero:
            return None
        return ops.not_equal(token_ids, 0)  # (B, T), True for real tokens
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"vocab_size": self.vocab_size, "d_model": self.d_model,
                       "max_length": self.max_length, "mask_zero": self.mask_zero})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_PositionalEmbedding"
# Visible check: the lecture's sizes (11 token ids, d_model = 6) and "how are you"
# ([5, 8, 9]) in a batch of two, padded at the end, then at the start. While it
# runs, your layer gets the lecture's table in place of your positional_encoding
# (yours is put back at the end), so a mistake there shows in section 2's check,
# not here.
LECTURE_ROWS = np.array([[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],  # positions 0..4, d_model = 6
                         [0.841471, 0.540302, 0.046399, 0.998923, 0.002154, 0.999998],
                         [0.909297, -0.416147, 0.092699, 0.995694, 0.004309, 0.999991],
                         [0.141120, -0.989992, 0.138798, 0.990321, 0.006463, 0.999979],
                         [-0.756802, -0.653644, 0.184599, 0.982814, 0.008618, 0.999963]],
                        dtype="float32")


def lecture_table(length, depth):
    """Stands in for positional_encoding in this check: the lecture's rows 0..4
    (depth 6), zeros below them (the check reads rows 0..4 only)."""
    table = np.zeros((length, depth), dtype="float32")
    rows, columns = min(length, 5), min(depth, 6)
    table[:rows, :columns] = LECTURE_ROWS[:rows, :columns]
    return table


def shapes(weights):
    return [tuple(w.shape) for w in weights]


your_positional_encoding, positional_encoding = positional_encoding, lecture_table
try:
    layer = PositionalEmbedding(vocab_size=11, d_model=6)
    checks.check_true(shapes(layer.weights) == [],
                      "PositionalEmbedding: no weight before build",
                      f"the weights have shapes {shapes(layer.weights)}",
                      hint="create token_embedding in __init__ but build it in build.")
    layer.build((None, 5))
    weights = shapes(layer.weights)
    checks.check_true(weights == [(11, 6)] and shapes(layer.trainable_weights) == [(11, 6)],
                      "PositionalEmbedding: after build, one trainable weight, the token "
                      "table (11, 6)",
                      f"the weights have shapes {weights}, the trainable ones "
                      f"{shapes(layer.trainable_weights)}",
                      hint="build token_embedding in build." if not weights else
                           "keep the sinusoidal table a constant tensor, not a weight "
                           "(trainable or not).")
    token_ids = np.array([[5, 8, 9, 0, 0], [0, 0, 5, 8, 9]])
    token_table = np.random.default_rng(3).normal(size=(11, 6)).astype("float32")

    # 1. A zero token table: the output is the table's rows 0..4, in each sentence.
    layer.token_embedding.set_weights([np.zeros((11, 6), dtype="float32")])
    positions = checks.check_shape(layer(token_ids), (2, 5, 6), "PositionalEmbedding output")
    if np.allclose(positions, 0.0, atol=1e-4):
        hint = "the positional table is not added to the token vectors."
    elif np.allclose(positions, np.sqrt(6) * LECTURE_ROWS, atol=1e-4):
        hint = "the table is multiplied by sqrt(d_model) too: scale the token vectors only."
    elif np.allclose(positions, lecture_table(11, 6)[token_ids], atol=1e-4):
        hint = "the table's rows are looked up with the token ids; take rows 0..T-1."
    else:
        hint = "add rows 0..T-1 of the table (one per position) to every sentence."
    checks.check_close(positions, np.broadcast_to(LECTURE_ROWS, (2, 5, 6)),
                       "PositionalEmbedding with a zero token table: the table's rows 0..4",
                       atol=2e-5, hint=hint)

    # 2. Token vectors: what the layer adds to the rows is sqrt(6) * the token vectors.
    layer.token_embedding.set_weights([token_table])
    token_part = checks.to_numpy(layer(token_ids)) - LECTURE_ROWS
    tokens = token_table[token_ids]  # (2, 5, 6)
    if np.allclose(token_part, tokens, atol=1e-4):
        hint = "the token vectors are not multiplied by sqrt(d_model) = 2.449."
    elif np.allclose(token_part, 6 * tokens, atol=1e-4):
        hint = "the token vectors are multiplied by d_model; use its square root."
    else:
        hint = "multiply the token vectors, token_embedding(token_ids), by sqrt(d_model)."
    checks.check_close(token_part, np.sqrt(6) * tokens,
                       "PositionalEmbedding: output - table rows = sqrt(6) * token vectors",
                       atol=2e-5, hint=hint)

    # 3. The mask.
    mask = layer.compute_mask(token_ids)
    checks.check_true(mask is not None, "PositionalEmbedding.compute_mask is not None",
                      "it returned None", hint="with mask_zero=True, return token_ids != 0.")
    checks.check_close(mask, [[True, True, True, False, False], [False, False, True, True, True]],
                       "PositionalEmbedding.compute_mask (id 0 is padding, wherever it is)",
                       hint="return ops.not_equal(token_ids, 0): True for real tokens.")
    checks.check_true(checks.to_numpy(mask).dtype == bool,
                      "PositionalEmbedding.compute_mask is boolean",
                      f"its dtype is {checks.to_numpy(mask).dtype}",
                      hint="Keras masks are boolean: return ops.not_equal(token_ids, 0) "
                           "without a cast.")
    checks.check_true(PositionalEmbedding(11, 6, mask_zero=False).compute_mask(token_ids) is None,
                      "compute_mask is None with mask_zero=False",
                      hint="return None when self.mask_zero is False.")

    # 4. Arguments and config.
    layer = PositionalEmbedding(vocab_size=13, d_model=6, max_length=40, mask_zero=False)
    arguments = {"vocab_size": 13, "d_model": 6, "max_length": 40, "mask_zero": False}
    stored = {key: getattr(layer, key, "(missing)") for key in arguments}
    checks.check_true(stored == arguments, "PositionalEmbedding stores its arguments",
                      f"the attributes are {stored}",
                      hint="keep each argument in an attribute of the same name (self.d_model, ...).")
    checks.check_config(PositionalEmbedding, layer, arguments,
                        hint="config.update({'vocab_size': self.vocab_size, ...}) for all four.")
finally:
    positional_encoding = your_positional_encoding

# %% nbgrader="tests" grade_id="test_PositionalEmbedding"

# %% nbgrader="tests" grade_id="test_PositionalEmbedding__weights"

# %% nbgrader="tests" grade_id="test_PositionalEmbedding__mask"

# %% nbgrader="tests" grade_id="test_PositionalEmbedding__config"

# %% [markdown]
# **The lecture's worked example.** The toy vocabulary is <SOS>=0, <EOS>=1,
# <PAD>=2, am=3, fine=4, how=5, i=6, about=7, are=8, you=9, yourself=10, so
# "how are you" is `[5, 8, 9]`. The lecture gives each of the three words a
# 6-dimensional embedding and adds the table you computed, without any scaling.
# The cell below redoes that addition (up to rounding in the second decimal), then
# runs your layer with the same three vectors in its token table: the layer
# multiplies them by $\sqrt{6} \approx 2.449$ before adding the table.
#
# One difference to keep in mind: our layers treat id **0** as padding, while
# this vocabulary uses 0 for <SOS> and 2 for <PAD>. With `mask_zero=True` the
# <SOS> token would be masked out, so with these layers renumber the vocabulary
# so that <PAD> is 0 (lab 5 does).

# %% nbgrader="locked" grade_id="demo_toy_vocabulary" grading="skip"
vocabulary = ["<SOS>", "<EOS>", "<PAD>", "am", "fine", "how", "i", "about", "are",
              "you", "yourself"]
how_are_you = np.array([[vocabulary.index(word) for word in ["how", "are", "you"]]])
print("how are you ->", how_are_you[0])  # [5 8 9]
lecture_embeddings = np.array([[-0.25, 0.86, -1.38, -0.87, -0.22, 1.72],   # how
                               [-0.91, -0.66, 2.22, 0.52, 0.35, -0.20],    # are
                               [-1.05, 1.28, 0.15, 0.23, 0.06, 0.43]])     # you
with_positions = lecture_embeddings + checks.to_numpy(positional_encoding(3, 6))
print("lecture: embedding + PE\n", with_positions.round(2))

toy_layer = PositionalEmbedding(vocab_size=len(vocabulary), d_model=6)
toy_layer.build((None, 3))
toy_table = np.zeros((len(vocabulary), 6), dtype="float32")
toy_table[how_are_you[0]] = lecture_embeddings
toy_layer.token_embedding.set_weights([toy_table])
print("PositionalEmbedding: sqrt(6) * embedding + PE\n",
      checks.to_numpy(toy_layer(how_are_you))[0].round(2))

# %% [markdown]
# **Positions break the symmetry.** Feed the attention layer of section 1 with
# the output of a `PositionalEmbedding` instead of bare token vectors: the same
# words in another order now get different vectors, so shuffling the sentence
# changes the outputs by much more than rounding.

# %% nbgrader="locked" grade_id="demo_order_matters" grading="skip"
sentence = np.array([[5, 8, 9]])  # how are you
reordered = sentence[:, [2, 0, 1]]  # you how are
embed = PositionalEmbedding(vocab_size=11, d_model=8)
attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, seed=0)
outputs = {}
for name, ids in [("how are you", sentence), ("you how are", reordered)]:
    vectors = embed(ids)
    outputs[name] = checks.to_numpy(attention(vectors, vectors))
difference = np.abs(outputs["you how are"][:, [1, 2, 0]] - outputs["how are you"]).max()
print("largest |output(shuffled) - shuffled(output)| with positions:", difference)

# %% [markdown]
# ## 4. Learned positional embeddings
#
# The other common choice (BERT, GPT-2) learns the positional vectors: a second
# `Embedding` whose row $pos$ is the vector of position $pos$,
#
# $$x_{pos} = E[\text{token}_{pos}] + P[pos],$$
#
# with no scaling here. It costs `max_length * d_model` parameters and knows
# nothing about positions it never saw in training; in particular it has no row
# for a position past `max_length`. Write
# `LearnedPositionalEmbedding(vocab_size, d_model, max_length, mask_zero=True)`
# with the sublayers `token_embedding` and `position_embedding` (`max_length`
# rows), both built in `build`. In `call`, look up the positions
# `0 .. T-1` (`ops.arange(T)`, not the token ids) and add them to the token
# vectors. When `T` is known (a Python `int`) and larger than `max_length`,
# raise a `ValueError` that says so: looking up a missing row is an error on
# some backends and silently wrong on others. `compute_mask` and `get_config`
# work as in `PositionalEmbedding`.
#
# **What is graded** (3.5 points), each part on its own:
#
# - *values and weights* (2.25 points): for the grader's tables (set with
#   `set_weights` on both sublayers after a first call of the layer), the output
#   is the token vectors plus rows $0 .. T-1$ of the position table, unscaled,
#   for every sentence of the batch and any `T` up to `max_length`. Both
#   sublayers are `keras.layers.Embedding`. The layer has exactly two weights,
#   both trainable: the token table `(vocab_size, d_model)` and the position
#   table `(max_length, d_model)`.
# - *the weights made in `build`* (0.25 points): the layer has no weight before
#   `build`, and both tables exist right after `build((None, T))`, before any
#   call.
# - *the length limit* (0.5 points): `T == max_length` works, and `T >
#   max_length` raises a `ValueError` (any message; say that the sequence is
#   longer than `max_length`), also on a layer that is already built: check the
#   length in `call`, not only in `build` (Keras calls `build` once).
# - *the mask* (0.25 points): as in `PositionalEmbedding`: the boolean
#   `token_ids != 0` wherever the zeros are with `mask_zero=True`, `None` with
#   `mask_zero=False`.
# - *the config* (0.25 points): as in `PositionalEmbedding`: each argument kept
#   as an attribute of the same name, and `get_config()` returns all four, so
#   that `LearnedPositionalEmbedding.from_config(layer.get_config())` rebuilds
#   the same layer.

# %% nbgrader="solution" grade_id="LearnedPositionalEmbedding"
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Token embedding plus a learned embedding of each position.

    Each token id and each position 0 .. max_length - 1 has its own learned
    vector; the output is their sum, without scaling (as in BERT and GPT-2).
    The layer has two weights, both trainable and created in `build`: the
    token table `(vocab_size, d_model)` of `token_embedding` and the position
    table `(max_length, d_model)` of `position_embedding`. A sequence longer
    than `max_length` has no position vector: `call` raises a ValueError when
    its length is known (also once the layer is built); `T == max_length`
    works. Id 0 is padding: with `mask_zero=True`, `compute_mask` returns the
    boolean mask `token_ids != 0`, and None with `mask_zero=False`. Each
    constructor argument is kept as an attribute of the same name, and
    `get_config()` returns all four, so that `from_config(get_config())`
    rebuilds the layer.

    Args:
        vocab_size: number of token ids; ids are 0 .. vocab_size - 1.
        d_model: size of each output vector.
        max_length: number of positions, the rows of the position table.
        mask_zero: whether id 0 is padding, masked in `compute_mask`.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        token_ids: integer tensor `(B, T)` with T <= max_length.

    Returns:
        A float tensor `(B, T, d_model)`.

    Example:

    >>> layer = LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=8)
    >>> tuple(layer(np.array([[5, 8, 9]])).shape)
    (1, 3, 6)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.5 (learned
        positional embeddings, table 3 row E).
    """

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        ### BEGIN SOLUTION
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model,
                                                      name="token_embedding")
        self.position_embedding = keras.layers.Embedding(max_length, d_model,
                                                         name="position_embedding")
        ### END SOLUTION

    def build(self, input_shape):
        ### BEGIN SOLUTION
        self.token_embedding.build(input_shape)
        self.position_embedding.build((input_shape[-1],))
        ### END SOLUTION

    def call(self, token_ids):
        ### BEGIN SOLUTION
        length = ops.shape(token_ids)[1]
        if isinstance(length, int) and length > self.max_length:
            raise ValueError(
                f"LearnedPositionalEmbedding received a sequence of length {length}, "
                f"longer than max_length={self.max_length}: there is no learned vector "
                f"for positions past {self.max_length - 1}. Pass shorter sequences or "
                f"build the layer with a larger max_length."
            )
        token_vectors = self.token_embedding(token_ids)  # (B, T, d_model)
        position_vectors = self.position_embedding(ops.arange(length))  # (T, d_model)
        return token_vectors + position_vectors  # (B, T, d_model), broadcast over B
        ### END SOLUTION

    def compute_output_shape(self, input_shape):
        # Provided: (B, T) -> (B, T, d_model), so that Keras need not trace `call`
        # to learn the output shape (in a model built on keras.Input).
        return (*input_shape, self.d_model)

    def compute_mask(self, token_ids, mask=None):
        ### BEGIN SOLUTION
        if self.mask_zero:
            return ops.not_equal(token_ids, 0)  # (B, T)
        return None
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update(vocab_size=self.vocab_size, d_model=self.d_model,
                      max_length=self.max_length, mask_zero=self.mask_zero)
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_LearnedPositionalEmbedding"
# Visible check: 11 token ids, d_model = 6, at most 10 positions; "how are you"
# ([5, 8, 9]) in a batch of two, padded at the end, then at the start.
def shapes(weights):
    return [tuple(w.shape) for w in weights]


layer = LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=10)
checks.check_true(shapes(layer.weights) == [],
                  "LearnedPositionalEmbedding: no weight before build",
                  f"the weights have shapes {shapes(layer.weights)}",
                  hint="create the two Embedding sublayers in __init__, build them in build.")
layer.build((None, 5))
trainable = sorted(shapes(layer.trainable_weights))
checks.check_true(trainable == [(10, 6), (11, 6)] and len(layer.weights) == 2,
                  "LearnedPositionalEmbedding: after build, two trainable tables, (11, 6) "
                  "and (10, 6)",
                  f"the trainable weights have shapes {trainable}, all weights "
                  f"{shapes(layer.weights)}",
                  hint="build token_embedding and position_embedding in build; the "
                       "position table has max_length rows.")
token_ids = np.array([[5, 8, 9, 0, 0], [0, 0, 5, 8, 9]])
token_table = np.random.default_rng(4).normal(size=(11, 6)).astype("float32")
position_table = np.random.default_rng(5).normal(size=(10, 6)).astype("float32")
layer.position_embedding.set_weights([position_table])

# 1. A zero token table: the output is rows 0..4 of the position table, in each sentence.
layer.token_embedding.set_weights([np.zeros((11, 6), dtype="float32")])
positions = checks.check_shape(layer(token_ids), (2, 5, 6), "LearnedPositionalEmbedding output")
if np.allclose(positions, 0.0, atol=1e-4):
    hint = "the position vectors are not added to the token vectors."
elif np.allclose(positions, position_table[token_ids], atol=1e-4):
    hint = "the position table is looked up with the token ids; look up ops.arange(T)."
else:
    hint = "look up the positions 0..T-1 (ops.arange(T)) in position_embedding."
checks.check_close(positions, np.broadcast_to(position_table[:5], (2, 5, 6)),
                   "LearnedPositionalEmbedding with a zero token table: position rows 0..4",
                   hint=hint)

# 2. Token vectors, added as they are.
layer.token_embedding.set_weights([token_table])
token_part = checks.to_numpy(layer(token_ids)) - position_table[:5]
tokens = token_table[token_ids]  # (2, 5, 6)
if np.allclose(token_part, np.sqrt(6) * tokens, atol=1e-4):
    hint = "the token vectors are multiplied by sqrt(d_model); this layer adds them unscaled."
else:
    hint = "add the token vectors, token_embedding(token_ids), as they are."
checks.check_close(token_part, tokens,
                   "LearnedPositionalEmbedding: output - position rows = token vectors",
                   hint=hint)

# 3. The length limit: T = max_length works, T = max_length + 1 is a ValueError.
try:
    full, raised = layer(np.ones((2, 10), dtype="int32")), None
except Exception as error:  # noqa: BLE001 - reported below with a hint
    full, raised = None, error
checks.check_true(raised is None, "LearnedPositionalEmbedding runs on T = max_length = 10",
                  f"it raised {type(raised).__name__}: {raised}",
                  hint="only T > max_length is too long: the position table has rows "
                       "0..max_length-1, one for each of max_length positions.")
checks.check_shape(full, (2, 10, 6), "LearnedPositionalEmbedding on T = max_length = 10")
try:
    layer(np.ones((1, 11), dtype="int32"))
    raised = None
except Exception as error:  # noqa: BLE001 - any exception is reported below
    raised = error
checks.check_true(isinstance(raised, ValueError),
                  "LearnedPositionalEmbedding (built) on T = 11 > max_length raises a ValueError",
                  f"it raised {type(raised).__name__}" if raised else "nothing was raised",
                  hint="in call (build runs only once), compare ops.shape(token_ids)[1] "
                       "with self.max_length when it is an int, and raise ValueError.")

# 4. The mask.
mask = layer.compute_mask(token_ids)
checks.check_true(mask is not None, "LearnedPositionalEmbedding.compute_mask is not None",
                  "it returned None", hint="with mask_zero=True, return token_ids != 0.")
checks.check_close(mask, [[True, True, True, False, False], [False, False, True, True, True]],
                   "LearnedPositionalEmbedding.compute_mask (id 0 is padding, wherever it is)",
                   hint="return ops.not_equal(token_ids, 0): True for real tokens.")
checks.check_true(checks.to_numpy(mask).dtype == bool,
                  "LearnedPositionalEmbedding.compute_mask is boolean",
                  f"its dtype is {checks.to_numpy(mask).dtype}",
                  hint="Keras masks are boolean: return ops.not_equal(token_ids, 0) without "
                       "a cast.")
checks.check_true(LearnedPositionalEmbedding(11, 6, 10, mask_zero=False).compute_mask(token_ids)
                  is None, "compute_mask is None with mask_zero=False",
                  hint="return None when self.mask_zero is False.")

# 5. Arguments and config.
layer = LearnedPositionalEmbedding(vocab_size=13, d_model=6, max_length=40, mask_zero=False)
arguments = {"vocab_size": 13, "d_model": 6, "max_length": 40, "mask_zero": False}
stored = {key: getattr(layer, key, "(missing)") for key in arguments}
checks.check_true(stored == arguments, "LearnedPositionalEmbedding stores its arguments",
                  f"the attributes are {stored}",
                  hint="keep each argument in an attribute of the same name (self.max_length, ...).")
checks.check_config(LearnedPositionalEmbedding, layer, arguments,
                    hint="config.update({'vocab_size': self.vocab_size, ...}) for all four.")

# %% nbgrader="tests" grade_id="test_LearnedPositionalEmbedding"

# %% nbgrader="tests" grade_id="test_LearnedPositionalEmbedding__weights"

# %% nbgrader="tests" grade_id="test_LearnedPositionalEmbedding__validation"

# %% nbgrader="tests" grade_id="test_LearnedPositionalEmbedding__mask"

# %% nbgrader="tests" grade_id="test_LearnedPositionalEmbedding__config"

# %% [markdown]
# The two layers side by side, for `vocab_size=11`, `d_model=6` and room for 64
# positions: the learned one pays for its positions with weights, and has none
# for position 64 and beyond; the sinusoidal table has no weights and extends to
# any length.

# %% nbgrader="locked" grade_id="demo_compare" grading="skip"
fixed = PositionalEmbedding(vocab_size=11, d_model=6, max_length=64)
learned = LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=64)
for name, embedding_layer in [("sinusoidal", fixed), ("learned", learned)]:
    embedding_layer.build((None, 64))
    parameters = sum(int(np.prod(w.shape)) for w in embedding_layer.trainable_weights)
    print(f"{name:>10}: {parameters} trainable parameters")
try:
    learned(np.ones((1, 65), dtype="int32"))
except ValueError:
    print("learned, 65 tokens: ValueError (no vector for position 64)")

# %% [markdown]
# ## Conclusion
#
# Self-attention treats a sentence as a set: permuting the tokens permutes the
# outputs. Adding a position-dependent vector to each token embedding gives the
# model the order back. You wrote the paper's sinusoidal table (sine and cosine
# pairs at geometrically spaced frequencies, no weights, any length, nearby
# positions alike), wrapped it with a token embedding scaled by $\sqrt{d_{model}}$
# and a padding mask in `PositionalEmbedding`, and built the learned alternative
# with its length limit. Lab 4 puts these inputs through masked attention:
# padding and look-ahead masks, and the encoder and decoder layers.
