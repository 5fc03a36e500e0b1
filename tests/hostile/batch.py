"""The batch and the reports: zip bombs, broken metadata, odd and hostile file names, copies (issue 18: 10, 12-15).

The zip bomb (10) and the seed (4) are not one notebook in a folder: they
are tests of their own (tests/test_names.py, tests/test_cli.py).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import nbformat

from tests.hostile.cases import STUDENT, Case, lab_notebook, notebook

#: What a student's file name or exception message carries to the
#: instructor's terminal: ESC[8m hides what follows, an OSC sets the window
#: title, ESC[?1049h switches to the alternate screen.
HIDE, TITLE, SCREEN = "\x1b[8m", "\x1b]0;owned\x07", "\x1b[?1049h"


def _no_control_bytes(*files: Path) -> str:
    """"" when none of ``files`` holds ESC or BEL, else which do."""
    dirty = [file.name for file in files if file.exists()
             and (b"\x1b" in file.read_bytes() or b"\x07" in file.read_bytes())]
    return f"ESC or BEL in {', '.join(dirty)}" if dirty else ""


def _clean_outputs(student: str):
    def check(out: Path, row: dict) -> str:
        pages = list((out / "feedback").glob(f"{student}*.html"))
        return _no_control_bytes(out / "grades.csv", out / "exercises.csv",
                                 out / "report.html", *pages)
    return check


def _string_metadata():
    """The dot_scores answer cell and its tests cell with ``metadata.nbgrader`` a string."""
    nb = notebook()
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in ("dot_scores", "test_dot_scores"):
            cell.metadata["nbgrader"] = "dot_scores"
    return nb


def _odd_metadata():
    """nbgrader metadata that is a list, a number, and a grade_id that is a list."""
    nb = notebook()
    kinds = iter([["softmax"], 7, {"grade_id": ["x"], "solution": True}])
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in ("softmax", "attention_pool",
                                                                 "bilinear_scores"):
            cell.metadata["nbgrader"] = next(kinds)
    return nb


def _row_says(*words: str):
    def check(out: Path, row: dict) -> str:
        missing = [word for word in words if word not in row.get("notes", "")]
        return f"the row's notes lack {missing}: {row.get('notes', '')[:200]!r}" if missing else ""
    return check


def _replaced_and_reported(out: Path, row: dict) -> str:
    """The name is shown with U+FFFD, and report.html was written to its end."""
    report = (out / "report.html").read_text(encoding="utf-8")
    if "\ufffd" not in row["status"] or "zed_latin" not in report \
            or not report.rstrip().endswith("</html>"):
        return f"status {row['status'][:80]!r}; report.html of {len(report)} characters"
    return ""


def _escape_message_check(out: Path, row: dict) -> str:
    problem = _clean_outputs("escape_message")(out, row)
    with open(out / "exercises.csv", encoding="utf-8", newline="") as handle:
        mine = [r for r in csv.DictReader(handle) if r["student_id"] == "escape_message"
                and r["exercise"] == "dot_scores"]
    if not mine or "gone" not in mine[0]["message"]:
        problem += f"; the message lost its text: {mine[:1]}"
    return problem.strip("; ")


def cases() -> list[Case]:
    return [
        # -- 12: one notebook must not stop the batch -----------------------------
        Case("metadata_nbgrader_string", "batch",
             "metadata.nbgrader of an answer and its tests cell is a string",
             _string_metadata, 10,
             check=_row_says("nbgrader metadata was a str")),
        Case("metadata_nbgrader_list_number", "batch",
             "metadata.nbgrader a list, a number; a grade_id that is a list",
             _odd_metadata, 10,
             check=_row_says("was a list", "was a int")),
        Case("cells_not_cells", "batch", "a cell that is a string, not a cell",
             _cells_not_cells, 0, status="invalid notebook*"),
        # -- 13: a file name that is not UTF-8 ------------------------------------
        Case("name_not_utf8", "batch", "file name with bytes that are not UTF-8 (latin-1)",
             notebook, 10, filename=os.fsdecode(b"ren\xe9e_name.ipynb"), student="rene_name",
             check=_row_says("not UTF-8")),
        Case("name_not_utf8_in_status", "batch",
             "another lab's notebook named in latin-1 in a folder (the name is in the status)",
             notebook, 0, status="this looks like lab2*",
             filename=os.fsdecode(b"zed_latin/lab2_\xe9t\xe9.ipynb"), student="zed_latin",
             check=_replaced_and_reported),
        # -- 14: terminal control sequences ---------------------------------------
        Case("escape_file_name", "batch",
             "a file name with ESC[8m and an OSC title in a student's folder",
             notebook, 0, status="this looks like lab2*",
             filename=f"escape_file_name/lab2{HIDE}{TITLE}.ipynb",
             check=_clean_outputs("escape_file_name")),
        Case("escape_message", "batch",
             "an answer raising an exception whose message holds an OSC and ESC[?1049h",
             lambda: notebook({"dot_scores": "def dot_scores(query, keys):\n"
                               f"    raise ValueError({TITLE + SCREEN + 'gone'!r})"}),
             9, check=_escape_message_check),
        # -- 15: a copy must not decide the grade ---------------------------------
        Case("copy_blank_beside", "batch",
             "alice.ipynb complete; a newer 'copy_blank_beside (1).ipynb' is the blank notebook",
             notebook, 10, beside={"copy_blank_beside (1).ipynb": _blank},
             check=_row_says("graded 'copy_blank_beside.ipynb'", "most exercises answered")),
        Case("copy_other_lab_beside", "batch",
             "alice.ipynb complete; a newer '(1)' copy is another lab's notebook",
             notebook, 10, beside={"copy_other_lab_beside (1).ipynb": _lab2},
             check=_row_says("graded 'copy_other_lab_beside.ipynb'", "most exercises answered")),
    ]


def _cells_not_cells():
    nb = nbformat.writes(notebook())
    return nb.replace('"cells": [', '"cells": ["not a cell", ', 1).encode()


def _blank():
    return nbformat.read(STUDENT, as_version=4)


def _lab2():
    return lab_notebook("lab2")
