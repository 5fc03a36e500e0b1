"""lab6's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

import numpy as np

from autograder.hidden import graded
from autograder.references import lab6 as reference
from autograder.testkernel.testing import (as_array, assert_close, assert_shape, assert_true,
                                           hosted, hoster, keep, kept, rng)


@graded("RotaryEmbedding", points=1.5)
def test_RotaryEmbedding(RotaryEmbedding):
    """the rotated values at positions 0 .. T-1, for several shapes and head_dims."""
    r = rng("RotaryEmbedding")
    for shape, base in [((2, 3, 6, 8), 10_000.0), ((4, 10), 10_000.0), ((1, 2, 7, 6), 50.0)]:
        x = r.normal(size=shape).astype("float32")
        what = f"RotaryEmbedding(head_dim={shape[-1]}, base={base}) on x {shape}"
        layer = RotaryEmbedding(head_dim=shape[-1], base=base)
        out = assert_shape(layer(x), shape, what)
        positions = np.arange(shape[-2])
        expected = reference.rotary(x, positions, base=base)
        got = as_array(out, what)
        if shape[-2] > 1 and not np.allclose(got, expected, atol=1e-4):
            for other, hint in reference.rotary_mistakes(x, positions, base):
                if np.allclose(got, other, atol=1e-4):
                    raise AssertionError(f"{what}: {hint}")
        assert_close(out, expected, what)


@graded("RotaryEmbedding", points=0.5)
def test_RotaryEmbedding__start(RotaryEmbedding):
    """the positions counted from `start`, up to 2047: row t turned as row start + t of a
    longer input.
    """
    r = rng("RotaryEmbedding/start")
    # A start far along too, up to the last position the text allows (2047): float32
    # angles there are rounded by ~2e-4, which the tolerance allows for.
    far = int(r.integers(1000, 2044))
    for shape, start in [((2, 2, 3, 8), 5), ((1, 1, 1, 4), 17), ((1, 2, 4, 16), far)]:
        x = r.normal(size=shape).astype("float32")
        layer = RotaryEmbedding(head_dim=shape[-1])
        positions = start + np.arange(shape[-2])
        what = (f"RotaryEmbedding(head_dim={shape[-1]}) on x {shape}, start={start}: "
                f"row t is position {start} + t")
        out = layer(x, start=start)
        atol = reference.rotary_atol(x, positions)
        # The positions are what this cell grades, against the layer itself: x given
        # at rows start .. of a longer input from position 0. What a position's
        # rotation is (layout, frequencies) is the values cell's.
        longer = np.concatenate([np.zeros(shape[:-2] + (start, shape[-1]), "float32"), x],
                                axis=-2)
        whole = as_array(layer(longer), f"RotaryEmbedding(head_dim={shape[-1]}) on x "
                                        f"{longer.shape}")
        assert_close(out, whole[..., start:, :],
                     f"{what} (against the same layer on x placed at rows {start} .. of a "
                     "longer input)", atol=atol)


@graded("RotaryEmbedding", points=0.5)
def test_RotaryEmbedding__config(RotaryEmbedding):
    """get_config() / from_config()."""
    reference.check_config(RotaryEmbedding, {"head_dim": 12, "base": 1234.0},
                           "RotaryEmbedding(head_dim=12, base=1234.0)")


@graded("DecoderOnlyBlock", points=1.5)
def test_DecoderOnlyBlock(DecoderOnlyBlock, namespace):
    """outputs without a cache, with the grader's weights."""
    construct = reference.constructor(namespace)
    r = rng("DecoderOnlyBlock")
    for d_model, num_heads, dff, batch, length in [(16, 2, 24, 2, 7), (12, 3, 20, 3, 5)]:
        what = f"DecoderOnlyBlock(d_model={d_model}, num_heads={num_heads}, dff={dff})"
        arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff)
        block = DecoderOnlyBlock(**arguments)
        x = r.normal(size=(batch, length, d_model)).astype("float32")
        assert_shape(block(x), (batch, length, d_model), f"{what} on x {x.shape}")
        keep(namespace, "DecoderOnlyBlock", arguments, block)  # built: the next tests take it
        parameters = reference.random_parameters(
            r, reference.parameter_shapes("block", d_model, num_heads, dff))
        reference.give_weights(construct, block, "block", parameters, what)
        expected, _, _ = reference.block_forward(parameters, x, num_heads)
        assert_close(block(x), expected, f"{what} on x {x.shape} (random weights)")


