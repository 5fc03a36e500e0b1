"""What the grader must not believe of the student's kernel: forged class paths, weights read back, stand-ins' sources (issue 18: 2, 3, 5)."""

from __future__ import annotations

from tests.hostile.cases import Case


def cases() -> list[Case]:
    return []
