"""lab2's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

from typing import Any

import numpy as np

from autograder.hidden import graded
from autograder.references import lab2 as reference
from autograder.testkernel.layers import check_config
from autograder.kernels.probe import StudentCodeError
from autograder.testkernel.testing import (as_array, assert_close, assert_finite, assert_shape,
                                           assert_true, rng)


@graded("mha_weight_shapes", points=1)
def test_mha_weight_shapes(mha_weight_shapes):
    """the 8 shapes, in the order of Keras's layer, for many sizes, with and without value_dim."""
    names = ["query kernel", "query bias", "key kernel", "key bias", "value kernel",
             "value bias", "output kernel", "output bias"]
    r = rng("mha_weight_shapes")
    cases: list[tuple[tuple[int, ...], dict[str, Any]]] = [((16, 1, 2), {}), ((16, 3, 2), {}), ((16, 3, 5), {}),
             ((64, 8, 8), {}), ((10, 2, 3), {"value_dim": 7}),
             ((12, 4, 5), {"value_dim": None}), ((7, 5, 1), {"value_dim": 2})]
    for _ in range(3):
        d_model, num_heads, key_dim, value_dim = (int(n) for n in r.integers(1, 20, size=4))
        cases.append(((d_model, num_heads, key_dim), {"value_dim": value_dim}))
    for args, kwargs in cases:
        what = "mha_weight_shapes(" + ", ".join(
            [str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]) + ")"
        result = mha_weight_shapes(*args, **kwargs)
        assert_true(isinstance(result, (list, tuple)) and len(result) == 8,
                    f"{what}: returned {type(result).__name__}"
                    f"{' of %d items' % len(result) if isinstance(result, (list, tuple)) else ''}"
                    ", expected a list of 8 shape tuples.")
        for index, (shape, expected, name) in enumerate(
                zip(result, reference.mha_weight_shapes(*args, **kwargs), names)):
            try:
                shape = tuple(int(n) for n in shape)
            except (TypeError, ValueError):
                raise AssertionError(f"{what}: item {index} ({name}) is {shape!r}, "
                                     "expected a tuple of integers.") from None
            assert_true(shape == tuple(expected),
                        f"{what}: item {index} ({name}) has shape {shape}, which is not "
                        "the shape Keras gives it.")


