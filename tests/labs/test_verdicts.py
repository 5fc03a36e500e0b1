"""The verdict suite (tests/verdicts/): correct variants get full marks; each
seeded mistake loses points in its own exercise and nowhere else.

A mistake in a secondary property (``Mistake.fails``) loses exactly those
tests cells' points. Two more promises to students, that a correct variant
passes every visible check and that a mistake fails the visible check of its
own exercise too (unless the lab lists it in ``HIDDEN_ONLY`` with the
reason), are checked in process for every entry
(tests/labs/test_verdicts_inprocess.py): the grader does not run the visible
checks (they grade nothing), so the graded notebooks hold no verdict of them.

Every lab's variants and mistakes are graded in one batch through the real
CLI, under the Keras backend of the environment (KERAS_BACKEND, TensorFlow by
default); the table (exercise, variants passed, mistakes caught) is printed
at the end of the run.

This is the kernel tier. ``make test`` grades a sample: the first variant
notebook (a correct answer of every exercise, besides the samples' own that
tests/grader/test_grading.py grades) and the mistake notebooks (`verdicts.sampled_groups`: every exercise's
mistakes in at least one, pairs and secondary-property mistakes among them);
every entry also runs in process there (tests/labs/test_verdicts_inprocess.py, the
fast tier). ``make test-verdicts`` (VERDICT_SAMPLE=all) grades every notebook.
"""

from __future__ import annotations

import csv
import json
import os

import pytest

from autograder.labs import LABS
from autograder.testkernel import standins
from tests import verdicts
from tests.conftest import VERDICT_TABLE, run_cli

pytestmark = pytest.mark.verdicts

LABS_WITH_SPECS = [lab_id for lab_id in LABS if verdicts.spec(lab_id) is not None]
SEED = os.environ.get("VERDICT_SEED", "verdicts")
#: Parallel student kernels (2 on CI's 2 cores; more on a bigger grading machine).
JOBS = os.environ.get("VERDICT_JOBS", "2")
#: "all": every mistake notebook (make test-verdicts); otherwise the sample.
EVERY = os.environ.get("VERDICT_SAMPLE", "sample") == "all"


