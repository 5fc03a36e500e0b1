"""The test Slurm itself (tests/slurm_cluster.py): a job array and a job that
depends on it run to completion on the one-node cluster.

This is what issue 22's `autograder slurm` relies on: `sbatch --array` for the
shards and `--dependency=afterok:JOB` for the merge. Skipped, saying why, where
Slurm is not installed (`make slurm` installs it as root on Debian/Ubuntu).
"""

from __future__ import annotations

import time

import pytest

from tests.slurm_cluster import SlurmUnavailable, one_node_slurm

pytestmark = pytest.mark.slurm


@pytest.fixture
def slurm(tmp_path):
    try:
        with one_node_slurm(tmp_path) as cluster:
            yield cluster
    except SlurmUnavailable as unavailable:
        pytest.skip(str(unavailable))


def test_array_job_then_dependent_job(slurm, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    began = time.monotonic()
    array = slurm.sbatch("--array=1-3", "--output=task-%A_%a.log",
                         "--wrap", 'echo "task $SLURM_ARRAY_TASK_ID" > "task-$SLURM_ARRAY_TASK_ID.txt"',
                         cwd=work)
    merge = slurm.sbatch(f"--dependency=afterok:{array}", "--output=merge.log",
                         "--wrap", "cat task-1.txt task-2.txt task-3.txt > all.txt", cwd=work)
    states = slurm.wait(array, merge, timeout=120)
    elapsed = time.monotonic() - began

    assert states == {f"{array}_1": "COMPLETED", f"{array}_2": "COMPLETED",
                      f"{array}_3": "COMPLETED", merge: "COMPLETED"}, slurm.logs
    assert (work / "all.txt").read_text() == "task 1\ntask 2\ntask 3\n"
    print(f"slurm: started in {slurm.startup_s:.1f} s; array + dependent job in {elapsed:.1f} s")


def test_failed_array_task_keeps_the_dependent_job_from_running(slurm, tmp_path):
    """afterok: one failed task and the merge never runs. With
    --kill-on-invalid-dep=yes Slurm cancels it rather than leaving it pending
    (DependencyNeverSatisfied) for ever, as `autograder slurm` should ask."""
    work = tmp_path / "work"
    work.mkdir()
    array = slurm.sbatch("--array=1-2", "--output=task-%A_%a.log",
                         "--wrap", 'test "$SLURM_ARRAY_TASK_ID" = 1', cwd=work)
    merge = slurm.sbatch(f"--dependency=afterok:{array}", "--kill-on-invalid-dep=yes",
                         "--output=merge.log", "--wrap", "touch all.txt", cwd=work)
    states = slurm.wait(array, merge, timeout=120)
    assert states[f"{array}_1"] == "COMPLETED"
    assert states[f"{array}_2"] == "FAILED"
    assert states[merge] == "CANCELLED"
    assert not (work / "all.txt").exists()
