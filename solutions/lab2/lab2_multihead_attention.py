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
# # Lab 2 — Self-attention and multi-head attention
#
# In lab 1 attention compared given queries with given keys. In a Transformer the
# queries, keys and values are *learned* projections of the same sequence
# (self-attention), computed several times side by side with different weights
# (heads). In this lab you take `keras.layers.MultiHeadAttention` apart and
# rebuild it from scratch with `keras.ops`:
#
# 1. `mha_weight_shapes`: the eight weights of the Keras layer, worked out by hand;
# 2. `SelfAttention`: one head, with learned query, key and value projections;
# 3. `split_heads` and `merge_heads`: the reshapes that turn one head into many;
# 4. `MultiHeadAttention`: the whole layer, with the same weights as Keras's, so
#    that Keras's layer and yours compute the same numbers.
#
# Along the way you answer the lecture's question (what changes when `key_dim`
# goes from 2 to 5?), look at what each head attends to, and see why
# `key_dim = d_model / num_heads` makes many heads cost about as much as one.
#
# **Time:** about 90 minutes.
#
# **How to work.** Run the cells from top to bottom. Replace each
# `raise NotImplementedError()` with your code, then run the check cell below it.
# A check prints `✓` when it passes. Hidden tests on other inputs grade your
# notebook, so a passing check is necessary, not sufficient. Read-only cells
# (setup, checks, demos) are locked. Write the layers with `keras.ops` (not
# `tf.*`), so that they run on every Keras backend.

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

from labkit import checks, plots, validation
from labkit.masking import large_negative

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% [markdown]
# ## 1. `keras.layers.MultiHeadAttention` from the outside
#
# The lecture's example: a sentence of 6 words, each word a vector of 16 numbers,
# goes through one head of attention with `key_dim=2`. `keras.Input` leaves the
# batch size open (`None`). Passing the sentence as both `query` and `value` makes
# it **self**-attention: every word attends to every word of the same sentence.

# %% nbgrader="locked" grade_id="demo_keras_one_head"
sentence = keras.Input(shape=(6, 16))  # (batch, 6 words, 16 numbers per word)
one_head = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2, name="one_head")
output, scores = one_head(sentence, sentence, return_attention_scores=True)
print("output:", output.shape, "  scores:", scores.shape)
for weight in one_head.weights:
    print(f"  {weight.path:<32} {weight.shape}")

# %% [markdown]
# The output has the shape of the query: one new 16-vector per word. The scores
# are `(batch, heads, 6, 6)`: for each head, one row of weights per query word
# over the 6 key words. A word on words: in lab 1, *scores* were the similarities
# before the softmax; Keras's `return_attention_scores` returns the attention
# *weights*, after the softmax (each row sums to 1). This lab follows Keras: the
# "scores" your layers return are weights. The eight weights come in pairs, a kernel and a bias:
#
# | weight | shape | what it does |
# | --- | --- | --- |
# | `query/kernel`, `query/bias` | `(16, 1, 2)`, `(1, 2)` | each 16-vector → 1 head × a query of 2 numbers |
# | `key/kernel`, `key/bias` | `(16, 1, 2)`, `(1, 2)` | each 16-vector → 1 head × a key of 2 numbers |
# | `value/kernel`, `value/bias` | `(16, 1, 2)`, `(1, 2)` | each 16-vector → 1 head × a value of 2 numbers |
# | `attention_output/kernel`, `.../bias` | `(1, 2, 16)`, `(16,)` | the heads' values → back to 16 numbers |
#
# A kernel of shape `(16, 1, 2)` is an ordinary Dense kernel `(16, 2)` with the
# heads written out as their own axis. With three heads, each projection makes
# three queries (keys, values) of 2 numbers per word:

# %% nbgrader="locked" grade_id="demo_keras_three_heads" grading="skip"
three_heads = keras.layers.MultiHeadAttention(num_heads=3, key_dim=2, name="three_heads")
output, scores = three_heads(sentence, sentence, return_attention_scores=True)
print("output:", output.shape, "  scores:", scores.shape)
for weight in three_heads.weights:
    print(f"  {weight.path:<34} {weight.shape}")

# %% [markdown]
# **Pass masks by keyword.** The Keras layer is called as
# `layer(query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
# attention_mask=None, return_attention_scores=False, training=None,
# use_causal_mask=False)`. The fourth positional argument is `query_mask`, not
# `attention_mask`. In every Keras the labs support (3.8 and later), the layer
# replaces `query_mask` with the query's own Keras mask (a NumPy array has none),
# so `layer(x, x, x, mask)` runs without a word of warning and ignores your mask;
# and `layer(x, x, x, None)` stops with a `TypeError` ("got multiple values for
# argument 'query_mask'") that does not say what went wrong. Always write
# `attention_mask=mask`, as every cell of this lab does:

# %% nbgrader="locked" grade_id="demo_mask_by_keyword" grading="skip"
words = np.random.default_rng(0).normal(size=(1, 4, 8)).astype("float32")
look_ahead = np.tril(np.ones((1, 4, 4), dtype=bool))  # True = may attend
layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
unmasked = checks.to_numpy(layer(words, words))
positional = checks.to_numpy(layer(words, words, words, look_ahead))  # the classic bug
by_keyword = checks.to_numpy(layer(words, words, attention_mask=look_ahead))
print("mask as 4th positional argument == no mask at all:", np.allclose(positional, unmasked))
print("mask by keyword changes the output:             ", not np.allclose(by_keyword, unmasked))
try:
    layer(words, words, words, None)  # None as 4th positional argument
except TypeError as error:
    print("None as 4th positional argument: TypeError:", error)
else:
    print("None as 4th positional argument: accepted by this Keras, and ignored")

# %% [markdown]
# ### Exercise 1: the weight shapes, by hand
#
# The lecture asks: *what if `key_dim` goes from 2 to 5?* Work it out from the
# table above before you run anything. Then write `mha_weight_shapes`, which
# returns the eight shapes (as tuples, in the order of `layer.weights`) of
# `keras.layers.MultiHeadAttention(num_heads, key_dim, value_dim)` built on
# queries, keys and values of size `d_model`. The value projection and the output
# kernel use `value_dim`, which is `key_dim` when it is `None`. Compute the shapes
# from the arguments; do not build a layer inside the function.

