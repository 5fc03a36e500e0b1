"""Tests of the lab 4 references (autograder/references/lab4.py).

Mask helpers are checked against literal expected values (keras-hub's
compute_causal_mask tests are the model), the masked softmax against the
lecture's look-ahead table, and the float64 layer references against the same
layers built from Keras parts (MultiHeadAttention, Dense, LayerNormalization)
with the same weights copied in. Each stand-in must agree with its reference.
"""

import keras
import numpy as np
import pytest
from keras import ops

from autograder.labs import LABS
from autograder.references import lab4 as reference
from autograder.testkernel import standins


def _random_weights(r, d_model, num_heads, dff, paths):
    """Weights in the layouts of the Keras sublayers, for every path."""
    key_dim = d_model // num_heads
    shapes = {
        "attention": [(d_model, num_heads, key_dim), (num_heads, key_dim)] * 3
        + [(num_heads, key_dim, d_model), (d_model,)],
        "ffn.dense1": [(d_model, dff), (dff,)],
        "ffn.dense2": [(dff, d_model), (d_model,)],
        "norm": [(d_model,), (d_model,)],
    }
    weights = {}
    for path in paths:
        kind = "attention" if path.endswith("attention") else \
            "norm" if path.startswith("norm") else path
        arrays = [0.5 * r.normal(size=shape) for shape in shapes[kind]]
        if kind == "norm":
            arrays[0] = arrays[0] * 0.4 + 1.0
        weights[path] = [a.astype("float32") for a in arrays]
    return weights


# --- masks: literal values ------------------------------------------------------------


def test_causal_mask_literal_values():
    np.testing.assert_array_equal(reference.causal_mask(1), [[True]])
    np.testing.assert_array_equal(reference.causal_mask(3), [[True, False, False],
                                                             [True, True, False],
                                                             [True, True, True]])
    mask = reference.causal_mask(4)
    assert mask.dtype == bool and mask.shape == (4, 4)
    np.testing.assert_array_equal(mask, [[True, False, False, False],
                                         [True, True, False, False],
                                         [True, True, True, False],
                                         [True, True, True, True]])


def test_padding_mask_literal_values():
    mask = reference.padding_mask([[5, 8, 9, 0, 0], [6, 3, 0, 0, 0]])
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, [[True, True, True, False, False],
                                         [True, True, False, False, False]])
    # The lecture's vocabulary: <PAD> = 2, and <SOS> = 0 is a real token.
    np.testing.assert_array_equal(reference.padding_mask([[0, 6, 3], [0, 5, 2]], pad_id=2),
                                  [[True, True, True], [True, True, False]])


def test_combine_masks_literal_values():
    query = np.array([[True, True, False]])
    key = np.array([[True, False, True, True]])
    np.testing.assert_array_equal(reference.combine_masks(query, key),
                                  [[[True, False, True, True],
                                    [True, False, True, True],
                                    [False, False, False, False]]])
    target = np.array([[True, True, True, False]])
    np.testing.assert_array_equal(reference.combine_masks(target, target, causal=True),
                                  [[[True, False, False, False],
                                    [True, True, False, False],
                                    [True, True, True, False],
                                    [False, False, False, False]]])
    # One mask only: the other side allows everything (self-attention lengths).
    np.testing.assert_array_equal(reference.combine_masks(None, np.array([[True, True, False]])),
                                  [[[True, True, False]] * 3])
    np.testing.assert_array_equal(reference.combine_masks(np.array([[True, False]]), None),
                                  [[[True, True], [False, False]]])
    np.testing.assert_array_equal(
        reference.combine_masks(None, np.array([[True, True, False]]), causal=True),
        [[[True, False, False], [True, True, False], [True, True, False]]])
    with pytest.raises(ValueError):
        reference.combine_masks(None, None)


# --- masked softmax ---------------------------------------------------------------------


LECTURE_SCORES = np.array([[0.7, 0.1, 0.1, 0.1],
                           [0.1, 0.6, 0.2, 0.1],
                           [0.1, 0.3, 0.6, 0.1],
                           [0.1, 0.3, 0.3, 0.3]])


