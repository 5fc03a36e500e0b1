"""Tests of labkit.language: lab 6's generated language and its entropy floor.

Every sentence is parsed back here by a parser of its own (the word lists,
read as the grammar says), which also gives each sentence's probability; the
floor computed by the module from the grammar must agree with the mean
-log-probability per predicted character measured on many sentences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit import language


def parse(sentence: str) -> float:
    """The probability of ``sentence`` under the grammar (AssertionError if not one)."""
    words = sentence.split(" ")
    assert words[-1] == ".", sentence
    words = words[:-1]
    probability, position = 1.0, 0

    def phrase():
        nonlocal probability, position
        assert words[position] in language.DETERMINERS
        probability /= len(language.DETERMINERS)
        position += 1
        if words[position] in language.ADJECTIVES:
            probability *= language.ADJECTIVE_P / len(language.ADJECTIVES)
            position += 1
        else:
            probability *= 1 - language.ADJECTIVE_P
        assert words[position] in language.NOUNS, sentence
        probability /= len(language.NOUNS)
        position += 1

    phrase()
    assert words[position] in language.VERBS, sentence
    probability /= len(language.VERBS)
    position += 1
    phrase()
    assert position == len(words), sentence
    return probability


def test_every_sentence_is_one_of_the_grammar_and_a_seed_gives_the_same_ones():
    drawn = language.sentences(500, seed=3)
    assert drawn == language.sentences(500, seed=3)
    assert drawn != language.sentences(500, seed=4)
    for sentence in drawn:
        assert 0 < parse(sentence) <= 1
    assert language.sentences(0) == []
    with pytest.raises(ValueError, match="a number of sentences"):
        language.sentences(-1)


def test_the_floor_is_what_many_sentences_measure():
    drawn = language.sentences(40_000, seed=0)
    nats = sum(-math.log(parse(s)) for s in drawn)
    predicted = sum(len(s) + 1 for s in drawn)       # the characters and the end token
    per_character, perplexity = language.floor()
    assert nats / predicted == pytest.approx(per_character, rel=0.01)
    assert perplexity == pytest.approx(math.exp(per_character))
    # a little over one bit a character: a model must learn the words to get near it
    assert 1.1 < perplexity < 1.8


def test_encode_puts_each_sentence_between_start_and_end_and_pads_with_zero():
    vocabulary = language.VOCABULARY
    ids = language.encode(["the cat sees a dog ."], length=24)
    assert ids.shape == (1, 24) and ids.dtype == np.int32
    text = "the cat sees a dog ."
    assert ids[0, 0] == vocabulary.start_id and ids[0, len(text) + 1] == vocabulary.end_id
    assert (ids[0, len(text) + 2:] == vocabulary.pad_id).all()
    assert "".join(vocabulary.tokens[i] for i in ids[0, 1:len(text) + 1]) == text
    with pytest.raises(ValueError, match="give length 22 or more"):
        language.encode([text], length=21)
    with pytest.raises(ValueError):
        language.encode(["the cat sees a Zebra ."], length=30)


def test_the_vocabulary_holds_exactly_the_grammars_characters():
    used = set("".join(language.sentences(2_000, seed=1)))
    assert set(language.VOCABULARY.tokens[3:]) == used
    assert language.VOCABULARY.size == len(used) + 3
