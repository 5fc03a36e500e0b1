"""Which skipped cells (demonstrations, visible checks) a submission still
needs run: autograder.grader.cellnames."""

from __future__ import annotations

from autograder.grader.cellnames import cells_needed, global_binds, global_reads

SKIPPED = {"check_a", "demo_b", "check_c", "ready"}


def _cells(*own_cells: str) -> list[tuple[str, str, str]]:
    """A small lab: set-up, answer a, its check (a helper and a layer), a
    demonstration, answer c, its check (reading the first check's helper),
    the student's own cells, the last tests cell, a "ready" cell."""
    cells = [
        ("setup", "import numpy as np\nSIZE = 4\n", "provided"),
        ("a", "def a(x):\n    return x + 1\n", "own"),
        ("check_a", "def helper(x):\n    return np.asarray(x) * 2\nlayer = a(SIZE)\n",
         "provided"),
        ("test_a", "", "tests"),
        ("demo_b", "table = helper([1, 2])\n", "provided"),
        ("c", "def c(x):\n    return x - 1\n", "own"),
        ("check_c", "doubled = helper(c(SIZE))\n", "provided"),
    ]
    return cells + [(f"own{index}", source, "own") for index, source in enumerate(own_cells)] + [
        ("test_c", "", "tests"), ("ready", "import helpers\nhelpers.ready()\n", "provided")]


def test_answers_that_read_only_their_own_names_need_nothing():
    assert cells_needed(_cells(), SKIPPED) == []
    assert cells_needed(_cells("print(a(SIZE), np.ones(2))"), SKIPPED) == []


def test_a_name_a_check_defines_read_by_the_students_cell_runs_that_check():
    assert cells_needed(_cells("print(layer)"), SKIPPED) == ["check_a"]
    # Read from a function: the hidden tests call it after every cell above them.
    assert cells_needed(_cells("def mine(x):\n    return helper(x)\n"), SKIPPED) == ["check_a"]


def test_a_needed_cell_brings_the_skipped_cells_it_reads_from():
    # check_c reads helper, bound last in check_a: both run.
    assert cells_needed(_cells("print(doubled)"), SKIPPED) == ["check_a", "check_c"]
    assert cells_needed(_cells("print(table)"), SKIPPED) == ["check_a", "demo_b"]


def test_a_top_level_read_needs_only_the_binding_before_it():
    # The student binds the name first: the check's later binding does not matter ...
    assert cells_needed(_cells("layer = 3\nprint(layer)"), SKIPPED) == []
    # ... nor does a skipped cell after the last tests cell, for their functions.
    assert cells_needed(_cells("def mine():\n    return helpers\n"), SKIPPED) == []
    # A function's reads count wherever the skipped cell stands before the last tests.
    assert cells_needed([("f", "def f():\n    return later\n", "own"),
                         ("check_f", "later = 1\n", "provided"), ("test_f", "", "tests")],
                        {"check_f"}) == ["check_f"]


def test_a_cell_that_does_not_parse_reads_every_word_in_it():
    # An IPython magic: not Python, so every word counts as read.
    assert cells_needed(_cells("%timeit helper(3)"), SKIPPED) == ["check_a"]
    assert global_binds("%timeit helper(3)") == set()
    assert global_reads("!echo layer") >= {"echo", "layer"}


def test_reads_and_binds_of_a_cell():
    assert global_reads("def f():\n    return shown + 1\n") == {"shown"}
    assert global_reads("def f(shown):\n    return shown + 1\n") == set()
    assert global_binds("for shown in range(3):\n    pass\n") == {"shown"}
    assert global_binds("def f():\n    global kept\n    kept = 1\n") == {"f", "kept"}
    assert global_binds("import numpy as np\nfrom math import pi\n") == {"np", "pi"}


def test_a_hostile_cell_is_read_as_words_not_a_crash():
    """The grader reads every submitted cell's names: nesting past the parser's
    limits, or a null byte, is a cell that does not parse (read as words)."""
    deep = "x = " + "(" * 100_000 + "layer" + ")" * 100_000
    assert "layer" in global_reads(deep) and global_binds(deep) == set()
    assert global_reads("print(layer)\0") >= {"print", "layer"}
    assert global_reads("[" * 300 + "layer" + "]" * 300) >= {"layer"}
