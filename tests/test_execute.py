"""Unit tests of the split Execute step (the full path is in test_grading_*)."""

from __future__ import annotations

import ast

from autograder.execute import TESTS_KERNEL_STARTUP, names_used


def test_the_test_kernel_startup_code_is_valid_python():
    tree = ast.parse(TESTS_KERNEL_STARTUP)
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert "construct_in_student_kernel" in defined


def test_names_used_finds_what_a_tests_cell_reads():
    source = "out = dot_scores(q, k)\nassert_close(out, reference.dot_scores(q, k), 'x')"
    assert {"dot_scores", "assert_close", "reference", "q", "k"} <= names_used(source)


def test_names_used_of_broken_code_is_empty():
    assert names_used("def (") == set()
