#!/usr/bin/env bash
# Fill .whl/ with what benchmarks/gpu_run.sh installs on a GPU machine that
# has no package registry: the instructor's requirements as cp312 wheels,
# less the packages that machine's Python already has and those grading never
# imports, plus bubblewrap's Debian package. Run here (with registry access),
# from the repository root; .whl/ is git-ignored and travels as a carried path.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .whl && mkdir -p .whl/deb
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  "keras==3.15.1" "nbgrader==0.9.6" "nbformat>=5.9" "nbclient>=0.10" "jupyter-client>=8.10,<8.11" \
  "ipykernel>=6.29" "jupytext==1.19.6" "sqlalchemy>=2.0" "tqdm>=4.66" "matplotlib>=3.8" \
  "numpy>=1.26,<3" "setuptools>=77"
# Already in the GPU image (the device tool's package list, 2026-11-17): keep
# theirs, so that PyTorch and JAX keep the NumPy they were built with.
PRESENT="absl_py anyio attrs certifi charset_normalizer contourpy cycler fonttools h11 h5py
httpcore httpx idna jinja2 kiwisolver markdown_it_py markupsafe matplotlib mdurl ml_dtypes
numpy packaging pillow prometheus_client psutil pygments pyparsing python_dateutil pyyaml
requests rich setuptools six tqdm typing_extensions urllib3"
# Never imported by grading (nbgrader's front-ends), and the PostgreSQL driver.
UNUSED="jupyterlab babel widgetsnbextension jupyterlab_widgets psycopg psycopg_binary"
for name in $PRESENT $UNUSED; do
  rm -f .whl/"$name"-[0-9]*.whl
done
(cd .whl/deb && apt-get download bubblewrap >/dev/null 2>&1) ||
  echo "note: bubblewrap's .deb not fetched; gpu_run.sh then grades without the sandbox"
echo "$(ls .whl/*.whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
