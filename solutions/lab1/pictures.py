"""Lab 1's pictures: the student's values on the notebook's own example
(autograder.testkernel.pictures). Only public inputs: those of the notebook's
`demo_scaled_dot_product_attention` cell ("I am a student"), written out here."""

from __future__ import annotations

import numpy as np

from autograder.references import lab1 as reference
from autograder.testkernel.pictures import answer, recognise


def visible_attention_example() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """demo_scaled_dot_product_attention's queries, keys, values (4, 8) and its
    look-ahead mask (4, 4)."""
    demo_rng = np.random.default_rng(7)
    embeddings = demo_rng.normal(size=(4, 8)).astype("float32")  # (T, d_model)
    W_query, W_key = (demo_rng.normal(size=(2, 8, 8)) / np.sqrt(8)).astype("float32")
    queries, keys = embeddings @ W_query, embeddings @ W_key  # (T, d_k)
    look_ahead = np.tril(np.ones((4, 4), dtype=bool))  # True on and below the diagonal
    return queries, keys, embeddings, look_ahead


def picture_scaled_dot_product_attention(scaled_dot_product_attention) -> dict:
    """The weights of the demo's four tokens, without a mask and with the
    look-ahead mask, beside the reference's; the scale's mistakes, keys and
    queries swapped and an inverted mask named."""
    queries, keys, values, look_ahead = visible_attention_example()
    panels, note = [], ""
    for label, mask in [("no mask", None), ("look-ahead", look_ahead)]:
        expected = reference.scaled_dot_product_attention(queries, keys, values, mask)[1]
        student = answer(lambda: scaled_dot_product_attention(queries, keys, values,
                                                              mask=mask)[1])
        mistakes = reference.scale_mistakes(queries, keys, values.shape[-1], mask)
        mistakes.append((reference.scaled_dot_product_attention(keys, queries, values,
                                                                mask)[1],
                         "queries and keys are swapped: row i holds the weights of query "
                         "i over the keys, softmax(Q K^T / sqrt(d_k)) over the last axis"))
        scores = np.einsum("qd,kd->qk", queries.astype(np.float64), keys) / np.sqrt(8)
        scores = scores if mask is None else np.where(mask, scores, -np.inf)
        mistakes.append((reference.softmax(scores, axis=-2),
                         "the softmax runs over the queries (each column sums to 1); it "
                         "runs over the keys, the last axis: each row sums to 1"))
        if mask is not None:
            raw = np.einsum("qd,kd->qk", queries.astype(np.float64), keys) / np.sqrt(8)
            # -1e9, not -inf: the row that the inverted mask hides whole shares its weight
            mistakes.append((reference.softmax(np.where(mask, -1e9, raw), axis=-1),
                             "the mask is inverted: True means a key may be attended to; "
                             "the masked scores (False) get a large negative value"))
        note = note or recognise(student, expected, mistakes)
        panels.append({"label": label, "expected": expected,
                       "student": student if student is not None
                       and student.shape == expected.shape else None})
    return {"title": "scaled_dot_product_attention: the weights of the notebook's demo "
                     "(\"I am a student\", queries and keys (4, 8))",
            "rows": "queries (tokens)", "cols": "keys (tokens)", "scale": (0.0, 1.0),
            "note": f"Recognised: {note}." if note else "", "panels": panels}


PICTURES = {"scaled_dot_product_attention": picture_scaled_dot_product_attention}