@graded("SelfAttention", points=1.5)
def test_SelfAttention(SelfAttention):
    """outputs and weights, with and without masks, for random projections."""
    r = rng("SelfAttention")

    reference.assert_from_scratch(SelfAttention, "SelfAttention", "Dense layers and keras.ops")

    def make_layer(key_dim, d_model):
        layer = SelfAttention(key_dim=key_dim)
        assert_true(len(layer.weights) == 0,
                    f"SelfAttention(key_dim={key_dim}) has weights before its first call; "
                    "create weights in build (Dense sublayers are built there).")
        x = r.normal(size=(2, 3, d_model)).astype("float32")
        output = layer(x)
        assert_true(not isinstance(output, (tuple, list)),
                    "SelfAttention(...)(inputs) returned a tuple; return only the output "
                    "unless return_attention_scores=True.")
        assert_shape(output, (2, 3, key_dim), f"SelfAttention(key_dim={key_dim}) on "
                                              f"inputs (2, 3, {d_model})")
        borrowed = reference.borrowed_attention_classes(reference.describe(layer))
        assert_true(not borrowed, f"SelfAttention uses {borrowed}; write it from Dense "
                                  "layers and keras.ops.")
        weights = []
        for name in ("query_dense", "key_dense", "value_dense"):
            try:
                projection = getattr(layer, name)
                description = reference.describe(projection)
            except (StudentCodeError, AttributeError):
                raise AssertionError(f"SelfAttention has no sublayer `{name}`; create "
                                     f"self.{name} = keras.layers.Dense(key_dim) in "
                                     "__init__.") from None
            kinds = [description["class"], *description["bases"]]
            assert_true(any(kind.endswith(".Dense") for kind in kinds),
                        f"SelfAttention.{name} is a {description['class']}, expected a "
                        "keras.layers.Dense.")
            current = [as_array(w, f"SelfAttention.{name} weights")
                       for w in projection.get_weights()]
            shapes = [tuple(w.shape) for w in current]
            assert_true(shapes in ([(d_model, key_dim), (key_dim,)], [(d_model, key_dim)]),
                        f"SelfAttention.{name} has weights of shapes {shapes} on inputs of "
                        f"size {d_model}, expected a Dense of key_dim={key_dim} units.")
            new = [(1.3 * r.normal(size=current[0].shape) / np.sqrt(d_model)).astype("float32")]
            if len(current) == 2:
                new.append((0.5 * r.normal(size=current[1].shape)).astype("float32"))
            projection.set_weights(new)
            weights += new if len(new) == 2 else [new[0], np.zeros(key_dim, "float32")]
        return layer, weights

    def run(layer, weights, x, mask, what, tensor=False):
        expected_output, expected_scores = reference.self_attention(x, weights, mask)
        arguments = {} if mask is None else {"attention_mask": mask}
        inputs = reference.tensor(x, like=layer) if tensor else x
        result = layer(inputs, return_attention_scores=True, **arguments)
        assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"{what}: returned {type(result).__name__}, expected a tuple "
                    "(output, scores) with return_attention_scores=True.")
        output, scores = result
        scores = assert_shape(scores, expected_scores.shape, f"{what}, scores (second item)")
        output = assert_shape(output, expected_output.shape, f"{what}, output (first item)")
        if mask is not None:
            finite = np.all(np.isfinite(scores.astype(np.float64))) and np.all(
                np.isfinite(output.astype(np.float64)))
            assert_true(bool(finite),
                        f"{what}: NaN or inf in the scores or the output; with -inf every "
                        "score of a query whose keys are all masked is -inf and the softmax "
                        "gives 0/0: mask with a large negative number instead, "
                        "large_negative(scores.dtype).")
        scores = assert_finite(scores, f"{what}, scores").astype(np.float64)
        output = assert_finite(output, f"{what}, output").astype(np.float64)
        allowed = np.ones(scores.shape, dtype=bool) if mask is None else \
            np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
        live = np.asarray(allowed.any(axis=-1))  # fully masked rows are not graded
        sums = scores.sum(axis=-1)[live]
        assert_true(np.allclose(sums, 1.0, atol=1e-4),
                    f"{what}: a query's weights do not sum to 1 over the keys; take the "
                    "softmax over the last axis (the keys).")
        if mask is not None:
            assert_true(np.all(np.abs(scores[~allowed & live[..., None]]) <= 1e-6),
                        f"{what}: masked keys (mask False) must get weight 0; mask True "
                        "means 'may attend'.")
        if not np.allclose(scores[live], expected_scores[live], rtol=1e-4, atol=1e-5):
            key_dim = weights[0].shape[-1]
            for factor, hint in [(np.sqrt(key_dim), "the scores are not scaled; divide "
                                                    "by sqrt(key_dim)"),
                                 (1 / np.sqrt(key_dim), "the scores are divided by key_dim; "
                                                        "divide by sqrt(key_dim)"),
                                 (np.sqrt(key_dim / x.shape[-1]), "the scores are divided by "
                                  "sqrt(d_model); divide by sqrt(key_dim)")]:
                scaled = list(weights)
                scaled[0], scaled[1] = weights[0] * factor, weights[1] * factor
                guess = reference.self_attention(x, scaled, mask)[1]
                assert_true(not np.allclose(scores[live], guess[live], rtol=1e-4, atol=1e-5),
                            f"{what}: {hint}.")
        assert_close(scores[live], expected_scores[live], f"{what}, scores")
        assert_close(output[live], expected_output[live], f"{what}, output")

    layer, weights = make_layer(4, 6)
    x = r.normal(size=(2, 5, 6)).astype("float32")
    run(layer, weights, x, None, "SelfAttention(key_dim=4) on (2, 5, 6), no mask")
    causal = np.tril(np.ones((5, 5), dtype=bool))
    run(layer, weights, x, causal, "SelfAttention(key_dim=4), attention_mask=causal (5, 5)")
    random_mask = r.random(size=(2, 5, 5)) < 0.6
    random_mask[:, :, 0] = True
    random_mask[1, 3, :] = False
    run(layer, weights, x, random_mask,
        "SelfAttention(key_dim=4), attention_mask (2, 5, 5) with a fully masked row")
    run(layer, weights, x, random_mask[:, None, 0, :].repeat(5, axis=1),
        "SelfAttention(key_dim=4), a padding mask (2, 5, 5)", tensor=True)

    layer, weights = make_layer(3, 5)
    run(layer, weights, r.normal(size=(1, 7, 5)).astype("float32"), None,
        "SelfAttention(key_dim=3) on (1, 7, 5)")
    layer, weights = make_layer(8, 8)
    run(layer, weights, r.normal(size=(3, 4, 8)).astype("float32"),
        np.tril(np.ones((3, 4, 4), dtype=bool)), "SelfAttention(key_dim=8) on (3, 4, 8), causal")


