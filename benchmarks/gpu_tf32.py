"""TF32 on a real GPU: what the numerical policy guards against, measured.

Runs, through keras.ops on the active Keras backend, the two products the
labs grade most: scaled dot-product attention (8 heads, 128 queries and keys,
d_k 64, as in lab 2) and a 512 -> 2048 dense layer (lab 4's feed-forward
width). Each runs in a fresh process in three settings:

- default: the framework as it starts;
- tf32:    TF32 forced on (TensorFlow's own default on Ampere and newer;
           torch.backends.cuda.matmul.allow_tf32 = True; JAX precision
           "tensorfloat32"), as a student's Colab GPU may have it;
- policy:  labkit.configure_precision(), which the locked setup cell of every
           lab runs.

and prints the largest difference from float64 NumPy and the share of the
grader's tolerance (autograder/testkernel/policy.py: atol + rtol * |expected|) it uses;
1.0 is the edge of a lost point. On a CPU the three settings agree.

    KERAS_BACKEND=torch python benchmarks/gpu_tf32.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODES = ("default", "tf32", "policy")


def _force_tf32(backend: str) -> None:
    if backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    elif backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32")
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(True)


def measure(mode: str) -> dict:
    """The products under ``mode``, in this process; their worst differences."""
    import numpy as np

    import keras
    from keras import ops

    from autograder.testkernel import policy

    backend = keras.backend.backend()
    if mode == "tf32":
        _force_tf32(backend)
    elif mode == "policy":
        import labkit

        labkit.configure_precision()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((8, 128, 64)).astype(np.float32) for _ in range(3))
    x = rng.standard_normal((64, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 2048)) / np.sqrt(512)).astype(np.float32)

    scores = ops.matmul(ops.convert_to_tensor(q), ops.transpose(ops.convert_to_tensor(k), (0, 2, 1)))
    attention = ops.matmul(ops.softmax(scores / 8.0, axis=-1), ops.convert_to_tensor(v))
    dense = ops.matmul(ops.convert_to_tensor(x), ops.convert_to_tensor(w))
    device = getattr(attention, "device", None)
    device = device() if callable(device) else device

    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    s64 = q64 @ np.swapaxes(k64, -1, -2) / 8.0
    e64 = np.exp(s64 - s64.max(-1, keepdims=True))
    expected = {"attention": (e64 / e64.sum(-1, keepdims=True)) @ v64,
                "dense": x.astype(np.float64) @ w.astype(np.float64)}
    got = {"attention": ops.convert_to_numpy(attention), "dense": ops.convert_to_numpy(dense)}
    result = {"backend": backend, "device": str(device)}
    for name, exact in expected.items():
        difference = np.abs(got[name].astype(np.float64) - exact)
        allowed = policy.ATOL + policy.RTOL * np.abs(exact)
        result[name] = {"max_abs": float(difference.max()),
                        "used": float((difference / allowed).max())}
    return result


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(measure(sys.argv[2])))
        return
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    print(f"TF32 measured with keras.ops, backend {backend}\n")
    print("| setting | device | attention: largest abs. difference | tolerance used | "
          "dense 512x2048: largest abs. difference | tolerance used |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode in MODES:
        child = subprocess.run([sys.executable, __file__, "--child", mode], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
        if child.returncode != 0:
            print(f"| {mode} | failed: {child.stderr.strip().splitlines()[-1:]} | | | | |")
            continue
        r = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"| {mode} | {r['device']} | {r['attention']['max_abs']:.2e} | "
              f"{r['attention']['used']:.2f} | {r['dense']['max_abs']:.2e} | "
              f"{r['dense']['used']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
