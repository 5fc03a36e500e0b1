"""What a student installs (labkit) holds no solutions, references or tests."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import pytest

from autograder.labs import available_labs

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


def test_wheel_holds_only_the_labkit_package(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert all(name.startswith(("labkit/", "labkit-")) for name in names), names


def test_wheel_holds_no_solution_or_reference_code(wheel):
    solution_lines = set()
    for lab in available_labs():
        text = lab.source_path.read_text()
        for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, re.S):
            solution_lines |= {line.strip() for line in block.splitlines()
                               if len(line.strip()) > 25 and not line.strip().startswith("#")}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            text = archive.read(name).decode("utf-8", "replace")
            for marker in FORBIDDEN:
                assert marker not in text, f"{marker!r} found in {name} of the student wheel"
            leaked = [line for line in solution_lines if line in text]
            assert not leaked, f"solution code in {name}: {leaked[:2]}"


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
