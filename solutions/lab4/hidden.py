"""lab4's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

from typing import Any

import numpy as np

from autograder.hidden import graded
from autograder.references import lab4 as reference
from autograder.testkernel.layers import check_config
from autograder.testkernel.testing import (assert_close, assert_finite, assert_shape, assert_true,
                                           keep, kept, rng)


def _padded(real) -> str:
    """Where a sentence's padding is, for a message: "padded first", "padded last"."""
    if real.all():
        return "no padding"
    return "padded last" if real[0] else "padded first"


def _kept_scores(layer, shape):
    """``layer.last_attention_scores`` as NumPy when it has ``shape``, else None."""
    try:
        scores = reference.to_numpy(layer.last_attention_scores)
    except Exception:  # noqa: BLE001 - not kept: test_DecoderLayer says so
        return None
    return scores if scores.shape == shape else None


@graded("causal_mask", points=1)
def test_causal_mask(causal_mask):
    """the boolean mask (T, T), True on and below the diagonal, for lengths from 1 to 9."""
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


@graded("padding_mask", points=1)
def test_padding_mask(padding_mask):
    """the boolean mask (B, T) for int32 and int64 ids, arrays or tensors, with pad_id 0 and
    others.
    """
    def check(result, token_ids, pad_id, what):
        mask = assert_shape(reference.to_numpy(result), np.shape(token_ids), what)
        assert_true(mask.dtype == bool, f"{what}: the dtype is {mask.dtype}, expected bool.")
        expected = reference.padding_mask(token_ids, pad_id)
        if np.array_equal(mask, ~expected):
            raise AssertionError(f"{what}: the mask is inverted; True marks the real "
                                 "tokens, False the padding.")
        wrong = mask != expected
        if wrong.any() and pad_id != 0:
            # The mistakes the visible check names (pad_id ignored), named here too.
            ids = np.asarray(token_ids)
            assert_true(not np.array_equal(mask, ids != 0),
                        f"{what}: the mask is ids != 0 whatever pad_id is; compare with the "
                        "pad_id argument, not with a fixed 0.")
            assert_true(not np.array_equal(mask, ids > pad_id),
                        f"{what}: ids below pad_id are marked as padding (ids > pad_id); "
                        "compare with the pad_id argument for equality: ops.not_equal(ids, "
                        "pad_id).")
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


@graded("combine_masks", points=1.5)
def test_combine_masks(combine_masks):
    """the values of the combined mask, compared after broadcasting."""
    def check(result, expected, what, exact_shape=True, guesses=()):
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
            # The mistakes the visible check names, named here too.
            for guess, hint in guesses:
                assert_true(not np.array_equal(mask, np.broadcast_to(guess, expected.shape)),
                            f"{what}: {hint}")
            assert_true(exact_shape or mask.any() or not expected.any(),
                        f"{what}: nothing may attend; a missing mask allows everything: "
                        "leave its axis of length 1 (key_mask[:, None, :] or "
                        "query_mask[:, :, None]).")
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
    ignored = [(reference.combine_masks(target, target),
                "causal=True is ignored: AND the look-ahead mask causal_mask(T)[None] too.")]
    check(combine_masks(query_mask=target, key_mask=target, causal=True),
          reference.combine_masks(target, target, causal=True),
          "combine_masks(query_mask (3, 5), key_mask (3, 5), causal=True)", guesses=ignored)

    # One mask only (self-attention, T = 5): the missing side allows everything.
    check(combine_masks(key_mask=target), reference.combine_masks(None, target),
          "combine_masks(key_mask (3, 5))", exact_shape=False)
    check(combine_masks(query_mask=target), reference.combine_masks(target, None),
          "combine_masks(query_mask (3, 5))", exact_shape=False)
    check(combine_masks(key_mask=target, causal=True),
          reference.combine_masks(None, target, causal=True),
          "combine_masks(key_mask (3, 5), causal=True)", exact_shape=False)
    try:
        only_queries = combine_masks(query_mask=target, causal=True)
    except Exception as error:  # noqa: BLE001 - the student's error, with the visible hint
        raise AssertionError(
            f"combine_masks(query_mask (3, 5), causal=True) raised {error}; only the query "
            "mask is given: take the length T from whichever mask is given.") from None
    check(only_queries,
          reference.combine_masks(target, None, causal=True),
          "combine_masks(query_mask (3, 5), causal=True): only the query mask is given, "
          "the look-ahead still applies", exact_shape=False)


