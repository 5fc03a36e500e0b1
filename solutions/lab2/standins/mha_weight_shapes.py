def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """The 8 weight shapes of keras.layers.MultiHeadAttention on d_model inputs."""
    value_dim = key_dim if value_dim is None else value_dim
    d, h, k, v = int(d_model), int(num_heads), int(key_dim), int(value_dim)
    return [(d, h, k), (h, k), (d, h, k), (h, k), (d, h, v), (h, v), (h, v, d), (d,)]
