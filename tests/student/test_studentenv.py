"""tests/studentenv.py: the environments a student's kernel runs in.

An overlay must look like Colab before the first cell (Keras, TensorFlow,
NumPy, Matplotlib there; labkit not; google.colab imported) and must keep
pip away from the kit's own environment; run_notebook must run the kernel
with the environment's interpreter and nothing of the caller's sys.path.
The environment builds from the registry are marked slow and compat (make test-compat).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

from tests import studentenv
from tests.studentenv import KIT_ROOT, KIT_VENV, StudentEnvError

PROBE = """
import importlib.util, json, sys
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a missing parent package (google without colab)
        return False
print(json.dumps({
    "labkit": found("labkit"), "autograder": found("autograder"),
    "colab": "google.colab" in sys.modules, "prefix": sys.prefix,
    "importable": [m for m in ("keras", "tensorflow", "numpy", "matplotlib", "ipykernel",
                               "google.protobuf") if found(m)]}))
"""


def probe(python: Path) -> dict:
    """What ``python`` sees, asked in a process with the student's environment
    (run from the env's folder: `python -c` puts its working folder on sys.path)."""
    result = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True,
                            timeout=120, env=studentenv.clean_environ(), cwd=python.parent)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def overlay(tmp_path_factory):
    return studentenv.overlay_env(tmp_path_factory.mktemp("overlay") / "env")


@pytest.mark.slow
def test_overlay_sees_the_kits_packages_but_not_labkit(overlay):
    seen = probe(overlay.python)
    assert seen["labkit"] is False and seen["autograder"] is False
    assert seen["importable"] == ["keras", "tensorflow", "numpy", "matplotlib", "ipykernel",
                                  "google.protobuf"]
    assert seen["colab"] is True
    assert Path(seen["prefix"]) == overlay.python.parent.parent


def test_overlay_reports_the_kits_versions(overlay):
    # This process runs in the kit's environment: its metadata is the truth.
    assert overlay.versions["keras"] == metadata.version("keras")
    assert overlay.versions["numpy"] == metadata.version("numpy")
    assert overlay.versions["python"] == ".".join(map(str, os.sys.version_info[:3]))
    assert "labkit" not in overlay.versions


@pytest.mark.slow
def test_overlay_without_colab_has_no_google_colab(tmp_path):
    env = studentenv.overlay_env(tmp_path / "env", colab=False)
    seen = probe(env.python)
    assert seen["colab"] is False and "google.protobuf" in seen["importable"]


