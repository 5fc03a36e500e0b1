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

Besides the references it holds what the grader needs so that a mistake costs
points in one exercise only (see autograder/references/lab1.py):

- ``STAND_INS``: for each exercise, the OTHER exercises its solution may call.
- ``STAND_IN_SOURCES``: a correct, self-contained version of each of those.
  Like the lab's solutions they use ``keras.ops`` and return backend tensors
  (``FeedForward`` is a ``keras.layers.Layer`` with sublayers ``dense1``,
  ``dense2`` and ``dropout``).
- ``HINTS``: one sentence per exercise for the feedback page.

and small helpers that let one hidden test run both under the grader (student
names are proxies, results NumPy) and in the source notebook (the solution's
own objects, results backend tensors): ``to_numpy``, ``describe``,
``is_keras_layer``, ``raised``, ``explain``, ``tensor``, ``sublayer``,
``sublayers``, ``calls``, ``read_weights``, ``set_weights``,
``randomize_weights`` (the last five in one round trip each), and
``weight_shapes``: the curriculum's shapes of the weights the grader sets
(never read back from the student's layer: issue 18).
"""

from __future__ import annotations

import math

import numpy as np

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
    "STAND_INS",
    "STAND_IN_SOURCES",
    "HINTS",
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


# --- one hidden test under the grader and in the source notebook ------------------------
#
# Under the grader, student names are proxies (autograder.testkernel.probe.RemoteObject)
# and every result is NumPy; when the source notebook runs top to bottom they
# are the solution's own objects and results are backend tensors.


def to_numpy(value):
    """A result of the student's code as NumPy (proxies already give NumPy)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, list, tuple)) or value is None:
        return np.asarray(value)
    from keras import ops  # only in the source notebook, where tensors come back

    return np.asarray(ops.convert_to_numpy(value))


def _class_path(kind) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def describe(target) -> dict:
    """``{"class", "bases", ...}`` of a proxy (its ``describe()``) or a local object."""
    from autograder.testkernel.probe import RemoteObject

    if isinstance(target, RemoteObject):
        return target.describe()
    kind = target if isinstance(target, type) else type(target)
    return {"class": _class_path(kind),
            "bases": [_class_path(base) for base in kind.__mro__[1:]],
            "sublayers": []}


def is_keras_layer(target, class_name: str) -> bool:
    """Whether ``target`` is a Keras ``class_name`` (e.g. "MultiHeadAttention")
    or a subclass of it."""
    description = describe(target)
    paths = [description.get("class", ""), *description.get("bases", [])]
    return any(path.startswith("keras.") and path.endswith("." + class_name)
               for path in paths)


def raised(make) -> tuple[str | None, str]:
    """Run ``make()``; return (the name of the exception it raised or None, message)."""
    import re

    from autograder.testkernel.probe import StudentCodeError

    try:
        make()
    except StudentCodeError as error:
        match = re.search(r"raised (\w+)", str(error))
        return (match.group(1) if match else "StudentCodeError"), str(error)
    except Exception as error:  # noqa: BLE001 - the solution run in place
        return type(error).__name__, str(error)
    return None, ""


def explain(message: str, shapes_hint: str = "") -> str:
    """A hint to append to a student's exception from a layer call.

    Keras's own messages for the classic mask mistakes are cryptic; name the
    cause. ``shapes_hint`` is added when the message is about shapes.
    """
    if "query_mask" in message:
        return (" Pass masks to MultiHeadAttention by keyword (attention_mask=...): "
                "its fourth positional argument is query_mask.")
    if "must be broadcastable" in message:
        return (" The attention mask must broadcast to (B, T_q, T_k): a padding mask "
                "(B, T) becomes (B, 1, T).")
    if shapes_hint and "shape" in message.lower():
        return " " + shapes_hint
    return ""


def tensor(array, like):
    """``array`` to be passed as a backend tensor to ``like`` (a student name or
    an object it returned)."""
    from autograder.testkernel.probe import RemoteObject, Tensor

    if isinstance(like, RemoteObject):
        return Tensor(array)
    from keras import ops

    return ops.convert_to_tensor(array)


def sublayer(layer, path: str):
    """``layer.ffn.dense1`` for the path "ffn.dense1"."""
    if _is_remote(layer):
        return layer.attribute(path)
    for name in path.split("."):
        layer = getattr(layer, name)
    return layer


def _is_remote(layer) -> bool:
    """Whether ``layer`` is the grader's proxy of a student's layer
    (autograder.testkernel.probe.RemoteObject), which walks a path in one request."""
    return callable(getattr(type(layer), "call_method", None))


def calls(layer, requests) -> list:
    """``[sublayer(layer, path) if args is None else sublayer(layer, path)(*args)
    for path, args in requests]``: for a proxy in one round trip (a failure
    names the path that failed), e.g. ``[("norm1.epsilon", None),
    ("ffn.dense1.get_weights", ())]``."""
    if _is_remote(layer):
        return layer.many(requests)
    return [sublayer(layer, path) if args is None else sublayer(layer, path)(*args)
            for path, args in requests]


def sublayers(layer, paths) -> list:
    """``[sublayer(layer, path) for path in paths]``, in one round trip."""
    return calls(layer, [(path, None) for path in paths])


def set_sublayer_weights(layer, path: str, weights) -> None:
    """``sublayer(layer, path).set_weights(weights)``."""
    set_weights(layer, {path: weights})


def set_weights(layer, weights: dict) -> None:
    """``sublayer(layer, path).set_weights(value)`` for each ``{path: value}``,
    in one round trip."""
    calls(layer, [(f"{path}.set_weights", (value,)) for path, value in weights.items()])


def read_weights(layer, paths) -> dict[str, list[np.ndarray]]:
    """``{path: sublayer.get_weights()}`` for each path, in one round trip."""
    values = calls(layer, [(f"{path}.get_weights", ()) for path in paths])
    return {path: [to_numpy(w) for w in value] for path, value in zip(paths, values)}


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


#: For each exercise, the other exercises its solution may call. While the
#: grader tests the key, each listed name is replaced in the student's kernel
#: by its stand-in (also during calls on layers that exercise created, so
#: ``EncoderLayer(...)`` builds the stand-in FeedForward).
STAND_INS = {
    "causal_mask": [],
    "padding_mask": [],
    "combine_masks": ["causal_mask"],
    "masked_softmax": [],
    "FeedForward": [],
    "EncoderLayer": ["FeedForward", "causal_mask", "padding_mask", "combine_masks",
                     "masked_softmax"],
    "DecoderLayer": ["FeedForward", "causal_mask", "padding_mask", "combine_masks",
                     "masked_softmax"],
}


_CAUSAL_MASK_SOURCE = '''
def causal_mask(length):
    """(length, length) bool tensor, True on and below the diagonal."""
    from keras import ops

    positions = ops.arange(length)
    return ops.greater_equal(ops.expand_dims(positions, 1), ops.expand_dims(positions, 0))
'''

_PADDING_MASK_SOURCE = '''
def padding_mask(token_ids, pad_id=0):
    """(B, T) bool tensor, True for real tokens (ids other than pad_id)."""
    from keras import ops

    return ops.not_equal(ops.convert_to_tensor(token_ids), pad_id)
'''

_COMBINE_MASKS_SOURCE = '''
def combine_masks(query_mask=None, key_mask=None, causal=False):
    """(B, T_q, T_k) bool tensor: rows AND columns AND (causal) look-ahead.

    A missing mask allows everything and gives a length-1 axis, which
    broadcasts (with causal=True both lengths are the given mask's).
    """
    from keras import ops

    if query_mask is None and key_mask is None:
        raise ValueError("combine_masks needs query_mask or key_mask; got neither.")
    mask = None
    if query_mask is not None:
        mask = ops.expand_dims(ops.cast(query_mask, "bool"), 2)  # (B, T_q, 1)
    if key_mask is not None:
        columns = ops.expand_dims(ops.cast(key_mask, "bool"), 1)  # (B, 1, T_k)
        mask = columns if mask is None else ops.logical_and(mask, columns)
    if causal:
        given = query_mask if query_mask is not None else key_mask
        rows_length = ops.shape(given)[1]
        cols_length = ops.shape(key_mask if key_mask is not None else given)[1]
        rows = ops.expand_dims(ops.arange(rows_length), 1)
        cols = ops.expand_dims(ops.arange(cols_length), 0)
        mask = ops.logical_and(mask, ops.expand_dims(ops.greater_equal(rows, cols), 0))
    return mask
'''

_MASKED_SOFTMAX_SOURCE = '''
def masked_softmax(scores, mask):
    """Softmax over the last axis; mask False gets exactly 0; an all-False row -> 0."""
    import keras
    from keras import ops

    scores = ops.convert_to_tensor(scores)
    if not keras.backend.is_float_dtype(scores.dtype):
        scores = ops.cast(scores, "float32")
    allowed = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(scores))
    hidden = ops.where(allowed, scores, ops.full_like(scores, -1e9))
    weights = ops.softmax(hidden, axis=-1)
    return ops.where(allowed, weights, ops.zeros_like(weights))
'''

_FEED_FORWARD_SOURCE = '''
import keras


class FeedForward(keras.layers.Layer):
    """Stand-in: dense1 (dff units, ReLU), dense2 (d_model units), dropout on the
    output; no residual."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        import keras

        super().__init__(**kwargs)
        self.d_model = int(d_model)
        self.dff = int(dff)
        self.dropout_rate = float(dropout_rate)
        self.dense1 = keras.layers.Dense(self.dff, activation="relu")
        self.dense2 = keras.layers.Dense(self.d_model)
        self.dropout = keras.layers.Dropout(self.dropout_rate)

    def build(self, input_shape):
        self.dense1.build(input_shape)
        self.dense2.build(tuple(input_shape)[:-1] + (self.dff,))
        self.built = True

    def call(self, x, training=None):
        return self.dropout(self.dense2(self.dense1(x)), training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)[:-1] + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, dff=self.dff, dropout_rate=self.dropout_rate)
        return config
'''

#: name -> source of a correct, self-contained version with the curriculum
#: signature (keras.ops; tensors out), defined in the student's kernel in
#: place of the student's own while another exercise is tested.
STAND_IN_SOURCES = {
    "causal_mask": _CAUSAL_MASK_SOURCE.strip() + "\n",
    "padding_mask": _PADDING_MASK_SOURCE.strip() + "\n",
    "combine_masks": _COMBINE_MASKS_SOURCE.strip() + "\n",
    "masked_softmax": _MASKED_SOFTMAX_SOURCE.strip() + "\n",
    "FeedForward": _FEED_FORWARD_SOURCE.strip() + "\n",
}

#: exercise -> one sentence shown on the feedback page of a student who lost
#: its points.
HINTS = {
    "causal_mask": (
        "Query i may attend to key j when j <= i: True on AND below the diagonal "
        "(the diagonal too: a token sees itself), as a bool (length, length) tensor."
    ),
    "padding_mask": (
        "Compare the ids with pad_id (ops.not_equal): True for real tokens, a bool "
        "(B, T) tensor, and use the pad_id argument rather than a fixed 0."
    ),
    "combine_masks": (
        "The query mask decides rows (query_mask[:, :, None]), the key mask columns "
        "(key_mask[:, None, :]); AND them together and, when causal, with "
        "causal_mask, keeping a bool (B, T_q, T_k) result."
    ),
    "masked_softmax": (
        "Give masked scores a large negative value (or -inf) before a softmax over "
        "the last axis, then set masked weights to exactly 0 so a fully masked row "
        "stays finite; every other row must sum to 1."
    ),
    "FeedForward": (
        "Create dense1 (dff units, ReLU), dense2 (d_model units) and "
        "dropout (Dropout(dropout_rate)) in __init__, return dropout(dense2(dense1(x))) "
        "with training passed on (no residual inside), and return d_model, dff and "
        "dropout_rate from get_config."
    ),
    "EncoderLayer": (
        "Post-norm as in the paper: x = norm1(x + dropout(self_attention(query=x, "
        "value=x, attention_mask=...))) then x = norm2(x + ffn(x)); the padding mask "
        "(padding first or last) goes to the keys as (B, 1, T), passed by keyword; "
        "get_config returns every constructor argument."
    ),
    "DecoderLayer": (
        "Causal self-attention (look-ahead mask, diagonal included, AND the target "
        "padding on the keys), then cross_attention(query=x, value=context, "
        "key=context, attention_mask=..., return_attention_scores=True), then the FFN; "
        "each sublayer is followed by dropout, a residual add and its own "
        "LayerNormalization (post-norm); get_config returns every constructor argument."
    ),
}
