"""Lab 4's pictures: the student's values on the visible check's own example
(autograder.testkernel.pictures). Only public inputs: those of the notebook's
`check_DecoderLayer` cell, written out here."""

from __future__ import annotations

import numpy as np

from autograder.references import lab4 as reference

#: check_DecoderLayer's layer and inputs (the notebook shows them).
D_MODEL, NUM_HEADS, DFF = 6, 2, 24


def visible_decoder_example() -> tuple[np.ndarray, np.ndarray, dict]:
    """check_DecoderLayer's x (2, 4, 6), context (2, 5, 6) and known weights:
    identity attentions, ffn giving 0, the check's scale and shift in each norm."""
    demo_rng = np.random.default_rng(2)
    x = demo_rng.normal(size=(2, 4, 6)).astype("float32")
    context = demo_rng.normal(size=(2, 5, 6)).astype("float32")
    key_dim = D_MODEL // NUM_HEADS
    kernel = np.eye(D_MODEL, dtype="float32").reshape(D_MODEL, NUM_HEADS, key_dim)
    bias = np.zeros((NUM_HEADS, key_dim), "float32")
    identity = [kernel, bias] * 3 + [kernel.reshape(NUM_HEADS, key_dim, D_MODEL),
                                     np.zeros(D_MODEL, "float32")]
    weights = {
        "self_attention": identity, "cross_attention": identity,
        "ffn.dense1": [np.zeros((D_MODEL, DFF), "float32"), np.zeros(DFF, "float32")],
        "ffn.dense2": [np.zeros((DFF, D_MODEL), "float32"), np.zeros(D_MODEL, "float32")],
        "norm1": [np.linspace(0.5, 1.5, 6, dtype="float32"),
                  np.linspace(-0.3, 0.3, 6, dtype="float32")],
        "norm2": [np.linspace(2.0, 1.0, 6, dtype="float32"),
                  np.linspace(0.4, -0.1, 6, dtype="float32")],
        "norm3": [np.linspace(0.8, 1.2, 6, dtype="float32"), np.full(6, 0.1, "float32")],
    }
    return x, context, weights


def _first_sublayer(x, weights) -> np.ndarray:
    """norm1(x + causal self-attention(x)): the cross-attention's queries."""
    causal = reference.causal_mask(x.shape[1])[None]
    attention = reference.multi_head_attention(x, x, weights["self_attention"], causal)[0]
    return reference.layer_norm(np.asarray(x, np.float64) + attention, *weights["norm1"])


def swapped_scores() -> np.ndarray:
    """The cross-attention weights of check_DecoderLayer's example with queries and
    keys swapped (queries from context, keys from the first sublayer's output):
    (B, H, S, T)."""
    x, context, weights = visible_decoder_example()
    return reference.multi_head_attention(context, _first_sublayer(x, weights),
                                          weights["cross_attention"])[1]


def picture_DecoderLayer(DecoderLayer) -> dict:
    """The cross-attention weights (last_attention_scores) of sentence 0, per
    head, on check_DecoderLayer's example, beside the reference's."""
    x, context, weights = visible_decoder_example()
    layer = DecoderLayer(d_model=D_MODEL, num_heads=NUM_HEADS, dff=DFF, dropout_rate=0.5)
    reference.raised(lambda: layer(x, context, training=False))  # builds it
    reference.set_weights(layer, weights)
    raised, _ = reference.raised(lambda: layer(x, context, training=False))
    try:
        scores = reference.to_numpy(layer.last_attention_scores)
    except Exception:  # noqa: BLE001 - nothing kept
        scores = None
    return decoder_picture(scores, raised)