def _kit_labkit_state() -> dict[str, str]:
    """A fingerprint of labkit's install in the kit's environment: its files'
    hashes (dist-info, editable finder, .pth) and where it imports from."""
    site = studentenv._site_packages(KIT_VENV)
    state = {}
    for entry in sorted(site.iterdir()):
        if "labkit" in entry.name.lower():
            files = sorted(entry.rglob("*")) if entry.is_dir() else [entry]
            for file in files:
                if file.is_file() and "__pycache__" not in file.parts:
                    state[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
    where = subprocess.run([str(KIT_VENV / "bin" / "python"), "-c",
                            "import labkit; print(labkit.__file__)"], capture_output=True,
                           text=True, timeout=120, env=studentenv.clean_environ())
    state["imports from"] = where.stdout.strip() or where.stderr[-300:]
    return state


@pytest.mark.slow
def test_pip_install_student_goes_into_the_overlay_only(tmp_path):
    env = studentenv.overlay_env(tmp_path / "env")
    before = _kit_labkit_state()
    assert before, f"the kit's environment {KIT_VENV} has no labkit: run make env"
    installed_env = studentenv.install_labkit(env)
    assert installed_env.versions["labkit"] == "0.1.0"
    assert {k: v for k, v in installed_env.versions.items() if k != "labkit"} == env.versions
    installed = probe(env.python)
    assert installed["labkit"] is True
    where = subprocess.run([str(env.python), "-c", "import labkit; print(labkit.__file__)"],
                           capture_output=True, text=True, env=studentenv.clean_environ())
    site = studentenv._site_packages(tmp_path / "env")
    assert Path(where.stdout.strip()).parent == site / "labkit"
    assert _kit_labkit_state() == before


def test_run_notebook_runs_in_the_env_and_reports_the_cells_that_raise(overlay, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(KIT_ROOT / "student"))  # must not reach the kernel
    cells = [nbformat.v4.new_code_cell(
                 "import os, sys; print(sys.executable, 'google.colab' in sys.modules, "
                 "os.environ.get('PYTHONPATH'), os.environ.get('MARK'), os.getcwd())"),
             nbformat.v4.new_code_cell("import labkit"),
             nbformat.v4.new_code_cell("raise ValueError('wrong shape')"),
             nbformat.v4.new_code_cell("print('went on')")]
    cells[2].metadata["nbgrader"] = {"grade_id": "check_softmax"}
    notebook = nbformat.v4.new_notebook(cells=cells)
    executed, errors = studentenv.run_notebook(notebook, overlay, timeout=120, cwd=tmp_path,
                                               extra_env={"MARK": "here"})
    assert executed.cells[0].outputs[0]["text"].split() == [
        str(overlay.python), "True", "None", "here", str(tmp_path)]
    assert errors == ["cell 1: ModuleNotFoundError: No module named 'labkit'",
                      "check_softmax: ValueError: wrong shape"]
    assert executed.cells[3].outputs[0]["text"] == "went on\n"
    assert notebook.cells[0].outputs == []  # the caller's notebook is left as it was


def test_run_notebook_refuses_an_env_without_interpreter(tmp_path):
    missing = studentenv.StudentEnv("gone", tmp_path / "bin" / "python", {})
    with pytest.raises(StudentEnvError, match="no interpreter at"):
        studentenv.run_notebook(nbformat.v4.new_notebook(), missing)


@pytest.mark.parametrize("name, left_out", [
    ("labkit", True), ("labkit-0.1.0.dist-info", True), ("labkit.egg-info", True),
    ("__editable__.labkit-0.1.0.pth", True), ("__editable___labkit_0_1_0_finder.py", True),
    ("transformer_lab_kit-0.1.0.dist-info", True), ("autograder", True),
    ("distutils-precedence.pth", True), ("pip", True), ("setuptools", True),
    ("keras", False), ("tensorflow", False), ("google", False), ("numpy-2.4.6.dist-info", False),
])
def test_overlay_leaves_out_labkit_the_kit_and_pth_files(name, left_out):
    assert studentenv._left_out(name) is left_out


def test_find_python_says_what_to_install():
    with pytest.raises(StudentEnvError, match=r"no Python 2\.99 found .*pyenv install 2\.99"):
        studentenv.find_python("2.99")
    with pytest.raises(StudentEnvError, match="no interpreter at /nowhere/python"):
        studentenv.find_python("/nowhere/python")


def test_built_env_refuses_requirements_that_are_not_requirements(tmp_path):
    for requirements in ([], ["keras==3.13.2", ""], ["-r requirements.txt"]):
        with pytest.raises(StudentEnvError, match="pip requirement strings"):
            studentenv.built_env("bad", "3.11", requirements, cache=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.compat  # a build from the registry: make test-compat, with the rows that use it
def test_built_env_builds_reuses_and_rebuilds(tmp_path, capsys):
    """A small env (Python 3.12, an older NumPy): built, then reused while its
    requirements stay, rebuilt when they change."""
    env = studentenv.built_env("small", "3.12", ["numpy==2.2.6"], colab=True, cache=tmp_path)
    assert env.versions["python"].startswith("3.12.") and env.versions["numpy"] == "2.2.6"
    assert "small built in" in capsys.readouterr().out
    seen = probe(env.python)
    assert seen["colab"] is True and seen["labkit"] is False
    assert seen["importable"] == ["numpy", "ipykernel"]
    stamp = (tmp_path / "small" / ".studentenv.json").stat().st_mtime_ns

    again = studentenv.built_env("small", "3.12", ["numpy==2.2.6"], colab=True, cache=tmp_path)
    assert again == env and again.versions == env.versions
    assert "reused" in capsys.readouterr().out
    assert (tmp_path / "small" / ".studentenv.json").stat().st_mtime_ns == stamp
    assert studentenv.build_seconds(again) > 0

    other = studentenv.built_env("small", "3.12", ["numpy==2.3.5"], colab=False, cache=tmp_path)
    assert other.versions["numpy"] == "2.3.5" and probe(other.python)["colab"] is False
    executed, errors = studentenv.run_notebook(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
            "import numpy, sys; print(numpy.__version__, sys.version_info[:2])")]), other)
    assert errors == [] and executed.cells[0].outputs[0]["text"] == "2.3.5 (3, 12)\n"


def test_run_notebook_leaves_no_kernel_behind(overlay):
    """Each run starts a kernel (TensorFlow loaded: hundreds of MB); one left
    alive per notebook exhausted the machine's memory in the matrix."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os; print(os.getpid())")])
    executed, errors = studentenv.run_notebook(notebook, overlay, timeout=120)
    pid = int(executed.cells[0].outputs[0]["text"])
    assert errors == []
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", f"kernel {pid} still runs"
