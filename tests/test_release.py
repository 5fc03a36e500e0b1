"""Student notebooks are generated from solutions/ and carry nothing secret."""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap

import nbformat
import pytest

from autograder import release
from autograder.labs import Lab, available_labs
from tests.conftest import ROOT

SECRET_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS",
                  "END HIDDEN TESTS", "autograder.references", "autograder.testing")


def _solution_lines(lab: Lab) -> set[str]:
    """Substantial code lines inside the solution regions of the source."""
    text = lab.source_path.read_text()
    lines = set()
    for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, re.S):
        for line in block.splitlines():
            line = line.strip()
            if len(line) > 25 and not line.startswith("#"):
                lines.add(line)
    return lines


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_committed_notebook_matches_a_fresh_release(lab, tmp_path):
    fresh = release.release(lab, tmp_path / "fresh.ipynb")
    committed = lab.student_path.read_text()
    assert fresh.read_text() == committed, (
        f"{lab.student_path} drifted from {lab.source_path}: run `make labs` and commit."
    )


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_student_notebook_has_no_outputs_solutions_or_hidden_tests(lab):
    notebook = json.loads(lab.student_path.read_text())
    text = "".join("".join(cell["source"]) for cell in notebook["cells"])
    for marker in SECRET_MARKERS:
        assert marker not in text, f"{marker!r} leaked into {lab.student_path}"
    leaked = [line for line in _solution_lines(lab) if line in text]
    assert not leaked, f"solution lines leaked into the student notebook: {leaked[:3]}"
    for cell in notebook["cells"]:
        assert not cell.get("outputs"), "the student notebook stores outputs"
        if cell["cell_type"] == "code":
            ast.parse(cell["source"] if isinstance(cell["source"], str)
                      else "".join(cell["source"]))


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_first_code_cell_sets_up_colab_only(lab):
    notebook = nbformat.read(lab.student_path, as_version=4)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert '"google.colab" in sys.modules' in first.source
    assert "labkit @ git+" in first.source
    # Outside Colab the cell does nothing: running it here installs nothing.
    namespace: dict = {}
    exec(compile(first.source, "colab_setup", "exec"), namespace)


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_each_exercise_has_a_solution_stub_a_check_and_a_tests_cell(lab):
    notebook = nbformat.read(lab.student_path, as_version=4)
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in notebook.cells]
    for exercise in lab.exercises:
        position = ids.index(exercise)
        stub = notebook.cells[position].source
        assert "raise NotImplementedError()" in stub
        assert f"test_{exercise}" in ids[position:], f"no tests cell after {exercise}"


def test_a_code_cell_without_a_marker_is_a_clear_error(tmp_path, monkeypatch):
    source = tmp_path / "solutions" / "lab1" / "lab1_attention.py"
    source.parent.mkdir(parents=True)
    shutil.copy(ROOT / "course.toml", tmp_path / "course.toml")
    source.write_text(textwrap.dedent('''\
        # %% [markdown]
        # # A lab

        # %%
        x = 1
        '''))
    monkeypatch.setattr("autograder.labs.KIT_ROOT", tmp_path)
    lab = Lab("lab1", "lab1_attention", "t", ("dot_scores",))
    with pytest.raises(release.SourceError, match="every code cell"):
        release.build_source_notebook(lab)


def test_a_missing_tests_cell_is_a_clear_error(tmp_path, monkeypatch):
    source = tmp_path / "solutions" / "lab1" / "lab1_attention.py"
    source.parent.mkdir(parents=True)
    shutil.copy(ROOT / "course.toml", tmp_path / "course.toml")
    source.write_text(textwrap.dedent('''\
        # %% nbgrader="solution" grade_id="dot_scores"
        def dot_scores(query, keys):
            ### BEGIN SOLUTION
            return keys @ query
            ### END SOLUTION
        '''))
    monkeypatch.setattr("autograder.labs.KIT_ROOT", tmp_path)
    lab = Lab("lab1", "lab1_attention", "t", ("dot_scores",))
    with pytest.raises(release.SourceError, match="no tests cell"):
        release.build_source_notebook(lab)
