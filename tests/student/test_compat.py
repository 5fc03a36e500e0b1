"""The compatibility matrix (issue 20): the labs with the versions students run.

Each row is a venv built from the package registry (tests/studentenv.py,
cached in .cache/studentenvs/<row>, rebuilt when its requirements change):

- "kit pins": the kit's Python, its TensorFlow and Keras pins (pyproject.toml)
  and the NumPy and Matplotlib of its environment;
- "Colab 2026-08": Colab's published list: Python 3.13, TensorFlow 2.20.0,
  Keras 3.13.2, NumPy 2.1.3 (and a Matplotlib of its time);
- "oldest Keras": the oldest Keras with which every lab runs with every check
  passing (found by bisecting over the 3.x releases with TensorFlow 2.16, the
  first TensorFlow built for Keras 3), which student/pyproject.toml's bound
  must name; `test_keras_below_the_bound_fails_a_lab` shows the release
  before it does not do.

In every row labkit is installed as a student installs it (`pip install
./student`, which must leave the row's versions alone). Then, for each lab:
its solution notebook runs with no cell raising; the grader (the kit's CLI in
the kit's environment) gives it full marks; and each sample submission
(data/sample_submissions/<lab>/, each with known mistakes) fails exactly the
visible checks it fails in the grader's environment (the kit's .venv, seen
through an overlay): a student sees the same checks pass and fail as the
grader's environment would.

Marked compat (and slow): `make test-compat` runs it (half an hour the first
time, builds included) and writes docs/compatibility.md and the README's
table from .cache/compat/results.json (tests/compat_docs.py); `make test`
leaves it out. The check that the bound names the oldest row runs everywhere.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import time
import tomllib
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement

from autograder.labs import LABS
from tests import samples as samples_of
from tests import studentenv
from tests.conftest import ROOT, run_cli
from tests.verdicts import solution_notebook

LAB_IDS = list(LABS)
RESULTS_FILE = ROOT / ".cache" / "compat" / "results.json"

#: The oldest Keras row (the bisection's result: 3.0.0, 3.3.3, 3.5.0, 3.6.0 and
#: 3.7.0 each fail a lab's solution; 3.8.0 runs them all) and the release before.
OLDEST_KERAS, BELOW_OLDEST = "3.8.0", "3.7.0"
#: TensorFlow 2.16 is the first release built for Keras 3 (it requires keras>=3);
#: it needs NumPy < 2, and Matplotlib 3.8 is of its time.
OLD_STACK = ("tensorflow==2.16.2", "numpy==1.26.4", "matplotlib==3.8.4")


@dataclass(frozen=True)
class Row:
    name: str                     # as the docs show it
    key: str                      # the env's folder, the student id of its graded solution
    python: str
    requirements: tuple[str, ...]

    def pinned(self, package: str) -> str:
        """The version this row pins ``package`` to (its ``==`` requirement)."""
        for requirement in map(Requirement, self.requirements):
            if requirement.name == package:
                return str(requirement.specifier).removeprefix("==")
        raise KeyError(f"row {self.name!r} pins no {package}")


def _kit_pin(*names: str) -> str:
    """The version pyproject.toml pins the first of ``names`` to (``==``)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for requirement in map(Requirement, pyproject["project"]["dependencies"]):
        if requirement.name in names and str(requirement.specifier).startswith("=="):
            return str(requirement.specifier).removeprefix("==")
    raise LookupError(f"pyproject.toml pins none of {names} with ==; the kit pins row needs it")


ROWS = [
    Row("kit pins", "kit-pins", "3.11",
        (f"tensorflow=={_kit_pin('tensorflow', 'tensorflow-cpu')}",
         f"keras=={_kit_pin('keras')}", f"numpy=={metadata.version('numpy')}",
         f"matplotlib=={metadata.version('matplotlib')}")),
    Row("Colab 2026-08", "colab-2026-08", "3.13",
        ("tensorflow==2.20.0", "keras==3.13.2", "numpy==2.1.3", "matplotlib==3.10.0")),
    Row("oldest Keras", "oldest-keras", "3.11", (OLD_STACK[0], f"keras=={OLDEST_KERAS}",
                                                 *OLD_STACK[1:])),
]
ROW_PARAMS = [pytest.param(row, id=row.key) for row in ROWS]


# -- the results, for docs/compatibility.md -------------------------------------------------
def _machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown CPU") if Path("/proc/cpuinfo").exists() \
        else platform.processor()
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


RESULTS: dict = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": _machine(), "rows": {}, "below_bound": None}


