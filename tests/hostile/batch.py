"""The batch and the reports: zip bombs, broken metadata, odd and hostile file names, copies (issue 18: 10, 12-15)."""

from __future__ import annotations

from tests.hostile.cases import Case


def cases() -> list[Case]:
    return []
