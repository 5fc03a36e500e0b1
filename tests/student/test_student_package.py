"""What a student installs (labkit): no solutions, references or tests; and the
helpers the labs' layers share (argument checks, the mask value), literal by literal."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import numpy as np
import pytest

from autograder.publish.leaks import Scanner
from autograder.labs import available_labs
from labkit import masking, validation

from tests.numerics import SOFTMAX_ULPS, assert_within_ulps

FORBIDDEN = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "autograder", "STAND_IN",
             "solutions/")


@pytest.fixture(scope="module")
def wheel(root, tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(out), str(root / "student")],
        check=True, capture_output=True, text=True,
    )
    (path,) = out.glob("labkit-*.whl")
    return path


@pytest.mark.slow
def test_wheel_holds_only_the_labkit_package(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert all(name.startswith(("labkit/", "labkit-")) for name in names), names


@pytest.mark.slow
def test_wheel_carries_each_labs_visible_checks_for_its_last_cell(wheel):
    """labkit.ready() reads labkit/labs/<lab>.json: package data that must ship."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    wanted = {f"labkit/labs/{lab.id}.json" for lab in available_labs()} | {"labkit/__main__.py"}
    assert wanted <= names, sorted(wanted - names)


@pytest.mark.slow
def test_wheel_holds_no_solution_or_reference_code(wheel):
    # The scanner publish uses: solution, hidden-test, reference and stand-in lines.
    scanner = Scanner(available_labs())
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            text = archive.read(name).decode("utf-8", "replace")
            for marker in FORBIDDEN:
                assert marker not in text, f"{marker!r} found in {name} of the student wheel"
            leaked = scanner.text_leaks(name, text)
            assert not leaked, f"instructor-only code in the student wheel: {leaked[:2]}"


def test_the_visible_checks_compare_with_the_graders_tolerances():
    # labkit cannot import the grader (students install it alone), so it
    # restates the numerical policy's tolerances: a drift would let a
    # visible check pass what the hidden tests fail, or the reverse.
    import inspect

    from labkit import checks

    from autograder.testkernel import policy

    assert (checks.RTOL, checks.ATOL) == (policy.RTOL, policy.ATOL), (
        "labkit.checks and autograder/testkernel/policy.py state different tolerances: "
        "change both together (see policy.py's docstring)")
    defaults = inspect.signature(checks.check_close).parameters
    assert (defaults["rtol"].default, defaults["atol"].default) == (checks.RTOL, checks.ATOL)


# --- labkit.validation: the argument checks of every lab's layers ------------------------


@pytest.mark.parametrize("value", [1, 7, np.int64(3)])
def test_positive_int_returns_a_python_int(value):
    checked = validation.positive_int("num_heads", value)
    assert checked == value and type(checked) is int


@pytest.mark.parametrize("value", [0, -3, 2.0, "4", True, None])
def test_positive_int_names_the_argument_the_expectation_and_the_value(value):
    with pytest.raises(ValueError) as error:
        validation.positive_int("num_heads", value)
    assert str(error.value) == ("Received an invalid value for argument `num_heads`, expected "
                                f"a positive integer. Received: num_heads={value!r}")


def test_positive_int_may_allow_none():
    assert validation.positive_int("value_dim", None, allow_none=True) is None
    with pytest.raises(ValueError, match=r"positive integer or None\. Received: value_dim=0"):
        validation.positive_int("value_dim", 0, allow_none=True)


@pytest.mark.parametrize("value", [0, 0.0, 0.1, np.float32(0.5), 0.999])
def test_rate_accepts_zero_up_to_one_excluded(value):
    checked = validation.rate("dropout", value)
    assert checked == pytest.approx(float(value)) and type(checked) is float


@pytest.mark.parametrize("value", [1, 1.0, 1.5, -0.1, "0.1", None, True])
def test_rate_names_the_argument_the_range_and_the_value(value):
    with pytest.raises(ValueError) as error:
        validation.rate("dropout_rate", value)
    assert str(error.value) == ("Received an invalid value for argument `dropout_rate`, "
                                "expected a number in [0, 1), such as 0.1. Received: "
                                f"dropout_rate={value!r}")


def test_multiple_of_lists_the_divisors():
    assert validation.multiple_of("d_model", 6, "num_heads", 3) == 6
    with pytest.raises(ValueError) as error:
        validation.multiple_of("d_model", 6, "num_heads", 4)
    assert str(error.value) == ("Received d_model=6 and num_heads=4: `d_model` must be a "
                                "multiple of `num_heads`. Choose num_heads among the divisors "
                                "of d_model (1, 2, 3, 6).")
    with pytest.raises(ValueError, match=r"\(1, 2, 4, 8, 16, 32, 64, \.\.\.\)\.$"):
        validation.multiple_of("d_model", 512, "num_heads", 7)


