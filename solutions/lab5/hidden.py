"""lab5's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

from typing import Any

import numpy as np

from autograder.hidden import graded
from autograder.references import lab5 as reference
from autograder.testkernel.testing import (as_array, assert_close, assert_shape, assert_true, keep,
                                           kept, rng)


@graded("Encoder", points=1.5)
def test_Encoder(Encoder, namespace):
    """structure, weights and outputs with padding, training=False."""
    construct = reference.constructor(namespace)
    r = rng("Encoder")
    for num_layers, d_model, num_heads, dff, vocab_size in [(2, 16, 4, 24, 13),
                                                             (1, 12, 3, 20, 9)]:
        arguments = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                         vocab_size=vocab_size, max_length=40, dropout_rate=0.2)
        what = "Encoder(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
        ids = r.integers(1, vocab_size, size=(3, 7))
        for row, length in enumerate([7, 4, 1]):
            ids[row, length:] = 0
        real = ids != 0
        encoder = Encoder(**arguments)
        assert_shape(encoder(ids, training=False), (3, 7, d_model), f"{what} on ids (3, 7)")
        keep(namespace, "Encoder", arguments, encoder)  # test_Encoder__training takes it
        count = int(reference.to_numpy(reference.call_method(encoder, "count_params")))
        expected_count = reference.encoder_parameter_count(num_layers, d_model, num_heads,
                                                           dff, vocab_size)
        assert_true(count == expected_count,
                    f"{what}: {count} weights, expected {expected_count} (the embedding "
                    f"table and {num_layers} separate EncoderLayer(s); no other weights).")
        # The grader's weights, set sublayer by sublayer: the reference is computed
        # from them, never from what the layer reports about its weights.
        shapes = reference.parameter_shapes("encoder", **arguments)
        parameters = reference.random_parameters(r, shapes)
        reference.give_weights(construct, encoder, "encoder", parameters, what)
        output = as_array(encoder(ids, training=False), what)
        longer = np.pad(ids, ((0, 0), (0, 3)))
        padded = assert_shape(encoder(longer, training=False), (3, 10, d_model),
                              f"{what} on ids (3, 10)")
        assert_close(padded[:, :7][real], output[real],
                     f"{what}: three more padded columns change the outputs at real tokens; "
                     "pass padding_mask=(token_ids != 0) to every EncoderLayer, by keyword")
        expected = reference.encoder_forward(parameters, ids)
        assert_close(output[real], expected[real],
                     f"{what}: outputs at the real tokens (random weights, training=False)")


@graded("Encoder", points=0.5)
def test_Encoder__training(Encoder, namespace):
    """training mode, dropout after the embedding and inside every layer; none when `training`
    is left out.
    """
    construct = reference.constructor(namespace)
    r = rng("Encoder/training")
    arguments = {"num_layers": 2, "d_model": 16, "num_heads": 4, "dff": 24, "vocab_size": 13,
                 "max_length": 40, "dropout_rate": 0.2}
    what = "Encoder(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    ids = r.integers(1, 13, size=(2, 6))  # no padding: only dropout is tested here
    encoder = kept(namespace, "Encoder", arguments)  # test_Encoder's first one, built
    if encoder is None:
        encoder = Encoder(**arguments)
        encoder(ids, training=False)  # builds the weights
    # The grader's weights, set sublayer by sublayer: the reference is computed
    # from them, never from what the layer reports about its weights.
    shapes = reference.parameter_shapes("encoder", **arguments)
    parameters = reference.random_parameters(r, shapes)
    try:
        reference.give_weights(construct, encoder, "encoder", parameters, what)
        given = True
    except AssertionError:  # built otherwise: the main test's points lost
        given = False
    calm = as_array(encoder(ids, training=False), what)
    left_out = as_array(encoder(ids), what)
    assert_true(left_out.shape == calm.shape and np.allclose(left_out, calm, rtol=1e-5,
                                                             atol=1e-6),
                f"{what}: called without `training`, the output differs from "
                "training=False; a left-out training (None) means inference, no dropout.")
    # Where the values are wrong (the main test's points lost), dropout is judged
    # against the layer itself: it acts where the lab puts it.
    inference = reference.encoder_forward(parameters, ids)
    right = given and calm.shape == inference.shape and bool(
        np.allclose(calm, inference, rtol=1e-4, atol=1e-5))
    if not right:
        reference.assert_dropout_acts(construct, encoder, [ids], calm,
                                      reference.STACK_DROPOUT_SITES, what)
        return
    # Every keras.layers.Dropout drops a fixed pattern here instead of a random one.
    trained = as_array(construct(reference.TRAINING_SOURCE, "call_in_training_mode", encoder,
                                 [ids], {}), f"{what}, training=True")
    dropout = reference.fixed_dropout(arguments["dropout_rate"])
    expected = reference.encoder_forward(parameters, ids, dropout=dropout)
    if trained.shape == expected.shape and not np.allclose(trained, expected, rtol=1e-3,
                                                           atol=1e-4):
        for at, message in [
                ((), "training=True changed nothing: dropout must act when training"),
                (("layers",), "no dropout after the embedding: apply self.dropout(x, "
                              "training=training) to the embedded ids"),
                (("embedding",), "the layers did not train: call each one with "
                                 "training=training (or let Keras pass it down), never "
                                 "training=False")]:
            other = reference.encoder_forward(parameters, ids, dropout=dropout, at=at)
            assert_true(not np.allclose(trained, other, rtol=1e-3, atol=1e-4),
                        f"{what}, training=True: {message}.")
    assert_close(trained, expected,
                 f"{what}, training=True: outputs with dropout after the embedding and "
                 "inside every layer (a fixed dropout pattern replaces the random one)")


@graded("Encoder", points=0.5)
def test_Encoder__config(Encoder):
    """get_config() / from_config()."""
    arguments = {"num_layers": 3, "d_model": 12, "num_heads": 3, "dff": 20, "vocab_size": 9,
                 "max_length": 50, "dropout_rate": 0.15}
    what = "Encoder(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    reference.check_config(Encoder, arguments, what)


@graded("Decoder", points=1.5)
def test_Decoder(Decoder, namespace):
    """structure, weights, outputs and attention weights with and without the source padding
    mask, the look-ahead, training=False.
    """
    construct = reference.constructor(namespace)
    r = rng("Decoder")
    for num_layers, d_model, num_heads, dff, vocab_size in [(2, 16, 4, 24, 11),
                                                             (1, 12, 2, 20, 8)]:
        arguments = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                         vocab_size=vocab_size, max_length=40, dropout_rate=0.2)
        what = "Decoder(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
        ids = r.integers(1, vocab_size, size=(3, 6))
        for row, length in enumerate([6, 3, 1]):
            ids[row, length:] = 0
        real = ids != 0
        context = r.normal(size=(3, 5, d_model)).astype("float32")
        context_mask = np.ones((3, 5), dtype=bool)
        context_mask[1, 3:] = False
        context_mask[2, 1:] = False
        decoder = Decoder(**arguments)
        assert_shape(decoder(ids, context, context_padding_mask=context_mask, training=False),
                     (3, 6, d_model), f"{what} on ids (3, 6), context (3, 5, {d_model})")
        keep(namespace, "Decoder", arguments, decoder)  # test_Decoder__training takes it
        count = int(reference.to_numpy(reference.call_method(decoder, "count_params")))
        expected_count = reference.decoder_parameter_count(num_layers, d_model, num_heads,
                                                           dff, vocab_size)
        assert_true(count == expected_count,
                    f"{what}: {count} weights, expected {expected_count} (the embedding "
                    f"table and {num_layers} separate DecoderLayer(s); no other weights).")
        # The grader's weights, set sublayer by sublayer: the reference is computed
        # from them, never from what the layer reports about its weights.
        shapes = reference.parameter_shapes("decoder", **arguments)
        parameters = reference.random_parameters(r, shapes)
        reference.give_weights(construct, decoder, "decoder", parameters, what)
        outputs = []
        for mask, mask_text in [(context_mask, "a context padding mask"), (None, "no mask")]:
            call = f"{what} with {mask_text}"
            expected, expected_scores = reference.decoder_forward(parameters, ids, context, mask)
            output = as_array(decoder(ids, context, context_padding_mask=mask, training=False),
                              call)
            outputs.append(output)
            assert_close(output[real], expected[real],
                         f"{call}: outputs at the real target tokens (random weights)")
            scores = assert_shape(decoder.last_attention_scores, expected_scores.shape,
                                  f"{call}: last_attention_scores")
            assert_close(scores.transpose(0, 2, 1, 3)[real], expected_scores.transpose(0, 2, 1, 3)[real],
                         f"{call}: last_attention_scores (the LAST layer's cross-attention) "
                         "at the real target tokens")
        # The look-ahead: tokens after position 2 change nothing before them.
        changed = ids.copy()
        changed[0, 3:] = r.integers(1, vocab_size, size=3)
        again = as_array(decoder(changed, context, context_padding_mask=context_mask,
                                 training=False), what)
        assert_close(again[0, :3], outputs[0][0, :3],
                     f"{what}: changing target tokens 3 to 5 changes the outputs at positions "
                     "0 to 2; each layer must get x_padding_mask (the layer adds the "
                     "look-ahead mask)")


@graded("Decoder", points=0.5)
def test_Decoder__training(Decoder, namespace):
    """training mode, dropout after the embedding and inside every layer; none when `training`
    is left out.
    """
    construct = reference.constructor(namespace)
    r = rng("Decoder/training")
    arguments = {"num_layers": 2, "d_model": 16, "num_heads": 4, "dff": 24, "vocab_size": 11,
                 "max_length": 40, "dropout_rate": 0.2}
    what = "Decoder(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    ids = r.integers(1, 11, size=(2, 5))  # no padding, no context mask: only dropout here
    context = r.normal(size=(2, 4, 16)).astype("float32")
    decoder = kept(namespace, "Decoder", arguments)  # test_Decoder's first one, built
    if decoder is None:
        decoder = Decoder(**arguments)
        decoder(ids, context, training=False)  # builds the weights
    # The grader's weights, set sublayer by sublayer: the reference is computed
    # from them, never from what the layer reports about its weights.
    shapes = reference.parameter_shapes("decoder", **arguments)
    parameters = reference.random_parameters(r, shapes)
    try:
        reference.give_weights(construct, decoder, "decoder", parameters, what)
        given = True
    except AssertionError:  # built otherwise: the main test's points lost
        given = False
    calm = as_array(decoder(ids, context, training=False), what)
    left_out = as_array(decoder(ids, context), what)
    assert_true(left_out.shape == calm.shape and np.allclose(left_out, calm, rtol=1e-5,
                                                             atol=1e-6),
                f"{what}: called without `training`, the output differs from "
                "training=False; a left-out training (None) means inference, no dropout.")
    # Where the values are wrong (the main test's points lost), dropout is judged
    # against the layer itself: it acts where the lab puts it.
    inference = reference.decoder_forward(parameters, ids, context)[0]
    right = given and calm.shape == inference.shape and bool(
        np.allclose(calm, inference, rtol=1e-4, atol=1e-5))
    if not right:
        reference.assert_dropout_acts(construct, decoder, [ids, context], calm,
                                      reference.STACK_DROPOUT_SITES, what)
        return
    # Every keras.layers.Dropout drops a fixed pattern here instead of a random one.
    trained = as_array(construct(reference.TRAINING_SOURCE, "call_in_training_mode", decoder,
                                 [ids, context], {}), f"{what}, training=True")
    dropout = reference.fixed_dropout(arguments["dropout_rate"])
    expected, _ = reference.decoder_forward(parameters, ids, context, dropout=dropout)
    if trained.shape == expected.shape and not np.allclose(trained, expected, rtol=1e-3,
                                                           atol=1e-4):
        for at, message in [
                ((), "training=True changed nothing: dropout must act when training"),
                (("layers",), "no dropout after the embedding: apply self.dropout(x, "
                              "training=training) to the embedded ids"),
                (("embedding",), "the layers did not train: call each one with "
                                 "training=training (or let Keras pass it down), never "
                                 "training=False")]:
            other, _ = reference.decoder_forward(parameters, ids, context, dropout=dropout,
                                                 at=at)
            assert_true(not np.allclose(trained, other, rtol=1e-3, atol=1e-4),
                        f"{what}, training=True: {message}.")
    assert_close(trained, expected,
                 f"{what}, training=True: outputs with dropout after the embedding and "
                 "inside every layer (a fixed dropout pattern replaces the random one)")


@graded("Decoder", points=0.5)
def test_Decoder__config(Decoder):
    """get_config() / from_config()."""
    arguments = {"num_layers": 3, "d_model": 12, "num_heads": 2, "dff": 20, "vocab_size": 8,
                 "max_length": 50, "dropout_rate": 0.15}
    what = "Decoder(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    reference.check_config(Decoder, arguments, what)


@graded("Transformer", points=1.5)
def test_Transformer(Transformer, namespace):
    """a keras.Model, its weights, logits with a padded context, training=False."""
    construct = reference.constructor(namespace)
    r = rng("Transformer")
    arguments: dict[str, Any] = {"num_layers": 1, "d_model": 16, "num_heads": 2, "dff": 24}
    arguments.update(input_vocab_size=13, target_vocab_size=9, max_length=40, dropout_rate=0.2)
    what = "Transformer(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    context_ids = r.integers(1, 13, size=(3, 8))
    for row, length in enumerate([8, 5, 2]):
        context_ids[row, length:] = 0
    target_ids = r.integers(1, 9, size=(3, 6))
    for row, length in enumerate([6, 6, 3]):
        target_ids[row, length:] = 0
    real = target_ids != 0
    model = Transformer(**arguments)
    assert_true(any(path.endswith(".Model") and path.startswith("keras")
                    for path in reference.class_paths(model)),
                f"{what}: is not a keras.Model; write class Transformer(keras.Model).")
    assert_shape(model((context_ids, target_ids), training=False), (3, 6, 9),
                 f"{what} on ((3, 8), (3, 6)) ids")
    keep(namespace, "Transformer", arguments, model)  # test_Transformer__training takes it
    count = int(reference.to_numpy(reference.call_method(model, "count_params")))
    expected_count = reference.transformer_parameter_count(1, 16, 2, 24, 13, 9)
    assert_true(count == expected_count,
                f"{what}: {count} weights, expected {expected_count} (an Encoder of the "
                "input vocabulary, a Decoder of the target vocabulary and a Dense layer "
                "with target_vocab_size units).")
    # The grader's weights, set sublayer by sublayer: the reference is computed
    # from them, never from what the layer reports about its weights.
    shapes = reference.parameter_shapes("transformer", **arguments)
    parameters = reference.random_parameters(r, shapes)
    reference.give_weights(construct, model, "transformer", parameters, what)
    logits = as_array(model((context_ids, target_ids), training=False), what)
    longer = np.pad(context_ids, ((0, 0), (0, 3)))
    again = as_array(model((longer, target_ids), training=False), what)
    assert_close(again[real], logits[real],
                 f"{what}: padding the context with three more 0s changes the logits; give "
                 "the decoder context_padding_mask=(context_ids != 0)")
    expected = reference.transformer_forward(parameters, context_ids, target_ids)
    assert_close(logits[real], expected[real],
                 f"{what}: logits at the real target tokens (random weights)")


@graded("Transformer", points=0.5)
def test_Transformer__training(Transformer, namespace):
    """training mode, dropout in the encoder and in the decoder; none when `training` is left
    out.
    """
    construct = reference.constructor(namespace)
    r = rng("Transformer/training")
    arguments = {"num_layers": 1, "d_model": 16, "num_heads": 2, "dff": 24,
                 "input_vocab_size": 13, "target_vocab_size": 9, "max_length": 40,
                 "dropout_rate": 0.2}
    what = "Transformer(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    context_ids = r.integers(1, 13, size=(2, 6))  # no padding: only dropout is tested here
    target_ids = r.integers(1, 9, size=(2, 5))
    model = kept(namespace, "Transformer", arguments)  # test_Transformer's, built
    if model is None:
        model = Transformer(**arguments)
        model((context_ids, target_ids), training=False)  # builds the weights
    # The grader's weights, set sublayer by sublayer: the reference is computed
    # from them, never from what the layer reports about its weights.
    shapes = reference.parameter_shapes("transformer", **arguments)
    parameters = reference.random_parameters(r, shapes)
    try:
        reference.give_weights(construct, model, "transformer", parameters, what)
        given = True
    except AssertionError:  # built otherwise: the main test's points lost
        given = False
    calm = as_array(model((context_ids, target_ids), training=False), what)
    left_out = as_array(model((context_ids, target_ids)), what)
    assert_true(left_out.shape == calm.shape and np.allclose(left_out, calm, rtol=1e-5,
                                                             atol=1e-6),
                f"{what}: called without `training`, the logits differ from training=False; "
                "a left-out training (None) means inference, no dropout.")
    # Where the values are wrong (the main test's points lost), dropout is judged
    # against the layer itself: it acts where the lab puts it.
    inference = reference.transformer_forward(parameters, context_ids, target_ids)
    right = given and calm.shape == inference.shape and bool(
        np.allclose(calm, inference, rtol=1e-4, atol=1e-5))
    if not right:
        # The encoder's dropout reaches the logits only through the context.
        other_context = (context_ids % 12) + 1
        reaches = not np.allclose(as_array(model((other_context, target_ids), training=False),
                                           what), calm, rtol=1e-5, atol=1e-6)
        reference.assert_dropout_acts(construct, model, [(context_ids, target_ids)], calm, [
            (None, "training=True changed nothing: pass training on to the encoder and the "
                   "decoder", True),
            ("encoder", "the encoder did not train: pass it training=training (or leave "
                        "training out), never training=False", reaches),
            ("decoder", "the decoder did not train: pass it training=training (or leave "
                        "training out), never training=False", True)], what)
        return
    # Every keras.layers.Dropout drops a fixed pattern here instead of a random one.
    trained = as_array(construct(reference.TRAINING_SOURCE, "call_in_training_mode", model,
                                 [(context_ids, target_ids)], {}), f"{what}, training=True")
    dropout = reference.fixed_dropout(arguments["dropout_rate"])
    expected = reference.transformer_forward(parameters, context_ids, target_ids,
                                             dropout=dropout)
    if trained.shape == expected.shape and not np.allclose(trained, expected, rtol=1e-3,
                                                           atol=1e-4):
        for parts, message in [
                ((), "training=True changed nothing: pass training on to the encoder and "
                     "the decoder"),
                (("decoder",), "the encoder did not train: pass it training=training (or "
                               "leave training out), never training=False"),
                (("encoder",), "the decoder did not train: pass it training=training (or "
                               "leave training out), never training=False")]:
            other = reference.transformer_forward(parameters, context_ids, target_ids,
                                                  dropout=dropout, parts=parts)
            assert_true(not np.allclose(trained, other, rtol=1e-3, atol=1e-4),
                        f"{what}, training=True: {message}.")
    assert_close(trained, expected,
                 f"{what}, training=True: logits with dropout in the encoder and the decoder "
                 "(a fixed dropout pattern replaces the random one)")


@graded("Transformer", points=0.5)
def test_Transformer__config(Transformer):
    """get_config() / from_config()."""
    arguments = {"num_layers": 2, "d_model": 12, "num_heads": 3, "dff": 20,
                 "input_vocab_size": 10, "target_vocab_size": 7, "max_length": 50,
                 "dropout_rate": 0.15}
    what = "Transformer(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    reference.check_config(Transformer, arguments, what)


@graded("masked_loss", points=2)
def test_masked_loss(masked_loss):
    """the mean cross-entropy over the targets that are not padding, for batches with padded
    rows.
    """
    r = rng("masked_loss")
    for batch, length, vocabulary, lengths in [(4, 9, 7, [9, 5, 1, 7]), (2, 5, 11, [5, 5]),
                                                (3, 6, 5, [2, 6, 4])]:
        y_true = r.integers(1, vocabulary, size=(batch, length))
        for row, real_length in enumerate(lengths):
            y_true[row, real_length:] = 0
        y_pred = (2 * r.normal(size=(batch, length, vocabulary))).astype("float32")
        what = f"masked_loss(y_true {y_true.shape} with {int((y_true == 0).sum())} padded, " \
               f"y_pred {y_pred.shape})"
        value = as_array(masked_loss(y_true, y_pred), what)
        assert_true(value.size == 1, f"{what}: returned shape {value.shape}, expected a scalar.")
        value = value.reshape(())
        expected = reference.masked_loss(y_true, y_pred)
        real = y_true != 0
        if not real.all() and not np.isclose(value, expected, rtol=1e-4):
            per_token = reference.per_token_cross_entropy(y_true, y_pred)
            assert_true(not np.isclose(value, per_token.mean(), rtol=1e-4),
                        f"{what}: the padded positions count in the average; multiply by "
                        "the mask y_true != 0 and divide by the number of real tokens.")
            assert_true(not np.isclose(value, (per_token * real).mean(), rtol=1e-4),
                        f"{what}: divided by B*T; divide by the number of real tokens.")
        assert_close(value, expected, what)
        # Logits at padded positions change nothing.
        changed = y_pred.copy()
        changed[~real] = 10 * r.normal(size=changed[~real].shape)
        assert_close(as_array(masked_loss(y_true, changed), what).reshape(()), expected,
                     f"{what}: new logits at the padded positions change the loss")


@graded("masked_accuracy", points=1)
def test_masked_accuracy(masked_accuracy):
    """the share of right tokens among the targets that are not padding."""
    r = rng("masked_accuracy")
    for batch, length, vocabulary, lengths in [(4, 8, 6, [8, 3, 1, 6]), (3, 5, 9, [5, 5, 2])]:
        y_true = r.integers(1, vocabulary, size=(batch, length))
        for row, real_length in enumerate(lengths):
            y_true[row, real_length:] = 0
        y_pred = r.normal(size=(batch, length, vocabulary)).astype("float32")
        hit = r.random(size=(batch, length)) < 0.5
        rows, columns = np.nonzero(hit)
        y_pred[rows, columns, y_true[rows, columns]] = 5.0  # right at about half the tokens
        what = f"masked_accuracy(y_true {y_true.shape} with {int((y_true == 0).sum())} " \
               f"padded, y_pred {y_pred.shape})"
        value = as_array(masked_accuracy(y_true, y_pred), what)
        assert_true(value.size == 1, f"{what}: returned shape {value.shape}, expected a scalar.")
        expected = reference.masked_accuracy(y_true, y_pred)
        everywhere = float(np.mean(np.argmax(y_pred, axis=-1) == y_true))
        assert_true(np.isclose(value.reshape(()), expected, rtol=1e-4, atol=1e-6)
                    or not np.isclose(value.reshape(()), everywhere, rtol=1e-4, atol=1e-6),
                    f"{what}: the padded positions count; compare only where y_true != 0 "
                    "and divide by the number of real tokens.")
        assert_close(value.reshape(()), expected, what)
        # At padded positions the argmax is 0, i.e. "right" if padding counted.
        changed = y_pred.copy()
        real = y_true != 0
        changed[~real] = 0.0
        changed[~real, 0] = 5.0
        value = as_array(masked_accuracy(y_true, changed), what).reshape(())
        assert_true(np.isclose(value, expected, rtol=1e-4, atol=1e-6),
                    f"{what}: predicting padding at the padded positions changes the "
                    "accuracy; count only the positions where y_true != 0.")


@graded("greedy_decode", points=2)
def test_greedy_decode(greedy_decode, namespace):
    """the tokens of greedy decoding with the grader's hand-made models, rows stopping at
    end_id.
    """
    construct = reference.constructor(namespace)
    fixtures = reference.decoding_models()
    r = rng("greedy_decode")

    def check(kind, options, contexts, max_length, start_id, end_id, what):
        model = construct(reference.DECODING_MODELS_SOURCE, "make_model", kind, **options)
        here = fixtures["make_model"](kind, **options)
        expected = reference.normalize_greedy(
            reference.greedy_decode(here, contexts, max_length, start_id, end_id),
            end_id, max_length, "reference")
        got = reference.normalize_greedy(
            greedy_decode(model, contexts, max_length=max_length, start_id=start_id,
                          end_id=end_id), end_id, max_length, what, start_id=start_id)
        assert_true(len(got) == len(expected),
                    f"{what}: returned {len(got)} rows, expected one per context "
                    f"({len(expected)}).")
        for index, (row, wanted) in enumerate(zip(got, expected)):
            if row == wanted:
                continue
            if len(row) > len(wanted) and row[: len(wanted)] == wanted:
                raise AssertionError(f"{what}: row {index} goes on after end_id={end_id}.")
            position = next((i for i, (a, b) in enumerate(zip(row, wanted)) if a != b),
                            min(len(row), len(wanted)))
            raise AssertionError(
                f"{what}: row {index} differs from greedy decoding at position {position} "
                f"(got {len(row)} ids, expected {len(wanted)}); append the argmax of the "
                "last position's logits at each step and stop a row at end_id.")

    # A batch where three rows end early and two never end within max_length.
    seed = int(r.integers(1_000_000))
    table = fixtures["make_model"]("table", seed=seed)
    ending: list[Any] = []
    endless: list[Any] = []
    while len(ending) < 3 or len(endless) < 2:
        row = r.integers(3, 7, size=5)
        row[int(r.integers(2, 6)):] = 0
        length = table.length(tuple(int(t) for t in np.trim_zeros(row, "b")))
        (ending if length <= 6 else endless).append(row)
    contexts = np.array([ending[0], endless[0], ending[1], ending[2], endless[1]])
    check("table", {"seed": seed}, contexts, 6, 1, 2,
          f"greedy_decode(model, context_ids {contexts.shape}, max_length=6, start_id=1, "
          "end_id=2)")
    # Other start and end ids.
    options = {"seed": seed + 1, "start_id": 6, "end_id": 4}
    check("table", options, contexts[:3], 8, 6, 4,
          "greedy_decode(model, context_ids (3, 5), max_length=8, start_id=6, end_id=4)")
    # A hand-set model: greedy takes "a" (0.5), then "a" again, then ends.
    check("greedy_misses", {}, np.array([[3, 4, 0]]), 5, 1, 2,
          "greedy_decode(hand-set model, context_ids (1, 3), max_length=5, start_id=1, "
          "end_id=2)")


@graded("sample_with_temperature", points=2)
def test_sample_with_temperature(sample_with_temperature):
    """the argmax as the temperature goes to 0, the softmax of logits / temperature by the
    frequencies of many draws, a seed that repeats them.
    """
    r = rng("sample_with_temperature")
    logits = (2 * r.normal(size=(40, 6))).astype("float32")
    best = np.argmax(logits, axis=-1)
    logits[np.arange(40), best] += 0.5  # a clear winner in every row
    for temperature, seed in [(0.0, None), (0.0, 5), (1e-4, 3), (1e-4, None)]:
        what = f"sample_with_temperature(logits (40, 6), {temperature}, seed={seed})"
        draws = as_array(sample_with_temperature(logits, temperature, seed=seed), what)
        assert_true(draws.shape == (40,), f"{what}: returned shape {draws.shape}, "
                                          "expected (40,): one id per row.")
        assert_true(np.array_equal(draws.astype(np.int64), best),
                    f"{what}: {int((draws != best).sum())} of 40 ids are not the argmax; "
                    "as the temperature goes to 0 (and at 0) the draw is the argmax. Divide "
                    "the logits by the temperature.")
    seed = int(r.integers(1, 10_000))
    what = f"sample_with_temperature(logits (40, 6), 1.0, seed={seed})"
    first = as_array(sample_with_temperature(logits, 1.0, seed=seed), what)
    assert_true(first.shape == (40,) and np.all((first >= 0) & (first < 6)),
                f"{what}: expected 40 ids in [0, 6), got shape {first.shape}.")
    again = as_array(sample_with_temperature(logits, 1.0, seed=seed), what)
    assert_true(np.array_equal(first, again),
                f"{what}: two calls with the same seed give different ids; pass the seed "
                "to the random draw.")
    row = np.array([1.5, 0.5, -0.5, 1.0, -1.0], dtype="float32")
    batch = np.tile(row, (5000, 1))
    for temperature in (0.5, 2.0):
        what = f"sample_with_temperature(5000 copies of the logits {row.tolist()}, " \
               f"{temperature}, seed={seed})"
        draws = as_array(sample_with_temperature(batch, temperature, seed=seed), what)
        assert_true(draws.shape == (5000,), f"{what}: returned shape {draws.shape}.")
        frequencies = np.bincount(draws.astype(np.int64).reshape(-1), minlength=5)[:5] / 5000
        expected = reference.temperature_probabilities(row, temperature)
        if np.abs(frequencies - expected).max() > 0.035:
            multiplied = reference.temperature_probabilities(row, 1 / temperature)
            assert_true(np.abs(frequencies - multiplied).max() > 0.035,
                        f"{what}: the frequencies follow softmax(z * T); divide the logits "
                        "by the temperature.")
            raise AssertionError(
                f"{what}: the frequencies of the ids differ from softmax(z / T) by up to "
                f"{np.abs(frequencies - expected).max():.3f}; sample one id per row from "
                "logits / temperature.")


@graded("beam_search", points=2.5)
def test_beam_search(beam_search, namespace):
    """hand-set models whose best sentence is known (ranking by total log-probability, no
    length normalisation, log_softmax of the logits), other ids, beam_width=1 is greedy.
    """
    construct = reference.constructor(namespace)
    fixtures = reference.decoding_models()
    r = rng("beam_search")
    context = np.array([[int(t) for t in r.integers(3, 6, size=4)] + [0]])

    def run(kind, options, beam_width, max_length, start_id, end_id, context=context):
        model = construct(reference.DECODING_MODELS_SOURCE, "make_model", kind, **options)
        shifted_logits = " (logits shifted after some prefixes)" if "offsets" in options else ""
        what = (f"beam_search({kind.replace('_', ' ')} model{shifted_logits}, "
                f"context_ids {context.shape}, "
                f"beam_width={beam_width}, max_length={max_length}, start_id={start_id}, "
                f"end_id={end_id})")
        got = reference.normalize_sequence(
            beam_search(model, context, beam_width=beam_width, max_length=max_length,
                        start_id=start_id, end_id=end_id), max_length, what, start_id)
        # What comes after the end id is the finished-beam part's (test_beam_search__finished):
        # here a sentence is read up to its first end id.
        if end_id in got:
            got = got[:got.index(end_id) + 1]
        return got, what, fixtures["make_model"](kind, **options)

    # Hand-set models whose best sequence is known: greedy decoding misses it; the
    # last step alone, the average per token (however the search stops) or a sum
    # of probabilities ranks another one first; logits shifted after some prefixes
    # (the same probabilities) trip a sum of raw logits. After the end id the end id
    # is certain (end_stays), so a beam extended after its end keeps its score here:
    # extending finished beams costs the finished-beam part only.
    shifted = {prefix: 3.0 for prefix in ("a", "aa", "ab", "ac")}
    models: list[tuple[str, dict[str, Any], int, int]] = [
        ("greedy_misses", {"end_stays": True}, 1, 2),
        ("greedy_misses", {"start_id": 4, "end_id": 3, "ids": {"a": 5, "b": 2, "c": 1},
                           "end_stays": True}, 4, 3),
        ("total_matters", {"end_stays": True}, 1, 2),
        ("short_wins", {"end_stays": True}, 1, 2),
        ("short_wins_late", {"end_stays": True}, 1, 2),
        ("greedy_misses", {"offsets": shifted, "end_stays": True}, 1, 2)]
    for kind, options, start_id, end_id in models:
        here = fixtures["make_model"](kind, **options)
        tokens = [here.ids[s] for s in ("a", "b", "c", "$")]
        best, best_score = reference.best_sequence(here, context[0], 4, start_id, end_id, tokens)
        greedy = reference.greedy_decode(here, context, 4, start_id, end_id)[0].tolist()
        for beam_width in (2, 3):
            got, what, here = run(kind, options, beam_width, 4, start_id, end_id)
            if got == best:
                continue
            if any(got == reference.beam_search(here, context, beam_width, 4, start_id, end_id,
                                                steps=steps).tolist() for steps in (1, 2, 3)):
                continue  # ranked right, stopped too early: test_beam_search__finished's
            score = reference.sequence_log_probability(here, context[0], got, start_id)
            if "offsets" in options:
                raise AssertionError(
                    f"{what}: returned a sentence with total log-probability {score:.3f}, "
                    f"expected the best one ({best_score:.3f}); a model's logits are not "
                    "log-probabilities: add the log_softmax of each step's logits, not the "
                    "raw logits.")
            if got == greedy and greedy != best:
                raise AssertionError(
                    f"{what}: returned the greedy answer (total log-probability {score:.3f}); "
                    f"a better sentence (total log-probability {best_score:.3f}) was within "
                    "reach: keep the beam_width best candidates at each step.")
            if (kind.startswith("short_wins") and len(got) > len(best)
                    and score / len(got) > best_score / len(best)):
                raise AssertionError(
                    f"{what}: returned a longer sentence with a lower total "
                    f"log-probability ({score:.3f}) than the best one ({best_score:.3f}), "
                    f"though a higher average per token ({score / len(got):.3f} against "
                    f"{best_score / len(best):.3f}): rank by the TOTAL log-probability, "
                    "never divided by the length: a shorter sentence wins whenever its total "
                    "is higher.")
            raise AssertionError(
                f"{what}: returned a sentence with total log-probability {score:.3f}, "
                f"expected the best one ({best_score:.3f}); rank the candidates by their "
                "TOTAL log-probability (the beam's score plus the new token's log-softmax).")
    # beam_width=1 is greedy decoding.
    seed = int(r.integers(1_000_000))
    greedy_cases: list[tuple[str, dict[str, Any], list]] = [
        ("greedy_misses", {"end_stays": True}, [context]),
        ("table", {"seed": seed}, [np.array([[int(t) for t in r.integers(3, 7, size=4)]])
                                   for _ in range(3)])]
    for kind, options, contexts in greedy_cases:
        for one in contexts:
            got, what, here = run(kind, options, 1, 6, 1, 2, context=one)
            greedy = reference.normalize_greedy(reference.greedy_decode(here, one, 6, 1, 2), 2,
                                                6, "reference")[0]
            assert_true(got == greedy,
                        f"{what}: with beam_width=1 the result must be greedy decoding's "
                        f"(got {len(got)} ids, expected {len(greedy)}).")


@graded("beam_search", points=1)
def test_beam_search__finished(beam_search, namespace):
    """finished sentences (in a list of their own, never extended, the beam kept at beam_width
    open beams), when the search stops, and the best sentence at max_length, finished or not.
    """
    construct = reference.constructor(namespace)
    fixtures = reference.decoding_models()
    r = rng("beam_search/finished")
    context = np.array([[int(t) for t in r.integers(3, 6, size=3)] + [0]])
    other_ids = {"start_id": 4, "end_id": 3, "ids": {"a": 5, "b": 2, "c": 1}}
    kept = ("a candidate that writes end_id is finished: it leaves the beam for the list of "
            "finished sentences, with its score, and competes for the answer at the end")
    goes_on = ("the first finished sentence does not end the search: go on while an open "
               "beam scores higher than the best finished one")
    makes_room = ("the beam keeps beam_width OPEN beams: a finished sentence takes no place "
                  "in it, so open beams that score higher than a finished one all go on")
    own_list = ("finished sentences leave the beam for a list of their own, where nothing "
                "pushes them out")
    # Here a model goes on after the end id as a real model's logits do (no end_stays):
    # a beam extended after its end changes its score.
    for kind, options, beam_width, max_length, rule in [
            ("kept", {}, 2, 4, kept),
            ("kept", other_ids, 3, 4, kept),
            ("goes_on", {}, 3, 4, goes_on),
            ("goes_on", other_ids, 2, 4, goes_on),
            ("makes_room", {}, 2, 4, makes_room),
            ("makes_room", other_ids, 2, 4, makes_room),
            ("evicted", {}, 2, 4, own_list),
            ("evicted", other_ids, 2, 3, own_list),
            ("max_length", {}, 2, 2, "when max_length stops the search, the open beams "
                                     "compete too: return the best sentence, finished or "
                                     "not")]:
        start_id, end_id = options.get("start_id", 1), options.get("end_id", 2)
        model = construct(reference.DECODING_MODELS_SOURCE, "make_model", kind, **options)
        here = fixtures["make_model"](kind, **options)
        what = (f"beam_search(hand-set model, context_ids {context.shape}, "
                f"beam_width={beam_width}, max_length={max_length}, start_id={start_id}, "
                f"end_id={end_id})")
        got = reference.normalize_sequence(
            beam_search(model, context, beam_width=beam_width, max_length=max_length,
                        start_id=start_id, end_id=end_id), max_length, what, start_id)
        tokens = [here.ids[symbol] for symbol in ("a", "b", "c", "$")]
        best, best_score = reference.best_sequence(here, context[0], max_length, start_id,
                                                   end_id, tokens)
        if got == best:
            continue
        if end_id in got[:-1]:
            raise AssertionError(f"{what}: the answer goes on after end_id={end_id}; a "
                                 "finished beam is never extended: a sentence ends at its "
                                 "end id.")
        score = reference.sequence_log_probability(here, context[0], got, start_id)
        wrong = (f"{what}: returned a sentence with total log-probability {score:.3f}, "
                 f"expected the best one ({best_score:.3f})")
        if end_id not in got and len(got) < max_length:
            raise AssertionError(
                f"{what}: returned an open sentence of {len(got)} ids (total log-probability "
                f"{score:.3f}), before max_length={max_length} stopped the search: the search "
                "stopped too early. Go on while an open beam scores higher than the best "
                "finished sentence; an open beam is an answer only when max_length stops the "
                "search.")
        readings = {reading: reference.beam_search(here, context, beam_width, max_length,
                                                   start_id, end_id, reading=reading).tolist()
                    for reading in ("among_beams", "extended")}
        if got == readings["among_beams"]:
            raise AssertionError(
                f"{wrong}: a finished sentence was pushed out of the beam by open ones: keep "
                "finished sentences in their own list, where they take no place in the beam "
                "and nothing pushes them out.")
        if got == readings["extended"]:
            # Confirmed when the same search answers right once the end id is certain after
            # the end (so that what follows the end can no longer change a score).
            again = reference.normalize_sequence(beam_search(
                construct(reference.DECODING_MODELS_SOURCE, "make_model", kind, **options,
                          end_stays=True),
                context, beam_width=beam_width, max_length=max_length, start_id=start_id,
                end_id=end_id), max_length, what, start_id)
            extended = (again[:again.index(end_id) + 1] if end_id in again else again) == best
        else:
            extended = False
        if extended:
            raise AssertionError(
                f"{wrong}: it looks like beams were extended after end_id (as keras-hub's "
                "BeamSampler does), which changes their scores: a beam that writes end_id is "
                "finished, its sentence and score final; keep it in the list of finished "
                "sentences and never extend it.")
        raise AssertionError(f"{wrong}; {rule}.")