# %% nbgrader="solution" grade_id="mha_weight_shapes"
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """The weight shapes of `keras.layers.MultiHeadAttention`, in order.

    Args:
        d_model: the last dimension of the query, key and value inputs.
        num_heads: the number of heads.
        key_dim: the size of each head's queries and keys.
        value_dim: the size of each head's values; `key_dim` when None.

    Returns:
        A list of 8 tuples: query kernel, query bias, key kernel, key bias,
        value kernel, value bias, output kernel, output bias.
    """
    ### BEGIN SOLUTION
    if value_dim is None:
        value_dim = key_dim
    query_and_key = [(d_model, num_heads, key_dim), (num_heads, key_dim)]
    value = [(d_model, num_heads, value_dim), (num_heads, value_dim)]
    output_projection = [(num_heads, value_dim, d_model), (d_model,)]
    return query_and_key + query_and_key + value + output_projection
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_mha_weight_shapes"
# Visible check: the lecture's two layers, then key_dim=5 and a separate
# value_dim against layers that Keras builds.
def _shapes(result):
    if not (isinstance(result, (list, tuple)) and len(result) == 8):
        raise AssertionError(f"mha_weight_shapes returned {result!r}, expected a list of 8 "
                             "shape tuples.")
    return [tuple(int(n) for n in shape) for shape in result]


lecture_one_head = [(16, 1, 2), (1, 2), (16, 1, 2), (1, 2), (16, 1, 2), (1, 2), (1, 2, 16), (16,)]
checks.check_true(_shapes(mha_weight_shapes(16, 1, 2)) == lecture_one_head,
                  "mha_weight_shapes(16, 1, 2): the lecture's one head",
                  f"got {mha_weight_shapes(16, 1, 2)}")
checks.check_true(_shapes(mha_weight_shapes(16, 3, 2))[::2] == [(16, 3, 2)] * 3 + [(3, 2, 16)],
                  "mha_weight_shapes(16, 3, 2): the lecture's kernels with three heads",
                  f"got {mha_weight_shapes(16, 3, 2)}",
                  hint="the heads are the middle axis of the input kernels and the first "
                       "axis of the output kernel.")
for key_dim, value_dim in [(5, None), (5, 3)]:
    built = keras.layers.MultiHeadAttention(num_heads=3, key_dim=key_dim, value_dim=value_dim)
    built(sentence, sentence, return_attention_scores=True)
    expected = [tuple(weight.shape) for weight in built.weights]
    checks.check_true(_shapes(mha_weight_shapes(16, 3, key_dim, value_dim=value_dim)) == expected,
                      f"mha_weight_shapes(16, 3, {key_dim}, value_dim={value_dim}) matches Keras",
                      f"got {mha_weight_shapes(16, 3, key_dim, value_dim=value_dim)}, "
                      f"Keras builds {expected}",
                      hint="the value kernel and bias and the output kernel use value_dim; "
                           "value_dim=None means key_dim.")

# %% nbgrader="tests" grade_id="test_mha_weight_shapes"

# %% [markdown]
# The answer to the lecture's question, and what it costs: every kernel grows
# with `key_dim` (the value kernel too, since `value_dim` defaults to `key_dim`),
# while the output keeps the query's size, 16.

# %% nbgrader="locked" grade_id="demo_mha_weight_shapes" grading="skip"
for key_dim in (2, 5):
    shapes = mha_weight_shapes(16, 3, key_dim)
    print(f"key_dim={key_dim}: {shapes}")
    print(f"  {sum(math.prod(shape) for shape in shapes)} numbers to learn")

# %% [markdown]
# ## 2. One head: self-attention with learned projections
#
# Basic self-attention (lecture) has nothing to learn: a word's new vector is a
# softmax-weighted average of the word vectors themselves. A head adds three
# learned projections. For a sequence $X$ of shape `(T, d_model)`:
#
# $$Q = XW_Q + b_Q,\quad K = XW_K + b_K,\quad V = XW_V + b_V,\qquad
# Z = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V,$$
#
# where the softmax runs over the keys (each row of weights sums to 1) and
# $d_k$ is `key_dim`. Write `SelfAttention` as a Keras layer with three `Dense`
# sublayers of `key_dim` units, named `query_dense`, `key_dense` and `value_dense`:
# create them in `__init__`, build them in `build`. A boolean `attention_mask`
# (True = may attend) broadcasts against the scores `(B, T, T)`; give masked
# scores a large negative value before the softmax: `large_negative(scores.dtype)`
# is -1e9, or -3e4 in float16, where -1e9 rounds to `-inf` (with `-inf`, a query
# whose keys are all masked gets 0 / 0 = NaN; its numbers must stay finite).
#
# **What is graded** (2 points): the outputs and weights, with and without
# masks, for random projections, computed by your own code (no Keras attention
# layer in it, read in your notebook's code) (1.5); `key_dim` stored as `self.key_dim` and
# returned by `get_config()`, so that `SelfAttention.from_config(layer.get_config())`
# rebuilds the layer (0.25); a `ValueError` in `__init__` when `key_dim` is not a
# positive integer, any message (0.25): a clear error at once beats a shape
# error three cells later. `validation.positive_int("key_dim", key_dim)` (from
# `labkit`) raises one that names the argument and returns the value; a check
# of your own is just as good.

