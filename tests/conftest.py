"""Shared fixtures of the kit's tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def run_cli(*args: str, timeout: int = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m autograder ARGS` as an instructor would."""
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


#: Rows of the hostile suite's table, printed at the end of the run.
HOSTILE_TABLE: list[tuple[str, str, str, str, str]] = []


def pytest_terminal_summary(terminalreporter):
    if not HOSTILE_TABLE:
        return
    terminalreporter.section("hostile suite: case, expected, got")
    width = max(len(row[0]) for row in HOSTILE_TABLE)
    for name, group, expected, got, verdict in sorted(HOSTILE_TABLE, key=lambda r: (r[1], r[0])):
        terminalreporter.write_line(
            f"{verdict:4}  {group:9}  {name:<{width}}  expected {expected:<28} got {got}")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
