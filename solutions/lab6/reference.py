"""Reference implementations of lab 6 ("a decoder-only language model"), instructor side.

Lab 6 is being built (issue 23): this folder has no lab.toml yet, so the kit
does not list it, release it or grade it. What is here are the references
its hidden tests will compare with, written first and tested on their own
(solutions/lab6/test_reference.py), in float64 NumPy, independently of any
solution cell. They fix the lab's conventions, which its text will state:

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