def graded_mistakes(lab_id: str) -> list:
    """The lab's mistakes whose notebooks this run grades."""
    where = verdicts.submissions(lab_id)
    if EVERY:
        return list(verdicts.spec(lab_id).MISTAKES)
    groups = verdicts.mistake_groups(lab_id)
    chosen = {verdicts.submission_id(groups[i], i) for i in verdicts.sampled_groups(lab_id)}
    return [m for m in verdicts.spec(lab_id).MISTAKES if where[verdicts.mistake_id(m)] in chosen]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{lab: (expected, {student: {exercise: (score, max, message)}}, grades rows,
    {student: {tests cell: score}})}, graded once."""
    cache = {}

    def grade(lab_id: str):
        if lab_id not in cache:
            folder = tmp_path_factory.mktemp(f"verdicts_{lab_id}")
            expected = verdicts.build(lab_id, folder / "in", every=EVERY)
            result = run_cli("grade", lab_id, str(folder / "in"), "--out", str(folder / "out"),
                             "--quiet", "--seed", SEED, "--jobs", JOBS, timeout=3600)
            assert result.returncode == 0, result.stderr[-3000:]
            rows = list(csv.DictReader(open(folder / "out" / "exercises.csv", encoding="utf-8")))
            got: dict[str, dict] = {}
            for row in rows:
                got.setdefault(row["student_id"], {})[row["exercise"]] = (
                    float(row["score"]), float(row["max_score"]), row["message"])
            grades = {row["student_id"]: row for row in
                      csv.DictReader(open(folder / "out" / "grades.csv", encoding="utf-8"))}
            out = folder / "out"
            cells = {path.stem: json.loads(path.read_text()).get("grades", {})
                     for path in (out / "results").glob("*.json")}
            # Each mistake's view of the notebook that holds it (alone or paired).
            where = verdicts.submissions(lab_id)
            for mistake, student in where.items():
                if student != mistake and student in expected:
                    for table in (got, cells):
                        if student in table:
                            table[mistake] = table[student]
                    grades[mistake] = grades.get(student, {})
            cache[lab_id] = (expected, got, grades, cells)
            _tabulate(lab_id, expected, got)
        return cache[lab_id]

    return grade


def _tabulate(lab_id, expected, got) -> None:
    module = verdicts.spec(lab_id)
    for exercise in LABS[lab_id].exercises:
        variants = [f"variant{k + 1}" for k in range(len(module.VARIANTS.get(exercise, [])))
                    if f"variant{k + 1}" in expected]
        passed = sum(1 for v in variants
                     if v in got and got[v][exercise][0] >= got[v][exercise][1])
        mistakes = [verdicts.mistake_id(m) for m in graded_mistakes(lab_id)
                    if m.exercise == exercise]
        where = verdicts.submissions(lab_id)
        caught = sum(1 for m in mistakes
                      if m in got and _as_expected(expected[where[m]], got[m]))
        # (the visible checks: not run by the grader, tabulated in process)
        VERDICT_TABLE.append((lab_id, exercise, passed, len(variants), caught, len(mistakes), None))


def _as_expected(expected: dict[str, str], got: dict[str, tuple]) -> bool:
    for exercise, verdict in expected.items():
        score, max_score, _ = got[exercise]
        if (verdict == "kept") != (score >= max_score):
            return False
    return True


@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_the_spec_is_complete(lab_id):
    module = verdicts.spec(lab_id)
    for exercise in LABS[lab_id].exercises:
        assert len(module.VARIANTS.get(exercise, [])) >= 3, f"{exercise}: fewer than 3 variants"
        assert sum(m.exercise == exercise for m in module.MISTAKES) >= 5, \
            f"{exercise}: fewer than 5 mistakes"
    names = [verdicts.mistake_id(m) for m in module.MISTAKES]
    assert len(names) == len(set(names)), "two mistakes share a name"
    solution = verdicts.solution_answers(lab_id)
    for exercise, sources in module.VARIANTS.items():
        for source in sources:
            assert source.strip() != solution[exercise].strip(), f"{exercise}: a variant is the solution"


@pytest.mark.slow
@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_variants_get_full_marks_and_mistakes_lose_points_only_in_their_exercise(graded, lab_id):
    expected, got, grades, _ = graded(lab_id)
    holds: dict[str, list[str]] = {}
    for mistake, student in verdicts.submissions(lab_id).items():
        holds.setdefault(student, []).append(mistake)
    wrong = []
    for student, verdict in sorted(expected.items()):
        if student.startswith("pair"):
            student_shown = f"{student} ({' + '.join(holds[student])})"
        else:
            student_shown = student
        if student not in got:
            wrong.append(f"{student_shown}: no row ({grades.get(student, {}).get('status')})")
            continue
        if grades[student]["status"] != "graded":
            wrong.append(f"{student_shown}: status {grades[student]['status']!r}")
        for exercise, want in verdict.items():
            score, max_score, message = got[student][exercise]
            if (want == "kept") != (score >= max_score):
                kind = "lost points" if want == "kept" else "kept full marks (mistake slipped through)"
                wrong.append(f"{student_shown}: {exercise} {kind}: {score:g}/{max_score:g} "
                             f"{message[:160]}")
    assert not wrong, f"{lab_id}: {len(wrong)} wrong verdicts:\n" + "\n".join(wrong)


@pytest.mark.slow
@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_secondary_property_mistakes_lose_only_that_property(graded, lab_id):
    """A missing get_config or argument check costs its own tests cells, never the
    computation's: every other tests cell of the exercise keeps its points."""
    _, _, _, cells = graded(lab_id)
    points = verdicts.test_cell_points(lab_id)
    wrong = []
    for mistake in graded_mistakes(lab_id):
        if not mistake.fails:
            continue
        student = verdicts.mistake_id(mistake)
        unknown = set(mistake.fails) - set(points[mistake.exercise])
        assert not unknown, f"{student}: no tests cell {sorted(unknown)} in {lab_id}"
        for grade_id, full in points[mistake.exercise].items():
            score = cells.get(student, {}).get(grade_id)
            want = 0.0 if grade_id in mistake.fails else full
            if score != want:
                wrong.append(f"{student}: {grade_id} scored {score}, expected {want:g}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_each_mistake_is_in_one_notebook_and_paired_ones_are_independent(lab_id):
    """Two mistakes share a notebook only where neither exercise may call the other
    (standins.toml, through any chain): each keeps a verdict of its own."""
    module = verdicts.spec(lab_id)
    groups = verdicts.mistake_groups(lab_id)
    placed = [verdicts.mistake_id(m) for group in groups for m in group]
    assert sorted(placed) == sorted(verdicts.mistake_id(m) for m in module.MISTAKES)
    ids = [verdicts.submission_id(group, index) for index, group in enumerate(groups)]
    assert len(set(ids)) == len(ids) and max(map(len, ids)) <= verdicts.MAX_ID, \
        "each notebook needs an id of its own that the grader keeps whole"
    calls = standins.calls(LABS[lab_id].folder)
    for group in groups:
        assert len(group) in (1, 2)
        if len(group) == 2:
            first, second = (m.exercise for m in group)
            assert first != second
            chain, todo = set(), [first, second]
            while todo:                       # everything either one may reach
                name = todo.pop()
                for called in calls.get(name, []):
                    assert called not in (first, second), f"{group}: {name} calls {called}"
                    if called not in chain:
                        chain.add(called)
                        todo.append(called)
