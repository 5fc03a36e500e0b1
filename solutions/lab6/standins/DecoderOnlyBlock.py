import math

import keras
from keras import ops
from labkit.masking import large_negative

from ._provided import FeedForward, merge_heads, split_heads
from .RotaryEmbedding import RotaryEmbedding


class DecoderOnlyBlock(keras.layers.Layer):
    """Stand-in: pre-norm causal self-attention (rotary) and feed-forward, with a cache."""

    def __init__(self, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.head_dim = d_model // num_heads
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.query_dense = keras.layers.Dense(d_model, name="query_dense")
        self.key_dense = keras.layers.Dense(d_model, name="key_dense")
        self.value_dense = keras.layers.Dense(d_model, name="value_dense")
        self.output_dense = keras.layers.Dense(d_model, name="output_dense")
        self.rotary = RotaryEmbedding(self.head_dim, name="rotary")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.ffn = FeedForward(d_model, dff, name="ffn")
        self.last_attention_scores = None

    def call(self, x, cache=None, return_cache=False):
        x = ops.convert_to_tensor(x)
        start = 0 if cache is None else ops.shape(cache[0])[2]
        normed = self.norm1(x)
        q = self.rotary(split_heads(self.query_dense(normed), self.num_heads), start=start)
        k = self.rotary(split_heads(self.key_dense(normed), self.num_heads), start=start)
        v = split_heads(self.value_dense(normed), self.num_heads)
        if cache is not None:
            k = ops.concatenate([ops.cast(cache[0], k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cache[1], v.dtype), v], axis=2)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / math.sqrt(self.head_dim)
        allowed = ops.expand_dims(ops.arange(ops.shape(k)[2]), 0) <= \
            ops.expand_dims(ops.arange(ops.shape(q)[2]) + start, 1)
        weights = ops.softmax(ops.where(allowed, scores, large_negative(scores.dtype)), axis=-1)
        self.last_attention_scores = weights
        h = x + self.output_dense(merge_heads(ops.matmul(weights, v)))
        out = h + self.ffn(self.norm2(h))
        return (out, (k, v)) if return_cache else out

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "num_heads": self.num_heads,
                "dff": self.dff}