def record(row: Row | None, lab: str | None = None, **values) -> None:
    """Note ``values`` for ``row`` (and ``lab``) and write RESULTS_FILE afresh."""
    if row is None:
        RESULTS.update(values)
    else:
        entry = RESULTS["rows"].setdefault(row.key, {"name": row.name, "labs": {}})
        (entry["labs"].setdefault(lab, {}) if lab else entry).update(values)
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_FILE.write_text(json.dumps(RESULTS, indent=1))


# -- environments, runs and grading, each done once for the module ---------------------------
@pytest.fixture(scope="module")
def row_env():
    """row -> its built env with labkit installed (a failed build fails every test of it)."""
    made: dict[str, studentenv.StudentEnv | str] = {}

    def get(row: Row) -> studentenv.StudentEnv:
        if row.key not in made:
            try:
                env = studentenv.built_env(row.key, row.python, list(row.requirements))
                started = time.monotonic()
                installed = studentenv.install_labkit(env)
                record(row, versions=installed.versions, before_labkit=env.versions,
                       build_seconds=studentenv.build_seconds(env),
                       labkit_seconds=time.monotonic() - started)
                made[row.key] = installed
            except (studentenv.StudentEnvError, OSError) as error:
                made[row.key] = f"{row.name}: {error}"
        if isinstance(made[row.key], str):
            pytest.fail(made[row.key])
        return made[row.key]

    return get


@pytest.fixture(scope="module")
def grader_env(tmp_path_factory):
    """The grader's environment, as a student kernel sees it: the kit's .venv
    through an overlay, with labkit installed from ./student."""
    return studentenv.install_labkit(
        studentenv.overlay_env(tmp_path_factory.mktemp("grader") / "env"))


@pytest.fixture(scope="module")
def solution_run(row_env):
    """(row, lab) -> (executed solution notebook, cell errors), run once."""
    runs: dict[tuple[str, str], tuple] = {}

    def get(row: Row, lab: str):
        if (row.key, lab) not in runs:
            started = time.monotonic()
            runs[row.key, lab] = studentenv.run_notebook(solution_notebook(lab), row_env(row))
            record(row, lab, solution_seconds=round(time.monotonic() - started, 1))
        return runs[row.key, lab]

    return get


@pytest.fixture(scope="module")
def graded(solution_run, tmp_path_factory):
    """lab -> {row key: grades.csv row}: every row's executed solution of the lab
    graded in one batch by the kit's CLI (a row whose env failed is left out)."""
    batches: dict[str, dict] = {}

    def get(lab: str) -> dict:
        if lab not in batches:
            batch = tmp_path_factory.mktemp(f"{lab}-solutions")
            for row in ROWS:
                try:
                    executed, _errors = solution_run(row, lab)
                except pytest.fail.Exception:
                    continue
                nbformat.write(executed, batch / f"{row.key}.ipynb")
            out = tmp_path_factory.mktemp(f"{lab}-out")
            result = run_cli("grade", lab, str(batch), "--out", str(out), "--quiet",
                             "--seed", "compat")
            assert result.returncode == 0, result.stderr[-3000:]
            batches[lab] = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
        return batches[lab]

    return get


def _sample_files(lab: str) -> list[str]:
    """The lab's sample submissions, less the download cut short (not a notebook)."""
    folder = samples_of.SAMPLES_ROOT / lab
    cut_short = samples_of.load(lab).CUT_SHORT
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*.ipynb")
                  if str(path.relative_to(folder)) != cut_short)


def failed_checks(executed) -> set[str]:
    """The visible checks (locked cells check_<exercise>) that raised."""
    return {cell.metadata["nbgrader"]["grade_id"] for cell in executed.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith("check_")
            and any(output.get("output_type") == "error" for output in cell.get("outputs", []))}


@pytest.fixture(scope="module")
def sample_checks():
    """(env, lab) -> {sample file: the visible checks it fails there}, run once."""
    found: dict[tuple[str, str], dict[str, set[str]]] = {}

    def get(env: studentenv.StudentEnv, lab: str) -> dict[str, set[str]]:
        if (str(env.python), lab) not in found:
            folder = samples_of.SAMPLES_ROOT / lab
            found[str(env.python), lab] = {
                sample: failed_checks(studentenv.run_notebook(
                    nbformat.read(folder / sample, as_version=4), env)[0])
                for sample in _sample_files(lab)}
        return found[str(env.python), lab]

    return get