@graded("DecoderOnlyBlock", points=0.5)
def test_DecoderOnlyBlock__causal(DecoderOnlyBlock, namespace):
    """causal, a change at position t changes no output before t."""
    r = rng("DecoderOnlyBlock/causal")
    arguments = dict(d_model=16, num_heads=2, dff=24)
    what = "DecoderOnlyBlock(d_model=16, num_heads=2, dff=24)"
    block = kept(namespace, "DecoderOnlyBlock", arguments)  # test_DecoderOnlyBlock's first
    if block is None:
        block = DecoderOnlyBlock(**arguments)
    x = r.normal(size=(2, 8, 16)).astype("float32")
    before = as_array(block(x), what)
    for t in (7, 3, 0):
        changed = x.copy()
        changed[:, t] = r.normal(size=(2, 16))
        after = as_array(block(changed), what)
        assert_true(np.allclose(after[:, :t], before[:, :t], rtol=1e-4, atol=1e-5),
                    f"{what}: a new token at position {t} changed the outputs before it; "
                    "the query at m may see the keys 0 .. m only.")
        assert_true(not np.allclose(after[:, t], before[:, t], rtol=1e-4, atol=1e-5),
                    f"{what}: a new token at position {t} did not change the output at {t}.")


@graded("DecoderOnlyBlock", points=1)
def test_DecoderOnlyBlock__cache(DecoderOnlyBlock, namespace):
    """the cache, outputs after a cache equal the full computation's, and the keys and values
    of every position are returned.
    """
    construct = reference.constructor(namespace)
    r = rng("DecoderOnlyBlock/cache")
    d_model, num_heads, dff = 16, 2, 24
    arguments = dict(d_model=d_model, num_heads=num_heads, dff=dff)
    what = f"DecoderOnlyBlock(d_model={d_model}, num_heads={num_heads}, dff={dff})"
    x = r.normal(size=(2, 9, d_model)).astype("float32")
    block = kept(namespace, "DecoderOnlyBlock", arguments)  # test_DecoderOnlyBlock's first
    if block is None:
        block = DecoderOnlyBlock(**arguments)
        block(x)
    parameters = reference.random_parameters(
        r, reference.parameter_shapes("block", d_model, num_heads, dff))
    reference.give_weights(construct, block, "block", parameters, what)
    expected, (keys, values), _ = reference.block_forward(parameters, x, num_heads)
    # The keys and values are compared with the grader's where the block's outputs
    # are right; elsewhere (test_DecoderOnlyBlock's points lost) the cache is judged
    # against the block itself: a cached call gives what the whole call gives.
    whole = block(x, return_cache=True)
    assert_true(isinstance(whole, (tuple, list)) and len(whole) == 2,
                f"{what}(x, return_cache=True): expected a tuple (out, (keys, values)).")
    whole_out = as_array(whole[0], f"{what}(x, return_cache=True)")
    right = whole_out.shape == expected.shape and bool(
        np.allclose(whole_out, expected, rtol=1e-4, atol=1e-5))
    if not right:
        keys, values = (as_array(part, f"{what}(x, return_cache=True): the cache")
                        for part in whole[1])
        expected = whole_out
    for cut in (5, 8):
        prefix = block(x[:, :cut], return_cache=True)
        assert_true(isinstance(prefix, (tuple, list)) and len(prefix) == 2,
                    f"{what}(x[:, :{cut}], return_cache=True): expected (out, (keys, values)).")
        cached_keys, cached_values = (as_array(part, f"{what}: the cache") for part in prefix[1])
        if right:
            _, (cached_keys, cached_values), _ = reference.block_forward(
                parameters, x[:, :cut], num_heads)
        call = f"{what}(x[:, {cut}:], cache=(keys, values) of the first {cut} positions, " \
               "return_cache=True)"
        result = block(x[:, cut:], cache=(cached_keys.astype("float32"),
                                          cached_values.astype("float32")),
                       return_cache=True)
        assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"{call}: expected a tuple (out, (keys, values)).")
        out, cache = result
        assert_true(isinstance(cache, (tuple, list)) and len(cache) == 2,
                    f"{call}: the cache returned is not a tuple (keys, values).")
        assert_close(out, expected[:, cut:], f"{call}: the outputs at positions {cut} .. "
                     + ("" if right else "(those of the same block on the whole x)"))
        got_keys, got_values = (as_array(part, call) for part in cache)
        head_dim = d_model // num_heads
        assert_true(got_keys.shape == (2, num_heads, 9, head_dim),
                    f"{call}: the returned keys have the shape {got_keys.shape}, expected "
                    f"{(2, num_heads, 9, head_dim)} (B, num_heads, every position, head_dim).")
        assert_close(got_keys, keys, f"{call}: the returned (rotated) keys")
        assert_close(got_values, values, f"{call}: the returned values")
    # From no cache, return_cache=True gives the keys and values of the call.
    result = block(x[:, :3], return_cache=True)
    assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"{what}(x[:, :3], return_cache=True): expected (out, (keys, values)).")
    assert_close(as_array(result[1][0], what), keys[:, :, :3],
                 f"{what}(x[:, :3], return_cache=True): the keys of positions 0 .. 2")
    assert_true(np.ndim(as_array(block(x[:, :3]), what)) == 3,
                f"{what}(x) without return_cache: return the output alone.")


