"""tests/compat_docs.py: the compatibility docs, written from a run's results."""

from __future__ import annotations

import pytest

from tests import compat_docs
from tests.compat_docs import README_BEGIN, README_END

LAB_OK = {"solution_runs": True, "full_marks": True, "same_verdicts": True,
          "solution_seconds": 4.2, "samples": 7, "samples_seconds": 30.0}
RESULTS = {
    "date": "2026-11-26 02:30 UTC", "machine": "Test CPU, 2 cores, Linux 6",
    "below_bound": {"keras": "3.7.0", "tensorflow": "2.16.2", "lab": "lab2",
                    "errors": ["demo_mask_by_keyword: InvalidArgumentError: shapes"]},
    "rows": {
        "good": {"name": "good row", "build_seconds": 41.0,
                 "versions": {"python": "3.13.0", "tensorflow": "2.20.0", "keras": "3.13.2",
                              "numpy": "2.1.3", "matplotlib": "3.10.0", "labkit": "0.1.0"},
                 "labs": {lab: dict(LAB_OK) for lab in compat_docs.LABS}},
        "bad": {"name": "bad row", "build_seconds": 30.0,
                "versions": {"python": "3.11.7", "tensorflow": "2.16.2", "keras": "3.7.0",
                             "numpy": "1.26.4", "matplotlib": "3.8.4"},
                "labs": {"lab1": dict(LAB_OK),
                         "lab2": {**LAB_OK, "solution_runs": False, "full_marks": False},
                         "lab3": {"solution_runs": True, "solution_seconds": 3.0}}},
    },
}


def test_readme_table_counts_a_lab_only_when_all_three_checks_passed():
    lines = compat_docs.readme_table(RESULTS).splitlines()
    every = len(compat_docs.LABS)
    assert every == 6, "every lab of the kit has its column"
    assert lines[2] == f"| good row | 3.13.0 | 2.20.0 | 3.13.2 | 2.1.3 | {every}/{every} |"
    assert lines[3] == f"| bad row | 3.11.7 | 2.16.2 | 3.7.0 | 1.26.4 | 1/{every} |"


def test_matrix_says_what_failed_and_what_did_not_run():
    bad = compat_docs.matrix(RESULTS).splitlines()[3].split(" | ")
    every = len(compat_docs.LABS)
    assert bad[6:9] == [f"1/{every}", "30 s", "4 s ✓"]
    assert bad[9] == "4 s, FAILED: solution runs, full marks"
    assert bad[10] == "3 s, not all checked"
    assert bad[11:8 + every] == ["not run"] * (every - 3)
    assert bad[8 + every] == "14 in 60 s |"


def test_document_has_the_date_machine_and_the_release_below_the_bound():
    text = compat_docs.document(RESULTS)
    assert "Last run: 2026-11-26 02:30 UTC, on Test CPU, 2 cores, Linux 6" in text
    assert "Keras 3.7.0 with TensorFlow 2.16.2: lab2 raises in `demo_mask_by_keyword`" in text


def test_replace_block_keeps_the_markers_and_the_text_around():
    text = f"head\n{README_BEGIN}\nold table\n{README_END}\ntail\n"
    assert compat_docs.replace_block(text, README_BEGIN, README_END, "new") == \
        f"head\n{README_BEGIN}\nnew\n{README_END}\ntail\n"
    with pytest.raises(SystemExit, match="README.md lacks the markers"):
        compat_docs.replace_block("no markers", README_BEGIN, README_END, "new")


def test_the_readme_shows_a_table_of_every_row(root):
    from tests.student.test_compat import ROWS

    text = (root / "README.md").read_text()
    block = text[text.index(README_BEGIN) + len(README_BEGIN): text.index(README_END)]
    assert [line.split(" | ")[0].removeprefix("| ") for line in block.strip().splitlines()[2:]] \
        == [row.name for row in ROWS], "run make test-compat to write the README's table"
