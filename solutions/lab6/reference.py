"""Reference implementations of lab 6 ("a decoder-only language model"), instructor side.

Never shipped with labs/ or the `labkit` package. Everything numeric is
float64 NumPy, written independently of the solution cells in
solutions/lab6/lab6_language_model.py (they share the maths, not the code),
and tested on its own in solutions/lab6/test_reference.py. The lab's
conventions, which its text states:

- **Rotary embeddings** rotate consecutive pairs of a head's features,
  ``(x[2i], x[2i+1])``, by the angle ``position * base ** (-2i / head_dim)``
  (``base`` 10,000): ``rotary(x, positions)`` for ``x`` of shape
  ``(..., T, head_dim)`` (``head_dim`` even) and ``positions`` of shape
  ``(T,)``. So the score of a rotated query at position m with a rotated
  key at position n depends on m - n only, norms are kept and position 0 is
  the identity.
- **Causal attention with a key/value cache**: ``causal_attention(q, k, v)``
  lets query t see keys 0..t; ``cached_attention(q_new, k_cache, v_cache)``
  lets the new queries, which follow the cached positions, see the cache
  and the new keys up to their own position: the same rows as the full
  computation's last rows (``cache_matches_full``).
- **Next-token loss**: the logits at position t predict the token at t + 1;
  ``next_token_loss(logits, token_ids, pad_id)`` is the mean cross-entropy
  over the targets that are not padding; ``perplexity`` is its exponential.
- **Filtering**, on the logits of one step, shape ``(..., V)``, filtered
  logits set to ``-inf``: ``top_k_filter`` keeps every logit at least as
  large as the k-th largest (ties at the k-th value kept, so at least k
  survive); ``top_p_filter`` keeps the smallest set of most probable tokens
  whose probability reaches p, the token that crosses p included, and
  always the most probable token (ties in probability ordered by token id).
- **Sampling distribution** of one step: temperature first (the logits
  divided by it), then top-k, then top-p, then the softmax
  (``sampling_distribution``); a temperature of 0 is the argmax.
"""

from __future__ import annotations

import numpy as np

# Re-exported for the hidden tests, which run both under the grader and in place.
from autograder.testkernel.layers import (  # noqa: F401
    call_method, check_config, class_paths)
from autograder.testkernel.testing import constructor, tensor, to_numpy  # noqa: F401

#: Rotary embeddings' base, as in RoFormer (Su et al., 2021) and most language models.
ROTARY_BASE = 10_000.0


def _float64(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def rotary_angles(positions, head_dim: int, base: float = ROTARY_BASE) -> np.ndarray:
    """The rotation angle of each position and pair: shape ``(T, head_dim // 2)``."""
    if head_dim % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: head_dim must be "
                         f"even, got {head_dim}.")
    frequencies = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return _float64(positions)[:, None] * frequencies[None, :]


def rotary(x, positions, base: float = ROTARY_BASE) -> np.ndarray:
    """``x`` ``(..., T, head_dim)`` with each pair (2i, 2i+1) at position t rotated
    by ``rotary_angles`` (counter-clockwise: (1, 0) at angle a becomes (cos a, sin a))."""
    x = _float64(x)
    angles = rotary_angles(positions, x.shape[-1], base)
    cos, sin = np.cos(angles), np.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rotary_halves(x, positions, base: float = ROTARY_BASE) -> np.ndarray:
    """The other layout, to name it when an answer uses it: feature ``i`` paired
    with feature ``i + head_dim/2`` (the two halves), pair ``i`` turned by the same
    angle as ``rotary``'s pair ``i`` (GPT-NeoX's ``rotate_half``, keras-hub's
    ``RotaryEmbedding``). The lab pairs consecutive features instead."""
    x = _float64(x)
    half = x.shape[-1] // 2
    angles = rotary_angles(positions, x.shape[-1], base)
    cos, sin = np.cos(angles), np.sin(angles)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def rotary_mistakes(x, positions, base: float = ROTARY_BASE) -> list[tuple[np.ndarray, str]]:
    """What the common direction and layout mistakes give for ``x`` at ``positions``,
    each with what to tell the student: the values' tests cell names them (and
    costs them); the start's cell grades the positions only, so it takes the right
    positions in these too."""
    return [(rotary(x, -_float64(positions), base),
             "each pair is turned clockwise; turn it counter-clockwise, (1, 0) -> (cos, sin)."),
            (rotary_halves(x, positions, base),
             "these are the two halves rotated (feature i paired with feature i + head_dim/2, "
             "GPT-NeoX's and keras-hub's layout); this lab pairs consecutive features "
             "(x[2i], x[2i+1]), as Meta's LLaMA code does.")]


