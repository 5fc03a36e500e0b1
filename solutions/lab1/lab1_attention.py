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
# # Lab 1 — Attention from scratch
#
# Attention turns a query and a set of keys into weights, and the weights into
# a weighted sum of values. In this lab you build it from the ground up with
# NumPy and `keras.ops`:
#
# 1. `dot_scores`: how similar a query is to each key;
# 2. `softmax`: scores to weights, without overflow;
# 3. `attention_pool`: weights to a context vector;
# 4. `bilinear_scores` and `additive_scores`: two other similarity functions;
# 5. `scaled_dot_product_attention`: the Transformer's version, with a mask.
#
# Along the way you reproduce the lecture's worked examples (the score 0.62, the two
# meanings of "apple", the look-ahead mask) and see why scores are divided by
# $\sqrt{d_k}$.
#
# **Time:** about 60–90 minutes.
#
# **How to work.** Run the cells from top to bottom. Replace each
# `raise NotImplementedError()` with your code, then run the check cell below it.
# A check prints `✓` when it passes. Hidden tests on other inputs grade your
# notebook, so a passing check is necessary, not sufficient. Each exercise's text
# says what is graded and for how many points: 10 points in all. Read-only cells
# (setup, checks, demos) are locked.

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

# Full float32 matrix products (no TF32 rounding on recent GPUs), so the checks'
# tolerances hold on any machine.
precision = labkit.configure_precision()
np.set_printoptions(precision=4, suppress=True)
print(f"Keras {keras.__version__}, backend {keras.config.backend()}, {precision}")

# %% [markdown]
# ## 1. Similarity as a dot product
#
# A decoder state (the **query**) looks at the encoder states (the **keys**) and
# asks how similar each one is to it. The simplest answer is the dot product,
# one score per key:
#
# $$s_i = q \cdot k_i = \sum_{j=1}^{d} q_j\, k_{i,j}.$$
#
# Write `dot_scores` for a query of shape `(..., d)` and keys of shape
# `(..., n, d)`; the leading `...` are batch dimensions, the same in both. NumPy or
# `keras.ops` both work; a loop over the keys is fine too.
#
# **What is graded** (1 point): the scores of one query and of batches of queries
# (one or two batch dimensions), the lecture's 0.62 among them.

# %% nbgrader="solution" grade_id="dot_scores"
def dot_scores(query, keys):
    """Dot-product similarity of a query with each of n keys.

    Args:
        query: array `(..., d)`.
        keys: array `(..., n, d)`, same batch dimensions `...` as `query`.

    Returns:
        Scores `(..., n)`: `scores[..., i] = query . keys[..., i, :]`.
    """
    ### BEGIN SOLUTION
    query = np.asarray(query)
    keys = np.asarray(keys)
    return np.sum(query[..., None, :] * keys, axis=-1)  # (..., n)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_dot_scores"
# Visible check: the lecture's example, then a batch of two queries.
checks.check_close(
    dot_scores(np.array([0.7, 0.3]), np.array([[0.8, 0.2], [0.1, 0.9], [0.5, 0.5]])),
    [0.62, 0.34, 0.5],
    "dot_scores: query (0.7, 0.3) against three keys",
    hint="multiply the query with each key entry by entry and sum over the last axis.",
)
batch_scores = checks.check_close(
    dot_scores(np.array([[0.7, 0.3], [1.0, 0.0]]),
               np.array([[[0.8, 0.2], [0.1, 0.9], [0.5, 0.5]],
                         [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]])),
    [[0.62, 0.34, 0.5], [1.0, 3.0, 5.0]],
    "dot_scores: a batch of 2 queries, keys (2, 3, 2)",
    hint="query[b] meets only keys[b]; add an axis to the query (query[..., None, :]) "
         "so it broadcasts over the n keys.",
)

# %% nbgrader="tests" grade_id="test_dot_scores"

# %% nbgrader="locked" grade_id="demo_dot_scores" grading="skip"
# The lecture's worked example: encoder state (0.8, 0.2), decoder state (0.7, 0.3).
encoder_states = np.array([[0.8, 0.2]])
decoder_state = np.array([0.7, 0.3])
print("score:", checks.to_numpy(dot_scores(decoder_state, encoder_states)))  # 0.8*0.7 + 0.2*0.3 = 0.62

