"""The provided code of lab 6 (FeedForward, split_heads, merge_heads), the stand-in
DecoderOnlyBlock's own copy: a stand-in runs in a fresh namespace, so
autograder.testkernel.standins puts this file's code in place of its import."""

import keras
from keras import ops


class FeedForward(keras.layers.Layer):
    """dense2(relu(dense1(x)))."""

    def __init__(self, d_model, dff, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.dff = d_model, dff
        self.dense1 = keras.layers.Dense(dff, activation="relu", name="dense1")
        self.dense2 = keras.layers.Dense(d_model, name="dense2")

    def call(self, x):
        return self.dense2(self.dense1(x))


def split_heads(x, num_heads):
    batch, length, d_model = ops.shape(x)[0], ops.shape(x)[1], x.shape[-1]
    x = ops.reshape(x, (batch, length, num_heads, d_model // num_heads))
    return ops.transpose(x, (0, 2, 1, 3))


def merge_heads(x):
    num_heads, head_dim = x.shape[1], x.shape[-1]
    x = ops.transpose(x, (0, 2, 1, 3))
    return ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], num_heads * head_dim))
