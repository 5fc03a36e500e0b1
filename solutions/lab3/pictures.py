"""Lab 3's pictures: the student's values on the notebook's own examples
(autograder.testkernel.pictures). Only public inputs: the sizes of the
notebook's `check_positional_encoding` (the lecture's table) and
`demo_positional_encoding` cells."""

from __future__ import annotations

from autograder.references import lab3 as reference
from autograder.testkernel.pictures import answer, recognise

#: (label, length, depth): check_positional_encoding's lecture table and the demo's table.
VISIBLE_TABLES = [("(3, 6)", 3, 6), ("(50, 64)", 50, 64)]


def picture_positional_encoding(positional_encoding) -> dict:
    """The tables positional_encoding(3, 6) and (50, 64), beside the paper's;
    the [sin | cos] layout, swapped sine and cosine, the exponents and the
    first position named (reference.positional_mistakes)."""
    panels, note = [], ""
    for label, length, depth in VISIBLE_TABLES:
        expected = reference.positional_encoding(length, depth)
        student = answer(lambda: positional_encoding(length, depth))
        note = note or recognise(student, expected,
                                 reference.positional_mistakes(length, depth))
        panels.append({"label": label, "expected": expected,
                       "student": student if student is not None
                       and student.shape == expected.shape else None})
    return {"title": "positional_encoding: the tables of the notebook's check (3, 6) and "
                     "demo (50, 64; its first 32 positions and columns drawn)",
            "rows": "positions", "cols": "columns (sine in 2i, cosine in 2i + 1)",
            "scale": (-1.0, 1.0), "note": f"Recognised: {note}." if note else "",
            "panels": panels}


PICTURES = {"positional_encoding": picture_positional_encoding}
