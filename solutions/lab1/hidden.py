"""lab1's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

import numpy as np

from autograder.hidden import graded
from autograder.references import lab1 as reference
from autograder.testkernel.testing import (as_array, assert_close, assert_finite, assert_shape,
                                           assert_true, rng)


@graded("dot_scores", points=1)
def test_dot_scores(dot_scores):
    """the scores of one query and of batches of queries."""
    assert_close(dot_scores(np.array([0.7, 0.3], dtype="float32"),
                            np.array([[0.8, 0.2]], dtype="float32")),
                 [0.62], "dot_scores(query (0.7, 0.3), keys [(0.8, 0.2)])")
    r = rng("dot_scores")
    for query_shape, keys_shape in [((5,), (7, 5)),
                                    ((3, 5), (3, 7, 5)),
                                    ((2, 3, 4), (2, 3, 6, 4))]:
        query = r.normal(size=query_shape).astype("float32")
        keys = r.normal(size=keys_shape).astype("float32")
        expected = reference.dot_scores(query, keys)
        assert_close(dot_scores(query, keys), expected,
                     f"dot_scores(query {query_shape}, keys {keys_shape})")


@graded("softmax", points=1)
def test_softmax(softmax):
    """the weights along the last axis and along `axis`."""
    r = rng("softmax")

    def check(x, axis, what, call):
        expected = reference.softmax(x, axis=axis)
        try:
            weights = call()
        except Exception as error:  # noqa: BLE001 - named when it is the keepdims slip
            if "broadcast" not in str(error):
                raise
            raise AssertionError(
                f"{what}: {error}; keep the reduced axis (keepdims=True) in the maximum "
                "and the sum, so that they broadcast back along `axis`.") from None
        weights = as_array(weights, what)
        assert_shape(weights, x.shape, what)
        weights = assert_finite(weights, what).astype(np.float64)
        assert_true(np.all(weights >= -1e-7), f"{what}: some weights are negative.")
        sums = weights.sum(axis=axis)
        assert_true(np.allclose(sums, 1.0, atol=1e-4),
                    f"{what}: the weights along axis {axis} do not sum to 1 "
                    f"(sums range from {sums.min():.3g} to {sums.max():.3g}); "
                    "normalise along `axis`, with keepdims=True.")
        assert_close(weights, expected, what)

    # Default axis (the last one) on a non-square matrix, and a vector.
    x = (3 * r.normal(size=(4, 7))).astype("float32")
    check(x, -1, "softmax(x (4, 7))", lambda: softmax(x))
    v = (3 * r.normal(size=(6,))).astype("float32")
    check(v, -1, "softmax(x (6,))", lambda: softmax(v))

    # Other axes, passed by keyword; non-square so a wrong axis cannot pass.
    for shape, axis in [((5, 3), 0), ((2, 4, 3), 1), ((2, 4, 3), -1), ((3, 2, 5), 0)]:
        y = (3 * r.normal(size=shape)).astype("float32")
        check(y, axis, f"softmax(x {shape}, axis={axis})",
              lambda y=y, axis=axis: softmax(y, axis=axis))


@graded("softmax", points=0.5)
def test_softmax__overflow(softmax):
    """no overflow: vectors near 1000, -1000 and 5000, and rows that far apart."""
    r = rng("softmax/overflow")
    centres = (1000, -1000, 0, 5000)
    vectors = [(c + (10 if c == 0 else 1) * r.normal(size=5)).astype("float32")
               for c in centres]
    # Huge inputs: no overflow at +1000 and no 0/0 at -1000, each a vector (1-D)...
    cases = [(x, f"softmax(x (5,)) with values near {c}") for c, x in zip(centres, vectors)]
    # ...and together, rows far apart: each row's own maximum is subtracted. Judged
    # where rows of ordinary values come out right (the axis and keepdims are
    # test_softmax's).
    ordinary = r.normal(size=(3, 4)).astype("float32")
    try:
        rows = as_array(softmax(ordinary), "softmax(x (3, 4))")
    except Exception:  # noqa: BLE001 - test_softmax says what is wrong
        rows = None
    if rows is not None and rows.shape == ordinary.shape and np.allclose(
            rows, reference.softmax(ordinary), rtol=1e-4, atol=1e-6):
        cases.append((np.stack(vectors), "softmax(x (4, 5)) with rows near 1000, -1000, 0 "
                                         "and 5000"))
    for x, what in cases:
        found = assert_shape(softmax(x), x.shape, what)
        assert_true(bool(np.all(np.isfinite(found))),
                    f"{what}: inf or NaN in the weights; np.exp(1000) overflows, so "
                    "subtract the maximum of each slice (keepdims=True) before np.exp.")
        assert_close(found, reference.softmax(x), what)


@graded("softmax", points=0.5)
def test_softmax__masks(softmax):
    """a masked entry (-inf) gets weight 0."""
    r = rng("softmax/masks")
    # -inf entries get weight 0 (each vector keeps at least one finite entry). One
    # vector (1-D) at a time: the axis and keepdims are test_softmax's.
    for size, count in [(6, 2), (6, 5), (4, 1)]:
        masked = (2 * r.normal(size=size)).astype("float32")
        masked[r.permutation(size)[:count]] = -np.inf
        hidden = np.isneginf(masked)
        what = f"softmax(x ({size},)) with {count} entries equal to -inf"
        found = assert_shape(softmax(masked), (size,), what)
        assert_true(bool(np.all(np.isfinite(found))),
                    f"{what}: inf or NaN in the weights; exp(-inf) is 0, so a -inf entry "
                    "needs no special case once the maximum of its slice is subtracted.")
        assert_true(bool(np.all(np.abs(found[hidden]) <= 1e-7)),
                    f"{what}: the -inf entries must get weight 0.")
        assert_close(found, reference.softmax(masked), what)


@graded("attention_pool", points=2)
def test_attention_pool(attention_pool):
    """the context and the weights of one query and of batches of queries."""
    r = rng("attention_pool")
    cases = [((6,), (5, 6), (5, 3)),
             ((4, 6), (4, 5, 6), (4, 5, 3)),
             ((2, 3, 6), (2, 3, 5, 6), (2, 3, 5, 3))]
    for query_shape, keys_shape, values_shape in cases:
        query = r.normal(size=query_shape).astype("float32")
        keys = r.normal(size=keys_shape).astype("float32")
        values = r.normal(size=values_shape).astype("float32")
        expected_context, expected_weights = reference.attention_pool(query, keys, values)
        what = (f"attention_pool(query {query_shape}, keys {keys_shape}, "
                f"values {values_shape})")
        result = attention_pool(query, keys, values)
        assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"{what}: returned {type(result).__name__}, expected a tuple "
                    "(context, weights).")
        context, weights = result
        weights = assert_shape(weights, expected_weights.shape,
                               f"{what}, weights (second item)")
        context = assert_shape(context, expected_context.shape,
                               f"{what}, context (first item)")
        weights = assert_finite(weights, f"{what}, weights").astype(np.float64)
        assert_true(np.allclose(weights.sum(axis=-1), 1.0, atol=1e-4),
                    f"{what}: the weights do not sum to 1 over the "
                    f"{keys_shape[-2]} keys.")
        if not np.allclose(weights, expected_weights, rtol=1e-4, atol=1e-5):
            scaled = reference.softmax(
                reference.dot_scores(query, keys) / np.sqrt(query_shape[-1]), axis=-1)
            assert_true(not np.allclose(weights, scaled, rtol=1e-4, atol=1e-5),
                        f"{what}: the weights are scaled by 1/sqrt(d); attention_pool "
                        "uses the plain (unscaled) dot scores.")
        assert_close(weights, expected_weights, f"{what}, weights")
        assert_close(context, expected_context, f"{what}, context")


@graded("bilinear_scores", points=1)
def test_bilinear_scores(bilinear_scores):
    """the scores for rectangular and square `W`, one query and batches of queries."""
    r = rng("bilinear_scores")
    cases = [((4,), (6, 3), (4, 3)),
             ((2, 4), (2, 6, 3), (4, 3)),
             ((5,), (6, 5), (5, 5)),  # square W, not symmetric
             ((2, 3, 5), (2, 3, 4, 5), (5, 5))]
    for query_shape, keys_shape, W_shape in cases:
        query = r.normal(size=query_shape).astype("float32")
        keys = r.normal(size=keys_shape).astype("float32")
        W = r.normal(size=W_shape).astype("float32")
        expected = reference.bilinear_scores(query, keys, W)
        assert_close(bilinear_scores(query, keys, W), expected,
                     f"bilinear_scores(query {query_shape}, keys {keys_shape}, "
                     f"W {W_shape})")


@graded("additive_scores", points=2)
def test_additive_scores(additive_scores):
    """the scores for `d_q != d_k` and `d_q == d_k`, one query and batches of queries."""
    r = rng("additive_scores")
    cases = [((3,), (5, 4), 6),
             ((2, 3), (2, 5, 4), 6),
             ((4,), (5, 4), 3),  # d_q == d_k
             ((2, 2, 3), (2, 2, 5, 4), 6)]
    for query_shape, keys_shape, h in cases:
        d_q, d_k = query_shape[-1], keys_shape[-1]
        query = r.normal(size=query_shape).astype("float32")
        keys = r.normal(size=keys_shape).astype("float32")
        W1 = (0.7 * r.normal(size=(d_q + d_k, h))).astype("float32")
        w2 = r.normal(size=(h,)).astype("float32")
        expected = reference.additive_scores(query, keys, W1, w2)
        what = (f"additive_scores(query {query_shape}, keys {keys_shape}, "
                f"W1 {(d_q + d_k, h)}, w2 {(h,)})")
        scores = as_array(additive_scores(query, keys, W1, w2), what)
        if scores.shape == expected.shape and not np.allclose(scores, expected,
                                                              rtol=1e-4, atol=1e-5):
            pre = (np.broadcast_to(query[..., None, :], keys_shape[:-1] + (d_q,))
                   .astype(np.float64) @ W1[:d_q] + keys.astype(np.float64) @ W1[d_q:])
            swapped = np.tanh(keys.astype(np.float64) @ W1[:d_k]
                              + np.broadcast_to(query[..., None, :], keys_shape[:-1] + (d_q,))
                              .astype(np.float64) @ W1[d_k:]) @ w2
            for guess, hint in [(pre @ w2, "tanh seems to be missing"),
                                (swapped, "the stack looks like [k; q]; the query "
                                          "comes first: [q; k]")]:
                assert_true(not np.allclose(scores, guess, rtol=1e-4, atol=1e-5),
                            f"{what}: {hint}.")
        assert_close(scores, expected, what)


@graded("scaled_dot_product_attention", points=1)
def test_scaled_dot_product_attention(scaled_dot_product_attention):
    """the output and weights without a mask."""
    r = rng("scaled_dot_product_attention")

    def run(query_shape, key_shape, value_shape, pass_mask):
        query = r.normal(size=query_shape).astype("float32")
        key = r.normal(size=key_shape).astype("float32")
        value = r.normal(size=value_shape).astype("float32")
        expected_output, expected_weights = reference.scaled_dot_product_attention(
            query, key, value)
        what = (f"scaled_dot_product_attention(query {query_shape}, key {key_shape}, "
                f"value {value_shape}{', mask=None' if pass_mask else ''})")
        if pass_mask:
            result = scaled_dot_product_attention(query, key, value, mask=None)
        else:
            result = scaled_dot_product_attention(query, key, value)
        assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"{what}: returned {type(result).__name__}, expected a tuple "
                    "(output, weights).")
        output, weights = result
        weights = assert_shape(weights, expected_weights.shape,
                               f"{what}, weights (second item)")
        output = assert_shape(output, expected_output.shape,
                              f"{what}, output (first item)")
        weights = assert_finite(weights, f"{what}, weights").astype(np.float64)
        sums = weights.sum(axis=-1)
        assert_true(np.allclose(sums, 1.0, atol=1e-4),
                    f"{what}: the weights of a query do not sum to 1 over the keys "
                    "(softmax over the last axis).")
        if not np.allclose(weights, expected_weights, rtol=1e-4, atol=1e-5):
            for guess, hint in reference.scale_mistakes(query, key, value_shape[-1]):
                assert_true(not np.allclose(weights, guess, rtol=1e-4, atol=1e-5),
                            f"{what}: {hint}.")
        assert_close(weights, expected_weights, f"{what}, weights")
        assert_close(output, expected_output, f"{what}, output")

    # The mask argument left out, then passed as None; 2-D, 3-D and 4-D inputs.
    run((3, 8), (5, 8), (5, 4), pass_mask=False)
    run((2, 3, 8), (2, 5, 8), (2, 5, 4), pass_mask=True)
    run((2, 2, 4, 16), (2, 2, 6, 16), (2, 2, 6, 3), pass_mask=False)


@graded("scaled_dot_product_attention", points=0.5)
def test_scaled_dot_product_attention__masks(scaled_dot_product_attention):
    """look-ahead, padding and random masks, every query with at least one visible key:
    masked keys get weight 0, and a query's weights and output are those it gets alone
    with only its visible keys.
    """
    r = rng("scaled_dot_product_attention/masks")

    def masked(query_shape, key_shape, value_shape, mask, mask_text):
        query = r.normal(size=query_shape).astype("float32")
        key = r.normal(size=key_shape).astype("float32")
        value = r.normal(size=value_shape).astype("float32")
        expected_output, expected_weights = reference.scaled_dot_product_attention(
            query, key, value, mask=mask)
        what = (f"scaled_dot_product_attention(query {query_shape}, key {key_shape}, "
                f"value {value_shape}, mask={mask_text})")
        result = scaled_dot_product_attention(query, key, value, mask=mask)
        assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"{what}: returned {type(result).__name__}, expected a tuple "
                    "(output, weights).")
        weights = assert_shape(result[1], expected_weights.shape,
                               f"{what}, weights (second item)")
        output = assert_shape(result[0], expected_output.shape,
                              f"{what}, output (first item)")
        weights = assert_finite(weights, f"{what}, weights").astype(np.float64)
        allowed = np.broadcast_to(mask, weights.shape)
        assert_true(np.all(np.abs(weights[~allowed]) <= 1e-6),
                    f"{what}: masked keys (mask False) must get weight 0; "
                    "mask True means 'may attend'.")
        assert_true(np.allclose(weights.sum(axis=-1), 1.0, atol=1e-4),
                    f"{what}: the weights of a query do not sum to 1 over its visible "
                    "keys; mask the scores before the softmax, so that the others "
                    "renormalise.")
        # Each query against only the keys it may see, without a mask, by the same
        # function: the same weights there and the same output. (How the scores are
        # computed and scaled is test_scaled_dot_product_attention's.)
        leading = query.shape[:-2]
        queries = query.reshape(-1, *query.shape[-2:])
        keys = np.broadcast_to(key, leading + key.shape[-2:]).reshape(-1, *key.shape[-2:])
        values = np.broadcast_to(value, leading + value.shape[-2:]).reshape(
            -1, *value.shape[-2:])
        visible = allowed.reshape(-1, *allowed.shape[-2:])
        flat_weights = weights.reshape(-1, *weights.shape[-2:])
        flat_output = output.astype(np.float64).reshape(*flat_weights.shape[:2], -1)
        for n in range(queries.shape[0]):
            for i in range(queries.shape[1]):
                seen = visible[n, i]
                alone = scaled_dot_product_attention(queries[n, i:i + 1], keys[n, seen],
                                                     values[n, seen])
                where = (f"{what}: query {i} of slice {n}, against the same function on it "
                         f"alone with only its {int(seen.sum())} visible keys and no mask")
                assert_close(flat_weights[n, i][seen],
                             as_array(alone[1], f"{where}, weights")[0], f"{where}, weights")
                assert_close(flat_output[n, i], as_array(alone[0], f"{where}, output")[0],
                             f"{where}, output")

    # Look-ahead mask (T, T), broadcast over a batch of 2.
    causal = np.tril(np.ones((5, 5), dtype=bool))
    masked((2, 5, 8), (2, 5, 8), (2, 5, 3), causal, "causal (5, 5)")

    # Padding mask (B, 1, 1, T_k) on 4-D inputs.
    padding = np.ones((2, 1, 1, 6), dtype=bool)
    padding[0, ..., 4:] = False
    padding[1, ..., 2:] = False
    masked((2, 2, 4, 16), (2, 2, 6, 16), (2, 2, 6, 3), padding, "padding (2, 1, 1, 6)")

    # Random mask (T_q, T_k); the first key is visible to every query.
    random_mask = r.random(size=(4, 7)) < 0.5
    random_mask[:, 0] = True
    masked((2, 4, 8), (2, 7, 8), (2, 7, 5), random_mask, "random (4, 7)")


@graded("scaled_dot_product_attention", points=0.5)
def test_scaled_dot_product_attention__masked_rows(scaled_dot_product_attention):
    """a query whose keys are all masked gives finite numbers, no NaN."""
    r = rng("scaled_dot_product_attention/masked_rows")
    # A random mask (T_q, T_k) with one query that sees no key, and a padding mask
    # (B, 1, 1, T_k) that hides every key of the second sentence.
    random_mask = r.random(size=(4, 7)) < 0.6
    random_mask[:, 0] = True
    random_mask[2, :] = False
    padding = np.ones((2, 1, 1, 5), dtype=bool)
    padding[1] = False
    for shapes, mask, mask_text in [
            (((2, 4, 8), (2, 7, 8), (2, 7, 5)), random_mask,
             "(4, 7) whose row 2 is all False"),
            (((2, 2, 3, 8), (2, 2, 5, 8), (2, 2, 5, 4)), padding,
             "padding (2, 1, 1, 5), all False for the second sentence")]:
        query, key, value = (r.normal(size=shape).astype("float32") for shape in shapes)
        what = (f"scaled_dot_product_attention(query {shapes[0]}, key {shapes[1]}, "
                f"value {shapes[2]}, mask={mask_text})")
        result = scaled_dot_product_attention(query, key, value, mask=mask)
        assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"{what}: returned {type(result).__name__}, expected a tuple "
                    "(output, weights).")
        weights_shape = shapes[0][:-1] + shapes[1][-2:-1]
        weights = assert_shape(result[1], weights_shape, f"{what}, weights (second item)")
        output = assert_shape(result[0], shapes[0][:-1] + shapes[2][-1:],
                              f"{what}, output (first item)")
        dead = ~np.broadcast_to(mask, weights_shape).any(axis=-1)  # queries with no key
        finite = (np.all(np.isfinite(weights[dead].astype(np.float64)))
                  and np.all(np.isfinite(output[dead].astype(np.float64))))
        assert_true(bool(finite),
                    f"{what}: a query whose keys are all masked gives NaN or inf; "
                    "it must stay finite (mask with a large negative number, "
                    "large_negative(scores.dtype), rather than -inf).")
