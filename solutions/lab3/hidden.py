"""lab3's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

import re

import numpy as np

from autograder.hidden import graded
from autograder.references import lab3 as reference
from autograder.testkernel.layers import check_config
from autograder.kernels.probe import RemoteObject
from autograder.testkernel.testing import as_array, assert_close, assert_shape, assert_true, rng


@graded("positional_encoding", points=2)
def test_positional_encoding(positional_encoding):
    """the values for even depths."""
    def check(length, depth, atol=None, keywords=False):
        what = f"positional_encoding({length}, {depth})"
        table = (positional_encoding(length=length, depth=depth) if keywords
                 else positional_encoding(length, depth))
        table = assert_shape(as_array(table, what), (length, depth), what)
        expected = reference.positional_encoding(length, depth)
        values = table.astype(np.float64)
        if np.all(np.isfinite(values)) and not np.allclose(values, expected,
                                                           rtol=1e-4, atol=1e-4):
            for guess, hint in reference.positional_mistakes(length, depth):
                assert_true(not np.allclose(values, guess, rtol=1e-4, atol=1e-4),
                            f"{what}: {hint}.")
        assert_close(table, expected, what, atol=atol)

    check(3, 6)  # the lecture's table
    r = rng("positional_encoding")
    sizes = [(1, 4), (25, 16), (12, 2), (int(r.integers(20, 60)), int(2 * r.integers(4, 20)))]
    for length, depth in sizes:
        check(length, depth)
    check(9, 12, keywords=True)
    # A long table: float32 rounding of angles near 2000 rad allows ~1e-4.
    check(2048, 64, atol=5e-4)


@graded("positional_encoding", points=0.5)
def test_positional_encoding__odd_depth(positional_encoding):
    """an odd depth."""
    def even_depths_right(length, depth):
        """Whether the answer's tables of the even depths beside ``depth`` are right
        (the values' share); when they are not, the mistake is graded there."""
        for even in (depth - 1, depth + 1):
            if even < 2:
                continue
            try:
                table = as_array(positional_encoding(length, even), "")
            except Exception:  # noqa: BLE001 - wrong here too: graded by the values' test
                return False
            expected = reference.positional_encoding(length, even)
            if np.shape(table) != expected.shape or not np.allclose(
                    np.asarray(table, dtype=np.float64), expected, rtol=1e-4, atol=1e-4):
                return False
        return True

    r = rng("positional_encoding/odd_depth")
    for length, depth in [(10, 7), (8, 1), (2, 5), (30, 33),
                          (int(r.integers(20, 60)), int(2 * r.integers(4, 20) + 1))]:
        what = f"positional_encoding({length}, {depth})"
        try:
            table, failure = positional_encoding(length, depth), None
        except Exception as error:  # noqa: BLE001 - the student's error, as a message
            table, failure = None, error
        # Graded, the student's error arrives as "`label` raised ValueError: ...".
        raised = re.match(r"`[^`]*` raised (\w+)", str(failure))
        kind = raised.group(1) if raised else type(failure).__name__
        assert_true(failure is None,
                    f"{what} raised {kind}: with an odd depth there is one more sine "
                    "column than cosine columns (the last column is a sine without its "
                    "cosine).")
        table = assert_shape(as_array(table, what), (length, depth), what)
        expected = reference.positional_encoding(length, depth)
        values = table.astype(np.float64)
        if not np.allclose(values, expected, rtol=1e-4, atol=1e-4) and \
                not even_depths_right(length, depth):
            # The formula itself is wrong (its even depths too): that costs the values'
            # points (test_positional_encoding), not these. Here an odd depth runs
            # and gives `depth` columns.
            continue
        if np.all(np.isfinite(values)) and np.allclose(values[:, :-1], expected[:, :-1],
                                                       rtol=1e-4, atol=1e-4):
            assert_true(np.allclose(values[:, -1], expected[:, -1], rtol=1e-4, atol=1e-4),
                        f"{what}: the last column is wrong; with an odd depth it is the "
                        f"sine of pos / 10000^({depth - 1}/{depth}), without a cosine.")
        assert_close(table, expected, what)


@graded("positional_encoding", points=0.5)
def test_positional_encoding__dtype(positional_encoding):
    """the dtype, float32."""
    for length, depth in [(3, 6), (40, 16)]:
        what = f"positional_encoding({length}, {depth})"
        table = as_array(positional_encoding(length, depth), what)
        assert_true(table.dtype == np.float32,
                    f"{what}: the dtype is {table.dtype}, expected float32; cast the "
                    "table with .astype(np.float32) or ops.cast(..., 'float32').")


@graded("PositionalEmbedding", points=2.5)
def test_PositionalEmbedding(PositionalEmbedding):
    """values and weights."""
    r = rng("PositionalEmbedding")

    def class_names(target):
        """Class and base classes of a student object (remote or, outside grading, local)."""
        if isinstance(target, RemoteObject):
            described = target.describe()
            return [described["class"]] + described["bases"]
        return [f"{kind.__module__}.{kind.__qualname__}" for kind in type(target).__mro__]

    def shapes(weights):
        return [tuple(np.shape(weight)) for weight in weights]

    layer = PositionalEmbedding(vocab_size=11, d_model=6)
    classes = class_names(layer.token_embedding)
    assert_true(any(path.endswith(".Embedding") for path in classes),
                f"PositionalEmbedding.token_embedding is a {classes[0]}, expected a "
                "keras.layers.Embedding.")

    # Where the weights are made (build, not __init__) is graded on its own
    # (test_PositionalEmbedding__weights): here each layer is called once before
    # the grader sets its weights, so a layer whose build leaves token_embedding
    # unbuilt (or that has no build) is measured all the same.
    cases = [(11, 6, None, 2, 5), (40, 16, 64, 3, 12), (25, 7, 30, 2, 30), (9, 33, None, 1, 9)]
    for vocab_size, d_model, max_length, batch, length in cases:
        arguments = {"vocab_size": vocab_size, "d_model": d_model}
        if max_length is not None:
            arguments["max_length"] = max_length
        what = "PositionalEmbedding(" + ", ".join(f"{k}={v}" for k, v in arguments.items()) + ")"
        layer = PositionalEmbedding(**arguments)
        token_ids = r.integers(1, vocab_size, size=(batch, length)).astype("int32")
        token_ids[0, length // 2:] = 0  # padding at the end of the first sequence
        if batch > 1:
            token_ids[-1, :2] = 0  # and at the start of the last one
        # One call builds the layer and its sublayers (token_embedding included).
        assert_shape(layer(token_ids), (batch, length, d_model),
                     f"{what} on token ids {token_ids.shape}")
        trainable = shapes(layer.trainable_weights)
        assert_true(trainable == [(vocab_size, d_model)],
                    f"{what}: the trainable weights have shapes {trainable}, expected only "
                    f"the token table {(vocab_size, d_model)}; the sinusoidal table is a "
                    "constant, not a weight (trainable or not).")
        others = shapes(layer.non_trainable_weights)
        assert_true(others == [],
                    f"{what}: non-trainable weights of shapes {others}; keep the sinusoidal "
                    "table as a constant tensor, not a weight.")
        # Grader-chosen token vectors, larger than the initial ones; the reference
        # uses them as set, never what the layer reports about its weights.
        token_table = r.normal(size=(vocab_size, d_model)).astype("float32")
        layer.token_embedding.set_weights([token_table])
        output = as_array(layer(token_ids), f"{what} output")
        expected = reference.positional_embedding(token_ids, token_table)
        values = output.astype(np.float64)
        if values.shape == expected.shape and np.all(np.isfinite(values)) and \
                not np.allclose(values, expected, rtol=1e-4, atol=1e-4):
            tokens = token_table.astype(np.float64)[token_ids]
            table = reference.positional_encoding(length, d_model)
            for guess, hint in [
                (tokens + table, "the token vectors are not multiplied by sqrt(d_model)"),
                (tokens * d_model + table, "the token vectors are multiplied by d_model; "
                                           "multiply by sqrt(d_model)"),
                (tokens * np.sqrt(d_model), "the positional table is not added"),
                ((tokens + table) * np.sqrt(d_model),
                 "the positional table is scaled too; only the token vectors are "
                 "multiplied by sqrt(d_model)"),
                (tokens * np.sqrt(d_model)
                 + reference.positional_encoding(vocab_size, d_model)[token_ids],
                 "the table's rows are looked up with the token ids; take rows 0..T-1 "
                 "(one per position)"),
            ]:
                assert_true(not np.allclose(values, guess, rtol=1e-4, atol=1e-4),
                            f"{what}: {hint}.")
        assert_close(output, expected, f"{what} on token ids {token_ids.shape}")


@graded("PositionalEmbedding", points=0.5)
def test_PositionalEmbedding__weights(PositionalEmbedding):
    """the weights made in build, none before it."""
    def shapes(weights):
        return [tuple(int(n) for n in np.shape(weight)) for weight in weights]

    for vocab_size, d_model, length in [(11, 6, 5), (40, 16, 12)]:
        what = f"PositionalEmbedding(vocab_size={vocab_size}, d_model={d_model})"
        layer = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
        early = shapes(layer.weights)
        assert_true(early == [],
                    f"{what} already has weights of shapes {early} before build: create the "
                    "weights in build (build token_embedding there), not in __init__.")
        layer.build((None, length))
        built = shapes(layer.trainable_weights)
        assert_true((vocab_size, d_model) in built,
                    f"{what}.build((None, {length})) left "
                    + (f"only the weights {built}" if built else "no weight")
                    + f"; the token table {(vocab_size, d_model)} must exist after build, "
                    "before any call: build token_embedding in build "
                    "(self.token_embedding.build(input_shape)).")


@graded("PositionalEmbedding", points=0.5)
def test_PositionalEmbedding__mask(PositionalEmbedding):
    """compute_mask and mask_zero."""
    r = rng("PositionalEmbedding/mask")
    for vocab_size, d_model, batch, length in [(11, 6, 2, 5), (40, 16, 3, 12)]:
        what = f"PositionalEmbedding(vocab_size={vocab_size}, d_model={d_model})"
        layer = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
        token_ids = r.integers(1, vocab_size, size=(batch, length)).astype("int32")
        token_ids[0, length // 2:] = 0  # padding at the end of the first sequence
        token_ids[-1, :2] = 0  # and at the start of the last one
        mask = layer.compute_mask(token_ids)
        assert_true(mask is not None,
                    f"{what}.compute_mask returned None; with mask_zero=True it returns "
                    "token_ids != 0.")
        mask = assert_shape(as_array(mask, f"{what}.compute_mask"), token_ids.shape,
                            f"{what}.compute_mask")
        assert_true(mask.dtype == np.bool_,
                    f"{what}.compute_mask returned a mask of dtype {mask.dtype}; Keras masks "
                    "are boolean: return ops.not_equal(token_ids, 0) without casting it.")
        assert_true(np.array_equal(mask, reference.padding_mask(token_ids)),
                    f"{what}.compute_mask: expected True for real tokens and False where "
                    "the id is 0 (padding), wherever it is in the sentence.")

    layer = PositionalEmbedding(vocab_size=11, d_model=6, mask_zero=False)
    token_ids = np.array([[5, 8, 9, 0]], dtype="int32")
    assert_true(layer.compute_mask(token_ids) is None,
                "PositionalEmbedding(vocab_size=11, d_model=6, mask_zero=False).compute_mask "
                "must return None.")


@graded("PositionalEmbedding", points=0.5)
def test_PositionalEmbedding__config(PositionalEmbedding):
    """the arguments, get_config() and from_config()."""
    # Arguments stored under their own names (defaults included).
    layer = PositionalEmbedding(vocab_size=11, d_model=6)
    for name, value in [("vocab_size", 11), ("d_model", 6), ("max_length", 2048),
                        ("mask_zero", True)]:
        stored = getattr(layer, name, "(missing)")
        assert_true(stored == value,
                    f"PositionalEmbedding(vocab_size=11, d_model=6).{name} is {stored!r}, "
                    f"expected {value!r}: store each constructor argument under its own name.")

    # get_config() / from_config() round trip.
    check_config(PositionalEmbedding,
                 {"vocab_size": 13, "d_model": 10, "max_length": 40, "mask_zero": False},
                 "PositionalEmbedding(vocab_size=13, d_model=10, max_length=40, mask_zero=False)")


@graded("LearnedPositionalEmbedding", points=2.25)
def test_LearnedPositionalEmbedding(LearnedPositionalEmbedding):
    """values and weights."""
    r = rng("LearnedPositionalEmbedding")

    def class_names(target):
        """Class and base classes of a student object (remote or, outside grading, local)."""
        if isinstance(target, RemoteObject):
            described = target.describe()
            return [described["class"]] + described["bases"]
        return [f"{kind.__module__}.{kind.__qualname__}" for kind in type(target).__mro__]

    def shapes(weights):
        return sorted(tuple(np.shape(weight)) for weight in weights)

    # Two Embedding sublayers.
    layer = LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=8)
    for name in ("token_embedding", "position_embedding"):
        classes = class_names(getattr(layer, name))
        assert_true(any(path.endswith(".Embedding") for path in classes),
                    f"LearnedPositionalEmbedding.{name} is a {classes[0]}, expected "
                    "a keras.layers.Embedding.")

    # Where the weights are made (build, not __init__) is graded on its own
    # (test_LearnedPositionalEmbedding__weights): here each layer is called once
    # before the grader sets its weights, so a layer whose build leaves a sublayer
    # unbuilt (or that has no build) is measured all the same.
    # The first case has vocab_size <= max_length: a position table looked up with
    # the token ids gives numbers there (not an index error), and is named.
    cases = [(17, 7, 40, 2, 13), (11, 6, 8, 2, 5), (30, 16, 20, 3, 17), (9, 5, 6, 2, 4)]
    for vocab_size, d_model, max_length, batch, length in cases:
        what = (f"LearnedPositionalEmbedding(vocab_size={vocab_size}, d_model={d_model}, "
                f"max_length={max_length})")
        layer = LearnedPositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                           max_length=max_length)
        token_ids = r.integers(1, vocab_size, size=(batch, length)).astype("int32")
        token_ids[-1, length // 2:] = 0  # padding at the end of the last sequence
        token_ids[0, :2] = 0  # and at the start of the first one
        # One call builds the layer and both sublayers.
        assert_shape(layer(token_ids), (batch, length, d_model),
                     f"{what} on token ids {token_ids.shape}")
        weights = shapes(layer.weights)
        expected_shapes = sorted([(vocab_size, d_model), (max_length, d_model)])
        assert_true(weights == expected_shapes,
                    f"{what}: weights of shapes {weights}, expected {expected_shapes}.")
        trainable = shapes(layer.trainable_weights)
        assert_true(trainable == expected_shapes,
                    f"{what}: the trainable weights have shapes {trainable}, expected both "
                    f"tables {expected_shapes}: the position table is learned too (leave "
                    "the Embedding trainable).")
        # The grader's tables, as set (never read back from the layer).
        token_table = r.normal(size=(vocab_size, d_model)).astype("float32")
        position_table = r.normal(size=(max_length, d_model)).astype("float32")
        layer.token_embedding.set_weights([token_table])
        layer.position_embedding.set_weights([position_table])
        output = as_array(layer(token_ids), f"{what} output")
        expected = reference.learned_positional_embedding(token_ids, token_table,
                                                          position_table)
        values = output.astype(np.float64)
        if values.shape == expected.shape and np.all(np.isfinite(values)) and \
                not np.allclose(values, expected, rtol=1e-4, atol=1e-4):
            tokens = token_table.astype(np.float64)[token_ids]
            positions = position_table.astype(np.float64)[:length]
            guesses = [(tokens * np.sqrt(d_model) + positions,
                        "the token vectors are multiplied by sqrt(d_model); this layer "
                        "adds them unscaled"),
                       (tokens, "the position vectors are not added")]
            if vocab_size <= max_length:
                guesses.append((tokens + position_table.astype(np.float64)[token_ids],
                                "the position table is looked up with the token ids; "
                                "look up the positions ops.arange(T)"))
            for guess, hint in guesses:
                assert_true(not np.allclose(values, guess, rtol=1e-4, atol=1e-4),
                            f"{what}: {hint}.")
        assert_close(output, expected, f"{what} on token ids {token_ids.shape}")


@graded("LearnedPositionalEmbedding", points=0.25)
def test_LearnedPositionalEmbedding__weights(LearnedPositionalEmbedding):
    """the weights made in build, none before it."""
    def shapes(weights):
        return [tuple(int(n) for n in np.shape(weight)) for weight in weights]

    for vocab_size, d_model, max_length, length in [(11, 6, 8, 5), (30, 16, 20, 17)]:
        what = (f"LearnedPositionalEmbedding(vocab_size={vocab_size}, d_model={d_model}, "
                f"max_length={max_length})")
        layer = LearnedPositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                           max_length=max_length)
        early = shapes(layer.weights)
        assert_true(early == [],
                    f"{what} already has weights of shapes {early} before build: create the "
                    "weights in build (build both sublayers there), not in __init__.")
        layer.build((None, length))
        built = sorted(shapes(layer.weights))
        # What a first call adds was not made in build. The tables' shapes are
        # graded with the values (test_LearnedPositionalEmbedding), not here.
        try:
            layer(np.ones((2, length), dtype="int32"))
            called = sorted(shapes(layer.weights))
        except Exception:  # noqa: BLE001 - a call that fails is graded with the values
            called = sorted([(vocab_size, d_model), (max_length, d_model)])
        assert_true(len(built) >= 2 and built == called,
                    f"{what}.build((None, {length})) left "
                    + (f"only the weights {built}" if built else "no weight")
                    + f"; the token table {(vocab_size, d_model)} and the position table "
                    f"{(max_length, d_model)} must exist after build, before any call: "
                    "build both sublayers in build.")


@graded("LearnedPositionalEmbedding", points=0.5)
def test_LearnedPositionalEmbedding__validation(LearnedPositionalEmbedding):
    """T = max_length works, a longer sequence is a ValueError."""
    r = rng("LearnedPositionalEmbedding/validation")

    def error_kind(call):
        """None when ``call()`` returns, else the name of the exception it raised."""
        try:
            call()
            return None
        except Exception as error:  # noqa: BLE001 - the student's error, as a message
            # Graded, the student's error arrives as "`label` raised ValueError: ...".
            raised = re.match(r"`[^`]*` raised (\w+)", str(error))
            return raised.group(1) if raised else type(error).__name__

    for vocab_size, d_model, max_length in [(11, 6, 8), (30, 16, 20)]:
        what = (f"LearnedPositionalEmbedding(vocab_size={vocab_size}, d_model={d_model}, "
                f"max_length={max_length})")
        layer = LearnedPositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                           max_length=max_length)
        layer.build((None, 3))  # built on short sequences: the check belongs in call
        full = r.integers(1, vocab_size, size=(2, max_length)).astype("int32")
        kind = error_kind(lambda: layer(full))
        assert_true(kind != "ValueError",
                    f"{what} on a sequence of length {max_length} = max_length raised a "
                    "ValueError; only a sequence longer than max_length is too long.")
        too_long = r.integers(1, vocab_size, size=(2, max_length + 1)).astype("int32")
        kind = error_kind(lambda: layer(too_long))
        assert_true(kind == "ValueError",
                    f"{what}, built, on a sequence of length {max_length + 1}: expected a "
                    "ValueError that says the sequence is longer than max_length, raised "
                    "in call when the length is known; "
                    + ("nothing was raised." if kind is None else f"got {kind}."))


