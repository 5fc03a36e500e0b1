"""How fast a small decoder-only model learns lab 6's language on this CPU (issue 23).

Lab 6 is being built; this script fixes its training budget before the lab
does. It trains a MiniGPT of the size the lab will use, written here in
plain Keras 3 (pre-norm blocks, causal self-attention with rotary position
embeddings, a tied output layer: the model the lab's exercises will build),
on ``labkit.language``'s sentences, and prints the validation perplexity
after each epoch against the language's floor (``labkit.language.floor()``,
the best any model can reach), with the time spent.

    .venv/bin/python benchmarks/lab6_training.py [--epochs 6] [--sentences 8000]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "student"))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from labkit import language  # noqa: E402


def rotate(x, positions, base=10_000.0):
    """Rotary embeddings on (B, H, T, D): pairs (2i, 2i+1) turned by position * base**(-2i/D)."""
    depth = x.shape[-1]
    frequencies = base ** (-ops.arange(0, depth, 2, dtype="float32") / depth)
    angles = ops.cast(positions, "float32")[:, None] * frequencies[None, :]
    cos, sin = ops.cos(angles), ops.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    turned = ops.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return ops.reshape(turned, ops.shape(x))


class Block(keras.layers.Layer):
    """Pre-norm: x + attention(norm(x)), then x + ffn(norm(x))."""

    def __init__(self, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.qkv = keras.layers.Dense(3 * d_model)
        self.out = keras.layers.Dense(d_model)
        self.ffn1 = keras.layers.Dense(dff, activation="gelu")
        self.ffn2 = keras.layers.Dense(d_model)

    def call(self, x, cache=None, start=0, return_cache=False):
        """``x`` (B, T, d_model) at positions start..start+T-1, after ``cache``
        ((B, H, start, D) keys and values of the positions before, or None);
        with ``return_cache``, also the cache extended by these positions."""
        b, t = ops.shape(x)[0], ops.shape(x)[1]
        q, k, v = ops.split(self.qkv(self.norm1(x)), 3, axis=-1)

        def heads(z):
            return ops.transpose(ops.reshape(z, (b, t, self.num_heads, self.head_dim)),
                                 (0, 2, 1, 3))

        positions = ops.arange(start, start + t)
        q, k, v = rotate(heads(q), positions), rotate(heads(k), positions), heads(v)
        if cache is not None:
            k = ops.concatenate([cache[0], k], axis=2)
            v = ops.concatenate([cache[1], v], axis=2)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / math.sqrt(self.head_dim)
        total = ops.shape(k)[2]
        # query i (position start + i) sees keys 0..start + i
        allowed = ops.arange(total)[None, :] <= (start + ops.arange(t))[:, None]
        scores = ops.where(allowed, scores, -1e9)
        context = ops.matmul(ops.softmax(scores, axis=-1), v)
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)),
                              (b, t, self.num_heads * self.head_dim))
        x = x + self.out(context)
        x = x + self.ffn2(self.ffn1(self.norm2(x)))
        return (x, (k, v)) if return_cache else x


class MiniGPT(keras.Model):
    def __init__(self, vocab_size, d_model=64, num_heads=4, dff=128, num_layers=2, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(vocab_size, d_model)
        self.blocks = [Block(d_model, num_heads, dff) for _ in range(num_layers)]
        self.norm = keras.layers.LayerNormalization(epsilon=1e-6)

    def call(self, ids):
        x = self.embedding(ids)
        for block in self.blocks:
            x = block(x)
        return self.logits(x)

    def logits(self, x):
        # tied output layer: the embedding table, transposed
        return ops.matmul(self.norm(x), ops.transpose(self.embedding.embeddings))

    def step(self, ids, caches, start):
        """Logits of ``ids`` at positions start.., and the blocks' extended caches."""
        x, new = self.embedding(ids), []
        for block, cache in zip(self.blocks, caches):
            x, cache = block(x, cache=cache, start=start, return_cache=True)
            new.append(cache)
        return self.logits(x), new


def generate(model, prompt, steps: int, use_cache: bool):
    """Greedy continuation of ``prompt`` (B, P): with the key/value cache, or
    recomputing the whole prefix at every step."""
    ids = np.asarray(prompt)
    if not use_cache:
        for _ in range(steps):
            logits = model(ids)
            ids = np.concatenate([ids, np.argmax(logits[:, -1], axis=-1)[:, None]], axis=1)
        return ids
    logits, caches = model.step(ids, [None] * len(model.blocks), 0)
    for _ in range(steps):
        token = np.argmax(ops.convert_to_numpy(logits[:, -1]), axis=-1)[:, None]
        ids = np.concatenate([ids, token], axis=1)
        logits, caches = model.step(token, caches, ids.shape[1] - 1)
    return ids


def masked_loss(y_true, logits):
    loss = keras.losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True)
    keep = ops.cast(ops.not_equal(y_true, 0), loss.dtype)
    return ops.sum(loss * keep) / ops.sum(keep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--sentences", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--generate", type=int, default=120,
                        help="tokens generated to time the key/value cache")
    args = parser.parse_args()
    keras.utils.set_random_seed(6)
    train = language.encode(language.sentences(args.sentences, seed=0), length=48)
    valid = language.encode(language.sentences(1000, seed=1), length=48)
    model = MiniGPT(language.VOCABULARY.size)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=masked_loss)
    floor_nats, floor_perplexity = language.floor()
    print(f"keras {keras.__version__} ({keras.backend.backend()}); {args.sentences} sentences, "
          f"floor: {floor_perplexity:.3f} perplexity ({floor_nats:.3f} nats a character)")
    started = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        model.fit(train[:, :-1], train[:, 1:], batch_size=args.batch, epochs=1, verbose=0)
        nats = float(model.evaluate(valid[:, :-1], valid[:, 1:], batch_size=256, verbose=0))
        print(f"epoch {epoch}: validation perplexity {math.exp(nats):.3f} "
              f"({nats / floor_nats:.2f}x the floor's nats), {time.monotonic() - started:.0f} s")
    print(f"parameters: {model.count_params():,}")
    prompt = language.encode(["the"], length=5)[:, :4]        # start, t, h, e
    for use_cache in (False, True):
        generate(model, prompt, 2, use_cache)                # warm up
    timings, outputs = {}, {}
    for use_cache in (False, True):
        began = time.monotonic()
        outputs[use_cache] = generate(model, prompt, args.generate, use_cache)
        timings[use_cache] = time.monotonic() - began
    same = np.array_equal(outputs[False], outputs[True])
    text = "".join(language.VOCABULARY.tokens[i] for i in outputs[True][0, 1:])
    print(f"greedy, {args.generate} tokens: recomputing {timings[False]:.2f} s, with the "
          f"cache {timings[True]:.2f} s ({timings[False] / timings[True]:.1f}x); the same "
          f"tokens: {same}; {text!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