def rotary_atol(x, positions) -> float:
    """The absolute tolerance for a float32 answer of ``rotary(x, positions)``.

    The policy's ATOL, plus what float32 angles cost: ``m * theta`` in float32 is
    off by up to a few units in the last place, about ``m * 2**-23`` radians at
    position ``m`` (``theta <= 1``), and each output by that times its pair's
    length. Four times that bound at the largest position and pair, so a correct
    float32 answer uses a small part of it (about 2e-4 of error at position 2000
    against about 3e-3 allowed for pairs of length 3), while any wrong position
    or angle is off by much more than that.
    """
    from autograder.testkernel import policy

    x = _float64(x)
    largest = float(np.max(np.abs(_float64(positions)))) if np.size(positions) else 0.0
    pair = float(np.max(np.hypot(x[..., 0::2], x[..., 1::2]))) if x.size else 0.0
    return policy.ATOL + 4 * 2.0 ** -23 * largest * pair


def _softmax(z, axis=-1) -> np.ndarray:
    z = _float64(z)
    finite = np.where(np.isfinite(z), z, -np.inf)
    shifted = finite - np.max(finite, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def causal_attention(q, k, v) -> np.ndarray:
    """Scaled dot-product attention where query t sees keys 0..t: ``(..., T, d_v)``."""
    q, k, v = _float64(q), _float64(k), _float64(v)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    t = scores.shape[-1]
    allowed = np.tril(np.ones((t, t), dtype=bool))
    return _softmax(np.where(allowed, scores, -np.inf)) @ v


def cached_attention(q_new, k_cache, v_cache, k_new, v_new) -> np.ndarray:
    """The new positions' attention given the cached keys and values before them.

    ``q_new``, ``k_new``, ``v_new``: ``(..., N, d)`` for positions P..P+N-1;
    ``k_cache``, ``v_cache``: ``(..., P, d)`` for positions 0..P-1.
    """
    k = np.concatenate([_float64(k_cache), _float64(k_new)], axis=-2)
    v = np.concatenate([_float64(v_cache), _float64(v_new)], axis=-2)
    q = _float64(q_new)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    past, n = k.shape[-2] - q.shape[-2], q.shape[-2]
    allowed = np.arange(k.shape[-2])[None, :] <= (past + np.arange(n))[:, None]
    return _softmax(np.where(allowed, scores, -np.inf)) @ v


def cache_matches_full(q, k, v, cached: int) -> bool:
    """Whether attending from the cache gives the full computation's rows (it must)."""
    full = causal_attention(q, k, v)
    step = cached_attention(q[..., cached:, :], k[..., :cached, :], v[..., :cached, :],
                            k[..., cached:, :], v[..., cached:, :])
    return bool(np.allclose(full[..., cached:, :], step, rtol=1e-12, atol=1e-12))


def _log_softmax(z) -> np.ndarray:
    z = _float64(z)
    shifted = z - np.max(z, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def next_token_loss(logits, token_ids, pad_id: int = 0) -> float:
    """Mean cross-entropy of predicting token t + 1 from the logits at t, padding ignored.

    ``logits`` ``(B, T, V)``, ``token_ids`` ``(B, T)``.

    Raises:
        ValueError: no target is left once padding is ignored.
    """
    logits, ids = _float64(logits), np.asarray(token_ids)
    targets = ids[:, 1:]
    log_probs = _log_softmax(logits[:, :-1, :])
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    keep = targets != pad_id
    if not keep.any():
        raise ValueError("every target is padding: there is nothing to predict.")
    return float(-picked[keep].mean())


def perplexity(logits, token_ids, pad_id: int = 0) -> float:
    """exp(next_token_loss): the number of equally likely tokens the model hesitates between."""
    return float(np.exp(next_token_loss(logits, token_ids, pad_id)))


def as_argument(function):
    """A student's function as an argument of a grader fixture (``constructor``):
    under the grader, a reference to it in the student's kernel (the proxy of a
    name cannot be passed back there, an object the student's code returned can:
    its ``__call__``); in place, the function itself."""
    if type(function).__name__ == "RemoteObject":
        return function.attribute("__call__")
    return function


#: Runs in the student's kernel: the gradient of the student's next_token_loss with
#: respect to the logits, taken as Keras's model.fit takes it on the backend there
#: (TensorFlow: traced in a tf.function, the ids a traced argument too; JAX: jit;
#: PyTorch: autograd). Returns ("", gradient as float32 NumPy) or (what went wrong,
#: None); ("", None) under a backend without gradients (numpy).
LOSS_GRADIENT_SOURCE = """
def loss_gradient(loss, logits, token_ids, pad_id):
    import numpy as np
    import keras
    from keras import ops

    logits = np.asarray(logits, dtype="float32")
    token_ids = np.asarray(token_ids, dtype="int32")
    backend = keras.config.backend()
    # The function itself rather than its __call__ (how it reached this kernel), so that
    # TensorFlow's autograph converts it as model.fit does.
    loss = getattr(loss, "__self__", loss) if type(loss).__name__ == "method-wrapper" else loss

    class NoGradient(Exception):
        pass

    def say(error):
        text = str(error).strip()
        first = text.splitlines()[0][:300] if text else ""
        return f"{type(error).__name__}{': ' + first if first else ''}"

    try:
        if backend == "tensorflow":
            import tensorflow as tf

            try:  # autograph, as fit applies it (Python control flow on tensors)
                graph_loss = tf.autograph.to_graph(loss)
            except Exception:
                graph_loss = loss

            @tf.function(autograph=False)
            def traced(x, ids):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    value = graph_loss(x, ids, pad_id)
                if not tf.is_tensor(value):
                    raise NoGradient(f"it returned {type(value).__name__}, not a tensor")
                gradient = tape.gradient(value, x)
                if gradient is None:
                    raise NoGradient("no gradient flows from what it returned back to the "
                                     "logits")
                return gradient

            gradient = traced(tf.constant(logits), tf.constant(token_ids))
        elif backend == "jax":
            import jax

            def scalar(x, ids):
                return jax.numpy.reshape(loss(x, ids, pad_id), ())

            gradient = jax.jit(jax.grad(scalar))(jax.numpy.asarray(logits),
                                                 jax.numpy.asarray(token_ids))
        elif backend == "torch":
            import torch

            x = ops.convert_to_tensor(logits)
            x.requires_grad_(True)
            value = loss(x, ops.convert_to_tensor(token_ids), pad_id)
            if not torch.is_tensor(value):
                raise NoGradient(f"it returned {type(value).__name__}, not a tensor")
            if not value.requires_grad:
                raise NoGradient("no gradient flows from what it returned back to the "
                                 "logits")
            (gradient,) = torch.autograd.grad(value.sum(), x, allow_unused=True)
            if gradient is None:
                raise NoGradient("no gradient flows from what it returned back to the "
                                 "logits")
        else:
            return "", None
    except NoGradient as problem:
        return str(problem), None
    except Exception as error:
        return f"the gradient could not be taken through it ({say(error)})", None
    gradient = np.asarray(ops.convert_to_numpy(gradient), dtype="float32")
    if not np.any(gradient):
        return "the gradient is 0 everywhere: nothing flows from what it returned back to " \
               "the logits", None
    return "", gradient
"""


def top_k_filter(logits, k: int) -> np.ndarray:
    """``logits`` with every value below the k-th largest of its row set to -inf."""
    logits = _float64(logits)
    if not 1 <= k:
        raise ValueError(f"k must be 1 or more, got {k}.")
    k = min(k, logits.shape[-1])
    kth = np.sort(logits, axis=-1)[..., -k][..., None]
    return np.where(logits >= kth, logits, -np.inf)


def top_p_filter(logits, p: float) -> np.ndarray:
    """``logits`` keeping the fewest most probable tokens whose probability reaches ``p``
    (the token that crosses ``p`` kept; the most probable always kept)."""
    logits = _float64(logits)
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}.")
    probs = _softmax(logits)
    # most probable first; equal probabilities by token id (a stable sort of -p)
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    before = np.cumsum(sorted_probs, axis=-1) - sorted_probs   # mass of the tokens before
    keep_sorted = before < p
    keep_sorted[..., 0] = True
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, logits, -np.inf)


