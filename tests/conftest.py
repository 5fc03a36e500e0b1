"""Shared fixtures of the kit's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def run_cli(*args: str, timeout: int = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m autograder ARGS` as an instructor would."""
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


#: Rows of the hostile suite's table, printed at the end of the run.
HOSTILE_TABLE: list[tuple[str, str, str, str, str]] = []


#: Rows of the verdict suite's table: (lab, exercise, variants passed, variants,
#: mistakes caught, mistakes), printed at the end of the run.
VERDICT_TABLE: list[tuple[str, str, int, int, int, int, int]] = []


#: The same rows from the fast tier (tests/labs/test_verdicts_inprocess.py): every
#: entry, its hidden tests run in process.
INPROCESS_TABLE: list[tuple[str, str, int, int, int, int, int]] = []


#: The tables above by name, for the trip from pytest-xdist's workers (each
#: fills its own) to the controller, which prints them (`make test` runs two
#: workers, `-n 2`).
_TABLES = {"inprocess": INPROCESS_TABLE, "verdicts": VERDICT_TABLE, "hostile": HOSTILE_TABLE}


def pytest_sessionfinish(session):
    """In an xdist worker: hand this worker's table rows to the controller."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["tables"] = json.dumps(_TABLES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """In the controller: gather a finished worker's table rows (an xdist hook)."""
    rows = json.loads(getattr(node, "workeroutput", {}).get("tables", "{}"))
    for name, table in rows.items():
        _TABLES[name].extend(tuple(row) for row in table)


def pytest_terminal_summary(terminalreporter):
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    for table, title in ((INPROCESS_TABLE, f"verdict suite in process ({backend}), every entry"),
                         (VERDICT_TABLE, f"verdict suite graded by the kernels ({backend})")):
        if not table:
            continue
        terminalreporter.section(f"{title}: exercise, variants passed, "
                                 "mistakes caught, mistakes the visible check catches too")
        width = max(len(row[1]) for row in table)
        totals = [0, 0, 0, 0, 0]
        # seen is None in the kernel tier: the grader does not run the visible checks.
        checked = all(row[-1] is not None for row in table)
        for lab, exercise, passed, variants, caught, mistakes, seen in table:
            terminalreporter.write_line(f"{lab}  {exercise:<{width}}  variants {passed}/{variants}"
                                        f"  mistakes caught {caught}/{mistakes}"
                                        + (f"  by the visible check {seen}/{mistakes}"
                                           if checked else ""))
            for i, value in enumerate((passed, variants, caught, mistakes, seen or 0)):
                totals[i] += value
        terminalreporter.write_line(f"all   {'':<{width}}  variants {totals[0]}/{totals[1]}"
                                    f"  mistakes caught {totals[2]}/{totals[3]}"
                                    + (f"  by the visible check {totals[4]}/{totals[3]}"
                                       if checked else
                                       "  (visible checks: not run by the grader; see the "
                                       "in-process table)"))
    if not HOSTILE_TABLE:
        return
    terminalreporter.section("hostile suite: case, expected, got")
    width = max(len(row[0]) for row in HOSTILE_TABLE)
    for name, group, expected, got, verdict in sorted(HOSTILE_TABLE, key=lambda r: (r[1], r[0])):
        terminalreporter.write_line(
            f"{verdict:4}  {group:9}  {name:<{width}}  expected {expected:<28} got {got}")


def gradebook_scores(db_url: str, lab) -> dict[tuple[str, str], float]:
    """(student, grade cell) -> auto score, read through nbgrader's gradebook API."""
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(db_url) as gradebook:
        for student in gradebook.students:
            notebook = gradebook.find_submission_notebook(lab.notebook, lab.id, student.id)
            for grade in notebook.grades:
                scores[student.id, grade.name] = grade.auto_score
    return scores


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
