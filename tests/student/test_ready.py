""""Ready to submit?": every lab's last cell, and `python -m labkit check NOTEBOOK`.

The release appends to every lab a locked cell, skipped by the grader, that
calls `labkit.ready("<lab>")`: the visible checks again (labkit carries them,
student/labkit/labs/<lab>.json, written by `make labs`) and how to submit.

Fast: the carried checks are those of a fresh release, every lab (lab0 too)
has a check cell per exercise and ends with the cell; the report's lines for
each way a check can end, on a namespace made here; the CLI's errors. Slow
(notebooks run in a kernel): on every lab, the solution passes every check,
the untouched notebook has nothing answered, one known mistake fails exactly
its exercise with the hint of its own check cell; the grader skips the cell;
the CLI's exit codes on real notebooks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib

import nbformat
import pytest

from autograder.grader import release, source
from autograder.labs import LABS, Lab, available_labs, read_lab
from labkit import checks, readiness
from labkit.__main__ import main as labkit_main
from tests.conftest import ROOT, run_cli

LAB_PARAMS = [pytest.param(lab, id=lab.id) for lab in available_labs()]

#: The labs whose notebooks `make test` runs top to bottom through `labkit check`
#: (the untouched notebook, a known mistake): the others' run with every lab's
#: notebooks in `make test-warnings` (marker notebooks), where the suite's time allows.
IN_MAKE_TEST = ("lab1", "lab4")


def _notebook_params(lab_ids) -> list:
    return [pytest.param(LABS[lab_id], id=lab_id,
                         marks=() if lab_id in IN_MAKE_TEST else pytest.mark.notebooks)
            for lab_id in lab_ids]


# -- the release ---------------------------------------------------------------------------------
@pytest.mark.parametrize("lab", LAB_PARAMS)
def test_labkit_carries_the_checks_of_a_fresh_release(lab):
    committed = release.checks_path(lab)
    assert committed.exists(), f"{committed} is missing: run `make labs` and commit."
    assert committed.read_text(encoding="utf-8") == release.checks_text(lab), (
        f"{committed} drifted from {lab.source_path}: run `make labs` and commit.")


@pytest.mark.parametrize("lab", LAB_PARAMS)
def test_each_exercise_has_its_locked_check_after_its_answer(lab):
    """What labkit carries is, exercise by exercise, the student notebook's check cell."""
    notebook = nbformat.read(lab.student_path, as_version=4)
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in notebook.cells]
    carried = json.loads(release.checks_path(lab).read_text(encoding="utf-8"))
    assert [exercise["name"] for exercise in carried["exercises"]] == list(lab.exercises)
    for exercise in carried["exercises"]:
        check = notebook.cells[ids.index(f"check_{exercise['name']}")]
        assert ids.index(f"check_{exercise['name']}") > ids.index(exercise["name"])
        assert check.metadata["nbgrader"]["locked"] and check.source == exercise["check"]
    with open(ROOT / "course.toml", "rb") as handle:
        wanted = " ".join(tomllib.load(handle)["submit"]["instructions"].split())
    assert carried["submit"] == wanted


@pytest.mark.parametrize("lab", LAB_PARAMS)
def test_every_lab_ends_with_the_ready_cell_skipped_when_grading(lab):
    notebook = nbformat.read(lab.student_path, as_version=4)
    heading, cell = notebook.cells[-2:]
    assert heading.cell_type == "markdown" and heading.source.startswith("## Ready to submit?")
    assert "necessary, not sufficient" in heading.source
    assert cell.metadata["nbgrader"]["grade_id"] == "ready_to_submit"
    assert cell.metadata["nbgrader"]["locked"] and not cell.metadata["nbgrader"]["grade"]
    assert f'labkit.ready("{lab.id}")' in cell.source
    assert "ready_to_submit" in source.skipped_when_grading(lab)


def _kit_with(tmp_path, monkeypatch, folder_files: dict[str, str]) -> Lab:
    """A kit in tmp_path with one lab folder solutions/lab0/ holding ``folder_files``
    (tests/lab0's files when none are given)."""
    folder = tmp_path / "solutions" / "lab0"
    if folder_files:
        folder.mkdir(parents=True)
    else:
        shutil.copytree(ROOT / "tests" / "lab0", folder)
    shutil.copy(ROOT / "course.toml", tmp_path / "course.toml")
    for name, text in folder_files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.setattr("autograder.labs.KIT_ROOT", tmp_path)
    return read_lab(folder)


