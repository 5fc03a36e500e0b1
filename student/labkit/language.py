"""Data for lab 6: a small language whose best possible perplexity is known.

Lab 6 trains a decoder-only language model on a 2-core CPU in minutes, so its
text must be small, learnable and shipped with the kit. It is generated here
from a seed by a little grammar, nothing downloaded::

    a quiet fox chases the small bird .
    the hen sees a dog .

Every sentence is ``<det> [<adjective>] <noun> <verb> <det> [<adjective>]
<noun> .``, each choice drawn uniformly and independently (an adjective
with probability ``ADJECTIVE_P``). Because every sentence has one derivation
and its words spell it one way, the entropy of a sentence is the sum of its
choices' entropies, and no model can predict the characters better than
that: ``floor()`` gives the lowest cross-entropy per predicted character
(the sentence's entropy over its expected number of predicted characters,
the end token included) and its perplexity. A trained model's perplexity
is read against that floor, not against zero.

- ``sentences(n, seed)``: ``n`` sentences, the same for a seed on every machine;
- ``VOCABULARY``: a character ``labkit.datasets.Vocabulary`` (padding 0, start 1,
  end 2) of the characters the grammar uses;
- ``encode(texts, length)``: ``(n, length)`` ids, each text between start and
  end, padded with 0: the model reads ids[:, :-1] and predicts ids[:, 1:];
- ``floor()``: the entropy floor, in nats per predicted character, and its
  perplexity.

Licence: part of ``labkit`` (MIT); the generated text is machine-made and
dedicated to the public domain (CC0 1.0).
"""

from __future__ import annotations

import math
import random

import numpy as np

from labkit.datasets import Vocabulary

__all__ = ["DETERMINERS", "ADJECTIVES", "NOUNS", "VERBS", "ADJECTIVE_P", "VOCABULARY",
           "sentences", "encode", "floor"]

DETERMINERS = ("the", "a")
ADJECTIVES = ("small", "quiet", "grey", "red", "quick", "lazy")
NOUNS = ("cat", "dog", "fox", "hen", "bird", "mouse", "horse", "frog")
VERBS = ("sees", "chases", "likes", "follows", "hears", "finds")
#: How often a noun has an adjective before it.
ADJECTIVE_P = 0.5


def _noun_phrase(rng: random.Random) -> list[str]:
    words = [rng.choice(DETERMINERS)]
    if rng.random() < ADJECTIVE_P:
        words.append(rng.choice(ADJECTIVES))
    return words + [rng.choice(NOUNS)]


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of the grammar, drawn from ``seed`` (the same on every machine)."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a number of sentences, 0 or more; got {n!r}.")
    rng = random.Random(seed)
    return [" ".join(_noun_phrase(rng) + [rng.choice(VERBS)] + _noun_phrase(rng) + ["."])
            for _ in range(n)]


def _characters() -> list[str]:
    used = set(" .")
    for word in DETERMINERS + ADJECTIVES + NOUNS + VERBS:
        used |= set(word)
    return sorted(used)


#: The characters of the grammar, with padding 0, start 1 and end 2.
VOCABULARY = Vocabulary(_characters(), unit="char", unknown=False)


def encode(texts, length: int) -> np.ndarray:
    """``(len(texts), length)`` int32 ids: start, the characters, end, then padding.

    Raises:
        ValueError: a text longer than ``length - 2`` characters (it would be
            cut, and its end lost), or a character outside the grammar's.
    """
    texts = list(texts)
    longest = max((len(text) for text in texts), default=0)
    if longest + 2 > length:
        raise ValueError(f"length {length} cannot hold a sentence of {longest} characters "
                         f"with its start and end tokens: give length {longest + 2} or more.")
    return VOCABULARY.encode(texts, length=length, start=True, end=True)


def _entropy(options: int) -> float:
    return math.log(options)


def floor() -> tuple[float, float]:
    """(nats per predicted character, perplexity): the best any model can do.

    A sentence's entropy is the sum of its independent choices' entropies;
    the predicted characters of a sentence are its characters and the end
    token (the start token is given). The floor is the expected entropy over
    the expected number of predicted characters, exactly what the mean
    cross-entropy over a large corpus tends to for a perfect model.
    """
    adjective = ADJECTIVE_P * _entropy(len(ADJECTIVES))
    bernoulli = -(ADJECTIVE_P * math.log(ADJECTIVE_P)
                  + (1 - ADJECTIVE_P) * math.log(1 - ADJECTIVE_P))
    phrase = _entropy(len(DETERMINERS)) + bernoulli + adjective + _entropy(len(NOUNS))
    entropy = 2 * phrase + _entropy(len(VERBS))

    def mean_length(words) -> float:
        return sum(len(word) for word in words) / len(words)

    phrase_chars = (mean_length(DETERMINERS) + 1 + ADJECTIVE_P * (mean_length(ADJECTIVES) + 1)
                    + mean_length(NOUNS))
    # two phrases, a space each side of the verb, " ." at the end, and the end token
    characters = 2 * phrase_chars + mean_length(VERBS) + 2 + 2 + 1
    per_character = entropy / characters
    return per_character, math.exp(per_character)
