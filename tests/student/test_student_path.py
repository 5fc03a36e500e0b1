"""A student's whole path, as Colab runs it: from the published repository to a grade.

1. The instructor publishes the student repository (`publish --git`) to a
   local git repository and points the course at it (``file://``), so that
   the labs' first cell installs labkit from it at the course's tag.
2. For each lab, the student opens the published notebook in a fresh
   Colab-like kernel: Keras, a backend, NumPy and Matplotlib, `google.colab`
   imported at start, and no labkit (tests/studentenv.py, ``overlay_env``).
   The first cell really installs labkit from that repository at the tag.
3. The student writes the solutions in the answer cells and runs every cell:
   none raises, every visible check prints its ✓, and the last cell ("Ready
   to submit?") says every exercise passes.
4. The student downloads the notebook as Colab saves it (its metadata,
   widget state, the outputs of the run) and the instructor grades it with
   the kit's own grader: full marks.

`make test` runs it with the kit's own versions (an overlay of its
environment: seconds to make); `make test-compat` runs it again in an
environment built with Colab's versions (Python 3.13, TensorFlow 2.20, Keras
3.13.2, NumPy 2.1.3: tests/student/test_compat.py's row), labkit uninstalled first as
a fresh Colab runtime has none.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.publish.repository import publish
from autograder.labs import available_labs
from tests.conftest import run_cli
from tests.samples import _saved_by_colab
from tests.studentenv import built_env, overlay_env, run_notebook
from tests.verdicts import fill, solution_answers

pytestmark = pytest.mark.slow

REF = "v2026.11-test"

#: Appended to the student's run: where labkit was imported from, and whether
#: the kernel looked like Colab's.
WHERE_CELL = """import json, sys, labkit
print("STUDENT-PATH:", json.dumps({"labkit": labkit.__file__,
                                    "colab": "google.colab" in sys.modules}))"""


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed: pip installs labkit from a git repository")
    repo = tmp_path_factory.mktemp("student-path") / "course-labs"
    # pip needs a host in a file URL: file://localhost/<path>.
    return publish(repo, repository=f"file://localhost{repo}", ref=REF,
                   git=True)


#: Where the student's kernel runs: the kit's versions (make test), Colab's (make test-compat).
ENVIRONMENTS = [pytest.param("kit", id="kit-versions"),
                pytest.param("colab-2026-08", id="colab-2026-08", marks=pytest.mark.compat)]


def colab_runtime(kind: str, tmp_path: Path):
    """A Colab-like environment without labkit, and its folder."""
    if kind == "kit":
        env = overlay_env(tmp_path / "colab", colab=True)
    else:
        from tests.student.test_compat import ROWS

        row = next(row for row in ROWS if row.key == kind)
        env = built_env(row.key, row.python, list(row.requirements), colab=True)
        subprocess.run([str(env.python), "-m", "pip", "uninstall", "-q", "-y", "labkit"],
                       capture_output=True, check=True)
    return env, Path(env.python).parent.parent


def saved_by_colab(notebook, name: str):
    """``notebook`` as Colab's File > Download > .ipynb writes it after a run:
    its colab and accelerator metadata, a GPU runtime's widget state, each
    cell's id and execution info, and the outputs kept."""
    notebook = _saved_by_colab(notebook, name)
    notebook.metadata["gpuClass"] = "standard"
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "3f1c": {"model_module": "@jupyter-widgets/controls", "model_name": "HTMLModel",
                 "model_module_version": "1.5.0", "state": {"value": "100%"}}}}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.metadata["executionInfo"] = {"status": "ok", "elapsed": 412,
                                              "user_tz": -60, "timestamp": 1764115200000}
            cell.metadata["outputId"] = "a1b2c3d4-0000-4000-8000-000000000000"
    return notebook


def _printed(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", []))


#: `make test` walks the first lab's path with the kit's versions (about 30 s a
#: lab); `make test-compat` walks every lab's, with the kit's and Colab's.
IN_MAKE_TEST = "lab1"


def _paths():
    for lab in available_labs():
        for runtime in ENVIRONMENTS:
            marks = list(runtime.marks)
            if lab.id != IN_MAKE_TEST and not marks:
                marks.append(pytest.mark.compat)
            yield pytest.param(lab, runtime.values[0], marks=marks,
                               id=f"{runtime.id}-{lab.id}")


@pytest.mark.parametrize("lab, runtime", list(_paths()))
def test_a_student_installs_runs_checks_submits_and_gets_full_marks(lab, runtime, published,
                                                                    tmp_path):
    opened = nbformat.read(published.dest / "labs" / lab.id / f"{lab.notebook}.ipynb", 4)
    setup = next(cell for cell in opened.cells if cell.cell_type == "code")
    assert f"@{REF}#subdirectory=student" in setup.source and "file://" in setup.source

    colab, folder = colab_runtime(runtime, tmp_path)
    student = fill(opened, solution_answers(lab.id))
    student.cells.append(nbformat.v4.new_code_cell(WHERE_CELL))
    ran, errors = run_notebook(student, colab, timeout=600)
    assert errors == [], f"{lab.id}: cells raised in the Colab-like kernel:\n" + "\n".join(errors)

    where = json.loads(_printed(ran.cells[-1]).split("STUDENT-PATH:", 1)[1])
    assert where["colab"], "the kernel did not look like Colab's: the install was not tried"
    assert Path(where["labkit"]).resolve().is_relative_to(folder.resolve()), (
        f"labkit came from {where['labkit']}, not installed by the first cell into the "
        "Colab-like environment")
    for exercise in lab.exercises:
        check = next(cell for cell in ran.cells
                     if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_{exercise}")
        assert "✓" in _printed(check), f"{lab.id}: the check of {exercise} printed no ✓"
    ready = [cell for cell in ran.cells
             if cell.metadata.get("nbgrader", {}).get("grade_id") == "ready_to_submit"]
    assert ready, f"{lab.id}: the published notebook has no 'Ready to submit?' cell"
    summary = _printed(ready[0])
    for exercise in lab.exercises:
        assert f"✓ {exercise}: passed" in summary, summary
    count = len(lab.exercises)
    assert f"{count} of {count} exercises pass their checks." in summary, summary
    assert "How to submit: " in summary, summary

    submissions = tmp_path / "submissions"
    submissions.mkdir()
    name = f"Copy of {lab.notebook}.ipynb"
    nbformat.write(saved_by_colab(ran, name), submissions / name)
    out = tmp_path / "out"
    result = run_cli("grade", lab.id, str(submissions), "--out", str(out), "--quiet",
                     "--seed", "student-path")
    assert result.returncode == 0, result.stderr[-2000:]
    row = next(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
    assert row["status"] == "graded", row
    assert float(row["score"]) == float(row["max_score"]) > 0, row
