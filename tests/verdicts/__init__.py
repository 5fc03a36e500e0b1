"""The verdict suite: correct variants and seeded mistakes of every exercise.

Each lab has a module here, `tests/verdicts/<lab>.py`, with

- ``VARIANTS``: {exercise: [answer cell source, ...]}, at least three correct
  answers per exercise written differently from the solution and from each
  other (einsum vs reshape/transpose, loops vs vectorised, -1e9 vs -inf, ...);
- ``MISTAKES``: [Mistake(exercise, name, what, source), ...], at least five
  per exercise: the mistakes students really make. A mistake in a secondary
  property (no `get_config`, no argument check) names the tests cells it must
  fail in ``fails`` ("test_EncoderLayer__config"); it must keep the points of
  every other tests cell of its exercise;
- ``HIDDEN_ONLY``: {mistake name: reason}, the mistakes that the exercise's
  visible check may let through (inputs a student must not see, or what a
  check cannot afford); every other mistake must fail its visible check too.

`build(lab_id, folder)` turns them into submissions: one notebook per variant
index (variant k of every exercise that has one, the solution elsewhere: all
full marks), and one notebook per mistake, or per pair of mistakes in two independent
exercises (the solution everywhere but the mistaken exercises: points lost
there and nowhere else). tests/labs/test_verdicts.py grades them through `python -m
autograder grade` and checks each exercise.

Two exercises are independent when neither may call the other, directly or
through others (the lab's standins.toml): the grader tests each exercise
with stand-ins in place of those it calls, and neither one's visible check
runs the other, so a notebook with one mistake in each gives each its own
verdict. Pairing halves the mistake notebooks, and the suite's time with them.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.labs import LABS, checked_exercise
from autograder.grader.source import build_source_notebook

SOLUTION_BLOCK = re.compile(r"^[ \t]*### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION[^\n]*\n?",
                            re.S | re.M)


@dataclass(frozen=True)
class Mistake:
    exercise: str
    name: str
    what: str
    source: str
    #: For a secondary-property mistake: the grade ids of the tests cells it
    #: must fail; the exercise's other tests cells keep their points.
    fails: tuple[str, ...] = ()


def own_share(mistakes: list[Mistake], spread: dict[tuple[str, str], tuple[str, ...]],
              main: str = "test_{exercise}") -> list[Mistake]:
    """``mistakes`` with each one's own share declared (issue 47: a real answer
    that breaks one stated rule loses that rule's share and no more): a
    mistake without ``fails`` must fail its exercise's main tests cell
    (``main``) only. ``spread`` lists the exceptions by (exercise, name), each
    with the cells it fails and a comment beside it saying why (dropout at
    inference moves every output); an empty tuple there: it loses points,
    which cells depending on the Keras version (an answer that raises)."""
    from dataclasses import replace

    names = {(m.exercise, m.name) for m in mistakes}
    unknown = set(spread) - names
    if unknown:
        raise ValueError(f"own_share: spread names no mistake: {sorted(unknown)}")
    return [m if m.fails else replace(m, fails=spread.get((m.exercise, m.name),
                                                          (main.format(exercise=m.exercise),)))
            for m in mistakes]


def swap(source: str, *pairs: str) -> str:
    """``source`` with each ``old`` of ``(old, new, old, new, ...)`` replaced; each
    must occur exactly once (a mistake or sample written as a change to an
    answer fails loudly when that answer changes)."""
    if len(pairs) % 2:
        raise ValueError("swap(source, old, new, old, new, ...): pairs of texts")
    for old, new in zip(pairs[::2], pairs[1::2]):
        if source.count(old) != 1:
            raise ValueError(f"expected {old!r} exactly once in the answer, found it "
                             f"{source.count(old)} times: fix the swap().")
        source = source.replace(old, new)
    return source


def assert_visible_checks_catch(lab_id: str, caught: dict) -> None:
    """Both tiers' promise on visible checks: each mistake in ``caught`` (Mistake
    -> whether its exercise's visible check failed) is caught unless the lab's
    HIDDEN_ONLY lists it, and nothing HIDDEN_ONLY lists is caught."""
    module = spec(lab_id)
    hidden_only = getattr(module, "HIDDEN_ONLY", {})
    names = {m.name for m in module.MISTAKES}
    assert not set(hidden_only) - names, f"HIDDEN_ONLY names no mistake: {set(hidden_only) - names}"
    slipped = [f"{m.exercise}/{m.name}: {m.what}" for m, seen in caught.items()
               if not seen and m.name not in hidden_only]
    listed_but_caught = [m.name for m, seen in caught.items() if seen and m.name in hidden_only]
    assert not slipped, (f"{len(slipped)} mistakes pass their visible check (make the check "
                         "catch them, or list them in HIDDEN_ONLY with the reason):\n"
                         + "\n".join(slipped))
    assert not listed_but_caught, f"in HIDDEN_ONLY but caught by the visible check: {listed_but_caught}"


def spec(lab_id: str):
    """The lab's module of variants and mistakes, or None when it has none."""
    try:
        return importlib.import_module(f"solutions.{lab_id}.verdicts")
    except ModuleNotFoundError:
        return None