@graded("combine_masks", points=0.5)
def test_combine_masks__broadcast(combine_masks):
    """a missing mask leaves an axis of length 1, so the mask fits any number of queries (or
    keys).
    """
    r = rng("combine_masks/broadcast")
    query, key = r.random(size=(3, 4)) < 0.7, r.random(size=(3, 6)) < 0.7
    for result, expected, what, missing, plural in [
            (combine_masks(key_mask=key), (3, 1, 6), "combine_masks(key_mask (3, 6))", "query",
             "queries"),
            (combine_masks(query_mask=query), (3, 4, 1), "combine_masks(query_mask (3, 4))",
             "key", "keys")]:
        shape = tuple(reference.to_numpy(result).shape)
        # Which mask gives the rows is test_combine_masks's: here, the axis of length 1.
        assert_true(shape in (expected, expected[:1] + expected[:0:-1]),
                    f"{what} has shape {shape}, expected {expected}: a missing {missing} mask "
                    f"leaves an axis of length 1, so that the mask fits any number of "
                    f"{plural} (the decoder's cross-attention has T_q != T_k).")


@graded("masked_softmax", points=1.5)
def test_masked_softmax(masked_softmax):
    """the weights of rows with an allowed key, with broadcast masks."""
    def softmax(values, axis=-1):
        exponentials = np.exp(values - values.max(axis=axis, keepdims=True))
        return exponentials / exponentials.sum(axis=axis, keepdims=True)

    def mistakes(scores, allowed):
        """(weights, hint) of the mistakes the visible check names."""
        scores = np.asarray(scores, dtype=np.float64)
        hidden_scores = np.where(allowed, scores, -1e9)
        return [
            (softmax(np.where(allowed, -1e9, scores)),
             "True means 'may attend': the large negative value goes where the mask is "
             "False, not where it is True."),
            (softmax(hidden_scores, axis=-2) * allowed,
             "the softmax runs over the last axis (the keys), axis=-1."),
            (softmax(scores * allowed),
             "a masked score becomes a large negative number (large_negative(scores.dtype)), "
             "not 0."),
            (softmax(scores) * allowed,
             "renormalise: hide the masked scores BEFORE the softmax, so that the allowed "
             "keys share all the weight."),
            (softmax(np.where(allowed, scores / np.sqrt(scores.shape[-1]), -1e9)) * allowed,
             "no scaling here: the scores come already scaled (do not divide by sqrt(T_k))."),
        ]

    def check(scores, mask, what, as_tensors=False):
        if as_tensors:
            result = masked_softmax(reference.tensor(scores, masked_softmax),
                                    reference.tensor(mask, masked_softmax))
        else:
            result = masked_softmax(scores, mask)
        weights = assert_shape(reference.to_numpy(result), scores.shape, what)
        allowed = np.broadcast_to(mask, scores.shape)
        live = np.asarray(allowed.any(axis=-1))  # rows with at least one key (the others: their own cell)
        assert_finite(weights[live], what + " (rows with an allowed key)")
        weights = weights.astype(np.float64)
        expected = reference.masked_softmax(scores, mask)
        if not np.allclose(weights[live], expected[live], rtol=1e-4, atol=1e-5):
            # The mistakes the visible check names, named here too.
            for guess, hint in mistakes(scores, allowed):
                assert_true(not np.allclose(weights[live], guess[live], rtol=1e-4, atol=1e-5),
                            f"{what}: {hint}")
        hidden = ~allowed & live[..., None]
        assert_true(np.all(weights[hidden] == 0.0),
                    f"{what}: masked keys (mask False) must get weight exactly 0; "
                    f"{int(np.count_nonzero(weights[hidden]))} of {int(hidden.sum())} do not.")
        sums = weights.sum(axis=-1)[live]
        assert_true(np.allclose(sums, 1.0, atol=1e-4),
                    f"{what}: the weights of a row do not sum to 1 over the allowed keys "
                    f"(sums from {sums.min():.3g} to {sums.max():.3g}); renormalise after "
                    "masking.")
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

    # Rows whose keys are all masked: the other rows graded here (finite: the next cell).
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


