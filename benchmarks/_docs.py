"""Benchmark figures written into the docs by the benchmarks themselves.

A benchmark run with ``--write-docs`` replaces its block of a page under
docs/, the text between ``<!-- bench:NAME:begin -->`` and
``<!-- bench:NAME:end -->``, with what it just printed, headed by the date,
the command and the machine; the rest of the page, written by hand, is left
alone. So every figure in those blocks is one a benchmark printed, never one
copied by hand, and a reader sees when and where it was measured.

    from _docs import Recorder, add_option, check, write
    add_option(parser)                       # --write-docs
    if args.write_docs: check(["grading_speed"])   # before minutes of work
    out = Recorder(); out("| lab | ... |")   # prints and keeps each line
    if args.write_docs: write("grading_speed", out.text())
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Every block a benchmark writes, and the page (from the kit's root) that
#: holds its markers. tests/test_bench_docs.py checks that each is there once.
BLOCKS = {
    "grading_speed": "docs/performance.md",
    "lab5_training": "docs/performance.md",
    "lab6_training": "docs/performance.md",
    "numerical_policy-tensorflow": "docs/verdicts.md",
    "numerical_policy-torch": "docs/verdicts.md",
    "numerical_policy-jax": "docs/verdicts.md",
    "plain_nbgrader_hostile": "docs/security.md",
    "colab_gpu": "docs/performance.md",
    "scaleout": "docs/performance.md",
    "load": "docs/performance.md",
    "moodle_term": "docs/performance.md",
}


class DocsBlockError(ValueError):
    """A block that cannot be written: unknown name, missing or repeated markers."""


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of block ``name``."""
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the lines between block ``name``'s markers replaced by ``body``.

    The markers stay; anything outside them is returned unchanged. Raises
    DocsBlockError, saying what to fix, where a marker is missing, repeated
    or out of order: a page that lost its markers must not be half rewritten.
    """
    begin, end = markers(name)
    counts = (text.count(begin), text.count(end))
    if counts != (1, 1):
        raise DocsBlockError(
            f"block {name!r}: found {counts[0]} begin and {counts[1]} end markers, expected "
            f"one of each; put the lines {begin} and {end} around the block in the page.")
    start, stop = text.index(begin) + len(begin), text.index(end)
    if stop < start:
        raise DocsBlockError(f"block {name!r}: its end marker comes before its begin marker; "
                             f"swap them.")
    return f"{text[:start]}\n{body.strip()}\n{text[stop:]}"


def page(name: str, root: Path = ROOT) -> Path:
    """The page that holds block ``name``."""
    if name not in BLOCKS:
        raise DocsBlockError(f"no docs block is named {name!r}; known: {', '.join(sorted(BLOCKS))}"
                             f" (add it to BLOCKS in benchmarks/_docs.py and its markers to "
                             f"the page).")
    return root / BLOCKS[name]


def check(names: list[str], root: Path = ROOT) -> None:
    """Fail now, before a benchmark's minutes of work, if a block cannot be written."""
    for name in names:
        path = page(name, root)
        if not path.exists():
            raise DocsBlockError(f"block {name!r}: its page {path} does not exist.")
        replace_block(path.read_text(encoding="utf-8"), name, "")


def machine(details: str = "") -> str:
    """This machine in one line: system, CPU, cores, memory, Python (and ``details``)."""
    cpu = platform.processor() or platform.machine()
    memory = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    text = (f"{platform.system()} {platform.machine()}, {cpu}, {cores} cores{memory}, "
            f"Python {platform.python_version()}")
    return f"{text}; {details}" if details else text


def stamp(command: list[str], machine_line: str, when: datetime.date | None = None) -> str:
    """The line that heads a written block: when, by which command, on what."""
    when = when or datetime.date.today()
    script = Path(command[0]).name if command else "?"
    arguments = " ".join(command[1:])
    shown = f"benchmarks/{script} {arguments}".strip()
    return f"*Written on {when.isoformat()} by `{shown}`; machine: {machine_line}.*"


def write(name: str, body: str, *, machine_line: str | None = None,
          command: list[str] | None = None, root: Path = ROOT,
          when: datetime.date | None = None) -> Path:
    """Replace block ``name`` of its page with ``body`` under a dated stamp; the page."""
    path = page(name, root)
    heading = stamp(sys.argv if command is None else command,
                    machine() if machine_line is None else machine_line, when)
    text = replace_block(path.read_text(encoding="utf-8"), name, f"{heading}\n\n{body}")
    path.write_text(text, encoding="utf-8")
    print(f"\n{path.relative_to(root) if path.is_relative_to(root) else path}: "
          f"block {name!r} rewritten")
    return path


def add_option(parser) -> None:
    """The ``--write-docs`` option every benchmark that prints figures shares."""
    parser.add_argument("--write-docs", action="store_true",
                        help="also rewrite this benchmark's table in docs/ (between its "
                             "<!-- bench:NAME:begin/end --> markers) with the date and machine")


class Recorder:
    """Prints each line, as the benchmarks always did, and keeps it for the docs."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines)