def sampling_distribution(logits, temperature: float = 1.0, top_k: int | None = None,
                          top_p: float | None = None) -> np.ndarray:
    """The distribution a step samples from: temperature, then top-k, then top-p.

    A temperature of 0 puts all the probability on the argmax (the first, on ties).
    """
    logits = _float64(logits)
    if temperature < 0:
        raise ValueError(f"temperature must be 0 or more, got {temperature}.")
    if temperature == 0:
        one_hot = np.zeros_like(logits)
        np.put_along_axis(one_hot, np.argmax(logits, axis=-1)[..., None], 1.0, axis=-1)
        return one_hot
    scaled = logits / temperature
    if top_k is not None:
        scaled = top_k_filter(scaled, top_k)
    if top_p is not None:
        scaled = top_p_filter(scaled, top_p)
    return _softmax(scaled)


def filter_orders_differ(logits, temperature: float, top_k: int | None, top_p: float,
                         by: float = 0.06) -> bool:
    """Whether ``sampling_distribution`` (temperature, then top-k, then top-p) differs,
    by at least ``by`` on some id, from the distributions of the orders students get
    wrong: the filters before the temperature (unless it is 1) and, with ``top_k``,
    top-p before top-k.

    generate's sampling test draws its hand-made models until this holds, so that a
    wrong order shows in the frequencies whatever the run's seed (with a small ``by``
    the two orders can give nearly the same distribution).
    """
    logits = _float64(logits)
    right = sampling_distribution(logits, temperature, top_k, top_p)
    first_k = logits if top_k is None else top_k_filter(logits, top_k)
    wrong = []
    if temperature != 1:  # at temperature 1 the filters before it are the same thing
        wrong.append(_softmax(top_p_filter(first_k, top_p) / temperature))
    if top_k is not None:
        wrong.append(_softmax(top_k_filter(top_p_filter(logits / temperature, top_p), top_k)))
    return all(float(np.max(np.abs(other - right))) >= by for other in wrong)


