"""Grade the hostile suite's cases with plain nbgrader, for comparison.

Plain nbgrader 0.9 here means: the lab's source notebook in a course folder,
`nbgrader generate_assignment`, then `nbgrader autograde` (its default
preprocessors, the hidden tests running inside the student's kernel) over
all the cases at once, as an instructor would run it. Prints, for each case,
what plain nbgrader gave and what this kit gives (graded here with the
hostile suite's settings, or read from a kit run's OUT folder if given), as
a Markdown table.

    .venv/bin/python benchmarks/plain_nbgrader_hostile.py [KIT_OUT_DIR]
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.labs import LABS  # noqa: E402
from autograder.release import build_source_notebook, write_notebook  # noqa: E402
from tests.hostile.cases import cases, write_batch  # noqa: E402


def main(kit_out: Path | None) -> None:
    lab = LABS["lab1"]
    work = Path(tempfile.mkdtemp(prefix="plain-nbgrader-"))
    course = work / "course"
    write_notebook(build_source_notebook(lab), course / "source" / lab.id / f"{lab.notebook}.ipynb")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'plain'\n")
    nbgrader = [str(Path(sys.executable).with_name("nbgrader"))]
    # nbgrader shells out to `alembic`, which must be on PATH (the venv's bin).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(nbgrader + ["generate_assignment", lab.id, "--force"], cwd=course,
                   check=True, capture_output=True, env=env)
    batch = work / "batch"
    batch.mkdir()
    written = write_batch(batch, [str(course), str(course / "gradebook.db")])
    # Plain nbgrader needs submitted/<student>/<lab>/<notebook>.ipynb and
    # skips anything not named exactly like the release.
    for case in written:
        source = batch / case.path
        target = course / "submitted" / case.student_id / lab.id
        target.mkdir(parents=True, exist_ok=True)
        if source.name == f"{lab.notebook}.ipynb" or source.suffix == ".ipynb" and "/" not in case.path:
            shutil.copy(source, target / f"{lab.notebook}.ipynb")
        else:
            shutil.copy(source, target / source.name)   # e.g. "Copy of ...": skipped by nbgrader
    result = subprocess.run(nbgrader + ["autograde", lab.id, "--force"], cwd=course,
                            capture_output=True, text=True, env=env)
    plain = _plain_scores(course, lab, [case.student_id for case in written])
    batch_aborted = result.returncode != 0
    if kit_out is None:
        kit_out = work / "kit"
        subprocess.run([sys.executable, "-m", "autograder", "grade", lab.id, str(batch),
                        "--out", str(kit_out), "--quiet", "--seed", "hostile",
                        "--cell-timeout", "15", "--notebook-timeout", "75"],
                       cwd=ROOT, check=True, capture_output=True)
    kit = {row["student_id"]: row for row in csv.DictReader(open(kit_out / "grades.csv"))}
    print("| case | what | plain nbgrader 0.9.6 | this kit |")
    print("| --- | --- | --- | --- |")
    for case in written:
        got = kit.get(case.student_id)
        kit_text = f"{float(got['score']):g}/10, {got['status'][:50]}" if got else ""
        print(f"| {case.name} | {case.what} | {plain.get(case.student_id, 'no row')} | {kit_text} |")
    print(f"\nplain `nbgrader autograde` exit status: {result.returncode}"
          f"{' (the batch reported failures)' if batch_aborted else ''}")
    shutil.rmtree(work, ignore_errors=True)


def _plain_scores(course: Path, lab, students: list[str]) -> dict[str, str]:
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            try:
                notebook = gradebook.find_submission_notebook(lab.notebook, lab.id, student)
            except MissingEntry:
                scores[student] = "no grade (skipped or aborted)"
                continue
            parts = [grade.score for grade in notebook.grades]
            if any(grade.needs_manual_grade for grade in notebook.grades):
                scores[student] = f"{sum(p or 0 for p in parts):g}/10, needs manual grade"
            else:
                scores[student] = f"{sum(p or 0 for p in parts):g}/10"
    return scores


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
