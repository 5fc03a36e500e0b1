"""The kit's numerical tests hold on either of TensorFlow's CPU rounding paths.

Tolerances come from the dtype's spacing (tests/numerics.py), and the tests
that compare numbers TensorFlow computed (marked ``numerics``) run twice: in
the suite, on the path this process has (TensorFlow's default on x86-64 is
oneDNN on), and once more below in a subprocess on the other one
(``TF_ENABLE_ONEDNN_OPTS`` flipped; it is read when TensorFlow is imported, so
it takes a process of its own). Why: oneDNN and Eigen round a bfloat16 softmax
differently, and a test that one path passed failed on an AMD machine that
took the other (docs/verdicts.md, "Numerical policy").
"""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from tests.conftest import ROOT
from tests.numerics import assert_within_ulps, finfo, spacing, ulp_tolerance

MARK = "pytest.mark.numerics"


# --- the helper: spacing from np.finfo / ml_dtypes.finfo -------------------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_spacing_at_one_is_the_dtypes_epsilon_and_halves_below(dtype):
    info = finfo(dtype)
    assert spacing(dtype, 1.0) == float(info.eps)
    assert spacing(dtype, 0.75) == float(info.eps) / 2
    assert spacing(dtype, -1.5) == float(info.eps)
    assert spacing(dtype, 0.0) == float(info.smallest_subnormal)


def test_spacing_is_numpys_in_each_dtype_and_takes_any_spelling():
    values = np.random.default_rng(0).lognormal(0, 4, 200)
    for dtype in (np.float16, np.float32, np.float64):
        rounded = values.astype(dtype)
        np.testing.assert_array_equal(spacing(dtype, rounded), np.spacing(rounded))
    # bfloat16: 8 significant bits; near 0.88 the numbers are 2**-8 apart
    assert spacing("bfloat16", 0.88) == spacing(ml_dtypes.bfloat16, 0.88) == 2.0 ** -8
    assert spacing(np.dtype(ml_dtypes.bfloat16), 3.0) == 2.0 ** -6
    np.testing.assert_array_equal(ulp_tolerance("float32", [1.0, 2.0], ulps=3),
                                  [3 * 2.0 ** -23, 3 * 2.0 ** -22])


def test_a_tensorflow_dtype_is_understood():
    tf = pytest.importorskip("tensorflow")
    assert spacing(tf.bfloat16, 1.0) == spacing("bfloat16", 1.0)
    assert spacing(tf.float16, 1.0) == 2.0 ** -10


def test_assert_within_ulps_says_by_how_many_ulps_and_fails_nan():
    # bfloat16's 0.8828 against the exact 0.8808: half an ulp, within 1.
    assert_within_ulps([0.8828125], [0.88079708], "bfloat16", ulps=1)
    with pytest.raises(AssertionError, match=r"off by 2\.00 ulps of float32 at \(1,\)"):
        assert_within_ulps([1.0, 1.0 + 2 * 2.0 ** -23], [1.0, 1.0], "float32", ulps=1)
    with pytest.raises(AssertionError, match="off by inf ulps|off by nan ulps"):
        assert_within_ulps([np.nan, 0.5], [1 / 3, 0.5], "float16", ulps=4)
    # a row's largest value as the magnitude: absolute ulps of 1, not of 0.01
    assert_within_ulps([0.01 + 2 * 2.0 ** -24], [0.01], "float32", ulps=4, magnitude=0.9)
    with pytest.raises(AssertionError):
        assert_within_ulps([0.01 + 2 * 2.0 ** -24], [0.01], "float32", ulps=4)


# --- both of TensorFlow's CPU paths ----------------------------------------------------

def _numerical_test_files() -> list[str]:
    """The test files with a test marked numerics (found by the mark's text, so
    the subprocess collects these files only, not the whole suite)."""
    files = [*sorted(ROOT.glob("tests/**/test_*.py")), *sorted(ROOT.glob("solutions/*/test_*.py"))]
    return [str(path.relative_to(ROOT)) for path in files
            if path.name != "test_numerics.py" and MARK in path.read_text(encoding="utf-8")]


def test_the_numerical_tests_have_files_to_run():
    files = _numerical_test_files()
    assert "tests/student/test_student_package.py" in files, files


@pytest.mark.skipif(os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
                    reason="TF_ENABLE_ONEDNN_OPTS is TensorFlow's")
def test_the_numerical_tests_pass_on_the_other_onednn_path():
    here = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1")   # unset: TensorFlow's default, on
    other = "1" if here.strip().lower() in ("0", "false") else "0"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env["TF_ENABLE_ONEDNN_OPTS"] = other
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "numerics", "-q", "-p", "no:xdist",
         "-p", "no:cacheprovider", *_numerical_test_files()],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = run.stdout.strip().splitlines()[-1:] or [run.stderr[-2000:]]
    assert run.returncode == 0, (
        f"with TF_ENABLE_ONEDNN_OPTS={other} (this process: {here}) the numerical tests "
        f"failed: {summary[0]}\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}")
    assert " passed" in summary[0], summary[0]
