"""Reference implementations of lab 5 ("a whole Transformer"), instructor side.

Never shipped with labs/ or the `labkit` package.

Everything numeric is float64 NumPy, written independently of the solution
cells in solutions/lab5 (they share the maths, not the code):

- the forward pass of the whole encoder, decoder and Transformer, computed
  from the grader's own random weights (embedding table,
  `keras.layers.MultiHeadAttention`, `Dense` and `LayerNormalization`
  layouts), which the hidden tests set in the student's layers sublayer by
  sublayer, and the number of weights each should have (a formula, checked
  against Keras-built models in tests/test_references_lab5.py);
- the masked loss and accuracy;
- greedy decoding, the best sequence by exhaustive search, beam search and
  temperature probabilities, on the decoding fixtures below.

The lab's conventions (see solutions/lab5) that the references follow:

- padding id 0; masks are boolean, True = may attend; padding masks go to the
  keys: a padded token is never attended to. Outputs at padded positions are
  not graded (they differ between backends: TensorFlow also masks padded
  queries through Keras masks).
- ``Encoder.call(token_ids, training=None)`` -> `(B, S, d_model)`.
- ``Decoder.call(token_ids, context, context_padding_mask=None,
  training=None)`` -> `(B, T, d_model)`; keeps the last layer's
  cross-attention weights in ``last_attention_scores``
  `(B, num_heads, T, S)`.
- ``Transformer.call((context_ids, target_ids), training=None)`` -> logits
  `(B, T, target_vocab_size)`.
- decoding functions call ``model((context_ids, target_ids), training=False)``
  and read the logits of the last position. ``greedy_decode`` returns
  `(B, L)` ids after the start id, end id included, 0 after it, L <=
  max_length; ``beam_search`` takes one context `(1, S)` and returns the ids
  `(L,)` after the start id of the sequence with the highest total
  log-probability (no length normalisation); a beam that writes end_id
  leaves the beam for a list of finished sentences and is never extended;
  each step keeps the beam_width best open candidates; the search goes on
  while an open beam scores higher than the best finished sentence; at
  max_length the open beams compete too.
- ``training`` reaches every dropout: after the embedding and inside every
  layer when True; nowhere when False or left out.

Besides the references it holds what the grader needs:

- ``DECODING_MODELS_SOURCE``: tiny models with hand-set (or seeded) logits
  whose best sequences are known; hidden tests build them inside the
  student's kernel (``construct_in_student_kernel``) and pass them to the
  student's decoding functions, and build the same models here to compute
  the expected answers.
- ``parameter_shapes``, ``random_parameters``, ``give_weights`` and
  ``SET_WEIGHTS_SOURCE``: the grader's weights, in the curriculum's layout,
  set in a student's Encoder, Decoder or Transformer by structure, inside the
  student's kernel. Nothing is read back: what the student's kernel says
  about its weights (get_weights, shapes) is the student's data, and a
  reference computed from it would agree with a layer that misreports them
  (issue 18).
- ``TRAINING_SOURCE`` and ``fixed_dropout``: training mode made exact. In the
  student's kernel every ``keras.layers.Dropout`` drops a fixed pattern of
  values for one call with ``training=True``; the forward passes here apply
  the same pattern where the lab puts dropout (after the embedding, on each
  sublayer's output before its residual).
- ``check_config``: get_config() holds every constructor argument and
  from_config() rebuilds the layer (the ``__config`` tests cells).
- helpers that let one hidden test run both under the grader (student names
  are proxies returning NumPy) and in the source notebook (the solution's own
  objects): ``to_numpy``, ``call_method``, ``constructor``, ``class_paths``,
  ``tensor``, from autograder.testkernel (testing and layers), re-exported
  for the hidden tests.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.testkernel.layers import call_method, check_config, class_paths
from autograder.testkernel.testing import constructor, tensor, to_numpy

__all__ = [
    "positional_encoding",
    "layer_norm",
    "multi_head_attention",
    "encoder_forward",
    "decoder_forward",
    "transformer_forward",
    "mha_parameter_count",
    "encoder_parameter_count",
    "decoder_parameter_count",
    "transformer_parameter_count",
    "check_config",
    "masked_loss",
    "per_token_cross_entropy",
    "masked_accuracy",
    "temperature_probabilities",
    "greedy_decode",
    "sequence_log_probability",
    "best_sequence",
    "beam_search",
    "decoding_models",
    "fixed_dropout",
    "normalize_greedy",
    "normalize_sequence",
    "to_numpy",
    "call_method",
    "constructor",
    "class_paths",
    "tensor",
    "DECODING_MODELS_SOURCE",
    "parameter_shapes",
    "random_parameters",
    "give_weights",
    "SET_WEIGHTS_SOURCE",
    "TRAINING_SOURCE",
    "assert_dropout_acts",
    "STACK_DROPOUT_SITES",
]


def _float64(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


# --- the forward pass ----------------------------------------------------------


def positional_encoding(length: int, depth: int) -> np.ndarray:
    """PE[pos, 2i] = sin(pos / 10000^(2i/depth)), PE[pos, 2i+1] = cos(same), float64."""
    positions = np.arange(length, dtype=np.float64)[:, None]
    columns = np.arange(depth)[None, :]
    angles = positions / np.power(10000.0, (columns - columns % 2) / depth)
    return np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))


def _softmax(x, axis=-1):
    with np.errstate(all="ignore"):
        largest = np.max(x, axis=axis, keepdims=True)
        largest = np.where(np.isfinite(largest), largest, 0.0)
        exponentials = np.exp(x - largest)
        total = np.sum(exponentials, axis=axis, keepdims=True)
        return exponentials / np.where(total > 0, total, 1.0)


def layer_norm(x, gamma, beta, epsilon=1e-6):
    """LayerNormalization over the last axis (Keras's epsilon of the lab: 1e-6)."""
    x = _float64(x)
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * _float64(gamma) + _float64(beta)


def multi_head_attention(weights, query, value, mask=None):
    """``keras.layers.MultiHeadAttention`` (key = value) from its 8 weights.

    weights: [Wq (d, h, k), bq (h, k), Wk, bk, Wv (d, h, v), bv, Wo (h, v, d),
    bo (d,)]; query `(B, T, d)`, value `(B, S, d_v)`, mask broadcastable to
    `(B, T, S)`. Returns ``(output (B, T, d), weights (B, h, T, S))``; a fully
    masked row gets zero weights.
    """
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = (_float64(w) for w in weights)
    query, value = _float64(query), _float64(value)
    q = np.einsum("btd,dhk->bthk", query, Wq) + bq
    k = np.einsum("bsd,dhk->bshk", value, Wk) + bk
    v = np.einsum("bsd,dhv->bshv", value, Wv) + bv
    scores = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(Wq.shape[-1])
    if mask is not None:
        allowed = np.asarray(mask, dtype=bool)[:, None]  # (B, 1, T, S)
        scores = np.where(allowed, scores, -np.inf)
    attention = _softmax(scores, axis=-1)  # (B, h, T, S)
    context = np.einsum("bhts,bshv->bthv", attention, v)
    return np.einsum("bthv,hvd->btd", context, Wo) + bo, attention


def _feed_forward(block, x):
    (W1, b1), (W2, b2) = block["dense1"], block["dense2"]
    hidden = np.maximum(x @ _float64(W1) + _float64(b1), 0.0)
    return hidden @ _float64(W2) + _float64(b2)


def _embed(table, token_ids):
    table = _float64(table)
    token_ids = np.asarray(token_ids)
    d_model = table.shape[1]
    length = token_ids.shape[1]
    return table[token_ids] * math.sqrt(d_model) + positional_encoding(length, d_model)


def _dropout_sites(dropout, at):
    """(dropout after the embedding, dropout inside the layers): identities
    unless ``dropout`` is given, and then only where ``at`` says."""
    identity = lambda x: x  # noqa: E731
    if dropout is None:
        return identity, identity
    return (dropout if "embedding" in at else identity,
            dropout if "layers" in at else identity)


def encoder_forward(parameters, token_ids, dropout=None, at=("embedding", "layers")):
    """The encoder's output `(B, S, d_model)` from ``random_parameters``'s dict.

    ``dropout`` (e.g. ``fixed_dropout(rate)``) stands for the Dropout layers
    in training mode: after the embedding and, inside each layer, on the
    attention output and on the feed-forward output (before each residual),
    limited to the sites named in ``at`` ("embedding", "layers").
    """
    embedding_dropout, layer_dropout = _dropout_sites(dropout, at)
    token_ids = np.asarray(token_ids)
    x = embedding_dropout(_embed(parameters["embedding"], token_ids))
    key_mask = (token_ids != 0)[:, None, :]  # (B, 1, S)
    for block in parameters["blocks"]:
        attention, _ = multi_head_attention(block["self_attention"], x, x, key_mask)
        x = layer_norm(x + layer_dropout(attention), *block["norm1"])
        x = layer_norm(x + layer_dropout(_feed_forward(block, x)), *block["norm2"])
    return x


def decoder_forward(parameters, token_ids, context, context_padding_mask=None, dropout=None,
                    at=("embedding", "layers")):
    """``(output (B, T, d_model), last cross-attention weights (B, h, T, S))``.

    ``dropout`` and ``at``: as in ``encoder_forward`` (inside each layer: the
    self-attention, cross-attention and feed-forward outputs).
    """
    embedding_dropout, layer_dropout = _dropout_sites(dropout, at)
    token_ids = np.asarray(token_ids)
    context = _float64(context)
    length = token_ids.shape[1]
    x = embedding_dropout(_embed(parameters["embedding"], token_ids))
    causal = np.tril(np.ones((length, length), dtype=bool))
    self_mask = causal[None] & (token_ids != 0)[:, None, :]  # (B, T, T)
    cross_mask = None
    if context_padding_mask is not None:
        cross_mask = np.asarray(context_padding_mask, dtype=bool)[:, None, :]  # (B, 1, S)
    scores = None
    for block in parameters["blocks"]:
        attention, _ = multi_head_attention(block["self_attention"], x, x, self_mask)
        x = layer_norm(x + layer_dropout(attention), *block["norm1"])
        attention, scores = multi_head_attention(block["cross_attention"], x, context,
                                                 cross_mask)
        x = layer_norm(x + layer_dropout(attention), *block["norm2"])
        x = layer_norm(x + layer_dropout(_feed_forward(block, x)), *block["norm3"])
    return x, scores


def transformer_forward(parameters, context_ids, target_ids, dropout=None,
                        parts=("encoder", "decoder")):
    """Logits `(B, T, target_vocab_size)` of the whole Transformer; ``dropout``
    acts in the ``parts`` named (both in training mode)."""
    context_ids = np.asarray(context_ids)
    context = encoder_forward(parameters["encoder"], context_ids,
                              dropout=dropout if "encoder" in parts else None)
    output, _ = decoder_forward(parameters["decoder"], target_ids, context,
                                context_padding_mask=context_ids != 0,
                                dropout=dropout if "decoder" in parts else None)
    kernel, bias = parameters["final"]
    return output @ _float64(kernel) + _float64(bias)


# --- training mode: the grader's fixed dropout pattern ----------------------------

#: Runs in the student's kernel (and here): ``call_in_training_mode`` calls a
#: student's layer or model with ``training=True`` while every
#: ``keras.layers.Dropout`` drops a fixed pattern of values instead of random
#: ones (``fixed_keep_mask``), so that training-mode outputs can be compared
#: with ``encoder_forward(..., dropout=fixed_dropout(rate))``. Keras's Dropout
#: is restored afterwards.
TRAINING_SOURCE = '''
import numpy as np


def fixed_keep_mask(shape):
    """The values a dropout keeps under the grader's fixed pattern: those whose
    index (..., i, j, k) has (... + 7 i + 3 j + k) % 4 != 0 (a quarter dropped)."""
    indices = np.indices(tuple(int(n) for n in shape))
    code = np.zeros(indices.shape[1:], dtype=np.int64)
    weight = 1
    for axis in range(len(shape) - 1, -1, -1):
        code += weight * indices[axis]
        weight = 2 * weight + 1
    return code % 4 != 0


def _dropouts_of(layer, where):
    """The ids of the keras.layers.Dropout that act in ``call_in_training_mode``:
    those inside the EncoderLayers and DecoderLayers ("inner"), the others
    ("own": after the embedding), or those inside the sublayer of that name
    ("encoder", "decoder")."""
    import keras

    def inside(target):
        found = target._flatten_layers(include_self=True, recursive=True)
        return {id(item) for item in found if isinstance(item, keras.layers.Dropout)}

    if where in ("own", "inner"):
        blocks = [item for item in layer._flatten_layers(include_self=False, recursive=True)
                  if type(item).__name__ in ("EncoderLayer", "DecoderLayer")]
        inner = set().union(*(inside(block) for block in blocks))
        return inner if where == "inner" else inside(layer) - inner
    return inside(getattr(layer, where))


def call_in_training_mode(layer, args, kwargs, where=None):
    """``layer(*args, training=True, **kwargs)`` with the fixed dropout pattern,
    as a NumPy array; with ``where`` (see _dropouts_of), only those dropouts act,
    the others pass their inputs on."""
    import keras
    from keras import ops

    dropout = keras.layers.Dropout
    original = dropout.call
    acting = None if where is None else _dropouts_of(layer, where)

    def fixed_call(self, inputs, training=False):
        if training and self.rate > 0 and (acting is None or id(self) in acting):
            keep = ops.cast(ops.convert_to_tensor(fixed_keep_mask(inputs.shape)), inputs.dtype)
            return inputs * keep / (1.0 - self.rate)
        return inputs

    dropout.call = fixed_call
    try:
        output = layer(*args, training=True, **kwargs)
    finally:
        dropout.call = original
    return np.asarray(ops.convert_to_numpy(output))
'''


def _training_namespace() -> dict:
    scope: dict = {}
    exec(compile(TRAINING_SOURCE, "<training fixture>", "exec"), scope)
    return scope


#: Where an Encoder's or Decoder's dropout acts (assert_dropout_acts's sites):
#: somewhere, after the embedding, inside the layers.
STACK_DROPOUT_SITES = [
    (None, "training=True changed nothing: dropout must act when training", True),
    ("own", "no dropout after the embedding: apply self.dropout(x, training=training) to "
            "the embedded ids", True),
    ("inner", "the layers did not train: call each one with training=training (or let Keras "
              "pass it down), never training=False", True)]


def assert_dropout_acts(construct, layer, args, calm, sites, what: str) -> None:
    """Where the layer's values are wrong (its main test's points lost), its
    training judged against itself: with the fixed pattern acting only at each
    site of ``sites`` ([(where, message)]: call_in_training_mode's ``where``),
    the output differs from ``calm``, its inference output. A site whose
    dropout could not reach the output (``reaches`` False) is skipped."""
    from autograder.testkernel.testing import as_array, assert_true

    for where, message, reaches in sites:
        if not reaches:
            continue
        trained = as_array(construct(TRAINING_SOURCE, "call_in_training_mode", layer, args, {},
                                     where), f"{what}, training=True")
        assert_true(not (trained.shape == calm.shape
                         and np.allclose(trained, calm, rtol=1e-5, atol=1e-6)),
                    f"{what}, training=True: {message}.")

def fixed_dropout(rate: float):
    """The fixed-pattern dropout of ``TRAINING_SOURCE`` at ``rate``, in float64."""
    keep_mask = _training_namespace()["fixed_keep_mask"]

    def apply(x):
        x = _float64(x)
        return x * keep_mask(x.shape) / (1.0 - rate)

    return apply


# --- get_config ---------------------------------------------------------------------


# --- how many weights ------------------------------------------------------------


def mha_parameter_count(d_model: int, num_heads: int, key_dim: int) -> int:
    """Weights of MultiHeadAttention(num_heads, key_dim) on d_model inputs."""
    projection = d_model * num_heads * key_dim + num_heads * key_dim
    return 3 * projection + num_heads * key_dim * d_model + d_model


def _block_count(d_model, num_heads, dff, cross: bool) -> int:
    attention = mha_parameter_count(d_model, num_heads, d_model // num_heads)
    ffn = d_model * dff + dff + dff * d_model + d_model
    norms = (3 if cross else 2) * 2 * d_model
    return (2 if cross else 1) * attention + ffn + norms


def encoder_parameter_count(num_layers, d_model, num_heads, dff, vocab_size) -> int:
    """Embedding table plus num_layers encoder layers (the sinusoids are no weights)."""
    return vocab_size * d_model + num_layers * _block_count(d_model, num_heads, dff, False)


def decoder_parameter_count(num_layers, d_model, num_heads, dff, vocab_size) -> int:
    """Embedding table plus num_layers decoder layers."""
    return vocab_size * d_model + num_layers * _block_count(d_model, num_heads, dff, True)


def transformer_parameter_count(num_layers, d_model, num_heads, dff, input_vocab_size,
                                target_vocab_size) -> int:
    """Encoder, decoder and the final Dense layer to the target vocabulary."""
    return (encoder_parameter_count(num_layers, d_model, num_heads, dff, input_vocab_size)
            + decoder_parameter_count(num_layers, d_model, num_heads, dff, target_vocab_size)
            + d_model * target_vocab_size + target_vocab_size)


# --- loss and accuracy ---------------------------------------------------------------


def masked_loss(y_true, y_pred) -> float:
    """Mean sparse cross-entropy (from logits) over the positions where y_true != 0."""
    real = np.asarray(y_true) != 0
    return float((per_token_cross_entropy(y_true, y_pred) * real).sum() / real.sum())


def per_token_cross_entropy(y_true, y_pred) -> np.ndarray:
    """-log softmax(y_pred)[y_true] at every position, padding included, `(B, T)`."""
    y_true = np.asarray(y_true).astype(np.int64)
    log_probabilities = _log_softmax(y_pred)
    return -np.take_along_axis(log_probabilities, y_true[..., None], axis=-1)[..., 0]


def masked_accuracy(y_true, y_pred) -> float:
    """Fraction of the positions where y_true != 0 whose argmax is y_true."""
    y_true = np.asarray(y_true).astype(np.int64)
    predicted = np.argmax(_float64(y_pred), axis=-1)
    real = y_true != 0
    return float(((predicted == y_true) & real).sum() / real.sum())


# --- decoding ----------------------------------------------------------------------


def temperature_probabilities(logits, temperature: float) -> np.ndarray:
    """p_i(T) = exp(z_i / T) / sum_j exp(z_j / T) over the last axis."""
    return _softmax(_float64(logits) / float(temperature), axis=-1)


def _log_softmax(z):
    z = _float64(z)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _next_logits(model, context_row, prefix) -> np.ndarray:
    """Logits after ``prefix`` (start id first) for one context row.

    A decoding fixture is asked directly (no Keras needed in the test kernel);
    any other model is called the lab's way.
    """
    logits_of = getattr(model, "_logits", None)
    if logits_of is not None:
        row = tuple(int(t) for t in np.trim_zeros(np.asarray(context_row), "b"))
        return np.asarray(logits_of(row, tuple(int(t) for t in prefix)), dtype=np.float64)
    context = np.asarray(context_row, dtype=np.int64)[None, :]
    target = np.asarray(prefix, dtype=np.int64)[None, :]
    return _float64(to_numpy(model((context, target), training=False))[0, -1])


def greedy_decode(model, context_ids, max_length, start_id, end_id) -> np.ndarray:
    """Ids `(B, L)` after the start id, end id included, 0 after it; L <= max_length."""
    context_ids = np.asarray(context_ids)
    rows = []
    for context_row in context_ids:
        prefix = [start_id]
        while len(prefix) - 1 < max_length:
            token = int(np.argmax(_next_logits(model, context_row, prefix)))
            prefix.append(token)
            if token == end_id:
                break
        rows.append(prefix[1:])
    width = max(len(row) for row in rows)
    return np.array([row + [0] * (width - len(row)) for row in rows], dtype=np.int64)


def sequence_log_probability(model, context_row, sequence, start_id) -> float:
    """Total log-probability of ``sequence`` (ids after the start id)."""
    prefix, total = [start_id], 0.0
    for token in sequence:
        total += float(_log_softmax(_next_logits(model, context_row, prefix))[token])
        prefix.append(int(token))
    return total


def best_sequence(model, context_row, max_length, start_id, end_id, tokens):
    """The sequence with the highest total log-probability, by exhaustive search.

    ``tokens``: the ids worth trying (the others have negligible probability
    in the fixtures). A sequence ends at end_id or after max_length ids.
    Returns ``(sequence, log_probability)``.
    """
    best = (None, -np.inf)

    def walk(prefix, score):
        nonlocal best
        generated = prefix[1:]
        if (generated and generated[-1] == end_id) or len(generated) == max_length:
            if score > best[1]:
                best = (list(generated), score)
            return
        if score <= best[1]:  # log-probabilities only fall: prune
            return
        log_probabilities = _log_softmax(_next_logits(model, context_row, prefix))
        for token in tokens:
            walk(prefix + [token], score + float(log_probabilities[token]))

    walk([start_id], 0.0)
    return best


def beam_search(model, context_ids, beam_width, max_length, start_id, end_id,
                reading: str = "list", steps: int | None = None) -> np.ndarray:
    """Beam search by total log-probability, as the lab states it (``reading``
    "list"), or as two misreadings do, to name them in the feedback.

    "list", the lab's one algorithm: at each step every open beam is extended
    by every token and the candidates are ranked by total log-probability;
    those among the beam_width best that wrote end_id leave for the list of
    finished sentences (never extended, their scores kept); the next beam is
    the beam_width best candidates that did not write end_id. The search stops
    when no open beam scores above the best finished sentence, or after
    max_length steps; the answer is the best finished sentence or, when
    max_length stopped the search, the best of them and the open beams.

    "among_beams": finished beams stay in the beam, where open candidates that
    score higher push them out (the reading the lab's text rules out).

    "extended": every beam is extended at every step, finished or not (as
    keras-hub's ``BeamSampler`` does), until every beam holds end_id or after
    max_length steps; the best beam, cut after its first end_id.

    ``steps``: the "list" search stopped after that many steps whatever its
    stop rule says, answering the best of its finished sentences and open
    beams then (what a search that stops too early returns).

    context_ids `(1, S)`. Returns the ids `(L,)` after the start id.
    """
    if reading not in ("list", "among_beams", "extended"):
        raise ValueError(f"unknown reading {reading!r}")
    context_row = np.asarray(context_ids)[0]
    beams = [([start_id], 0.0)]  # open beams (all beams for "among_beams", "extended")
    finished: list[tuple[list[int], float]] = []
    for _ in range(max_length if steps is None else min(steps, max_length)):
        candidates = []
        for prefix, score in beams:
            if reading == "among_beams" and prefix[-1] == end_id:
                candidates.append((prefix, score))  # kept as it is, competing
                continue
            log_probabilities = _log_softmax(_next_logits(model, context_row, prefix))
            candidates += [(prefix + [token], score + float(log_probabilities[token]))
                           for token in range(log_probabilities.shape[0])]
        candidates.sort(key=lambda candidate: -candidate[1])
        if reading != "list":
            beams = candidates[:beam_width]
            if all(end_id in prefix[1:] for prefix, _ in beams):
                break
            continue
        finished += [c for c in candidates[:beam_width] if c[0][-1] == end_id]
        beams = [c for c in candidates if c[0][-1] != end_id][:beam_width]
        if not beams or (finished and max(score for _, score in finished) >= beams[0][1]):
            break
    best = max(finished + beams, key=lambda candidate: candidate[1])[0][1:]
    if end_id in best:
        best = best[:best.index(end_id) + 1]
    return np.array(best, dtype=np.int64)


def normalize_greedy(result, end_id, max_length, what: str,
                     start_id: int | None = None) -> list[list[int]]:
    """Rows of a greedy result up to and including end_id.

    Raises AssertionError (the student's feedback) when every row starts with
    ``start_id`` (the fixtures never write it), when a row is longer than
    max_length or holds anything but padding after its end id.
    """
    array = to_numpy(result)
    if array.ndim != 2:
        raise AssertionError(f"{what}: returned shape {array.shape}, expected (B, L): "
                             "one row of ids per context.")
    if not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.equal(np.mod(array, 1), 0)):
            raise AssertionError(f"{what}: returned non-integer values; return token ids.")
        array = array.astype(np.int64)
    if start_id is not None and array.size and np.all(array[:, 0] == start_id):
        raise AssertionError(f"{what}: every row starts with the start id {start_id}; "
                             "return only the ids written after it.")
    if array.shape[1] > max_length:
        raise AssertionError(f"{what}: rows have {array.shape[1]} ids, more than "
                             f"max_length={max_length}.")
    rows = []
    for index, row in enumerate(array.tolist()):
        if end_id in row:
            stop = row.index(end_id) + 1
            if any(token != 0 for token in row[stop:]):
                raise AssertionError(
                    f"{what}: row {index} goes on after the end id {end_id} "
                    f"({row}); stop a row at end_id and pad it with 0.")
            row = row[:stop]
        else:
            while row and row[-1] == 0:
                row = row[:-1]
        rows.append(row)
    return rows


def normalize_sequence(result, max_length, what: str,
                       start_id: int | None = None) -> list[int]:
    """A beam search result as a list of ids (a leading axis of 1 and trailing
    padding removed). Raises AssertionError (the student's feedback) when it
    starts with ``start_id`` (the fixtures never write it) or is longer than
    max_length."""
    array = to_numpy(result)
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 1:
        raise AssertionError(f"{what}: returned shape {array.shape}, expected (L,): the "
                             "ids of the best sequence.")
    row = [int(token) for token in array.tolist()]
    while row and row[-1] == 0:
        row = row[:-1]
    if start_id is not None and row and row[0] == start_id:
        raise AssertionError(f"{what}: the answer starts with the start id {start_id}; "
                             "return only the ids written after it.")
    if len(row) > max_length:
        raise AssertionError(f"{what}: returned {len(row)} ids, more than "
                             f"max_length={max_length}.")
    return row


#: Tiny "models" for the decoding tests: called as model((context_ids,
#: target_ids), training=False), they return logits (B, T, V) as a backend
#: tensor; the logits at position t depend only on the context row (trailing
#: padding ignored) and target_ids[:, :t + 1] (causal, like a Transformer).
DECODING_MODELS_SOURCE = '''
import hashlib

import numpy as np


class _PrefixModel:
    """Logits from the context row and the target prefix; see the subclasses."""

    vocab_size = 6

    def _logits(self, context, prefix):
        raise NotImplementedError

    def __call__(self, inputs, training=False):
        from keras import ops

        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise TypeError("call the model as model((context_ids, target_ids), "
                            "training=False), with one tuple of two arrays")
        context = np.asarray(ops.convert_to_numpy(inputs[0])).astype(np.int64)
        target = np.asarray(ops.convert_to_numpy(inputs[1])).astype(np.int64)
        if context.ndim != 2 or target.ndim != 2 or context.shape[0] != target.shape[0]:
            raise ValueError(f"expected context_ids (B, S) and target_ids (B, T) with the "
                             f"same B; got {context.shape} and {target.shape}")
        logits = np.zeros(target.shape + (self.vocab_size,), dtype=np.float32)
        for b in range(target.shape[0]):
            row = tuple(int(t) for t in np.trim_zeros(context[b], "b"))
            for t in range(target.shape[1]):
                logits[b, t] = self._logits(row, tuple(int(x) for x in target[b, : t + 1]))
        return ops.convert_to_tensor(logits)

    def predict(self, inputs, verbose=0, **kwargs):
        from keras import ops

        return np.asarray(ops.convert_to_numpy(self(inputs, training=False)))

    def predict_on_batch(self, inputs):
        return self.predict(inputs)


class TableModel(_PrefixModel):
    """Seeded random logits; the end id wins (by a margin) once the sequence
    reaches the context's length (2 to 8 ids, end included) and is very
    unlikely before. Pad and start ids are never likely."""

    def __init__(self, seed, vocab_size=7, start_id=1, end_id=2, scale=2.0):
        self.seed, self.vocab_size = seed, vocab_size
        self.start_id, self.end_id, self.scale = start_id, end_id, scale
        self._cache = {}

    def length(self, context):
        digest = hashlib.sha256(repr(("length", self.seed, tuple(context))).encode()).digest()
        return 2 + digest[0] % 7

    def _logits(self, context, prefix):
        key = (context, prefix)
        if key not in self._cache:
            digest = hashlib.sha256(repr((self.seed, context, prefix)).encode()).digest()
            generator = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            z = self.scale * generator.normal(size=self.vocab_size)
            z[[0, self.start_id, self.end_id]] = -30.0
            order = np.argsort(-z)
            if z[order[0]] - z[order[1]] < 0.3:  # a clear winner: no near ties
                z[order[0]] = z[order[1]] + 0.3
            if len(prefix) >= self.length(context):  # len(prefix) - 1 ids generated
                z[self.end_id] = z.max() + 3.0
            self._cache[key] = z.astype(np.float32)
        return self._cache[key]


class TreeModel(_PrefixModel):
    """Hand-set next-token probabilities.

    tree: {prefix: {symbol: probability}}, where a prefix is the string of the
    symbols generated so far ("" at the start, "a", "ab", ...; "$" is the end
    id) and symbols are "a", "b", "c" and "$". Unlisted prefixes use
    ``default``; unlisted symbols get 1e-4 before normalisation. ``ids`` maps
    the symbols to token ids. ``offsets`` ({prefix: number}) adds a constant to
    every logit after that prefix: the probabilities stay the same, but the
    logits are no longer log-probabilities (as with a real model's logits), so
    a sum of raw logits ranks the sequences differently. ``end_stays``: after
    the end id the end id is certain (log-probability 0, the others -100), so
    a beam extended after its end keeps its score; otherwise the tree (or
    ``default``) goes on after the end as a real model's logits do.
    """

    def __init__(self, tree, default=None, start_id=1, end_id=2, ids=None, vocab_size=6,
                 offsets=None, end_stays=False):
        self.tree, self.end_stays = tree, end_stays
        self.default = default or {"$": 0.6, "a": 0.15, "b": 0.15, "c": 0.1}
        self.start_id, self.end_id, self.vocab_size = start_id, end_id, vocab_size
        self.ids = dict(ids or {"a": 3, "b": 4, "c": 5})
        self.ids["$"] = end_id
        self.symbols = {token: symbol for symbol, token in self.ids.items()}
        self.offsets = {str(key): float(value) for key, value in (offsets or {}).items()}

    def _logits(self, context, prefix):
        key = "".join(self.symbols.get(token, "?") for token in prefix[1:])
        if self.end_stays and "$" in key:
            logits = np.full(self.vocab_size, -100.0)
            logits[self.end_id] = 0.0
            return logits.astype(np.float32)
        probabilities = np.full(self.vocab_size, 1e-4)
        probabilities[[0, self.start_id]] = 1e-9
        for symbol, probability in self.tree.get(key, self.default).items():
            probabilities[self.ids[symbol]] = probability
        log_probabilities = np.log(probabilities / probabilities.sum())
        return (log_probabilities + self.offsets.get(key, 0.0)).astype(np.float32)


#: Greedy takes "a" (0.5) and ends with "aa$" (0.5 * 0.35 * 0.5 = 0.0875);
#: "b$" (0.4 * 0.9 = 0.36) is far better, and a beam of width 2 keeps "b".
TREE_GREEDY_MISSES = {
    "": {"a": 0.5, "b": 0.4, "c": 0.1},
    "a": {"a": 0.35, "b": 0.33, "c": 0.32},
    "b": {"$": 0.9, "a": 0.04, "b": 0.03, "c": 0.03},
    "c": {"$": 0.5, "a": 0.2, "b": 0.2, "c": 0.1},
    "aa": {"$": 0.5, "a": 0.2, "b": 0.2, "c": 0.1},
    "ab": {"$": 0.5, "a": 0.2, "b": 0.2, "c": 0.1},
    "ac": {"$": 0.5, "a": 0.2, "b": 0.2, "c": 0.1},
}

#: The best sequence "ab$" (0.6 * 0.9 * 0.9 = 0.486) ends with a smaller last
#: step (0.9) than "b$" (0.35 * 0.95 = 0.3325, last step 0.95): a beam that
#: ranks by the last step's log-probability alone returns "b$".
TREE_TOTAL_MATTERS = {
    "": {"a": 0.6, "b": 0.35, "c": 0.05},
    "a": {"b": 0.9, "a": 0.05, "c": 0.05},
    "b": {"$": 0.95, "a": 0.02, "b": 0.02, "c": 0.01},
    "ab": {"$": 0.9, "a": 0.04, "b": 0.03, "c": 0.03},
}


#: The best sequence "a$" (0.62 * 0.6 = 0.372) is the shorter one: "bb$"
#: (0.38 * 0.95 * 0.9 = 0.325) has a lower total log-probability but a higher
#: average per token, and a higher sum of probabilities (2.23 against 1.22).
#: A beam that normalises by length, or adds probabilities instead of
#: log-probabilities, returns "bb$".
TREE_SHORT_WINS = {
    "": {"a": 0.62, "b": 0.38},
    "a": {"$": 0.6, "c": 0.4},
    "b": {"b": 0.95, "$": 0.05},
    "bb": {"$": 0.9, "c": 0.1},
}


#: The best sequence "a$" (0.5 * 0.52 = 0.26) is the shorter one, and it ends
#: at step 2 while an open beam is still ahead of it ("bb": 0.45 * 0.9 =
#: 0.405), so the search must go on; "bb$" (0.405 * 0.55 = 0.223) then ends
#: below it by total but above it on average per token (-0.50 against
#: -0.67). A beam that ranks by the average log-probability (at any point,
#: however it stops) returns "bb$"; one stopped at step 2 would not show it.
TREE_SHORT_WINS_LATE = {
    "": {"a": 0.5, "b": 0.45, "c": 0.05},
    "a": {"$": 0.52, "c": 0.48},
    "b": {"b": 0.9, "$": 0.05, "a": 0.05},
    "bb": {"$": 0.55, "a": 0.45},
}

#: Finished beams must be kept: "a$" (0.5 * 0.56 = 0.28) ends at step 2 while
#: "bb" (0.405) is ahead of it and goes on, but everything after "bb" ends
#: lower, by total and on average ("bb$" 0.1215, "bbc$" 0.1215). A beam
#: search that drops finished beams (or extends them) never returns "a$".
TREE_KEPT = {
    "": {"a": 0.5, "b": 0.45, "c": 0.05},
    "a": {"$": 0.56, "c": 0.44},
    "b": {"b": 0.9, "$": 0.05, "a": 0.05},
    "bb": {"c": 0.5, "$": 0.3, "a": 0.2},
}

#: The first finished beam does not end the search: "a$" (0.25) ends at step
#: 2, but the open "bb" (0.405) can still beat it and does ("bb$" 0.3645).
#: With beam_width=3 the third beam ("aa", 0.15) is below "a$": a search
#: that stops once the best finished beam beats the WORST open beam (or any
#: finished beam at all) returns "a$".
TREE_GOES_ON = {
    "": {"a": 0.5, "b": 0.45, "c": 0.05},
    "a": {"$": 0.5, "a": 0.3, "b": 0.2},
    "b": {"b": 0.9, "$": 0.05, "a": 0.05},
    "bb": {"$": 0.9, "a": 0.05, "c": 0.05},
}

#: With max_length=2 the best sentence is unfinished: "bb" (0.7 * 0.9 =
#: 0.63) beats the finished "a$" (0.3 * 0.9 = 0.27). A search that prefers
#: any finished sentence to the open beams at max_length returns "a$".
TREE_MAX_LENGTH = {
    "": {"a": 0.3, "b": 0.7},
    "a": {"$": 0.9, "a": 0.05, "b": 0.05},
    "b": {"b": 0.9, "$": 0.05, "a": 0.05},
}

#: The beam keeps beam_width OPEN beams: with beam_width=2, "a$" (0.5 * 0.3 =
#: 0.15) finishes at step 2 beside "bb" (0.405); at step 3 two open beams are
#: ahead of it, "bba" (0.190) and "bbb" (0.182), and both must go on, since
#: "bbb$" (0.180) ends best. A search whose finished beams hold their places in
#: the beam for good (or whose width shrinks as beams finish) keeps only "bba",
#: whose sentences all end below "a$" ("bba$" 0.095), and returns "a$".
TREE_MAKES_ROOM = {
    "": {"a": 0.5, "b": 0.45, "c": 0.05},
    "a": {"$": 0.3, "a": 0.24, "b": 0.23, "c": 0.23},
    "b": {"b": 0.9, "a": 0.05, "$": 0.05},
    "bb": {"a": 0.47, "b": 0.45, "$": 0.08},
    "bba": {"$": 0.5, "a": 0.2, "b": 0.2, "c": 0.1},
    "bbb": {"$": 0.99, "a": 0.01},
}

#: Finished sentences leave the beam for a list of their own: with beam_width=2,
#: "$" (0.25) finishes at step 1 beside "a" (0.7); at step 2 the open "aa"
#: (0.35) and "ab" (0.315) are both ahead of it, and everything after them
#: ends lower ("aa$" 0.21, "ab$" 0.189), so "$" is the answer. Kept among the
#: beams, "$" is pushed out at step 2 by "aa" and "ab", and "aa$" (0.21) is
#: returned.
TREE_EVICTED = {
    "": {"a": 0.7, "$": 0.25, "b": 0.05},
    "a": {"a": 0.5, "b": 0.45, "$": 0.05},
    "aa": {"$": 0.6, "a": 0.2, "b": 0.2},
    "ab": {"$": 0.6, "a": 0.2, "b": 0.2},
}

TREES = {"greedy_misses": TREE_GREEDY_MISSES, "total_matters": TREE_TOTAL_MATTERS,
         "short_wins": TREE_SHORT_WINS, "short_wins_late": TREE_SHORT_WINS_LATE,
         "kept": TREE_KEPT, "goes_on": TREE_GOES_ON, "max_length": TREE_MAX_LENGTH,
         "makes_room": TREE_MAKES_ROOM, "evicted": TREE_EVICTED}


def make_model(kind, **kwargs):
    """TableModel(**kwargs) for kind "table"; otherwise a TreeModel of one of
    TREES (kwargs: start_id, end_id, ids, offsets, end_stays)."""
    if kind == "table":
        return TableModel(**kwargs)
    return TreeModel(TREES[kind], **kwargs)
'''


def decoding_models() -> dict:
    """The namespace of ``DECODING_MODELS_SOURCE``, built here (instructor side)."""
    scope: dict = {}
    exec(compile(DECODING_MODELS_SOURCE, "<decoding models>", "exec"), scope)
    return scope


# --- the grader's weights ------------------------------------------------------------


def parameter_shapes(kind, num_layers, d_model, num_heads, dff, vocab_size=None,
                     input_vocab_size=None, target_vocab_size=None, **others) -> dict:
    """The shapes of every weight of an Encoder or Decoder ("encoder",
    "decoder": ``vocab_size``) or Transformer ("transformer": the two
    vocabularies), given the constructor's arguments (``others``, max_length
    and dropout_rate, add no weight), in the curriculum's layout: the
    structure of ``random_parameters``.

    Read from the curriculum (the provided layers' sublayers, key_dim =
    d_model // num_heads), never from the student's layer.
    """
    if kind == "transformer":
        return {"encoder": parameter_shapes("encoder", num_layers, d_model, num_heads, dff,
                                            input_vocab_size),
                "decoder": parameter_shapes("decoder", num_layers, d_model, num_heads, dff,
                                            target_vocab_size),
                "final": [(d_model, target_vocab_size), (target_vocab_size,)]}
    key_dim = d_model // num_heads
    attention = [(d_model, num_heads, key_dim), (num_heads, key_dim)] * 3 + \
        [(num_heads, key_dim, d_model), (d_model,)]
    norm = [(d_model,), (d_model,)]

    def block():
        parts = {"self_attention": attention}
        if kind == "decoder":
            parts["cross_attention"] = attention
        parts.update(dense1=[(d_model, dff), (dff,)], dense2=[(dff, d_model), (d_model,)],
                     norm1=norm, norm2=norm)
        if kind == "decoder":
            parts["norm3"] = norm
        return parts

    return {"embedding": (vocab_size, d_model), "blocks": [block() for _ in range(num_layers)]}


def random_parameters(r, shapes):
    """Grader-chosen float32 weights for ``parameter_shapes``'s structure:
    kernels (and the embedding table) normal / sqrt(first dimension), vectors
    0.5 + 0.3 normal (biases, and LayerNormalization's gamma and beta)."""
    if isinstance(shapes, dict):
        return {key: random_parameters(r, value) for key, value in shapes.items()}
    if isinstance(shapes, list):
        return [random_parameters(r, value) for value in shapes]
    if len(shapes) > 1:
        return (r.normal(size=shapes) / np.sqrt(shapes[0])).astype("float32")
    return (0.5 + 0.3 * r.normal(size=shapes)).astype("float32")


def give_weights(construct, layer, kind, parameters, what: str) -> None:
    """Set the grader's ``parameters`` in the student's ``layer``, sublayer by
    sublayer (``SET_WEIGHTS_SOURCE`` in the student's kernel); fail, saying
    where, when a sublayer is missing or does not take them.

    The references are then computed from ``parameters``, the grader's own
    values: nothing the student's layer reports about its weights is used,
    so a layer that ignores set_weights or misreports get_weights gets the
    references of the weights it was given.
    """
    from autograder.testkernel.testing import assert_true

    problem = construct(SET_WEIGHTS_SOURCE, "set_weights_by_sublayer", layer, kind, parameters)
    assert_true(not problem, f"{what}: {problem}")


#: Runs in the student's kernel: gives a student's Encoder, Decoder or
#: Transformer the grader's weights, sublayer by sublayer (the provided
#: layers' attribute names; the embedding and the stacked layers by what they
#: hold, so that any attribute name works), through each sublayer's
#: set_weights. Returns "" or what did not fit.
SET_WEIGHTS_SOURCE = '''
def set_weights_by_sublayer(layer, kind, parameters):
    """Give ``layer`` (kind "encoder", "decoder" or "transformer") the weights
    ``parameters`` ({"embedding", "blocks": [...]}; for a transformer
    {"encoder", "decoder", "final": [kernel, bias]}); "" or the problem."""

    class Misfit(Exception):
        pass

    def children(parent):
        flatten = getattr(parent, "_flatten_layers", None)
        if flatten is None:
            raise Misfit(f"{type(parent).__name__} is not a Keras layer.")
        return list(flatten(include_self=False, recursive=False))

    def give(sublayer, values, where):
        try:
            sublayer.set_weights(values)
        except Exception as error:
            shapes = [tuple(value.shape) for value in values]
            raise Misfit(f"{where} does not take weights of the shapes {shapes} (the "
                         f"provided layers built with the arguments given): "
                         f"{type(error).__name__}: {str(error)[:300]}") from None

    def stack(parent, cross, values, where):
        name = type(parent).__name__
        wanted = "DecoderLayer" if cross else "EncoderLayer"
        found = children(parent)
        embeddings = [s for s in found if hasattr(s, "token_embedding")]
        blocks = [s for s in found if hasattr(s, "self_attention") and hasattr(s, "ffn")
                  and hasattr(s, "cross_attention") == cross]
        if len(embeddings) != 1:
            raise Misfit(
                f"{where} has {len(embeddings)} PositionalEmbedding sublayers, expected "
                f"exactly one (the provided PositionalEmbedding, created in __init__).")
        if len(blocks) != len(values["blocks"]):
            raise Misfit(
                f"{where} has {len(blocks)} {wanted} sublayer(s), expected "
                f"num_layers={len(values['blocks'])}: create num_layers separate "
                f"{wanted}s in __init__ and keep them in a list attribute.")
        give(embeddings[0].token_embedding, [values["embedding"]],
             f"{where}'s token embedding")
        paths = {"self_attention": "self_attention", "cross_attention": "cross_attention",
                 "dense1": "ffn.dense1", "dense2": "ffn.dense2", "norm1": "norm1",
                 "norm2": "norm2", "norm3": "norm3"}
        for index, (block, parts) in enumerate(zip(blocks, values["blocks"])):
            for part, arrays in parts.items():
                target = block
                for attribute in paths[part].split("."):
                    target = getattr(target, attribute)
                give(target, arrays, f"{where}'s {wanted} {index}: {paths[part]}")

    try:
        if kind == "encoder":
            stack(layer, False, parameters, "your Encoder")
        elif kind == "decoder":
            stack(layer, True, parameters, "your Decoder")
        else:
            found = children(layer)

            def holds(sublayer, cross):
                inner = children(sublayer) if hasattr(sublayer, "_flatten_layers") else []
                return any(hasattr(s, "self_attention") and hasattr(s, "cross_attention") == cross
                           for s in inner)

            encoder = getattr(layer, "encoder", None) or next(
                (s for s in found if holds(s, False)), None)
            decoder = getattr(layer, "decoder", None) or next(
                (s for s in found if holds(s, True)), None)
            final = getattr(layer, "final_layer", None) or next(
                (s for s in found if type(s).__name__ == "Dense"), None)
            if encoder is None or decoder is None or final is None:
                return ("your Transformer needs the sublayers encoder (an Encoder), decoder "
                        "(a Decoder) and final_layer (a Dense layer).")
            stack(encoder, False, parameters["encoder"], "your Transformer's encoder")
            stack(decoder, True, parameters["decoder"], "your Transformer's decoder")
            give(final, parameters["final"], "your Transformer's final_layer")
    except Misfit as problem:
        return str(problem)
    return ""
'''