@graded("masked_softmax", points=0.5)
def test_masked_softmax__masked_rows(masked_softmax):
    """a row whose keys are all masked gives finite numbers, whatever their values."""
    r = rng("masked_softmax/masked_rows")
    for shape in [(2, 4, 5), (2, 2, 3, 4)]:
        scores = (3 * r.normal(size=shape)).astype("float32")
        mask = r.random(size=shape) < 0.6
        mask[..., 0] = True
        mask[0, ..., 1, :] = False  # one query of the first example sees no key
        what = f"masked_softmax(scores {shape}, a mask with a fully masked row)"
        weights = reference.to_numpy(masked_softmax(scores, mask))
        assert_true(np.shape(weights) == shape, f"{what}: returned shape {np.shape(weights)}, "
                                                f"expected {shape}.")
        rows = ~mask.any(axis=-1)
        assert_true(np.all(np.isfinite(np.asarray(weights, np.float64)[rows])),
                    f"{what}: the fully masked row holds NaN or inf; use "
                    "large_negative(scores.dtype) rather than -inf, or set the masked "
                    "weights to 0 with ops.where.")


@graded("FeedForward", points=1.5)
def test_FeedForward(FeedForward):
    """sublayers, weight shapes and outputs at inference."""
    r = rng("FeedForward")
    for d_model, dff, rate, shape in [(6, 12, 0.5, (2, 5, 6)), (4, 10, 0.2, (3, 4))]:
        layer = FeedForward(d_model=d_model, dff=dff, dropout_rate=rate)
        what = f"FeedForward(d_model={d_model}, dff={dff}, dropout_rate={rate})"
        x = r.normal(size=shape).astype("float32")
        on_x = f"{what} on x {shape}"
        assert_shape(reference.to_numpy(layer(x, training=False)), shape, on_x)
        for name in ("dense1", "dense2"):
            assert_true(reference.is_keras_layer(reference.sublayer(layer, name), "Dense"),
                        f"{what}: the sublayer `{name}` should be a keras.layers.Dense.")

        # Values with the grader's random weights (the curriculum's shapes: dense1
        # dff units, dense2 d_model units, both with a bias), at inference:
        # relu(x W1 + b1) W2 + b2.
        weights = reference.randomize_weights(layer, reference.FEED_FORWARD_WEIGHTS, r, what,
                                              d_model=d_model, dff=dff)
        expected = reference.feed_forward(x, weights["dense1"], weights["dense2"])
        output = reference.to_numpy(layer(x, training=False))
        if not np.allclose(output, expected, rtol=1e-4, atol=1e-5):
            again = reference.to_numpy(layer(x, training=False))
            assert_true(np.array_equal(again, output),
                        f"{on_x}: two calls with training=False give different outputs: "
                        "something is dropped at inference; pass training on: "
                        "self.dropout(..., training=training).")
        if not np.allclose(output, expected, rtol=1e-4, atol=1e-5):
            W1, b1 = (w.astype(np.float64) for w in weights["dense1"])
            W2, b2 = (w.astype(np.float64) for w in weights["dense2"])
            for guess, hint in [(expected + x, "the input is added to the output; the residual "
                                               "belongs to the encoder and decoder layers"),
                                ((x @ W1 + b1) @ W2 + b2, "ReLU is missing after dense1"),
                                (np.maximum(expected, 0.0), "dense2 has a ReLU too; only dense1 "
                                                            "has one")]:
                assert_true(not np.allclose(output, guess, rtol=1e-4, atol=1e-5),
                            f"{on_x}: {hint}.")
        assert_close(output, expected, f"{on_x}, training=False")
        assert_close(reference.to_numpy(layer(x)), expected,
                     f"{on_x}, training left out (inference)")


