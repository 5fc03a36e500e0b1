"""Repair a submission's nbgrader structure before autograde.

Plain nbgrader aborts, or silently gives 0, when a student deleted or
duplicated a test cell, recreated a cell (its metadata gone), or edited
nbgrader's metadata (grade flags, points, schema_version). Here the released
notebook, which is the instructor's, is the authority on structure.

``normalize`` applies the repair steps of ``REPAIRS`` in order, each a small
function of a :class:`_Work` (the submission's cells, being repaired, and
the release) that returns what it repaired, for the instructor's notes:

1. ``drop_malformed_metadata``: metadata of the wrong type is dropped;
2. ``drop_unknown_ids``: grade_ids the release does not have are dropped;
3. ``drop_duplicates``: a duplicated cell is kept once;
4. ``find_lost_answers``: an answer whose metadata is gone is found by what
   it defines;
5. ``restore_release_metadata``: known cells get the release's metadata
   (and the source of a cell that is not an answer) back;
6. ``put_back_missing_cells``: a missing cell is put back where the release
   has it;
7. ``tests_after_answers``: a tests cell is moved after its answer;
8. ``unique_cell_ids``: every cell gets an id of its own.

Each step's docstring says which broken notebooks it repairs and why.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Callable

import nbformat


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


@dataclass
class _Work:
    """A notebook being repaired: its cells (replaced or changed by each step) and the release."""

    cells: list
    release: nbformat.NotebookNode
    #: the release's graded cells by grade_id
    release_cells: dict = field(init=False)
    #: the grade_ids of the release's answer cells (nbgrader ``solution``)
    answer_ids: list = field(init=False)

    def __post_init__(self):
        self.release_cells = {_grade_id(c): c for c in self.release.cells if _grade_id(c)}
        self.answer_ids = [gid for gid, cell in self.release_cells.items()
                           if cell.metadata["nbgrader"].get("solution")]


def normalize(submission, release) -> tuple[nbformat.NotebookNode, list[str]]:
    """A copy of ``submission`` with the graded structure of ``release``.

    Returns the repaired notebook and a list of what was repaired.
    """
    work = _Work([copy.deepcopy(cell) for cell in submission.cells], release)
    notes: list[str] = []
    for repair in REPAIRS:
        notes.extend(repair(work))
    repaired = nbformat.v4.new_notebook()
    repaired.metadata = copy.deepcopy(release.metadata)
    repaired.cells = work.cells
    return repaired, notes


def drop_malformed_metadata(work: _Work) -> list[str]:
    """Drop a cell's metadata, or its nbgrader part, where it has the wrong type.

    nbformat accepts any JSON in ``metadata.nbgrader``, and a hand-edited or
    generated notebook may hold a string, a list, a number or null there (or
    in ``metadata``, or as the grade_id). nbgrader and the steps below expect a
    dict with a string grade_id, so such metadata is dropped first and the
    cell is then treated like one whose metadata is gone (an answer is found
    again by ``find_lost_answers``, a test is put back).
    """
    notes = []
    for index, cell in enumerate(work.cells):
        if "metadata" not in cell:
            cell["metadata"] = nbformat.NotebookNode()
        if not isinstance(cell.get("metadata"), dict):
            notes.append(f"cell {index + 1}: its metadata was "
                         f"{_described(cell.get('metadata'))}, not a dict: dropped")
            cell["metadata"] = nbformat.NotebookNode()
        if "nbgrader" not in cell.metadata:
            continue
        nbgrader = cell.metadata["nbgrader"]
        if not isinstance(nbgrader, dict):
            notes.append(f"cell {index + 1}: its nbgrader metadata was "
                         f"{_described(nbgrader)}, not a dict: dropped")
            del cell.metadata["nbgrader"]
        elif "grade_id" in nbgrader and not isinstance(nbgrader["grade_id"], str):
            notes.append(f"cell {index + 1}: its grade_id was "
                         f"{_described(nbgrader['grade_id'])}, not a string: dropped "
                         f"its nbgrader metadata")
            del cell.metadata["nbgrader"]
    return notes


def _described(value) -> str:
    """``null`` or ``a <type>`` (``a str``, ``a list``): what a JSON value was."""
    return "null" if value is None else f"a {type(value).__name__}"


def drop_unknown_ids(work: _Work) -> list[str]:
    """Remove the nbgrader metadata of a cell whose grade_id the release does not have.

    A cell copied from another lab's notebook, or an id edited by hand, would
    make nbgrader look for a cell that is not in the gradebook (and abort);
    without the metadata it is plain student code.
    """
    notes = []
    for cell in work.cells:
        gid = _grade_id(cell)
        if gid is not None and gid not in work.release_cells:
            cell.metadata.pop("nbgrader", None)
            notes.append(f"removed unknown nbgrader id {gid!r}")
    return notes


def drop_duplicates(work: _Work) -> list[str]:
    """Keep one copy of a duplicated graded cell (nbgrader aborts on a repeated grade_id).

    A duplicated test, check or setup cell is the instructor's: the first
    copy is kept and the others removed. Of a duplicated answer cell the last
    copy is the answer, since it is the one the student edited last; the
    earlier copies stay as plain code (they may define what later cells use).
    """
    last_answer = {_grade_id(cell): index for index, cell in enumerate(work.cells)
                   if _grade_id(cell) in work.answer_ids}
    notes = []
    seen: set[str] = set()
    kept = []
    for index, cell in enumerate(work.cells):
        gid = _grade_id(cell)
        if gid is None:
            kept.append(cell)
        elif gid in work.answer_ids:
            if last_answer[gid] != index:
                cell.metadata.pop("nbgrader", None)
                notes.append(f"answer cell {gid!r} was duplicated: graded the last copy")
            kept.append(cell)
        elif gid in seen:
            notes.append(f"removed a duplicate of cell {gid!r}")
        else:
            seen.add(gid)
            kept.append(cell)
    work.cells = kept
    return notes


def find_lost_answers(work: _Work) -> list[str]:
    """Find an answer cell whose metadata is gone by what it defines.

    A student who deleted the answer cell and wrote the answer in a new one,
    or pasted it from another notebook (the cell's metadata left behind),
    would otherwise score 0. The last code cell without a grade_id that
    defines the exercise at its top level (``def softmax``, ``class
    MultiHeadAttention``) becomes its answer cell.
    """
    notes = []
    present = {_grade_id(cell) for cell in work.cells}
    for gid in work.answer_ids:
        if gid in present:
            continue
        for cell in reversed(work.cells):
            if cell.cell_type == "code" and _grade_id(cell) is None \
                    and gid in _defines(cell.source):
                cell.metadata["nbgrader"] = {"grade_id": gid}
                notes.append(f"answer cell {gid!r} had lost its metadata: found by its definition")
                present.add(gid)
                break
    return notes


def _defines(source: str) -> set[str]:
    """The functions and classes ``source`` defines at its top level (none if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def restore_release_metadata(work: _Work) -> list[str]:
    """Give every known cell the release's nbgrader metadata, cell type and locked source.

    A student (or their editor) may have changed the points, the grade or
    solution flags, the schema_version, or turned a test cell into markdown;
    nbgrader would then grade with the student's points or skip the test.
    A cell that is not an answer gets the release's source back too: its
    code is the instructor's (an edited test must not pass by being edited).
    The checksum alone differing is not reported (nbgrader's own field).
    """
    notes = []
    for cell in work.cells:
        gid = _grade_id(cell)
        if gid not in work.release_cells:
            continue
        reference = work.release_cells[gid]
        wanted = reference.metadata["nbgrader"]
        if cell.metadata.get("nbgrader") != wanted and cell.metadata.get("nbgrader"):
            changed = {key for key in wanted
                       if cell.metadata["nbgrader"].get(key) != wanted[key]} - {"checksum"}
            if changed:
                notes.append(f"cell {gid!r}: restored nbgrader metadata "
                             f"({', '.join(sorted(changed))})")
        cell.metadata["nbgrader"] = copy.deepcopy(wanted)
        cell.cell_type = reference.cell_type
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        if not wanted.get("solution"):
            cell.source = reference.source
    return notes


def put_back_missing_cells(work: _Work) -> list[str]:
    """Put back each graded cell the submission lacks, after the cell before it in the release.

    A deleted test cell would make nbgrader give the exercise no grade (or
    abort); a deleted setup cell would leave later cells without what they
    use. The release's copy is inserted; a missing answer becomes the
    release's stub, which scores 0 for that exercise.
    """
    notes = []
    position = _positions(work.cells)
    previous_id: str | None = None
    for reference in work.release.cells:
        gid = _grade_id(reference)
        if gid is None:
            continue
        if gid not in position:
            insert_at = position[previous_id] + 1 if previous_id in position else 0
            if reference.metadata["nbgrader"].get("solution"):
                notes.append(f"answer cell {gid!r} was missing: graded as unanswered")
            else:
                notes.append(f"cell {gid!r} was missing: put back")
            work.cells.insert(insert_at, copy.deepcopy(reference))
            position = _positions(work.cells)
        previous_id = gid
    return notes


def _positions(cells) -> dict[str, int]:
    """Each graded cell's index in ``cells`` (the last one, should a grade_id repeat)."""
    return {gid: index for index, cell in enumerate(cells) if (gid := _grade_id(cell))}


def tests_after_answers(work: _Work) -> list[str]:
    """Move every tests cell right after its answer and the read-only cells that follow it.

    A student who moved a tests cell above its answer (or to the end) would
    have it run against the stub, or against a later redefinition: each
    tests cell runs where the release has it, after the exercise it tests.
    """
    follows = _tests_follow(work.release)
    cells = work.cells
    tests = {gid: c for c in cells if (gid := _grade_id(c)) in follows}
    rest = [c for c in cells if _grade_id(c) not in follows]
    moved = []
    for gid, cell in tests.items():
        anchors = [i for i, c in enumerate(rest) if _grade_id(c) in follows[gid]]
        where = max(anchors) + 1 if anchors else len(rest)
        original = [i for i, c in enumerate(cells) if c is cell][0]
        previous = cells[original - 1] if original > 0 else None
        if previous is None or _grade_id(previous) not in follows[gid]:
            moved.append(gid)
        rest.insert(where, cell)
    work.cells = rest
    return [f"cell {gid!r} was out of place: moved after its answer" for gid in sorted(moved)]


def _tests_follow(release) -> dict[str, list[str]]:
    """For each tests cell of ``release``: the graded cells back to its answer, nearest first."""
    release_ids = [_grade_id(cell) for cell in release.cells]
    follows: dict[str, list[str]] = {}
    for index, gid in enumerate(release_ids):
        nbgrader = release.cells[index].metadata.get("nbgrader", {}) if gid else {}
        if not (gid and nbgrader.get("grade") and not nbgrader.get("solution")):
            continue
        before = []
        for earlier in reversed(release_ids[:index]):
            if earlier is None:
                continue
            before.append(earlier)
            if release.cells[release_ids.index(earlier)].metadata["nbgrader"].get("solution"):
                break
        follows[gid] = before          # the answer and the checks after it
    return follows


def unique_cell_ids(work: _Work) -> list[str]:
    """Give each cell an id of its own (nbformat 4.5 requires one, unique, at most 64 chars).

    A cell copied by hand repeats its id, an old editor writes none; nbgrader
    and nbformat's validation refuse both. Not reported: no grade depends on it.
    """
    used: set[str] = set()
    for index, cell in enumerate(work.cells):
        cell_id = str(cell.get("id") or "")
        if not cell_id or cell_id in used or len(cell_id) > 64:
            cell_id = f"cell-{index}"
        used.add(cell_id)
        cell["id"] = cell_id
    return []


#: The repair steps, in the order ``normalize`` applies them (each relies on
#: the ones before: e.g. find_lost_answers only sees ids the release knows).
REPAIRS: list[Callable[[_Work], list[str]]] = [
    drop_malformed_metadata,
    drop_unknown_ids,
    drop_duplicates,
    find_lost_answers,
    restore_release_metadata,
    put_back_missing_cells,
    tests_after_answers,
    unique_cell_ids,
]