@graded("SelfAttention", points=0.25)
def test_SelfAttention__config(SelfAttention):
    """key_dim stored as self.key_dim and returned by get_config(); from_config() rebuilds the
    layer.
    """
    layer = SelfAttention(key_dim=8)
    try:
        stored = layer.key_dim
    except Exception:  # noqa: BLE001 - a missing attribute, reported below
        stored = "missing"
    assert_true(stored == 8, f"SelfAttention(key_dim=8).key_dim is {stored!r}; store the "
                             "argument as self.key_dim.")
    check_config(SelfAttention, {"key_dim": 8}, "SelfAttention(key_dim=8)")


@graded("SelfAttention", points=0.25)
def test_SelfAttention__validation(SelfAttention):
    """a ValueError in __init__ when key_dim is not a positive integer, any message."""
    SelfAttention(key_dim=4)  # a valid layer first (an unanswered stub stops here)
    for bad in (0, -3):
        what = f"SelfAttention(key_dim={bad})"
        error, message = reference.raised(lambda bad=bad: SelfAttention(key_dim=bad))
        assert_true(error is not None, f"{what} raised no error; check key_dim in __init__ "
                                       "and raise a ValueError.")
        assert_true(error == "ValueError", f"{what} raised {error}, expected a ValueError: "
                                           f"{message}")


@graded("split_heads", points=1)
def test_split_heads(split_heads):
    """(B, T, num_heads * depth) to (B, num_heads, T, depth), NumPy arrays and backend tensors."""
    r = rng("split_heads")
    cases = [(2, 5, 3, 4), (2, 3, 3, 2), (1, 4, 1, 8), (3, 4, 4, 4), (2, 6, 2, 3),
             (1, 2, 4, 1)]
    for index, (batch, length, heads, depth) in enumerate(cases):
        x = r.normal(size=(batch, length, heads * depth)).astype("float32")
        what = f"split_heads(x {x.shape}, num_heads={heads})"
        if index % 3 == 0:
            result = split_heads(x, heads)
        elif index % 3 == 1:
            result = split_heads(x, num_heads=heads)
        else:
            result = split_heads(reference.tensor(x, like=split_heads), num_heads=heads)
            what += " on a backend tensor"
        result = assert_shape(result, (batch, heads, length, depth), what)
        if heads > 1 and length > 1 and np.allclose(result, x.reshape(batch, heads, length, depth)):
            raise AssertionError(
                f"{what}: the shape is right but each head holds whole tokens: reshape "
                "to (B, T, H, depth) first, then move the heads in front of time "
                "(ops.transpose(x, (0, 2, 1, 3))).")
        assert_close(result, reference.split_heads(x, heads), what)