def test_look_ahead_rows_of_the_lecture():
    weights = reference.masked_softmax(LECTURE_SCORES, reference.causal_mask(4))
    np.testing.assert_allclose(weights, [[1.0, 0.0, 0.0, 0.0],
                                         [0.38, 0.62, 0.0, 0.0],
                                         [0.26, 0.32, 0.43, 0.0],
                                         [0.21, 0.26, 0.26, 0.26]], atol=0.01)
    assert np.all(weights[~reference.causal_mask(4)] == 0.0)
    # Same as -inf added above the diagonal, then a plain softmax.
    look_ahead = np.triu(np.full((4, 4), -np.inf), k=1)
    shifted = np.exp(LECTURE_SCORES + look_ahead)
    np.testing.assert_allclose(weights, shifted / shifted.sum(-1, keepdims=True), atol=1e-12)


def test_masked_softmax_properties():
    r = np.random.default_rng(0)
    scores = 4 * r.normal(size=(2, 3, 5, 6))
    mask = r.random(size=(2, 1, 1, 6)) < 0.6
    mask[..., 0] = True
    weights = reference.masked_softmax(scores, mask)
    allowed = np.broadcast_to(mask, scores.shape)
    assert weights.shape == scores.shape
    assert np.all(weights[~allowed] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-12)
    # A fully masked row is finite (all zeros).
    weights = reference.masked_softmax(np.array([[1.0, 2.0], [3.0, 4.0]]),
                                       np.array([[False, False], [True, True]]))
    assert np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[0], [0.0, 0.0])


# --- sublayers ------------------------------------------------------------------------------


def test_feed_forward_by_hand():
    dense1 = [np.eye(6, 24), np.zeros(24)]
    dense2 = [np.eye(24, 6), np.zeros(6)]
    x = np.array([[1.0, -1.0, 2.0, 0.5, -3.0, 0.0]])
    np.testing.assert_allclose(reference.feed_forward(x, dense1, dense2),
                               [[1.0, 0.0, 2.0, 0.5, 0.0, 0.0]])


def test_layer_norm_normalises():
    x = np.random.default_rng(1).normal(size=(3, 8)) * 5 + 2
    y = reference.layer_norm(x, np.ones(8), np.zeros(8))
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, atol=1e-5)


@pytest.mark.numerics
def test_multi_head_attention_matches_keras():
    r = np.random.default_rng(2)
    query = r.normal(size=(2, 4, 8)).astype("float32")
    value = r.normal(size=(2, 6, 8)).astype("float32")
    mask = np.ones((2, 1, 6), bool)
    mask[0, 0, 4:] = False
    layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    layer(query=query, value=value)
    weights = [(0.5 * r.normal(size=w.shape)).astype("float32") for w in layer.get_weights()]
    layer.set_weights(weights)
    output, scores = layer(query=query, value=value, attention_mask=mask,
                           return_attention_scores=True)
    expected_output, expected_scores = reference.multi_head_attention(query, value, weights,
                                                                      mask)
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected_output,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(scores), expected_scores,
                               rtol=1e-4, atol=1e-6)
    assert np.all(expected_scores[0, :, :, 4:] == 0.0)


# --- layers: the float64 references equal the layers built from Keras parts -------------


@pytest.mark.numerics
@pytest.mark.parametrize("d_model, num_heads, dff", [(8, 2, 16), (12, 3, 20)])
def test_encoder_layer_matches_keras_parts(d_model, num_heads, dff):
    r = np.random.default_rng(d_model)
    weights = _random_weights(r, d_model, num_heads, dff, reference.ENCODER_WEIGHTS)
    x = r.normal(size=(3, 5, d_model)).astype("float32")
    real = np.ones((3, 5), bool)
    real[0, 3:] = False
    real[1, 4:] = False
    for mask in (None, real):
        expected = reference.encoder_layer(x, weights, padding_mask=mask)
        built = reference.keras_encoder_layer(x, weights, padding_mask=mask,
                                              num_heads=num_heads)
        np.testing.assert_allclose(built, expected, rtol=1e-4, atol=2e-5)
    pre_norm = reference.encoder_layer(x, weights, pre_norm=True)
    assert not np.allclose(pre_norm, reference.encoder_layer(x, weights), atol=1e-3)


