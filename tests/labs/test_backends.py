"""Every lab's solution, graded under the other Keras backends, scores full marks.

The rest of the suite runs under the environment's backend (TensorFlow in
CI). Here each lab's solution notebook is graded once more through the real
CLI with KERAS_BACKEND set to torch (and jax), for each of those that is
installed (`make torch` installs PyTorch's CPU build); a backend that is not
installed is skipped with the reason. A cell appended to the notebook prints
the backend the student kernel really ran, so the test cannot pass on
TensorFlow by accident. `make test-backends` runs it (other backends are
suites of their own, outside `make test`); the whole verdict suite runs under
a backend with `make test-torch` (see docs/verdicts.md, the numerical policy).
"""

from __future__ import annotations

import csv
import importlib.util

import nbformat
import pytest

from autograder.labs import available_labs
from tests import verdicts
from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.backends]

BACKENDS = ["torch", "jax"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_solution_scores_full_marks_under(backend, tmp_path):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed (make {backend} installs it)")
    if backend == "jax" and importlib.util.find_spec("jaxlib") is None:
        pytest.skip("jaxlib is not installed")
    failures = []
    for lab in available_labs():
        batch = tmp_path / lab.id / "in"
        batch.mkdir(parents=True)
        nbformat.write(verdicts.solution_reporting_device(lab.id), batch / "solution.ipynb")
        out = tmp_path / lab.id / "out"
        result = run_cli("grade", lab.id, str(batch), "--out", str(out), "--quiet",
                         "--seed", f"backend-{backend}", env={"KERAS_BACKEND": backend})
        assert result.returncode == 0, result.stderr[-2000:]
        row = next(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
        ran_on = verdicts.device_reported(out, lab.id)
        if ran_on.split(" ")[0] != backend:
            failures.append(f"{lab.id}: the student kernel did not run {backend}: {ran_on}")
        if float(row["score"]) != float(row["max_score"]) or row["status"] != "graded":
            lost = [r for r in csv.DictReader(open(out / "exercises.csv", encoding="utf-8"))
                    if float(r["score"]) < float(r["max_score"])]
            failures.append(f"{lab.id}: {row['score']}/{row['max_score']} ({row['status']}): "
                            + "; ".join(f"{r['exercise']}: {r['message'][:200]}" for r in lost))
    assert not failures, "\n".join(failures)
