"""The provided layers of lab 5 (PositionalEmbedding, FeedForward, EncoderLayer,
DecoderLayer), the stand-in Encoder's and Decoder's own copies: a stand-in
runs in a fresh namespace, so autograder.testkernel.standins puts this file's
code in place of the import that names it."""

import math

import keras
import numpy as np
from keras import ops


def _positional_table(length, depth):
    positions = np.arange(length, dtype=np.float64)[:, None]
    columns = np.arange(depth)[None, :]
    angles = positions / np.power(10000.0, (columns - columns % 2) / depth)
    return np.where(columns % 2 == 0, np.sin(angles), np.cos(angles)).astype("float32")


class PositionalEmbedding(keras.layers.Layer):
    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.max_length, self.mask_zero = max_length, mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model,
                                                      name="token_embedding")
        self.table = _positional_table(max_length, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)

    def call(self, token_ids):
        length = ops.shape(token_ids)[1]
        vectors = self.token_embedding(token_ids) * math.sqrt(self.d_model)
        return vectors + ops.convert_to_tensor(self.table)[:length]

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None


class FeedForward(keras.layers.Layer):
    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.dff, self.dropout_rate = d_model, dff, dropout_rate
        self.dense1 = keras.layers.Dense(dff, activation="relu", name="dense1")
        self.dense2 = keras.layers.Dense(d_model, name="dense2")
        self.dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, training=None):
        return self.dropout(self.dense2(self.dense1(x)), training=training)


class EncoderLayer(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.self_attention = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)

    def compute_mask(self, x, previous_mask=None):
        return None

    def call(self, x, padding_mask=None, training=None):
        mask = None if padding_mask is None else ops.expand_dims(padding_mask, 1)
        attention = self.self_attention(query=x, value=x, key=x, attention_mask=mask,
                                        training=training)
        x = self.norm1(x + self.dropout(attention, training=training))
        return self.norm2(x + self.ffn(x, training=training))


class DecoderLayer(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.self_attention = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.cross_attention = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.norm3 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.last_attention_scores = None

    def compute_mask(self, x, previous_mask=None):
        return None

    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        length = ops.shape(x)[1]
        positions = ops.arange(length)
        self_mask = ops.expand_dims(positions[:, None] >= positions[None, :], 0)
        if x_padding_mask is not None:
            self_mask = ops.logical_and(self_mask, ops.expand_dims(x_padding_mask, 1))
        cross_mask = None
        if context_padding_mask is not None:
            cross_mask = ops.expand_dims(context_padding_mask, 1)
        attention = self.self_attention(query=x, value=x, key=x, attention_mask=self_mask,
                                        training=training)
        x = self.norm1(x + self.dropout(attention, training=training))
        attention, scores = self.cross_attention(
            query=x, value=context, key=context, attention_mask=cross_mask,
            return_attention_scores=True, training=training)
        self.last_attention_scores = scores
        x = self.norm2(x + self.dropout(attention, training=training))
        return self.norm3(x + self.ffn(x, training=training))
