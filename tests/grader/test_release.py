"""Student notebooks are generated from solutions/ and carry nothing secret."""

from __future__ import annotations

import ast
import json
import shutil
import textwrap

import nbformat
import pytest

from autograder.grader import release, source
from autograder.grader.cellnames import global_binds, global_reads
from autograder.labs import Lab, available_labs
from autograder.publish import leaks
from tests.conftest import ROOT

@pytest.fixture(scope="module")
def scanner():
    """The leak scanner publish uses (autograder.publish.leaks): markers, solution
    lines, hidden-test, reference and stand-in lines, for every lab."""
    return leaks.Scanner(available_labs())


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_committed_notebook_matches_a_fresh_release(lab, tmp_path):
    fresh = release.release(lab, tmp_path / "fresh.ipynb")
    committed = lab.student_path.read_text()
    assert fresh.read_text() == committed, (
        f"{lab.student_path} drifted from {lab.source_path}: run `make labs` and commit."
    )


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_student_notebook_has_no_outputs_solutions_or_hidden_tests(lab, scanner):
    notebook = json.loads(lab.student_path.read_text())
    found = scanner.text_leaks(lab.student_path.name, lab.student_path.read_text())
    assert not found, "leaked into the student notebook: " + "; ".join(map(str, found[:3]))
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


def _lab_from_source(tmp_path, monkeypatch, text: str) -> Lab:
    """A one-lab kit in tmp_path whose lab1 source is `text`."""
    source = tmp_path / "solutions" / "lab1" / "lab1_attention.py"
    source.parent.mkdir(parents=True)
    shutil.copy(ROOT / "course.toml", tmp_path / "course.toml")
    source.write_text(textwrap.dedent(text))
    monkeypatch.setattr("autograder.labs.KIT_ROOT", tmp_path)
    return Lab("lab1", "lab1_attention", "t", ("dot_scores",))


def test_a_code_cell_without_a_marker_is_a_clear_error(tmp_path, monkeypatch):
    lab = _lab_from_source(tmp_path, monkeypatch, '''\
        # %% [markdown]
        # # A lab

        # %%
        x = 1
        ''')
    with pytest.raises(source.SourceError, match="every code cell"):
        source.build_source_notebook(lab)


def test_a_missing_tests_cell_is_a_clear_error(tmp_path, monkeypatch):
    lab = _lab_from_source(tmp_path, monkeypatch, '''\
        # %% nbgrader="solution" grade_id="dot_scores"
        def dot_scores(query, keys):
            ### BEGIN SOLUTION
            return keys @ query
            ### END SOLUTION
        ''')
    with pytest.raises(source.SourceError, match="no tests cell"):
        source.build_source_notebook(lab)


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_cells_the_grader_skips_are_provided_and_nothing_later_reads_them(lab):
    """A cell marked grading="skip", or an exercise's visible check, is not
    run when grading: it must be a provided cell, and no cell the grader
    does run may read a name whose last binding before it was in a skipped
    cell (it would be unbound, or hold another value, only when grading)."""
    notebook = source.build_source_notebook(lab)
    skipped = set(source.skipped_when_grading(lab))
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in cells:
        if cell.metadata.get(source.SKIP_KEY):
            assert cell.metadata["nbgrader"]["locked"] and not cell.metadata["nbgrader"]["grade"]
    bound_in: dict[str, str] = {}
    wrong = []
    for cell in cells:
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        if grade_id not in skipped:
            for name in sorted(global_reads(cell.source) - global_binds(cell.source)):
                if bound_in.get(name) in skipped:
                    wrong.append(f"{grade_id} reads {name!r}, last bound in {bound_in[name]}")
        for name in global_binds(cell.source):
            bound_in[name] = grade_id
    assert not wrong, wrong
    # The check itself sees such a read (a name used in a later cell's function).
    assert global_reads("def f():\n    return shown + 1\n") == {"shown"}
    assert global_binds("for shown in range(3):\n    pass\n") == {"shown"}


def test_only_a_provided_cell_may_be_skipped_when_grading(tmp_path, monkeypatch):
    lab = _lab_from_source(tmp_path, monkeypatch, '''\
        # %% nbgrader="solution" grade_id="dot_scores" grading="skip"
        def dot_scores(query, keys):
            ### BEGIN SOLUTION
            return keys @ query
            ### END SOLUTION
        ''')
    with pytest.raises(source.SourceError, match="only a provided cell"):
        source.build_source_notebook(lab)
