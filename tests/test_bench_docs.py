"""benchmarks/_docs.py: the benchmarks write their own tables into docs/.

The helper must replace exactly one marked block and nothing around it, refuse
a page whose markers are missing, repeated or swapped (leaving it untouched),
and every block a benchmark writes must have its markers in its page, so that
a benchmark run of many minutes does not fail at its last line.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys

import pytest

from tests.conftest import ROOT


def _load_docs_helper():
    spec = importlib.util.spec_from_file_location("_bench_docs", ROOT / "benchmarks" / "_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


docs = _load_docs_helper()

PAGE = """# Figures

Hand-written text before.

<!-- bench:speed:begin -->
*old stamp*

| lab | s |
| --- | --- |
| lab1 | 9.9 |
<!-- bench:speed:end -->

Hand-written text after, with <!-- bench:other:begin --> kept.
<!-- bench:other:end -->
"""


def test_replace_block_changes_only_the_text_between_its_markers():
    new = docs.replace_block(PAGE, "speed", "| lab | s |\n| --- | --- |\n| lab1 | 1.2 |\n")
    begin, end = docs.markers("speed")
    before, after = PAGE.split(begin)[0], PAGE.split(end)[1]
    assert new.startswith(before + begin + "\n| lab | s |")
    assert new.endswith("| lab1 | 1.2 |\n" + end + after)
    assert "9.9" not in new and "old stamp" not in new
    # Rewriting again with the same body changes nothing more.
    assert docs.replace_block(new, "speed", "| lab | s |\n| --- | --- |\n| lab1 | 1.2 |") == new


@pytest.mark.parametrize("page, found", [
    (PAGE.replace("<!-- bench:speed:end -->\n", ""), "1 begin and 0 end"),
    (PAGE + "<!-- bench:speed:begin -->\n", "2 begin and 1 end"),
    (PAGE.replace("bench:speed:", "bench:sped:"), "0 begin and 0 end"),
])
def test_missing_or_repeated_markers_are_refused_saying_what_to_fix(page, found):
    with pytest.raises(docs.DocsBlockError, match=found) as error:
        docs.replace_block(page, "speed", "new")
    assert "<!-- bench:speed:begin -->" in str(error.value)   # what to put in the page


def test_swapped_markers_are_refused():
    begin, end = docs.markers("speed")
    swapped = PAGE.replace(begin, "@@").replace(end, begin).replace("@@", end)
    with pytest.raises(docs.DocsBlockError, match="before its begin marker"):
        docs.replace_block(swapped, "speed", "new")


def test_write_stamps_date_command_and_machine_and_leaves_a_bad_page_alone(tmp_path, monkeypatch):
    monkeypatch.setitem(docs.BLOCKS, "speed", "docs/figures.md")
    page = tmp_path / "docs" / "figures.md"
    page.parent.mkdir()
    page.write_text(PAGE, encoding="utf-8")
    docs.write("speed", "| lab | s |\n| --- | --- |\n| lab1 | 1.2 |",
               machine_line="2 cores, test machine", root=tmp_path,
               command=["benchmarks/grading_speed.py", "--count", "20", "--write-docs"],
               when=datetime.date(2026, 11, 25))
    text = page.read_text(encoding="utf-8")
    assert ("*Written on 2026-11-25 by `benchmarks/grading_speed.py --count 20 --write-docs`; "
            "machine: 2 cores, test machine.*\n\n| lab | s |") in text
    assert "Hand-written text before." in text and "Hand-written text after" in text

    broken = PAGE.replace("<!-- bench:speed:end -->", "")
    page.write_text(broken, encoding="utf-8")
    with pytest.raises(docs.DocsBlockError):
        docs.write("speed", "new", machine_line="m", root=tmp_path, command=["x.py"])
    assert page.read_text(encoding="utf-8") == broken


def test_an_unknown_block_is_refused_before_any_work():
    with pytest.raises(docs.DocsBlockError, match="no docs block is named 'numerical_policy-numpy'"):
        docs.check(["numerical_policy-numpy"])


def test_every_block_a_benchmark_writes_has_its_markers_in_its_page():
    docs.check(list(docs.BLOCKS))   # raises, naming the block and the fix, otherwise
    for name in docs.BLOCKS:
        assert f"_docs.check([\"{name}\"])" in "".join(
            path.read_text() for path in (ROOT / "benchmarks").glob("*.py")
        ) or name.startswith("numerical_policy-"), f"no benchmark writes the block {name!r}"


def test_machine_names_the_cores_and_python():
    line = docs.machine("Keras 3 (tensorflow)")
    assert "cores" in line and "Python" in line and line.endswith("; Keras 3 (tensorflow)")
