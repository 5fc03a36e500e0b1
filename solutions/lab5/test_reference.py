"""Tests of the lab 5 references (autograder/references/lab5.py).

The float64 forward passes are checked against layers built from Keras parts
(the stand-ins, which are also what the grader puts in place of a student's
Encoder and Decoder) with random weights; the weight counts against Keras's
own count; the decoding references against hand-computed answers on the
hand-set fixtures; the loss against Keras's cross-entropy.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
from keras import ops

from autograder.labs import LABS
from autograder.references import lab5 as reference
from autograder.testkernel import standins


def _scope(source: str) -> dict:
    scope: dict = {}
    exec(compile(source, "<test>", "exec"), scope)
    return scope


SOURCES = standins.sources(LABS["lab5"].folder)
ENCODER = _scope(SOURCES["Encoder"])
DECODER = _scope(SOURCES["Decoder"])
SET_WEIGHTS = _scope(reference.SET_WEIGHTS_SOURCE)["set_weights_by_sublayer"]


class TinyTransformer(keras.Model):
    """The stand-ins assembled the lab's way (encoder, decoder, final_layer)."""

    def __init__(self, num_layers, d_model, num_heads, dff, input_vocab_size,
                 target_vocab_size, final=keras.layers.Dense):
        super().__init__()
        self.encoder = ENCODER["Encoder"](num_layers, d_model, num_heads, dff, input_vocab_size)
        self.decoder = DECODER["Decoder"](num_layers, d_model, num_heads, dff, target_vocab_size)
        self.final_layer = final(target_vocab_size)

    def call(self, inputs, training=None):
        context_ids, target_ids = inputs
        context = self.encoder(context_ids, training=training)
        x = self.decoder(target_ids, context, context_padding_mask=ops.not_equal(context_ids, 0),
                         training=training)
        return self.final_layer(x)


def _randomize(layer, seed):
    generator = np.random.default_rng(seed)
    layer.set_weights([(generator.normal(size=w.shape) / math.sqrt(w.shape[0]) if w.ndim > 1
                        else 0.5 + 0.3 * generator.normal(size=w.shape)).astype("float32")
                       for w in layer.get_weights()])


def _give(layer, kind, seed, **arguments):
    """The grader's random weights for ``kind`` set in ``layer`` (as the hidden
    tests do); returns them."""
    parameters = reference.random_parameters(np.random.default_rng(seed),
                                             reference.parameter_shapes(kind, **arguments))
    assert SET_WEIGHTS(layer, kind, parameters) == ""
    return parameters


def _padded_ids(generator, vocabulary, lengths, width):
    ids = generator.integers(1, vocabulary, size=(len(lengths), width))
    for row, length in enumerate(lengths):
        ids[row, length:] = 0
    return ids


# --- the lecture's numbers and the building blocks ------------------------------


def test_positional_table_of_the_lecture():
    table = reference.positional_encoding(3, 6)
    expected = [[0, 1, 0, 1, 0, 1], [0.84, 0.54, 0.05, 1.0, 0.0, 1.0],
                [0.91, -0.42, 0.09, 1.0, 0.0, 1.0]]
    np.testing.assert_allclose(table, expected, atol=0.01)


@pytest.mark.numerics
def test_attention_reference_matches_keras_multi_head_attention():
    generator = np.random.default_rng(0)
    layer = keras.layers.MultiHeadAttention(num_heads=3, key_dim=4)
    query = generator.normal(size=(2, 5, 12)).astype("float32")
    value = generator.normal(size=(2, 7, 12)).astype("float32")
    mask = generator.random(size=(2, 5, 7)) < 0.7
    mask[..., 0] = True
    layer(query, value)
    _randomize(layer, 1)
    output, scores = layer(query, value, attention_mask=mask, return_attention_scores=True)
    expected_output, expected_scores = reference.multi_head_attention(
        layer.get_weights(), query, value, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected_output, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(scores), expected_scores, rtol=1e-4,
                               atol=1e-6)


@pytest.mark.numerics
def test_layer_norm_reference_matches_keras():
    layer = keras.layers.LayerNormalization(epsilon=1e-6)
    x = np.random.default_rng(2).normal(size=(3, 4, 8)).astype("float32")
    layer(x)
    _randomize(layer, 3)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x)),
                               reference.layer_norm(x, *layer.get_weights()), rtol=1e-4,
                               atol=1e-5)


# --- weight counts ------------------------------------------------------------------