@graded("DecoderOnlyBlock", points=0.5)
def test_DecoderOnlyBlock__config(DecoderOnlyBlock):
    """get_config() / from_config()."""
    reference.check_config(DecoderOnlyBlock, {"d_model": 20, "num_heads": 5, "dff": 12},
                           "DecoderOnlyBlock(d_model=20, num_heads=5, dff=12)")


@graded("MiniGPT", points=1.5)
def test_MiniGPT(MiniGPT, namespace):
    """the logits with the grader's weights, and the number of weights."""
    construct = reference.constructor(namespace)
    r = rng("MiniGPT")
    for vocab_size, num_layers, d_model, num_heads, dff in [(13, 2, 16, 2, 24),
                                                            (9, 1, 12, 3, 8)]:
        arguments = dict(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                         num_heads=num_heads, dff=dff)
        what = "MiniGPT(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
        model = MiniGPT(**arguments)
        ids = r.integers(0, vocab_size, size=(3, 6))
        assert_shape(model(ids), (3, 6, vocab_size), f"{what} on ids (3, 6)")
        keep(namespace, "MiniGPT", arguments, model)  # built: test_MiniGPT__cache takes it
        count = int(reference.to_numpy(reference.call_method(model, "count_params")))
        expected_count = reference.minigpt_parameter_count(vocab_size, num_layers, d_model, dff)
        assert_true(count == expected_count,
                    f"{what}: {count} weights, expected {expected_count} (the embedding, "
                    f"{num_layers} block(s) and the final norm; the output is tied).")
        parameters = reference.random_parameters(r, reference.parameter_shapes(
            "minigpt", d_model, num_heads, dff, vocab_size=vocab_size, num_layers=num_layers))
        reference.give_weights(construct, model, "minigpt", parameters, what)
        expected, _ = reference.minigpt_forward(parameters, ids, num_heads)
        assert_close(model(ids), expected, f"{what}: the logits on ids (3, 6) (random weights)")


