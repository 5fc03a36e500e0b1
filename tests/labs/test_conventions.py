"""The conventions every lab keeps, checked over each lab's source (solutions/),
so that a new lab cannot lapse from them unseen:

- no literal large-negative constant masks scores (``-1e9``, ``-1e30``) in an
  answer, a visible check or a stand-in: ``labkit.masking.large_negative(dtype)``
  is finite in every dtype (-1e9 rounds to -inf in float16), and a hint that
  writes -1e9 teaches the literal;
- the stored attention of labs 4-6 has one name, labs 4-5's
  ``last_attention_scores`` (CURRICULUM.md);
- visible checks of a config go through ``labkit.checks.check_config``, so a
  missing or failing ``get_config`` gets the same words in every lab.
"""

from __future__ import annotations

import ast
import re

import pytest

from autograder.grader.source import build_source_notebook
from autograder.labs import LABS
from autograder.testkernel import standins

SOURCE_LABS = [lab_id for lab_id in LABS if LABS[lab_id].folder.joinpath("lab.toml").is_file()]
#: A number below which a negative literal is a mask value, not a quantity.
LARGE = 1e4
#: A large negative literal written in text (a hint, a message).
LARGE_IN_TEXT = re.compile(r"-\s*1e\+?(?:[4-9]|\d\d)\b|-\s*10{4,}\b")


def _cells(lab_id: str, kind: str) -> list[tuple[str, str]]:
    """(grade id, source) of the lab's answer cells ("solution") or visible checks ("check")."""
    found = []
    for cell in build_source_notebook(LABS[lab_id]).cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        if kind == "solution" and meta.get("solution") and grade_id in LABS[lab_id].exercises:
            found.append((grade_id, cell.source))
        elif kind == "check" and grade_id.startswith("check_"):
            found.append((grade_id, cell.source))
    return found


def _code_of(lab_id: str) -> list[tuple[str, str]]:
    """Every answer, visible check and stand-in of the lab."""
    found = _cells(lab_id, "solution") + _cells(lab_id, "check")
    found += [(f"standins/{name}.py", source)
              for name, source in standins.sources(LABS[lab_id].folder).items()]
    return found


def large_negatives(source: str) -> list[str]:
    """The large negative literals in ``source``'s code and in its strings."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
                and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) \
                and not isinstance(node.operand.value, bool) and node.operand.value >= LARGE:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and LARGE_IN_TEXT.search(node.value):
            found.append(f"line {node.lineno}: {node.value[:80]!r}")
    return found


def test_the_large_negative_finder_finds_what_it_must():
    assert large_negatives("s = ops.where(m, s, -1e9)")
    assert large_negatives("s = ops.full_like(s, -1e30)")
    assert large_negatives('check(x, hint="use -1e9 for the masked keys")')
    assert not large_negatives("s = ops.where(m, s, large_negative(s.dtype))")
    assert not large_negatives("opt = Adam(epsilon=1e-9); x = -0.5; base = 10_000.0")


@pytest.mark.parametrize("lab_id", SOURCE_LABS)
def test_no_literal_large_negative_constant_masks_scores(lab_id):
    found = {name: hits for name, source in _code_of(lab_id)
             if (hits := large_negatives(source))}
    assert not found, (f"{lab_id}: literal large negative numbers (use "
                       f"labkit.masking.large_negative(scores.dtype)): {found}")


def test_the_stored_attention_has_one_name_across_labs_4_to_6():
    names = {}
    for lab_id in ("lab4", "lab5", "lab6"):
        text = LABS[lab_id].source_path.read_text(encoding="utf-8")
        for folder_file in LABS[lab_id].folder.rglob("*.py"):
            text += folder_file.read_text(encoding="utf-8")
        names[lab_id] = set(re.findall(r"\blast_attention_\w+", text))
    assert all(found == {"last_attention_scores"} for found in names.values()), names


def _config_calls(source: str) -> list[str]:
    return [f"line {node.lineno}: {ast.unparse(node)[:80]}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get_config", "from_config")]


@pytest.mark.parametrize("lab_id", SOURCE_LABS)
def test_visible_checks_of_a_config_go_through_check_config(lab_id):
    found = {grade_id: calls for grade_id, source in _cells(lab_id, "check")
             if (calls := _config_calls(source))}
    assert not found, (f"{lab_id}: visible checks that read get_config/from_config "
                       f"themselves (use checks.check_config): {found}")
    assert any("check_config" in source for _, source in _cells(lab_id, "check")) \
        or not any("get_config" in source for _, source in _cells(lab_id, "solution")), \
        f"{lab_id}: its layers have get_config but no visible check calls check_config"