@pytest.mark.parametrize("d_model,num_heads", [(16, 4), (12, 3), (6, 2)])
def test_mha_count_matches_keras(d_model, num_heads):
    layer = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=d_model // num_heads)
    layer(np.zeros((1, 2, d_model), "float32"), np.zeros((1, 3, d_model), "float32"))
    assert layer.count_params() == reference.mha_parameter_count(d_model, num_heads,
                                                                 d_model // num_heads)


@pytest.mark.parametrize("num_layers,d_model,num_heads,dff,vocab_size",
                         [(2, 16, 4, 24, 13), (1, 12, 3, 20, 9), (2, 64, 4, 128, 59)])
def test_counts_match_keras_built_encoder_decoder_and_transformer(
        num_layers, d_model, num_heads, dff, vocab_size):
    encoder = ENCODER["Encoder"](num_layers, d_model, num_heads, dff, vocab_size)
    encoder(np.array([[1, 2, 0]]))
    assert encoder.count_params() == reference.encoder_parameter_count(
        num_layers, d_model, num_heads, dff, vocab_size)
    decoder = DECODER["Decoder"](num_layers, d_model, num_heads, dff, vocab_size)
    decoder(np.array([[1, 2]]), np.zeros((1, 3, d_model), "float32"))
    assert decoder.count_params() == reference.decoder_parameter_count(
        num_layers, d_model, num_heads, dff, vocab_size)
    model = TinyTransformer(num_layers, d_model, num_heads, dff, vocab_size, 14)
    model((np.array([[1, 2, 0]]), np.array([[1, 2]])))
    assert model.count_params() == reference.transformer_parameter_count(
        num_layers, d_model, num_heads, dff, vocab_size, 14)


def test_the_date_translator_has_173006_weights():
    # 2 layers, d_model 64, 4 heads, dff 128, vocabularies 59 and 14 (the notebook says so).
    assert reference.transformer_parameter_count(2, 64, 4, 128, 59, 14) == 173006


# --- forward passes against Keras-built layers -----------------------------------------


@pytest.mark.numerics
def test_encoder_reference_matches_the_keras_built_encoder():
    generator = np.random.default_rng(4)
    encoder = ENCODER["Encoder"](2, 16, 4, 24, 13, max_length=40)
    ids = _padded_ids(generator, 13, [7, 4, 1], 7)
    encoder(ids)
    parameters = _give(encoder, "encoder", 5, num_layers=2, d_model=16, num_heads=4, dff=24,
                       vocab_size=13)
    output = ops.convert_to_numpy(encoder(ids, training=False))
    expected = reference.encoder_forward(parameters, ids)
    real = ids != 0
    np.testing.assert_allclose(output[real], expected[real], rtol=1e-4, atol=1e-5)


@pytest.mark.numerics
def test_decoder_reference_matches_the_keras_built_decoder():
    generator = np.random.default_rng(6)
    decoder = DECODER["Decoder"](2, 16, 4, 24, 11, max_length=40)
    ids = _padded_ids(generator, 11, [6, 3, 1], 6)
    context = generator.normal(size=(3, 5, 16)).astype("float32")
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    decoder(ids, context, context_padding_mask=mask)
    parameters = _give(decoder, "decoder", 7, num_layers=2, d_model=16, num_heads=4, dff=24,
                       vocab_size=11)
    real = ids != 0
    for context_mask in (mask, None):
        output = ops.convert_to_numpy(decoder(ids, context, context_padding_mask=context_mask,
                                              training=False))
        expected, scores = reference.decoder_forward(parameters, ids, context, context_mask)
        np.testing.assert_allclose(output[real], expected[real], rtol=1e-4, atol=1e-5)
        got = ops.convert_to_numpy(decoder.last_attention_scores).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(got[real], scores.transpose(0, 2, 1, 3)[real], rtol=1e-4,
                                   atol=1e-6)
        if context_mask is not None:  # padded context tokens get no weight
            assert np.all(scores[1, :, :, 3:] == 0) and np.all(scores[2, :, :, 1:] == 0)


@pytest.mark.numerics
def test_transformer_reference_matches_the_keras_built_model():
    generator = np.random.default_rng(8)
    model = TinyTransformer(1, 16, 2, 24, 13, 9)
    context_ids = _padded_ids(generator, 13, [8, 5, 2], 8)
    target_ids = _padded_ids(generator, 9, [6, 6, 3], 6)
    model((context_ids, target_ids))
    parameters = _give(model, "transformer", 9, num_layers=1, d_model=16, num_heads=2, dff=24,
                       input_vocab_size=13, target_vocab_size=9)
    logits = ops.convert_to_numpy(model((context_ids, target_ids), training=False))
    expected = reference.transformer_forward(parameters, context_ids, target_ids)
    real = target_ids != 0
    np.testing.assert_allclose(logits[real], expected[real], rtol=1e-4, atol=1e-5)


def test_reference_ignores_padding_and_the_future():
    generator = np.random.default_rng(10)
    model = TinyTransformer(1, 8, 2, 12, 10, 7)
    model((np.array([[1, 2]]), np.array([[1, 2]])))
    parameters = _give(model, "transformer", 11, num_layers=1, d_model=8, num_heads=2, dff=12,
                       input_vocab_size=10, target_vocab_size=7)
    context_ids = _padded_ids(generator, 10, [5, 2], 6)
    target_ids = _padded_ids(generator, 7, [5, 5], 5)
    logits = reference.transformer_forward(parameters, context_ids, target_ids)
    longer = reference.transformer_forward(parameters, np.pad(context_ids, ((0, 0), (0, 4))),
                                           target_ids)
    np.testing.assert_allclose(longer, logits, rtol=1e-12)
    changed = target_ids.copy()
    changed[:, 3:] = 1
    later = reference.transformer_forward(parameters, context_ids, changed)
    np.testing.assert_allclose(later[:, :3], logits[:, :3], rtol=1e-12)
    assert not np.allclose(later[:, 3:], logits[:, 3:])


def test_set_weights_source_finds_layers_by_structure_not_by_name():
    encoder = ENCODER["Encoder"](2, 8, 2, 12, 10)
    encoder(np.array([[1, 2]]))
    # Rename the attributes: the embedding and the layers are found anyway.
    encoder.token_layer, encoder.stack = encoder.pos_embedding, encoder.enc_layers
    parameters = _give(encoder, "encoder", 13, num_layers=2, d_model=8, num_heads=2, dff=12,
                       vocab_size=10)
    np.testing.assert_array_equal(encoder.token_layer.token_embedding.get_weights()[0],
                                  parameters["embedding"])
    np.testing.assert_array_equal(encoder.stack[1].ffn.dense2.get_weights()[1],
                                  parameters["blocks"][1]["dense2"][1])
    decoder_weights = reference.random_parameters(np.random.default_rng(14),
                                                  reference.parameter_shapes("decoder", 2, 8, 2,
                                                                             12, 10))
    assert "0 DecoderLayer sublayer(s), expected num_layers=2" in \
        SET_WEIGHTS(encoder, "decoder", decoder_weights)


def test_set_weights_source_says_what_does_not_fit():
    """A stack of the wrong size, or layers built with other arguments, are
    named (the student's layer, not the grader's weights, is at fault)."""
    encoder = ENCODER["Encoder"](1, 8, 2, 12, 10)
    encoder(np.array([[1, 2]]))
    shapes = reference.parameter_shapes("encoder", 2, 8, 2, 12, 10)
    problem = SET_WEIGHTS(encoder, "encoder",
                          reference.random_parameters(np.random.default_rng(15), shapes))
    assert "has 1 EncoderLayer sublayer(s), expected num_layers=2" in problem
    shapes = reference.parameter_shapes("encoder", 1, 8, 2, 16, 10)   # another dff
    problem = SET_WEIGHTS(encoder, "encoder",
                          reference.random_parameters(np.random.default_rng(16), shapes))
    assert "EncoderLayer 0: ffn.dense1 does not take weights of the shapes [(8, 16), (16,)]" \
        in problem


@pytest.mark.parametrize("num_layers,d_model,num_heads,dff,vocab_size",
                         [(2, 16, 4, 24, 13), (1, 12, 3, 20, 9)])
def test_the_grader_weights_are_as_many_as_the_counts(num_layers, d_model, num_heads, dff,
                                                      vocab_size):
    def count(shapes):
        if isinstance(shapes, dict):
            return sum(count(value) for value in shapes.values())
        if isinstance(shapes, list):
            return sum(count(value) for value in shapes)
        return math.prod(shapes)

    arguments = (num_layers, d_model, num_heads, dff)
    assert count(reference.parameter_shapes("encoder", *arguments, vocab_size)) == \
        reference.encoder_parameter_count(*arguments, vocab_size)
    assert count(reference.parameter_shapes("decoder", *arguments, vocab_size)) == \
        reference.decoder_parameter_count(*arguments, vocab_size)
    assert count(reference.parameter_shapes("transformer", *arguments, input_vocab_size=vocab_size,
                                            target_vocab_size=7)) == \
        reference.transformer_parameter_count(*arguments, vocab_size, 7)


def test_a_layer_that_misreports_its_weights_does_not_move_the_reference():
    """The reference comes from the weights the grader set: a final layer that
    doubles its logits and reports doubled weights disagrees with it."""

    class LyingDense(keras.layers.Dense):
        def call(self, inputs):
            return 2.0 * super().call(inputs)

        def get_weights(self):
            return [2.0 * w for w in super().get_weights()]

    model = TinyTransformer(1, 8, 2, 12, 10, 7, final=LyingDense)
    ids = (np.array([[1, 2, 3]]), np.array([[1, 2]]))
    model(ids)
    parameters = _give(model, "transformer", 17, num_layers=1, d_model=8, num_heads=2, dff=12,
                       input_vocab_size=10, target_vocab_size=7)
    logits = ops.convert_to_numpy(model(ids, training=False))
    expected = reference.transformer_forward(parameters, *ids)
    np.testing.assert_allclose(logits, 2 * expected, rtol=1e-4, atol=1e-5)
    assert not np.allclose(logits, expected, rtol=1e-3, atol=1e-3)


# --- loss and accuracy -------------------------------------------------------------------


@pytest.mark.numerics
def test_masked_loss_of_hand_examples_and_keras():
    y_true = np.array([[3, 0]])
    y_pred = np.zeros((1, 2, 4))
    y_pred[0, 1] = [50.0, -50.0, 3.0, 0.0]
    assert reference.masked_loss(y_true, y_pred) == pytest.approx(math.log(4.0))
    generator = np.random.default_rng(12)
    y_true = _padded_ids(generator, 7, [9, 5, 1, 7], 9)
    y_pred = (2 * generator.normal(size=(4, 9, 7))).astype("float32")
    per_token = ops.convert_to_numpy(keras.losses.sparse_categorical_crossentropy(
        y_true, y_pred, from_logits=True))
    real = y_true != 0
    assert reference.masked_loss(y_true, y_pred) == pytest.approx(
        per_token[real].mean(), rel=1e-5)
    np.testing.assert_allclose(reference.per_token_cross_entropy(y_true, y_pred), per_token,
                               rtol=1e-5)


def test_masked_accuracy_counts_real_tokens_only():
    y_true = np.array([[1, 2, 0, 0]])
    y_pred = np.eye(4)[[[1, 3, 0, 0]]]
    assert reference.masked_accuracy(y_true, y_pred) == 0.5


def test_temperature_probabilities_limits():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    np.testing.assert_allclose(reference.temperature_probabilities(logits, 1.0),
                               np.exp(logits) / np.exp(logits).sum())
    np.testing.assert_allclose(reference.temperature_probabilities(logits, 1e-4),
                               [1, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(reference.temperature_probabilities(logits, 1e6),
                               np.full(4, 0.25), atol=1e-5)


# --- decoding fixtures --------------------------------------------------------------------


FIXTURES = reference.decoding_models()
CONTEXT = np.array([[3, 4, 5, 0]])


def test_greedy_misses_the_best_sequence_of_the_hand_set_tree():
    model = FIXTURES["make_model"]("greedy_misses")
    greedy = reference.greedy_decode(model, CONTEXT, 4, 1, 2)[0].tolist()
    assert greedy == [3, 3, 2]  # a, a, end: 0.5 * 0.35 * 0.5
    assert reference.sequence_log_probability(model, CONTEXT[0], greedy, 1) == pytest.approx(
        math.log(0.5 * 0.35 * 0.5), abs=2e-3)
    best, score = reference.best_sequence(model, CONTEXT[0], 4, 1, 2, [3, 4, 5, 2])
    assert best == [4, 2] and score == pytest.approx(math.log(0.4 * 0.9), abs=2e-3)
    for width in (2, 3):
        assert reference.beam_search(model, CONTEXT, width, 4, 1, 2).tolist() == [4, 2]
    assert reference.beam_search(model, CONTEXT, 1, 4, 1, 2).tolist() == greedy


def test_other_ids_move_the_same_tree():
    model = FIXTURES["make_model"]("greedy_misses", start_id=4, end_id=3,
                                   ids={"a": 5, "b": 2, "c": 1})
    assert reference.greedy_decode(model, CONTEXT, 4, 4, 3)[0].tolist() == [5, 5, 3]
    assert reference.beam_search(model, CONTEXT, 2, 4, 4, 3).tolist() == [2, 3]


def _beam_scored_by_last_step(model, context_ids, beam_width, max_length, start_id, end_id):
    """The sample mistake: a candidate's score is its last token's log-probability."""
    beams = [(0.0, [start_id])]
    for _ in range(max_length):
        if all(tokens[-1] == end_id for _, tokens in beams):
            break
        candidates = []
        for score, tokens in beams:
            if tokens[-1] == end_id:
                candidates.append((score, tokens))
                continue
            z = reference._log_softmax(reference._next_logits(model, context_ids[0], tokens))
            candidates += [(z[token], tokens + [token]) for token in range(len(z))]
        beams = sorted(candidates, key=lambda c: c[0], reverse=True)[:beam_width]
    return beams[0][1][1:]


def test_the_total_matters_tree_catches_a_beam_scored_by_the_last_step():
    model = FIXTURES["make_model"]("total_matters")
    best, _ = reference.best_sequence(model, CONTEXT[0], 4, 1, 2, [3, 4, 5, 2])
    assert best == [3, 4, 2]
    assert reference.beam_search(model, CONTEXT, 2, 4, 1, 2).tolist() == best
    assert reference.greedy_decode(model, CONTEXT, 4, 1, 2)[0].tolist() == best
    assert _beam_scored_by_last_step(model, CONTEXT, 2, 4, 1, 2) == [4, 2]


def _beam(model, beam_width, max_length, score_of, pick=lambda score, tokens: score):
    """A beam whose finished beams stay in it; ``score_of(log_p)`` is what one step
    adds to a beam's score and ``pick`` ranks the final beams."""
    beams = [(0.0, [1])]
    for _ in range(max_length):
        if all(tokens[-1] == 2 for _, tokens in beams):
            break
        candidates = []
        for score, tokens in beams:
            if tokens[-1] == 2:
                candidates.append((score, tokens))
                continue
            logits = reference._next_logits(model, CONTEXT[0], tokens)
            added = score_of(logits)
            candidates += [(score + added[t], tokens + [t]) for t in range(len(added))]
        beams = sorted(candidates, key=lambda c: c[0], reverse=True)[:beam_width]
    return max(beams, key=lambda beam: pick(*beam))[1][1:]


def test_the_short_wins_tree_catches_length_normalisation_and_summed_probabilities():
    model = FIXTURES["make_model"]("short_wins")
    best, score = reference.best_sequence(model, CONTEXT[0], 4, 1, 2, [3, 4, 5, 2])
    assert best == [3, 2] and score == pytest.approx(math.log(0.62 * 0.6), abs=2e-3)
    for width in (2, 3):
        assert reference.beam_search(model, CONTEXT, width, 4, 1, 2).tolist() == best
        total = _beam(model, width, 4, reference._log_softmax)
        assert total == best
        averaged = _beam(model, width, 4, reference._log_softmax,
                         pick=lambda score, tokens: score / (len(tokens) - 1))
        assert averaged == [4, 4, 2]
        summed = _beam(model, width, 4, lambda z: np.exp(reference._log_softmax(z)))
        assert summed == [4, 4, 2]


def test_offsets_shift_the_logits_but_not_the_probabilities():
    plain = FIXTURES["make_model"]("greedy_misses")
    shifted = FIXTURES["make_model"]("greedy_misses",
                                     offsets={p: 3.0 for p in ("a", "aa", "ab", "ac")})
    for prefix in [(1,), (1, 3), (1, 3, 3), (1, 4)]:
        np.testing.assert_allclose(reference._log_softmax(shifted._logits((3, 4, 5), prefix)),
                                   reference._log_softmax(plain._logits((3, 4, 5), prefix)),
                                   atol=1e-5)
    assert reference.beam_search(shifted, CONTEXT, 2, 4, 1, 2).tolist() == [4, 2]
    assert _beam(shifted, 2, 4, lambda z: z) != [4, 2]  # raw logits summed


@pytest.mark.parametrize("seed", range(6))
def test_table_models_have_clear_winners_and_width_one_is_greedy(seed):
    model = FIXTURES["make_model"]("table", seed=seed)
    generator = np.random.default_rng(seed)
    contexts = generator.integers(3, 7, size=(4, 5))
    lengths = {model.length(tuple(row)) for row in contexts.tolist()}
    assert lengths <= set(range(2, 9))
    greedy = reference.greedy_decode(model, contexts, 6, 1, 2)
    for row, context in zip(greedy, contexts):
        beam = reference.beam_search(model, context[None], 1, 6, 1, 2).tolist()
        assert beam == [int(t) for t in row if t != 0]
        prefix = [1]
        for token in beam:
            z = np.sort(reference._next_logits(model, context, prefix))
            assert z[-1] - z[-2] >= 0.3 - 1e-6
            prefix.append(token)


def test_fixture_call_is_causal_and_matches_its_table():
    model = FIXTURES["make_model"]("table", seed=1)
    context = np.array([[3, 4, 0, 0], [5, 6, 6, 0]])
    target = np.array([[1, 3, 4, 5], [1, 6, 0, 0]])
    logits = ops.convert_to_numpy(model((context, target), training=False))
    assert logits.shape == (2, 4, 7)
    np.testing.assert_array_equal(logits[0, 2], model._logits((3, 4), (1, 3, 4)))
    shorter = ops.convert_to_numpy(model((context, target[:, :2]), training=False))
    np.testing.assert_array_equal(shorter, logits[:, :2])
    with pytest.raises(TypeError, match="one tuple"):
        model(context)


def test_greedy_stand_in_agrees_with_the_reference():
    greedy = standins.define(LABS["lab5"].folder, "greedy_decode")
    model = FIXTURES["make_model"]("table", seed=3)
    contexts = np.random.default_rng(3).integers(3, 7, size=(6, 4))
    got = reference.normalize_greedy(greedy(model, contexts, 6, 1, 2), 2, 6, "stand-in")
    expected = reference.normalize_greedy(reference.greedy_decode(model, contexts, 6, 1, 2), 2,
                                          6, "reference")
    assert got == expected


def test_normalize_greedy_explains_the_common_mistakes():
    rows = np.array([[3, 2, 0], [3, 4, 2]])
    assert reference.normalize_greedy(rows, 2, 3, "x") == [[3, 2], [3, 4, 2]]
    with pytest.raises(AssertionError, match="goes on after the end id"):
        reference.normalize_greedy(np.array([[3, 2, 4]]), 2, 3, "x")
    with pytest.raises(AssertionError, match="starts with the start id"):
        reference.normalize_greedy(np.array([[1, 3, 2]]), 2, 3, "x", start_id=1)
    with pytest.raises(AssertionError, match="more than max_length"):
        reference.normalize_greedy(np.array([[3, 3, 3, 3]]), 2, 3, "x")



def _beam_aside(model, beam_width, max_length, pick=lambda score, tokens: score,
                stop="best", keep_finished=True, prefer_finished=False, start_id=1, end_id=2):
    """The solution's bookkeeping (finished beams set aside, the search stops when the
    best finished one beats the best open one) with one rule changed: ``pick`` ranks
    the final sentences; ``stop`` compares with the "best" or "worst" open beam, or
    stops at the "first" finished one; ``keep_finished=False`` drops finished beams;
    ``prefer_finished`` returns a finished sentence whenever there is one."""
    beams, finished = [(0.0, [start_id])], []
    for _ in range(max_length):
        candidates = []
        for score, tokens in beams:
            z = reference._log_softmax(reference._next_logits(model, CONTEXT[0], tokens))
            candidates += [(score + z[t], tokens + [t]) for t in range(len(z))]
        candidates.sort(key=lambda c: c[0], reverse=True)
        top = candidates[:beam_width]
        if keep_finished:
            finished += [c for c in top if c[1][-1] == end_id]
        beams = [c for c in top if c[1][-1] != end_id]
        if not beams:
            break
        if finished and (stop == "first" or max(s for s, _ in finished) >= (
                beams[0][0] if stop == "best" else beams[-1][0])):
            break
    pool = finished if (prefer_finished and finished) else finished + beams
    return max(pool, key=lambda beam: pick(*beam))[1][1:]


def _average(score, tokens):
    return score / (len(tokens) - 1)


def test_short_wins_late_catches_the_average_however_the_search_stops():
    # short_wins stops at step 2 (the short answer is already ahead of every open
    # beam): an average-ranking search that stops by the total returns the right
    # answer there (the 3/3); short_wins_late does not stop so early.
    early = FIXTURES["make_model"]("short_wins")
    assert _beam_aside(early, 2, 4, pick=_average) == [3, 2]
    model = FIXTURES["make_model"]("short_wins_late")
    best, score = reference.best_sequence(model, CONTEXT[0], 4, 1, 2, [3, 4, 5, 2])
    assert best == [3, 2] and score == pytest.approx(math.log(0.5 * 0.52), abs=2e-3)
    for width in (2, 3):
        assert reference.beam_search(model, CONTEXT, width, 4, 1, 2).tolist() == best
        assert _beam_aside(model, width, 4) == best
        assert _beam_aside(model, width, 4, pick=_average) == [4, 4, 2]
        assert _beam(model, width, 4, reference._log_softmax, pick=_average) == [4, 4, 2]


def test_the_kept_tree_needs_finished_beams_kept_and_never_extended():
    for options, start_id, end_id in [({}, 1, 2),
                                      ({"start_id": 4, "end_id": 3,
                                        "ids": {"a": 5, "b": 2, "c": 1}}, 4, 3)]:
        model = FIXTURES["make_model"]("kept", **options)
        tokens = [model.ids[s] for s in ("a", "b", "c", "$")]
        best, _ = reference.best_sequence(model, CONTEXT[0], 4, start_id, end_id, tokens)
        assert best == [model.ids["a"], end_id]
        for width in (2, 3):
            assert reference.beam_search(model, CONTEXT, width, 4, start_id, end_id).tolist() \
                == best
            assert _beam_aside(model, width, 4, start_id=start_id, end_id=end_id) == best
            assert _beam_aside(model, width, 4, keep_finished=False, start_id=start_id,
                               end_id=end_id) != best


def test_the_goes_on_tree_needs_the_search_to_go_on():
    model = FIXTURES["make_model"]("goes_on")
    best, score = reference.best_sequence(model, CONTEXT[0], 4, 1, 2, [3, 4, 5, 2])
    assert best == [4, 4, 2] and score == pytest.approx(math.log(0.45 * 0.9 * 0.9), abs=2e-3)
    assert reference.greedy_decode(model, CONTEXT, 4, 1, 2)[0].tolist() == [3, 2]
    for width in (2, 3):
        assert reference.beam_search(model, CONTEXT, width, 4, 1, 2).tolist() == best
        assert _beam_aside(model, width, 4) == best
        assert _beam_aside(model, width, 4, stop="first") != best
    assert _beam_aside(model, 3, 4, stop="worst") != best  # the third beam is below 3, end
    assert _beam_aside(model, 2, 4, stop="worst") == best  # with 2, the only open beam is "bb"


def _beam_holding(model, beam_width, max_length, start_id=1, end_id=2):
    """Issue 32's mistake: finished beams stay in the beam and hold their places for
    good, never competing for them; the open candidates get the places left."""
    held, beams = [], [(0.0, [start_id])]
    for _ in range(max_length):
        if not beams:
            break
        candidates = []
        for score, tokens in beams:
            z = reference._log_softmax(reference._next_logits(model, CONTEXT[0], tokens))
            candidates += [(score + z[t], tokens + [t]) for t in range(len(z))]
        candidates.sort(key=lambda c: c[0], reverse=True)
        top = candidates[:beam_width - len(held)]
        held += [c for c in top if c[1][-1] == end_id]
        beams = [c for c in top if c[1][-1] != end_id]
    return max(held + beams, key=lambda beam: beam[0])[1][1:]


def test_the_makes_room_tree_needs_finished_beams_to_hold_no_place():
    for options, start_id, end_id in [({}, 1, 2),
                                      ({"start_id": 4, "end_id": 3,
                                        "ids": {"a": 5, "b": 2, "c": 1}}, 4, 3)]:
        model = FIXTURES["make_model"]("makes_room", **options)
        a, b = model.ids["a"], model.ids["b"]
        tokens = [model.ids[s] for s in ("a", "b", "c", "$")]
        best, score = reference.best_sequence(model, CONTEXT[0], 4, start_id, end_id, tokens)
        assert best == [b, b, b, end_id]
        assert score == pytest.approx(math.log(0.45 * 0.9 * 0.45 * 0.99), abs=2e-3)
        # Set aside, refilled (the reference) or not (the sample): "a$" (0.15) makes
        # room at step 3 for "bba" (0.19) and "bbb" (0.18); competing among the beams too.
        assert reference.beam_search(model, CONTEXT, 2, 4, start_id, end_id).tolist() == best
        assert reference.beam_search(model, CONTEXT, 2, 4, start_id, end_id,
                                     reading="among_beams").tolist() == best
        assert _beam_aside(model, 2, 4, start_id=start_id, end_id=end_id) == best
        # Held for good, "a$" keeps "bbb" out, and every sentence after "bba" ends
        # below it.
        assert _beam_holding(model, 2, 4, start_id=start_id, end_id=end_id) == [a, end_id]
        assert reference.sequence_log_probability(model, CONTEXT[0], [b, b, a, end_id],
                                                  start_id) < math.log(0.15)


def test_finished_beams_that_hold_their_places_pass_the_other_trees():
    """Only the makes-room tree tells them apart: elsewhere a finished beam never
    stands in the way of beam_width better open ones."""
    for kind, width, max_length in [("kept", 2, 4), ("kept", 3, 4), ("goes_on", 2, 4),
                                    ("goes_on", 3, 4), ("max_length", 2, 2)]:
        model = FIXTURES["make_model"](kind)
        best, _ = reference.best_sequence(model, CONTEXT[0], max_length, 1, 2, [3, 4, 5, 2])
        assert _beam_holding(model, width, max_length) == best, (kind, width)


def test_the_evicted_tree_needs_finished_sentences_in_a_list_of_their_own():
    """Issue 47: kept among the beams, "$" (0.25) is pushed out at step 2 by "aa"
    (0.35) and "ab" (0.315), and "aa$" (0.21) is returned; kept in a list, "$"."""
    for options, start_id, end_id in [({}, 1, 2),
                                      ({"start_id": 4, "end_id": 3,
                                        "ids": {"a": 5, "b": 2, "c": 1}}, 4, 3)]:
        model = FIXTURES["make_model"]("evicted", **options)
        a = model.ids["a"]
        tokens = [model.ids[s] for s in ("a", "b", "c", "$")]
        for max_length in (3, 4):
            best, score = reference.best_sequence(model, CONTEXT[0], max_length, start_id,
                                                  end_id, tokens)
            assert best == [end_id] and score == pytest.approx(math.log(0.25), abs=2e-3)
            assert reference.beam_search(model, CONTEXT, 2, max_length, start_id,
                                         end_id).tolist() == best
            assert _beam_aside(model, 2, max_length, start_id=start_id, end_id=end_id) == best
            for reading in ("among_beams", "extended"):
                assert reference.beam_search(model, CONTEXT, 2, max_length, start_id, end_id,
                                             reading=reading).tolist() == [a, a, end_id]
        assert reference.sequence_log_probability(model, CONTEXT[0], [a, a, end_id],
                                                  start_id) == pytest.approx(
            math.log(0.7 * 0.5 * 0.6), abs=2e-3)


def test_end_stays_makes_extending_after_the_end_cost_nothing():
    """Issue 47: in the ranking test's models the end id is certain after the end, so
    keras-hub's BeamSampler (beams extended after end_id) ranks like the lab; with a
    real model's probabilities after the end, short_wins returns the longer "bb$"."""
    stays = FIXTURES["make_model"]("short_wins", end_stays=True)
    log_p = reference._log_softmax(stays._logits((3, 4, 5), (1, 3, 2)))
    assert log_p[2] == 0.0 and log_p[3] < -90
    assert stays._logits((3, 4, 5), (1, 3)).tolist() == \
        FIXTURES["make_model"]("short_wins")._logits((3, 4, 5), (1, 3)).tolist()
    for kind in ("greedy_misses", "total_matters", "short_wins", "short_wins_late"):
        model = FIXTURES["make_model"](kind, end_stays=True)
        best, _ = reference.best_sequence(model, CONTEXT[0], 4, 1, 2, [3, 4, 5, 2])
        for width in (1, 2, 3):
            for reading in ("list", "among_beams", "extended"):
                got = reference.beam_search(model, CONTEXT, width, 4, 1, 2, reading=reading)
                assert width == 1 or got.tolist() == best, (kind, width, reading)
    real = FIXTURES["make_model"]("short_wins")
    assert reference.beam_search(real, CONTEXT, 2, 4, 1, 2, reading="extended").tolist() == \
        [4, 4, 2]


def test_normalize_sequence_explains_a_start_id_and_a_long_answer():
    assert reference.normalize_sequence(np.array([[3, 2, 0]]), 4, "x", 1) == [3, 2]
    with pytest.raises(AssertionError, match="starts with the start id"):
        reference.normalize_sequence(np.array([1, 3, 2]), 4, "x", 1)
    with pytest.raises(AssertionError, match="more than max_length"):
        reference.normalize_sequence(np.array([3, 3, 3]), 2, "x")


def test_the_max_length_tree_returns_an_unfinished_best():
    model = FIXTURES["make_model"]("max_length")
    best, score = reference.best_sequence(model, CONTEXT[0], 2, 1, 2, [3, 4, 5, 2])
    assert best == [4, 4] and score == pytest.approx(math.log(0.7 * 0.9), abs=2e-3)
    for width in (2, 3):
        assert reference.beam_search(model, CONTEXT, width, 2, 1, 2).tolist() == best
        assert _beam_aside(model, width, 2) == best
        assert _beam_aside(model, width, 2, prefer_finished=True) == [3, 2]


# --- training mode: the fixed dropout pattern ------------------------------------------

TRAINING = _scope(reference.TRAINING_SOURCE)


def test_the_fixed_pattern_drops_a_quarter_and_keras_dropout_is_restored():
    keep = TRAINING["fixed_keep_mask"]((3, 5, 8))
    assert keep.shape == (3, 5, 8) and abs(keep.mean() - 0.75) < 0.02
    assert not np.all(keep[0] == keep[1]) and not np.all(keep[:, 0] == keep[:, 1])
    original = keras.layers.Dropout.call
    layer = keras.layers.Dropout(0.2)
    x = np.ones((2, 3, 4), "float32")
    out = TRAINING["call_in_training_mode"](layer, [x], {})
    np.testing.assert_allclose(out, reference.fixed_dropout(0.2)(x), rtol=1e-6)
    assert keras.layers.Dropout.call is original


def test_training_mode_references_match_the_keras_built_layers():
    generator = np.random.default_rng(12)
    rate = 0.2
    dropout = reference.fixed_dropout(rate)
    encoder = ENCODER["Encoder"](2, 16, 4, 24, 13, max_length=40, dropout_rate=rate)
    ids = generator.integers(1, 13, size=(2, 6))
    encoder(ids)
    parameters = _give(encoder, "encoder", 13, num_layers=2, d_model=16, num_heads=4, dff=24,
                       vocab_size=13)
    trained = TRAINING["call_in_training_mode"](encoder, [ids], {})
    np.testing.assert_allclose(trained, reference.encoder_forward(parameters, ids, dropout),
                               rtol=1e-4, atol=1e-5)
    for at in [(), ("embedding",), ("layers",)]:  # each site matters
        assert not np.allclose(trained, reference.encoder_forward(parameters, ids, dropout,
                                                                  at=at), atol=1e-3)
    decoder = DECODER["Decoder"](2, 16, 4, 24, 11, max_length=40, dropout_rate=rate)
    target = generator.integers(1, 9, size=(2, 5))
    context = generator.normal(size=(2, 6, 16)).astype("float32")
    decoder(target, context)
    parameters = _give(decoder, "decoder", 14, num_layers=2, d_model=16, num_heads=4, dff=24,
                       vocab_size=11)
    trained = TRAINING["call_in_training_mode"](decoder, [target, context], {})
    expected, _ = reference.decoder_forward(parameters, target, context, dropout=dropout)
    np.testing.assert_allclose(trained, expected, rtol=1e-4, atol=1e-5)
    model = TinyTransformer(1, 16, 2, 24, 13, 9)
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = rate
    model((ids, target))
    parameters = _give(model, "transformer", 15, num_layers=1, d_model=16, num_heads=2, dff=24,
                       input_vocab_size=13, target_vocab_size=9)
    trained = TRAINING["call_in_training_mode"](model, [(ids, target)], {})
    np.testing.assert_allclose(
        trained, reference.transformer_forward(parameters, ids, target, dropout=dropout),
        rtol=1e-4, atol=1e-5)
    for parts in [(), ("encoder",), ("decoder",)]:
        assert not np.allclose(trained, reference.transformer_forward(
            parameters, ids, target, dropout=dropout, parts=parts), atol=1e-3)


def test_check_config_accepts_a_full_config_and_names_what_is_missing():
    arguments = dict(num_layers=2, d_model=8, num_heads=2, dff=12, vocab_size=10,
                     max_length=30, dropout_rate=0.2)
    reference.check_config(ENCODER["Encoder"], arguments, "Encoder")

    class Forgetful(ENCODER["Encoder"]):
        def get_config(self):
            config = super().get_config()
            del config["max_length"]
            return config

    with pytest.raises(AssertionError, match="max_length"):
        reference.check_config(Forgetful, arguments, "Encoder")
