#!/usr/bin/env bash
# GPU evidence (issue 7): the grader, its sandbox and the labs under the torch
# and jax backends on an NVIDIA GPU. Run from the repository root of a machine
# whose python3 has PyTorch and JAX with CUDA and no registry (the device
# machine): the kit's other packages come as wheels in .whl/ and bubblewrap as
# Debian's .deb in .whl/deb/ (docs/performance.md, "GPU runtimes", says how to fill them).
#
#   bash benchmarks/gpu_run.sh policy          versions, memory cap, TF32, numerical policy
#   bash benchmarks/gpu_run.sh verdicts torch  the verdict suite under one backend
#   bash benchmarks/gpu_run.sh labs            every lab top to bottom, as in Colab (torch, jax)
#
# Everything it prints is also written under $OUT (default /tmp/gpu_out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3
PY=python3

if ! $PY -c "import keras, nbgrader, labkit, autograder" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 1
  $PY -m pip install -q --no-index --no-deps --no-build-isolation -e ./student -e . || exit 1
fi
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap*.deb /tmp/bwrap && export PATH=/tmp/bwrap/usr/bin:$PATH
fi

case "${1:-policy}" in
policy)
  {
    echo "## Machine"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    $PY - <<'EOF'
import importlib.metadata as m, platform
print("python", platform.python_version(), "|", " | ".join(
    f"{p} {m.version(p)}" for p in ("torch", "jax", "jaxlib", "keras", "numpy", "nbgrader")))
from autograder.grader.sandbox import bubblewrap_works
print("bubblewrap sandbox:", "works" if bubblewrap_works() else "NOT available")
EOF
    echo
    echo "## Memory cap of the student kernel on a GPU machine (6 GiB, autograder/grader/sandbox.py)"
    for cap in as data; do
      for backend in torch jax; do
        code="import keras; t = keras.ops.ones((2, 2)); d = getattr(t, 'device', None); print(d() if callable(d) else d)"
        got=$(KERAS_BACKEND=$backend prlimit --$cap=6442450944 $PY -c "$code" 2>&1 | tail -1)
        echo "RLIMIT_${cap^^} $backend: $got"
      done
    done
    $PY -m pytest -q -p no:cacheprovider tests/kernels/test_sandbox.py 2>&1 | tail -2
    echo
    for backend in torch jax; do
      echo "## TF32 on this GPU ($backend)"
      KERAS_BACKEND=$backend $PY benchmarks/gpu_tf32.py 2>&1 | tail -5
      echo
    done
    for backend in torch jax; do
      echo "## Numerical policy on this GPU ($backend): solution and correct variants of each lab"
      KERAS_BACKEND=$backend $PY benchmarks/numerical_policy.py --jobs "${JOBS:-16}" 2>&1 | tail -9
      echo
    done
  } 2>&1 | tee "$OUT/policy.md"
  ;;
verdicts)
  backend=${2:?which backend: torch or jax}
  KERAS_BACKEND=$backend VERDICT_JOBS=${JOBS:-16} $PY -m pytest -p no:cacheprovider \
    tests/labs/test_verdicts.py 2>&1 | tee "$OUT/verdicts-$backend.log" | grep -v "^tests/.*PASSED"
  ;;
labs)
  $PY benchmarks/colab_gpu.py --backends torch jax --jobs "${JOBS:-10}" --write-docs 2>&1 |
    tee "$OUT/labs.md"
  cp docs/performance.md "$OUT/performance.md"
  ;;
*)
  echo "usage: bash benchmarks/gpu_run.sh policy | verdicts torch|jax | labs" >&2
  exit 2
  ;;
esac