def test_validate_layer_arguments_reads_each_argument_by_its_name():
    validation.validate_layer_arguments(num_layers=2, d_model=8, num_heads=2, dff=16,
                                        vocab_size=20, max_length=64, dropout_rate=0.0)
    validation.validate_layer_arguments(num_heads=2, key_dim=4, dropout=0.5)
    for bad, named in [(dict(d_model=6, dff=0), "`dff`"),
                       (dict(d_model=6, dff=24, dropout_rate=1.0), "`dropout_rate`"),
                       (dict(num_heads=2, dropout=-0.5), "`dropout`"),
                       (dict(d_model=6, num_heads=4, dff=24), "`num_heads`"),
                       (dict(vocab_size=np.int64(0)), "`vocab_size`")]:
        with pytest.raises(ValueError, match=named):
            validation.validate_layer_arguments(**bad)


# --- labkit.masking: a mask value that stays finite ---------------------------------------

def test_large_negative_is_keras_softmax_value_for_each_dtype():
    assert masking.large_negative("float16") == -3e4
    assert masking.large_negative(np.float16) == -3e4
    for dtype in ("float32", "float64", "bfloat16", np.float32):
        assert masking.large_negative(dtype) == -1e9


@pytest.mark.numerics
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_a_fully_masked_row_stays_finite_in_every_float_dtype(dtype):
    from keras import ops

    scores = ops.convert_to_tensor(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]), dtype=dtype)
    allowed = np.array([[False, False, False], [True, False, True]])
    masked = ops.where(allowed, scores, masking.large_negative(scores.dtype))
    weights = ops.convert_to_numpy(ops.cast(ops.softmax(masked, axis=-1), "float32"))
    # Exact values; the tolerance is in ulps of the dtype at the row's largest
    # output (tests/numerics.py: a softmax rounds a few times, and oneDNN and
    # Eigen round differently: bfloat16's 0.8808 comes out 0.8789 or 0.8828).
    # The masked key gets exactly 0: exp(-1e9) (float16: exp(-3e4)) underflows.
    live = 1 / (1 + np.exp(-2.0))
    expected = np.array([[1 / 3, 1 / 3, 1 / 3], [1 - live, 0.0, live]])
    assert weights[1, 1] == 0.0
    assert_within_ulps(weights, expected, dtype, ulps=SOFTMAX_ULPS,
                       magnitude=expected.max(axis=-1, keepdims=True),
                       what=f"softmax of a masked row in {dtype}")


# --- labkit.start_keras: Keras without TensorFlow's start-up notices (issue 47) --------

#: What TensorFlow 2.21 writes to file descriptor 2 when it starts (seen in the
#: labs' setup cells, whatever TF_CPP_MIN_LOG_LEVEL says).
ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written"


def _stderr_of(code: str) -> str:
    import os

    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


@pytest.mark.slow
@pytest.mark.notebooks   # two TensorFlow start-ups (40 s): with the warnings suite
def test_start_keras_keeps_tensorflows_startup_notices_out_of_stderr():
    """Where a plain import prints the notice, the setup cell's start_keras() does not;
    a line of the program's own on stderr still gets through."""
    plain = _stderr_of("import keras; keras.ops.convert_to_numpy(keras.ops.ones((1,)))")
    if ABSL_NOTICE not in plain:
        pytest.skip("this TensorFlow prints no start-up notice: nothing to hide")
    started = _stderr_of("import sys, labkit; keras = labkit.start_keras(); import keras; "
                         "keras.ops.convert_to_numpy(keras.ops.ones((2,))); "
                         "print('mine', file=sys.stderr)")
    assert ABSL_NOTICE not in started and "oneDNN custom operations" not in started, started
    assert "mine" in started


def test_start_keras_passes_every_other_line_on():
    from labkit.startup import passed_on

    text = ("WARNING: All log messages before absl::InitializeLog() is called are written to "
            "STDERR\n"
            "I0000 00:00:1795928538.452718   27154 port.cc:153] oneDNN custom operations are on. "
            "You may see slightly different numerical results.\n"
            "E0000 00:00:1.2 1 cuda_dnn.cc:8310] Unable to register cuDNN factory\n"
            "Traceback (most recent call last):\n")
    assert passed_on(text) == ("E0000 00:00:1.2 1 cuda_dnn.cc:8310] Unable to register cuDNN "
                               "factory\nTraceback (most recent call last):\n")


def test_start_keras_returns_the_keras_already_imported():
    import keras
    import labkit

    assert labkit.start_keras() is keras
