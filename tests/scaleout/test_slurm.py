"""`python -m autograder slurm`: the array job of shards and the dependent merge.

The scripts are checked as written (``--dry-run``); a real one-node Slurm
grading the sample class through them is in the test below them, skipped
with the reason where Slurm cannot be started here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from autograder.cli import main
from autograder.scaleout import slurm

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "sample_submissions" / "lab1"


def test_dry_run_writes_an_array_job_and_a_merge_that_keep_the_seed_off_command_lines(
        tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["slurm", "lab1", str(SAMPLES), "--out", str(out), "--shards", "4",
                 "--partition", "short", "--account", "cs101", "--time", "00:20:00", "--mem",
                 "8G", "--cpus-per-task", "4", "--sbatch-arg=--qos=exam", "--seed",
                 "a-long-secret-seed", "--roster",
                 str(ROOT / "data" / "sample_term" / "roster.csv"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "Dry run: nothing submitted" in printed
    grade = (out / "slurm" / "grade.sbatch").read_text()
    merge = (out / "slurm" / "merge.sbatch").read_text()
    for option in ("--partition=short", "--account=cs101", "--time=00:20:00", "--mem=8G",
                   "--cpus-per-task=4", "--qos=exam"):
        assert f"#SBATCH {option}\n" in grade and f"#SBATCH {option}\n" in merge
    assert "#SBATCH --array=1-4\n" in grade and "--array" not in merge
    assert "--shard $SLURM_ARRAY_TASK_ID/4" in grade
    assert f"--out {out / 'shards'}/$SLURM_ARRAY_TASK_ID" in grade
    assert f"--seed-file {out / 'slurm' / 'seed'}" in grade
    assert "--roster " in grade and "--roster " in merge
    # the seed is in a file its owner alone reads, never in a script or a command line
    seed = out / "slurm" / "seed"
    assert seed.read_text() == "a-long-secret-seed"
    assert stat.S_IMODE(seed.stat().st_mode) == 0o600
    assert "a-long-secret-seed" not in grade + merge + printed
    shards = " ".join(str(out / "shards" / str(k)) for k in range(1, 5))
    assert f"merge lab1 {shards} --out {out / 'class'}" in merge
    assert f"rm -f {seed}" in merge
    assert "sbatch --parsable --dependency=afterok:<grade job>" in printed


def test_bad_options_are_refused_before_anything_is_written(tmp_path, capsys):
    assert main(["slurm", "lab1", str(tmp_path / "none"), "--out", str(tmp_path / "o"),
                 "--shards", "2", "--dry-run"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["slurm", "lab1", str(SAMPLES), "--out", str(tmp_path / "o"), "--shards", "0",
                 "--dry-run"]) == 2
    assert "--shards 0: give the number of array tasks" in capsys.readouterr().err
    assert main(["slurm", "lab1", str(SAMPLES), "--out", str(tmp_path / "o"), "--shards", "2",
                 "--roster", str(tmp_path / "roster.csv"), "--dry-run"]) == 2
    assert "roster.csv does not exist" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_without_sbatch_it_says_where_to_run(tmp_path, monkeypatch):
    run = slurm.prepare("lab1", SAMPLES, tmp_path / "o", 2)
    with pytest.raises(ValueError, match="sbatch was not found: run this on a Slurm login node"):
        slurm.submit(run, env={"PATH": str(tmp_path)})


def test_grade_reads_its_seed_from_a_file(tmp_path):
    from autograder.cli import build_parser, grading_options

    seed = tmp_path / "seed"
    seed.write_text("s3cret\n")
    args = build_parser().parse_args(["grade", "lab1", "x", "--out", "y", "--seed-file",
                                      str(seed), "--shard", "1/2"])
    assert grading_options(args).seed == "s3cret"
    seed.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        grading_options(args)


@pytest.mark.slow
@pytest.mark.slurm
def test_a_class_graded_through_a_real_slurm_equals_one_local_run(tmp_path):
    from tests.slurm_cluster import one_node_slurm

    with one_node_slurm(tmp_path / "cluster") as cluster:
        out = tmp_path / "out"
        env = dict(os.environ, **cluster.env)
        run = slurm.prepare("lab1", SAMPLES, out, 3, seed="slurm-test", cpus_per_task=1)
        slurm.submit(run, env=env)
        cluster.wait(*run.job_ids, timeout=900)
    local = tmp_path / "local"
    assert main(["grade", "lab1", str(SAMPLES), "--out", str(local), "--seed", "slurm-test",
                 "--quiet", "--jobs", "2"]) == 0
    merged = (out / "class" / "grades.csv").read_text().splitlines()
    assert merged == (local / "grades.csv").read_text().splitlines()
    assert (out / "class" / "exercises.csv").read_text() == \
        (local / "exercises.csv").read_text()
    assert not (out / "slurm" / "seed").exists()
    logs = sorted(p.name for p in (out / "slurm").glob("grade-*.out"))
    assert len(logs) == 3, logs
