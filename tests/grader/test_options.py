"""The options of a grading run: one object, its defaults the kit's limits, checked once."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from autograder import limits
from autograder.cli import build_parser, grading_options
from autograder.grader.options import GradingOptions, parse_shard, seed_check


def test_the_defaults_are_the_kits_limits_and_the_command_lines():
    options = GradingOptions()
    assert (options.cell_timeout, options.notebook_timeout) == (
        limits.CELL_TIMEOUT_S, limits.NOTEBOOK_TIMEOUT_S)
    args = build_parser().parse_args(["grade", "lab1", "in", "--out", "out"])
    assert grading_options(args) == options
    assert options.workers >= 1 and GradingOptions(jobs=3).workers == 3
    with pytest.raises(FrozenInstanceError):
        options.jobs = 2    # built once, handed on unchanged


def test_the_command_line_hands_on_every_option():
    args = build_parser().parse_args(
        ["grade", "lab1", "in", "--out", "out", "--db", "sqlite:///g.db", "--course-dir", "c",
         "--seed", "s", "--cell-timeout", "7", "--notebook-timeout", "70", "--jobs", "2",
         "--regrade", "--shard", "2/3", "--kernels", "fresh", "--run-demos", "--run-checks", "--quiet"])
    assert grading_options(args) == GradingOptions(
        jobs=2, cell_timeout=7, notebook_timeout=70, seed="s", regrade=True, run_demos=True,
        run_checks=True, kernels="fresh", db_url="sqlite:///g.db", course_dir=Path("c"), shard=(2, 3),
        progress=False)
    merge = build_parser().parse_args(["merge", "lab1", "a", "b", "--out", "o", "--db", "x://"])
    assert grading_options(merge) == GradingOptions(db_url="x://")


@pytest.mark.parametrize("given,message", [
    ({"jobs": 0}, "--jobs 0 is not a number of submissions"),
    ({"jobs": -2}, "give 1 or more"),
    ({"cell_timeout": -1}, "--cell-timeout -1"),
    ({"notebook_timeout": 0}, "--notebook-timeout 0"),
    ({"kernels": "warm"}, "fork (the default) or fresh"),
    ({"shard": "3/2", "seed": "s"}, "not K/N with 1 <= K <= N"),
    ({"shard": (0, 2), "seed": "s"}, "not K/N with 1 <= K <= N"),
    ({"shard": "1/2"}, "--shard 1/2 needs --seed"),
])
def test_a_wrong_option_is_refused_saying_what_to_give(given, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GradingOptions(**given)


def test_a_shard_is_parsed_once_and_a_seed_is_kept_only_as_its_check():
    assert GradingOptions(shard=" 2 / 4 ", seed="s").shard == (2, 4) == parse_shard("2/4")
    check = seed_check("s", "lab1")
    assert check == seed_check("s", "lab1") != seed_check("s", "lab2")
    assert len(check) == 64    # a SHA-256, hex: nothing of the seed itself


def test_the_command_line_refuses_a_wrong_option_before_grading(tmp_path, capsys):
    from autograder.cli import main

    code = main(["grade", "lab1", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--jobs", "0"])
    assert code == 2 and "--jobs 0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_each_option_is_declared_once_and_the_flags_are_built_from_it():
    from dataclasses import fields

    from autograder.cli import build_parser, grading_options
    from autograder.grader.options import GradingOptions

    parser = build_parser()
    defaults = grading_options(parser.parse_args(["grade", "lab1", "subs", "--out", "o"]))
    # Every option has its flag, and the flags' defaults are the options' own.
    assert defaults == GradingOptions()
    grade_help = parser.parse_args(["grade", "lab1", "s", "--out", "o"])
    for item in fields(GradingOptions):
        assert item.metadata["flag"].startswith("--") and item.metadata["help"]
        assert hasattr(grade_help, item.name), item.name
    given = grading_options(parser.parse_args(
        ["grade", "lab1", "s", "--out", "o", "--quiet", "--no-similarity", "--only", "a,b",
         "--only", "c", "--course", "c.toml", "--jobs", "3", "--seed", "x"]))
    assert (given.progress, given.similarity, given.only, given.course_file, given.jobs,
            given.seed) == (False, False, ("a", "b", "c"), Path("c.toml"), 3, "x")
    merged = grading_options(parser.parse_args(["merge", "lab1", "a", "b", "--out", "o",
                                                "--db", "sqlite:///x.db"]))
    assert merged.db_url == "sqlite:///x.db"