@graded("MiniGPT", points=0.5)
def test_MiniGPT__cache(MiniGPT, namespace):
    """the cache, one (keys, values) per block in the stated shapes, and logits computed from
    the caches given equal to the full computation's.
    """
    construct = reference.constructor(namespace)
    r = rng("MiniGPT/cache")
    arguments = dict(vocab_size=13, num_layers=2, d_model=16, num_heads=2, dff=24)
    what = "MiniGPT(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
    ids = r.integers(0, 13, size=(2, 7))
    model = kept(namespace, "MiniGPT", arguments)  # test_MiniGPT's first, built
    if model is None:
        model = MiniGPT(**arguments)
        model(ids)
    parameters = reference.random_parameters(r, reference.parameter_shapes(
        "minigpt", 16, 2, 24, vocab_size=13, num_layers=2))
    try:
        reference.give_weights(construct, model, "minigpt", parameters, what)
        given_weights = True
    except AssertionError:  # sublayers named otherwise: test_MiniGPT's points lost
        given_weights = False
    expected, _ = reference.minigpt_forward(parameters, ids, 2)
    # Compared with the grader's logits and caches where the model's logits are
    # right; elsewhere (test_MiniGPT's points lost) the cache is judged against
    # the model itself: cached calls give what the whole call gives.
    whole = as_array(model(ids), f"{what}(ids)")
    right = given_weights and whole.shape == expected.shape and bool(
        np.allclose(whole, expected, rtol=1e-4, atol=1e-5))
    call = f"{what}(ids[:, :5], return_cache=True)"
    result = model(ids[:, :5], return_cache=True)
    assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"{call}: expected (logits, caches).")
    logits, caches = result
    assert_true(isinstance(caches, (tuple, list)) and len(caches) == 2,
                f"{call}: expected a list of 2 caches, one per block.")
    if not right:
        expected = whole
    assert_close(logits, expected[:, :5], f"{call}: the logits")
    # Each block's cache holds its keys and values, (B, num_heads, 5, head_dim).
    _, wanted = reference.minigpt_forward(parameters, ids[:, :5], 2)
    if not right:
        wanted = [tuple(as_array(part, call) for part in cache) for cache in caches]
    for index, (cache, (keys, values)) in enumerate(zip(caches, wanted)):
        assert_true(isinstance(cache, (tuple, list)) and len(cache) == 2,
                    f"{call}: cache {index} is not block {index}'s (keys, values).")
        for name, part, reference_part in (("keys", cache[0], keys), ("values", cache[1], values)):
            got = as_array(part, f"{call}: cache {index}'s {name}")
            assert_true(got.shape == reference_part.shape,
                        f"{call}: cache {index}'s {name} have the shape {got.shape}, expected "
                        f"{reference_part.shape}: (B, num_heads, positions, head_dim).")
            assert_close(got, reference_part, f"{call}: cache {index}'s {name} (block {index})")
    step = model(ids[:, 5:6], cache=caches, return_cache=True)
    assert_close(step[0], expected[:, 5:6],
                 f"{what}(ids[:, 5:6], cache=caches): the logits at position 5")
    assert_close(model(ids[:, 6:], cache=step[1]), expected[:, 6:],
                 f"{what}(ids[:, 6:], cache=the caches returned at position 5): position 6")
    # Computed from the keys and values given: the grader's caches of another prefix.
    other = r.integers(0, 13, size=(2, 5))
    _, given = reference.minigpt_forward(parameters, other, 2)
    wanted_logits, _ = reference.minigpt_forward(
        parameters, np.concatenate([other, ids[:, 5:6]], axis=1), 2)
    if not right:  # the model's own caches of that prefix, and its own logits
        given = [tuple(as_array(part, what) for part in cache)
                 for cache in model(other, return_cache=True)[1]]
        wanted_logits = as_array(model(np.concatenate([other, ids[:, 5:6]], axis=1)), what)
    given = [(keys.astype("float32"), values.astype("float32")) for keys, values in given]
    assert_close(model(ids[:, 5:6], cache=given), wanted_logits[:, 5:],
                 f"{what}(ids[:, 5:6], cache=the (keys, values) of another 5-token prefix, "
                 "computed by the grader): the logits must come from the keys and values "
                 "given, block i's cache to block i")


@graded("MiniGPT", points=0.5)
def test_MiniGPT__config(MiniGPT):
    """get_config() / from_config()."""
    arguments = {"vocab_size": 17, "num_layers": 3, "d_model": 24, "num_heads": 6, "dff": 8}
    reference.check_config(MiniGPT, arguments,
                           "MiniGPT(" + ", ".join(f"{k}={v}" for k, v in arguments.items())
                           + ")")


@graded("next_token_loss", points=1.5)
def test_next_token_loss(next_token_loss):
    """the loss on padded batches, with other pad_ids."""
    r = rng("next_token_loss")
    for batch, length, vocab, lengths, pad_id in [(4, 9, 7, [9, 5, 2, 7], 0),
                                                   (3, 6, 11, [6, 3, 4], 4),
                                                   (2, 5, 5, [5, 5], 0)]:
        ids = r.integers(0, vocab, size=(batch, length))
        ids[ids == pad_id] = (pad_id + 1) % vocab
        for row, real in enumerate(lengths):
            ids[row, real:] = pad_id
        logits = (2 * r.normal(size=(batch, length, vocab))).astype("float32")
        what = f"next_token_loss(logits {logits.shape}, token_ids {ids.shape} with " \
               f"{int((ids == pad_id).sum())} padded, pad_id={pad_id})"
        value = as_array(next_token_loss(logits, ids, pad_id=pad_id), what)
        assert_true(value.size == 1, f"{what}: returned shape {value.shape}, expected a scalar.")
        value = value.reshape(())
        expected = reference.next_token_loss(logits, ids, pad_id)
        if not np.isclose(value, expected, rtol=1e-4):
            unshifted = float(-np.mean([np.log(reference._softmax(logits[b, t])[ids[b, t]])
                                        for b in range(batch) for t in range(length)
                                        if ids[b, t] != pad_id]))
            assert_true(not np.isclose(value, unshifted, rtol=1e-4),
                        f"{what}: position t is compared with token t; the logits at t "
                        "predict token t + 1.")
        assert_close(value, expected, what)


