"""The grading machine: uid, tmpfs, processes, folders left behind (issue 18: 6, 9, 11, 16)."""

from __future__ import annotations

from tests.hostile.cases import Case


def cases() -> list[Case]:
    return []
