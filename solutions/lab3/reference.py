"""Reference implementations of lab 3 ("positional embeddings"), instructor side.

Every function computes in float64 NumPy from whatever it is given, so the only
difference left between a student's float32 result and these values is float32
rounding (see autograder/testkernel/policy.py). They are written independently of the
solution cells in solutions/lab3 (they share the maths, not the code).

The layers are checked through the student's own weights: the references take
the token table (and, for the learned variant, the position table) read back
from the student's layer and rebuild the output from them.

This module never ships to students: not in labs/, not in the `labkit` package.

Besides the references it holds what the grader needs so that a mistake costs
points in one exercise only:

- ``STAND_INS``: for each exercise, the OTHER exercises its solution may call.
- ``STAND_IN_SOURCES``: for each exercise that may be called that way, the
  source of a correct, self-contained function with the curriculum signature.
  ``positional_encoding`` takes two integers, so its stand-in always returns a
  NumPy float32 array (what the solution returns too).
- ``HINTS``: one sentence per exercise for the feedback page.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "positional_encoding",
    "concatenated_positional_encoding",
    "positional_embedding",
    "learned_positional_embedding",
    "padding_mask",
    "STAND_INS",
    "STAND_IN_SOURCES",
    "HINTS",
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


#: For each exercise, the other exercises its solution may call. While the
#: grader tests the key, it replaces each listed name in the student's kernel
#: by its stand-in (STAND_IN_SOURCES), so an error there costs nothing here.
STAND_INS = {
    "positional_encoding": [],
    # The natural solution builds its fixed table with positional_encoding.
    "PositionalEmbedding": ["positional_encoding"],
    "LearnedPositionalEmbedding": [],
}


_POSITIONAL_ENCODING_SOURCE = '''
def positional_encoding(length, depth):
    """Sinusoidal table, float32 NumPy (length, depth): sin on even columns,
    cos on odd ones, angle pos / 10000^(2i / depth) for the pair (2i, 2i + 1)."""
    import numpy as np

    length, depth = int(length), int(depth)
    positions = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    columns = np.arange(depth)[None, :]  # (1, depth)
    pairs = (columns - columns % 2).astype(np.float64)  # 2i for each column
    angles = positions / np.power(10000.0, pairs / depth)  # (length, depth)
    table = np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)
'''

#: name -> source of a correct, self-contained function with the curriculum
#: signature (imports inside the body), defined in the student's kernel in
#: place of the student's own while another exercise is tested.
STAND_IN_SOURCES = {
    "positional_encoding": _POSITIONAL_ENCODING_SOURCE.strip() + "\n",
}

#: exercise -> one sentence shown on the feedback page of a student who lost
#: its points.
HINTS = {
    "positional_encoding": (
        "Columns 2i and 2i + 1 share the angle pos / 10000^(2i / depth): sine on the "
        "even column, cosine on the odd one (so the column index c uses the exponent "
        "c - c % 2, not c); with an odd depth the last column is a sine; return "
        "float32."
    ),
    "PositionalEmbedding": (
        "Its only weight is token_embedding's table (create it in build); multiply the "
        "token vectors by sqrt(d_model), add the first T rows of a fixed sinusoidal "
        "table kept as a constant (not add_weight), and return token_ids != 0 from "
        "compute_mask when mask_zero."
    ),
    "LearnedPositionalEmbedding": (
        "Build both Embedding sublayers in build (not in __init__); look up the "
        "positions 0..T-1 (ops.arange, not the token ids) in position_embedding, add "
        "them to the token vectors without any scaling, and raise a ValueError in call "
        "when T is known and larger than max_length."
    ),
}
