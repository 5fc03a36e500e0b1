"""Tests of the lab 2 references (autograder/references/lab2.py).

The weight shapes are the lecture's, written out by hand; the NumPy
multi-head attention must equal `keras.layers.MultiHeadAttention` with the
same weights copied in (self- and cross-attention, masks, causal, no bias);
each stand-in must agree with its reference on NumPy input (NumPy out) and on
a Keras tensor (tensor out); the "from scratch" rule must reject Keras's
attention layers however they are hidden and accept a layer built on
EinsumDense.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from autograder.labs import LABS
from autograder.references import lab2 as reference
from autograder.testkernel import standins


LECTURE_ONE_HEAD = [(16, 1, 2), (1, 2), (16, 1, 2), (1, 2), (16, 1, 2), (1, 2),
                    (1, 2, 16), (16,)]
LECTURE_THREE_HEADS = [(16, 3, 2), (3, 2), (16, 3, 2), (3, 2), (16, 3, 2), (3, 2),
                       (3, 2, 16), (16,)]
KEY_DIM_5 = [(16, 3, 5), (3, 5), (16, 3, 5), (3, 5), (16, 3, 5), (3, 5), (3, 5, 16), (16,)]


# --- the lecture's numbers --------------------------------------------------------


def test_weight_shapes_of_the_lecture():
    assert reference.mha_weight_shapes(16, 1, 2) == LECTURE_ONE_HEAD
    assert reference.mha_weight_shapes(16, 3, 2) == LECTURE_THREE_HEADS
    # "What if key_dim goes from 2 to 5?": every kernel and bias grows, the
    # output stays 16.
    assert reference.mha_weight_shapes(16, 3, 5) == KEY_DIM_5


def test_parameter_counts():
    assert reference.mha_parameter_count(16, 1, 2) == 150
    assert reference.mha_parameter_count(16, 3, 2) == 418
    assert reference.mha_parameter_count(16, 3, 5) == 1021
    # key_dim = d_model / num_heads: 4 d^2 + 4 d whatever the number of heads.
    for heads in (1, 2, 4, 8, 16):
        assert reference.mha_parameter_count(16, heads, 16 // heads) == 4 * 16 * 16 + 4 * 16


@pytest.mark.parametrize("num_heads, key_dim", [(1, 2), (3, 2), (3, 5)])
def test_the_lecture_layers_in_keras(num_heads, key_dim):
    layer = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
    target = keras.Input(shape=(6, 16))
    output, scores = layer(target, target, return_attention_scores=True)
    assert tuple(output.shape) == (None, 6, 16)
    assert tuple(scores.shape) == (None, num_heads, 6, 6)
    assert [tuple(w.shape) for w in layer.weights] == \
        reference.mha_weight_shapes(16, num_heads, key_dim)
    assert layer.count_params() == reference.mha_parameter_count(16, num_heads, key_dim)


@pytest.mark.parametrize("dims, heads, key_dim, value_dim, use_bias", [
    ((6, 10, 10), 2, 4, None, True),
    ((6, 7, 10), 2, 3, 5, True),
    ((6, 7, 10), 2, 3, 5, False),
    ((5, 5, 5), 4, 1, 3, False),
])
def test_weight_shapes_with_different_query_key_value_sizes(dims, heads, key_dim,
                                                            value_dim, use_bias):
    d_query, d_key, d_value = dims
    layer = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=key_dim,
                                            value_dim=value_dim, use_bias=use_bias)
    layer(np.zeros((1, 3, d_query), "float32"), np.zeros((1, 4, d_value), "float32"),
          key=np.zeros((1, 4, d_key), "float32"), return_attention_scores=True)
    expected = reference.keras_mha_weight_shapes(d_query, d_key, d_value, heads, key_dim,
                                                 value_dim, use_bias)
    assert [tuple(w.shape) for w in layer.weights] == expected
    assert len(expected) == (8 if use_bias else 4)


# --- one head, heads ------------------------------------------------------------


def test_self_attention_by_hand():
    # Identity projections, no bias, tokens (1, 0) and (0, 1): softmax([1/sqrt(2), 0]).
    eye, zero = np.eye(2), np.zeros(2)
    output, scores = reference.self_attention([[[1.0, 0.0], [0.0, 1.0]]],
                                              [eye, zero, eye, zero, eye, zero])
    a = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    np.testing.assert_allclose(scores, [[[a, 1 - a], [1 - a, a]]])
    np.testing.assert_allclose(output, [[[a, 1 - a], [1 - a, a]]])
    _, scores = reference.self_attention([[[1.0, 0.0], [0.0, 1.0]]], [eye, eye, eye],
                                         attention_mask=[[[True, False], [True, True]]])
    np.testing.assert_allclose(scores, [[[1.0, 0.0], [1 - a, a]]])


def test_self_attention_is_one_head_of_multi_head_attention():
    r = np.random.default_rng(0)
    x = r.normal(size=(2, 5, 4))
    Wq, Wk, Wv = r.normal(size=(3, 4, 4))
    bq, bk, bv = r.normal(size=(3, 4))
    mask = np.tril(np.ones((5, 5), dtype=bool))
    single = reference.self_attention(x, [Wq, bq, Wk, bk, Wv, bv], attention_mask=mask)
    multi = reference.multi_head_attention(
        x, x, [Wq[:, None], bq[None], Wk[:, None], bk[None], Wv[:, None], bv[None],
               np.eye(4)[None], np.zeros(4)], use_causal_mask=True)
    np.testing.assert_allclose(multi[0], single[0], atol=1e-12)
    np.testing.assert_allclose(multi[1][:, 0], single[1], atol=1e-12)


def test_split_and_merge_heads_literal():
    tokens = np.arange(12.0).reshape(1, 3, 4)
    heads = reference.split_heads(tokens, 2)
    np.testing.assert_array_equal(heads, [[[[0, 1], [4, 5], [8, 9]],
                                           [[2, 3], [6, 7], [10, 11]]]])
    np.testing.assert_array_equal(reference.merge_heads(heads), tokens)
    x = np.random.default_rng(1).normal(size=(2, 5, 12))
    np.testing.assert_array_equal(reference.merge_heads(reference.split_heads(x, 3)), x)
    # The classic bug keeps the shape and changes the numbers.
    assert not np.array_equal(x.reshape(2, 3, 5, 4), reference.split_heads(x, 3))


def test_causal_mask_follows_keras_when_lengths_differ():
    allowed = reference.allowed_mask(1, 3, 4, use_causal_mask=True)[0]
    np.testing.assert_array_equal(allowed, [[True, False, False, False],
                                            [True, True, False, False],
                                            [True, True, True, False]])
    padding = np.array([[[True, True, False, False]] * 3])
    np.testing.assert_array_equal(reference.allowed_mask(1, 3, 4, padding, True)[0],
                                  [[True, False, False, False],
                                   [True, True, False, False],
                                   [True, True, False, False]])


# --- the NumPy reference equals Keras's layer -----------------------------------------


def _random_case(r, query_shape, value_shape, key_shape, heads, key_dim, value_dim,
                 use_bias):
    query = r.normal(size=query_shape).astype("float32")
    value = r.normal(size=value_shape).astype("float32")
    key = None if key_shape is None else r.normal(size=key_shape).astype("float32")
    shapes = reference.keras_mha_weight_shapes(
        query_shape[-1], (key_shape or value_shape)[-1], value_shape[-1], heads, key_dim,
        value_dim, use_bias)
    weights = [(r.normal(size=s) / math.sqrt(s[0])).astype("float32") for s in shapes]
    return query, value, key, weights


@pytest.mark.numerics
@pytest.mark.parametrize("case", [
    dict(query_shape=(2, 5, 12), value_shape=(2, 5, 12), key_shape=None, heads=3,
         key_dim=4, value_dim=None, use_bias=True, mask=None, causal=False),
    dict(query_shape=(2, 6, 16), value_shape=(2, 6, 16), key_shape=None, heads=1,
         key_dim=2, value_dim=None, use_bias=True, mask="random", causal=False),
    dict(query_shape=(2, 5, 8), value_shape=(2, 5, 8), key_shape=None, heads=2,
         key_dim=3, value_dim=5, use_bias=True, mask=None, causal=True),
    dict(query_shape=(2, 3, 6), value_shape=(2, 5, 10), key_shape=None, heads=2,
         key_dim=4, value_dim=None, use_bias=True, mask="random", causal=False),
    dict(query_shape=(2, 4, 6), value_shape=(2, 6, 5), key_shape=(2, 6, 7), heads=4,
         key_dim=2, value_dim=3, use_bias=True, mask="random", causal=True),
    dict(query_shape=(2, 3, 6), value_shape=(2, 5, 10), key_shape=None, heads=2,
         key_dim=3, value_dim=None, use_bias=False, mask=None, causal=True),
], ids=["self", "one-head-mask", "causal-value-dim", "cross-mask", "cross-key-both",
        "no-bias-causal"])
def test_numpy_reference_equals_keras_with_copied_weights(case):
    r = np.random.default_rng(sum(case["query_shape"]) + case["heads"])
    query, value, key, weights = _random_case(
        r, case["query_shape"], case["value_shape"], case["key_shape"], case["heads"],
        case["key_dim"], case["value_dim"], case["use_bias"])
    mask = None
    if case["mask"] == "random":
        mask = r.random(size=(query.shape[0], query.shape[1], value.shape[1])) < 0.6
        mask[..., 0] = True
        mask[-1, 1, :] = False  # a fully masked row: finite, not compared
    expected_output, expected_scores = reference.multi_head_attention(
        query, value, weights, key=key, attention_mask=mask,
        use_causal_mask=case["causal"])
    output, scores = reference.keras_multi_head_attention(
        weights, query, value, key, num_heads=case["heads"], key_dim=case["key_dim"],
        value_dim=case["value_dim"], use_bias=case["use_bias"], attention_mask=mask,
        use_causal_mask=case["causal"])
    assert output.shape == expected_output.shape == query.shape
    assert scores.shape == expected_scores.shape == \
        (query.shape[0], case["heads"], query.shape[1], value.shape[1])
    assert np.all(np.isfinite(expected_output)) and np.all(np.isfinite(expected_scores))
    live = reference.allowed_mask(query.shape[0], query.shape[1], value.shape[1], mask,
                                  case["causal"]).any(axis=-1)
    np.testing.assert_allclose(output[live], expected_output[live], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scores.transpose(0, 2, 1, 3)[live],
                               expected_scores.transpose(0, 2, 1, 3)[live],
                               rtol=1e-4, atol=1e-5)


def test_multi_head_attention_properties():
    r = np.random.default_rng(5)
    query, value, key, weights = _random_case(r, (2, 4, 6), (2, 5, 6), None, 2, 3, None, True)
    mask = r.random(size=(2, 4, 5)) < 0.5
    mask[..., 0] = True
    _, scores = reference.multi_head_attention(query, value, weights, attention_mask=mask)
    np.testing.assert_allclose(scores.sum(-1), 1.0)
    assert np.all(scores[np.broadcast_to(~mask[:, None], scores.shape)] == 0.0)
    # A padded key never changes the output.
    changed = value.copy()
    changed[~mask.any(axis=1)] += 100.0
    np.testing.assert_allclose(
        reference.multi_head_attention(query, changed, weights, attention_mask=mask)[0],
        reference.multi_head_attention(query, value, weights, attention_mask=mask)[0])
    # Causal: future tokens never change earlier outputs.
    x = r.normal(size=(1, 5, 6))
    later = x.copy()
    later[:, 3:] += 10.0
    early = reference.multi_head_attention(x, x, weights, use_causal_mask=True)[0]
    np.testing.assert_allclose(
        reference.multi_head_attention(later, later, weights, use_causal_mask=True)[0][:, :3],
        early[:, :3])


# --- "from scratch" ---------------------------------------------------------------------


class _Wrapper(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)

    def call(self, query, value):
        return self.inner(query, value)


class _Subclass(keras.layers.MultiHeadAttention):
    pass


class _FromScratch(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.project = keras.layers.EinsumDense("btd,dhk->bthk", (None, 2, 3), bias_axes="hk")
        self.drop = keras.layers.Dropout(0.1)

    def call(self, query, value):
        return self.drop(self.project(query))


def test_borrowed_attention_layers_are_found():
    x = np.zeros((1, 3, 4), "float32")
    wrapper = _Wrapper()
    wrapper(x, x)
    found = reference.borrowed_attention_classes(reference.describe(wrapper))
    assert found == ["keras.src.layers.attention.multi_head_attention.MultiHeadAttention"]
    assert reference.borrowed_attention_classes(reference.describe(_Subclass))
    assert reference.borrowed_attention_classes(
        reference.describe(keras.layers.MultiHeadAttention(num_heads=1, key_dim=2)))
    grouped = keras.layers.GroupQueryAttention(head_dim=2, num_query_heads=2,
                                                 num_key_value_heads=1)
    assert reference.borrowed_attention_classes(reference.describe(grouped))
    assert reference.borrowed_attention_classes(
        reference.describe(keras.layers.AdditiveAttention()))


def test_a_layer_built_from_scratch_is_accepted():
    layer = _FromScratch()
    layer(np.zeros((1, 3, 4), "float32"), np.zeros((1, 3, 4), "float32"))
    description = reference.describe(layer)
    assert {s["class"].rsplit(".", 1)[-1] for s in description["sublayers"]} == \
        {"EinsumDense", "Dropout"}
    assert reference.borrowed_attention_classes(description) == []
    # The student's own class is called MultiHeadAttention and lives in __main__.
    student = {"class": "__main__.MultiHeadAttention",
               "bases": ["keras.src.layers.layer.Layer"], "sublayers": []}
    assert reference.borrowed_attention_classes(student) == []


#: A from-scratch answer (its body does not matter to the source reading).
_OWN = """
class MultiHeadAttention(keras.layers.Layer):
    \"\"\"Like `keras.layers.MultiHeadAttention`, written out.\"\"\"

    def call(self, query, value):
        scores = ops.einsum("btd,bsd->bts", query, value) / math.sqrt(self.key_dim)
        return ops.softmax(scores) @ value