@graded("merge_heads", points=1)
def test_merge_heads(merge_heads):
    """(B, num_heads, T, depth) back to (B, T, num_heads * depth), NumPy arrays and backend
    tensors.
    """
    r = rng("merge_heads")
    cases = [(2, 3, 5, 4), (2, 3, 3, 2), (1, 1, 4, 8), (3, 4, 4, 4), (2, 2, 6, 3),
             (1, 4, 2, 1)]
    for index, (batch, heads, length, depth) in enumerate(cases):
        x = r.normal(size=(batch, heads, length, depth)).astype("float32")
        what = f"merge_heads(x {x.shape})"
        if index % 2:
            result = merge_heads(reference.tensor(x, like=merge_heads))
            what += " on a backend tensor"
        else:
            result = merge_heads(x)
        result = assert_shape(result, (batch, length, heads * depth), what)
        if heads > 1 and length > 1 and np.allclose(result, x.reshape(batch, length, heads * depth)):
            raise AssertionError(
                f"{what}: the shape is right but the numbers of different heads and tokens "
                "are mixed: move the heads back behind time (ops.transpose(x, (0, 2, 1, 3))) "
                "before the reshape.")
        assert_close(result, reference.merge_heads(x), what)


@graded("MultiHeadAttention", points=2.5)
def test_MultiHeadAttention(MultiHeadAttention):
    """weights (shapes and order, made in build) and outputs and scores without a mask, against
    Keras's layer with your weights.
    """
    r = rng("MultiHeadAttention")
    reference.assert_from_scratch(MultiHeadAttention)

    def case(*arguments, **keywords):
        return reference.check_mha_case(MultiHeadAttention, r, *arguments, **keywords)

    # Self-attention: heads, the lecture's one head, value_dim.
    case(3, 4, None, True, (2, 5, 12), None, first=True)
    case(1, 2, None, True, (2, 6, 16), None)
    case(2, 3, 5, True, (2, 5, 8), None)
    # Cross-attention: T_q != T_k and d_query != d_value; then a key of its own size.
    layer, query, value, _, weights = case(2, 4, None, True, (2, 3, 6), (2, 5, 10),
                                           send_tensors=True)
    explicit = layer(query, value, key=None)
    assert_close(explicit, reference.multi_head_attention(query, value, weights)[0],
                 "layer(query, value, key=None) (the key is the value)")
    case(4, 2, 3, True, (2, 4, 6), (2, 6, 5), key_shape=(2, 6, 7))
    case(2, 3, 4, True, (3, 6, 5), (3, 4, 9), key_shape=(3, 4, 3))
    # Without biases: four kernels.
    case(2, 3, None, False, (2, 3, 6), (2, 5, 10))
    case(2, 3, 4, False, (1, 4, 6), None)


@graded("MultiHeadAttention", points=1)
def test_MultiHeadAttention__masks(MultiHeadAttention):
    """attention_mask and use_causal_mask, alone and together, in self- and cross-attention:
    hidden keys get weight 0, and each query's output and weights are those the layer gives
    with only the keys it may see.
    """
    r = rng("MultiHeadAttention/masks")

    def case(*arguments, **keywords):
        # Judged against the layer itself: its values are test_MultiHeadAttention's.
        return reference.check_mha_case(MultiHeadAttention, r, *arguments, own=True,
                                        **keywords)

    case(1, 2, None, True, (2, 6, 16), None, mask="random")
    case(2, 3, 5, True, (2, 5, 8), None, causal=True)
    case(2, 4, None, True, (2, 3, 6), (2, 5, 10), mask="padding", send_tensors=True)
    case(4, 2, 3, True, (2, 4, 6), (2, 6, 5), key_shape=(2, 6, 7), mask="random",
         causal=True)
    case(2, 3, 4, True, (3, 6, 5), (3, 4, 9), key_shape=(3, 4, 3), causal=True)
    case(2, 3, None, False, (2, 3, 6), (2, 5, 10), causal=True)
    case(2, 3, 4, False, (1, 4, 6), None, mask="padding")


