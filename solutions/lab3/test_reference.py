"""Tests of the lab 3 references (autograder/references/lab3.py).

Expected values are the lecture's sinusoidal table for d_model = 6, written
out by hand, an independent transcription of the TensorFlow tutorial's
[sin | cos] table, and properties (odd depth, dot products that depend only on
the distance between positions). The stand-in must agree with its reference
and return NumPy float32.
"""

import math

import numpy as np
import pytest

from autograder.labs import LABS
from autograder.references import lab3 as reference
from autograder.testkernel import standins


# --- the lecture's numbers --------------------------------------------------


def test_lecture_table_for_d_model_6():
    table = reference.positional_encoding(3, 6)
    lecture = [[0, 1, 0, 1, 0, 1],
               [0.84, 0.54, 0.05, 1.0, 0.0, 1.0],
               [0.91, -0.42, 0.09, 1.0, 0.0, 1.0]]
    assert table.shape == (3, 6)
    np.testing.assert_allclose(table, lecture, atol=0.01)


def test_lecture_table_to_six_decimals():
    table = reference.positional_encoding(3, 6)
    np.testing.assert_allclose(table[1], [math.sin(1), math.cos(1),
                                          math.sin(1 / 10000 ** (2 / 6)),
                                          math.cos(1 / 10000 ** (2 / 6)),
                                          math.sin(1 / 10000 ** (4 / 6)),
                                          math.cos(1 / 10000 ** (4 / 6))], atol=1e-12)
    np.testing.assert_allclose(table[2, :2], [0.909297, -0.416147], atol=1e-6)


def test_lecture_how_are_you_plus_positions():
    # The lecture's embeddings of "how are you" ([5, 8, 9]) plus the table.
    embeddings = np.array([[-0.25, 0.86, -1.38, -0.87, -0.22, 1.72],
                           [-0.91, -0.66, 2.22, 0.52, 0.35, -0.20],
                           [-1.05, 1.28, 0.15, 0.23, 0.06, 0.43]])
    combined = embeddings + reference.positional_encoding(3, 6)
    np.testing.assert_allclose(combined[0], [-0.25, 1.86, -1.38, 0.13, -0.22, 2.72], atol=0.01)
    np.testing.assert_allclose(combined[1], [-0.07, -0.12, 2.27, 1.52, 0.35, 0.80], atol=0.01)
    np.testing.assert_allclose(combined[2], [-0.14, 0.86, 0.24, 1.23, 0.06, 1.43], atol=0.01)


# --- the table --------------------------------------------------------------


def test_position_zero_is_sin_0_cos_0():
    table = reference.positional_encoding(1, 9)
    np.testing.assert_array_equal(table[0], [0, 1, 0, 1, 0, 1, 0, 1, 0])


@pytest.mark.parametrize("depth", [1, 3, 5, 7, 33])
def test_odd_depth_ends_with_a_sine(depth):
    length = 11
    table = reference.positional_encoding(length, depth)
    assert table.shape == (length, depth)
    positions = np.arange(length)
    last = depth - 1  # an even column: 2i = depth - 1
    np.testing.assert_allclose(table[:, last], np.sin(positions / 10000 ** (last / depth)))
    for column in range(depth - 1):
        pair = column - column % 2
        wave = np.sin if column % 2 == 0 else np.cos
        np.testing.assert_allclose(table[:, column], wave(positions / 10000 ** (pair / depth)))


def test_values_are_bounded_and_pairs_lie_on_the_unit_circle():
    table = reference.positional_encoding(100, 16)
    assert np.all(np.abs(table) <= 1.0)
    np.testing.assert_allclose(table[:, 0::2] ** 2 + table[:, 1::2] ** 2, 1.0, atol=1e-12)


def test_tensorflow_tutorial_layout_is_a_column_permutation():
    # The tutorial's code, transcribed independently: [sin | cos].
    length, depth = 40, 16
    half = depth / 2
    positions = np.arange(length)[:, np.newaxis]
    depths = np.arange(half)[np.newaxis, :] / half
    angle_rads = positions * (1 / (10000 ** depths))
    tutorial = np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)
    np.testing.assert_allclose(reference.concatenated_positional_encoding(length, depth),
                               tutorial, atol=1e-12)
    interleaved = reference.positional_encoding(length, depth)
    order = np.concatenate([np.arange(0, depth, 2), np.arange(1, depth, 2)])
    np.testing.assert_allclose(interleaved[:, order], tutorial, atol=1e-12)
    np.testing.assert_allclose(interleaved @ interleaved.T, tutorial @ tutorial.T, atol=1e-9)


def test_dot_products_depend_only_on_the_distance():
    table = reference.positional_encoding(30, 12)
    similarity = table @ table.T
    for offset in range(-5, 6):
        diagonal = np.diagonal(similarity, offset=offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-9)
    # Largest on the diagonal (each row is most similar to itself), d / 2 there.
    np.testing.assert_allclose(np.diagonal(similarity), 6.0)
    assert np.all(similarity[10, 11] > similarity[10, 20])


# --- layers -----------------------------------------------------------------


def test_positional_embedding_scales_tokens_by_sqrt_d_model():
    token_table = np.arange(11 * 6, dtype=np.float64).reshape(11, 6) / 100
    ids = np.array([[5, 8, 9, 0]])
    output = reference.positional_embedding(ids, token_table)
    assert output.shape == (1, 4, 6)
    np.testing.assert_allclose(output[0, 0], math.sqrt(6) * token_table[5]
                               + [0, 1, 0, 1, 0, 1])
    np.testing.assert_allclose(output[0, 3], math.sqrt(6) * token_table[0]
                               + reference.positional_encoding(4, 6)[3])


def test_learned_positional_embedding_adds_rows_without_scaling():
    token_table = np.random.default_rng(0).normal(size=(11, 6))
    position_table = np.random.default_rng(1).normal(size=(8, 6))
    ids = np.array([[5, 8, 9], [1, 2, 0]])
    output = reference.learned_positional_embedding(ids, token_table, position_table)
    np.testing.assert_allclose(output[1, 2], token_table[0] + position_table[2])
    full = reference.learned_positional_embedding(np.ones((1, 8), int), token_table,
                                                  position_table)
    np.testing.assert_allclose(full[0], token_table[1] + position_table)
    with pytest.raises(ValueError, match="longer"):
        reference.learned_positional_embedding(np.ones((1, 9), int), token_table,
                                               position_table)


def test_padding_mask_literal():
    np.testing.assert_array_equal(reference.padding_mask([[5, 8, 9, 0, 0], [0, 3, 0, 4, 1]]),
                                  [[True, True, True, False, False],
                                   [False, True, False, True, True]])


# --- stand-ins and hints ----------------------------------------------------


def _stand_in(name):
    return standins.define(LABS["lab3"].folder, name)


@pytest.mark.parametrize("length,depth", [(3, 6), (1, 1), (10, 7), (50, 33), (64, 16),
                                          (2048, 64)])
def test_stand_in_positional_encoding_matches_reference(length, depth):
    table = _stand_in("positional_encoding")(length, depth)
    assert isinstance(table, np.ndarray) and table.dtype == np.float32
    np.testing.assert_allclose(table, reference.positional_encoding(length, depth),
                               rtol=1e-6, atol=1e-7)


def test_stand_in_accepts_keywords_and_numpy_integers():
    stand_in = _stand_in("positional_encoding")
    np.testing.assert_array_equal(stand_in(length=np.int64(4), depth=np.int32(6)),
                                  stand_in(4, 6))