# --- the models' forward passes ------------------------------------------------------
#
# The curriculum's layout (solutions/lab6, sections 2 to 4):
#
# - DecoderOnlyBlock (pre-norm): h = x + attention(norm1(x)); out = h + ffn(norm2(h)).
#   The attention projects with four Dense layers (query_dense, key_dense,
#   value_dense, output_dense, each d_model -> d_model with a bias), splits the
#   features into heads (head i holds features i * head_dim ... (i + 1) * head_dim - 1),
#   rotates the queries and keys by position (rotary), lets position t see
#   positions 0..t, and merges the heads back. ffn = dense2(relu(dense1(x))).
#   LayerNormalization with epsilon 1e-6.
# - MiniGPT: token embedding (no scaling, no position table), the blocks, a final
#   LayerNormalization, logits = x @ embedding.T (the output layer is tied to the
#   embedding: no weights of its own, no bias).
# - A cache is (keys, values), each (B, num_heads, P, head_dim): the rotated keys and
#   the values of the P positions before; the new positions are P, P + 1, ...

EPSILON = 1e-6


def layer_norm(x, gamma, beta, epsilon=EPSILON) -> np.ndarray:
    x = _float64(x)
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * _float64(gamma) + _float64(beta)


def _dense(x, kernel_bias) -> np.ndarray:
    kernel, bias = kernel_bias
    return _float64(x) @ _float64(kernel) + _float64(bias)


