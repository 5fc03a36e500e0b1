"""The verdict suite (tests/verdicts/): correct variants get full marks; each
seeded mistake loses points in its own exercise and nowhere else.

Every lab's variants and mistakes are graded in one batch through the real
CLI, under the Keras backend of the environment (KERAS_BACKEND, TensorFlow by
default); the table (exercise, variants passed, mistakes caught) is printed
at the end of the run.
"""

from __future__ import annotations

import csv
import os

import pytest

from autograder.labs import LABS
from tests import verdicts
from tests.conftest import VERDICT_TABLE, run_cli

LABS_WITH_SPECS = [lab_id for lab_id in LABS if verdicts.spec(lab_id) is not None]
SEED = os.environ.get("VERDICT_SEED", "verdicts")
#: Parallel student kernels (2 on CI's 2 cores; more on a bigger grading machine).
JOBS = os.environ.get("VERDICT_JOBS", "2")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{lab: (expected, {student: {exercise: (score, max, message)}}, grades rows)}, graded once."""
    cache = {}

    def grade(lab_id: str):
        if lab_id not in cache:
            folder = tmp_path_factory.mktemp(f"verdicts_{lab_id}")
            expected = verdicts.build(lab_id, folder / "in")
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
            cache[lab_id] = (expected, got, grades)
            _tabulate(lab_id, expected, got)
        return cache[lab_id]

    return grade


def _tabulate(lab_id, expected, got) -> None:
    module = verdicts.spec(lab_id)
    for exercise in LABS[lab_id].exercises:
        variants = [f"variant{k + 1}" for k in range(len(module.VARIANTS.get(exercise, [])))]
        passed = sum(1 for v in variants
                     if v in got and got[v][exercise][0] >= got[v][exercise][1])
        mistakes = [verdicts.mistake_id(m) for m in module.MISTAKES if m.exercise == exercise]
        caught = sum(1 for m in mistakes if m in got and _as_expected(expected[m], got[m]))
        VERDICT_TABLE.append((lab_id, exercise, passed, len(variants), caught, len(mistakes)))


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


@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_variants_get_full_marks_and_mistakes_lose_points_only_in_their_exercise(graded, lab_id):
    expected, got, grades = graded(lab_id)
    wrong = []
    for student, verdict in sorted(expected.items()):
        if student not in got:
            wrong.append(f"{student}: no row ({grades.get(student, {}).get('status')})")
            continue
        if grades[student]["status"] != "graded":
            wrong.append(f"{student}: status {grades[student]['status']!r}")
        for exercise, want in verdict.items():
            score, max_score, message = got[student][exercise]
            if (want == "kept") != (score >= max_score):
                kind = "lost points" if want == "kept" else "kept full marks (mistake slipped through)"
                wrong.append(f"{student}: {exercise} {kind}: {score:g}/{max_score:g} {message[:160]}")
    assert not wrong, f"{lab_id}: {len(wrong)} wrong verdicts:\n" + "\n".join(wrong)