@graded("MultiHeadAttention", points=1)
def test_MultiHeadAttention__dropout(MultiHeadAttention):
    """dropout, nothing at inference, the attention probabilities dropped and rescaled when
    training.
    """
    r = rng("MultiHeadAttention/dropout")
    reference.assert_from_scratch(MultiHeadAttention)

    # Every comparison is with the layer's own output at inference (its own
    # weights, never set by this test), so that a mistake in the computation
    # itself costs the first tests cell's points only, and a dropout mistake
    # this cell's only.
    # Inputs of one size, num_heads * key_dim = value_dim * num_heads = that size:
    # cross-attention between sizes is the first cell's.
    copies = 400
    query = np.repeat(r.normal(size=(1, 3, 8)).astype("float32"), copies, axis=0)
    value = np.repeat(r.normal(size=(1, 4, 8)).astype("float32"), copies, axis=0)
    for rate in (0.0, 0.4):
        what = f"MultiHeadAttention(num_heads=2, key_dim=4, dropout={rate})"
        layer = MultiHeadAttention(num_heads=2, key_dim=4, dropout=rate)
        layer(query, value)
        reference.assert_from_scratch(layer)
        expected = as_array(layer(query, value, training=False), what).astype(np.float64)
        assert_close(layer(query, value, training=False), expected,
                     f"{what}, training=False twice (dropout must do nothing at inference)")
        assert_close(layer(query, value), expected,
                     f"{what}, called without `training` (dropout must do nothing; the same "
                     "output as training=False)")
        first = as_array(layer(query, value, training=True), what).astype(np.float64)
        if rate == 0.0:
            assert_close(first, expected, f"{what}, training=True (a rate of 0 drops nothing)")
            continue
        second = as_array(layer(query, value, training=True), what).astype(np.float64)
        assert_true(not np.allclose(first, expected, rtol=1e-3, atol=1e-4),
                    f"{what}, training=True: the output is the inference output; apply "
                    "dropout to the attention probabilities when training is true.")
        assert_true(not np.allclose(first, second, rtol=1e-3, atol=1e-4),
                    f"{what}, training=True: two calls gave the same output; the dropout "
                    "mask must be new at each call (a keras.layers.Dropout sublayer does it).")
        both = np.concatenate([first, second])
        spread = both.std(axis=0) / np.sqrt(len(both))
        z = np.abs(both.mean(axis=0) - expected[0]) / np.maximum(spread, 1e-6)
        assert_true(np.max(z) < 6.0,
                    f"{what}, training=True: on average over {len(both)} samples the "
                    "output is not the inference output; inverted dropout scales the "
                    "kept probabilities by 1 / (1 - rate) (keras.layers.Dropout does it).")

    # Where dropout acts. One head, no biases, and two keys equal to each other
    # (the value input holds one vector twice): each attention probability is
    # 1/2, and the output of a query is a multiple of its output at inference.
    # Dropout on the probabilities (B, H, T_q, T_k), rate 1/2, keeps 0, 1 or 2 of
    # them, each doubled: 0, 1 or 2 times that output, whole. Dropout on the
    # values, the heads' context or the output drops single numbers instead.
    # The scores returned are the probabilities before dropout, as Keras
    # returns them: those of inference.
    rate, batch, length = 0.5, 64, 5
    what = ("MultiHeadAttention(num_heads=1, key_dim=2, value_dim=6, dropout=0.5, "
            "use_bias=False) on two equal keys, training=True")
    query = r.normal(size=(batch, length, 6)).astype("float32")
    value = np.repeat(r.normal(size=(batch, 1, 6)).astype("float32"), 2, axis=1)
    layer = MultiHeadAttention(num_heads=1, key_dim=2, value_dim=6, dropout=rate,
                               use_bias=False)
    at_inference = layer(query, value, return_attention_scores=True, training=False)
    assert_true(isinstance(at_inference, (tuple, list)) and len(at_inference) == 2,
                f"{what}: returned {type(at_inference).__name__}, expected a tuple (output, "
                "scores) with return_attention_scores=True.")
    contexts = as_array(at_inference[0], what).astype(np.float64)
    inference_scores = as_array(at_inference[1], what).astype(np.float64)
    result = layer(query, value, return_attention_scores=True, training=True)
    assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"{what}: returned {type(result).__name__}, expected a tuple (output, "
                "scores) with return_attention_scores=True.")
    output, scores = result
    scores = assert_shape(scores, inference_scores.shape, f"{what}: scores")
    assert_true(np.allclose(scores, inference_scores, rtol=1e-4, atol=1e-5),
                f"{what}: the scores returned when training differ from those at "
                "inference; apply dropout after the softmax (not to the scores before it) "
                "and return the probabilities as they are before dropout, as "
                "keras.layers.MultiHeadAttention does.")
    output = assert_shape(output, contexts.shape, f"{what}: output").astype(np.float64)
    norms = np.maximum(np.sum(contexts * contexts, axis=-1), 1e-12)
    multiples = np.rint(np.sum(output * contexts, axis=-1) / norms)  # (batch, length)
    whole = (np.isin(multiples, (0.0, 1.0, 2.0))
             & np.all(np.isclose(output, multiples[..., None] * contexts,
                                 rtol=1e-4, atol=1e-5), axis=-1))
    assert_true(np.all(whole),
                f"{what}: dropout must act on the attention probabilities (B, num_heads, "
                "T_q, T_k); with two equal keys each query's output would then be 0, 1 or "
                "2 times its output at inference, whole, but here some of its numbers are "
                "dropped and others kept (dropout on the values, the heads' context or the "
                "output?) or the kept probabilities are not scaled by 1 / (1 - rate).")
    dropped = float(np.mean(multiples == 0.0))
    assert_true(0.1 < dropped < 0.45,
                f"{what}: {dropped:.0%} of the queries lost both their probabilities, "
                "where about 25% should at a rate of 0.5; drop each attention probability "
                "with probability `dropout`.")