# %% nbgrader="solution" grade_id="SelfAttention"
class SelfAttention(keras.layers.Layer):
    """One head of scaled dot-product self-attention.

    Each token is projected to a query, a key and a value by three learned
    Dense layers. Each query is compared with every key, the scores are
    divided by sqrt(key_dim) and a softmax over the keys turns them into
    weights, and each token's output is the weighted sum of the values.

    Args:
        key_dim: size of each query, key and value vector; a positive integer.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: `(B, T, d_model)`.
        attention_mask: optional boolean tensor broadcastable to `(B, T, T)`;
            True where a query may attend to a key.
        return_attention_scores: also return the attention weights.

    Returns:
        The output `(B, T, key_dim)`, or the tuple `(output, scores)` with
        scores `(B, T, T)` when `return_attention_scores=True`.

    Raises:
        ValueError: at construction, when `key_dim` is not a positive integer.

    `get_config()` returns `key_dim`, so `from_config` rebuilds the layer.

    Example:

    >>> layer = SelfAttention(key_dim=4)
    >>> layer(np.ones((2, 5, 8))).shape
    (2, 5, 4)

    References:
        Vaswani et al., 2017, "Attention Is All You Need".
    """

    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        ### BEGIN SOLUTION
        self.key_dim = validation.positive_int("key_dim", key_dim)
        self.query_dense = keras.layers.Dense(key_dim, name="query")
        self.key_dense = keras.layers.Dense(key_dim, name="key")
        self.value_dense = keras.layers.Dense(key_dim, name="value")
        ### END SOLUTION

    def build(self, input_shape):
        ### BEGIN SOLUTION
        for projection in (self.query_dense, self.key_dense, self.value_dense):
            projection.build(input_shape)
        ### END SOLUTION

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        ### BEGIN SOLUTION
        queries = self.query_dense(inputs)  # (B, T, key_dim)
        keys = self.key_dense(inputs)  # (B, T, key_dim)
        values = self.value_dense(inputs)  # (B, T, key_dim)
        scores = ops.matmul(queries, ops.swapaxes(keys, -1, -2))  # (B, T, T)
        scores = scores / math.sqrt(self.key_dim)
        if attention_mask is not None:
            allowed = ops.cast(attention_mask, "bool")  # True where a query may attend
            scores = ops.where(allowed, scores, large_negative(scores.dtype))
        weights = ops.softmax(scores, axis=-1)  # each row sums to 1 over the keys
        output = ops.matmul(weights, values)  # (B, T, key_dim)
        if return_attention_scores:
            return output, weights
        return output
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({"key_dim": self.key_dim})
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_SelfAttention"
# Visible check 1, by hand: two tokens (1, 0) and (0, 1), every projection the
# identity and no bias. The scores are X X^T / sqrt(2), so the first row of
# weights is softmax([0.7071, 0]) = [0.6698, 0.3302], as in lab 1.
head = SelfAttention(key_dim=2)
tokens = np.array([[[1.0, 0.0], [0.0, 1.0]]], dtype="float32")  # (B=1, T=2, d_model=2)
head(tokens)  # builds the layer
for projection in (head.query_dense, head.key_dense, head.value_dense):
    projection.set_weights([np.eye(2, dtype="float32"), np.zeros(2, dtype="float32")])
result = checks.check_tuple(head(tokens, return_attention_scores=True), 2,
                            "SelfAttention(..., return_attention_scores=True)",
                            hint="return output, scores when return_attention_scores is True.")
checks.check_close(result[1], [[[0.66976, 0.33024], [0.33024, 0.66976]]],
                   "SelfAttention: weights of the identity head",
                   hint="divide Q K^T by sqrt(key_dim), then softmax over the keys (last axis).")
checks.check_close(result[0], [[[0.66976, 0.33024], [0.33024, 0.66976]]],
                   "SelfAttention: output of the identity head (weights @ V, V = X)")
masked = head(tokens, attention_mask=np.array([[[True, False], [True, True]]]),
              return_attention_scores=True)[1]
checks.check_close(masked, [[[1.0, 0.0], [0.33024, 0.66976]]],
                   "SelfAttention: weights when the first token may not see the second",
                   hint="attention_mask is True where attention is allowed; masked scores "
                        "get a large negative value before the softmax.")
hidden_row = head(tokens, attention_mask=np.array([[[False, False], [True, True]]]),
                  return_attention_scores=True)
checks.check_true(all(np.all(np.isfinite(checks.to_numpy(part))) for part in hidden_row),
                  "SelfAttention: a query that may see no key still gives finite numbers",
                  "NaN or inf in the output or the weights",
                  hint="with -inf every score of that row is -inf and softmax gives 0/0; "
                       "mask with a large negative number instead: "
                       "large_negative(scores.dtype).")

# Visible check 2: random weights, compared with NumPy.
demo_rng = np.random.default_rng(2)
head = SelfAttention(key_dim=3)
x = demo_rng.normal(size=(2, 5, 6)).astype("float32")
checks.check_true(len(head.weights) == 0, "SelfAttention creates no weights before build",
                  f"found {len(head.weights)} weights right after SelfAttention(key_dim=3)",
                  hint="create the Dense sublayers in __init__; Keras builds them on the first call.")
checks.check_shape(head(x), (2, 5, 3), "SelfAttention(key_dim=3) on (2, 5, 6)",
                   hint="without return_attention_scores, return only the output.")
(Wq, bq), (Wk, bk), (Wv, bv) = (layer.get_weights() for layer in
                                (head.query_dense, head.key_dense, head.value_dense))
raw = (x @ Wq + bq) @ np.swapaxes(x @ Wk + bk, 1, 2) / np.sqrt(3)
expected_weights = np.exp(raw - raw.max(-1, keepdims=True))
expected_weights /= expected_weights.sum(-1, keepdims=True)
output, weights = head(x, return_attention_scores=True)
checks.check_close(weights, expected_weights, "SelfAttention: weights with random projections")
checks.check_close(output, expected_weights @ (x @ Wv + bv), "SelfAttention: output with random projections")
checks.check_config(SelfAttention, head, {"key_dim": 3},
                    hint="store key_dim as self.key_dim and add it to get_config().")
try:
    SelfAttention(key_dim=0)
    raised = None
except ValueError:
    raised = "ValueError"
except Exception as error:  # noqa: BLE001 - reported below
    raised = type(error).__name__
checks.check_true(raised == "ValueError", "SelfAttention(key_dim=0) raises a ValueError",
                  f"it raised {raised}" if raised else "nothing was raised",
                  hint="check key_dim in __init__ and raise a ValueError (not an assert).")

# %% nbgrader="tests" grade_id="test_SelfAttention"

# %% nbgrader="tests" grade_id="test_SelfAttention__config"

# %% nbgrader="tests" grade_id="test_SelfAttention__validation"

# %% [markdown]
# Back to the lecture's two apples. Give each word of "my favourite fruit is
# apple" a vector of its own, with *fruit* and *apple* pointing in similar
# directions, and set all three projections to the identity (no bias). Your head
# is then the lecture's parameter-free self-attention: *apple* attends to itself
# and to *fruit* about 0.8 / 0.2 and moves towards *fruit*, while *my* and *is*
# stay put. Training learns projections that pick such partners on their own.

