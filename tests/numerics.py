"""Tolerances for the kit's own numerical tests, derived from the dtype's spacing.

A tolerance must follow from how the computation rounds, never be a literal
that one CPU happens to meet. The same Keras call rounds differently on
different machines: TensorFlow's oneDNN kernels (on by default on x86-64,
where the CPU supports them) compute a bfloat16 softmax in float32 and round
once; its Eigen kernels (``TF_ENABLE_ONEDNN_OPTS=0``, or a CPU where
TensorFlow leaves bfloat16 to Eigen) round the exponentials, their sum and
the quotient in bfloat16 each. A test that expected 0.8808 within 2e-3 in
bfloat16, where the numbers near 0.88 are 2**-8 = 0.0039 apart, asked for
less than half a unit in the last place: it failed on an AMD EPYC machine
without AVX-512, where the result came out one unit up, 0.8828, and fails
the same way on any machine with ``TF_ENABLE_ONEDNN_OPTS=0``. The kit's
tests therefore run both paths (``tests/student/test_numerics.py``).

So the kit's tests state their tolerances in units in the last place (ulps)
of the dtype at the magnitude compared, ``np.spacing`` of that dtype
(``np.finfo``; ``ml_dtypes`` for bfloat16), and each says why that many ulps.
For a softmax: it rounds the differences to the row's largest score, the
exponentials, their sum and the quotient, about half an ulp each (a vectorised
exp: an ulp or two), so every output is within a few ulps *of the row's largest
output* (small outputs carry the absolute error of the large ones, not a
small relative one). Measured over 2,000 random rows each of 3, 8 and 64
scores drawn from N(0, 3**2) (TensorFlow 2.21 CPU, AMD EPYC): at most 3.6
ulps in float32 (3.5 with oneDNN), 2.8 in float16 (either path), 2.9 in
bfloat16 with Eigen and 0.5 with oneDNN; hence ``SOFTMAX_ULPS = 4``.

The grader's tolerances (``autograder/testkernel/policy.py``: float32
answers against float64 references) are the numerical policy's, not these.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: ulps a softmax's outputs may be off, of the row's largest output (above).
SOFTMAX_ULPS = 4


def numpy_dtype(dtype) -> np.dtype:
    """A NumPy dtype for ``dtype``: a name ("bfloat16", "float16"), a NumPy or
    ml_dtypes type, or a backend's dtype (a TensorFlow DType, "torch.bfloat16")."""
    if hasattr(dtype, "as_numpy_dtype"):         # tf.DType
        dtype = dtype.as_numpy_dtype
    if not isinstance(dtype, str):
        try:
            return np.dtype(dtype)
        except TypeError:
            dtype = str(dtype)
    name = dtype.removeprefix("torch.")
    try:
        return np.dtype(name)
    except TypeError:                             # bfloat16 and the like: ml_dtypes'
        return np.dtype(getattr(ml_dtypes, name))


def finfo(dtype):
    """``np.finfo`` of ``dtype``, ``ml_dtypes.finfo`` for the types NumPy lacks."""
    dtype = numpy_dtype(dtype)
    return np.finfo(dtype) if dtype.kind == "f" else ml_dtypes.finfo(dtype)


def spacing(dtype, magnitude) -> np.ndarray:
    """How far apart the numbers of ``dtype`` are at ``magnitude`` (elementwise):
    ``np.spacing`` of ``|magnitude|`` rounded to the dtype, returned in float64.
    bfloat16 at 0.88: 2**-8; float32 at 1.0: 2**-23; at 0: the smallest subnormal."""
    dtype = numpy_dtype(dtype)
    rounded = np.abs(np.asarray(magnitude, dtype=np.float64)).astype(dtype)
    return np.spacing(rounded).astype(np.float64)


def ulp_tolerance(dtype, magnitude, ulps: float = 2) -> np.ndarray:
    """``ulps`` units in the last place of ``dtype`` at ``magnitude``: an absolute
    tolerance, elementwise, in float64."""
    return ulps * spacing(dtype, magnitude)


def assert_within_ulps(actual, expected, dtype, ulps: float, magnitude=None,
                       what: str = "") -> None:
    """``|actual - expected| <= ulps * spacing(dtype, magnitude)`` elementwise.

    ``expected`` is the exact value (float64); ``magnitude`` the value whose ulps
    measure the error (default: ``expected``, i.e. a relative bound; pass a
    row's largest value for a softmax). The message gives the worst error in
    ulps, so a failure says by how much.
    """
    actual = np.asarray(np.asarray(actual).astype(np.float64))
    expected = np.asarray(expected, dtype=np.float64)
    unit = spacing(dtype, expected if magnitude is None else magnitude)
    error = np.abs(actual - expected) / np.broadcast_to(unit, np.broadcast_shapes(
        actual.shape, expected.shape, np.shape(unit)))
    if not np.all(error <= ulps):       # NaN fails too
        worst = np.unravel_index(np.nanargmax(np.where(np.isnan(error), np.inf, error)),
                                 error.shape)
        raise AssertionError(
            f"{what or 'values'}: off by {error[worst]:.2f} ulps of {numpy_dtype(dtype).name}"
            f" at {tuple(int(i) for i in worst)} (allowed {ulps}): got "
            f"{np.broadcast_to(actual, error.shape)[worst]!r}, expected "
            f"{np.broadcast_to(expected, error.shape)[worst]!r}\nactual:\n{actual}\n"
            f"expected:\n{expected}")