@graded("LearnedPositionalEmbedding", points=0.25)
def test_LearnedPositionalEmbedding__mask(LearnedPositionalEmbedding):
    """compute_mask and mask_zero."""
    r = rng("LearnedPositionalEmbedding/mask")
    for vocab_size, d_model, max_length, batch, length in [(11, 6, 8, 2, 5),
                                                          (30, 16, 20, 3, 17)]:
        what = (f"LearnedPositionalEmbedding(vocab_size={vocab_size}, d_model={d_model}, "
                f"max_length={max_length})")
        layer = LearnedPositionalEmbedding(vocab_size=vocab_size, d_model=d_model,
                                           max_length=max_length)
        token_ids = r.integers(1, vocab_size, size=(batch, length)).astype("int32")
        token_ids[-1, length // 2:] = 0  # padding at the end of the last sequence
        token_ids[0, :2] = 0  # and at the start of the first one
        mask = layer.compute_mask(token_ids)
        assert_true(mask is not None,
                    f"{what}.compute_mask returned None; with mask_zero=True it returns "
                    "token_ids != 0.")
        mask = assert_shape(as_array(mask, f"{what}.compute_mask"), token_ids.shape,
                            f"{what}.compute_mask")
        assert_true(mask.dtype == np.bool_,
                    f"{what}.compute_mask returned a mask of dtype {mask.dtype}; Keras masks "
                    "are boolean: return ops.not_equal(token_ids, 0) without casting it.")
        assert_true(np.array_equal(mask, reference.padding_mask(token_ids)),
                    f"{what}.compute_mask: expected True for real tokens and False where "
                    "the id is 0 (padding), wherever it is in the sentence.")

    layer = LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=8,
                                       mask_zero=False)
    assert_true(layer.compute_mask(np.array([[5, 8, 9, 0]], dtype="int32")) is None,
                "LearnedPositionalEmbedding(..., mask_zero=False).compute_mask must "
                "return None.")


@graded("LearnedPositionalEmbedding", points=0.25)
def test_LearnedPositionalEmbedding__config(LearnedPositionalEmbedding):
    """the arguments, get_config() and from_config()."""
    # Arguments stored under their own names (the default mask_zero included).
    layer = LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=8)
    for name, value in [("vocab_size", 11), ("d_model", 6), ("max_length", 8),
                        ("mask_zero", True)]:
        stored = getattr(layer, name, "(missing)")
        assert_true(stored == value,
                    f"LearnedPositionalEmbedding(vocab_size=11, d_model=6, max_length=8)."
                    f"{name} is {stored!r}, expected {value!r}: store each constructor "
                    "argument under its own name.")

    # get_config() / from_config() round trip.
    check_config(LearnedPositionalEmbedding,
                 {"vocab_size": 13, "d_model": 10, "max_length": 40, "mask_zero": False},
                 "LearnedPositionalEmbedding(vocab_size=13, d_model=10, max_length=40, "
                 "mask_zero=False)")