@graded("FeedForward", points=0.25)
def test_FeedForward__training(FeedForward):
    """dropout on the output while training, at the rate dropout_rate."""
    r = rng("FeedForward/training")
    for rate, size in [(0.5, (2, 5, 6)), (0.2, (4, 5, 6))]:
        layer = FeedForward(d_model=6, dff=12, dropout_rate=rate)
        what = f"FeedForward(d_model=6, dff=12, dropout_rate={rate})"
        x = r.normal(size=size).astype("float32")
        layer(x, training=False)        # builds the sublayers (their weights) first
        # Random weights of the layer's own shapes: its sizes are test_FeedForward's.
        reference.randomize_own_weights(layer, reference.FEED_FORWARD_WEIGHTS, r)
        inference = reference.to_numpy(layer(x, training=False)).astype(np.float64)
        again = reference.to_numpy(layer(x, training=False)).astype(np.float64)
        assert_true(np.array_equal(again, inference),
                    f"{what}: two calls with training=False gave different outputs; dropout "
                    "acts only while training.")
        assert_true(reference.is_keras_layer(reference.sublayer(layer, "dropout"), "Dropout"),
                    f"{what}: the sublayer `dropout` should be a keras.layers.Dropout.")
        stored = reference.sublayer(layer, "dropout.rate")
        assert_true(abs(stored - rate) < 1e-9,
                    f"{what}: dropout.rate is {stored!r}, expected {rate}; dropout_rate is the "
                    "fraction of outputs dropped, passed as it is to keras.layers.Dropout.")
        trained = reference.to_numpy(layer(x, training=True)).astype(np.float64)
        # What dropout acts on: the block's output, or (x added inside the block,
        # test_FeedForward's mistake) the part of it after x.
        for added in (0.0, x.astype(np.float64)):
            if inference.shape != np.shape(added) and np.ndim(added):
                continue
            zero = np.abs(trained - added) <= 1e-6
            scaled = np.isclose(trained - added, (inference - added) / (1 - rate),
                                rtol=1e-4, atol=1e-5)
            if np.all(zero | scaled):
                break
        assert_true(np.all(zero | scaled),
                    f"{what}, training=True: every output should be either 0 (dropped) or "
                    f"its inference value / {1 - rate:g} (kept); dropout acts on the output "
                    "of dense2.")
        low, high = 0.3 * rate * zero.size, min(zero.size - 1, 2.5 * rate * zero.size)
        assert_true(low <= int(zero.sum()) <= high,
                    f"{what}, training=True: {int(zero.sum())} of {zero.size} outputs are "
                    f"dropped; about {rate:.0%} should be. Pass `training` to the dropout layer.")


@graded("FeedForward", points=0.25)
def test_FeedForward__config(FeedForward):
    """get_config() / from_config(), and a ValueError for invalid arguments."""
    check_config(FeedForward, {"d_model": 6, "dff": 12, "dropout_rate": 0.5},
                 "FeedForward(d_model=6, dff=12, dropout_rate=0.5)")

    # Invalid arguments: a ValueError at once (any message).
    invalid: list[dict[str, Any]] = [dict(d_model=0, dff=8), dict(d_model=4, dff=-2),
                                     dict(d_model=4, dff=8, dropout_rate=1.5)]
    for arguments in invalid:
        text = ", ".join(f"{k}={v}" for k, v in arguments.items())
        name, _ = reference.raised(lambda: FeedForward(**arguments))
        assert_true(name == "ValueError",
                    f"FeedForward({text}) should raise a ValueError at once; it "
                    f"{'raised ' + name if name else 'did not raise'}.")


@graded("EncoderLayer", points=2.75)
def test_EncoderLayer(EncoderLayer, namespace):
    """sublayers and outputs at inference, without padding."""
    r = rng("EncoderLayer")
    for d_model, num_heads, dff, batch, length in [(8, 2, 16, 3, 5), (12, 3, 20, 2, 7)]:
        what = f"EncoderLayer(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=0.5)
        layer = EncoderLayer(**arguments)
        x = r.normal(size=(batch, length, d_model)).astype("float32")
        on_x = f"{what} on x {x.shape}"
        name, message = reference.raised(lambda: layer(x, training=False))
        if name is not None and name != "NotImplementedError":
            raise AssertionError(f"{on_x}: {message}" + reference.explain(message))
        assert_shape(reference.to_numpy(layer(x, training=False)), x.shape, on_x)
        keep(namespace, "EncoderLayer", arguments, layer)  # built: the next tests take it

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

        # Values with the grader's random weights, set by sublayer name.
        weights = reference.randomize_weights(layer, reference.ENCODER_WEIGHTS, r, what,
                                              d_model=d_model, num_heads=num_heads, dff=dff)
        expected = reference.encoder_layer(x, weights)
        output = reference.to_numpy(layer(x, training=False))
        if not np.allclose(output, expected, rtol=1e-4, atol=1e-5):
            again = reference.to_numpy(layer(x, training=False))
            assert_true(np.array_equal(again, output),
                        f"{on_x}: two calls with training=False give different outputs: "
                        "something is dropped at inference; pass training on: "
                        "self.dropout(..., training=training).")
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