# %% [markdown]
# ## 2. From scores to weights: a stable softmax
#
# Softmax turns scores into positive weights that sum to 1 along one axis.
# `np.exp(1000)` overflows to `inf`, so subtract the largest entry of each slice
# first; that leaves the result unchanged:
#
# $$\operatorname{softmax}(x)_i = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}}, \qquad m = \max_j x_j.$$
#
# An entry of `-inf` (a masked key) must get weight exactly 0. Keep the reduced
# axis (`keepdims=True`) so the maximum and the sum broadcast back along `axis`.
#
# **What is graded** (2 points), each part on its own:
#
# - *the weights* (1 point): non-negative, summing to 1 along `axis` and equal to
#   the softmax, for vectors and for arrays of 2 and 3 dimensions, along the last
#   axis when `axis` is left out and along the `axis` you are given;
# - *no overflow* (0.5 points): slices near 1000, -1000 and 5000 get the same
#   weights as slices near 0, with no `inf` or NaN, along the last axis or another;
# - *`-inf` entries* (0.5 points): a masked entry (`-inf`) gets weight 0 and the
#   other entries of its slice share all the weight (every slice keeps at least
#   one finite entry).

# %% nbgrader="solution" grade_id="softmax"
def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`.

    Args:
        x: array of any shape; may hold `-inf` (weight 0) and huge values
            such as 1000 (no overflow).
        axis: the axis along which the weights sum to 1.

    Returns:
        An array of the shape of `x`, non-negative, summing to 1 along `axis`.
    """
    ### BEGIN SOLUTION
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_softmax"
# Visible check: small rows you can verify by hand.
checks.check_close(softmax(np.array([1.0, 2.0, 3.0])), [0.09003, 0.24473, 0.66524],
                   "softmax([1, 2, 3])")
checks.check_close(softmax(np.array([1000.0, 1001.0])), [0.26894, 0.73106],
                   "softmax([1000, 1001]) (no overflow)",
                   hint="np.exp(1000) is inf; subtract the maximum before np.exp.")
checks.check_close(softmax(np.array([0.7, -np.inf])), [1.0, 0.0],
                   "softmax([0.7, -inf]) (a masked entry gets weight 0)")
third = 1 / 3
checks.check_close(softmax(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [5.0, 5.0, 5.0]])),
                   [[0.09003, 0.24473, 0.66524], [third, third, third], [third, third, third]],
                   "softmax(x (3, 3)): each row on its own",
                   hint="keep the reduced axis (keepdims=True) in np.max and np.sum, so that "
                        "each row's maximum and sum line up with that row.")
checks.check_close(softmax(np.array([[0.0, 1.0], [1000.0, 1001.0]])),
                   [[0.26894, 0.73106], [0.26894, 0.73106]],
                   "softmax of rows far apart ([0, 1] and [1000, 1001])",
                   hint="subtract each row's own maximum (axis=axis, keepdims=True), not "
                        "the maximum of the whole array: the first row would underflow to 0/0.")
column_weights = checks.check_close(softmax(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]), axis=0),
                                   np.full((2, 3), 0.5), "softmax(x (2, 3), axis=0)",
                                   hint="use the `axis` argument (with keepdims=True) in np.max and np.sum.")

# %% nbgrader="tests" grade_id="test_softmax"

# %% nbgrader="tests" grade_id="test_softmax__overflow"

# %% nbgrader="tests" grade_id="test_softmax__masks"

# %% [markdown]
# The lecture's look-ahead example: each word of "I am a student" may only look
# at itself and the words before it, so later scores are `-inf`. Your softmax
# turns each row into weights over the visible words.

# %% nbgrader="locked" grade_id="demo_softmax" grading="skip"
tokens = ["I", "am", "a", "student"]
inf = np.inf
look_ahead_scores = np.array([
    [0.7, -inf, -inf, -inf],
    [0.1, 0.6, -inf, -inf],
    [0.1, 0.3, 0.6, -inf],
    [0.1, 0.3, 0.3, 0.3],
])
look_ahead_weights = checks.to_numpy(softmax(look_ahead_scores, axis=-1))
print(look_ahead_weights.round(2))  # rows: [1], [0.38 0.62], [0.26 0.32 0.43], ...
plots.heatmap(look_ahead_weights, tokens, tokens, "softmax of the look-ahead scores")
plt.show()

# %% [markdown]
# ## 3. Attention as a soft look-up
#
# Think of a table of (key, value) pairs: a database returns the value whose key
# matches the query; attention returns every value, weighted by how well its key
# matches. With weights $\alpha = \operatorname{softmax}(s)$ from the dot scores,
# the **context** is
#
# $$c = \sum_{i=1}^{n} \alpha_i\, v_i.$$
#
# Write `attention_pool` for a query `(..., d)`, keys `(..., n, d)` and values
# `(..., n, d_v)`, returning `(context, weights)` in that order. Use unscaled dot
# scores here; you may call your `dot_scores` and `softmax`.
#
# **What is graded** (2 points): the tuple `(context, weights)` for one query and for
# batches of queries (one or two batch dimensions): the weights, the softmax of the
# plain dot scores, summing to 1 over the n keys, and the context, their weighted
# sum of the values. (While it is graded, your `dot_scores` and `softmax` are
# replaced by correct ones, so a mistake there costs points in their sections only.)

# %% nbgrader="solution" grade_id="attention_pool"
def attention_pool(query, keys, values):
    """Dot-product attention of a query over n (key, value) pairs.

    Args:
        query: array `(..., d)`.
        keys: array `(..., n, d)`.
        values: array `(..., n, d_v)`.

    Returns:
        A tuple `(context, weights)`: context `(..., d_v)`, the weighted sum of
        the values; weights `(..., n)`, the softmax of the dot scores over the
        n keys.
    """
    ### BEGIN SOLUTION
    weights = softmax(dot_scores(query, keys), axis=-1)  # (..., n)
    context = np.sum(weights[..., None] * np.asarray(values), axis=-2)  # (..., d_v)
    return context, weights
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_attention_pool"
# Visible check: the query (1, 0) scores 1 with the first key and 0 with the
# second, so the weights are softmax([1, 0]) = [0.731, 0.269].
result = checks.check_tuple(
    attention_pool(np.array([1.0, 0.0]), np.array([[1.0, 0.0], [0.0, 1.0]]),
                   np.array([[10.0, 0.0], [0.0, 10.0]])),
    2, "attention_pool", hint="return context, weights (a tuple, context first).")
checks.check_close(result[1], [0.73106, 0.26894], "attention_pool: weights (second item)",
                   hint="weights = softmax of the dot scores of the query with each key.")
checks.check_close(result[0], [7.3106, 2.6894], "attention_pool: context (first item)",
                   hint="context = sum over i of weights[i] * values[i].")
# Two queries at once, (1, 0) and (2, 0), over the same keys: each query's weights
# sum to 1 over the keys, softmax([1, 0]) and softmax([2, 0]).
context, weights = checks.check_tuple(
    attention_pool(np.array([[1.0, 0.0], [2.0, 0.0]]), np.stack([np.eye(2)] * 2),
                   np.stack([[[10.0, 0.0], [0.0, 10.0]]] * 2)), 2,
    "attention_pool on two queries")
checks.check_close(weights, [[0.73106, 0.26894], [0.88080, 0.11920]],
                   "attention_pool: weights of two queries (each row sums to 1)",
                   hint="the softmax runs over the keys (the last axis), never over the batch.")
checks.check_close(context, [[7.3106, 2.6894], [8.8080, 1.1920]],
                   "attention_pool: contexts of two queries")
context, weights = checks.check_tuple(
    attention_pool(np.ones((4, 3)), np.ones((4, 5, 3)), np.ones((4, 5, 2))), 2,
    "attention_pool (batched)")
checks.check_shape(context, (4, 2), "attention_pool: context of a batch of 4",
                   hint="sum the weighted values over the key axis (-2).")
weights = checks.check_shape(weights, (4, 5), "attention_pool: weights of a batch of 4")

# %% nbgrader="tests" grade_id="test_attention_pool"

# %% [markdown]
# Back to the lecture: a weight of 0.7 scales the encoder state (0.8, 0.2) down
# to (0.56, 0.14), and the context adds up such weighted states. Below, the
# decoder state (0.7, 0.3) attends over three encoder states.

# %% nbgrader="locked" grade_id="demo_attention_pool" grading="skip"
print("0.7 * (0.8, 0.2) =", 0.7 * np.array([0.8, 0.2]))

words = ["I", "like", "pizza"]
encoder_states = np.array([[0.8, 0.2], [0.1, 0.9], [0.4, 0.4]])
context, weights = attention_pool(np.array([0.7, 0.3]), encoder_states, encoder_states)
print("scores: ", checks.to_numpy(dot_scores(np.array([0.7, 0.3]), encoder_states)))  # [0.62 0.34 0.4]
print("weights:", checks.to_numpy(weights), " context:", checks.to_numpy(context))
plots.bars(weights, words, "weights of the query (0.7, 0.3)")
plt.show()

# %% [markdown]
# ## 4. Contextual embeddings: two apples
#
# A word vector alone cannot tell "My favourite fruit is apple" from "My favourite
# brand is apple". A weighted sum can: pull `apple` towards the word it attends
# to. With the lecture's vectors, weights 0.8/0.2 over (apple, fruit) and
# 0.9/0.1 over (apple, brand) give two different apples.

# %% nbgrader="locked" grade_id="demo_apple" grading="skip"
apple, fruit, brand = np.array([5.0, 7.0]), np.array([0.0, 8.0]), np.array([6.0, 0.0])
apple_fruit = np.array([0.8, 0.2]) @ np.stack([apple, fruit])  # [4.0, 7.2]
apple_brand = np.array([0.9, 0.1]) @ np.stack([apple, brand])  # [5.1, 6.3]
print("apple in 'favourite fruit':", apple_fruit, "  apple in 'favourite brand':", apple_brand)
plots.vectors({"apple": apple, "fruit": fruit, "brand": brand,
               "apple (fruit)": apple_fruit, "apple (brand)": apple_brand},
              "one word, two contexts")
plt.show()

# %% [markdown]
# ## 5. Other ways to compare a query with a key
#
# The dot product needs queries and keys of the same size and has nothing to
# learn. The **bilinear** score puts a matrix $W$ of shape `(d_q, d_k)` in between,
# so queries and keys may differ in size and $W$ can be learned:
#
# $$s_i = q^\top W k_i.$$
#
# Write `bilinear_scores`. With `W` the identity it is the dot product again.
#
# **What is graded** (1 point): the scores of one query and of batches of queries,
# for a `W` of shape `(d_q, d_k)` with `d_q != d_k` and for a square `W` that is not
# symmetric (so `W` and its transpose give different scores).

# %% nbgrader="solution" grade_id="bilinear_scores"
def bilinear_scores(query, keys, W):
    """Bilinear similarity q^T W k_i of a query with each of n keys.

    Args:
        query: array `(..., d_q)`.
        keys: array `(..., n, d_k)`.
        W: array `(d_q, d_k)`.

    Returns:
        Scores `(..., n)`.
    """
    ### BEGIN SOLUTION
    projected = np.asarray(query) @ np.asarray(W)  # (..., d_k)
    return np.sum(projected[..., None, :] * np.asarray(keys), axis=-1)  # (..., n)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_bilinear_scores"
# Visible check: W = identity gives the dot product; then a W of shape (2, 3).
checks.check_close(
    bilinear_scores(np.array([0.7, 0.3]), np.array([[0.8, 0.2], [0.1, 0.9]]), np.eye(2)),
    [0.62, 0.34], "bilinear_scores with W = identity")
checks.check_close(
    bilinear_scores(np.array([1.0, 0.0]), np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
                    np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])),
    [1.0, 3.0], "bilinear_scores with W (2, 3)",
    hint="q^T W has the size of a key (d_k); then take its dot product with each key.")
batch_scores = checks.check_shape(
    bilinear_scores(np.ones((4, 2)), np.ones((4, 5, 3)), np.ones((2, 3))),
    (4, 5), "bilinear_scores on a batch of 4")

# %% nbgrader="tests" grade_id="test_bilinear_scores"

# %% nbgrader="locked" grade_id="demo_bilinear_scores" grading="skip"
# W weights the coordinates: doubling the first one doubles its part of the score.
W = np.array([[2.0, 0.0], [0.0, 1.0]])
print(checks.to_numpy(bilinear_scores(np.array([0.7, 0.3]), np.array([[0.8, 0.2]]), W)))  # 2*0.56 + 0.06 = 1.18

# %% [markdown]
# ### Additive (MLP) attention
#
# The **additive** score feeds the query and the key, stacked into one vector
# $[q; k_i]$ of size `d_q + d_k`, through a one-hidden-layer network with `h`
# tanh units:
#
# $$s_i = w_2^\top \tanh\!\left(W_1^\top [q; k_i]\right).$$
#
# Write `additive_scores`: the query comes first in the stack, and the same query
# pairs with each of the n keys.
#
# **What is graded** (2 points): the scores of one query and of batches of queries,
# for queries and keys of different sizes (`d_q != d_k`) and of the same size, and
# for several numbers of hidden units `h`.

# %% nbgrader="solution" grade_id="additive_scores"
def additive_scores(query, keys, W1, w2):
    """Additive (MLP) similarity w2^T tanh(W1^T [q; k_i]) for each of n keys.

    Args:
        query: array `(..., d_q)`.
        keys: array `(..., n, d_k)`.
        W1: array `(d_q + d_k, h)`.
        w2: array `(h,)`.

    Returns:
        Scores `(..., n)`.
    """
    ### BEGIN SOLUTION
    query, keys = np.asarray(query), np.asarray(keys)
    repeated = np.broadcast_to(query[..., None, :],
                               keys.shape[:-1] + query.shape[-1:])  # (..., n, d_q)
    stacked = np.concatenate([repeated, keys], axis=-1)  # (..., n, d_q + d_k)
    hidden = np.tanh(stacked @ np.asarray(W1))  # (..., n, h)
    return hidden @ np.asarray(w2)  # (..., n)
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_additive_scores"
# Visible check: with one hidden unit that adds q_1 and k_2, the score of the
# key (0.8, 0.2) for the query (0.7, 0.3) is tanh(0.7 + 0.2) = tanh(0.9).
W1 = np.array([[1.0], [0.0], [0.0], [1.0]])  # rows: q_1, q_2, k_1, k_2
checks.check_close(
    additive_scores(np.array([0.7, 0.3]), np.array([[0.8, 0.2], [0.1, 0.9]]), W1,
                    np.array([1.0])),
    [0.71630, 0.92167], "additive_scores: tanh(q_1 + k_2) for two keys",
    hint="stack the query first: [q; k] = concatenate([q, k]); then tanh(W1^T [q; k]) . w2.")
# Two hidden units, q_1 + k_2 and q_2 + k_1, weighted by w2 = (2, -1): the score of
# the first key is 2 tanh(0.9) - tanh(1.1) = 0.63210.
W1 = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
checks.check_close(
    additive_scores(np.array([0.7, 0.3]), np.array([[0.8, 0.2], [0.1, 0.9]]), W1,
                    np.array([2.0, -1.0])),
    [0.63210, 1.46339], "additive_scores: two hidden units weighted by w2 = (2, -1)",
    hint="tanh acts on each hidden unit, W1^T [q; k], before the weighted sum with w2: "
         "score = w2 . tanh(W1^T [q; k]).")
batch_scores = checks.check_shape(
    additive_scores(np.ones((4, 3)), np.ones((4, 5, 2)), np.ones((5, 7)), np.ones(7)),
    (4, 5), "additive_scores on a batch of 4 (d_q=3, d_k=2, h=7)",
    hint="repeat the query once per key (np.broadcast_to) before stacking.")

# %% nbgrader="tests" grade_id="test_additive_scores"

# %% nbgrader="locked" grade_id="demo_additive_scores" grading="skip"
# Four similarity functions, one query, three keys (all vectors of size 2).
demo_rng = np.random.default_rng(1)
query, keys = np.array([0.7, 0.3]), np.array([[0.8, 0.2], [0.1, 0.9], [0.4, 0.4]])
W1, w2 = demo_rng.normal(size=(4, 3)), demo_rng.normal(size=3)
for name, scores in [("dot", dot_scores(query, keys)),
                     ("scaled dot", dot_scores(query, keys) / np.sqrt(2)),
                     ("bilinear (W = I)", bilinear_scores(query, keys, np.eye(2))),
                     ("additive", additive_scores(query, keys, W1, w2))]:
    print(f"{name:>17}: scores {checks.to_numpy(scores)}  weights {checks.to_numpy(softmax(scores))}")

# %% [markdown]
# ## 6. Why divide by $\sqrt{d_k}$?
#
# Large scores make softmax peaked: almost all the weight goes to one key and the
# others get nearly no gradient. The lecture's two-token exercise shows it: both
# queries look for token B; multiplying the keys by 10 turns the weights
# (0.27, 0.73) into (0.00005, 0.99995).

# %% nbgrader="locked" grade_id="demo_peaked" grading="skip"
queries = np.array([[0.0, 1.0], [0.0, 1.0]])  # both queries point at token B
for key_scale in [1.0, 10.0]:
    keys = key_scale * np.eye(2)  # token A = (1, 0), token B = (0, 1), scaled
    weights = checks.to_numpy(softmax(queries @ keys.T, axis=-1))
    print(f"keys x {key_scale:>4}: weights over (A, B) = ({weights[0, 0]:.5f}, {weights[0, 1]:.5f})")

# %% [markdown]
# The dot product of two random vectors with $d$ independent entries of variance 1
# is a sum of $d$ such products, so its variance is $d$: the longer the vectors,
# the larger the scores and the more peaked the weights. Dividing by $\sqrt{d}$
# brings the variance back to 1 whatever the size, as the plots below show
# (10 keys, so uniform weights would be 0.1).

# %% nbgrader="locked" grade_id="demo_scale_variance" grading="skip"
demo_rng = np.random.default_rng(0)
dims, n_keys, trials = [2, 4, 8, 16, 32, 64, 128, 256, 512], 10, 300
variances, peak_plain, peak_scaled = [], [], []
for d in dims:
    scores = checks.to_numpy(dot_scores(demo_rng.normal(size=(trials, d)),
                                        demo_rng.normal(size=(trials, n_keys, d))))
    variances.append(scores.var())
    peak_plain.append(checks.to_numpy(softmax(scores, axis=-1)).max(axis=-1).mean())
    peak_scaled.append(checks.to_numpy(softmax(scores / np.sqrt(d), axis=-1)).max(axis=-1).mean())

figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
left.loglog(dims, variances, "o-", label="variance of q . k")
left.loglog(dims, dims, "k--", label="d")
left.set(xlabel="d", ylabel="variance", title="dot products grow with d")
left.legend()
right.semilogx(dims, peak_plain, "o-", label="softmax(q . k)")
right.semilogx(dims, peak_scaled, "o-", label="softmax(q . k / sqrt(d))")
right.axhline(1 / n_keys, color="gray", linestyle=":", label="uniform")
right.set(xlabel="d", ylabel="largest weight (mean)", ylim=(0, 1.05),
          title="scaling keeps weights spread")
right.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Scaled dot-product attention with a mask
#
# The Transformer computes all queries at once, as matrices, and scales the scores:
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V.$$
#
# A boolean `mask` (`True` = may attend) broadcasts against the scores
# `(..., T_q, T_k)`; a masked score must end with weight 0, e.g. by replacing it
# with a large negative number before the softmax: `large_negative(scores.dtype)`
# (from `labkit.masking`) gives -1e9, or -3e4 in float16, where -1e9 would round
# to `-inf`. A row whose keys are all masked must still give finite numbers (no
# NaN), which `-inf` would not. Write it with `keras.ops`
# (`ops.matmul`, `ops.swapaxes`, `ops.where`, `ops.softmax`) so it runs on any backend.
#
# **What is graded** (2 points), each part on its own:
#
# - *without a mask* (1 point): the output and the weights for 2-D, 3-D and 4-D
#   inputs `(..., T, d_k)`, with `mask` left out or `None`; scores divided by
#   $\sqrt{d_k}$, the softmax over the keys;
# - *with a mask* (0.5 points): a look-ahead mask `(T_q, T_k)` shared by a batch,
#   a padding mask `(B, 1, 1, T_k)` and a random mask, each broadcast against the
#   scores; every query has at least one visible key, its masked keys get weight 0
#   and its output and weights are compared;
# - *a query whose keys are all masked* (0.5 points): its output and weights are
#   finite numbers (no NaN); their values are not graded. With `-inf` masking they
#   are NaN, which costs these 0.5 points only.

# %% nbgrader="solution" grade_id="scaled_dot_product_attention"
def scaled_dot_product_attention(query, key, value, mask=None):
    """Scaled dot-product attention, written with `keras.ops`.

    Args:
        query: tensor `(..., T_q, d_k)`.
        key: tensor `(..., T_k, d_k)`.
        value: tensor `(..., T_k, d_v)`.
        mask: optional boolean tensor broadcastable to `(..., T_q, T_k)`;
            True where a query may attend to a key.

    Returns:
        A tuple `(output, weights)`: output `(..., T_q, d_v)`, weights
        `(..., T_q, T_k)`: each row with at least one visible key sums to 1
        and its masked keys get 0; a row whose keys are all masked must hold
        finite numbers (no NaN), whatever their values.
    """
    ### BEGIN SOLUTION
    query = ops.convert_to_tensor(query)
    key = ops.convert_to_tensor(key)
    value = ops.convert_to_tensor(value)
    d_k = query.shape[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))  # (..., T_q, T_k)
    scores = scores / ops.sqrt(ops.cast(d_k, scores.dtype))
    if mask is not None:
        allowed = ops.cast(mask, "bool")  # True where a query may attend to a key
        scores = ops.where(allowed, scores, large_negative(scores.dtype))
    weights = ops.softmax(scores, axis=-1)  # (..., T_q, T_k)
    output = ops.matmul(weights, value)  # (..., T_q, d_v)
    return output, weights
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_scaled_dot_product_attention"
# Visible check: one query (1, 0), keys (1, 0) and (0, 1), d_k = 2. The scores
# are (1/sqrt(2), 0), so the weights are softmax([0.7071, 0]) = [0.6698, 0.3302].
q = np.array([[1.0, 0.0]], dtype="float32")  # float32, as the grader's inputs are
k = np.array([[1.0, 0.0], [0.0, 1.0]], dtype="float32")
v = np.array([[1.0, 2.0], [3.0, 4.0]], dtype="float32")
output, weights = checks.check_tuple(scaled_dot_product_attention(q, k, v), 2,
                                     "scaled_dot_product_attention",
                                     hint="return output, weights (output first).")
checks.check_close(weights, [[0.66976, 0.33024]], "scaled_dot_product_attention: weights",
                   hint="divide the scores Q K^T by sqrt(d_k), then softmax over the keys (last axis).")
checks.check_close(output, [[1.66048, 2.66048]], "scaled_dot_product_attention: output",
                   hint="output = weights @ V.")
output, weights = scaled_dot_product_attention(q, k, v, mask=np.array([[False, True]]))
checks.check_close(weights, [[0.0, 1.0]], "scaled_dot_product_attention: weights with the first key masked",
                   hint="mask is True where attention is allowed; masked scores get a large negative value.")
checks.check_close(output, [[3.0, 4.0]], "scaled_dot_product_attention: output with the first key masked")
# Values of another size (d_v = 3): the scale is still 1/sqrt(d_k) = 1/sqrt(2).
output, weights = scaled_dot_product_attention(q, k, np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
                                                              dtype="float32"))
checks.check_close(weights, [[0.66976, 0.33024]],
                   "scaled_dot_product_attention: weights with values of size 3",
                   hint="scale by sqrt(d_k), the size of the queries and keys, not of the values.")
checks.check_close(output, [[1.99072, 2.99072, 3.99072]],
                   "scaled_dot_product_attention: output with values of size 3")
output, weights = scaled_dot_product_attention(q, k, v, mask=np.array([[False, False]]))
checks.check_true(np.all(np.isfinite(checks.to_numpy(output))) and
                  np.all(np.isfinite(checks.to_numpy(weights))),
                  "scaled_dot_product_attention: a query whose keys are all masked gives "
                  "finite numbers",
                  "NaN or inf in the output or the weights",
                  hint="with -inf every score of the row is -inf and softmax gives 0/0; mask "
                       "with a large negative number instead: large_negative(scores.dtype).")
output = checks.check_shape(scaled_dot_product_attention(np.ones((2, 4, 3, 8), "float32"),
                                                         np.ones((2, 4, 5, 8), "float32"),
                                                         np.ones((2, 4, 5, 6), "float32"))[0],
                            (2, 4, 3, 6), "scaled_dot_product_attention: output for (B, heads, T_q, d_k) inputs",
                            hint="transpose only the last two axes of the keys: ops.swapaxes(key, -1, -2).")
# A padding mask (B, 1, 1, T_k) on those inputs: all scores are equal, so each query
# shares its weight equally among the keys its sentence keeps (3, then 2).
padding = np.array([[[[True, True, True, False, False]]], [[[True, True, False, False, False]]]])
weights = checks.check_close(
    scaled_dot_product_attention(np.ones((2, 4, 3, 8), "float32"), np.ones((2, 4, 5, 8), "float32"),
                                 np.ones((2, 4, 5, 6), "float32"), mask=padding)[1],
    np.broadcast_to(np.array([[[[1 / 3, 1 / 3, 1 / 3, 0, 0]]], [[[0.5, 0.5, 0, 0, 0]]]]),
                    (2, 4, 3, 5)),
    "scaled_dot_product_attention: weights with a padding mask (2, 1, 1, 5)",
    hint="the mask broadcasts against the scores (B, heads, T_q, T_k): use it as it is in "
         "ops.where(mask, scores, ...).")

# %% nbgrader="tests" grade_id="test_scaled_dot_product_attention"

# %% nbgrader="tests" grade_id="test_scaled_dot_product_attention__masks"

# %% nbgrader="tests" grade_id="test_scaled_dot_product_attention__masked_rows"

# %% [markdown]
# Self-attention over "I am a student", with random query and key projections:
# without a mask every word looks at every word; with the look-ahead mask each
# word sees only itself and the words before it, so the first row is `[1, 0, 0, 0]`.

# %% nbgrader="locked" grade_id="demo_scaled_dot_product_attention" grading="skip"
demo_rng = np.random.default_rng(7)
tokens = ["I", "am", "a", "student"]
embeddings = demo_rng.normal(size=(4, 8)).astype("float32")  # (T, d_model)
W_query, W_key = (demo_rng.normal(size=(2, 8, 8)) / np.sqrt(8)).astype("float32")
queries, keys = embeddings @ W_query, embeddings @ W_key  # (T, d_k)
look_ahead = np.tril(np.ones((4, 4), dtype=bool))  # True on and below the diagonal

figure, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, mask, title in [(axes[0], None, "no mask"), (axes[1], look_ahead, "look-ahead mask")]:
    output, weights = scaled_dot_product_attention(queries, keys, embeddings, mask=mask)
    plots.heatmap(weights, tokens, tokens, title, ax=ax, vmax=1.0)
plt.tight_layout()
plt.show()
print("output with the look-ahead mask:", tuple(output.shape))

# %% [markdown]
# ## Conclusion
#
# Attention is three steps: score each key against the query, turn the scores
# into weights with a softmax, and return the weighted sum of the values. You
# wrote four scoring functions (dot, bilinear, additive and scaled dot), a softmax
# that survives huge and masked inputs, and the masked, batched
# `scaled_dot_product_attention` that every Transformer layer uses. Lab 2 wraps it
# in learned projections and runs several heads side by side:
# `keras.layers.MultiHeadAttention`, rebuilt from scratch.
