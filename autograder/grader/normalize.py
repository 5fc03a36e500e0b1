"""Repair a submission's nbgrader structure before autograde.

Plain nbgrader aborts, or silently gives 0, when a student deleted or
duplicated a test cell, recreated a cell (its metadata gone), or edited
nbgrader's metadata (grade flags, points, schema_version). Here the released
notebook, which is the instructor's, is the authority on structure:

* every cell of the submission with a known grade_id gets the release's
  nbgrader metadata back (points, flags, schema_version);
* a duplicated graded or locked cell is kept once (the first copy); of a
  duplicated answer cell the last copy is kept as the answer, since it is the
  one the student edited last, and earlier copies become plain code;
* an answer cell whose metadata is gone is found by what it defines
  (`def softmax`, `class MultiHeadAttention`);
* a missing test, check or setup cell is put back where the release has it
  (after the cell that precedes it there);
* a missing answer becomes the release's stub (scores 0 for that exercise);
* unknown grade_ids lose their nbgrader metadata;
* metadata that is not what nbformat's schema leaves open to anything
  (a cell's ``metadata`` or ``metadata.nbgrader`` that is a string, a list
  or a number; a grade_id that is not a string) is dropped first, so the
  cell is then treated like one whose metadata is gone.

Each repair is reported, for the instructor's notes.
"""

from __future__ import annotations

import ast
import copy

import nbformat


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _repair_metadata(cells) -> list[str]:
    """Drop a cell's metadata, or its nbgrader part, where it has the wrong type.

    nbformat accepts any JSON in ``metadata.nbgrader``; nbgrader and the
    steps below expect a dict with a string grade_id. Returns what was dropped.
    """
    notes = []
    for index, cell in enumerate(cells):
        if "metadata" not in cell:
            cell["metadata"] = nbformat.NotebookNode()
        if not isinstance(cell.get("metadata"), dict):
            notes.append(f"cell {index + 1}: its metadata was a "
                         f"{type(cell.get('metadata')).__name__}, not a dict: dropped")
            cell["metadata"] = nbformat.NotebookNode()
        nbgrader = cell.metadata.get("nbgrader")
        if nbgrader is None:
            continue
        if not isinstance(nbgrader, dict):
            notes.append(f"cell {index + 1}: its nbgrader metadata was a "
                         f"{type(nbgrader).__name__}, not a dict: dropped")
            del cell.metadata["nbgrader"]
        elif "grade_id" in nbgrader and not isinstance(nbgrader["grade_id"], str):
            notes.append(f"cell {index + 1}: its grade_id was a "
                         f"{type(nbgrader['grade_id']).__name__}, not a string: dropped "
                         f"its nbgrader metadata")
            del cell.metadata["nbgrader"]
    return notes


