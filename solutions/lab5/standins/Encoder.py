import keras
from keras import ops

from ._provided_layers import EncoderLayer, PositionalEmbedding


class Encoder(keras.layers.Layer):
    """Stand-in: embedding, dropout, num_layers EncoderLayers (padding masked)."""

    def __init__(self, num_layers, d_model, num_heads, dff, vocab_size, max_length=2048,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.num_layers, self.d_model, self.num_heads, self.dff = num_layers, d_model, num_heads, dff
        self.vocab_size, self.max_length, self.dropout_rate = vocab_size, max_length, dropout_rate
        self.pos_embedding = PositionalEmbedding(vocab_size, d_model, max_length=max_length)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.enc_layers = [EncoderLayer(d_model, num_heads, dff, dropout_rate)
                           for _ in range(num_layers)]

    def call(self, token_ids, training=None):
        padding_mask = ops.not_equal(token_ids, 0)
        x = self.dropout(self.pos_embedding(token_ids), training=training)
        for layer in self.enc_layers:
            x = layer(x, padding_mask=padding_mask, training=training)
        return x

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers,
                "d_model": self.d_model, "num_heads": self.num_heads, "dff": self.dff,
                "vocab_size": self.vocab_size, "max_length": self.max_length,
                "dropout_rate": self.dropout_rate}