@graded("EncoderLayer", points=0.5)
def test_EncoderLayer__padding(EncoderLayer, namespace):
    """with a padding mask (padding last or first in a sentence), the outputs at the real
    positions are those of the sentence alone, without its padding.
    """
    r = rng("EncoderLayer/padding")
    for d_model, num_heads, dff, batch, length in [(8, 2, 16, 3, 5), (12, 3, 20, 2, 7)]:
        what = f"EncoderLayer(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=0.5)
        layer = kept(namespace, "EncoderLayer", arguments)  # test_EncoderLayer's, built
        if layer is None:
            layer = EncoderLayer(**arguments)
        x = r.normal(size=(batch, length, d_model)).astype("float32")
        on_x = f"{what} on x {x.shape} with a padding mask"
        real = np.ones((batch, length), dtype=bool)
        real[0, -2:] = False  # padding last
        real[1, :2] = False  # padding first
        name, message = reference.raised(lambda: layer(x, padding_mask=real, training=False))
        if name is not None and name != "NotImplementedError":
            raise AssertionError(f"{on_x}: {message}" + reference.explain(message))
        reference.randomize_own_weights(layer, reference.ENCODER_WEIGHTS, r)
        output = reference.to_numpy(layer(x, padding_mask=real, training=False))
        assert_shape(output, x.shape, on_x)
        changed = x.copy()
        changed[~real] = 5 * r.normal(size=changed[~real].shape)
        moved = reference.to_numpy(layer(changed, padding_mask=real, training=False))
        assert_true(np.allclose(moved[real], output[real], rtol=1e-4, atol=1e-5),
                    f"{on_x}: changing the vectors at padded positions (last in one sentence, "
                    "first in another) changed the outputs at real positions; padded keys must "
                    "be hidden from the attention (attention_mask (B, 1, T), passed BY "
                    "KEYWORD: the fourth positional argument of MultiHeadAttention is "
                    "query_mask).")
        # Each sentence given alone without its padding: the same outputs at its real
        # positions (the layer's own values: what they should be is test_EncoderLayer's).
        for b in range(batch):
            alone = reference.to_numpy(layer(x[b:b + 1, real[b]], training=False))
            assert_close(output[b, real[b]], alone[0],
                         f"{on_x}: sentence {b} ({_padded(real[b])}) "
                         f"at its real positions, against the same layer on its "
                         f"{int(real[b].sum())} real tokens alone without a mask; padded "
                         "tokens must change nothing")
        tensor_mask = reference.tensor(real, layer)
        assert_close(reference.to_numpy(layer(x, padding_mask=tensor_mask, training=False))[real],
                     output[real], f"{on_x} given as a backend tensor, at the real positions")


@graded("EncoderLayer", points=0.25)
def test_EncoderLayer__training(EncoderLayer, namespace):
    """dropout while training, on the attention's output too; nothing dropped at inference."""
    r = rng("EncoderLayer/training")
    close: dict[str, Any] = dict(rtol=1e-4, atol=1e-5)
    arguments = dict(d_model=8, num_heads=2, dff=16, dropout_rate=0.5)
    x = r.normal(size=(3, 5, 8)).astype("float32")
    on_x = f"EncoderLayer(d_model=8, num_heads=2, dff=16, dropout_rate=0.5) on x {x.shape}"
    layer = kept(namespace, "EncoderLayer", arguments)  # test_EncoderLayer's first, built
    if layer is None:
        layer = EncoderLayer(**arguments)
        layer(x, training=False)
    # Random weights of the layer's own shapes: its sizes are the main test's.
    weights = reference.randomize_own_weights(layer, reference.ENCODER_WEIGHTS, r)
    output = reference.to_numpy(layer(x, training=False))
    again = reference.to_numpy(layer(x, training=False))
    assert_true(np.array_equal(again, output),
                f"{on_x}: two calls with training=False gave different outputs; dropout acts "
                "only while training.")
    trained = reference.to_numpy(layer(x, training=True))
    assert_true(not np.allclose(trained, output, **close),
                f"{on_x}: training=True gave the inference output; dropout must act while "
                "training (pass `training` on).")
    # Dropout on the attention's output as well: with the feed-forward block
    # silenced (dense2 all zeros: ffn(x) = 0), training must still change the output.
    reference.set_sublayer_weights(layer, "ffn.dense2",
                                   [np.zeros_like(w) for w in weights["ffn.dense2"]])
    quiet = reference.to_numpy(layer(x, training=False))
    changed = r.normal(size=x.shape).astype("float32")  # (x + 1: normalised away)
    if np.allclose(reference.to_numpy(layer(changed, training=False)), quiet, **close):
        # The output no longer depends on x: a residual is missing (the main test's
        # mistake), and no dropout of the attention could reach the output.
        return
    trained = reference.to_numpy(layer(x, training=True))
    assert_true(not np.allclose(trained, quiet, **close),
                f"{on_x}: with the feed-forward block giving 0, training=True gave the "
                "inference output; the attention's output needs dropout too: "
                "x = norm1(x + dropout(attention(x))).")