def test_lab0_gets_the_ready_cell_and_its_checks_from_its_folder_alone(tmp_path, monkeypatch):
    lab = _kit_with(tmp_path, monkeypatch, {})
    release.release(lab)
    data = json.loads((tmp_path / "student" / "labkit" / "labs" / "lab0.json").read_text())
    assert [exercise["name"] for exercise in data["exercises"]] == ["scale", "Doubler"]
    text = lab.source_path.read_text(encoding="utf-8")
    for exercise in data["exercises"]:
        marker = f'# %% nbgrader="locked" grade_id="check_{exercise["name"]}"\n'
        assert marker + exercise["check"].strip() in text
    last = nbformat.read(lab.student_path, as_version=4).cells[-1]
    assert last.source.endswith('labkit.ready("lab0")')


LAB_TOML = 'title = "t"\nnotebook = "lab0_t"\nexercises = ["scale"]\n'
ANSWER = '''\
    # %% nbgrader="solution" grade_id="scale"
    def scale(x):
        ### BEGIN SOLUTION
        return 2 * x
        ### END SOLUTION

    '''
TESTS = '''\
    # %% nbgrader="tests" grade_id="test_scale" points=1
    ### BEGIN HIDDEN TESTS
    assert scale(1) == 2
    ### END HIDDEN TESTS
    '''


def test_an_exercise_without_a_check_cell_is_a_clear_error(tmp_path, monkeypatch):
    lab = _kit_with(tmp_path, monkeypatch, {"lab.toml": LAB_TOML, "lab0_t.py": ANSWER + TESTS})
    with pytest.raises(source.SourceError, match='grade_id="check_scale"'):
        source.visible_checks(lab)


def test_a_source_may_not_name_a_cell_ready_to_submit(tmp_path, monkeypatch):
    mine = '    # %% nbgrader="locked" grade_id="ready_to_submit"\n    print(1)\n\n'
    lab = _kit_with(tmp_path, monkeypatch, {"lab.toml": LAB_TOML,
                                            "lab0_t.py": ANSWER + mine + TESTS})
    with pytest.raises(source.SourceError, match="the release's own last cell"):
        source.build_source_notebook(lab)


def test_submit_instructions_default_and_a_bad_value(tmp_path, monkeypatch):
    from autograder import labs

    monkeypatch.setattr("autograder.labs.KIT_ROOT", tmp_path)
    (tmp_path / "course.toml").write_text('[public]\nrepository = "x"\nref = "y"\n')
    assert labs.submit_instructions() == labs.DEFAULT_SUBMIT
    (tmp_path / "course.toml").write_text('[public]\nrepository = "x"\nref = "y"\n'
                                          '[submit]\ninstructions = ""\n')
    with pytest.raises(labs.LabDefinitionError, match=r"\[submit\] instructions"):
        labs.submit_instructions()


# -- the report, on a namespace made here ---------------------------------------------------------
def _namespace() -> dict:
    """A notebook's variables: answers in each state a check can meet."""
    scope = {"checks": checks}
    exec(textwrap.dedent('''
        def good(x):
            return 2 * x
        def wrong(x):
            return 3 * x
        def stub(x):
            # YOUR CODE HERE
            raise NotImplementedError()
        def caller(x):
            return stub(x) + 1
        class Layer:
            def __init__(self):
                raise NotImplementedError()
        def typo(x):
            return y
        '''), scope)
    return scope


def _check(name: str, hint: str = "double it") -> dict:
    return {"name": name, "check": f"result = {name}(1)\n"
                                   f"checks.check_close(result, 2, '{name}(1)', hint={hint!r})"}


def test_each_way_a_check_ends_gets_its_line(capsys):
    scope = _namespace()
    exercises = [_check("good"), _check("wrong"), _check("stub"), _check("caller"),
                 {"name": "Layer", "check": "Layer()"}, _check("typo"), _check("absent"),
                 {"name": "good", "check": "checks.check_close(good(1), undefined_here, 'x')"}]
    results = readiness.run_checks(exercises, scope)
    assert capsys.readouterr().out == "", "the checks' own ✓ lines are not repeated"
    lines = [(result.line, result.hint) for result in results]
    assert lines[0] == ("✓ good: passed", "")
    assert lines[1][0].startswith("✗ wrong: wrong(1)") and lines[1][1] == "double it"
    assert lines[2] == ("… stub: not answered yet", "")
    assert lines[3] == ("… caller: waits for `stub`, not answered yet", "")
    assert lines[4] == ("… Layer: not answered yet", "")
    assert lines[5][0] == "✗ typo: the check raised NameError: name 'y' is not defined"
    assert "run the check cell below `typo`" in lines[5][1]
    assert lines[6][0].startswith("… absent: not answered yet")
    assert lines[7][0].startswith("✗ good: the check raised NameError")
    assert "run every cell above first" in lines[7][1]
    assert [result.status for result in results].count(readiness.PASSED) == 1
    assert "result" not in scope, "a check's assignment leaked into the notebook"