@graded("MultiHeadAttention", points=0.25)
def test_MultiHeadAttention__config(MultiHeadAttention):
    """each constructor argument stored under its own name and returned by get_config();
    from_config() rebuilds the layer.
    """
    arguments = dict(num_heads=4, key_dim=3, value_dim=5, dropout=0.25, use_bias=False)
    what = "MultiHeadAttention(num_heads=4, key_dim=3, value_dim=5, dropout=0.25, use_bias=False)"
    layer = MultiHeadAttention(**arguments)
    reference.build_quietly(layer, (1, 2, 6))  # so that what it is made of shows
    reference.assert_from_scratch(layer)
    for name, expected in arguments.items():
        try:
            stored = getattr(layer, name)
        except Exception:  # noqa: BLE001 - a missing attribute, reported below
            stored = "missing"
        assert_true(stored == expected, f"{what}.{name} is {stored!r}; store each "
                                        "constructor argument under its own name.")
    check_config(MultiHeadAttention, arguments, what)
    default = MultiHeadAttention(num_heads=2, key_dim=3).get_config()
    assert_true(default.get("value_dim") in (None, 3),
                "MultiHeadAttention(num_heads=2, key_dim=3).get_config() has value_dim="
                f"{default.get('value_dim')!r}, expected None (or key_dim, 3).")


@graded("MultiHeadAttention", points=0.25)
def test_MultiHeadAttention__validation(MultiHeadAttention):
    """invalid arguments raise a ValueError in __init__, any message."""
    layer = MultiHeadAttention(num_heads=2, key_dim=4)  # a valid layer first (an unanswered stub stops here)
    reference.build_quietly(layer, (1, 2, 6))  # so that what it is made of shows
    reference.assert_from_scratch(layer)
    invalid: list[dict[str, Any]] = [dict(num_heads=0, key_dim=4), dict(num_heads=2, key_dim=-1),
                                     dict(num_heads=2, key_dim=4, dropout=1.5)]
    for arguments in invalid:
        what = "MultiHeadAttention(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
        error, message = reference.raised(lambda: MultiHeadAttention(**arguments))
        assert_true(error is not None, f"{what} raised no error; check the arguments in "
                                       "__init__ and raise a ValueError.")
        assert_true(error == "ValueError", f"{what} raised {error}, expected a ValueError: "
                                           f"{message}")
