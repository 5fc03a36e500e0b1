import keras


class FeedForward(keras.layers.Layer):
    """Stand-in: dense1 (dff units, ReLU), dense2 (d_model units), dropout on the
    output; no residual."""

    def __init__(self, d_model, dff, dropout_rate=0.1, **kwargs):
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