# -- the matrix -------------------------------------------------------------------------------
def test_student_package_allows_the_oldest_keras_row_and_not_the_one_before():
    # The bound students install with is what the matrix proves: the oldest row
    # and nothing older (test_keras_below_the_bound_fails_a_lab shows why).
    student = tomllib.loads((ROOT / "student" / "pyproject.toml").read_text())
    keras = next(Requirement(r) for r in student["project"]["dependencies"]
                 if Requirement(r).name == "keras")
    assert keras.specifier.contains(OLDEST_KERAS), keras
    assert not keras.specifier.contains(BELOW_OLDEST), keras
    assert ROWS[-1].pinned("keras") == OLDEST_KERAS


@pytest.mark.parametrize("row", ROW_PARAMS)
@pytest.mark.compat
@pytest.mark.slow
def test_row_has_its_versions_and_labkit_leaves_them(row, row_env):
    env = row_env(row)
    reported = RESULTS["rows"][row.key]
    for package in ("tensorflow", "keras", "numpy", "matplotlib"):
        assert env.versions[package] == row.pinned(package), (package, env.versions)
        assert reported["before_labkit"][package] == env.versions[package], package
    assert env.versions["python"].startswith(f"{row.python}.")
    assert env.versions["labkit"] == "0.1.0"


@pytest.mark.parametrize("row", ROW_PARAMS)
@pytest.mark.parametrize("lab", LAB_IDS)
@pytest.mark.compat
@pytest.mark.slow
def test_solution_runs_with_every_check_passing(lab, row, solution_run):
    executed, errors = solution_run(row, lab)
    record(row, lab, solution_runs=not errors)
    assert errors == []
    setup = next(cell for cell in executed.cells
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    # The setup cell prints the Keras it runs with: the row's, not the kit's.
    assert f"Keras {row.pinned('keras')}," in "".join(o.get("text", "") for o in setup.outputs)


@pytest.mark.parametrize("row", ROW_PARAMS)
@pytest.mark.parametrize("lab", LAB_IDS)
@pytest.mark.compat
@pytest.mark.slow
def test_the_grader_gives_the_executed_solution_full_marks(lab, row, graded):
    grades = graded(lab).get(row.key)
    full = grades is not None and grades["status"] == "graded" and \
        float(grades["score"]) == float(grades["max_score"]) > 0
    record(row, lab, full_marks=full)
    assert full, grades


@pytest.mark.parametrize("row", ROW_PARAMS)
@pytest.mark.parametrize("lab", LAB_IDS)
@pytest.mark.compat
@pytest.mark.slow
def test_samples_fail_the_same_checks_as_in_the_graders_env(lab, row, row_env, grader_env,
                                                            sample_checks):
    expected = sample_checks(grader_env, lab)
    # The samples hold mistakes that the visible checks catch: a comparison
    # of empty sets would prove nothing.
    assert any(expected.values()), f"no sample of {lab} fails a visible check in the grader's env"
    started = time.monotonic()
    got = sample_checks(row_env(row), lab)
    differ = {sample: {"grader": sorted(expected[sample]), row.name: sorted(got[sample])}
              for sample in expected if got[sample] != expected[sample]}
    record(row, lab, same_verdicts=not differ, samples=len(expected),
           samples_seconds=round(time.monotonic() - started, 1))
    assert not differ


@pytest.mark.compat
@pytest.mark.slow
def test_keras_below_the_bound_fails_a_lab():
    """The release before the oldest row, with the same TensorFlow: lab 2's
    solution raises (MultiHeadAttention's look-ahead mask), so the bound
    cannot go lower. labkit goes in with --no-deps: its bound refuses it."""
    env = studentenv.install_labkit(
        studentenv.built_env("keras-below", "3.11",
                             [OLD_STACK[0], f"keras=={BELOW_OLDEST}", *OLD_STACK[1:]]),
        pip_args=("--no-deps",))
    assert env.versions["keras"] == BELOW_OLDEST
    _executed, errors = studentenv.run_notebook(solution_notebook("lab2"), env)
    record(None, below_bound={"keras": BELOW_OLDEST, "tensorflow": env.versions["tensorflow"],
                              "lab": "lab2", "errors": errors})
    assert any(error.startswith("demo_mask_by_keyword: ") for error in errors), errors


def test_rows_name_distinct_folders_and_pin_every_package():
    assert len({row.key for row in ROWS}) == len(ROWS)
    for row in ROWS:
        for package in ("tensorflow", "keras", "numpy", "matplotlib"):
            row.pinned(package)
