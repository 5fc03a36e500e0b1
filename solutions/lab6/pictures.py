"""Lab 6's pictures: the student's values on the visible check's own examples
(autograder.testkernel.pictures). Only public inputs: those of the notebook's
`check_RotaryEmbedding` cell, written out here."""

from __future__ import annotations

import numpy as np

from autograder.references import lab6 as reference
from autograder.testkernel.pictures import answer, recognise


def visible_rotary_examples() -> list[tuple[str, dict, np.ndarray]]:
    """check_RotaryEmbedding's inputs: (what, the layer's arguments, x)."""
    ones = np.tile(np.array([1.0, 0.0, 1.0, 0.0], "float32"), (3, 1))  # positions 0, 1, 2
    x = np.random.default_rng(0).normal(size=(2, 3, 5, 8)).astype("float32")  # (B, H, T, D)
    return [("RotaryEmbedding(head_dim=4, base=100) on (1, 0, 1, 0) at positions 0, 1, 2",
             dict(head_dim=4, base=100.0), ones),
            ("RotaryEmbedding(head_dim=8) on x (2, 3, 5, 8): sentence 0, head 0",
             dict(head_dim=8), x)]


def picture_RotaryEmbedding(RotaryEmbedding) -> dict:
    """The rotated rows (positions) and features of check_RotaryEmbedding's two
    examples, beside the reference's; the two-halves layout and the clockwise
    turn named."""
    panels, note = [], ""
    for what, arguments, x in visible_rotary_examples():
        positions = np.arange(x.shape[-2])
        base = arguments.get("base", reference.ROTARY_BASE)
        expected = reference.rotary(x, positions, base=base)
        student = answer(lambda: RotaryEmbedding(**arguments)(x))
        note = note or recognise(student, expected,
                                 reference.rotary_mistakes(x, positions, base))
        if student is not None and student.shape != expected.shape:
            student = None
        pick = (0, 0) if x.ndim == 4 else ()
        panels.append({"label": "ones" if x.ndim == 2 else "x[0, 0]",
                       "expected": expected[pick],
                       "student": None if student is None else student[pick]})
    extent = float(np.ceil(max(np.abs(p["expected"]).max() for p in panels) * 10) / 10)
    return {"title": "RotaryEmbedding: the rotated features on the visible check's examples "
                     "(ones: RotaryEmbedding(head_dim=4, base=100) on (1, 0, 1, 0); "
                     "x[0, 0]: RotaryEmbedding(head_dim=8) on its x (2, 3, 5, 8))",
            "rows": "positions", "cols": "features (pairs 2i, 2i + 1)",
            "scale": (-extent, extent),
            "note": f"Recognised: {note}" if note else "", "panels": panels}


PICTURES = {"RotaryEmbedding": picture_RotaryEmbedding}
