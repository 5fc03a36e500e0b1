"""Student-side helpers for the Transformer labs.

- ``labkit.configure_precision()``: full float32 matmuls on every backend (no TF32).
- ``labkit.checks``: the visible checks that follow each exercise.
- ``labkit.plots``: small matplotlib helpers (attention heat maps, bar charts).

This package holds no solutions, no reference implementations and no hidden
tests.
"""

from labkit import checks, plots
from labkit.precision import configure_precision

__all__ = ["checks", "plots", "configure_precision"]
__version__ = "0.1.0"
