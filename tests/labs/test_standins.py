"""Every lab's stand-ins (autograder/testkernel/standins.py): declared for its
exercises, real modules, self-contained once read, shipped without their words."""

from __future__ import annotations

import ast
import base64
import marshal
import subprocess
import sys
import types
from types import SimpleNamespace

import pytest

from autograder.labs import LABS
from autograder.testkernel import standins
from autograder.kernels.probe import StudentKernel, ship_code

STAND_INS = [(lab.id, name) for lab in LABS.values()
             for name in standins.sources(lab.folder)]


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.id)
def test_every_exercise_lists_the_other_exercises_it_may_call(lab):
    calls = standins.calls(lab.folder)
    assert list(calls) == list(lab.exercises), f"{lab.id}/standins.toml"
    for exercise, names in calls.items():
        assert exercise not in names
        assert set(names) <= set(lab.exercises) - {exercise}
        assert set(names) <= set(standins.sources(lab.folder))


@pytest.mark.parametrize("lab_id, name", STAND_INS)
def test_a_stand_in_defines_its_name_and_nothing_else_of_its_own(lab_id, name):
    folder = LABS[lab_id].folder
    stand_in = standins.define(folder, name)
    assert getattr(stand_in, "__name__", None) == name
    if "from ." not in (folder / "standins" / f"{name}.py").read_text():
        namespace: dict = {}
        exec(standins.sources(folder)[name], namespace)
        own = [key for key, value in namespace.items()
               if not key.startswith("__") and not isinstance(value, types.ModuleType)]
        assert own == [name]


@pytest.mark.parametrize("lab_id, name", STAND_INS)
def test_a_shipped_stand_in_runs_without_its_docstrings(lab_id, name):
    source = standins.sources(LABS[lab_id].folder)[name]
    docstrings = [ast.get_docstring(node, clean=False) for node in ast.walk(ast.parse(source))
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    docstrings = [text for text in docstrings if text]
    assert docstrings, "a stand-in says what it is in a docstring"
    code = marshal.loads(base64.b64decode(ship_code(source, f"<stand-in {name}>")))

    def strings(code):
        for const in code.co_consts:
            if isinstance(const, str):
                yield const
            elif isinstance(const, types.CodeType):
                yield from strings(const)

    assert not set(docstrings) & set(strings(code))
    namespace: dict = {}
    exec(code, namespace)
    assert name in namespace


def test_stand_ins_are_clean_modules(root):
    folders = sorted(str(path.relative_to(root)) for path in root.glob("solutions/*/standins"))
    assert len(folders) == len(LABS)
    # ruff's pyflakes rules (F), without the project's settings, which leave
    # solutions/ out: ruff is in the dev extra, pyflakes itself is not.
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated",
                             "--select", "F", *folders], cwd=root,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_part_is_put_in_place_of_its_import_without_its_docstring():
    folder = LABS["lab5"].folder
    source = standins.sources(folder)["Encoder"]
    assert "from ._provided_layers" not in source and "class PositionalEmbedding(" in source
    part = (folder / "standins" / "_provided_layers.py").read_text()
    assert ast.get_docstring(ast.parse(part)) not in source
    assert "_provided_layers" not in standins.sources(folder)


def test_the_probe_ships_the_stand_ins_of_the_exercise_under_test():
    kernel = SimpleNamespace(lab_id="lab4")
    shipped = StudentKernel.stand_ins_for(kernel, "EncoderLayer")
    assert list(shipped) == standins.calls(LABS["lab4"].folder)["EncoderLayer"]
    assert StudentKernel.stand_ins_for(kernel, "causal_mask") == {}
    assert StudentKernel.stand_ins_for(SimpleNamespace(lab_id="lab99"), "x") == {}


def _lab_folder(tmp_path, table: str, files=("softmax",)):
    (tmp_path / "standins").mkdir()
    for name in files:
        (tmp_path / "standins" / f"{name}.py").write_text(f"def {name}(x):\n    return x\n")
    (tmp_path / "standins.toml").write_text(table)
    return tmp_path


def test_an_exercise_calling_a_name_without_a_stand_in_is_refused(tmp_path):
    folder = _lab_folder(tmp_path, 'softmax = []\nattention = ["softmax", "dot_scores"]\n')
    with pytest.raises(ValueError, match=r"attention may call dot_scores, which has no "
                                         r"stand-in; add standins/dot_scores\.py"):
        standins.calls(folder)


def test_a_table_entry_that_is_not_a_list_of_names_is_refused(tmp_path):
    folder = _lab_folder(tmp_path, 'attention = "softmax"\n')
    with pytest.raises(ValueError, match="expected a list of exercise names"):
        standins.calls(folder)