@graded("next_token_loss", points=0.5)
def test_next_token_loss__differentiable(next_token_loss, namespace):
    """differentiable, its gradient with respect to the logits taken as model.fit takes it."""
    # The gradient is taken in the student's kernel, by a grader's fixture that calls
    # next_token_loss on backend tensors as model.fit does, and comes back as an array.
    # It must be the derivative of what the loss itself computes (its own values, right
    # or wrong, are test_next_token_loss's): along a random direction, the gradient's
    # slope must match the loss's change between two nearby logits.
    construct = reference.constructor(namespace)
    loss = reference.as_argument(next_token_loss)
    r = rng("next_token_loss/differentiable")
    for batch, length, vocab, lengths, pad_id in [(3, 7, 6, [7, 4, 2], 0),
                                                   (2, 5, 9, [5, 3], 3)]:
        ids = r.integers(0, vocab, size=(batch, length))
        ids[ids == pad_id] = (pad_id + 1) % vocab
        for row, real in enumerate(lengths):
            ids[row, real:] = pad_id
        logits = (2 * r.normal(size=(batch, length, vocab))).astype("float32")
        what = f"the gradient of next_token_loss(logits {logits.shape}, token_ids " \
               f"{ids.shape}, pad_id={pad_id}) with respect to the logits"
        problem, gradient = construct(reference.LOSS_GRADIENT_SOURCE, "loss_gradient", loss,
                                      logits, ids, pad_id)
        assert_true(not problem, f"{what}: {problem}. model.fit trains through the loss: "
                                 "compute with keras.ops on the tensors it is given (no "
                                 "NumPy, no float()) and return the tensor.")
        if gradient is None:  # a backend without gradients (numpy): nothing to take
            continue
        gradient = as_array(gradient, what).astype("float64")
        assert_true(gradient.shape == logits.shape,
                    f"{what}: shape {gradient.shape}, expected {logits.shape}.")
        direction, step = r.normal(size=logits.shape), 1e-2
        values = [float(as_array(next_token_loss((logits + sign * step * direction).astype(
            "float32"), ids, pad_id=pad_id), what).reshape(-1)[0]) for sign in (1, -1)]
        slope = (values[0] - values[1]) / (2 * step)
        claimed = float(np.sum(gradient * direction))
        assert_true(abs(claimed - slope) <= 2e-3 + 2e-2 * abs(slope),
                    f"{what}: along a random direction the gradient gives a slope of "
                    f"{claimed:.4g}, the loss's own values change at {slope:.4g}: the "
                    "gradient does not come from what the loss computes (a part computed "
                    "apart from the tensors, in NumPy or as a constant?).")


@graded("perplexity", points=1.5)
def test_perplexity(perplexity, namespace):
    """hand-made models on padded corpora, several batch sizes and pad_ids."""
    host = hoster(namespace)  # the models stay in the grader's kernel; perplexity calls them
    here = reference.language_models()
    r = rng("perplexity")
    for rows, length, batch_size, pad_id in [(7, 8, 3, 0), (5, 6, 64, 0), (6, 7, 4, 3)]:
        seed = int(r.integers(1_000_000))
        ids = r.integers(1, 9, size=(rows, length))
        ids[ids == pad_id] = 8
        for row in range(rows):
            ids[row, int(r.integers(2, length + 1)):] = pad_id
        model = host(here["make_model"](seed=seed))
        expected = reference.corpus_perplexity(here["make_model"](seed=seed), ids, pad_id)
        what = f"perplexity(model, token_ids {ids.shape} padded with {pad_id}, " \
               f"batch_size={batch_size}, pad_id={pad_id})"
        value = as_array(perplexity(model, ids, batch_size=batch_size, pad_id=pad_id), what)
        assert_true(value.size == 1, f"{what}: returned shape {value.shape}, expected a float.")
        assert_close(value.reshape(()), expected, what)