@graded("EncoderLayer", points=0.5)
def test_EncoderLayer__config(EncoderLayer):
    """get_config() / from_config(), and a ValueError for invalid arguments."""
    check_config(EncoderLayer, {"d_model": 12, "num_heads": 3, "dff": 20, "dropout_rate": 0.5},
                 "EncoderLayer(d_model=12, num_heads=3, dff=20, dropout_rate=0.5)")

    # Invalid arguments: a ValueError at once (any message).
    invalid: list[dict[str, Any]] = [dict(d_model=8, num_heads=3, dff=16), dict(d_model=8, num_heads=0, dff=16),
                                     dict(d_model=8, num_heads=2, dff=16, dropout_rate=1.5)]
    for arguments in invalid:
        text = ", ".join(f"{k}={v}" for k, v in arguments.items())
        name, _ = reference.raised(lambda: EncoderLayer(**arguments))
        assert_true(name == "ValueError",
                    f"EncoderLayer({text}) should raise a ValueError at once; it "
                    f"{'raised ' + name if name else 'did not raise'}.")


@graded("DecoderLayer", points=2.75)
def test_DecoderLayer(DecoderLayer, namespace):
    """sublayers, causality, outputs and cross-attention scores at inference, without padding."""
    r = rng("DecoderLayer")
    close: dict[str, Any] = dict(rtol=1e-4, atol=1e-5)
    for d_model, num_heads, dff, batch, length, source_length in [(8, 2, 16, 2, 4, 6),
                                                                  (12, 3, 20, 3, 5, 7)]:
        what = f"DecoderLayer(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=0.5)
        layer = DecoderLayer(**arguments)
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
        keep(namespace, "DecoderLayer", arguments, layer)  # built: the next tests take it
        scores_shape = (batch, num_heads, length, source_length)
        scores = reference.to_numpy(layer.last_attention_scores)
        if scores.shape == (batch, num_heads, source_length, length):
            raise AssertionError(f"{on_x}: last_attention_scores has shape {scores.shape}, "
                                 f"expected {scores_shape}: the cross-attention queries seem "
                                 "to come from the encoder; queries come from the decoder "
                                 "(x), keys and values from context.")
        if scores.shape == (batch, num_heads, length, length) != scores_shape:
            raise AssertionError(f"{on_x}: last_attention_scores has shape {scores.shape}, "
                                 f"expected {scores_shape}: keep the CROSS-attention's scores "
                                 "(cross_attention(..., return_attention_scores=True)), not "
                                 "the self-attention's (B, num_heads, T, T).")
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

        weights = reference.randomize_weights(layer, reference.DECODER_WEIGHTS, r, what,
                                              d_model=d_model, num_heads=num_heads, dff=dff)
        output = reference.to_numpy(layer(x, context, training=False))
        expected, expected_scores = reference.decoder_layer(x, context, weights)
        if not np.allclose(output, expected, **close):
            again = reference.to_numpy(layer(x, context, training=False))
            assert_true(np.array_equal(again, output),
                        f"{on_x}: two calls with training=False give different outputs: "
                        "something is dropped at inference; pass training on: "
                        "self.dropout(..., training=training).")
        if not np.allclose(output, expected, **close):
            pre_norm = reference.decoder_layer(x, context, weights, pre_norm=True)[0]
            assert_true(not np.allclose(output, pre_norm, **close),
                        f"{on_x}: the layer normalises before each sublayer (pre-norm); this "
                        "lab follows the paper: x = norm(x + sublayer(x)).")
            # With the diagonal hidden the first query has no key left (its output
            # depends on the backend): compare the others.
            hidden_diagonal = reference.decoder_layer(x, context, weights, diagonal=False)[0]
            assert_true(not np.allclose(output[:, 1:], hidden_diagonal[:, 1:], **close),
                        f"{on_x}: the look-ahead mask hides the diagonal; a token attends to "
                        "itself (key j <= query i).")

        # The future: changing target tokens after position t leaves outputs <= t
        # (for every t at once: the changed copies of x stacked along the batch).
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
        assert_close(output, expected,
                     f"{on_x}, no padding, training=False (post-norm: norm1(x + causal "
                     "self-attention), norm2(x + cross-attention to context), "
                     "norm3(x + ffn))")
        assert_close(reference.to_numpy(layer(x, context)), expected,
                     f"{on_x}, training left out (inference)")
        assert_close(reference.to_numpy(layer.last_attention_scores), expected_scores,
                     f"{on_x}: last_attention_scores")


