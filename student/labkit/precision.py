"""Full float32 precision for matrix products, on every Keras backend.

GPUs from NVIDIA Ampere on may round float32 matmuls to TF32 (about 3
significant digits; relative errors up to ~2e-3). TensorFlow does so by
default. The labs compare results with a relative tolerance of 1e-4, so the
setup cell of every lab turns TF32 off. On a CPU this changes nothing.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["configure_precision"]


def _active_backend() -> str | None:
    try:
        import keras

        return keras.config.backend()
    except Exception:  # noqa: BLE001 - never fail a setup cell
        return None


def _loaded_or_active(module: str, backend: str | None) -> bool:
    """Configure a framework that is the Keras backend or already imported."""
    return backend == module or module in sys.modules


def configure_precision(verbose: bool = False) -> dict:
    """Turn TF32 off for the active Keras backend (and any loaded framework).

    Never raises: a framework that is missing or refuses the setting is
    skipped and reported in the returned dict.

    Args:
        verbose: print one line per framework.

    Returns:
        A dict ``{framework: "full float32" | "skipped: <reason>"}``.
    """
    backend = _active_backend()
    report = {}

    if _loaded_or_active("tensorflow", backend):
        try:
            tf = importlib.import_module("tensorflow")
            tf.config.experimental.enable_tensor_float_32_execution(False)
            report["tensorflow"] = "full float32"
        except Exception as error:  # noqa: BLE001
            report["tensorflow"] = f"skipped: {error}"

    if _loaded_or_active("torch", backend):
        try:
            torch = importlib.import_module("torch")
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            report["torch"] = "full float32"
        except Exception as error:  # noqa: BLE001
            report["torch"] = f"skipped: {error}"

    if _loaded_or_active("jax", backend):
        try:
            jax = importlib.import_module("jax")
            jax.config.update("jax_default_matmul_precision", "highest")
            report["jax"] = "full float32"
        except Exception as error:  # noqa: BLE001
            report["jax"] = f"skipped: {error}"

    if verbose:
        for framework, state in report.items():
            print(f"{framework}: {state}")
    return report