def decoder_picture(scores, raised: str | None) -> dict:
    """The picture of the student's cross-attention weights ``scores`` on
    check_DecoderLayer's example (None: none kept), the layer having raised
    ``raised`` (an exception's name) or not."""
    x, context, weights = visible_decoder_example()
    expected = reference.decoder_layer(x, context, weights)[1]  # (B, H, T, S)
    scores = None if scores is None else np.asarray(scores, dtype=np.float64)
    if scores is not None and scores.ndim != 4:
        scores = None
    from_x = reference.multi_head_attention(x, context, weights["cross_attention"])[1]
    note = ""
    if scores is None:
        note = "Your layer kept no cross-attention weights on this example."
    elif scores.shape != expected.shape:
        swapped = swapped_scores()
        if scores.shape == swapped.shape and np.allclose(scores, swapped, rtol=1e-3, atol=1e-4):
            note = ("Recognised: queries and keys swapped. Your cross-attention takes its "
                    "queries from context (S = 5 rows) and its keys from x: one row per "
                    "source token. Queries come from the decoder (x, T = 4 rows), keys and "
                    "values from context: cross_attention(query=x, value=context, "
                    "key=context).")
        elif scores.shape[2:] == (4, 4):
            note = ("Your last_attention_scores are (T, T) = (4, 4): the self-attention's; "
                    "keep the cross-attention's, (T, S) = (4, 5).")
        else:
            note = (f"Your weights have shape {tuple(scores.shape)}; expected "
                    f"{tuple(expected.shape)} (B, num_heads, T, S).")
    elif np.allclose(scores, from_x, rtol=1e-3, atol=1e-4) and not np.allclose(
            from_x, expected, rtol=1e-3, atol=1e-4):
        note = ("Recognised: the cross-attention's queries are the layer's input x; "
                "they are the first sublayer's output (after norm1).")
    if raised and scores is not None:
        note = f"Your layer raised {raised} on this example after computing these weights. " \
               + note
    panels = [{"label": f"head {h + 1}", "expected": expected[0, h],
               "student": None if scores is None or scores.shape[:2] != expected.shape[:2]
               else scores[0, h]}
              for h in range(NUM_HEADS)]
    return {"title": "DecoderLayer: cross-attention weights on the visible check's example "
                     "(sentence 0, x (2, 4, 6), context (2, 5, 6))",
            "rows": "queries (target tokens)", "cols": "keys (source tokens)",
            "scale": (0.0, 1.0), "note": note, "panels": panels}


def causal_mistakes(length: int) -> list[tuple[np.ndarray, str]]:
    """The look-ahead masks that the common mistakes give, with what to tell the
    student (the hidden test names the first two the same way)."""
    lower = np.tril(np.ones((length, length), bool))
    return [(np.tril(lower, k=-1), "the diagonal is False (a mask shifted by one: tril "
                                   "with k=-1); a token may attend to itself (key j <= "
                                   "query i)"),
            (np.tril(np.ones((length, length), bool), k=1),
             "the mask is shifted by one the other way (tril with k=1): query i also sees "
             "key i + 1, the next token"),
            (lower.T, "the mask is transposed; rows are queries, columns keys, and query i "
                      "sees keys j <= i"),
            (~lower, "True marks the hidden future; True means a key may be attended to")]


def picture_causal_mask(causal_mask) -> dict:
    """causal_mask(3) of check_causal_mask and causal_mask(4) of demo_causal_mask,
    beside the reference's (True drawn as 1); a mask shifted by one, transposed
    or inverted named."""
    from autograder.testkernel.pictures import answer, recognise

    panels, note = [], ""
    for length in (3, 4):
        expected = reference.causal_mask(length).astype(np.float64)
        student = answer(lambda: causal_mask(length))
        note = note or recognise(student, expected, [(m.astype(np.float64), hint)
                                                     for m, hint in causal_mistakes(length)])
        panels.append({"label": f"causal_mask({length})", "expected": expected,
                       "student": student if student is not None
                       and student.shape == expected.shape else None})
    return {"title": "causal_mask: the masks of the notebook's check (3) and demo (4), "
                     "True drawn dark, False white",
            "rows": "queries i", "cols": "keys j", "scale": (0.0, 1.0),
            "note": f"Recognised: {note}." if note else "", "panels": panels}


PICTURES = {"causal_mask": picture_causal_mask, "DecoderLayer": picture_DecoderLayer}