@graded("top_k_filter", points=1.5)
def test_top_k_filter(top_k_filter):
    """the distributions softmax(filtered) on batches with ties, k from 1 to V."""
    r = rng("top_k_filter")
    logits = np.round(2 * r.normal(size=(6, 9)), 1).astype("float32")
    logits[1, [2, 5, 7]] = logits[1].max()  # a three-way tie at the top
    logits[2, [0, 4]] = np.sort(logits[2])[-3]  # a tie at the third largest
    for k in (1, 2, 3, 5, 9, 12):
        what = f"top_k_filter(logits (6, 9) with ties, k={k})"
        out = as_array(top_k_filter(logits, k), what)
        assert_true(out.shape == logits.shape, f"{what}: returned shape {out.shape}, "
                                               f"expected {logits.shape}.")
        expected = reference.top_k_filter(logits, k)
        got = reference.filtered_probabilities(out, what)
        assert_close(got, reference._softmax(expected), f"{what}: softmax of the output")
        kept = np.isfinite(expected)
        assert_close(out[kept], logits[kept], f"{what}: the kept logits are unchanged")
    single = logits[3]
    what = "top_k_filter(one row (9,), k=4)"
    assert_close(reference.filtered_probabilities(as_array(top_k_filter(single, 4), what), what),
                 reference._softmax(reference.top_k_filter(single, 4)), what)


@graded("top_p_filter", points=1.5)
def test_top_p_filter(top_p_filter):
    """the distributions on batches, p from small to 1, the crossing token kept, equal
    probabilities the lower id first.
    """
    r = rng("top_p_filter")
    logits = (1.5 * r.normal(size=(8, 10))).astype("float32")
    for p in (0.05, 0.3, 0.55, 0.8, 0.95, 1.0):
        probabilities = reference._softmax(logits)
        ranked = -np.sort(-probabilities, axis=-1)
        totals = np.cumsum(ranked, axis=-1)[:, :-1]
        if p < 1 and np.min(np.abs(totals - p)) < 1e-4:
            continue  # too close to call in float32
        what = f"top_p_filter(logits (8, 10), p={p})"
        out = as_array(top_p_filter(logits, p), what)
        assert_true(out.shape == logits.shape, f"{what}: returned shape {out.shape}, "
                                               f"expected {logits.shape}.")
        got = reference.filtered_probabilities(out, what)
        expected = reference.top_p_filter(logits, p)
        if not np.allclose(got, reference._softmax(expected), atol=1e-5):
            crossing = np.isfinite(expected) & ~(np.isfinite(out) & (out > -1e8))
            assert_true(not crossing.any() or np.isfinite(out).sum() >= np.isfinite(
                expected).sum(), f"{what}: the token whose probability takes the running "
                "total past p is removed; keep it (the kept total must reach p).")
        assert_close(got, reference._softmax(expected), f"{what}: softmax of the output")
        kept = np.isfinite(expected)
        assert_close(out[kept], logits[kept], f"{what}: the kept logits are unchanged")
    # Equal probabilities, the lower id first: in each row two ids share a probability
    # and p falls halfway through the first of them, so the rule decides which one stays.
    for _ in range(4):
        row = (1.5 * r.normal(size=10)).astype("float32")
        order = np.argsort(-row, kind="stable")
        first, second = sorted(int(i) for i in r.choice(order[1:5], size=2, replace=False))
        row[second] = row[first]  # a tie, somewhere after the most probable token
        probabilities = reference._softmax(row)
        ranked = np.argsort(-probabilities, kind="stable")  # the lower id first on ties
        at = int(np.flatnonzero(ranked == first)[0])
        p = float(probabilities[ranked[:at]].sum() + 0.5 * probabilities[first])
        what = f"top_p_filter(one row (10,) with ids {first} and {second} tied at " \
               f"probability {probabilities[first]:.3f}, p={p:.3f})"
        out = as_array(top_p_filter(row, p), what)
        expected = reference.top_p_filter(row, p)
        got = reference.filtered_probabilities(out, what)
        if np.isfinite(out[second]) and out[second] > -1e8 and not (
                np.isfinite(out[first]) and out[first] > -1e8):
            raise AssertionError(f"{what}: id {second} is kept and id {first} removed; equal "
                                 "probabilities go in the order of their ids, the lower first.")
        assert_close(got, reference._softmax(expected), f"{what}: softmax of the output")


