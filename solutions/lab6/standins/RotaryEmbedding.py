import keras
from keras import ops


class RotaryEmbedding(keras.layers.Layer):
    """Stand-in: pairs (2i, 2i + 1) at position start + t turned by it * base**(-2i/head_dim)."""

    def __init__(self, head_dim, base=10_000.0, **kwargs):
        super().__init__(**kwargs)
        self.head_dim, self.base = head_dim, base

    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        positions = ops.cast(ops.arange(ops.shape(x)[-2]) + start, "float32")
        frequencies = ops.power(float(self.base),
                                -ops.arange(0, self.head_dim, 2, dtype="float32") / self.head_dim)
        angles = ops.expand_dims(positions, 1) * ops.expand_dims(frequencies, 0)
        cos, sin = ops.cast(ops.cos(angles), x.dtype), ops.cast(ops.sin(angles), x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return ops.reshape(ops.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1),
                           ops.shape(x))

    def get_config(self):
        return {**super().get_config(), "head_dim": self.head_dim, "base": self.base}
