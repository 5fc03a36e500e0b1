"""Tests of lab 6's references (solutions/lab6/reference.py), on hand-worked
cases and on the properties the lab teaches: rotary scores depend on relative
position only, a key/value cache gives the full computation's rows, top-p keeps
the token that crosses p.

The reference is loaded by its path (the test kernel imports it as
``autograder.references.lab6``).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

_SPEC = importlib.util.spec_from_file_location("lab6_reference",
                                               Path(__file__).with_name("reference.py"))
reference = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(reference)

R = np.random.default_rng(6)
INF = -np.inf


# -- rotary embeddings -----------------------------------------------------------


def test_rotary_turns_each_pair_by_position_times_its_frequency():
    # head_dim 4, base 100: pair 0 turns by the position, pair 1 by a tenth of it
    x = np.array([[1.0, 0.0, 1.0, 0.0]] * 3)
    out = reference.rotary(x, np.array([0, 1, 3]), base=100.0)
    assert np.allclose(out[0], [1, 0, 1, 0])                      # position 0: unchanged
    assert np.allclose(out[1], [math.cos(1), math.sin(1), math.cos(0.1), math.sin(0.1)])
    assert np.allclose(out[2], [math.cos(3), math.sin(3), math.cos(0.3), math.sin(0.3)])


def test_rotary_scores_depend_on_relative_position_only_and_norms_are_kept():
    q, k = R.normal(size=(1, 8)), R.normal(size=(1, 8))

    def score(m, n):
        return float(reference.rotary(q, np.array([m]))[0] @ reference.rotary(k, np.array([n]))[0])

    assert score(7, 3) == pytest.approx(score(12, 8), abs=1e-12)
    assert score(7, 3) == pytest.approx(score(4, 0), abs=1e-12)
    assert score(7, 3) != pytest.approx(score(3, 7), abs=1e-6)   # direction matters
    x = R.normal(size=(2, 5, 8))
    rotated = reference.rotary(x, np.arange(5))
    assert np.allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1))


def test_rotary_refuses_an_odd_head_dim():
    with pytest.raises(ValueError, match="head_dim must be even"):
        reference.rotary(np.ones((2, 3)), np.arange(2))


# -- attention with a cache -------------------------------------------------------


def test_causal_attention_lets_the_first_position_see_itself_only():
    q, k, v = (R.normal(size=(4, 6)) for _ in range(3))
    out = reference.causal_attention(q, k, v)
    assert np.allclose(out[0], v[0])
    weights_last = np.exp(q[-1] @ k.T / math.sqrt(6))
    assert np.allclose(out[-1], (weights_last / weights_last.sum()) @ v)


@pytest.mark.parametrize("cached", [0, 1, 4, 6])
def test_a_cache_gives_the_full_computations_rows(cached):
    q, k, v = (R.normal(size=(2, 3, 7, 4)) for _ in range(3))
    assert reference.cache_matches_full(q, k, v, cached)


def test_a_cache_one_position_off_does_not():
    q, k, v = (R.normal(size=(7, 4)) for _ in range(3))
    full = reference.causal_attention(q, k, v)
    shifted = reference.cached_attention(q[4:], k[:3], v[:3], k[3:6], v[3:6])
    assert not np.allclose(full[4:], shifted)


# -- loss and perplexity ----------------------------------------------------------


def test_next_token_loss_predicts_the_next_token_and_ignores_padding():
    # vocabulary of 2: logits (0, log 3) give the token 1 a probability of 3/4
    logits = np.zeros((1, 4, 2))
    logits[..., 1] = math.log(3)
    ids = np.array([[1, 1, 0, 0]])        # targets 1, 0 (padding), 0 (padding)
    assert reference.next_token_loss(logits, ids) == pytest.approx(-math.log(3 / 4))
    ids = np.array([[1, 1, 1, 0]])        # targets 1, 1, padding
    assert reference.next_token_loss(logits, ids) == pytest.approx(-math.log(3 / 4))
    with pytest.raises(ValueError, match="every target is padding"):
        reference.next_token_loss(logits, np.array([[5, 0, 0, 0]]))


def test_the_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    ids = R.integers(1, 11, size=(3, 9))
    assert reference.perplexity(np.zeros((3, 9, 11)), ids) == pytest.approx(11)


# -- filtering and sampling -------------------------------------------------------


def test_top_k_keeps_the_k_largest_and_their_ties():
    logits = np.array([1.0, 3.0, 2.0, 3.0])
    assert np.array_equal(reference.top_k_filter(logits, 1), [INF, 3, INF, 3])
    assert np.array_equal(reference.top_k_filter(logits, 3), [INF, 3, 2, 3])
    assert np.array_equal(reference.top_k_filter(logits, 9), logits)


def test_top_p_keeps_the_token_that_crosses_p():
    logits = np.log([0.125, 0.5, 0.125, 0.25])      # most probable: 1, 3, then 0 and 2
    assert np.array_equal(np.isfinite(reference.top_p_filter(logits, 0.4)),
                          [False, True, False, False])
    assert np.array_equal(np.isfinite(reference.top_p_filter(logits, 0.6)),
                          [False, True, False, True])   # 0.5 < 0.6: token 3 crosses it
    assert np.array_equal(np.isfinite(reference.top_p_filter(logits, 0.8)),
                          [True, True, False, True])    # ties: the lower id first
    assert np.isfinite(reference.top_p_filter(logits, 1.0)).all()
    assert np.isfinite(reference.top_p_filter(logits, 1e-9)).sum() == 1


def test_the_sampling_distribution_applies_temperature_then_top_k_then_top_p():
    logits = np.array([[2.0, 1.0, 0.0, -1.0]])
    assert np.array_equal(reference.sampling_distribution(logits, 0.0), [[1, 0, 0, 0]])
    plain = np.exp(logits) / np.exp(logits).sum()
    assert np.allclose(reference.sampling_distribution(logits), plain)
    hot = np.exp(logits / 2) / np.exp(logits / 2).sum()
    assert np.allclose(reference.sampling_distribution(logits, 2.0), hot)
    two = np.exp(logits[:, :2]) / np.exp(logits[:, :2]).sum()
    assert np.allclose(reference.sampling_distribution(logits, top_k=2), [[*two[0], 0, 0]])
    # top-p on what top-k left: token 0 alone holds 0.73 of it, so p = 0.5 keeps it only
    assert np.allclose(reference.sampling_distribution(logits, top_k=2, top_p=0.5),
                       [[1, 0, 0, 0]])
    with pytest.raises(ValueError, match="temperature must be 0 or more"):
        reference.sampling_distribution(logits, -1.0)


def test_the_filters_order_shows_on_some_logits_only():
    # probabilities 0.43, 0.26, 0.16, ...: at temperature 2, top-p 0.6 keeps three ids;
    # before the temperature it keeps two. Top-k 3 then top-p 0.7 keeps two; top-p
    # first keeps three.
    logits = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    assert reference.filter_orders_differ(logits, 2.0, None, 0.6)
    assert reference.filter_orders_differ(logits, 1.0, 3, 0.7)
    # p = 1 keeps everything, whatever the order
    assert not reference.filter_orders_differ(logits, 2.0, 3, 1.0)


# -- the block and the model, from the grader's weights ------------------------------


def _parameters(kind, **sizes):
    return reference.random_parameters(np.random.default_rng(7),
                                       reference.parameter_shapes(kind, **sizes))


def test_a_block_with_silenced_sublayers_returns_its_input():
    # pre-norm: the residual stream is never normalised, so with the output
    # projection and the feed-forward's last layer at zero the block is the identity
    parameters = _parameters("block", d_model=8, num_heads=2, dff=6)
    parameters["output_dense"] = [np.zeros((8, 8)), np.zeros(8)]
    parameters["dense2"] = [np.zeros((6, 8)), np.zeros(8)]
    x = R.normal(size=(2, 5, 8))
    out, _, _ = reference.block_forward(parameters, x, num_heads=2)
    assert np.allclose(out, x)


def test_a_block_is_causal_and_its_cache_gives_the_full_outputs():
    parameters = _parameters("block", d_model=8, num_heads=2, dff=6)
    x = R.normal(size=(2, 6, 8))
    full, (keys, values), weights = reference.block_forward(parameters, x, num_heads=2)
    assert keys.shape == values.shape == (2, 2, 6, 4)
    assert np.allclose(np.triu(weights[0, 0], k=1), 0)              # nothing after the query
    assert np.allclose(weights.sum(axis=-1), 1)
    changed = x.copy()
    changed[:, 4] += 1
    assert np.allclose(reference.block_forward(parameters, changed, 2)[0][:, :4], full[:, :4])
    first, cache, _ = reference.block_forward(parameters, x[:, :4], 2)
    rest, (all_keys, _), _ = reference.block_forward(parameters, x[:, 4:], 2, cache=cache)
    assert np.allclose(rest, full[:, 4:], atol=1e-12)
    assert np.allclose(all_keys, keys, atol=1e-12)


def test_the_model_ties_its_output_to_the_embedding_and_counts_its_weights():
    parameters = _parameters("minigpt", d_model=8, num_heads=2, dff=6, vocab_size=11,
                             num_layers=2)
    ids = R.integers(0, 11, size=(2, 5))
    logits, caches = reference.minigpt_forward(parameters, ids, num_heads=2)
    assert logits.shape == (2, 5, 11) and len(caches) == 2
    step, _ = reference.minigpt_forward(parameters, ids[:, 4:], 2,
                                        caches=reference.minigpt_forward(parameters,
                                                                         ids[:, :4], 2)[1])
    assert np.allclose(step, logits[:, 4:], atol=1e-12)
    count = sum(np.size(array) for block in parameters["blocks"]
                for pair in block.values() for array in pair)
    count += np.size(parameters["embedding"]) + sum(np.size(a) for a in parameters["final_norm"])
    assert reference.minigpt_parameter_count(11, 2, 8, 6) == count
    # hand count of one block, d_model 8, dff 6: 4 projections 4 * 72, 2 norms 32,
    # dense1 8 * 6 + 6, dense2 6 * 8 + 8
    assert reference.block_parameter_count(8, 6) == 288 + 32 + 54 + 56


# -- the hand-made language models of the hidden tests ---------------------------------


def test_a_hand_made_model_gives_the_same_logits_with_and_without_its_cache():
    model = reference.language_models()["make_model"](seed=5)
    ids = np.array([[3, 4, 5, 6], [7, 8, 3, 3]])
    full = np.asarray(model(ids))
    logits, cache = model(ids[:, :3], return_cache=True)
    assert np.allclose(np.asarray(logits), full[:, :3])
    assert np.allclose(np.asarray(model(ids[:, 3:], cache=cache)), full[:, 3:])
    assert model.call_log() == [(0, 4), (0, 3), (3, 1)]
    # a cache one position short: other logits
    short = type(cache[0])(cache[0].tokens[:, :2], model)
    assert not np.allclose(np.asarray(model(ids[:, 3:], cache=[short]))[:, -1], full[:, 3])
    # a cache the model did not return (the tokens themselves, another model's): refused
    for forged in ([ids[:, :3]], [type(cache[0])(ids[:, :3], reference.language_models()[
            "make_model"](seed=5))]):
        with pytest.raises(ValueError, match="pass back the cache this model returned"):
            model(ids[:, 3:], cache=forged)


def test_greedy_generation_stops_rows_at_the_end_id():
    model = reference.language_models()["make_model"](seed=11, end_id=2, end_after=3)
    tokens = reference.greedy_generate(model, np.array([[3, 4], [5, 6], [7, 8]]), 12,
                                       end_id=2)
    for row in tokens:
        ends = np.flatnonzero(row == 2)
        if ends.size:
            assert not row[ends[0] + 1:].any()
    assert tokens.shape[1] <= 14
    assert (tokens == 2).any(axis=1).all() or tokens.shape[1] == 14


def test_the_corpus_perplexity_weighs_every_target_the_same():
    class Uniform:
        def logits_after(self, prefix):
            return np.zeros(5)

    assert reference.corpus_perplexity(Uniform(), np.array([[1, 2, 3, 0], [1, 0, 0, 0],
                                                            [1, 2, 0, 0]])) == \
        pytest.approx(5.0)


def test_a_model_used_without_its_cache_beyond_the_prompt_gives_other_logits():
    make = reference.language_models()["make_model"]
    strict, plain = make(seed=9, cache_only_after=3), make(seed=9)
    ids = np.array([[3, 4, 5, 6, 7]])
    # the prompt without a cache, then one token at a time with it: the true logits
    logits, cache = strict(ids[:, :3], return_cache=True)
    assert np.allclose(np.asarray(logits), np.asarray(plain(ids[:, :3])))
    step, cache = strict(ids[:, 3:4], cache=cache, return_cache=True)
    assert np.allclose(np.asarray(step), np.asarray(plain(ids))[:, 3:4])
    # the whole prefix recomputed, or two new tokens with the cache: other logits
    assert not np.allclose(np.asarray(strict(ids[:, :4]))[:, -1], np.asarray(step)[:, 0])
    _, prompt_cache = strict(ids[:, :3], return_cache=True)
    assert not np.allclose(np.asarray(strict(ids[:, 3:], cache=prompt_cache))[:, 1],
                           np.asarray(plain(ids))[:, 4])
    # greedy generation with the cache gives the plain model's tokens
    tokens = reference.greedy_generate(plain, ids[:, :3], 4)
    assert tokens.shape == (1, 7)


def test_a_call_log_is_told_in_words_without_a_run_of_numbers():
    cached = reference.describe_calls([(0, 5), (5, 1), (6, 1), (7, 1)])
    assert cached == ("the first call gave 5 tokens without a cache; then 3 call(s): 3 with "
                      "the cache and one new token")
    recomputed = reference.describe_calls([(0, 5), (0, 6), (0, 7), (6, 2)])
    assert recomputed.endswith("1 with the cache and several tokens; 2 without a cache "
                               "(the whole prefix)")
    assert reference.describe_calls([]) == "generate never called the model"