# %% nbgrader="locked" grade_id="demo_SelfAttention" grading="skip"
words = ["my", "favourite", "fruit", "is", "apple"]
embeddings = 3.66 * np.array([
    [1.0, 0.0, 0.0, 0.0, 0.0],      # my
    [0.0, 1.0, 0.0, 0.0, 0.0],      # favourite
    [0.0, 0.0, 1.0, 0.0, 0.0],      # fruit
    [0.0, 0.0, 0.0, 1.0, 0.0],      # is
    [0.0, 0.0, 0.769, 0.0, 0.639],  # apple: close to fruit
], dtype="float32")[None]  # (B=1, T=5, d_model=5)
head = SelfAttention(key_dim=5)
head(embeddings)
for projection in (head.query_dense, head.key_dense, head.value_dense):
    projection.set_weights([np.eye(5, dtype="float32"), np.zeros(5, dtype="float32")])
contextual, weights = head(embeddings, return_attention_scores=True)
plots.heatmap(checks.to_numpy(weights)[0], words, words, "one head, identity projections")
plt.show()
print("weights of apple over", words, ":", checks.to_numpy(weights)[0, 4].round(2))
print("apple before:", embeddings[0, 4].round(2), " after:", checks.to_numpy(contextual)[0, 4].round(2))

# %% [markdown]
# ## 3. From one head to many: `split_heads` and `merge_heads`
#
# `H` heads of size `depth` do not need `H` separate Dense layers: one projection
# to `H * depth` numbers per token does the same work, if we then read those numbers
# as `H` vectors of `depth`. For `x` of shape `(B, T, H * depth)`:
#
# 1. `ops.reshape` to `(B, T, H, depth)`: each token's numbers cut into `H` pieces;
# 2. `ops.transpose` to `(B, H, T, depth)`: the heads in front, so that each head
#    sees a whole sequence `(T, depth)` and attends on its own.
#
# `merge_heads` undoes it: back to `(B, T, H, depth)`, then to `(B, T, H * depth)`.
# Beware: reshaping straight to `(B, H, T, depth)` gives the right **shape** and
# wrong numbers, as head 0 then gets the first tokens whole instead of the first
# piece of every token. Shape checks cannot see this; the checks below use numbers.

# %% nbgrader="solution" grade_id="split_heads"
def split_heads(x, num_heads):
    """Split the last axis into heads and move the heads in front of time.

    Args:
        x: tensor `(B, T, num_heads * depth)`.
        num_heads: number of heads H; divides the last dimension.

    Returns:
        Tensor `(B, H, T, depth)`: `out[b, h, t]` is
        `x[b, t, h * depth:(h + 1) * depth]`.
    """
    ### BEGIN SOLUTION
    x = ops.convert_to_tensor(x)
    batch_size, length = ops.shape(x)[0], ops.shape(x)[1]
    depth = x.shape[-1] // num_heads
    x = ops.reshape(x, (batch_size, length, num_heads, depth))  # (B, T, H, depth)
    return ops.transpose(x, (0, 2, 1, 3))  # (B, H, T, depth)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_split_heads"
# Visible check: one sequence of 3 tokens with 4 numbers each (token t holds
# 4t ... 4t + 3), split into 2 heads of 2: head 0 gets the first two numbers of
# every token, head 1 the last two.
tokens = np.arange(12, dtype="float32").reshape(1, 3, 4)
checks.check_close(split_heads(tokens, num_heads=2),
                   [[[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [10, 11]]]],
                   "split_heads(x (1, 3, 4), num_heads=2)",
                   hint="reshape to (B, T, H, depth) first, then ops.transpose(x, (0, 2, 1, 3)).")
_ = checks.check_shape(split_heads(np.zeros((2, 5, 12), dtype="float32"), num_heads=3),
                       (2, 3, 5, 4), "split_heads(x (2, 5, 12), num_heads=3)")

# %% nbgrader="tests" grade_id="test_split_heads"

# %% nbgrader="solution" grade_id="merge_heads"
def merge_heads(x):
    """Put the heads back side by side: the inverse of `split_heads`.

    Args:
        x: tensor `(B, H, T, depth)`.

    Returns:
        Tensor `(B, T, H * depth)`: `out[b, t, h * depth:(h + 1) * depth]` is
        `x[b, h, t]`.
    """
    ### BEGIN SOLUTION
    x = ops.convert_to_tensor(x)
    batch_size, length = ops.shape(x)[0], ops.shape(x)[2]
    num_heads, depth = x.shape[1], x.shape[3]
    x = ops.transpose(x, (0, 2, 1, 3))  # (B, T, H, depth)
    return ops.reshape(x, (batch_size, length, num_heads * depth))  # (B, T, H * depth)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_merge_heads"
# Visible check: merging the two heads of the example above gives the tokens back,
# and merge_heads(split_heads(x)) == x on random numbers.
heads = np.array([[[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [10, 11]]]], dtype="float32")
checks.check_close(merge_heads(heads), np.arange(12).reshape(1, 3, 4),
                   "merge_heads(x (1, 2, 3, 2))",
                   hint="transpose (B, H, T, depth) to (B, T, H, depth) first, then reshape.")
x = np.random.default_rng(3).normal(size=(2, 5, 12)).astype("float32")
split = x.reshape(2, 5, 3, 4).transpose(0, 2, 1, 3)  # x split into 3 heads, by NumPy
_ = checks.check_close(merge_heads(split), x,
                       "merge_heads(x split into 3 heads (2, 3, 5, 4)) gives x (2, 5, 12) back",
                       hint="transpose (B, H, T, depth) to (B, T, H, depth) first, then reshape.")

# %% nbgrader="tests" grade_id="test_merge_heads"

# %% [markdown]
# Where the numbers go: below, each entry of a sequence of 4 tokens with 6
# features holds `10 * token + feature`, split into 2 heads of 3. With the
# transpose, head 0 holds features 0–2 of every token. Reshaping straight to
# `(B, H, T, depth)` keeps the shape and hands head 0 tokens 0 and 1 whole, cut
# in two: each "token" of that head is half a real one.

# %% nbgrader="locked" grade_id="demo_split_heads" grading="skip"
labelled = (10 * np.arange(4)[:, None] + np.arange(6)[None, :]).astype("float32")[None]  # (1, 4, 6)
print("head 0 with split_heads:\n", checks.to_numpy(split_heads(labelled, num_heads=2))[0, 0])
print("head 0 after a plain reshape to (B, H, T, depth):\n", labelled.reshape(1, 2, 4, 3)[0, 0])

