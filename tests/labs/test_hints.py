"""Every lab's feedback hints (solutions/<lab>/hints.toml), as the grader reads them."""

from __future__ import annotations

import pytest

from autograder.labs import LABS, Lab


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.id)
def test_every_exercise_has_a_one_sentence_hint(lab):
    hints = lab.hints()
    assert list(hints) == list(lab.exercises), f"{lab.hints_path}"
    for hint in hints.values():
        assert hint.endswith(".") and hint.count(". ") == 0 and "\n" not in hint, hint


def test_a_lab_without_a_hints_file_has_no_hints(tmp_path, monkeypatch):
    monkeypatch.setattr(Lab, "hints_path", property(lambda lab: tmp_path / "hints.toml"))
    assert LABS["lab1"].hints() == {}
