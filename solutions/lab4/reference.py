"""Reference implementations of lab 4 ("masks, encoder and masked decoder layers").

Instructor side only: never shipped with labs/ or the `labkit` package.

Everything numeric here is float64 NumPy computed from what it is given (for
layers: the inputs and the student's own weights, read sublayer by sublayer
in the layouts of `keras.layers.MultiHeadAttention`, `Dense` and
`LayerNormalization`), written independently of the solution cells in
solutions/lab4. ``keras_encoder_layer`` and ``keras_decoder_layer`` build the
same layers from Keras parts with those weights copied in; the kit's tests
(tests/test_references_lab4.py) show that both agree, so the float64
references used by the hidden tests are "the Keras layer, without float32
rounding".

Mask semantics (the lab's contract, see solutions/lab4):

- masks are boolean, True = may attend, broadcast against `(..., T_q, T_k)`;
- ``EncoderLayer.call(x, padding_mask=None, training=None)``: padding_mask
  `(B, T)` is True for real tokens; a padded token is never attended to. The
  outputs at padded positions are not graded.
- ``DecoderLayer.call(x, context, x_padding_mask=None,
  context_padding_mask=None, training=None)``: self-attention is causal and
  ignores padded target tokens; cross-attention (queries from ``x``, keys and
  values from ``context``) ignores padded context tokens. Outputs and
  attention scores at padded target positions are not graded.

Besides the references it holds ``weight_shapes`` (the curriculum's shapes
of the weights the grader sets, never read back from the student's layer:
issue 18) and ``randomize_weights``, which sets them. The helpers that let
one hidden test run both under the grader (student names are proxies,
results NumPy) and in the source notebook (the solution's own objects,
results backend tensors) come from autograder.testkernel (testing and
layers) and are re-exported for the hidden tests: ``to_numpy``,
``is_keras_layer``, ``raised``, ``explain``, ``tensor``, ``sublayer``,
``sublayers``, ``calls``, ``read_weights``, ``set_weights``,
``set_sublayer_weights``.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.testkernel.layers import (calls, explain, is_keras_layer, read_weights,
                                          set_sublayer_weights, set_weights, sublayer,
                                          sublayers)
from autograder.testkernel.testing import raised, tensor, to_numpy

__all__ = [
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "masked_softmax",
    "feed_forward",
    "layer_norm",
    "multi_head_attention",
    "encoder_layer",
    "decoder_layer",
    "keras_encoder_layer",
    "keras_decoder_layer",
    "weight_shapes",
    "FEED_FORWARD_WEIGHTS",
    "ENCODER_WEIGHTS",
    "DECODER_WEIGHTS",
    "EPSILON",
    "randomize_weights",
    "randomize_own_weights",
    # helpers of autograder.testkernel, for the hidden tests
    "to_numpy",
    "is_keras_layer",
    "raised",
    "explain",
    "tensor",
    "sublayer",
    "sublayers",
    "calls",
    "read_weights",
    "set_weights",
    "set_sublayer_weights",
]

#: LayerNormalization's epsilon in every layer of the lab.
EPSILON = 1e-6

#: Sublayers whose weights make up each layer (paths of attributes).
FEED_FORWARD_WEIGHTS = ("dense1", "dense2")
ENCODER_WEIGHTS = ("self_attention", "ffn.dense1", "ffn.dense2", "norm1", "norm2")
DECODER_WEIGHTS = ("self_attention", "cross_attention", "ffn.dense1", "ffn.dense2",
                   "norm1", "norm2", "norm3")


def _float64(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


# --- masks ------------------------------------------------------------------------


def causal_mask(length):
    """`(length, length)` bool: query i may attend to key j when j <= i."""
    length = int(length)
    rows = np.arange(length)[:, None]
    cols = np.arange(length)[None, :]
    return cols <= rows


def padding_mask(token_ids, pad_id=0):
    """`(B, T)` bool, True for real tokens (ids other than ``pad_id``)."""
    return np.asarray(token_ids) != pad_id


def combine_masks(query_mask=None, key_mask=None, causal=False):
    """`(B, T_q, T_k)` bool: row mask AND column mask AND (when causal) look-ahead.

    A missing mask allows everything; its length is then taken from the other
    one (self-attention), so the result always has the full shape. (The lab's
    contract also accepts a result with a length-1 axis on the missing side;
    hidden tests broadcast before they compare.)
    """
    if query_mask is None and key_mask is None:
        raise ValueError("combine_masks needs query_mask or key_mask.")
    if query_mask is None:
        query_mask = np.ones_like(np.asarray(key_mask, dtype=bool))
    if key_mask is None:
        key_mask = np.ones_like(np.asarray(query_mask, dtype=bool))
    query_mask = np.asarray(query_mask, dtype=bool)
    key_mask = np.asarray(key_mask, dtype=bool)
    mask = query_mask[:, :, None] & key_mask[:, None, :]  # (B, T_q, T_k)
    if causal:
        rows = np.arange(mask.shape[1])[:, None]
        cols = np.arange(mask.shape[2])[None, :]
        mask = mask & (cols <= rows)[None]
    return mask


def masked_softmax(scores, mask):
    """Softmax over the last axis where ``mask`` is False gets weight 0.

    ``mask`` broadcasts against ``scores``. A row with no allowed entry gets
    all zeros (finite; such rows are not graded).
    """
    scores = _float64(scores)
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    scores = np.where(allowed, scores, -np.inf)
    with np.errstate(all="ignore"):
        largest = np.max(scores, axis=-1, keepdims=True)
        largest = np.where(np.isfinite(largest), largest, 0.0)
        exponentials = np.exp(scores - largest)
        total = np.sum(exponentials, axis=-1, keepdims=True)
        return exponentials / np.where(total > 0, total, 1.0)


# --- sublayers -------------------------------------------------------------------


def feed_forward(x, dense1, dense2):
    """relu(x W1 + b1) W2 + b2 with ``dense1 = [W1, b1]``, ``dense2 = [W2, b2]``
    (the weights of two `keras.layers.Dense`)."""
    W1, b1 = (_float64(w) for w in dense1)
    W2, b2 = (_float64(w) for w in dense2)
    hidden = np.maximum(_float64(x) @ W1 + b1, 0.0)  # (..., dff)
    return hidden @ W2 + b2  # (..., d_model)


def layer_norm(x, gamma, beta, epsilon=EPSILON):
    """LayerNormalization over the last axis (population variance)."""
    x = _float64(x)
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * _float64(gamma) + _float64(beta)


def multi_head_attention(query, value, weights, attention_mask=None):
    """`keras.layers.MultiHeadAttention` at inference, from its 8 weights.

    Args:
        query: `(B, T, d_q)`; value (also the key): `(B, S, d_v)`.
        weights: ``get_weights()`` of the Keras layer: query kernel
            `(d_q, H, key_dim)`, query bias `(H, key_dim)`, key kernel and
            bias, value kernel `(d_v, H, value_dim)` and bias, output kernel
            `(H, value_dim, d_q)`, output bias `(d_q,)`.
        attention_mask: bool broadcastable to `(B, T, S)`, True = may attend.

    Returns:
        ``(output (B, T, d_q), scores (B, H, T, S))``; a row with no allowed
        key gets zero weights (as Keras 3 does).
    """
    query, value = _float64(query), _float64(value)
    W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = (_float64(w) for w in weights)
    key_dim = W_q.shape[-1]
    queries = np.einsum("btd,dhk->bhtk", query, W_q) + b_q[None, :, None, :]
    keys = np.einsum("bsd,dhk->bhsk", value, W_k) + b_k[None, :, None, :]
    values = np.einsum("bsd,dhv->bhsv", value, W_v) + b_v[None, :, None, :]
    scores = np.einsum("bhtk,bhsk->bhts", queries, keys) / math.sqrt(key_dim)
    allowed = np.ones((query.shape[0], query.shape[1], value.shape[1]), dtype=bool)
    if attention_mask is not None:
        allowed = allowed & np.broadcast_to(np.asarray(attention_mask, dtype=bool),
                                            allowed.shape)
    probabilities = masked_softmax(scores, allowed[:, None])  # (B, H, T, S)
    context = np.einsum("bhts,bhsv->bthv", probabilities, values)
    return np.einsum("bthv,hvd->btd", context, W_o) + b_o, probabilities


def _key_padding(mask):
    """`(B, S)` True for real tokens -> `(B, 1, S)`, or None."""
    return None if mask is None else np.asarray(mask, dtype=bool)[:, None, :]


# --- layers ----------------------------------------------------------------------


def encoder_layer(x, weights, padding_mask=None, pre_norm=False):
    """The post-norm encoder layer of the paper, at inference.

    x = norm1(x + attention(x, x)); x = norm2(x + ffn(x)), where attention
    ignores the keys at padded positions (``padding_mask`` `(B, T)`, True
    for real tokens). ``weights`` maps each path of ``ENCODER_WEIGHTS`` to the
    sublayer's ``get_weights()``. ``pre_norm=True`` gives the pre-norm
    variant (x + attention(norm1(x)), ...), for diagnostics only.
    """
    x = _float64(x)
    mask = _key_padding(padding_mask)
    if pre_norm:
        h = layer_norm(x, *weights["norm1"])
        x = x + multi_head_attention(h, h, weights["self_attention"], mask)[0]
        h = layer_norm(x, *weights["norm2"])
        return x + feed_forward(h, weights["ffn.dense1"], weights["ffn.dense2"])
    attention = multi_head_attention(x, x, weights["self_attention"], mask)[0]
    x = layer_norm(x + attention, *weights["norm1"])  # (B, T, d_model)
    ffn = feed_forward(x, weights["ffn.dense1"], weights["ffn.dense2"])
    return layer_norm(x + ffn, *weights["norm2"])  # (B, T, d_model)


def decoder_layer(x, context, weights, x_padding_mask=None, context_padding_mask=None,
                  pre_norm=False, diagonal=True):
    """The post-norm decoder layer of the paper, at inference.

    x = norm1(x + causal self-attention(x)); x = norm2(x + attention(query=x,
    key=value=context)); x = norm3(x + ffn(x)). Self-attention sees keys
    j <= i that are real target tokens; cross-attention sees real context
    tokens. Returns ``(output (B, T, d_model), cross-attention scores
    (B, H, T, S))``. ``pre_norm=True`` (normalise before each sublayer) and
    ``diagonal=False`` (a look-ahead mask that hides j == i too) give known
    mistakes, for diagnostics only.
    """
    x, context = _float64(x), _float64(context)
    length = x.shape[1]
    self_mask = causal_mask(length)[None]  # (1, T, T)
    if not diagonal:
        self_mask = self_mask & ~np.eye(length, dtype=bool)[None]
    if x_padding_mask is not None:
        self_mask = self_mask & _key_padding(x_padding_mask)
    cross_mask = _key_padding(context_padding_mask)
    if pre_norm:
        h = layer_norm(x, *weights["norm1"])
        x = x + multi_head_attention(h, h, weights["self_attention"], self_mask)[0]
        h = layer_norm(x, *weights["norm2"])
        attention, scores = multi_head_attention(h, context, weights["cross_attention"],
                                                 cross_mask)
        x = x + attention
        h = layer_norm(x, *weights["norm3"])
        return x + feed_forward(h, weights["ffn.dense1"], weights["ffn.dense2"]), scores
    attention = multi_head_attention(x, x, weights["self_attention"], self_mask)[0]
    x = layer_norm(x + attention, *weights["norm1"])  # (B, T, d_model)
    attention, scores = multi_head_attention(x, context, weights["cross_attention"],
                                             cross_mask)
    x = layer_norm(x + attention, *weights["norm2"])  # (B, T, d_model)
    ffn = feed_forward(x, weights["ffn.dense1"], weights["ffn.dense2"])
    return layer_norm(x + ffn, *weights["norm3"]), scores


# --- the same layers from Keras parts --------------------------------------------------


def _keras_parts(weights, names, num_heads, d_model, dff, query_shape, value_shape):
    import keras

    parts = {}
    for name in names:
        if name.endswith("attention"):
            layer = keras.layers.MultiHeadAttention(num_heads=num_heads,
                                                    key_dim=d_model // num_heads)
            layer.build(query_shape, value_shape)
        elif name == "ffn.dense1":
            layer = keras.layers.Dense(dff, activation="relu")
            layer.build((None, d_model))
        elif name == "ffn.dense2":
            layer = keras.layers.Dense(d_model)
            layer.build((None, dff))
        else:
            layer = keras.layers.LayerNormalization(epsilon=EPSILON)
            layer.build((None, d_model))
        layer.set_weights([np.asarray(w, dtype="float32") for w in weights[name]])
        parts[name] = layer
    return parts


def keras_encoder_layer(x, weights, padding_mask=None, *, num_heads):
    """``encoder_layer`` computed with Keras's own MultiHeadAttention, Dense and
    LayerNormalization, the given weights copied in (float32, inference)."""
    import keras

    x = np.asarray(x, dtype="float32")
    d_model, dff = x.shape[-1], np.asarray(weights["ffn.dense1"][0]).shape[-1]
    parts = _keras_parts(weights, ENCODER_WEIGHTS, num_heads, d_model, dff,
                         x.shape, x.shape)
    mask = _key_padding(padding_mask)
    attention = parts["self_attention"](query=x, value=x, attention_mask=mask,
                                        training=False)
    h = parts["norm1"](x + attention)
    ffn = parts["ffn.dense2"](parts["ffn.dense1"](h))
    return np.asarray(keras.ops.convert_to_numpy(parts["norm2"](h + ffn)))


def keras_decoder_layer(x, context, weights, x_padding_mask=None,
                        context_padding_mask=None, *, num_heads):
    """``decoder_layer`` with Keras parts (use_causal_mask for the look-ahead);
    returns ``(output, cross-attention scores)`` as NumPy."""
    import keras

    x = np.asarray(x, dtype="float32")
    context = np.asarray(context, dtype="float32")
    d_model, dff = x.shape[-1], np.asarray(weights["ffn.dense1"][0]).shape[-1]
    parts = _keras_parts(weights, ("self_attention", "ffn.dense1", "ffn.dense2",
                                   "norm1", "norm2", "norm3"),
                         num_heads, d_model, dff, x.shape, x.shape)
    parts.update(_keras_parts(weights, ("cross_attention",), num_heads, d_model, dff,
                              x.shape, context.shape))
    attention = parts["self_attention"](query=x, value=x,
                                        attention_mask=_key_padding(x_padding_mask),
                                        use_causal_mask=True, training=False)
    h = parts["norm1"](x + attention)
    attention, scores = parts["cross_attention"](
        query=h, value=context, attention_mask=_key_padding(context_padding_mask),
        return_attention_scores=True, training=False)
    h = parts["norm2"](h + attention)
    ffn = parts["ffn.dense2"](parts["ffn.dense1"](h))
    output = parts["norm3"](h + ffn)
    return (np.asarray(keras.ops.convert_to_numpy(output)),
            np.asarray(keras.ops.convert_to_numpy(scores)))


# --- the grader's weights ------------------------------------------------------------


def weight_shapes(paths, d_model: int, dff: int, num_heads: int | None = None) -> dict:
    """``{path: [shapes]}``: the weights of each sublayer of ``paths``
    (FEED_FORWARD_WEIGHTS, ENCODER_WEIGHTS, DECODER_WEIGHTS) in the
    curriculum's layout: dense1 a Dense of dff units, dense2 of d_model, both
    with a bias; self_attention and cross_attention a
    keras.layers.MultiHeadAttention(num_heads, key_dim=d_model // num_heads) on
    d_model inputs; norm1... a LayerNormalization (gamma, beta)."""
    key_dim = d_model // num_heads if num_heads else 0
    attention = [(d_model, num_heads, key_dim), (num_heads, key_dim)] * 3 + \
        [(num_heads, key_dim, d_model), (d_model,)]
    shapes = {"dense1": [(d_model, dff), (dff,)], "dense2": [(dff, d_model), (d_model,)],
              "self_attention": attention, "cross_attention": attention,
              "norm": [(d_model,), (d_model,)]}
    return {path: shapes[path.rsplit(".", 1)[-1].rstrip("123") if path.startswith("norm")
                         else path.rsplit(".", 1)[-1]]
            for path in paths}


def randomize_weights(layer, paths, r, what: str, *, d_model: int, dff: int,
                      num_heads: int | None = None) -> dict[str, list[np.ndarray]]:
    """Give each sublayer of ``paths`` random float32 weights of the
    curriculum's shapes (``weight_shapes``) with ``set_weights``, in one round
    trip; return them. LayerNormalization gets gamma near 1.

    The shapes come from the curriculum, not from the student's layer, and the
    references are computed from the values returned: what the layer reports
    about its weights (get_weights, get_config) never moves a reference. A
    sublayer that does not take them (another size, no bias) fails here,
    saying which.
    """
    from autograder.testkernel.testing import assert_true

    expected = weight_shapes(paths, d_model, dff, num_heads)
    weights = {}
    for path, shapes in expected.items():
        new = []
        for index, shape in enumerate(shapes):
            if path.startswith("norm"):
                value = (1.0 if index == 0 else 0.0) + 0.2 * r.normal(size=shape)
            else:
                fan_in = shape[0] if len(shape) > 1 else 4
                value = r.normal(size=shape) / math.sqrt(max(fan_in, 1))
            new.append(value.astype("float32"))
        weights[path] = new
    try:
        set_weights(layer, weights)
        problem = ""
    except Exception as error:  # noqa: BLE001 - the student's sublayer refused them
        problem = str(error)
    listed = "; ".join(f"{path} {shapes}" for path, shapes in expected.items())
    assert_true(not problem,
                f"{what}: the sublayers do not take weights of these shapes: {listed} "
                "(dense1: dff units, dense2: d_model units, both with a bias; "
                "MultiHeadAttention with key_dim = d_model // num_heads; LayerNormalization "
                f"over d_model). {problem}")
    return weights


def randomize_own_weights(layer, paths, r) -> dict[str, list[np.ndarray]]:
    """Give each sublayer of ``paths`` random float32 weights of the shapes it
    has (whatever they are), in one round trip each way; return them.

    For the tests of a secondary property (dropout while training): they
    grade what the layer does with its own weights, so a layer of other sizes
    (no bias, dff ignored) loses the points of its sizes in the main test only.
    """
    weights = {}
    for path, values in read_weights(layer, paths).items():
        new = []
        for index, value in enumerate(values):
            if path.startswith("norm"):
                drawn = (1.0 if index == 0 else 0.0) + 0.2 * r.normal(size=value.shape)
            else:
                fan_in = value.shape[0] if value.ndim > 1 else 4
                drawn = r.normal(size=value.shape) / math.sqrt(max(fan_in, 1))
            new.append(drawn.astype("float32"))
        weights[path] = new
    set_weights(layer, weights)
    return weights