def _split_heads(x, num_heads) -> np.ndarray:
    b, t, d = x.shape
    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)  # (B, H, T, D)


def block_forward(parameters, x, num_heads, cache=None):
    """(output (B, T, d_model), (keys, values) of every position so far) of a
    DecoderOnlyBlock with ``parameters`` (``parameter_shapes("block")``) on ``x``
    at the positions after ``cache``, and the attention weights (B, H, T, P + T)."""
    x = _float64(x)
    b, t, d_model = x.shape
    past = 0 if cache is None else np.asarray(cache[0]).shape[2]
    positions = past + np.arange(t)
    normed = layer_norm(x, *parameters["norm1"])
    q = _split_heads(_dense(normed, parameters["query_dense"]), num_heads)
    k = _split_heads(_dense(normed, parameters["key_dense"]), num_heads)
    v = _split_heads(_dense(normed, parameters["value_dense"]), num_heads)
    q, k = rotary(q, positions), rotary(k, positions)
    if cache is not None:
        k = np.concatenate([_float64(cache[0]), k], axis=2)
        v = np.concatenate([_float64(cache[1]), v], axis=2)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (B, H, T, P + T)
    allowed = np.arange(past + t)[None, :] <= positions[:, None]
    weights = _softmax(np.where(allowed, scores, -np.inf))
    heads = weights @ v  # (B, H, T, D)
    merged = heads.transpose(0, 2, 1, 3).reshape(b, t, d_model)
    h = x + _dense(merged, parameters["output_dense"])
    hidden = np.maximum(_dense(layer_norm(h, *parameters["norm2"]), parameters["dense1"]), 0)
    return h + _dense(hidden, parameters["dense2"]), (k, v), weights


def minigpt_forward(parameters, token_ids, num_heads, caches=None):
    """(logits (B, T, V), caches) of a MiniGPT with ``parameters``
    (``parameter_shapes("minigpt")``) on ``token_ids`` after ``caches``."""
    table = _float64(parameters["embedding"])
    x = table[np.asarray(token_ids)]
    new_caches = []
    for index, block in enumerate(parameters["blocks"]):
        x, cache, _ = block_forward(block, x, num_heads,
                                    None if caches is None else caches[index])
        new_caches.append(cache)
    x = layer_norm(x, *parameters["final_norm"])
    return x @ table.T, new_caches


def block_parameter_count(d_model: int, dff: int) -> int:
    """Weights of a DecoderOnlyBlock: four d_model x d_model projections with
    biases, two LayerNormalizations and the feed-forward block."""
    return 4 * (d_model * d_model + d_model) + 2 * 2 * d_model + \
        (d_model * dff + dff) + (dff * d_model + d_model)


def minigpt_parameter_count(vocab_size, num_layers, d_model, dff) -> int:
    """Weights of a MiniGPT: the embedding (shared with the output), the blocks and
    the final LayerNormalization."""
    return vocab_size * d_model + num_layers * block_parameter_count(d_model, dff) + 2 * d_model


def parameter_shapes(kind, d_model, num_heads, dff, vocab_size=None, num_layers=None,
                     **others) -> dict:
    """The shapes of every weight of a DecoderOnlyBlock ("block") or MiniGPT
    ("minigpt"), from the constructor's arguments, in the curriculum's layout
    (never read from the student's layer)."""
    square = [(d_model, d_model), (d_model,)]
    norm = [(d_model,), (d_model,)]
    block = {"norm1": norm, "query_dense": square, "key_dense": square,
             "value_dense": square, "output_dense": square, "norm2": norm,
             "dense1": [(d_model, dff), (dff,)], "dense2": [(dff, d_model), (d_model,)]}
    if kind == "block":
        return block
    return {"embedding": (vocab_size, d_model),
            "blocks": [dict(block) for _ in range(num_layers)], "final_norm": norm}


