"""Shared fixtures of the kit's tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def run_cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run `python -m autograder ARGS` as an instructor would."""
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