"""

_SETUP = "import math\nimport keras\nfrom keras import ops, layers"


@pytest.mark.parametrize("cells, found", [
    ([_OWN.replace("keras.layers.Layer", "keras.layers.MultiHeadAttention")],
     "keras.layers.MultiHeadAttention"),
    (["from keras.layers import MultiHeadAttention as Built",
      _OWN.replace("ops.softmax(scores) @ value", "Built(2, 4)(query, value)")],
     "from keras.layers import MultiHeadAttention"),
    (["Base = layers.MultiHeadAttention", _OWN.replace("keras.layers.Layer", "Base")],
     "layers.MultiHeadAttention"),
    (["def helper():\n    return getattr(keras.layers, 'MultiHeadAttention')(2, 4)",
      _OWN.replace("ops.softmax(scores) @ value", "helper()(query, value)")],
     "getattr(keras.layers, 'MultiHeadAttention')"),
    ([_OWN.replace("keras.layers.Layer", "vars(keras.layers)['GroupQueryAttention']")],
     "vars(keras.layers)['GroupQueryAttention']"),
    ([_OWN.replace("def call(self, query, value):",
                   "def call(self, query, value, inner=torch.nn.MultiheadAttention):")],
     "torch.nn.MultiheadAttention"),
    (["from keras.layers import *", _OWN.replace("keras.layers.Layer", "AdditiveAttention")],
     "from keras.layers import *"),
    (["%%time\n" + _OWN.replace("keras.layers.Layer", "keras.layers.Attention")],
     "keras.layers.Attention"),
    (["exec(open('mha.py').read())"], "is not defined by a statement the grader can read"),
    (["MultiHeadAttention = make()", "def make():\n    return eval('keras.layers.Layer')"],
     "eval(...)"),
    # a statement symtable refuses (it never ran) is read name by name
    (["def make():\n    x = 1\n    global x\n    return keras.layers.MultiHeadAttention",
      "MultiHeadAttention = make()"], "keras.layers.MultiHeadAttention"),
])
def test_borrowed_attention_is_read_in_the_source(cells, found):
    reported = reference.borrowed_in_source([_SETUP, *cells], "MultiHeadAttention")
    assert any(found in item for item in reported), reported


def test_a_from_scratch_source_is_accepted_beside_a_comparison_with_keras():
    cells = [_SETUP, "layer = keras.layers.MultiHeadAttention(2, 4)",
             "%%time\n" + _OWN.replace("return ops.softmax(scores) @ value",
                                       "layer = ops.softmax(scores)\n        return layer @ value"),
             "theirs = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)\n"
             "mine = MultiHeadAttention()\n"
             "theirs.set_weights(mine.get_weights())",
             "!pip list | grep keras", "this cell does not parse ("]
    assert reference.borrowed_in_source(cells, "MultiHeadAttention") == []


def test_raised_names_the_exception():
    assert reference.raised(lambda: None) == (None, "")
    assert reference.raised(lambda: int("x"))[0] == "ValueError"


# --- stand-ins and hints ---------------------------------------------------------------


def _stand_in(name):
    return standins.define(LABS["lab2"].folder, name)


@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "tensor"])
@pytest.mark.parametrize("shape, heads", [((2, 5, 12), 3), ((2, 3, 6), 3), ((1, 4, 8), 1)])
def test_split_and_merge_stand_ins_match_references(shape, heads, tensor):
    split_heads, merge_heads = _stand_in("split_heads"), _stand_in("merge_heads")
    x = np.random.default_rng(len(shape)).normal(size=shape).astype("float32")
    split = split_heads(ops.convert_to_tensor(x) if tensor else x, heads)
    merged = merge_heads(split)
    for result in (split, merged):
        if tensor:
            assert ops.is_tensor(result)
        else:
            assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(ops.convert_to_numpy(split), reference.split_heads(x, heads))
    np.testing.assert_array_equal(ops.convert_to_numpy(merged), x)


def test_split_heads_stand_in_works_on_symbolic_inputs():
    split_heads, merge_heads = _stand_in("split_heads"), _stand_in("merge_heads")
    symbolic = keras.Input(shape=(6, 12))
    assert tuple(split_heads(symbolic, 3).shape) == (None, 3, 6, 4)
    assert tuple(merge_heads(split_heads(symbolic, 3)).shape) == (None, 6, 12)


def test_mha_weight_shapes_stand_in_matches_reference():
    mha_weight_shapes = _stand_in("mha_weight_shapes")
    for args, kwargs in [((16, 1, 2), {}), ((16, 3, 5), {}), ((10, 2, 3), {"value_dim": 7})]:
        assert mha_weight_shapes(*args, **kwargs) == reference.mha_weight_shapes(*args, **kwargs)

