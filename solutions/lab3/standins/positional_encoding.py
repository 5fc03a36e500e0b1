import numpy as np


def positional_encoding(length, depth):
    """Sinusoidal table, float32 NumPy (length, depth): sin on even columns,
    cos on odd ones, angle pos / 10000^(2i / depth) for the pair (2i, 2i + 1)."""
    length, depth = int(length), int(depth)
    positions = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    columns = np.arange(depth)[None, :]  # (1, depth)
    pairs = (columns - columns % 2).astype(np.float64)  # 2i for each column
    angles = positions / np.power(10000.0, pairs / depth)  # (length, depth)
    table = np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)