def random_parameters(r, shapes):
    """Grader-chosen float32 weights for ``parameter_shapes``'s structure: kernels
    (and the embedding) normal / sqrt(first dimension), vectors 0.5 + 0.3 normal."""
    if isinstance(shapes, dict):
        return {key: random_parameters(r, value) for key, value in shapes.items()}
    if isinstance(shapes, list):
        return [random_parameters(r, value) for value in shapes]
    if len(shapes) > 1:
        return (r.normal(size=shapes) / np.sqrt(shapes[0])).astype("float32")
    return (0.5 + 0.3 * r.normal(size=shapes)).astype("float32")


def give_weights(construct, layer, kind, parameters, what: str) -> None:
    """Set the grader's ``parameters`` in the student's DecoderOnlyBlock ("block")
    or MiniGPT ("minigpt"), sublayer by sublayer, in the student's kernel; fail,
    saying where, when a sublayer is missing or does not take them. The
    references are computed from ``parameters``: nothing the student's layer
    reports about its weights is used."""
    from autograder.testkernel.testing import assert_true

    problem = construct(SET_WEIGHTS_SOURCE, "set_weights_by_sublayer", layer, kind, parameters)
    assert_true(not problem, f"{what}: {problem}")


#: Runs in the student's kernel: gives a DecoderOnlyBlock or MiniGPT the grader's
#: weights through each sublayer's set_weights, found by the names the lab fixes.
SET_WEIGHTS_SOURCE = """
def set_weights_by_sublayer(layer, kind, parameters):
    class Misfit(Exception):
        pass

    def give(sublayer, values, where):
        if sublayer is None:
            raise Misfit(f"{where} is missing: create it in __init__ under that name.")
        try:
            sublayer.set_weights(values)
        except Exception as error:
            shapes = [tuple(value.shape) for value in values]
            raise Misfit(f"{where} does not take weights of the shapes {shapes}: "
                         f"{type(error).__name__}: {str(error)[:300]}") from None

    def block(target, values, where):
        for part, arrays in values.items():
            owner, name = target, part
            if part in ("dense1", "dense2"):
                owner = getattr(target, "ffn", None)
                if owner is None:
                    raise Misfit(f"{where}.ffn is missing: create the provided FeedForward "
                                 "in __init__ as self.ffn.")
            give(getattr(owner, name, None), arrays,
                 f"{where}.{'ffn.' if owner is not target else ''}{name}")

    try:
        if kind == "block":
            block(layer, parameters, "your DecoderOnlyBlock")
        else:
            give(getattr(layer, "token_embedding", None), [parameters["embedding"]],
                 "your MiniGPT's token_embedding")
            blocks = list(getattr(layer, "blocks", None) or [])
            if len(blocks) != len(parameters["blocks"]):
                raise Misfit(f"your MiniGPT's blocks holds {len(blocks)} layer(s), expected "
                             f"num_layers={len(parameters['blocks'])} separate "
                             "DecoderOnlyBlocks in a list.")
            for index, (target, values) in enumerate(zip(blocks, parameters["blocks"])):
                block(target, values, f"your MiniGPT's blocks[{index}]")
            give(getattr(layer, "final_norm", None), parameters["final_norm"],
                 "your MiniGPT's final_norm")
    except Misfit as problem:
        return str(problem)
    return ""
"""


# --- language models made by hand, for perplexity and generate ----------------------