def test_a_stub_behind_a_checks_own_error_is_not_answered_yet():
    """Some checks catch what the answer raises and say so in an AssertionError."""
    wrapping = ("try:\n    {name}(1)\nexcept Exception as error:\n"
                "    raise AssertionError(f'{name}(1) raised {{type(error).__name__}}')\n")
    results = readiness.run_checks([{"name": name, "check": wrapping.format(name=name)}
                                    for name in ("stub", "caller", "typo")], _namespace())
    assert [result.line for result in results] == [
        "… stub: not answered yet", "… caller: waits for `stub`, not answered yet",
        "✗ typo: typo(1) raised NameError"]


def test_the_report_counts_and_says_how_to_submit():
    results = readiness.run_checks([_check("good"), _check("wrong"), _check("stub")],
                                   _namespace())
    text = readiness.report(results, "Upload it to Moodle.")
    assert "1 of 3 exercises pass their checks (1 not answered yet)." in text
    assert "    Hint: double it" in text
    assert "necessary, not sufficient" in text and "hidden tests" in text
    assert text.endswith("How to submit: Upload it to Moodle.")


def test_ready_outside_a_notebook_and_an_unknown_lab_are_clear_errors():
    with pytest.raises(RuntimeError, match="python -m labkit check"):
        readiness.ready(available_labs()[0].id)
    with pytest.raises(ValueError, match=f"it knows {available_labs()[0].id}"):
        readiness.ready("lab999")


# -- the command line: bad inputs ---------------------------------------------------------------
def test_check_a_missing_file_a_non_notebook_and_a_notebook_of_no_lab(tmp_path, capsys):
    assert labkit_main(["check", str(tmp_path / "nope.ipynb")]) == 2
    assert "no file" in capsys.readouterr().err
    (tmp_path / "cut.ipynb").write_text('{"cells": [')
    assert labkit_main(["check", str(tmp_path / "cut.ipynb")]) == 2
    assert "is not a Jupyter notebook" in capsys.readouterr().err
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(notebook, tmp_path / "mine.ipynb")
    assert labkit_main(["check", str(tmp_path / "mine.ipynb")]) == 2
    assert "is not one of the course's labs" in capsys.readouterr().err


def test_check_without_nbclient_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nbclient", None)
    lab = available_labs()[0]
    assert labkit_main(["check", str(lab.student_path)]) == 2
    assert "pip install nbclient" in capsys.readouterr().err


# -- notebooks run in a kernel (slow) ----------------------------------------------------------
def _run(notebook):
    """``notebook`` executed in a fresh kernel, going on past errors; the ready cell's text."""
    from nbclient import NotebookClient

    NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True).execute()
    return "".join(output.get("text", "") for output in notebook.cells[-1].outputs)


def _lines(text: str) -> dict[str, str]:
    """{exercise: its line} of a ready cell's text."""
    found = {}
    for line in text.splitlines():
        if line[:2] in ("✓ ", "✗ ", "… "):
            found[line[2:].split(":")[0]] = line
    return found


def _solution(lab: Lab, answers: dict[str, str] | None = None):
    from tests.verdicts import fill, solution_notebook

    return fill(solution_notebook(lab.id), answers or {})


# Every lab's solution through its ready cell ("✓ name: passed" for each
# exercise, "N of N", how to submit): tests/student/test_student_path.py, in the
# Colab-like kernel where labkit is installed from the published repository.


@pytest.mark.slow
@pytest.mark.parametrize("lab", _notebook_params(available_lab.id for available_lab in
                                                 available_labs()))
def test_the_untouched_notebook_has_nothing_answered(lab):
    text = _run(nbformat.read(lab.student_path, as_version=4))
    assert _lines(text) == {name: f"… {name}: not answered yet" for name in lab.exercises}, text
    assert f"0 of {len(lab.exercises)} exercises pass their checks" in text