@pytest.mark.numerics
@pytest.mark.parametrize("d_model, num_heads, dff", [(8, 2, 16), (12, 3, 20)])
def test_decoder_layer_matches_keras_parts(d_model, num_heads, dff):
    r = np.random.default_rng(d_model + 1)
    weights = _random_weights(r, d_model, num_heads, dff, reference.DECODER_WEIGHTS)
    x = r.normal(size=(2, 4, d_model)).astype("float32")
    context = r.normal(size=(2, 6, d_model)).astype("float32")
    target_real = np.array([[False, True, True, True], [True, True, True, False]])
    source_real = np.array([[True, True, True, False, False, False], [True] * 6])
    for masks in ({}, dict(x_padding_mask=target_real, context_padding_mask=source_real)):
        expected, expected_scores = reference.decoder_layer(x, context, weights, **masks)
        built, scores = reference.keras_decoder_layer(x, context, weights, num_heads=num_heads,
                                                      **masks)
        rows = masks.get("x_padding_mask", np.ones((2, 4), bool))
        np.testing.assert_allclose(built[rows], expected[rows], rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(np.moveaxis(scores, 1, 2)[rows],
                                   np.moveaxis(expected_scores, 1, 2)[rows],
                                   rtol=1e-4, atol=1e-6)
    assert expected_scores.shape == (2, num_heads, 4, 6)
    assert np.all(expected_scores[0, :, :, 3:] == 0.0)


def test_encoder_reference_ignores_padded_positions():
    r = np.random.default_rng(5)
    weights = _random_weights(r, 8, 2, 16, reference.ENCODER_WEIGHTS)
    x = r.normal(size=(2, 5, 8))
    real = np.array([[True, True, True, False, False], [True] * 5])
    changed = x.copy()
    changed[~real] = 10 * r.normal(size=changed[~real].shape)
    np.testing.assert_allclose(reference.encoder_layer(changed, weights, padding_mask=real)[real],
                               reference.encoder_layer(x, weights, padding_mask=real)[real],
                               atol=1e-12)


def test_decoder_reference_is_causal_and_ignores_padding():
    r = np.random.default_rng(6)
    weights = _random_weights(r, 8, 2, 16, reference.DECODER_WEIGHTS)
    x, context = r.normal(size=(2, 5, 8)), r.normal(size=(2, 6, 8))
    output, _ = reference.decoder_layer(x, context, weights)
    for t in range(4):
        future = x.copy()
        future[:, t + 1:] = r.normal(size=future[:, t + 1:].shape)
        moved, _ = reference.decoder_layer(future, context, weights)
        np.testing.assert_allclose(moved[:, :t + 1], output[:, :t + 1], atol=1e-12)
        assert not np.allclose(moved[:, t + 1:], output[:, t + 1:])
    source_real = np.array([[True, True, False, False, False, False], [True] * 6])
    target_real = np.array([[False, False, True, True, True], [True] * 5])
    masks = dict(x_padding_mask=target_real, context_padding_mask=source_real)
    output, scores = reference.decoder_layer(x, context, weights, **masks)
    moved_context, moved_x = context.copy(), x.copy()
    moved_context[~source_real] = 10.0
    moved_x[~target_real] = -10.0
    for args in ((moved_x, context), (x, moved_context)):
        moved, _ = reference.decoder_layer(*args, weights, **masks)
        np.testing.assert_allclose(moved[target_real], output[target_real], atol=1e-12)
    np.testing.assert_allclose(np.moveaxis(scores, 1, 2)[target_real].sum(-1), 1.0)


def test_decoder_reference_diagnostics_are_other_layers():
    """pre_norm=True and diagonal=False (a look-ahead mask that hides j == i too) give
    known mistakes, still causal, that differ from the layer of the paper."""
    r = np.random.default_rng(7)
    weights = _random_weights(r, 8, 2, 16, reference.DECODER_WEIGHTS)
    x, context = r.normal(size=(2, 5, 8)), r.normal(size=(2, 6, 8))
    output, _ = reference.decoder_layer(x, context, weights)
    for mistake in (dict(pre_norm=True), dict(diagonal=False)):
        other, _ = reference.decoder_layer(x, context, weights, **mistake)
        assert not np.allclose(other[:, 1:], output[:, 1:]), mistake
        future = x.copy()
        future[:, 3:] = r.normal(size=future[:, 3:].shape)
        moved, _ = reference.decoder_layer(future, context, weights, **mistake)
        np.testing.assert_allclose(moved[:, :3], other[:, :3], atol=1e-12)


# --- stand-ins -------------------------------------------------------------------------------


def _stand_in(name):
    return standins.define(LABS["lab4"].folder, name)


def test_layers_get_the_stand_in_feed_forward():
    # (tests/labs/test_standins.py checks every lab's standins.toml against its exercises)
    calls = standins.calls(LABS["lab4"].folder)
    assert calls["masked_softmax"] == []
    assert "FeedForward" in calls["EncoderLayer"]
    assert "FeedForward" in calls["DecoderLayer"]


@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "tensor"])
def test_mask_stand_ins_match_references(tensor):
    convert = ops.convert_to_tensor if tensor else (lambda a: a)
    causal_mask = _stand_in("causal_mask")
    for length in (1, 4, 7):
        mask = ops.convert_to_numpy(causal_mask(length))
        assert mask.dtype == bool
        np.testing.assert_array_equal(mask, reference.causal_mask(length))
    ids = np.array([[0, 6, 3, 2, 2], [5, 8, 9, 1, 2]])
    padding_mask = _stand_in("padding_mask")
    for pad_id in (0, 2):
        mask = ops.convert_to_numpy(padding_mask(convert(ids), pad_id=pad_id))
        np.testing.assert_array_equal(mask, reference.padding_mask(ids, pad_id))
    combine_masks = _stand_in("combine_masks")
    r = np.random.default_rng(3)
    query, key = r.random((3, 4)) < 0.7, r.random((3, 6)) < 0.7
    np.testing.assert_array_equal(
        ops.convert_to_numpy(combine_masks(query_mask=convert(query), key_mask=convert(key))),
        reference.combine_masks(query, key))
    target = r.random((3, 5)) < 0.7
    for kwargs, expected in [
            (dict(query_mask=target, key_mask=target, causal=True),
             reference.combine_masks(target, target, causal=True)),
            (dict(key_mask=target), reference.combine_masks(None, target)),
            (dict(query_mask=target), reference.combine_masks(target, None)),
            (dict(key_mask=target, causal=True),
             reference.combine_masks(None, target, causal=True))]:
        kwargs = {k: convert(v) if k != "causal" else v for k, v in kwargs.items()}
        mask = ops.convert_to_numpy(combine_masks(**kwargs))
        assert mask.dtype == bool and mask.ndim == 3
        np.testing.assert_array_equal(np.broadcast_to(mask, expected.shape), expected)
    # key_mask only keeps a length-1 query axis, so it fits cross-attention.
    assert ops.convert_to_numpy(combine_masks(key_mask=convert(key))).shape == (3, 1, 6)


