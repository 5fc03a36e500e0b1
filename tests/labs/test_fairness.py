"""What is graded is taught: static checks of every lab's source.

The verdict suite (tests/labs/test_verdicts.py) shows on graded notebooks that
correct answers pass every visible check and that mistakes fail theirs. These
tests read the sources and keep the promises that can be read there:

- every tests cell says, in the comment a student sees, which exercise and
  property it grades and for how many points (the same as nbgrader's);
- every property graded in a cell of its own (`test_<exercise>__<property>`)
  is stated in that exercise's own text (its markdown and its stub);
- a visible check calls no other exercise of the student's, so that a wrong
  answer elsewhere cannot make it fail (the hint would point at the wrong
  exercise);
- a visible check does not end with an expression whose value Jupyter would
  echo as a whole array under the ✓ lines.
"""

from __future__ import annotations

import ast
import re

import pytest

from autograder.labs import Lab, available_labs
from autograder.grader.source import build_source_notebook

#: property of a `test_<exercise>__<property>` cell -> the words (any of them)
#: that the exercise's own text must contain to state it.
PROPERTY_WORDS = {
    "config": ("get_config",),
    "validation": ("ValueError",),
    "masks": ("mask",),
    "mask": ("mask", "compute_mask"),
    "padding": ("padding",),
    "dropout": ("dropout",),
    "training": ("training",),
    "causal": ("causal", "look-ahead"),
    "finished": ("finished", "end_id"),
    "weights": ("weight",),
    "length": ("max_length",),
    "odd_depth": ("odd",),
    "dtype": ("float32",),
    "start": ("start",),
    "cache": ("cache",),
    "sampling": ("sampling", "temperature"),
    "broadcast": ("broadcast",),
    "overflow": ("overflow",),
    "masked_rows": ("all masked", "fully masked"),
    "differentiable": ("differentiable",),
}

#: (lab, exercise) -> other exercises its visible check may call, and why.
#: lab2's MultiHeadAttention check calls split_heads and merge_heads only to
#: add "fix them first" to a failure's hint; pass or fail never depends on them.
ATTRIBUTION_ONLY = {("lab2", "MultiHeadAttention"): {"split_heads", "merge_heads"}}

LABS = available_labs()


def _cells(lab: Lab):
    return build_source_notebook(lab).cells


def _grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "") or ""


def _check_cells(lab: Lab):
    """(grade id, source) of each visible check cell."""
    for cell in _cells(lab):
        grade_id = _grade_id(cell)
        if cell.cell_type == "code" and grade_id.startswith("check_"):
            yield grade_id, cell.source


def _exercise_texts(lab: Lab) -> dict[str, str]:
    """{exercise: its markdown since the previous exercise, plus its stub}."""
    texts, pending = {}, []
    for cell in _cells(lab):
        grade_id = _grade_id(cell)
        if cell.cell_type == "markdown":
            pending.append(cell.source)
        elif grade_id in lab.exercises:
            texts[grade_id] = "\n".join(pending + [cell.source])
            pending = []
    return texts


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_every_tests_cell_says_what_it_grades_and_its_points(lab):
    wrong = []
    for cell in _cells(lab):
        meta = cell.metadata.get("nbgrader", {})
        grade_id = _grade_id(cell)
        if not (meta.get("grade") and grade_id.startswith("test_")):
            continue
        exercise = grade_id.removeprefix("test_").split("__")[0]
        comment = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        if f"`{exercise}`" not in comment:
            wrong.append(f"{grade_id}: its comment does not name `{exercise}`")
        if "__" in grade_id:
            points = float(meta["points"])
            stated = re.search(r"\(([\d.]+) points?\)", comment)
            if not stated or float(stated.group(1)) != points:
                wrong.append(f"{grade_id}: its comment does not say '({points:g} points)'")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_every_separately_graded_property_is_stated_in_its_exercise(lab):
    texts = _exercise_texts(lab)
    wrong = []
    for cell in _cells(lab):
        grade_id = _grade_id(cell)
        if not grade_id.startswith("test_") or "__" not in grade_id:
            continue
        exercise, prop = grade_id.removeprefix("test_").split("__", 1)
        words = PROPERTY_WORDS.get(prop)
        if words is None:
            wrong.append(f"{grade_id}: add {prop!r} to PROPERTY_WORDS with the words that state it")
        elif not any(word in texts.get(exercise, "") for word in words):
            wrong.append(f"{grade_id}: the text of `{exercise}` never says {' or '.join(words)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_visible_checks_call_no_other_exercise(lab):
    wrong = []
    for grade_id, source in _check_cells(lab):
        own = grade_id.removeprefix("check_")
        called = {node.func.id for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        others = called & set(lab.exercises) - {own} - ATTRIBUTION_ONLY.get((lab.id, own), set())
        if others:
            wrong.append(f"{grade_id} calls {sorted(others)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_visible_checks_do_not_echo_arrays(lab):
    wrong = []
    for grade_id, source in _check_cells(lab):
        body = ast.parse(source).body
        last = body[-1] if body else None
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
            name = ast.unparse(last.value.func)
            if name.endswith(("check_close", "check_shape", "check_tuple", "to_numpy")):
                wrong.append(f"{grade_id} ends with {name}(...), whose value Jupyter shows: "
                             "assign it (`_ = ...`)")
    assert not wrong, "\n".join(wrong)