@graded("generate", points=1.5)
def test_generate(generate, namespace):
    """greedy generation gives the tokens of full recomputation, rows stopping at end_id."""
    host = hoster(namespace)  # the models stay in the grader's kernel; generate calls them
    here = reference.language_models()
    r = rng("generate")
    for rows, prompt_length, new, end_id, end_after in [(4, 3, 7, None, None),
                                                        (5, 2, 9, 2, 3), (1, 4, 6, 3, 2)]:
        seed = int(r.integers(1_000_000))
        options = {"seed": seed, "end_id": end_id, "end_after": end_after}
        model = host(here["make_model"](**options))
        prompts = r.integers(3, 9, size=(rows, prompt_length))
        expected = reference.greedy_generate(here["make_model"](**options), prompts, new,
                                             end_id)
        what = f"generate(model, prompt_ids {prompts.shape}, max_new_tokens={new}, " \
               f"end_id={end_id})"
        got = reference.pad_generated(generate(model, prompts, new, end_id=end_id),
                                      prompt_length + new, what)
        expected = np.pad(expected, ((0, 0), (0, prompt_length + new - expected.shape[1])))
        assert_true(got.shape[0] == rows, f"{what}: {got.shape[0]} rows, expected {rows}.")
        assert_true(np.array_equal(got[:, :prompt_length], prompts),
                    f"{what}: the first {prompt_length} columns are not the prompts; return "
                    "the prompts followed by the new tokens.")
        for index, (row, wanted) in enumerate(zip(got, expected)):
            if np.array_equal(row, wanted):
                continue
            at = int(np.argmax(row != wanted))
            raise AssertionError(
                f"{what}: row {index} differs from greedy decoding with the whole prefix "
                f"recomputed at column {at} (got {row[at]}, expected {wanted[at]}); feed "
                "the new token alone with the cache the model returned, and pick the "
                "argmax of the last position's logits" +
                (f"; after end_id={end_id} a row holds 0." if end_id is not None else "."))


@graded("generate", points=1)
def test_generate__cache(generate, namespace):
    """the cache is used, one call with the prompt then one call per new token with that token
    alone.
    """
    host = hoster(namespace)  # the models stay in the grader's kernel; generate calls them
    here = reference.language_models()
    r = rng("generate/cache")
    for rows, prompt_length, new in [(3, 5, 6), (2, 3, 9)]:
        seed = int(r.integers(1_000_000))
        # Beyond the prompt this model gives its true logits only when it is called with
        # its cache and the new token alone. It stays in the grader's kernel: generate
        # only calls it, its cache is an opaque handle there, and its log of calls is
        # the grader's own.
        model = host(here["make_model"](seed=seed, cache_only_after=prompt_length))
        prompts = r.integers(3, 9, size=(rows, prompt_length))
        what = f"generate(model, prompt_ids {prompts.shape}, max_new_tokens={new})"
        got = reference.pad_generated(generate(model, prompts, new), prompt_length + new, what)
        expected = reference.greedy_generate(here["make_model"](seed=seed), prompts, new)
        calls = [tuple(int(n) for n in call) for call in hosted(model).call_log()]
        cached = [(0, prompt_length)] + [(prompt_length + i, 1) for i in range(new - 1)]
        if np.array_equal(got, expected) and calls in (cached, cached + [
                (prompt_length + new - 1, 1)]):
            continue
        raise AssertionError(
            f"{what}: " + ("the tokens differ from greedy decoding with" if not
                           np.array_equal(got, expected) else "the tokens are right, but not "
                           "computed from") +
            " a model that answers beyond the prompt only when given its cache and the new "
            "token alone. Call the model once with the prompt (return_cache=True), then once "
            "per new token with that token alone, (B, 1), and the cache the last call "
            f"returned. Here {reference.describe_calls(calls)}; expected {new - 1} call(s) "
            "with the cache and one new token after the prompt's.")


