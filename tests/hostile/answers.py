"""Answers that should not pass: text arrays, compressed and flooding answers, leaked inputs (issue 18: 1, 4, 7, 8)."""

from __future__ import annotations

from tests.hostile.cases import Case


def cases() -> list[Case]:
    return []