def solution_answers(lab_id: str) -> dict[str, str]:
    """The solution of each exercise: its answer cell as a student would fill it."""
    answers = {}
    for cell in build_source_notebook(LABS[lab_id]).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in LABS[lab_id].exercises:
            answers[meta["grade_id"]] = SOLUTION_BLOCK.sub(lambda m: m.group(1), cell.source)
    return answers


def solution_notebook(lab_id: str):
    """The student notebook of ``lab_id`` with every answer cell filled with the solution."""
    return fill(nbformat.read(LABS[lab_id].student_path, as_version=4), solution_answers(lab_id))


#: Appended to a solution to show what its student kernel really computed
#: with: the Keras backend and the device of a tensor made there.
DEVICE_CELL = """import keras
_t = keras.ops.ones((2, 2))
_d = getattr(_t, "device", None)
print("RAN ON:", keras.backend.backend(), _d() if callable(_d) else _d)"""


def solution_reporting_device(lab_id: str):
    """The solution notebook with DEVICE_CELL at the end."""
    notebook = solution_notebook(lab_id)
    notebook.cells.append(nbformat.v4.new_code_cell(DEVICE_CELL))
    return notebook


def device_reported(out: Path, lab_id: str, student: str = "solution") -> str:
    """What DEVICE_CELL printed in ``student``'s graded notebook under ``out``
    (`grade --out`), e.g. "torch cpu"; "(not graded)" or "(no output)" otherwise."""
    lab = LABS[lab_id]
    graded = Path(out) / "nbgrader" / "autograded" / student / lab_id / f"{lab.notebook}.ipynb"
    if not graded.exists():
        return "(not graded)"
    for output in nbformat.read(graded, as_version=4).cells[-1].get("outputs", []):
        text = output.get("text", "")
        if "RAN ON: " in text:
            return text.split("RAN ON: ", 1)[1].splitlines()[0].strip()
    return "(no output)"


def test_cell_points(lab_id: str) -> dict[str, dict[str, float]]:
    """{exercise: {tests cell grade id: points}} of the lab's source."""
    points: dict[str, dict[str, float]] = {}
    for cell in build_source_notebook(LABS[lab_id]).cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        if meta.get("grade") and not meta.get("solution") and grade_id.startswith("test_"):
            exercise = grade_id.removeprefix("test_").split("__")[0]
            points.setdefault(exercise, {})[grade_id] = float(meta.get("points", 0))
    return points


def failed_checks(out: Path, lab_id: str, student: str) -> set[str] | None:
    """The exercises whose visible check (the locked cell ``check_<exercise>``)
    raised in ``student``'s graded notebook under ``out``; None when not graded."""
    lab = LABS[lab_id]
    graded = Path(out) / "nbgrader" / "autograded" / student / lab_id / f"{lab.notebook}.ipynb"
    if not graded.exists():
        return None
    failed = set()
    for cell in nbformat.read(graded, as_version=4).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        exercise = checked_exercise(grade_id)
        if exercise and any(
                output.get("output_type") == "error" for output in cell.get("outputs", [])):
            failed.add(exercise)
    return failed