@graded("generate", points=1)
def test_generate__sampling(generate, namespace):
    """sampling, temperature then top-k then top-p, by the frequencies of thousands of draws;
    one generator per call, a new draw at each step; a seed repeats them.
    """
    host = hoster(namespace)  # the models stay in the grader's kernel; generate calls them
    here = reference.language_models()
    r = rng("generate/sampling")
    rows = 6000
    for temperature, top_k, top_p in [(1.0, None, None), (0.7, 4, None), (1.6, None, 0.7),
                                      (2.0, 5, 0.8)]:
        for _ in range(100):  # a model on which a wrong order of the filters shows
            seed = int(r.integers(1_000_000))
            options = {"seed": seed, "margin": 0.0}
            prompt = r.integers(3, 9, size=(1, 3))
            logits = here["make_model"](**options).logits_after(prompt[0])
            if top_p is None or reference.filter_orders_differ(logits, temperature, top_k,
                                                               top_p):
                break
        model = host(here["make_model"](**options))
        prompts = np.repeat(prompt, rows, axis=0)
        draw_seed = int(r.integers(1_000_000))
        what = f"generate(model, {rows} copies of a prompt, max_new_tokens=1, " \
               f"temperature={temperature}, top_k={top_k}, top_p={top_p}, seed={draw_seed})"
        first = reference.pad_generated(
            generate(model, prompts, 1, temperature=temperature, top_k=top_k, top_p=top_p,
                     seed=draw_seed), 4, what)[:, 3]
        expected = reference.sampling_distribution(logits, temperature, top_k, top_p)
        frequencies = np.bincount(first, minlength=len(expected))[:len(expected)] / rows
        assert_true(np.all(first < len(expected)) and np.all(first >= 0),
                    f"{what}: ids outside the vocabulary.")
        impossible = (expected == 0) & (frequencies > 0)
        assert_true(not impossible.any(),
                    f"{what}: drew ids {np.flatnonzero(impossible).tolist()} that the filters "
                    "remove; divide by the temperature, then top_k_filter, then "
                    "top_p_filter, then sample from the softmax.")
        allowed = 4 * np.sqrt(expected * (1 - expected) / rows) + 0.004
        assert_true(np.all(np.abs(frequencies - expected) <= allowed),
                    f"{what}: the frequencies {np.round(frequencies, 3).tolist()} differ "
                    f"from the distribution {np.round(expected, 3).tolist()}; divide by the "
                    "temperature, then top_k_filter, then top_p_filter, then sample.")
        again = reference.pad_generated(
            generate(model, prompts[:200], 1, temperature=temperature, top_k=top_k,
                     top_p=top_p, seed=draw_seed), 4, what)
        once_more = reference.pad_generated(
            generate(model, prompts[:200], 1, temperature=temperature, top_k=top_k,
                     top_p=top_p, seed=draw_seed), 4, what)
        assert_true(np.array_equal(again, once_more),
                    f"{what}: the same seed gave other tokens; make the generator once per "
                    "call with np.random.default_rng(seed).")
    # One generator per call: the second new token is a new draw, given the first.
    options = {"seed": int(r.integers(1_000_000)), "margin": 0.0}
    model = host(here["make_model"](**options))
    hand = here["make_model"](**options)
    prompt_ids = [int(t) for t in r.integers(3, 9, size=3)]
    draw_seed = int(r.integers(1_000_000))
    what = f"generate(model, {rows} copies of a prompt, max_new_tokens=2, temperature=1.0, " \
           f"seed={draw_seed})"
    pairs = reference.pad_generated(
        generate(model, np.repeat([prompt_ids], rows, axis=0), 2, temperature=1.0,
                 seed=draw_seed), 5, what)[:, 3:]
    first = reference.sampling_distribution(hand.logits_after(prompt_ids))
    vocab = len(first)
    assert_true(np.all((pairs >= 0) & (pairs < vocab)), f"{what}: ids outside the vocabulary.")
    expected = np.stack([first[a] * reference.sampling_distribution(
        hand.logits_after(prompt_ids + [a])) for a in range(vocab)])  # (first, second)
    frequencies = np.zeros((vocab, vocab))
    np.add.at(frequencies, (pairs[:, 0], pairs[:, 1]), 1.0 / rows)
    allowed = 4 * np.sqrt(expected * (1 - expected) / rows) + 0.004
    assert_true(np.all(np.abs(frequencies - expected) <= allowed),
                f"{what}: the pairs of new tokens do not follow a draw of the first, then "
                "a new draw of the second given the first; make np.random.default_rng(seed) "
                "once per call, before the loop, and draw anew at each step.")
