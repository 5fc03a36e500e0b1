"""Sample submissions: one interface for every lab, the builders written once.

Each lab's folder has ``solutions/<lab>/samples.py``: realistic submissions,
written as a student would fill the answer cells, that `make demo`, the CLI
tests and tests/grader/test_grading.py grade. It holds data only:

- ``CORRECT``: {exercise: answer cell}, right answers written differently from
  the solution;
- ``VARIANTS``: {name: (exercise, answer cell)}, more right answers, written
  yet another way;
- ``MISTAKES``: {name: mistake(exercise, answer cell, fails)}, the mistakes
  students really make, each with the tests cells it fails (``fails`` empty:
  every tests cell of its exercise);
- ``SAMPLES``: {file: {names of VARIANTS and MISTAKES}}: each sample is CORRECT
  with those answers swapped in (at most one per exercise);
- ``UNTOUCHED``: the file name of the released notebook as downloaded;
  ``COLAB``: a student folder that gets an all-correct copy saved by Colab
  ("Copy of <notebook>.ipynb"), or None; ``CUT_SHORT``: the file name of an
  all-correct download cut in half (not valid JSON), or None;
- ``FEEDBACK_WORDS``: [(student, exercise, words)]: words the failure message
  of that exercise must contain; ``FEEDBACK_PAGE_WORDS``: [(student, words)]:
  words that student's feedback page must show.

The points are not restated there: `cell_points(lab_id)` reads each tests
cell's from the ``@graded`` declarations of the lab's hidden tests
(solutions/<lab>/hidden.py, from which the release writes the source's tests
cells), and `points(lab_id)` adds them up by exercise. `expectations(lab_id)`
says what each sample must score, exercise by exercise, from those points and
the cells each mistake fails: nothing is restated by hand. `build(lab_id)` writes
data/sample_submissions/<lab>/; `python data/sample_submissions/build.py`
rebuilds every lab's.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from types import ModuleType

import nbformat

from autograder import hidden
from autograder.labs import KIT_ROOT, LABS
from tests.verdicts import Mistake, fill
from tests.verdicts import swap as swap  # the samples' swap is the verdicts'

#: Where the samples of each lab are written: <here>/<lab>/.
SAMPLES_ROOT = KIT_ROOT / "data" / "sample_submissions"


def mistake(exercise: str, source: str, fails: tuple[str, ...] = ()) -> Mistake:
    """A sample's mistake, as the verdict suite's `Mistake` (one type for both):
    its wrong answer cell and the tests cells it fails (none named: all of its
    exercise's). Its name is its key in the lab's ``MISTAKES``."""
    return Mistake(exercise, name="", what="a sample's mistake", source=source, fails=fails)


#: What every solutions/<lab>/samples.py defines (this module's docstring says what each is).
INTERFACE = ("CORRECT", "VARIANTS", "MISTAKES", "SAMPLES", "UNTOUCHED", "COLAB", "CUT_SHORT",
             "FEEDBACK_WORDS", "FEEDBACK_PAGE_WORDS")


def load(lab_id: str) -> ModuleType:
    """solutions/<lab_id>/samples.py, checked to define the whole interface."""
    module = importlib.import_module(f"solutions.{lab_id}.samples")
    missing = [name for name in INTERFACE if not hasattr(module, name)]
    if missing:
        raise AttributeError(
            f"solutions/{lab_id}/samples.py lacks {', '.join(missing)}; every lab's samples "
            f"define {', '.join(INTERFACE)} (see tests/samples.py; None or an empty "
            f"list/dict where a lab has none).")
    return module


def labs_with_samples() -> list[str]:
    """The labs whose folder has a samples.py, in curriculum order."""
    return [lab_id for lab_id, lab in LABS.items() if (lab.folder / "samples.py").exists()]


def cell_points(lab_id: str) -> dict[str, dict[str, float]]:
    """{exercise: {tests cell: points}}, exercises in curriculum order and cells in
    the order they are defined, as the lab's hidden tests declare them
    (``@graded(exercise, points)``); the release writes the source's tests cells
    from these (tests/grader/test_grading.py checks the source against them)."""
    module = hidden.load(lab_id)
    if module is None:
        raise FileNotFoundError(f"solutions/{lab_id}/hidden.py: {lab_id} has no hidden tests")
    cells: dict[str, dict[str, float]] = {exercise: {} for exercise in LABS[lab_id].exercises}
    for name, test in hidden.tests_of(module).items():
        declared = hidden.declaration(test)
        if declared.exercise not in cells:
            raise ValueError(f"solutions/{lab_id}/hidden.py: {name} grades {declared.exercise!r}, "
                             f"not an exercise of {lab_id} ({', '.join(cells)})")
        cells[declared.exercise][name] = float(declared.points)
    return cells


def points(lab_id: str) -> dict[str, float]:
    """{exercise: points}, in curriculum order: its tests cells' points added up."""
    return {exercise: sum(cells.values()) for exercise, cells in cell_points(lab_id).items()}


def colab_file(lab_id: str) -> str | None:
    """The path, in the lab's samples folder, of the copy saved by Colab, or None."""
    samples = load(lab_id)
    return f"{samples.COLAB}/Copy of {LABS[lab_id].notebook}.ipynb" if samples.COLAB else None


def student_of(sample: str) -> str:
    """The student id the grader gives a sample file: its folder, else its stem."""
    return sample.split("/")[0].removesuffix(".ipynb")


def answers(lab_id: str, changes: set[str]) -> dict[str, str]:
    """CORRECT with the answers of ``changes`` (VARIANTS or MISTAKES names) swapped in."""
    samples = load(lab_id)
    replacements = {**samples.VARIANTS, **samples.MISTAKES}
    filled = dict(samples.CORRECT)
    changed = {}
    for name in sorted(changes):
        change = replacements[name]
        exercise, source = ((change.exercise, change.source) if isinstance(change, Mistake)
                            else change)
        if exercise in changed:
            raise ValueError(f"{lab_id}: {name!r} and {changed[exercise]!r} both answer "
                             f"{exercise}; a sample holds at most one change per exercise.")
        changed[exercise] = name
        filled[exercise] = source
    return filled


def _failed_cells(lab_id: str, changes: set[str], cells: dict) -> set[str]:
    """The tests cells the mistakes among ``changes`` fail."""
    mistakes = load(lab_id).MISTAKES
    failed = set()
    for name in changes & set(mistakes):
        exercise, fails = mistakes[name].exercise, mistakes[name].fails
        unknown = set(fails) - set(cells[exercise])
        if unknown:
            raise ValueError(f"{lab_id}: mistake {name!r} names tests cells {sorted(unknown)} "
                             f"that {exercise} does not have (it has {sorted(cells[exercise])}).")
        failed |= set(fails or cells[exercise])
    return failed


def expectations(lab_id: str) -> dict[str, dict[str, float]]:
    """{sample file: {exercise: the points it must score}}: full marks where it is
    right, the points of the tests cells its mistakes do not fail where it is
    wrong, 0 everywhere for the untouched notebook and the download cut short."""
    samples, exercises = load(lab_id), LABS[lab_id].exercises
    cells = cell_points(lab_id)
    full = {exercise: sum(cells[exercise].values()) for exercise in exercises}
    expected = {}
    for name, changes in samples.SAMPLES.items():
        failed = _failed_cells(lab_id, set(changes), cells)
        expected[name] = {exercise: sum(value for cell, value in cells[exercise].items()
                                        if cell not in failed) for exercise in exercises}
    expected[samples.UNTOUCHED] = {exercise: 0.0 for exercise in exercises}
    if samples.CUT_SHORT:
        expected[samples.CUT_SHORT] = {exercise: 0.0 for exercise in exercises}
    if samples.COLAB:
        expected[colab_file(lab_id)] = dict(full)
    return expected


def _saved_by_colab(notebook, name: str):
    """``notebook`` with the metadata Colab adds when a student saves a copy."""
    notebook.metadata["colab"] = {"provenance": [], "toc_visible": True, "name": name}
    notebook.metadata["accelerator"] = "GPU"
    for cell in notebook.cells:
        cell.metadata["id"] = cell.get("id", "x")
        cell.metadata.setdefault("colab", {"base_uri": "https://localhost:8080/"})
    return notebook


def build(lab_id: str, folder: Path | None = None) -> dict[str, dict[str, float]]:
    """Write the samples of ``lab_id`` afresh into ``folder`` (default:
    data/sample_submissions/<lab_id>/); return expectations(lab_id)."""
    samples, lab = load(lab_id), LABS[lab_id]
    student = nbformat.read(lab.student_path, as_version=4)
    folder = Path(folder or SAMPLES_ROOT / lab_id)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, changes in samples.SAMPLES.items():
        nbformat.write(fill(student, answers(lab_id, set(changes))), folder / name)
    nbformat.write(student, folder / samples.UNTOUCHED)
    if samples.COLAB:
        path = folder / colab_file(lab_id)
        path.parent.mkdir()
        nbformat.write(_saved_by_colab(fill(student, samples.CORRECT), path.name), path)
    if samples.CUT_SHORT:
        text = nbformat.writes(fill(student, samples.CORRECT))
        (folder / samples.CUT_SHORT).write_text(text[: len(text) // 2])
    return expectations(lab_id)


def build_all(lab_ids: list[str] | None = None) -> None:
    """Build the samples of ``lab_ids`` (default: every lab with a samples.py) and
    print what each sample must score."""
    for lab_id in lab_ids or labs_with_samples():
        total = sum(points(lab_id).values())
        for sample, scores in build(lab_id).items():
            print(f"{lab_id}  {sample:<48} {sum(scores.values()):g} / {total:g}")