@graded("DecoderLayer", points=0.5)
def test_DecoderLayer__padding(DecoderLayer, namespace):
    """with both padding masks (target padding first or last), the outputs and cross-attention
    weights at the real targets are those of the sentences alone, without their padding,
    and padded source tokens get no weight.
    """
    r = rng("DecoderLayer/padding")
    close: dict[str, Any] = dict(rtol=1e-4, atol=1e-5)
    for d_model, num_heads, dff, batch, length, source_length in [(8, 2, 16, 2, 4, 6),
                                                                  (12, 3, 20, 3, 5, 7)]:
        what = f"DecoderLayer(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=0.5)
        layer = kept(namespace, "DecoderLayer", arguments)  # test_DecoderLayer's, built
        if layer is None:
            layer = DecoderLayer(**arguments)
        x = r.normal(size=(batch, length, d_model)).astype("float32")
        context = r.normal(size=(batch, source_length, d_model)).astype("float32")
        on_x = f"{what} on x {x.shape}, context {context.shape} with padding masks"
        source_real = np.ones((batch, source_length), dtype=bool)
        source_real[0, -3:] = False
        source_real[1, 1] = False
        target_real = np.ones((batch, length), dtype=bool)
        target_real[0, :2] = False  # padding first: only the x_padding_mask hides it
        target_real[1, -1:] = False
        masks = dict(x_padding_mask=target_real, context_padding_mask=source_real)
        name, message = reference.raised(lambda: layer(x, context, training=False, **masks))
        if name is not None and name != "NotImplementedError":
            raise AssertionError(f"{on_x}: {message}" + reference.explain(message))
        reference.randomize_own_weights(layer, reference.DECODER_WEIGHTS, r)
        output = reference.to_numpy(layer(x, context, training=False, **masks))
        assert_shape(output, x.shape, on_x)
        # The cross-attention's scores, where the layer keeps them as (B, heads, T, S);
        # which scores it keeps is test_DecoderLayer's (None: not judged here).
        scores = _kept_scores(layer, (batch, num_heads, length, source_length))
        # A sentence's first real target is not judged: with a look-ahead mask that
        # hides the diagonal (test_DecoderLayer's mistake) it has no key left.
        judged = target_real.copy()
        judged[np.arange(batch), np.argmax(target_real, axis=1)] = False

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
        assert_true(np.allclose(moved[judged], output[judged], **close),
                    f"{on_x}: changing padded target tokens (x_padding_mask False, here at "
                    "the start of a sentence) changed the outputs at real positions; the "
                    "self-attention must hide padded target keys too.")

        if scores is not None:
            assert_finite(scores, f"{on_x}: last_attention_scores")
            real_scores = np.moveaxis(scores, 1, 2)[target_real]  # (real targets, heads, S)
            hidden = np.broadcast_to(~source_real[:, None, :],
                                     (batch, length, source_length))[target_real]
            hidden = np.broadcast_to(hidden[:, None, :], real_scores.shape)
            assert_true(np.all(np.abs(real_scores[hidden]) <= 1e-7),
                        f"{on_x}: the cross-attention gives weight to padded source tokens.")
            assert_true(np.allclose(real_scores.sum(axis=-1), 1.0, atol=1e-4),
                        f"{on_x}: the cross-attention weights of a query do not sum to 1.")

        # Each pair of sentences given alone without its padding: the same outputs
        # (and weights) at the real targets; what they should be is test_DecoderLayer's.
        for b in range(batch):
            target, source = target_real[b], source_real[b]
            alone = reference.to_numpy(layer(x[b:b + 1, target], context[b:b + 1, source],
                                             training=False))[0]
            mine = judged[b][target]  # the judged targets, among the real ones
            where = (f"{on_x}: sentence {b} (target {_padded(target)}, source "
                     f"{_padded(source)}) at its real targets, against the same layer on its "
                     f"{int(target.sum())} real targets and {int(source.sum())} real source "
                     "tokens alone, without masks")
            assert_close(output[b, target][mine], alone[mine],
                         f"{where}; padded tokens must change nothing")
            alone_scores = _kept_scores(layer, (1, num_heads, int(target.sum()),
                                                int(source.sum())))
            if scores is not None and alone_scores is not None:
                assert_close(scores[b][:, target][:, mine][:, :, source],
                             alone_scores[0][:, mine], f"{where}: last_attention_scores")