def _defines(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def normalize(submission, release) -> tuple[nbformat.NotebookNode, list[str]]:
    """A copy of ``submission`` with the graded structure of ``release``.

    Returns the repaired notebook and a list of what was repaired.
    """
    cells = [copy.deepcopy(cell) for cell in submission.cells]
    notes: list[str] = _repair_metadata(cells)
    release_cells = {_grade_id(cell): cell for cell in release.cells if _grade_id(cell)}
    answer_ids = [gid for gid, cell in release_cells.items()
                  if cell.metadata["nbgrader"].get("solution")]

    # 1. Unknown ids lose their metadata; duplicates are resolved.
    last_answer = {}
    for index, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid is not None and gid not in release_cells:
            cell.metadata.pop("nbgrader", None)
            notes.append(f"removed unknown nbgrader id {gid!r}")
        elif gid in answer_ids:
            last_answer[gid] = index
    seen: set[str] = set()
    kept = []
    for index, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid is None:
            kept.append(cell)
        elif gid in answer_ids:
            if last_answer[gid] != index:
                cell.metadata.pop("nbgrader", None)
                notes.append(f"answer cell {gid!r} was duplicated: graded the last copy")
            kept.append(cell)
        elif gid in seen:
            notes.append(f"removed a duplicate of cell {gid!r}")
        else:
            seen.add(gid)
            kept.append(cell)
    cells = kept

    # 2. Answers whose metadata is gone are found by what they define.
    present = {_grade_id(cell) for cell in cells}
    for gid in answer_ids:
        if gid in present:
            continue
        for cell in reversed(cells):
            if cell.cell_type == "code" and _grade_id(cell) is None \
                    and gid in _defines(cell.source):
                cell.metadata["nbgrader"] = {"grade_id": gid}
                notes.append(f"answer cell {gid!r} had lost its metadata: found by its definition")
                present.add(gid)
                break

    # 3. Known cells get the release's metadata back.
    for cell in cells:
        gid = _grade_id(cell)
        if gid in release_cells:
            reference = release_cells[gid]
            if cell.metadata.get("nbgrader") != reference.metadata["nbgrader"] and \
                    cell.metadata.get("nbgrader"):
                changed = {key for key in reference.metadata["nbgrader"]
                           if cell.metadata["nbgrader"].get(key)
                           != reference.metadata["nbgrader"][key]} - {"checksum"}
                if changed:
                    notes.append(f"cell {gid!r}: restored nbgrader metadata "
                                 f"({', '.join(sorted(changed))})")
            cell.metadata["nbgrader"] = copy.deepcopy(reference.metadata["nbgrader"])
            cell.cell_type = reference.cell_type
            if cell.cell_type == "code":
                cell.setdefault("outputs", [])
                cell.setdefault("execution_count", None)
            if not reference.metadata["nbgrader"].get("solution"):
                cell.source = reference.source

    # 4. Missing cells come back where the release has them.
    position = {}
    for index, cell in enumerate(cells):
        if _grade_id(cell):
            position[_grade_id(cell)] = index
    previous_id = None
    for reference in release.cells:
        gid = _grade_id(reference)
        if gid is None:
            continue
        if gid not in position:
            insert_at = position[previous_id] + 1 if previous_id in position else 0
            restored = copy.deepcopy(reference)
            if reference.metadata["nbgrader"].get("solution"):
                notes.append(f"answer cell {gid!r} was missing: graded as unanswered")
            else:
                notes.append(f"cell {gid!r} was missing: put back")
            cells.insert(insert_at, restored)
            position = {_grade_id(c): i for i, c in enumerate(cells) if _grade_id(c)}
        previous_id = gid

    # 5. Each tests cell runs right after its exercise: after the answer cell
    #    and the read-only cells that directly follow it in the release.
    cells, moved = _tests_after_answers(cells, release)
    notes.extend(f"cell {gid!r} was out of place: moved after its answer" for gid in moved)

    repaired = nbformat.v4.new_notebook()
    repaired.metadata = copy.deepcopy(release.metadata)
    used: set[str] = set()
    for index, cell in enumerate(cells):
        cell_id = str(cell.get("id") or "")
        if not cell_id or cell_id in used or len(cell_id) > 64:
            cell_id = f"cell-{index}"
        used.add(cell_id)
        cell["id"] = cell_id
    repaired.cells = cells
    return repaired, notes


def _tests_after_answers(cells, release) -> tuple[list, list[str]]:
    """Move every tests cell after its answer (and the checks that follow it)."""
    release_ids = [_grade_id(cell) for cell in release.cells]
    follows: dict[str, list[str]] = {}
    for index, gid in enumerate(release_ids):
        cell = release.cells[index]
        if gid and cell.metadata["nbgrader"].get("grade") and \
                not cell.metadata["nbgrader"].get("solution"):
            before = []
            for earlier in reversed(release_ids[:index]):
                if earlier is None:
                    continue
                before.append(earlier)
                if release.cells[release_ids.index(earlier)].metadata["nbgrader"].get("solution"):
                    break
            follows[gid] = before          # the answer and the checks after it
    tests = {_grade_id(c): c for c in cells if _grade_id(c) in follows}
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
    return rest, sorted(moved)