def fill(notebook, answers: dict[str, str]):
    """A copy of ``notebook`` with each answer cell whose grade id ``answers``
    names set to that answer, as a student fills it in: the one way every
    suite (verdicts, samples, hostile, ready, lab0, the student's path) does."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in answers:
            cell.source = answers[meta["grade_id"]].strip("\n")
    return notebook


def sampled_groups(lab_id: str) -> set[int]:
    """The indices (in `mistake_groups`) of the kernel tier's sample of mistake
    notebooks in ``make test``: for each exercise, a notebook holding one of its mistakes; pairs
    first, then a secondary-property mistake (``fails``) where the lab has one,
    so that both kinds are graded by the kernels. Every entry is also run in
    process (tests/labs/test_verdicts_inprocess.py), and ``make test-verdicts``
    grades every notebook."""
    groups = mistake_groups(lab_id)
    order = sorted(range(len(groups)), key=lambda i: (-len(groups[i]),
                                                       -any(m.fails for m in groups[i]), i))
    covered: set[str] = set()
    chosen: set[int] = set()
    for index in order:
        exercises = {m.exercise for m in groups[index]}
        if exercises - covered:
            chosen.add(index)
            covered |= exercises
    return chosen


#: Variant notebooks the kernel tier's sample grades (variant1: a correct answer of
#: every exercise through the kernels besides the samples' own; all of them in process).
SAMPLED_VARIANTS = 1


def build(lab_id: str, folder: Path, every: bool = True) -> dict[str, dict[str, str]]:
    """Write the lab's verdict submissions into ``folder``: every notebook
    (``every``), or the sample: the first `SAMPLED_VARIANTS` variant notebooks
    and the mistake notebooks of `sampled_groups`.

    Returns:
        {student id: {exercise: "kept" | "lost"}} for every notebook written.
    """
    lab, module = LABS[lab_id], spec(lab_id)
    solution = solution_answers(lab_id)
    missing = set(lab.exercises) - set(solution)
    assert not missing, f"{lab_id}: no solution cell found for {sorted(missing)}"
    folder.mkdir(parents=True, exist_ok=True)
    expected: dict[str, dict[str, str]] = {}

    def write(student_id: str, answers: dict[str, str], losing: set[str]) -> None:
        notebook = fill(nbformat.read(lab.student_path, as_version=4), {**solution, **answers})
        nbformat.write(notebook, folder / f"{student_id}.ipynb")
        expected[student_id] = {e: ("lost" if e in losing else "kept") for e in lab.exercises}

    most = max(len(v) for v in module.VARIANTS.values())
    if not every:
        most = min(most, SAMPLED_VARIANTS)
    for k in range(most):
        write(f"variant{k + 1}", {e: v[k] for e, v in module.VARIANTS.items() if k < len(v)},
              set())
    chosen = None if every else sampled_groups(lab_id)
    for index, group in enumerate(mistake_groups(lab_id)):
        if chosen is not None and index not in chosen:
            continue
        write(submission_id(group, index), {m.exercise: m.source for m in group},
              {m.exercise for m in group})
    return expected


def _reach(lab_id: str) -> dict[str, set[str]]:
    """exercise -> every exercise it may call, directly or through others."""
    from autograder.testkernel.standins import calls

    direct = calls(LABS[lab_id].folder)
    reach: dict[str, set[str]] = {}
    for exercise in LABS[lab_id].exercises:
        seen, todo = set(), list(direct.get(exercise, []))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(direct.get(name, []))
        reach[exercise] = seen
    return reach


def independent(lab_id: str, first: str, second: str) -> bool:
    """Neither exercise may call the other (see the module's docstring)."""
    reach = _reach(lab_id)
    return first != second and second not in reach[first] and first not in reach[second]


def mistake_groups(lab_id: str) -> list[tuple[Mistake, ...]]:
    """The lab's mistakes, two to a notebook where their exercises are
    independent, in the order of MISTAKES (each with the first later one
    that it can share a notebook with); alone otherwise."""
    reach = _reach(lab_id)
    waiting = list(spec(lab_id).MISTAKES)
    groups = []
    while waiting:
        first = waiting.pop(0)
        partner = next((m for m in waiting if m.exercise != first.exercise
                        and m.exercise not in reach[first.exercise]
                        and first.exercise not in reach[m.exercise]), None)
        if partner is None:
            groups.append((first,))
        else:
            waiting.remove(partner)
            groups.append((first, partner))
    return groups


#: The grader cuts a student id at 100 characters (autograder/grader/submissions/lms/ids.py).
MAX_ID = 100


def submission_id(group: tuple[Mistake, ...], index: int) -> str:
    """The student id of the notebook that holds ``group``'s mistakes (the
    ``index``-th group): a lone mistake's own id, a pair's number and names."""
    if len(group) == 1:
        return mistake_id(group[0])
    name = f"pair{index:03d}-" + "__".join(mistake.name for mistake in group)
    return name[:MAX_ID]


def submissions(lab_id: str) -> dict[str, str]:
    """mistake_id -> the student id of the notebook that holds the mistake."""
    return {mistake_id(mistake): submission_id(group, index)
            for index, group in enumerate(mistake_groups(lab_id)) for mistake in group}


def mistake_id(mistake: Mistake) -> str:
    return f"mistake-{mistake.exercise}-{mistake.name}"