# %% [markdown]
# ## 4. `MultiHeadAttention` from scratch
#
# Now the whole layer, with exactly the weights of `keras.layers.MultiHeadAttention`
# (section 1), created in `build` with `self.add_weight` in this order:
#
# | weight | shape |
# | --- | --- |
# | query kernel, query bias | `(d_query, H, key_dim)`, `(H, key_dim)` |
# | key kernel, key bias | `(d_key, H, key_dim)`, `(H, key_dim)` |
# | value kernel, value bias | `(d_value, H, value_dim)`, `(H, value_dim)` |
# | output kernel, output bias | `(H, value_dim, d_query)`, `(d_query,)` |
#
# Without biases (`use_bias=False`) only the four kernels remain. Keras calls
# `build(query_shape, value_shape, key_shape=None)` on the first call with the
# shapes of the inputs; the key is the value when it is not given. Then `call`:
#
# 1. **Project.** A kernel `(d, H, k)` is a Dense kernel `(d, H * k)` with the heads
#    written out: `ops.reshape` it, multiply, add the bias (reshaped to `(H * k,)`),
#    then `split_heads` to get `(B, H, T, k)`. (`ops.einsum("btd,dhk->bhtk", ...)`
#    does the same in one step.)
# 2. **Score.** $QK^\top / \sqrt{\text{key\_dim}}$ for every head: `(B, H, T_q, T_k)`.
# 3. **Mask.** `attention_mask` `(B, T_q, T_k)` holds for every head (add a head axis).
#    `use_causal_mask=True` also hides the future: query `i` may see key `j` only when
#    `j <= i`. Both can come together: a key is visible when both allow it. Hidden
#    keys get `large_negative(scores.dtype)`, as in `SelfAttention`.
# 4. **Softmax** over the keys, then **dropout** on these probabilities, only when
#    `training` is true (a `keras.layers.Dropout` sublayer does exactly that).
#    With `return_attention_scores=True` return the probabilities before dropout.
# 5. **Combine.** Weighted sum of the values `(B, H, T_q, value_dim)`, `merge_heads`,
#    and the output kernel (reshaped to `(H * value_dim, d_query)`) plus its bias:
#    `(B, T_q, d_query)`, the query's size, even when the value's size differs.
#
# The layer must compute everything itself: no `keras.layers.MultiHeadAttention`
# or other attention layer inside, and no subclassing of one. The grader reads
# this in your notebook's code (your class and everything it uses, in any cell):
# a use of Keras's attention layers there costs all 5 points of the exercise.
# Comparing your layer with Keras's in a cell of its own is fine.
#
# **What is graded** (5 points, each property on its own, so that a slip in one
# costs only its share):
#
# | property | points |
# | --- | --- |
# | weights (the shapes and order of the table, created in `build`) and, without a mask, the output and scores of self- and cross-attention, with and without biases, equal to Keras's layer holding your weights | 2.5 |
# | masks: `attention_mask` and `use_causal_mask`, alone and together (a query whose keys are all hidden is not graded, but its numbers must be finite) | 1 |
# | dropout: nothing when `training` is False or left out; when training, each attention probability dropped with probability `dropout` and the kept ones scaled by `1 / (1 - dropout)`, new at every call; the scores returned are the probabilities before dropout | 1 |
# | each constructor argument stored under its own name (`self.dropout` is the rate: give the Dropout sublayer another name) and returned by `get_config()`, so that `MultiHeadAttention.from_config(layer.get_config())` rebuilds the layer; `value_dim=None` may be kept as `None` or replaced by `key_dim` (Keras's layer does the latter): either is fine | 0.25 |
# | invalid arguments raise a `ValueError` in `__init__`: `num_heads` or `key_dim` not a positive integer, `dropout` outside [0, 1). Any message is accepted; a good one names the argument, what was expected and what was received, as `validation.positive_int` and `validation.rate` (from `labkit`) do | 0.25 |

