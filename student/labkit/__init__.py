"""Student-side helpers for the Transformer labs.

- ``labkit.start_keras()``: imports Keras without TensorFlow's start-up notices
  (the labs' setup cells call it before ``import keras``).
- ``labkit.configure_precision()``: full float32 matmuls on every backend (no TF32).
- ``labkit.checks``: the visible checks that follow each exercise.
- ``labkit.plots``: small matplotlib helpers (attention heat maps, bar charts).
- ``labkit.validation``: argument checks for layers (``positive_int``, ``rate``,
  ``validate_layer_arguments``), raising ValueErrors in Keras's words.
- ``labkit.ready("lab1")``: the lab's last cell, "Ready to submit?": every
  visible check again on your answers, then how to submit
  (``python -m labkit check NOTEBOOK`` does the same for a saved notebook).
- ``labkit.masking``: ``large_negative(dtype)``, the number that masks
  attention scores (finite in float16 too).
- ``labkit.datasets``: lab 5's dates and vocabularies; ``labkit.language``:
  lab 6's generated language, with the best perplexity any model can reach.

This package holds no solutions, no reference implementations and no hidden
tests.
"""

from labkit import checks, masking, plots, validation
from labkit.precision import configure_precision
from labkit.readiness import ready
from labkit.startup import start_keras

__all__ = ["checks", "masking", "plots", "validation", "configure_precision", "ready",
           "start_keras"]
__version__ = "0.1.0"
