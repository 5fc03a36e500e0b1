"""A class graded across a Slurm cluster: an array job of shards and a dependent merge.

``python -m autograder slurm LAB SUBMISSIONS --out OUT --shards N`` writes
two batch scripts into ``OUT/slurm/`` and submits them with ``sbatch``
(``--dry-run`` writes and prints them, and submits nothing):

- ``grade.sbatch``, an array job of N tasks: task K runs
  ``python -m autograder grade LAB SUBMISSIONS --shard K/N`` into
  ``OUT/shards/K`` (every N-th student from the K-th, by student id), with
  ``--jobs`` the task's CPUs (``--cpus-per-task``);
- ``merge.sbatch``, submitted with ``--dependency=afterok:<array job>``: it
  runs ``merge`` into ``OUT/class`` once every shard has finished, then one
  ``grade`` of the whole class into it, which regrades no one and applies
  the term's rules (roster, late policy, overrides) and the similarity check
  across the class, and removes the seed.

Every shard must grade with the same hidden inputs, so the run has one
secret seed (``--seed``, or a fresh random one), kept in
``OUT/slurm/seed`` (readable by its owner only) and read by each task
(``grade --seed-file``); it is never on a command line (``squeue`` and
``ps`` show those) or in the scripts, and the merge job removes it. The instructor's own Slurm options pass through: ``--partition``,
``--account``, ``--time``, ``--mem``, ``--cpus-per-task``, and any other
with ``--sbatch-arg`` (repeatable, e.g. ``--sbatch-arg=--qos=short``).

The scripts run the kit with the Python that wrote them (the course's
virtual environment, on a file system every node sees), from the kit's
folder; SUBMISSIONS and OUT must be on shared storage too.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# The term's files of `grade` a Slurm run passes on, by flag name (TERM_FLAGS,
# declared once with the options: autograder.grader.options).
from autograder.grader.options import TERM_FLAGS


@dataclass
class SlurmRun:
    """What `prepare` wrote and `submit` submitted."""

    out: Path
    shards: int
    grade_script: Path
    merge_script: Path
    commands: list[list[str]] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)


def prepare(lab_id: str, submissions: Path, out: Path, shards: int, *,
            seed: str | None = None, partition: str | None = None,
            account: str | None = None, time: str | None = None, mem: str | None = None,
            cpus_per_task: int = 2, sbatch_args: tuple[str, ...] = (),
            term: dict[str, Path] | None = None, python: str | None = None) -> SlurmRun:
    """Write OUT/slurm/grade.sbatch, merge.sbatch and the seed; submit nothing.

    ``term``: the term's files of `grade` (``roster``, ``course``, ``times``,
    ``extensions``, ``overrides``), passed to every shard and the final run.

    Raises:
        ValueError: an unknown lab, SUBMISSIONS missing, a shard count or CPU
            count below 1, or a term file that does not exist.
    """
    from autograder.labs import KIT_ROOT, get_lab

    lab = get_lab(lab_id)
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    if not submissions.exists():
        raise ValueError(f"Submissions not found: {submissions} does not exist. Give the "
                         f"folder or .zip of the class, on storage every node sees.")
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"--shards {shards!r}: give the number of array tasks, 1 or more "
                         f"(e.g. one per node: --shards 8).")
    if not isinstance(cpus_per_task, int) or cpus_per_task < 1:
        raise ValueError(f"--cpus-per-task {cpus_per_task!r}: give 1 or more.")
    term = {name: Path(path).resolve() for name, path in (term or {}).items() if path}
    for name, path in term.items():
        if name not in TERM_FLAGS:
            raise ValueError(f"{name} is not one of grade's term options ({TERM_FLAGS})")
        if not path.exists():
            raise ValueError(f"--{name} {path} does not exist; give the file the shards "
                             f"and the merge should read (on shared storage).")
    python = python or sys.executable
    folder = out / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    seed_file = folder / "seed"
    seed_file.touch(mode=0o600)
    os.chmod(seed_file, 0o600)
    seed_file.write_text(seed or secrets.token_hex(16), encoding="utf-8")

    term_args = [arg for name, path in term.items() for arg in (f"--{name}", str(path))]
    options = [f"--cpus-per-task={cpus_per_task}"]
    for name, value in (("partition", partition), ("account", account), ("time", time),
                        ("mem", mem)):
        if value:
            options.append(f"--{name}={value}")
    options += list(sbatch_args)

    kit = [shlex.quote(python), "-m", "autograder"]
    grade = kit + ["grade", lab.id, shlex.quote(str(submissions)),
                   "--out", f"{shlex.quote(str(out / 'shards'))}/$SLURM_ARRAY_TASK_ID",
                   "--shard", f"$SLURM_ARRAY_TASK_ID/{shards}",
                   "--seed-file", shlex.quote(str(seed_file)),
                   "--jobs", '"${SLURM_CPUS_PER_TASK:-1}"', "--quiet", "--no-similarity",
                   *map(shlex.quote, term_args)]
    grade_script = folder / "grade.sbatch"
    grade_script.write_text(_script(
        f"labkit-{lab.id}-grade", options + [f"--array=1-{shards}",
                                            f"--output={folder}/grade-%A_%a.out"],
        KIT_ROOT, " ".join(grade)), encoding="utf-8")

    shard_dirs = " ".join(shlex.quote(str(out / "shards" / str(k)))
                          for k in range(1, shards + 1))
    class_dir = shlex.quote(str(out / "class"))
    merge = "\n".join([
        " ".join(kit + ["merge", lab.id, shard_dirs, "--out", class_dir]),
        # The term's rules and the similarity check over the whole class: no one
        # is graded again (their results are there, and the files unchanged).
        " ".join(kit + ["grade", lab.id, shlex.quote(str(submissions)), "--out", class_dir,
                        "--quiet", "--jobs", '"${SLURM_CPUS_PER_TASK:-1}"',
                        *map(shlex.quote, term_args)]),
        f"rm -f {shlex.quote(str(seed_file))}",
    ])
    merge_script = folder / "merge.sbatch"
    merge_script.write_text(_script(f"labkit-{lab.id}-merge",
                                    options + [f"--output={folder}/merge-%j.out"],
                                    KIT_ROOT, merge), encoding="utf-8")
    return SlurmRun(out, shards, grade_script, merge_script,
                    commands=[["sbatch", "--parsable", str(grade_script)],
                              ["sbatch", "--parsable", "--dependency=afterok:<grade job>",
                               "--kill-on-invalid-dep=yes", str(merge_script)]])


def _script(name: str, options: list[str], kit_root: Path, body: str) -> str:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}"]
    lines += [f"#SBATCH {option}" for option in options]
    lines += ["set -euo pipefail", f"cd {shlex.quote(str(kit_root))}", body, ""]
    return "\n".join(lines)


def submit(run: SlurmRun, env: dict | None = None) -> SlurmRun:
    """Submit the array job, then the merge job after it; the job ids in ``run``.

    Raises:
        ValueError: sbatch is not here, or refused a job (its message).
    """
    sbatch = shutil.which("sbatch", path=(env or os.environ).get("PATH"))
    if sbatch is None:
        raise ValueError("sbatch was not found: run this on a Slurm login node (or give "
                         "--dry-run to write the scripts and submit them yourself).")
    grade_id = _sbatch([sbatch, "--parsable", str(run.grade_script)], env)
    merge_id = _sbatch([sbatch, "--parsable", f"--dependency=afterok:{grade_id}",
                        "--kill-on-invalid-dep=yes", str(run.merge_script)], env)
    run.job_ids = [grade_id, merge_id]
    run.commands[1][2] = f"--dependency=afterok:{grade_id}"
    return run


def _sbatch(command: list[str], env: dict | None) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        raise ValueError(f"sbatch refused {Path(command[-1]).name}: "
                         f"{(done.stderr or done.stdout).strip()[:1000]}")
    return done.stdout.strip().split(";")[0]