#: Runs in the student's kernel and here: small "language models" with the lab's
#: calling convention, ``model(token_ids, cache=None, return_cache=False,
#: training=False)``, whose logits are known. ``HashLM``'s logits at a position
#: depend on every token up to it and on the position, so a cache that is off by
#: one position, or lost, changes them. It records each call's (cached length,
#: new length) in ``calls``. Under the grader it stays in the test kernel
#: (``hoster``): the student's function calls it through a proxy, and its cache
#: (a ``TokenCache``) reaches the student's kernel as an opaque handle, so
#: neither its log nor its cache can be read, changed or forged there.
LANGUAGE_MODELS_SOURCE = """
import hashlib

import numpy as np


class TokenCache:
    # What HashLM keeps between calls: the tokens so far. Opaque to generate.
    __slots__ = ("tokens", "model")

    def __init__(self, tokens, model):
        self.tokens, self.model = tokens, model


class HashLM:
    # What makes __call__'s logits a backend tensor: None, Keras's own; the
    # grader's kernel, which hosts the model (testing.hoster), sets a marker
    # the student's kernel turns into one there (no Keras in the grader's).
    as_tensor = None

    def __init__(self, seed, vocab_size=9, end_id=None, end_after=None, scale=2.0,
                 margin=0.3, cache_only_after=None):
        self.seed, self.vocab_size, self.scale, self.margin = seed, vocab_size, scale, margin
        self.end_id, self.end_after = end_id, end_after
        # Positions it computes without its cache (the prompt's); beyond them it
        # answers with another model's logits unless it is given its cache and one
        # new token: whether generate used the cache then shows in the tokens, which
        # the grader checks in its own kernel (no log kept here is believed).
        self.cache_only_after = cache_only_after
        self.calls = []
        self._memo = {}

    def logits_after(self, prefix):
        prefix = tuple(int(t) for t in prefix)
        if prefix not in self._memo:
            digest = hashlib.sha256(repr((self.seed, prefix)).encode()).digest()
            generator = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            z = self.scale * generator.normal(size=self.vocab_size)
            z[0] = -30.0  # padding is never likely
            if self.margin:
                order = np.argsort(-z)
                if z[order[0]] - z[order[1]] < self.margin:  # a clear winner
                    z[order[0]] = z[order[1]] + self.margin
            if self.end_id is not None:
                ends = self.end_after is not None and \
                    int(digest[8]) % self.end_after == 0 and len(prefix) > 2
                z[self.end_id] = z.max() + 3.0 if ends else -30.0
            self._memo[prefix] = z.astype(np.float32)
        return self._memo[prefix]

    def __call__(self, token_ids, cache=None, return_cache=False, training=False):
        if isinstance(token_ids, np.ndarray):
            ids = token_ids.astype(np.int64)
        else:
            from keras import ops

            ids = np.asarray(ops.convert_to_numpy(token_ids)).astype(np.int64)
        if ids.ndim != 2:
            raise ValueError(f"expected token_ids (B, T), got shape {ids.shape}")
        if cache is None:
            past = np.zeros((ids.shape[0], 0), dtype=np.int64)
        else:
            if not isinstance(cache, (list, tuple)) or len(cache) != 1 or \\
                    not isinstance(cache[0], TokenCache) or cache[0].model is not self:
                raise ValueError("cache: pass back the cache this model returned, unchanged")
            past = cache[0].tokens
            if past.shape[0] != ids.shape[0]:
                raise ValueError(f"the cache holds {past.shape[0]} rows, token_ids "
                                 f"{ids.shape[0]}: keep every row in the batch")
        self.calls.append((int(past.shape[1]), int(ids.shape[1])))
        whole = np.concatenate([past, ids], axis=1)
        honest = self.cache_only_after is None or ids.shape[1] == 1 and cache is not None or \
            cache is None and ids.shape[1] <= self.cache_only_after
        other = () if honest else (-1,)  # another model: the prefix's hash changes
        if ids.shape[0] == 0 or ids.shape[1] == 0:
            raise ValueError(f"expected token_ids (B, T) with at least one row and one token, "
                             f"got shape {ids.shape}")
        # Each distinct prefix once (thousands of rows share a prompt).
        logits = np.empty(ids.shape + (self.vocab_size,), dtype=np.float32)
        for t in range(ids.shape[1]):
            prefixes, rows = np.unique(whole[:, : past.shape[1] + t + 1], axis=0,
                                       return_inverse=True)
            each = np.stack([self.logits_after(other + tuple(prefix)) for prefix in prefixes])
            logits[:, t] = each[rows.reshape(-1)]
        if self.as_tensor is not None:
            logits = self.as_tensor(logits)
        else:
            from keras import ops

            logits = ops.convert_to_tensor(logits)
        return (logits, [TokenCache(whole, self)]) if return_cache else logits

    def call_log(self):
        return list(self.calls)


def make_model(**options):
    return HashLM(**options)
"""


