"""What must never reach a student: solutions, hidden tests, references, stand-ins.

The student notebooks (`release`), labkit's wheel and the published student
repository (`publish`) are all checked with the same scanner: the markers of
nbgrader's hidden regions and the grader's imports, and every substantial line
(over 25 characters, not a comment nor an import) of a lab's solution regions, hidden tests,
reference module and stand-ins. Lines that the student notebook itself shows
(a hidden test that shares a line with a visible check, say) are public by
design and not counted for the hidden tests, reference and stand-ins; a
solution line is public where another lab gives it as provided code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.labs import Lab

#: Text that only the instructor's side holds.
SECRET_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                  "autograder.references", "autograder.testkernel")

_SOLUTION = r"### BEGIN SOLUTION\n(.*?)### END SOLUTION"
_HIDDEN = r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS"


def _substantial(text: str) -> set[str]:
    """Lines that say something of an answer: over 25 characters, neither a
    comment nor an import (`from __future__ import annotations` is everywhere;
    the grader's own modules are caught by SECRET_MARKERS)."""
    lines = set()
    for line in text.splitlines():
        line = line.strip()
        if len(line) > 25 and not line.startswith(("#", "import ", "from ")):
            lines.add(line)
    return lines


def _region_lines(lab: Lab, pattern: str) -> set[str]:
    text = lab.source_path.read_text(encoding="utf-8")
    lines: set[str] = set()
    for block in re.findall(pattern, text, re.S):
        lines |= _substantial(block)
    return lines


def solution_lines(lab: Lab) -> set[str]:
    """Substantial lines of the solution regions of ``lab``'s source."""
    return _region_lines(lab, _SOLUTION)


def instructor_lines(lab: Lab, public_text: str = "") -> set[str]:
    """Substantial lines of ``lab``'s hidden tests, reference module and
    stand-ins, less those that ``public_text`` (the student notebook, whose
    visible checks share lines with the hidden tests) shows anyway."""
    lines = _region_lines(lab, _HIDDEN)
    for path in [lab.folder / "reference.py", *sorted((lab.folder / "standins").glob("*.py"))]:
        if path.exists():
            lines |= _substantial(path.read_text(encoding="utf-8"))
    return lines - _substantial(public_text)


def _notebook_text(text: str) -> str:
    """A notebook's strings (cell sources, outputs, metadata), decoded from JSON,
    one after the other: its code lines compare as the student sees them."""
    try:
        document = json.loads(text)
    except ValueError:
        return text

    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for value in node.values():
                yield from strings(value)
        elif isinstance(node, list):
            # nbformat may store a source as a list of lines: keep them one text.
            if node and all(isinstance(item, str) for item in node):
                yield "".join(node)
            else:
                for item in node:
                    yield from strings(item)

    return "\n".join(strings(document))


@dataclass(frozen=True)
class Leak:
    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


class Scanner:
    """Finds instructor-only text in files, for the labs ``labs``.

    For the hidden tests, references and stand-ins, the student notebooks
    count as public: they share the exercises' signatures and some lines of
    the visible checks.
    """

    def __init__(self, labs: list[Lab]):
        notebooks = {lab.id: _notebook_text(lab.student_path.read_text(encoding="utf-8"))
                     for lab in labs if lab.student_path.exists()}
        self.secret: dict[str, str] = {}
        for lab in labs:
            every_notebook = "\n".join(notebooks.values())
            for line in instructor_lines(lab, every_notebook):
                self.secret.setdefault(line, f"a line of {lab.id}'s hidden tests, reference or "
                                             "stand-ins")
            # A later lab may provide an earlier lab's layers as given code (lab5
            # gives lab4's): public there, but never in the lab's own notebook.
            others = "\n".join(text for lab_id, text in notebooks.items() if lab_id != lab.id)
            for line in solution_lines(lab) - _substantial(others):
                self.secret[line] = f"a line of {lab.id}'s solutions"

    def text_leaks(self, name: str, text: str) -> list[Leak]:
        if name.endswith(".ipynb"):
            text = _notebook_text(text)
        leaks = [Leak(name, f"contains {marker!r}") for marker in SECRET_MARKERS if marker in text]
        found = _substantial(text) & self.secret.keys()
        leaks += [Leak(name, f"{self.secret[line]}: {line[:60]!r}") for line in sorted(found)]
        return leaks

    def tree_leaks(self, root: Path) -> list[Leak]:
        """Every leak in the text files under ``root`` (binary files are skipped)."""
        leaks: list[Leak] = []
        for path in sorted(root.rglob("*")):
            if not path.is_file() or ".git" in path.relative_to(root).parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            leaks += self.text_leaks(str(path.relative_to(root)), text)
        return leaks