@pytest.mark.numerics
@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "tensor"])
def test_masked_softmax_stand_in_matches_reference(tensor):
    masked_softmax = _stand_in("masked_softmax")
    convert = ops.convert_to_tensor if tensor else (lambda a: a)
    r = np.random.default_rng(4)
    scores = (3 * r.normal(size=(2, 4, 5))).astype("float32")
    mask = r.random(size=(2, 4, 5)) < 0.6
    mask[..., 0] = True
    mask[1, 2] = False  # a fully masked row
    weights = ops.convert_to_numpy(masked_softmax(convert(scores), convert(mask)))
    assert np.all(np.isfinite(weights))
    assert np.all(weights[~mask] == 0.0)
    np.testing.assert_allclose(weights, reference.masked_softmax(scores, mask),
                               rtol=1e-5, atol=1e-6)
    lecture = ops.convert_to_numpy(masked_softmax(LECTURE_SCORES, reference.causal_mask(4)))
    np.testing.assert_allclose(lecture, reference.masked_softmax(LECTURE_SCORES,
                                                                 reference.causal_mask(4)),
                               atol=1e-6)


@pytest.mark.numerics
def test_feed_forward_stand_in_matches_reference():
    FeedForward = _stand_in("FeedForward")
    layer = FeedForward(d_model=6, dff=12, dropout_rate=0.5)
    r = np.random.default_rng(5)
    x = r.normal(size=(2, 5, 6)).astype("float32")
    layer(x)
    weights = reference.randomize_weights(layer, reference.FEED_FORWARD_WEIGHTS, r,
                                          "FeedForward", d_model=6, dff=12)
    expected = reference.feed_forward(x, weights["dense1"], weights["dense2"])
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x, training=False)), expected,
                               rtol=1e-4, atol=1e-5)
    trained = ops.convert_to_numpy(layer(x, training=True))
    assert np.all(np.isclose(trained, 0.0) | np.isclose(trained, 2 * expected, rtol=1e-4))
    clone = FeedForward.from_config(layer.get_config())
    assert (clone.d_model, clone.dff, clone.dropout_rate) == (6, 12, 0.5)
    assert reference.is_keras_layer(layer.dense1, "Dense")
    assert reference.is_keras_layer(layer.dropout, "Dropout")