# %% nbgrader="solution" grade_id="MultiHeadAttention"
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention, with the weights of Keras's layer.

    Each of `num_heads` heads projects the query, key and value inputs with its
    own kernels, attends with scaled dot products, and the heads' results are
    projected back to the query's size. Weights have the shapes and order of
    `keras.layers.MultiHeadAttention`, so the two layers are interchangeable
    through `get_weights()` / `set_weights()`.

    Args:
        num_heads: number of attention heads; a positive integer.
        key_dim: size of each head's queries and keys; a positive integer.
        value_dim: size of each head's values; `key_dim` when None.
        dropout: dropout rate on the attention probabilities, in [0, 1).
        use_bias: whether the four projections have biases.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: `(B, T_q, d_query)`.
        value: `(B, T_k, d_value)`.
        key: `(B, T_k, d_key)`; `value` when None.
        attention_mask: optional boolean `(B, T_q, T_k)`; True where a query
            may attend to a key.
        return_attention_scores: also return the attention probabilities.
        training: whether dropout is active.
        use_causal_mask: hide keys after the query's position (j > i).

    Returns:
        The output `(B, T_q, d_query)`, or `(output, scores)` with scores
        `(B, num_heads, T_q, T_k)` when `return_attention_scores=True`.

    Raises:
        ValueError: at construction, when `num_heads` or `key_dim` is not a
            positive integer or `dropout` is outside [0, 1).

    Each constructor argument is stored under its own name and returned by
    `get_config()`, so `MultiHeadAttention.from_config(layer.get_config())`
    rebuilds the layer.

    Example:

    >>> layer = MultiHeadAttention(num_heads=3, key_dim=2)
    >>> x = np.ones((1, 6, 16), dtype="float32")
    >>> layer(x, x).shape
    (1, 6, 16)
    >>> [w.shape for w in layer.get_weights()][-2:]
    [(3, 2, 16), (16,)]

    References:
        Vaswani et al., 2017, "Attention Is All You Need".
    """

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        ### BEGIN SOLUTION
        self.num_heads = validation.positive_int("num_heads", num_heads)
        self.key_dim = validation.positive_int("key_dim", key_dim)
        self.value_dim = validation.positive_int("value_dim", value_dim, allow_none=True)
        self.dropout = validation.rate("dropout", dropout)
        self.use_bias = use_bias
        self.attention_dropout = keras.layers.Dropout(dropout)
        ### END SOLUTION

    def build(self, query_shape, value_shape, key_shape=None):
        ### BEGIN SOLUTION
        key_shape = value_shape if key_shape is None else key_shape
        heads, key_dim = self.num_heads, self.key_dim
        value_dim = self.key_dim if self.value_dim is None else self.value_dim
        d_query = query_shape[-1]

        def pair(name, kernel_shape, bias_shape):
            kernel = self.add_weight(shape=kernel_shape, initializer="glorot_uniform",
                                     name=f"{name}_kernel")
            bias = None
            if self.use_bias:
                bias = self.add_weight(shape=bias_shape, initializer="zeros",
                                       name=f"{name}_bias")
            return kernel, bias

        self.query_kernel, self.query_bias = pair(
            "query", (d_query, heads, key_dim), (heads, key_dim))
        self.key_kernel, self.key_bias = pair(
            "key", (key_shape[-1], heads, key_dim), (heads, key_dim))
        self.value_kernel, self.value_bias = pair(
            "value", (value_shape[-1], heads, value_dim), (heads, value_dim))
        self.output_kernel, self.output_bias = pair(
            "output", (heads, value_dim, d_query), (d_query,))
        ### END SOLUTION

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        ### BEGIN SOLUTION
        if key is None:
            key = value

        def project(inputs, kernel, bias):
            d_in, heads, size = kernel.shape
            projected = ops.matmul(inputs, ops.reshape(kernel, (d_in, heads * size)))
            if bias is not None:
                projected = projected + ops.reshape(bias, (heads * size,))
            return split_heads(projected, heads)  # (B, H, T, size)

        queries = project(query, self.query_kernel, self.query_bias)  # (B, H, T_q, key_dim)
        keys = project(key, self.key_kernel, self.key_bias)  # (B, H, T_k, key_dim)
        values = project(value, self.value_kernel, self.value_bias)  # (B, H, T_k, value_dim)

        scores = ops.matmul(queries, ops.swapaxes(keys, -1, -2))  # (B, H, T_q, T_k)
        scores = scores / math.sqrt(self.key_dim)
        allowed = None  # True where a query may attend to a key
        if attention_mask is not None:
            allowed = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)  # (B, 1, T_q, T_k)
        if use_causal_mask:
            query_positions = ops.expand_dims(ops.arange(ops.shape(scores)[-2]), 1)
            key_positions = ops.expand_dims(ops.arange(ops.shape(scores)[-1]), 0)
            causal = ops.less_equal(key_positions, query_positions)  # (T_q, T_k)
            allowed = causal if allowed is None else ops.logical_and(allowed, causal)
        if allowed is not None:
            scores = ops.where(allowed, scores, large_negative(scores.dtype))
        weights = ops.softmax(scores, axis=-1)  # (B, H, T_q, T_k), over the keys
        dropped_weights = self.attention_dropout(weights, training=training)

        context = merge_heads(ops.matmul(dropped_weights, values))  # (B, T_q, H * value_dim)
        heads, value_dim, d_query = self.output_kernel.shape
        output = ops.matmul(context, ops.reshape(self.output_kernel,
                                                 (heads * value_dim, d_query)))
        if self.output_bias is not None:
            output = output + self.output_bias  # (B, T_q, d_query)
        if return_attention_scores:
            return output, weights
        return output
        ### END SOLUTION

    def get_config(self):
        config = super().get_config()
        ### BEGIN SOLUTION
        config.update({
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
        })
        ### END SOLUTION
        return config


# %% nbgrader="locked" grade_id="check_MultiHeadAttention"
# Visible check: your layer and Keras's, with the same (random) weights, must
# agree. First the lecture's self-attention, 3 heads of key_dim 2 on (1, 6, 16).
demo_rng = np.random.default_rng(4)


def _random_weights(layer):
    return [(0.6 * demo_rng.normal(size=w.shape)).astype("float32") for w in layer.get_weights()]


def _split_and_merge_work():
    """Whether this notebook's split_heads and merge_heads pass the example of their checks."""
    tokens = np.arange(12, dtype="float32").reshape(1, 3, 4)
    heads = np.array([[[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [10, 11]]]], dtype="float32")
    try:
        return (np.allclose(checks.to_numpy(split_heads(tokens, num_heads=2)), heads)
                and np.allclose(checks.to_numpy(merge_heads(heads)), tokens))
    except Exception:  # noqa: BLE001 - any failure means "not working"
        return False


def _scores_hint(got_scores, want_scores, query_size, key_dim, allowed):
    """One hint for what is wrong with the scores, from how they differ."""
    got, want = checks.to_numpy(got_scores).astype(np.float64), np.asarray(want_scores)
    if got.shape != want.shape:
        return "scores are (B, num_heads, T_q, T_k): split the heads before Q K^T."
    if not np.allclose(got.sum(-1), 1.0, atol=1e-4):
        return "each query's weights must sum to 1: softmax over the keys (the last axis)."
    if allowed is not None and np.any(np.abs(got[~np.broadcast_to(allowed, got.shape)]) > 1e-6):
        return ("hidden keys must get weight 0: attention_mask is True where a query may "
                "attend; with use_causal_mask=True query i sees keys j <= i; when both are "
                "given a key is visible only when both allow it.")
    return (f"scale Q K^T by 1/sqrt(key_dim) = 1/sqrt({key_dim}) (not the query's size "
            f"{query_size}); project with each kernel and its bias before splitting heads.")


