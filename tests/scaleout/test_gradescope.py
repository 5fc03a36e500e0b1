"""The Gradescope autograder bundle: its layout, and its run in a folder laid
out as Gradescope's /autograder, against the kit's own `grade` of the same files.

The run uses the bundle's own copy of the kit (run_autograder puts it first
on the path) with this environment's Python in place of setup.sh's venv
(setup.sh needs apt and the network: its syntax, what it installs and its
refusal of an image without the locks' Python are checked here).
results.json is checked against Gradescope's autograder specification,
written below as a JSON schema from its documentation.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

from autograder.cli import main
from autograder.kernels import isolation as kernel_isolation
from autograder.publish.leaks import Scanner
from autograder.labs import KIT_ROOT, get_lab
from autograder.scaleout import gradescope
from autograder.scaleout.gradescope import Visibility, build_bundle

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "sample_submissions" / "lab1"

_VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
#: results.json as Gradescope's autograder specification describes it: a
#: score or tests' scores; each test with a score, max_score, name, output,
#: status and visibility; the top level's output, visibility and
#: stdout_visibility, execution_time in seconds and extra_data.
RESULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": _VISIBILITY,
        "stdout_visibility": _VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number"},
                "status": {"enum": ["passed", "failed"]},
                "name": {"type": "string"}, "number": {"type": "string"},
                "output": {"type": "string"},
                "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": _VISIBILITY, "extra_data": {"type": "object"},
            },
            "required": ["score", "max_score", "name"],
            "additionalProperties": False,
        }},
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    path = tmp_path_factory.mktemp("gradescope") / "lab1.zip"
    return build_bundle("lab1", path)


def test_the_bundle_is_laid_out_as_gradescope_takes_it(bundle):
    with zipfile.ZipFile(bundle.path) as archive:
        names = archive.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        settings = json.loads(archive.read("kit/bundle.json"))
    assert names[:2] == ["setup.sh", "run_autograder"]
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert settings["lab"] == "lab1" and settings["visibility"]["visibility"] == "visible"
    assert settings["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "kit/requirements.lock" in names and "kit/tools.lock" in names
    assert "kit/solutions/lab1/lab1_attention.py" in names  # the hidden tests' source
    assert "kit/autograder/pipeline.py" in names and "kit/student/pyproject.toml" in names
    assert not [n for n in names if n.startswith(("kit/tests/", "kit/data/", "kit/.venv"))
                or "__pycache__" in n or ".egg-info" in n]


def test_the_scripts_are_valid_bash(bundle, tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    with zipfile.ZipFile(bundle.path) as archive:
        archive.extractall(tmp_path)
    for script in ("setup.sh", "run_autograder"):
        checked = subprocess.run(["bash", "-n", str(tmp_path / script)], capture_output=True,
                                 text=True)
        assert checked.returncode == 0, checked.stderr


def _setup_sh(bundle) -> str:
    with zipfile.ZipFile(bundle.path) as archive:
        return archive.read("setup.sh").decode()


def _commands(script: str) -> list[str]:
    """The script's commands, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", script)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_setup_sh_installs_only_what_the_bundle_pins(bundle):
    """No installer from the network into a shell; pip only from the locks or
    the bundle, never resolving; apt (signed) for bubblewrap and Python."""
    script = _setup_sh(bundle)
    assert "curl" not in script and "wget" not in script
    assert not re.search(r"\|\s*(sudo\s+)?(ba|z|da)?sh\b", script)
    assert "astral.sh" not in script and "uv " not in script
    commands = _commands(script)
    installs = [c for c in commands if "pip install" in c]
    assert len(installs) == 3
    for command in installs:
        words = shlex.split(command.split("||")[0])
        assert "--no-deps" in words, command
        targets = [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
        assert targets, command
        locks = [words[i + 1] for i, w in enumerate(words) if w == "-r"]
        editable = [words[i + 1] for i, w in enumerate(words) if w == "-e"]
        assert sorted(locks + editable) == sorted(targets), command
        assert set(locks) <= {"/autograder/source/kit/requirements.lock",
                              "/autograder/source/kit/tools.lock"}
        assert set(editable) <= {"/autograder/source/kit", "/autograder/source/kit/student"}
    assert "--upgrade" not in script and "pip install -U" not in script
    assert "apt-get install -y --no-install-recommends bubblewrap" in script
    assert "pip check" in script and commands[-1].endswith("gradescope-run --self-test")


def _lock_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_the_locks_pin_exact_versions_of_what_the_kit_needs(bundle):
    with zipfile.ZipFile(bundle.path) as archive:
        lock = _lock_lines(archive.read("kit/requirements.lock").decode())
        tools = _lock_lines(archive.read("kit/tools.lock").decode())
    pin = re.compile(r"^[a-z0-9][a-z0-9.-]*==[A-Za-z0-9.+!-]+$")
    assert lock and all(pin.match(line) for line in lock), [l for l in lock
                                                            if not pin.match(l)]
    pinned = dict(line.split("==") for line in lock)
    assert len(pinned) == len(lock) == len(bundle.locks.pins)
    for name in ("keras", "numpy", "jupyter-client", "nbgrader", "ipykernel", "pyzmq"):
        assert pinned[name] == metadata.version(name), name
    tensorflow = {"tensorflow-cpu", "tensorflow"} & set(pinned)
    assert tensorflow and all(pinned[n] == metadata.version(n) for n in tensorflow)
    # not the kit, labkit, the tools (tools.lock) or the development tools
    assert not {"transformer-lab-kit", "labkit", "pip", "setuptools", "pytest", "ruff",
                "kubernetes"} & set(pinned)
    assert tools and all(pin.match(line) for line in tools)
    assert dict(line.split("==") for line in tools)["setuptools"] == \
        metadata.version("setuptools")


def test_setup_sh_refuses_an_image_without_the_python_of_the_locks(bundle, tmp_path):
    """An image whose python3 is not the locks' version and whose apt has no
    python3.X-venv of it: setup.sh stops before installing anything, saying why."""
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    (tmp_path / "setup.sh").write_text(_setup_sh(bundle))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in (("apt-get", 'echo "apt-get $*" >> "$LOG"'),
                       ("apt-cache", "exit 100"),
                       ("python3", "echo 3.10")):
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    log = tmp_path / "log"
    done = subprocess.run(["bash", str(tmp_path / "setup.sh")], capture_output=True, text=True,
                          env={"PATH": f"{stubs}:/usr/bin:/bin", "LOG": str(log)}, timeout=60)
    assert done.returncode == 1
    python = bundle.locks.python
    assert f"setup.sh FAILED: the locks of this bundle were written with Python {python}" \
        in done.stderr
    assert "venv" not in log.read_text().replace(f"python{python}-venv", "")
    assert "pip install" not in done.stderr


def _autograder(tmp_path: Path, bundle, files: dict[str, bytes], metadata=None) -> Path:
    """tmp_path/autograder as Gradescope lays it out for one submission."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle.path) as archive:
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        os.chmod(root / "source" / name, 0o755)
    (root / "submission").mkdir()
    for name, data in files.items():
        (root / "submission" / name).write_bytes(data)
    if metadata is not None:
        (root / "submission_metadata.json").write_text(json.dumps(metadata))
    return root


def _run(root: Path) -> tuple[dict, str]:
    """run_autograder in ``root``: results.json (checked), and the grader's log."""
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), LABKIT_PYTHON=sys.executable)
    env.pop("LABKIT_ROOT", None)
    done = subprocess.run([str(root / "source" / "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    return results, done.stdout


from autograder.kernels.isolation import LAYER_NAMES  # noqa: E402 - the layers a run may report


def _says_its_isolation(results: dict, stdout: str) -> None:
    isolation = results["extra_data"]["isolation"]
    assert isolation["layer"] in LAYER_NAMES and isolation["summary"]
    assert f"Isolation of the student's kernel: {isolation['summary']}" in stdout
    assert "Isolation" not in results["output"]  # the instructor's, in extra_data


METADATA = {"id": 123456, "created_at": "2026-10-05T20:00:00.000000-07:00",
            "assignment": {"due_date": "2026-10-05T23:59:00.000000-07:00", "title": "Lab 1"},
            "users": [{"email": "bob@uni.example", "id": 42, "name": "Bob Brown"}]}


@pytest.mark.slow
def test_a_submission_graded_on_gradescope_scores_as_the_kit_grades_it(bundle, tmp_path):
    """bob.ipynb (a sample with known mistakes) through the bundle, and through
    `python -m autograder grade`: the same score for every exercise."""
    root = _autograder(tmp_path, bundle, {"Copy of lab1_attention.ipynb":
                                          (SAMPLES / "bob.ipynb").read_bytes()}, METADATA)
    results, stdout = _run(root)
    _says_its_isolation(results, stdout)
    assert main(["grade", "lab1", str(root / "submission"), "--out", str(tmp_path / "kit"),
                 "--quiet", "--jobs", "1", "--no-similarity"]) == 0
    with open(tmp_path / "kit" / "exercises.csv", encoding="utf-8", newline="") as handle:
        kit = {row["exercise"]: (float(row["score"]), float(row["max_score"]))
               for row in csv.DictReader(handle)}
    lab = get_lab("lab1")
    assert [t["name"] for t in results["tests"]] == list(lab.exercises)
    assert {t["name"]: (t["score"], t["max_score"]) for t in results["tests"]} == kit
    assert results["score"] == pytest.approx(sum(score for score, _ in kit.values()))
    assert results["score"] < sum(points for _, points in kit.values())  # bob has mistakes
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed and all(t["output"] and t["output"] != "Passed." for t in failed)
    assert any("Hint: " in t["output"] for t in failed)
    assert results["visibility"] == "visible" and results["stdout_visibility"] == "hidden"
    # never a line of the hidden tests, the reference or the solutions
    assert Scanner([lab]).text_leaks("results.json", json.dumps(results)) == []


@pytest.mark.slow
def test_what_cannot_be_graded_still_gets_a_result_that_says_why(bundle, tmp_path):
    root = _autograder(tmp_path, bundle, {"lab1_attention.py": b"print('hello')\n"})
    results, stdout = _run(root)
    _says_its_isolation(results, stdout)
    assert results["score"] == 0
    assert "not a notebook: .py uploaded; expected a .ipynb" in results["output"]
    assert [t["status"] for t in results["tests"]] == ["failed"] * len(get_lab("lab1").exercises)
    assert "grader_error" not in results["extra_data"]
    empty = _autograder(tmp_path / "empty", bundle, {})
    nothing, stdout = _run(empty)
    _says_its_isolation(nothing, stdout)
    assert nothing["score"] == 0 and nothing["tests"] == []
    assert "No file was submitted" in nothing["output"]


def test_visibility_comes_from_course_toml(monkeypatch, tmp_path):
    from autograder import labs

    real = labs.course_settings

    def settings():
        found = real()
        found["gradescope"] = {"visibility": "after_due_date", "tests_visibility": "hidden"}
        return found

    monkeypatch.setattr(labs, "course_settings", settings)
    made = build_bundle("lab1", tmp_path / "b.zip")
    assert made.visibility == Visibility("after_due_date", "hidden", "hidden")
    with zipfile.ZipFile(made.path) as archive:
        assert json.loads(archive.read("kit/bundle.json"))["visibility"] == {
            "visibility": "after_due_date", "tests_visibility": "hidden",
            "stdout_visibility": "hidden"}
    with pytest.raises(ValueError, match="visibility = 'students': give one of hidden"):
        Visibility.from_settings({"visibility": "students"})
    with pytest.raises(ValueError, match="has when, which the kit does not know"):
        Visibility.from_settings({"when": "now"})


def test_the_cli_refuses_a_bundle_that_is_not_a_zip(tmp_path, capsys):
    assert main(["gradescope", "lab1", "--out", str(tmp_path / "bundle.tar")]) == 2
    assert "Gradescope takes the autograder as a .zip" in capsys.readouterr().err


def _root(tmp_path: Path) -> Path:
    """A /autograder with a bundle's settings and one submitted file that is no notebook."""
    kit = tmp_path / "source" / "kit"
    kit.mkdir(parents=True)
    (kit / "bundle.json").write_text(json.dumps({"lab": "lab1", "visibility": {}}))
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "lab1_attention.ipynb").write_text("{}")
    return tmp_path


def test_the_isolation_grade_chose_is_in_the_log_and_in_extra_data(tmp_path, monkeypatch,
                                                                   capsys):
    """run() reports the isolation that the kit's own `grade` chose (for the
    folders it protects), from the run it made: in the log and extra_data."""
    chosen = kernel_isolation.Isolation("user", "a user of its own per student kernel (test)",
                                        ("network: none (test)",))
    asked = []

    def choose(protected=(), allow_unsandboxed=False):
        asked.append((list(protected), allow_unsandboxed))
        return chosen

    monkeypatch.setattr(kernel_isolation, "choose_isolation", choose)
    results = gradescope.run(_root(tmp_path))  # "{}" is no notebook: no kernel starts
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert asked and asked[0][1] is False  # never unsandboxed
    assert KIT_ROOT in [Path(path) for path in asked[0][0]]  # grade's protected folders
    assert results["extra_data"]["isolation"] == chosen.to_json()
    assert "grader_error" not in results["extra_data"]
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "Isolation of the student's kernel: a user of its own per student kernel (test)",
        "  network: none (test)"]
    assert json.loads((tmp_path / "results" / "results.json").read_text()) == results


def test_no_isolation_layer_means_no_grading_and_says_so(tmp_path, monkeypatch, capsys):
    def unavailable(*args, **kwargs):
        raise kernel_isolation.SandboxUnavailable(
            "bubblewrap cannot start and the grader is not root")

    monkeypatch.setattr(kernel_isolation, "choose_isolation", unavailable)
    collected = []
    monkeypatch.setattr(gradescope, "results_json", lambda *a: collected.append(a))
    results = gradescope.run(_root(tmp_path))
    assert collected == []  # `grade` refused before grading anything
    jsonschema.validate(results, RESULTS_SCHEMA)
    stdout = capsys.readouterr().out
    assert "Isolation of the student's kernel: none can run here" in stdout
    assert "bubblewrap cannot start and the grader is not root" in stdout
    assert results["score"] == 0 and results["tests"] == []
    assert "could not grade this submission" in results["output"]
    assert "Contact your instructor" in results["output"]
    assert "bubblewrap" not in results["output"]  # the reason is the instructor's
    extra = results["extra_data"]
    assert extra["grader_error"].startswith("SandboxUnavailable: bubblewrap cannot start")
    assert extra["isolation"]["layer"] == "unavailable"


def test_a_failed_exercise_lists_its_graded_properties():
    from autograder.grader.results import ExerciseResult, PropertyResult, SubmissionResult

    error = "`DecoderLayer` raised InvalidArgumentError: Incompatible shapes"
    row = SubmissionResult("grace", "lab4", 0.5, 4, exercises=[ExerciseResult(
        "DecoderLayer", 0.5, 4, error, properties=[
            PropertyResult("test_DecoderLayer", "outputs at inference", 0, 3, error,
                           "Arguments received by <internals>"),
            PropertyResult("test_DecoderLayer__training", "dropout", 0, 0.5, error,
                           "Arguments received by <internals>", same_as="test_DecoderLayer"),
            PropertyResult("test_DecoderLayer__config", "get_config()", 0.5, 0.5)])])
    results = gradescope.results_json(get_lab("lab4"), row, {"DecoderLayer": "Post-norm."},
                                      Visibility())
    [test] = results["tests"]
    assert test["output"] == (f"\u2717 outputs at inference (0/3): {error}\n"
                              "\u2717 dropout (0/0.5): the same error as above\n"
                              "\u2713 get_config() (0.5/0.5)\n\nHint: Post-norm.")
