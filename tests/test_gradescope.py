"""The Gradescope autograder bundle: its layout, and its run in a folder laid
out as Gradescope's /autograder, against the kit's own `grade` of the same files.

The run uses the bundle's own copy of the kit (run_autograder puts it first
on the path) with this environment's Python in place of setup.sh's venv
(setup.sh needs apt and the network: only its syntax is checked here).
results.json is checked against Gradescope's autograder specification,
written below as a JSON schema from its documentation.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from autograder.cli import main
from autograder.grader.leaks import Scanner
from autograder.labs import get_lab
from autograder.scaleout.gradescope import Visibility, build_bundle

ROOT = Path(__file__).resolve().parents[1]
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
    assert "kit/solutions/lab1/lab1_attention.py" in names  # the hidden tests' source
    assert "kit/autograder/grader/grade.py" in names and "kit/student/pyproject.toml" in names
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


def _run(root: Path) -> dict:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), LABKIT_PYTHON=sys.executable)
    env.pop("LABKIT_ROOT", None)
    done = subprocess.run([str(root / "source" / "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    return results


METADATA = {"id": 123456, "created_at": "2026-10-05T20:00:00.000000-07:00",
            "assignment": {"due_date": "2026-10-05T23:59:00.000000-07:00", "title": "Lab 1"},
            "users": [{"email": "bob@uni.example", "id": 42, "name": "Bob Brown"}]}


@pytest.mark.slow
def test_a_submission_graded_on_gradescope_scores_as_the_kit_grades_it(bundle, tmp_path):
    """bob.ipynb (a sample with known mistakes) through the bundle, and through
    `python -m autograder grade`: the same score for every exercise."""
    root = _autograder(tmp_path, bundle, {"Copy of lab1_attention.ipynb":
                                          (SAMPLES / "bob.ipynb").read_bytes()}, METADATA)
    results = _run(root)
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
    results = _run(root)
    assert results["score"] == 0
    assert "not a notebook: .py uploaded; expected a .ipynb" in results["output"]
    assert [t["status"] for t in results["tests"]] == ["failed"] * len(get_lab("lab1").exercises)
    assert "grader_error" not in results["extra_data"]
    empty = _autograder(tmp_path / "empty", bundle, {})
    nothing = _run(empty)
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
