"""Which notebook names a cell reads and binds, and so which skipped cells a
submission still needs.

The grader skips the provided cells that grade nothing (the demonstrations
marked `grading="skip"` and every exercise's visible check, `check_<name>`:
autograder.grader.source.skipped_when_grading). No provided cell reads what
they define (tests/grader/test_release.py checks every lab's source), but a
student's own cell may: an answer that calls a helper defined in a visible
check, a cell of their own that reads the check's layer. For such a
submission the grader runs the skipped cells it needs (cells_needed), so
skipping changes no grade; a cell it cannot read (IPython magics, a syntax
error) counts as reading every word in it.

Names are found with the standard library's symtable: a cell's reads are the
names its top level reads and the names its functions take from the
notebook's globals (read when the hidden tests call them, after every cell
above the tests ran); its binds are what its top level assigns, imports,
defines, or its functions declare `global` and assign.
"""

from __future__ import annotations

import re
import symtable

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _table(source: str):
    try:
        return symtable.symtable(source, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _in_functions(top, wanted) -> set[str]:
    """The names of the symbols, in every scope nested in the cell's (its
    functions, classes, comprehensions), for which ``wanted(symbol)``."""
    names: set[str] = set()
    tables = list(top.get_children())
    while tables:
        table = tables.pop()
        names.update(symbol.get_name() for symbol in table.get_symbols() if wanted(symbol))
        tables.extend(table.get_children())
    return names


def _reads(source: str) -> tuple[set[str], set[str]]:
    """(the names a cell's top level reads, the names its functions take from
    the notebook's globals); every word of a cell that does not parse, in both."""
    top = _table(source)
    if top is None:
        words = set(_WORD.findall(source))
        return words, words
    at_top = {symbol.get_name() for symbol in top.get_symbols() if symbol.is_referenced()}
    return at_top, _in_functions(top, lambda symbol: symbol.is_referenced()
                                 and symbol.is_global())


def global_reads(source: str) -> set[str]:
    """Module-level names a cell reads (its own scope and, from its functions,
    the names they take from the notebook's globals). A cell that does not
    parse as Python reads every word in it."""
    at_top, inner = _reads(source)
    return at_top | inner


def global_binds(source: str) -> set[str]:
    """Module-level names a cell binds (assignments, imports, def, class, for
    targets; `global` names assigned in its functions). A cell that does not
    parse binds nothing."""
    top = _table(source)
    if top is None:
        return set()
    names = {symbol.get_name() for symbol in top.get_symbols()
             if symbol.is_assigned() or symbol.is_imported()}
    return names | _in_functions(top, lambda symbol: symbol.is_declared_global()
                                 and symbol.is_assigned())


def cells_needed(cells: list[tuple[str, str, str]], skipped: set[str]) -> list[str]:
    """The grade_ids of ``skipped`` that a submission still needs run.

    ``cells``: (grade_id, source, kind) for every code cell of the notebook in
    order, kind "own" (the student's: answers, cells they added), "tests" or
    "provided". A skipped cell is needed when

    - a student's cell's top level reads a name whose last binding before it
      is in that skipped cell;
    - a student's function reads (when called) a name that skipped cell binds,
      the cell standing before the last tests cell (after it, nothing graded
      runs);
    - a needed cell reads a name bound last, before it, in that skipped cell.

    Provided cells other than the skipped ones are the same in every
    submission and read nothing of the skipped cells (tests/grader/test_release.py),
    so they add nothing here.
    """
    binds = {grade_id: global_binds(source) for grade_id, source, kind in cells
             if kind != "tests"}
    last_tests = max((index for index, (_, _, kind) in enumerate(cells) if kind == "tests"),
                     default=len(cells))
    needed: set[str] = set()
    called: set[str] = set()   # what the student's functions read from the globals
    for _, source, kind in cells:
        if kind == "own":
            called |= _reads(source)[1]
    for index, (grade_id, _, kind) in enumerate(cells):
        if grade_id in skipped and index < last_tests and binds[grade_id] & called:
            needed.add(grade_id)
    changed = True
    while changed:   # top-level reads, of the student's cells and the needed ones
        changed = False
        bound_in: dict[str, str] = {}
        for grade_id, source, kind in cells:
            if kind == "tests":
                continue
            if kind == "own" or grade_id in needed:
                at_top, inner = _reads(source)
                reads = (at_top - binds[grade_id]) | (inner if grade_id in needed else set())
                for name in reads:
                    found = bound_in.get(name)
                    if found in skipped and found not in needed:
                        needed.add(found)
                        changed = True
            for name in binds[grade_id]:
                bound_in[name] = grade_id
    return [grade_id for grade_id, _, _ in cells if grade_id in needed]