@graded("DecoderLayer", points=0.25)
def test_DecoderLayer__training(DecoderLayer, namespace):
    """dropout while training, after each attention sublayer; nothing dropped at inference."""
    r = rng("DecoderLayer/training")
    close: dict[str, Any] = dict(rtol=1e-4, atol=1e-5)
    arguments = dict(d_model=8, num_heads=2, dff=16, dropout_rate=0.5)
    x = r.normal(size=(2, 4, 8)).astype("float32")
    context = r.normal(size=(2, 6, 8)).astype("float32")
    on_x = (f"DecoderLayer(d_model=8, num_heads=2, dff=16, dropout_rate=0.5) on x {x.shape}, "
            f"context {context.shape}")
    layer = kept(namespace, "DecoderLayer", arguments)  # test_DecoderLayer's first, built
    if layer is None:
        layer = DecoderLayer(**arguments)
        layer(x, context, training=False)
    # Random weights of the layer's own shapes: its sizes are the main test's.
    weights = reference.randomize_own_weights(layer, reference.DECODER_WEIGHTS, r)
    output = reference.to_numpy(layer(x, context, training=False))
    again = reference.to_numpy(layer(x, context, training=False))
    assert_true(np.array_equal(again, output),
                f"{on_x}: two calls with training=False gave different outputs; dropout acts "
                "only while training.")
    trained = reference.to_numpy(layer(x, context, training=True))
    assert_true(not np.allclose(trained, output, **close),
                f"{on_x}: training=True gave the inference output; dropout must act while "
                "training (pass `training` on).")
    # Dropout after each attention sublayer: with the other sublayers silenced
    # (all-zero weights give an output of exactly 0), training must still change
    # the output.
    for left, silenced in [("self_attention", ("cross_attention", "ffn.dense2")),
                           ("cross_attention", ("self_attention", "ffn.dense2"))]:
        reference.set_weights(layer, {path: [np.zeros_like(w) for w in weights[path]]
                                      for path in silenced})
        quiet = reference.to_numpy(layer(x, context, training=False))
        changed = r.normal(size=x.shape).astype("float32")  # (x + 1: normalised away)
        other = reference.to_numpy(layer(changed, context, training=False))
        if np.allclose(other, quiet, **close):
            # The output no longer depends on x: a residual is missing (the main
            # test's mistake), and no dropout of `left` could reach the output.
            reference.set_weights(layer, {path: weights[path] for path in silenced})
            continue
        trained = reference.to_numpy(layer(x, context, training=True))
        assert_true(not np.allclose(trained, quiet, **close),
                    f"{on_x}: with only {left} left (the other sublayers giving 0), "
                    "training=True gave the inference output; the output of "
                    f"{left} needs dropout too: x = norm(x + dropout(...)).")
        reference.set_weights(layer, {path: weights[path] for path in silenced})


@graded("DecoderLayer", points=0.5)
def test_DecoderLayer__config(DecoderLayer):
    """get_config() / from_config(), and a ValueError for invalid arguments."""
    check_config(DecoderLayer, {"d_model": 12, "num_heads": 3, "dff": 20, "dropout_rate": 0.5},
                 "DecoderLayer(d_model=12, num_heads=3, dff=20, dropout_rate=0.5)")

    # Invalid arguments: a ValueError at once (any message).
    invalid: list[dict[str, Any]] = [dict(d_model=8, num_heads=3, dff=16), dict(d_model=8, num_heads=0, dff=16),
                                     dict(d_model=8, num_heads=2, dff=16, dropout_rate=-0.1)]
    for arguments in invalid:
        text = ", ".join(f"{k}={v}" for k, v in arguments.items())
        name, _ = reference.raised(lambda: DecoderLayer(**arguments))
        assert_true(name == "ValueError",
                    f"DecoderLayer({text}) should raise a ValueError at once; it "
                    f"{'raised ' + name if name else 'did not raise'}.")
