"""The hostile suite: every case of tests/hostile/cases.py through the real CLI."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.kernels.isolation.bubblewrap import bubblewrap_works
from tests.conftest import HOSTILE_TABLE, ROOT, run_cli
from tests.hostile.cases import (CELL_TIMEOUT_S, NOTEBOOK_TIMEOUT_DEFAULT_S, NOTEBOOK_TIMEOUT_S,
                                 PLANTED, all_cases, labs, write_batch)
from tests.verdicts import test_cell_points as cell_points

pytestmark = [pytest.mark.slow, pytest.mark.hostile]

SECRET = "s3cr3t-token-of-the-grader"


def _max_score(lab: str) -> float:
    return sum(sum(cells.values()) for cells in cell_points(lab).values())


def _grade(tmp_path_factory, lab: str) -> dict:
    batch = tmp_path_factory.mktemp(f"hostile_{lab}")
    out = tmp_path_factory.mktemp(f"hostile_{lab}_out")
    secret_paths = [str(out), str(out / "nbgrader" / "gradebook.db"), str(ROOT / "solutions"),
                    str(ROOT / "autograder" / "references"), str(batch)]
    write_batch(batch, secret_paths, lab)
    result = run_cli("grade", lab, str(batch), "--out", str(out), "--quiet",
                     "--cell-timeout", str(CELL_TIMEOUT_S), "--notebook-timeout",
                     str(NOTEBOOK_TIMEOUT_S.get(lab, NOTEBOOK_TIMEOUT_DEFAULT_S)),
                     env={"AUTOGRADER_TEST_SECRET": SECRET}, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "grades.csv", encoding="utf-8", newline="") as handle:
        grades = {row["student_id"]: row for row in csv.DictReader(handle)}
    return {"out": out, "grades": grades, "stdout": result.stdout, "stderr": result.stderr}


@pytest.fixture(scope="module")
def graded_labs(tmp_path_factory):
    """One run of the real CLI per lab that has cases."""
    return {lab: _grade(tmp_path_factory, lab) for lab in labs()}


@pytest.fixture(scope="module")
def graded(graded_labs):
    return graded_labs["lab1"]


def _verdict(case, row, out: Path) -> tuple[bool, str]:
    score, status = float(row["score"]), row["status"]
    got = f"{score:g}, {status[:60]}"
    ok = True
    if case.score is not None:
        ok &= score == case.score
    if case.at_most is not None:
        ok &= score <= case.at_most
    if case.status.endswith("*"):
        ok &= status.startswith(case.status[:-1])
    else:
        ok &= status == case.status
    ok &= all(word in status for word in case.contains)
    ok &= float(row["max_score"]) == _max_score(case.lab)
    # What a case's check looks for (files unread, sizes held) is the
    # sandbox's to enforce: without bubblewrap only the score is asserted.
    if case.check is not None and (not case.needs_sandbox or bubblewrap_works()):
        problem = case.check(out, row)
        if problem:
            ok, got = False, f"{got}; {problem}"
    return ok, got


@pytest.mark.parametrize("case", all_cases(), ids=lambda case: case.name)
def test_hostile_case(graded_labs, case):
    run = graded_labs[case.lab]
    row = run["grades"].get(case.student_id)
    assert row is not None, f"{case.name}: no row in grades.csv (a student was lost)"
    ok, got = _verdict(case, row, run["out"])
    HOSTILE_TABLE.append((case.name, case.group, case.expected(), got, "ok" if ok else "FAIL"))
    assert ok, f"{case.name} ({case.what}): expected {case.expected()}, got {got}"


@pytest.mark.parametrize("lab", labs())
def test_every_case_has_exactly_one_row(graded_labs, lab):
    assert sorted(graded_labs[lab]["grades"]) == \
        sorted(case.student_id for case in all_cases() if case.lab == lab)


def test_the_sandbox_hid_every_secret(graded):
    if not bubblewrap_works():
        pytest.skip("bubblewrap is not available here: isolation is not enforced")
    notebook = graded["out"] / "nbgrader" / "autograded" / "reads_secrets" / "lab1" / \
        "lab1_attention.ipynb"
    if not notebook.exists() and os.environ.get("HOSTILE_ONLY"):
        pytest.skip("HOSTILE_ONLY leaves out the reads_secrets case")
    text = json.dumps(nbformat.read(notebook, as_version=4))
    findings = re.search(r"FINDINGS (\{.*?\})\\n", text).group(1)
    assert findings.count("FileNotFoundError") == 5, findings
    assert "'network': 'OSError'" in findings or "'network': 'ConnectionError'" in findings \
        or "Network" in findings or "network': 'OSError" in findings, findings
    assert "'secret_env': 'absent'" in findings, findings
    assert "'hidden_source': False" in findings, findings
    assert "'references': 'ModuleNotFoundError'" in findings, findings
    assert SECRET not in text


def test_the_grader_python_stayed_read_only(graded):
    if not bubblewrap_works():
        pytest.skip("bubblewrap is not available here: isolation is not enforced")
    planted = Path(sys.prefix) / PLANTED
    found = planted.exists()
    planted.unlink(missing_ok=True)
    assert not found, "a notebook wrote into the grader's Python installation"


def test_feedback_shows_no_secret_and_no_hidden_source(graded):
    for page in (graded["out"] / "feedback").glob("*.html"):
        text = page.read_text()
        assert SECRET not in text and "BEGIN HIDDEN" not in text and "assert_close(" not in text


KILL_EVERYTHING = """import os, signal, subprocess
subprocess.Popen(['sleep', '876.5'], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


@pytest.mark.skipif(not bubblewrap_works(),
                    reason="bubblewrap is not available here: without its PID namespace this "
                           "notebook would kill the test run itself")
def test_a_notebook_that_kills_every_process_it_sees_harms_no_one_else(tmp_path):
    """Its kernel sees only its own PID namespace: the grader, the test kernel
    and the classmates graded beside it (--jobs 2) go on, and the daemon it
    leaves behind dies with its kernel."""
    batch = tmp_path / "in"
    batch.mkdir()
    alice = nbformat.read(ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb",
                          as_version=4)
    for name in ("calm1", "calm2"):
        nbformat.write(alice, batch / f"{name}.ipynb")
    alice.cells.insert(1, nbformat.v4.new_code_cell(KILL_EVERYTHING))
    nbformat.write(alice, batch / "killer.ipynb")
    result = run_cli("grade", "lab1", str(batch), "--out", str(tmp_path / "out"), "--quiet",
                     "--jobs", "2", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    grades = {row["student_id"]: row for row in
              csv.DictReader(open(tmp_path / "out" / "grades.csv", encoding="utf-8"))}
    assert sorted(grades) == ["calm1", "calm2", "killer"]
    for student, row in grades.items():
        assert (float(row["score"]), row["status"]) == (10.0, "graded"), (student, row)
    leftovers = [line for line in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                                 text=True).stdout.splitlines()
                 if line.strip() == "sleep 876.5"]
    assert not leftovers, "the notebook's daemon outlived its kernel"