@pytest.mark.numerics
def test_stand_in_feed_forward_inside_a_layer_built_from_keras_parts():
    """An encoder layer that uses the stand-in FeedForward equals the reference."""
    FeedForward = _stand_in("FeedForward")

    class Encoder(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.self_attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
            self.ffn = FeedForward(d_model=8, dff=16, dropout_rate=0.1)
            self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
            self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)

        def call(self, x, padding_mask=None, training=None):
            mask = None if padding_mask is None else padding_mask[:, None, :]
            x = self.norm1(x + self.self_attention(query=x, value=x, attention_mask=mask,
                                                   training=training))
            return self.norm2(x + self.ffn(x, training=training))

    layer = Encoder()
    r = np.random.default_rng(7)
    x = r.normal(size=(2, 5, 8)).astype("float32")
    real = np.array([[True, True, True, False, False], [True] * 5])
    layer(x)
    weights = reference.randomize_weights(layer, reference.ENCODER_WEIGHTS, r, "Encoder",
                                          d_model=8, num_heads=2, dff=16)
    np.testing.assert_array_equal(reference.read_weights(layer, ["norm1"])["norm1"][0],
                                  weights["norm1"][0])
    output = ops.convert_to_numpy(layer(x, padding_mask=real, training=False))
    expected = reference.encoder_layer(x, weights, padding_mask=real)
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=2e-5)
    assert reference.is_keras_layer(layer.self_attention, "MultiHeadAttention")
    assert not reference.is_keras_layer(layer.ffn, "MultiHeadAttention")


def test_the_grader_weights_have_the_curriculum_shapes_whatever_the_layer_says():
    """randomize_weights sets shapes from the curriculum: a feed-forward block
    built with other sizes, or without biases, is told so (its own report of
    its weights is never used)."""
    FeedForward = _stand_in("FeedForward")
    x = np.zeros((1, 2, 6), "float32")
    shapes = reference.weight_shapes(reference.ENCODER_WEIGHTS, 8, 16, 2)
    assert shapes["self_attention"] == [(8, 2, 4), (2, 4)] * 3 + [(2, 4, 8), (8,)]
    assert shapes["ffn.dense1"] == [(8, 16), (16,)] and shapes["norm2"] == [(8,), (8,)]

    class NoBias(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense1 = keras.layers.Dense(12, activation="relu", use_bias=False)
            self.dense2 = keras.layers.Dense(6, use_bias=False)

        def call(self, x):
            return self.dense2(self.dense1(x))

    for wrong in (FeedForward(d_model=6, dff=24), NoBias()):
        wrong(x)
        with pytest.raises(AssertionError, match=r"dense1 \[\(6, 12\), \(12,\)\]"):
            reference.randomize_weights(wrong, reference.FEED_FORWARD_WEIGHTS,
                                        np.random.default_rng(8), "FeedForward", d_model=6,
                                        dff=12)


def test_helpers_for_local_objects():
    assert reference.raised(lambda: int("x"))[0] == "ValueError"
    assert reference.raised(lambda: 1) == (None, "")
    assert reference.to_numpy(ops.ones((2,))).tolist() == [1.0, 1.0]
    assert ops.is_tensor(reference.tensor(np.ones(2), like=None))