def language_models() -> dict:
    """LANGUAGE_MODELS_SOURCE's names, built here (for the expected answers)."""
    scope: dict = {}
    exec(compile(LANGUAGE_MODELS_SOURCE, "<language models>", "exec"), scope)
    return scope


def describe_calls(calls) -> str:
    """A HashLM's log of calls, (cached length, new length) each, in words (a
    failed test's message hides runs of numbers)."""
    if not calls:
        return "generate never called the model"
    kinds = {"with the cache and one new token": 0, "with the cache and several tokens": 0,
             "without a cache (the whole prefix)": 0}
    for cached, new in calls[1:]:
        kinds["without a cache (the whole prefix)" if cached == 0 else
              "with the cache and one new token" if new == 1 else
              "with the cache and several tokens"] += 1
    first = calls[0]
    opening = (f"the first call gave {first[1]} tokens without a cache" if first[0] == 0
               else "the first call already had a cache")
    rest = "; ".join(f"{count} {kind}" for kind, count in kinds.items() if count)
    return f"{opening}; then {len(calls) - 1} call(s): {rest or 'none'}"


def greedy_generate(model, prompt_ids, max_new_tokens, end_id=None) -> np.ndarray:
    """(B, P + n) ids: the prompt and the greedy tokens, each from the whole prefix
    recomputed (no cache); 0 after a row's end_id; stops once every row has ended."""
    tokens = np.asarray(prompt_ids).astype(np.int64)
    finished = np.zeros(len(tokens), dtype=bool)
    for _ in range(max_new_tokens):
        logits = np.stack([model.logits_after(row) for row in tokens])
        chosen = np.where(finished, 0, np.argmax(logits, axis=-1))
        tokens = np.concatenate([tokens, chosen[:, None]], axis=1)
        if end_id is not None:
            finished |= chosen == end_id
            if finished.all():
                break
    return tokens


def corpus_perplexity(model, token_ids, pad_id: int = 0) -> float:
    """exp(total cross-entropy of every non-padding target / their number) of a
    hand-made model (``logits_after``) on ``token_ids`` (B, T)."""
    ids = np.asarray(token_ids).astype(np.int64)
    total, count = 0.0, 0
    for row in ids:
        for t in range(len(row) - 1):
            if row[t + 1] == pad_id:
                continue
            z = _float64(model.logits_after(row[: t + 1]))
            total -= _log_softmax(z)[row[t + 1]]
            count += 1
    return float(np.exp(total / count))


def pad_generated(result, width: int, what: str) -> np.ndarray:
    """A student's generate() output as int64 (B, width), 0-padded on the right
    (a row may stop early); AssertionError (the feedback) if it cannot be."""
    from autograder.testkernel.testing import as_array, assert_true

    ids = as_array(result, what)
    assert_true(ids.ndim == 2, f"{what}: returned shape {ids.shape}, expected (B, P + n): "
                               "the prompt and the new tokens, a row per prompt.")
    assert_true(ids.shape[1] <= width, f"{what}: returned {ids.shape[1]} columns, more than "
                                       f"the prompt and max_new_tokens ({width}).")
    assert_true(np.all(np.isfinite(ids)) and np.all(ids == np.round(ids)),
                f"{what}: the ids are not integers.")
    return np.pad(ids.astype(np.int64), ((0, 0), (0, width - ids.shape[1])))


def filtered_probabilities(values, what: str) -> np.ndarray:
    """softmax of a student's filtered logits in float64 (-inf and very negative
    values both give 0); AssertionError if a row has nothing left."""
    values = _float64(values)
    if np.any(np.isnan(values)) or np.any(np.isposinf(values)):
        raise AssertionError(f"{what}: the output holds NaN or +inf; set the removed logits "
                             "to -inf and leave the others as they are.")
    if np.any(np.all(np.isneginf(values), axis=-1)):
        raise AssertionError(f"{what}: a row has every logit removed; keep at least the "
                             "largest one.")
    return _softmax(values)


__all__ = [name for name in dir() if not name.startswith("_")
           and name not in ("annotations", "np")]