def _compare(mine, config, query, value, what, **arguments):
    """Copy the weights of `mine` into a Keras layer built with `config` and compare."""
    theirs = keras.layers.MultiHeadAttention(**config)
    theirs(query, value, key=arguments.get("key"), return_attention_scores=True)
    mine_shapes = [tuple(w.shape) for w in mine.get_weights()]
    keras_shapes = [tuple(w.shape) for w in theirs.get_weights()]
    checks.check_true(mine_shapes == keras_shapes, f"{what}: weight shapes and order",
                      f"yours are {mine_shapes}, Keras's are {keras_shapes}",
                      hint="create the weights in build with self.add_weight, in the order "
                           "of the table above.")
    theirs.set_weights(mine.get_weights())
    got = checks.check_tuple(mine(query, value, return_attention_scores=True, **arguments), 2,
                             what, hint="return output, scores when return_attention_scores=True.")
    want = [checks.to_numpy(part) for part in
            theirs(query, value, return_attention_scores=True, **arguments)]
    allowed = np.ones(want[1].shape, dtype=bool)
    if "attention_mask" in arguments:
        allowed &= np.asarray(arguments["attention_mask"], dtype=bool)[:, None]
    if arguments.get("use_causal_mask"):
        allowed &= np.tril(np.ones(want[1].shape[-2:], dtype=bool))
    helpers = "" if _split_and_merge_work() else (
        " Your split_heads or merge_heads fails its own check above: if your layer "
        "calls them, fix them first.")
    checks.check_close(got[1], want[1], f"{what}: scores", atol=1e-5,
                       hint=_scores_hint(got[1], want[1], query.shape[-1], config["key_dim"],
                                         allowed if (~allowed).any() else None) + helpers)
    checks.check_close(got[0], want[0], f"{what}: output", atol=1e-4,
                       hint="the scores are right: multiply them with the values, merge the "
                            "heads (B, T_q, H * value_dim), then apply the output kernel and "
                            "bias." + helpers)


x = demo_rng.normal(size=(1, 6, 16)).astype("float32")
config = dict(num_heads=3, key_dim=2, value_dim=None, use_bias=True)
layer = MultiHeadAttention(num_heads=3, key_dim=2)
checks.check_true(len(layer.weights) == 0, "MultiHeadAttention creates its weights in build",
                  f"found {len(layer.weights)} weights before the first call")
checks.check_shape(layer(x, x), (1, 6, 16), "MultiHeadAttention(3, 2) on (1, 6, 16)",
                   hint="without return_attention_scores, return only the output.")
layer.set_weights(_random_weights(layer))  # non-zero biases, so that a forgotten bias shows
_compare(layer, config, x, x, "self-attention (1, 6, 16)")
_compare(layer, config, x, x, "self-attention with use_causal_mask=True", use_causal_mask=True)

# Cross-attention: 3 queries of size 6 attend over 5 values of size 10 with keys
# of size 7, value_dim 4, a padding mask and the causal mask together.
query = demo_rng.normal(size=(2, 3, 6)).astype("float32")
value = demo_rng.normal(size=(2, 5, 10)).astype("float32")
key = demo_rng.normal(size=(2, 5, 7)).astype("float32")
padding = np.ones((2, 3, 5), dtype=bool)
padding[1, :, 2:] = False  # the second sequence has 2 real keys (query 2 may see key 2 causally)
config = dict(num_heads=2, key_dim=3, value_dim=4, use_bias=True)
layer = MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4)
checks.check_shape(layer(query, value, key=key), (2, 3, 6),
                   "cross-attention: output has the query's shape",
                   hint="the output kernel maps back to the query's last dimension.")
layer.set_weights(_random_weights(layer))
_compare(layer, config, query, value, "cross-attention with a padding mask", key=key,
         attention_mask=padding)
_compare(layer, config, query, value, "cross-attention, padding and causal masks", key=key,
         attention_mask=padding, use_causal_mask=True)

everything_hidden = padding.copy()
everything_hidden[0, 1] = False  # query 1 of the first sequence may see no key
output, scores = layer(query, value, key=key, attention_mask=everything_hidden,
                       return_attention_scores=True)
checks.check_true(np.all(np.isfinite(checks.to_numpy(output))) and
                  np.all(np.isfinite(checks.to_numpy(scores))),
                  "a query that may see no key still gives finite numbers",
                  "NaN or inf in the output or the scores",
                  hint="with -inf every score of that row is -inf and softmax gives 0/0; mask "
                       "with a large negative number instead: large_negative(scores.dtype).")

layer = MultiHeadAttention(num_heads=2, key_dim=3, use_bias=False)
layer(query, value)
checks.check_true(len(layer.get_weights()) == 4, "use_bias=False: four kernels, no bias",
                  f"found {len(layer.get_weights())} weights")

# Dropout: nothing at inference, random changes when training.
layer = MultiHeadAttention(num_heads=2, key_dim=3, dropout=0.5)
at_inference = checks.to_numpy(layer(x, x))
checks.check_close(layer(x, x, training=False), at_inference,
                   "dropout=0.5, training=False: no dropout")
training_1 = checks.to_numpy(layer(x, x, training=True))
training_2 = checks.to_numpy(layer(x, x, training=True))
checks.check_true(not np.allclose(training_1, at_inference) and not np.allclose(training_1, training_2),
                  "dropout=0.5, training=True: outputs change from call to call",
                  "the outputs with training=True equal each other or the inference output",
                  hint="pass training=training to a keras.layers.Dropout sublayer.")

# Where dropout acts. One head, no biases, and two keys equal to each other (the
# value holds one vector twice): each attention probability is 0.5, and dropout on
# the probabilities (B, H, T_q, T_k) at rate 0.5 keeps 0, 1 or 2 of them, each
# doubled, so a query's output is 0, 1 or 2 times its output at inference, whole.
query = demo_rng.normal(size=(32, 4, 6)).astype("float32")
value = np.repeat(demo_rng.normal(size=(32, 1, 5)).astype("float32"), 2, axis=1)  # two equal keys
layer = MultiHeadAttention(num_heads=1, key_dim=2, value_dim=3, dropout=0.5, use_bias=False)
contexts = checks.to_numpy(layer(query, value, training=False))
output, scores = layer(query, value, return_attention_scores=True, training=True)
checks.check_close(scores, np.full((32, 1, 4, 2), 0.5),
                   "dropout=0.5, two equal keys, training=True: the scores returned are the "
                   "probabilities before dropout (all 0.5)",
                   hint="return the softmax's probabilities, not the dropped ones.")
output = checks.to_numpy(output)
multiples = np.rint((output * contexts).sum(-1) / np.maximum((contexts ** 2).sum(-1), 1e-12))
whole = np.isin(multiples, (0, 1, 2)) & np.all(
    np.isclose(output, multiples[..., None] * contexts, rtol=1e-4, atol=1e-5), axis=-1)
checks.check_true(np.all(whole) and 0.1 < np.mean(multiples == 0) < 0.45,
                  "dropout=0.5, two equal keys, training=True: each query's output is 0, 1 "
                  "or 2 times its output at inference",
                  f"{np.mean(~whole):.0%} of the queries' outputs are none of these, "
                  f"{np.mean(multiples == 0):.0%} are 0 (about 25% expected)",
                  hint="apply the Dropout sublayer to the attention probabilities (after the "
                       "softmax, before multiplying by the values), not to the values, the "
                       "heads' context or the output; keras.layers.Dropout scales what it "
                       "keeps by 1 / (1 - rate).")