def _a_known_mistake(lab: Lab):
    """The first of the lab's verdict MISTAKES (solutions/<lab>/verdicts.py, each
    failing its visible check unless HIDDEN_ONLY says otherwise, as the verdict
    suite proves) in an exercise that no other one may call (standins.toml), so
    that it fails there and nowhere else."""
    from tests.verdicts import spec

    with open(lab.folder / "standins.toml", "rb") as handle:
        called = {name for names in tomllib.load(handle).values() for name in names}
    verdicts = spec(lab.id)
    return next(mistake for mistake in verdicts.MISTAKES
                if mistake.exercise not in called and mistake.name not in verdicts.HIDDEN_ONLY)


@pytest.mark.slow
@pytest.mark.parametrize("lab", _notebook_params(lab for lab in LABS
                                                 if (LABS[lab].folder / "verdicts.py").exists()))
def test_a_known_mistake_fails_its_exercise_only_with_its_checks_hint(lab):
    mistake = _a_known_mistake(lab)
    notebook = _solution(lab, {mistake.exercise: mistake.source})
    text = _run(notebook)
    lines = _lines(text)
    assert lines.pop(mistake.exercise).startswith(f"✗ {mistake.exercise}: "), (mistake.name, text)
    assert lines == {other: f"✓ {other}: passed" for other in lab.exercises
                     if other != mistake.exercise}, (mistake.name, text)
    # The exercise's own check cell failed in the same run: same message, same hint.
    check = next(cell for cell in notebook.cells
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_{mistake.exercise}")
    error = next(output for output in check.outputs if output.output_type == "error")
    assert error.ename == "AssertionError", (mistake.name, error.ename, error.evalue)
    message, _, hint = error.evalue.partition("\nHint: ")
    assert f"✗ {mistake.exercise}: {message.splitlines()[0]}" in text
    assert hint and f"    Hint: {' '.join(hint.split())}" in text, (mistake.name, text)
    count = len(lab.exercises)
    assert f"{count - 1} of {count} exercises pass their checks." in text


@pytest.mark.slow
def test_the_grader_skips_the_ready_cell(tmp_path):
    """Full marks with a ready cell that would raise, and the cell shows it was not run."""
    lab = LABS["lab1"] if "lab1" in LABS else available_labs()[0]
    last = lab.exercises[-1]
    from tests.verdicts import solution_answers

    breaking = solution_answers(lab.id)[last] + (
        "\nimport labkit\nlabkit.ready = lambda lab: 1 / 0  # the ready cell would raise\n")
    submissions = tmp_path / "in"
    submissions.mkdir()
    nbformat.write(_solution(lab), submissions / "plain.ipynb")
    nbformat.write(_solution(lab, {last: breaking}), submissions / "breaks.ipynb")
    out = tmp_path / "out"
    result = run_cli("grade", lab.id, str(submissions), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    import csv

    rows = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    assert rows["breaks"]["score"] == rows["plain"]["score"] == rows["plain"]["max_score"], rows
    graded = out / "nbgrader" / "autograded" / "breaks" / lab.id / f"{lab.notebook}.ipynb"
    cell = nbformat.read(graded, as_version=4).cells[-1]
    assert cell.metadata["nbgrader"]["grade_id"] == "ready_to_submit"
    assert [output.get("output_type") for output in cell.outputs] == ["stream"]
    assert "Not run by the grader" in cell.outputs[0]["text"]


def _labkit_check(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit", "check", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=dict(os.environ))


@pytest.mark.slow
def test_check_runs_the_notebook_with_its_own_check_cells(tmp_path):
    lab = available_labs()[0]
    solved = tmp_path / "solved.ipynb"
    nbformat.write(_solution(lab), solved)
    result = _labkit_check(solved)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _lines(result.stdout) == {name: f"✓ {name}: passed" for name in lab.exercises}
    assert "LABKIT-READY-RESULT" not in result.stdout
    # The notebook's own check cell, not the one labkit carries, is what runs.
    notebook = _solution(lab)
    first = lab.exercises[0]
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_{first}":
            cell.source = 'raise AssertionError("a check of this notebook\\nHint: its own hint")'
    nbformat.write(notebook, tmp_path / "own.ipynb")
    result = _labkit_check(tmp_path / "own.ipynb")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"✗ {first}: a check of this notebook\n    Hint: its own hint" in result.stdout
    untouched = _labkit_check(lab.student_path)
    assert untouched.returncode == 1, untouched.stdout + untouched.stderr
    assert _lines(untouched.stdout) == {name: f"… {name}: not answered yet"
                                        for name in lab.exercises}
