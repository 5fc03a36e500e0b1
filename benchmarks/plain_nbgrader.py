"""Plain nbgrader 0.9, as an instructor would run it without this kit.

Shared by the benchmarks that compare with it (grading_speed.py,
plain_nbgrader_hostile.py): a course folder with the lab's source notebook,
`nbgrader generate_assignment`, submissions in submitted/<student>/<lab>/,
`nbgrader autograde` with its default preprocessors, and the scores read
back from its gradebook.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.grader.source import build_source_notebook, write_notebook  # noqa: E402

NBGRADER = [str(Path(sys.executable).with_name("nbgrader"))]
# nbgrader shells out to `alembic`, which must be on PATH (the venv's bin).
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def make_course(lab, course: Path) -> Path:
    """A plain nbgrader course folder at ``course`` with ``lab`` generated."""
    write_notebook(build_source_notebook(lab), course / "source" / lab.id / f"{lab.notebook}.ipynb")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'plain'\n")
    subprocess.run(NBGRADER + ["generate_assignment", lab.id, "--force"], cwd=course,
                   check=True, capture_output=True, env=ENV)
    return course


def autograde(course: Path, lab, *args: str, timeout: float | None = None):
    """`nbgrader autograde LAB --force ARGS` in ``course``."""
    return subprocess.run(NBGRADER + ["autograde", lab.id, "--force", *args], cwd=course,
                          capture_output=True, text=True, env=ENV, timeout=timeout)


def grades(course: Path, lab, students: list[str]) -> dict[str, tuple[float, bool] | None]:
    """{student: (total score, needs manual grading)}, None where nbgrader kept no grade."""
    from nbgrader.api import Gradebook, MissingEntry

    found: dict[str, tuple[float, bool] | None] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            try:
                notebook = gradebook.find_submission_notebook(lab.notebook, lab.id, student)
            except MissingEntry:
                found[student] = None
                continue
            found[student] = (sum(grade.score or 0 for grade in notebook.grades),
                              any(grade.needs_manual_grade for grade in notebook.grades))
    return found
