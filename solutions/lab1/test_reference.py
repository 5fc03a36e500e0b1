"""Tests of the lab 1 references (autograder/references/lab1.py).

Expected values are the lecture's worked examples, written out by hand, plus
properties (weights sum to 1, masked keys get weight 0, no overflow). Each
stand-in must agree with its reference on NumPy input (NumPy out) and on a
Keras tensor input (tensor out).
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from autograder.labs import LABS
from autograder.references import lab1 as reference
from autograder.testkernel import standins

EXERCISES = [
    "dot_scores",
    "softmax",
    "attention_pool",
    "bilinear_scores",
    "additive_scores",
    "scaled_dot_product_attention",
]


# --- the lecture's numbers --------------------------------------------------


def test_dot_score_of_lecture_states_is_0_62():
    scores = reference.dot_scores([0.7, 0.3], [[0.8, 0.2]])
    np.testing.assert_allclose(scores, [0.62], atol=1e-12)


def test_weight_0_7_turns_state_into_0_56_0_14():
    # One value with weight 0.7 (the lecture's weighted state); attention_pool
    # with a single key gives weight 1, so check the weighted sum directly.
    context = 0.7 * np.array([0.8, 0.2])
    np.testing.assert_allclose(context, [0.56, 0.14], atol=1e-12)
    # And through attention_pool: two keys with equal scores split 0.5 / 0.5.
    context, weights = reference.attention_pool(
        [1.0, 0.0], [[1.0, 0.0], [1.0, 5.0]], [[0.8, 0.2], [0.0, 0.0]])
    np.testing.assert_allclose(weights, [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(context, [0.4, 0.1], atol=1e-12)


def test_contextual_apple():
    apple, fruit, brand = [5.0, 7.0], [0.0, 8.0], [6.0, 0.0]
    np.testing.assert_allclose(np.array([0.8, 0.2]) @ np.array([apple, fruit]),
                               [4.0, 7.2], atol=1e-12)
    np.testing.assert_allclose(np.array([0.9, 0.1]) @ np.array([apple, brand]),
                               [5.1, 6.3], atol=1e-12)


def test_look_ahead_rows_of_the_lecture():
    inf = np.inf
    scores = np.array([
        [0.7, -inf, -inf, -inf],
        [0.1, 0.6, -inf, -inf],
        [0.1, 0.3, 0.6, -inf],
        [0.1, 0.3, 0.3, 0.3],
    ])
    weights = reference.softmax(scores, axis=-1)
    expected = np.array([
        [1.0, 0.0, 0.0, 0.0],
        [0.38, 0.62, 0.0, 0.0],
        [0.26, 0.32, 0.43, 0.0],
        [0.21, 0.26, 0.26, 0.26],
    ])
    np.testing.assert_allclose(weights, expected, atol=0.01)
    assert np.all(weights[np.isneginf(scores)] == 0.0)


def test_two_token_exercise_peaked_weights():
    # Handwritten notes: queries point at token B; keys scaled by 10.
    queries = np.array([[0.0, 1.0], [0.0, 1.0]])
    for scale, expected_b in [(1.0, 0.7311), (10.0, 0.99995)]:
        keys = scale * np.eye(2)
        weights = reference.softmax(queries @ keys.T, axis=-1)
        np.testing.assert_allclose(weights[:, 1], expected_b, atol=1e-4)


# --- softmax ------------------------------------------------------------------


def test_softmax_stable_at_1000():
    weights = reference.softmax(np.array([1000.0, 1001.0, 999.0]))
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights, [0.24473, 0.66524, 0.09003], atol=1e-5)
    weights = reference.softmax(np.array([-1000.0, -1001.0]))
    np.testing.assert_allclose(weights, [0.73106, 0.26894], atol=1e-5)


def test_softmax_minus_inf_gets_zero_weight():
    weights = reference.softmax(np.array([0.7, -np.inf, 0.7]))
    np.testing.assert_allclose(weights, [0.5, 0.0, 0.5], atol=1e-12)


def test_softmax_fully_masked_row_is_finite():
    weights = reference.softmax(np.array([[-np.inf, -np.inf], [0.0, 0.0]]))
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights[1], [0.5, 0.5])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_sums_to_one_along_axis(axis):
    x = np.random.default_rng(axis + 3).normal(size=(3, 4, 5)) * 10
    weights = reference.softmax(x, axis=axis)
    np.testing.assert_allclose(weights.sum(axis=axis), 1.0, atol=1e-12)
    assert np.all(weights >= 0)


# --- shapes and identities ----------------------------------------------------


def test_shapes_and_identities():
    r = np.random.default_rng(0)
    query, keys, values = r.normal(size=(2, 3)), r.normal(size=(2, 5, 3)), r.normal(size=(2, 5, 4))
    assert reference.dot_scores(query, keys).shape == (2, 5)
    context, weights = reference.attention_pool(query, keys, values)
    assert context.shape == (2, 4) and weights.shape == (2, 5)
    np.testing.assert_allclose(weights.sum(-1), 1.0)
    # Bilinear with the identity is the dot product.
    np.testing.assert_allclose(reference.bilinear_scores(query, keys, np.eye(3)),
                               reference.dot_scores(query, keys))
    # Additive with hand-picked weights: tanh(q_1 + k_2).
    W1 = np.array([[1.0], [0.0], [0.0], [1.0]])
    scores = reference.additive_scores([0.7, 0.3], [[0.8, 0.2], [0.1, 0.9]], W1, [1.0])
    np.testing.assert_allclose(scores, [math.tanh(0.9), math.tanh(1.6)])


def test_scaled_dot_product_attention_by_hand():
    output, weights = reference.scaled_dot_product_attention(
        [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [3.0, 4.0]])
    a = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    np.testing.assert_allclose(weights, [[a, 1 - a]])
    np.testing.assert_allclose(output, [[a + 3 * (1 - a), 2 * a + 4 * (1 - a)]])
    output, weights = reference.scaled_dot_product_attention(
        [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [3.0, 4.0]],
        mask=np.array([[False, True]]))
    np.testing.assert_allclose(weights, [[0.0, 1.0]])
    np.testing.assert_allclose(output, [[3.0, 4.0]])


def test_scaled_dot_product_attention_properties():
    r = np.random.default_rng(1)
    query, key, value = r.normal(size=(2, 4, 8)), r.normal(size=(2, 6, 8)), r.normal(size=(2, 6, 3))
    mask = r.random(size=(2, 4, 6)) > 0.4
    mask[:, :, 0] = True
    mask[1, 2, :] = False  # one fully masked row
    output, weights = reference.scaled_dot_product_attention(query, key, value, mask=mask)
    assert output.shape == (2, 4, 3) and weights.shape == (2, 4, 6)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    assert np.all(weights[~mask] == 0.0)
    live = mask.any(axis=-1)
    np.testing.assert_allclose(weights.sum(-1)[live], 1.0)
    # The scale is 1/sqrt(d_k), not 1/d_k and not 1.
    _, unmasked = reference.scaled_dot_product_attention(query, key, value)
    scores = np.einsum("bqd,bkd->bqk", query, key)
    np.testing.assert_allclose(unmasked, reference.softmax(scores / math.sqrt(8)))


# --- stand-ins ----------------------------------------------------------------


def _stand_in(name):
    return standins.define(LABS["lab1"].folder, name)


def _inputs(name, r):
    f32 = lambda *shape: r.normal(size=shape).astype("float32")  # noqa: E731
    if name == "dot_scores":
        return (f32(2, 3, 4), f32(2, 3, 5, 4)), {}
    if name == "softmax":
        x = f32(3, 4, 5) * 5
        x[0, 1, 2] = -np.inf
        x[1] += 1000
        return (x,), {"axis": 1}
    if name == "attention_pool":
        return (f32(3, 4), f32(3, 5, 4), f32(3, 5, 2)), {}
    if name == "bilinear_scores":
        return (f32(2, 4), f32(2, 5, 3), f32(4, 3)), {}
    if name == "additive_scores":
        return (f32(2, 3), f32(2, 5, 4), f32(7, 6), f32(6)), {}
    mask = r.random(size=(2, 1, 4, 5)) > 0.3
    mask[..., 0] = True
    mask[0, 0, 1, :] = False  # a fully masked row
    return (f32(2, 3, 4, 8), f32(2, 3, 5, 8), f32(2, 3, 5, 2)), {"mask": mask}


def _compare(actual, expected, tensor):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _compare(a, e, tensor)
        return
    if tensor:
        assert ops.is_tensor(actual), type(actual)
        actual = ops.convert_to_numpy(actual)
    else:
        assert isinstance(actual, np.ndarray), type(actual)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.numerics
@pytest.mark.parametrize("name", EXERCISES)
@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "tensor"])
def test_stand_in_matches_reference(name, tensor):
    function = _stand_in(name)
    args, kwargs = _inputs(name, np.random.default_rng(len(name)))
    expected = getattr(reference, name)(*args, **kwargs)
    if tensor:
        args = tuple(ops.convert_to_tensor(a) for a in args)
        kwargs = {k: ops.convert_to_tensor(v) for k, v in kwargs.items()}
    _compare(function(*args, **kwargs), expected, tensor)


@pytest.mark.numerics
def test_stand_in_softmax_fully_masked_row_is_finite():
    softmax = _stand_in("softmax")
    x = np.array([[-np.inf, -np.inf], [1000.0, 1000.0]], dtype="float32")
    for value in (x, ops.convert_to_tensor(x)):
        weights = np.asarray(keras.ops.convert_to_numpy(softmax(value)))
        assert np.all(np.isfinite(weights))
        np.testing.assert_allclose(weights[1], [0.5, 0.5])


def test_stand_in_keeps_float32():
    softmax = _stand_in("softmax")
    assert softmax(np.zeros(3, dtype="float32")).dtype == np.float32
