"""Reference implementations of lab 3 ("positional embeddings"), instructor side.

Every function computes in float64 NumPy from whatever it is given, so the only
difference left between a student's float32 result and these values is float32
rounding (see autograder/testkernel/policy.py). They are written independently of the
solution cells in solutions/lab3 (they share the maths, not the code).

The layers are checked through the student's own weights: the references take
the token table (and, for the learned variant, the position table) read back
from the student's layer and rebuild the output from them.

This module never ships to students: not in labs/, not in the `labkit` package.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "positional_encoding",
    "concatenated_positional_encoding",
    "positional_mistakes",
    "positional_embedding",
    "learned_positional_embedding",
    "padding_mask",
]


def positional_encoding(length, depth):
    """The paper's sinusoidal table, float64 `(length, depth)`.

    Column 2i holds sin(pos / 10000^(2i / depth)) and column 2i + 1 the cosine
    of the same angle; with an odd depth the last column is a sine.
    """
    length, depth = int(length), int(depth)
    table = np.zeros((length, depth), dtype=np.float64)
    positions = np.arange(length, dtype=np.float64)
    for column in range(depth):
        pair = column - column % 2  # 2i for both columns of a (sin, cos) pair
        angles = positions / 10000.0 ** (pair / depth)
        table[:, column] = np.sin(angles) if column % 2 == 0 else np.cos(angles)
    return table


def concatenated_positional_encoding(length, depth):
    """The TensorFlow tutorial's layout, [sin | cos], for an even ``depth``.

    The same columns as :func:`positional_encoding`, in another order: the
    sines of the pairs first, then their cosines.
    """
    table = positional_encoding(length, depth)
    return np.concatenate([table[:, 0::2], table[:, 1::2]], axis=-1)


def positional_mistakes(length, depth):
    """Tables that common mistakes of ``positional_encoding`` produce, each with what to
    tell the student (the hidden test names them; the picture of the table too)."""
    positions = np.arange(length, dtype=np.float64)[:, None]
    columns = np.arange(depth)[None, :]
    pairs = columns - columns % 2
    guesses = []
    for exponent, hint in [(columns, "the exponent uses the column index; both "
                                     "columns of a pair use 2i / depth, where 2i is "
                                     "the even column"),
                           (columns // 2, "the exponent looks like i / depth; it is "
                                          "2i / depth")]:
        angles = positions / 10000.0 ** (exponent / depth)
        guesses.append((np.where(columns % 2 == 0, np.sin(angles), np.cos(angles)), hint))
    angles = positions / 10000.0 ** (pairs / depth)
    guesses.append((np.where(columns % 2 == 0, np.cos(angles), np.sin(angles)),
                    "sine and cosine are swapped: the sine goes in the even columns"))
    guesses.append((concatenated_positional_encoding(length, depth),
                    "the columns are laid out [sin | cos]; interleave them: sine "
                    "in column 2i, cosine in column 2i + 1"))
    if length > 1:
        guesses.append((positional_encoding(length + 1, depth)[1:],
                        "the positions start at 0: row 0 is sin(0) = 0 and cos(0) = 1"))
    return guesses


def padding_mask(token_ids):
    """True for real tokens (id != 0), False for padding."""
    return np.asarray(token_ids) != 0


def positional_embedding(token_ids, token_table):
    """Output of ``PositionalEmbedding``: token vectors * sqrt(d_model) + PE.

    token_ids `(B, T)` ints, token_table `(vocab_size, d_model)` (the student's
    own weights) -> `(B, T, d_model)`.
    """
    token_ids = np.asarray(token_ids)
    token_table = np.asarray(token_table, dtype=np.float64)
    d_model = token_table.shape[-1]
    length = token_ids.shape[-1]
    tokens = token_table[token_ids]  # (B, T, d_model)
    return tokens * np.sqrt(d_model) + positional_encoding(length, d_model)


def learned_positional_embedding(token_ids, token_table, position_table):
    """Output of ``LearnedPositionalEmbedding``: token vectors + position rows.

    token_ids `(B, T)`, token_table `(vocab_size, d_model)`, position_table
    `(max_length, d_model)` with T <= max_length -> `(B, T, d_model)`. No
    scaling.
    """
    token_ids = np.asarray(token_ids)
    token_table = np.asarray(token_table, dtype=np.float64)
    position_table = np.asarray(position_table, dtype=np.float64)
    length = token_ids.shape[-1]
    if length > position_table.shape[0]:
        raise ValueError(f"sequence of length {length} longer than the position table "
                         f"({position_table.shape[0]} rows)")
    return token_table[token_ids] + position_table[:length]