# get_config / from_config, and one invalid argument.
layer = MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4, dropout=0.5, use_bias=False)
checks.check_config(MultiHeadAttention, layer,
                    dict(num_heads=2, key_dim=3, value_dim=4, dropout=0.5, use_bias=False),
                    hint="store each argument under its own name and add it to get_config().")
try:
    MultiHeadAttention(num_heads=0, key_dim=3)
    raised = None
except ValueError:
    raised = "ValueError"
except Exception as error:  # noqa: BLE001 - reported below
    raised = type(error).__name__
checks.check_true(raised == "ValueError", "MultiHeadAttention(num_heads=0, key_dim=3) raises a ValueError",
                  f"it raised {raised}" if raised else "nothing was raised",
                  hint="check num_heads, key_dim and dropout in __init__.")

# %% nbgrader="tests" grade_id="test_MultiHeadAttention"

# %% nbgrader="tests" grade_id="test_MultiHeadAttention__masks"

# %% nbgrader="tests" grade_id="test_MultiHeadAttention__dropout"

# %% nbgrader="tests" grade_id="test_MultiHeadAttention__config"

# %% nbgrader="tests" grade_id="test_MultiHeadAttention__validation"

# %% [markdown]
# ## 5. What each head looks at
#
# With trained weights, heads specialise: one follows the previous word, another
# links a pronoun to its noun. We can build such heads by hand. Give each word of a
# short sentence its position as a one-hot vector (lab 3 does positions properly),
# and set the query and key kernels of three heads so that a query at position `i`
# matches the key at position `i` (head 0), `i - 1` (head 1) or `i + 1` (head 2).
# A query with nothing to match (the first word for head 1, the last for head 2)
# spreads its weight evenly.

# %% nbgrader="locked" grade_id="demo_heads" grading="skip"
sentence_words = ["the", "cat", "sat", "on", "the", "mat"]
length = len(sentence_words)
positions = np.eye(length, dtype="float32")[None]  # (1, T, d_model = T)
shifts = {"itself": 0, "previous word": 1, "next word": -1}
hand_made = MultiHeadAttention(num_heads=3, key_dim=length)
hand_made(positions, positions)
query_kernel = np.zeros((length, 3, length), dtype="float32")
key_kernel = np.zeros((length, 3, length), dtype="float32")
for h, shift in enumerate(shifts.values()):
    query_kernel[:, h, :] = 12.0 * np.eye(length)  # the query of word i is 12 e_i
    for j in range(length):
        if 0 <= j + shift < length:
            key_kernel[j, h, j + shift] = 1.0  # the key of word j is e_(j + shift)
value_kernel = np.stack([np.eye(length)] * 3, axis=1).astype("float32")
output_kernel = np.stack([np.eye(length) / 3] * 3).astype("float32")
zeros = [np.zeros(w.shape, dtype="float32") for w in hand_made.get_weights()]
hand_made.set_weights([query_kernel, zeros[1], key_kernel, zeros[3], value_kernel, zeros[5],
                   output_kernel, zeros[7]])
_, head_scores = hand_made(positions, positions, return_attention_scores=True)
figure, axes = plt.subplots(1, 3, figsize=(15, 4))
for h, (ax, name) in enumerate(zip(axes, shifts)):
    plots.heatmap(checks.to_numpy(head_scores)[0, h], sentence_words, sentence_words,
                  f"head {h}: {name}", ax=ax, vmax=1.0)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 6. Many heads for the price of one
#
# Why `key_dim = d_model / num_heads`? Each of the four kernels has
# `d_model × num_heads × key_dim` numbers, and for a sequence of `T` tokens the
# scores and the weighted sum take `num_heads × T² × key_dim` multiply-adds each
# (the table's last column adds the two: `2 × num_heads × T² × key_dim`).
# Both depend on heads and `key_dim` only through their product. Keep
# `num_heads × key_dim = d_model` and the layer has `4 d_model² + 4 d_model`
# parameters and the same cost whatever the number of heads: splitting one big head
# into `H` small ones buys `H` different ways to attend for (almost) nothing. The
# lecture's layer (3 heads of 2 on `d_model = 16`) uses `num_heads × key_dim = 6`,
# smaller than 16; the Transformer paper uses 8 heads of 64 on `d_model = 512`.

# %% nbgrader="locked" grade_id="demo_cost" grading="skip"
T = 6
print(f"{'d_model':>7} {'heads':>5} {'key_dim':>7} {'parameters':>10} {'Keras count':>11} "
      f"{'multiply-adds, scores + sum (T=6)':>34}")
for d_model, head_counts in [(16, [1, 2, 4, 8, 16]), (512, [1, 8])]:
    for num_heads in head_counts:
        key_dim = d_model // num_heads
        parameters = sum(math.prod(shape) for shape in mha_weight_shapes(d_model, num_heads, key_dim))
        counted = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
        counted(keras.Input(shape=(T, d_model)), keras.Input(shape=(T, d_model)))
        print(f"{d_model:>7} {num_heads:>5} {key_dim:>7} {parameters:>10} "
              f"{counted.count_params():>11} {2 * num_heads * T * T * key_dim:>34}")
print("\nkey_dim fixed at 2 instead (the lecture's choice) on d_model = 16:")
for num_heads in (1, 3, 8):
    parameters = sum(math.prod(shape) for shape in mha_weight_shapes(16, num_heads, 2))
    print(f"  {num_heads} head{'s' if num_heads > 1 else ' '}: {parameters:>4} parameters")

# %% [markdown]
# ## Conclusion
#
# A head is lab 1's scaled dot-product attention behind three learned
# projections. Many heads are one wide projection read as `H` narrow ones
# (`split_heads`), attending side by side and put back together (`merge_heads`)
# before an output projection; with `key_dim = d_model / num_heads` they cost
# about what one head costs. Your `MultiHeadAttention` holds exactly the weights
# of `keras.layers.MultiHeadAttention` and computes the same numbers, masks and
# dropout included, so from lab 4 on you can use the Keras layer knowing what is
# inside it. Lab 3 adds what attention cannot see on its own: the order of the
# words.
