"""`grade --plain` gives every score the fast grading gives (issue 49, item 2).

The kit grades fast by four speed-ups, each with a plain twin
(autograder.grader.options.PLAIN): student kernels forked from a fork server
(a fresh Python each), the visible checks skipped (run), the hidden tests'
calls answered on a pipe (execute requests, as Jupyter runs a cell), and a
layer's first build by its eager call (Keras's own trace). After a Keras,
TensorFlow, jupyter_client or nbgrader upgrade that breaks a fast path, an
instructor grades with `--plain` and the grades do not move: this test grades
a lab's samples and its solution both ways, with one seed, and compares every
student's total and every exercise's score.

Cost: the plain way takes about twice the fast one (fresh kernels import
TensorFlow each). `make test-plain` grades every lab's samples both ways;
`make test` grades two of lab 1's notebooks both ways (the solution and a
sample with mistakes in three exercises), to stay within its time
(docs/performance.md gives the figures).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from autograder.grader.source import build_source_notebook, write_notebook
from autograder.labs import LABS
from tests import samples as samples_of
from tests.conftest import run_cli

#: What `make test` grades both ways: two notebooks of one lab (`make test-plain`
#: grades every lab's samples).
IN_MAKE_TEST = ("lab1", ("carol.ipynb",))

LAB_PARAMS = [pytest.param(lab, None, marks=[pytest.mark.slow, pytest.mark.plain])
              for lab in samples_of.labs_with_samples()]
LAB_PARAMS.append(pytest.param(*IN_MAKE_TEST, marks=[pytest.mark.slow], id="lab1-two"))


def _speed_ups(out: Path) -> dict[str, float]:
    """How often the run used two of its speed-ups, from OUT/results/*.json's
    timings: calls answered on the pipe, kernels forked."""
    found = {"piped": 0.0, "forked": 0.0}
    for path in out.glob("results/*.json"):
        timings = json.loads(path.read_text(encoding="utf-8")).get("timings", {})
        found["piped"] += sum(value for key, value in timings.items()
                              if key.startswith("piped:"))
        found["forked"] += timings.get("student_kernel_forked", 0.0)
    return found


def _scores(lab: str, batch: Path, out: Path, *flags: str) -> tuple[dict, dict]:
    """({student: total}, {(student, exercise): score}) of `grade` with ``flags``."""
    result = run_cli("grade", lab, str(batch), "--out", str(out), "--quiet", "--seed", "plain",
                     *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        totals = {row["student_id"]: row["score"] for row in csv.DictReader(handle)}
    with open(out / "exercises.csv", newline="", encoding="utf-8") as handle:
        exercises = {(row["student_id"], row["exercise"]): row["score"]
                     for row in csv.DictReader(handle)}
    return totals, exercises


@pytest.mark.parametrize("lab, only", LAB_PARAMS)
def test_plain_grading_gives_every_score_the_fast_one_gives(lab, only, tmp_path):
    batch = tmp_path / "submissions"
    shutil.copytree(samples_of.SAMPLES_ROOT / lab, batch)
    if only is not None:  # make test's share: these samples and the solution
        for path in list(batch.iterdir()):
            if path.name not in only:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    write_notebook(build_source_notebook(LABS[lab]), batch / "solution.ipynb")
    fast_totals, fast = _scores(lab, batch, tmp_path / "fast")
    plain_totals, plain = _scores(lab, batch, tmp_path / "plain", "--plain")
    assert fast_totals.keys() == plain_totals.keys()
    assert len(fast_totals) >= 2, fast_totals
    moved = [f"{student}: fast {fast_totals[student]}, plain {plain_totals[student]}"
             for student in fast_totals if fast_totals[student] != plain_totals[student]]
    moved += [f"{student} {exercise}: fast {fast[key]}, plain {plain.get(key)}"
              for key in fast for student, exercise in [key] if fast[key] != plain.get(key)]
    assert not moved, f"{lab}: --plain moved scores:\n" + "\n".join(moved)
    # Not all full marks: the samples' mistakes are graded both ways.
    assert len(set(fast_totals.values())) > 1, fast_totals
    # And the two ways differ: the fast one answered calls on the pipe, the plain
    # one none (nor forked a kernel).
    fast_used, plain_used = _speed_ups(tmp_path / "fast"), _speed_ups(tmp_path / "plain")
    assert fast_used["piped"] > 0, fast_used
    assert plain_used == {"piped": 0.0, "forked": 0.0}, plain_used


def test_plain_turns_every_speed_up_off():
    from autograder.grader.options import PLAIN, GradingOptions

    plain = GradingOptions(plain=True)
    assert (plain.kernels, plain.run_checks) == ("fresh", True)
    fast = GradingOptions()
    assert (fast.kernels, fast.run_checks, fast.plain) == ("fork", False, False)
    assert len(PLAIN) == 4
