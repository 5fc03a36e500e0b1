"""The verdict suite's fast tier: every variant and every mistake of every lab,
their hidden tests run in this machine's processes, no nbgrader, no kernels
(tests/verdicts/inprocess.py says how). It checks the promises the kernel
tier (tests/labs/test_verdicts.py) checks on graded notebooks:

- a correct variant gets full marks in every tests cell of its exercise and
  passes its visible check;
- a mistake loses points in its exercise; a secondary-property mistake
  (``Mistake.fails``) loses exactly those tests cells and keeps the others;
- a mistake fails its exercise's visible check too, unless the lab's
  ``HIDDEN_ONLY`` gives the reason it may not.

"Nowhere else" needs the other exercises graded beside it with stand-ins, which
only the kernels show: the kernel tier keeps a sample of every lab in
``make test`` and all of it in ``make test-verdicts``. This tier runs in ``make
test-fast`` (2 worker processes, VERDICT_JOBS; about two minutes on two cores).
"""

from __future__ import annotations

import os

import pytest

from autograder.labs import LABS
from tests import verdicts
from tests.conftest import INPROCESS_TABLE
from tests.verdicts import inprocess

pytestmark = pytest.mark.verdicts

LABS_WITH_SPECS = [lab_id for lab_id in LABS if verdicts.spec(lab_id) is not None]
JOBS = int(os.environ.get("VERDICT_JOBS", "2"))


@pytest.fixture(scope="module")
def outcomes():
    """{(lab, entry, exercise): Outcome} of every lab's entries, run once."""
    found = inprocess.run_all(LABS_WITH_SPECS, JOBS)
    for lab_id in LABS_WITH_SPECS:
        _tabulate(lab_id, found)
    return found


def _of(outcomes, lab_id: str, kind: str):
    return {key: outcome for key, outcome in outcomes.items()
            if key[0] == lab_id and key[1].startswith(kind)}


def _tabulate(lab_id: str, outcomes) -> None:
    module = verdicts.spec(lab_id)
    hidden_only = getattr(module, "HIDDEN_ONLY", {})
    for exercise in LABS[lab_id].exercises:
        variants = [o for (lab, name, ex), o in outcomes.items()
                    if lab == lab_id and ex == exercise and name.startswith("variant")]
        mistakes = [(m, outcomes[(lab_id, verdicts.mistake_id(m), exercise)])
                    for m in module.MISTAKES if m.exercise == exercise]
        INPROCESS_TABLE.append((
            lab_id, exercise,
            sum(o.full and not o.check_error for o in variants), len(variants),
            sum(_caught(m, o) for m, o in mistakes), len(mistakes),
            sum(bool(o.check_error) or m.name in hidden_only for m, o in mistakes)))


def _caught(mistake, outcome) -> bool:
    """The mistake loses points where it should: in its exercise, or exactly in
    the tests cells it names (the others full)."""
    if mistake.fails:
        return all((outcome.scores[cell] == 0) == (cell in mistake.fails)
                   for cell in outcome.points) and set(mistake.fails) <= set(outcome.points)
    return not outcome.full


@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_every_variant_gets_full_marks_and_passes_its_visible_check(outcomes, lab_id):
    wrong = []
    for (_, name, exercise), outcome in sorted(_of(outcomes, lab_id, "variant").items()):
        for cell, points in outcome.points.items():
            if outcome.scores[cell] < points:
                wrong.append(f"{exercise} {name}: {cell} {outcome.scores[cell]:g}/{points:g} "
                             f"{outcome.messages.get(cell, '')[:300]}")
        if outcome.check_error:
            wrong.append(f"{exercise} {name}: the visible check raised "
                         f"{outcome.check_error[:300]}")
    assert not wrong, f"{lab_id}: {len(wrong)} correct answers marked down:\n" + "\n".join(wrong)


@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_every_mistake_loses_points_where_it_should(outcomes, lab_id):
    wrong = []
    for mistake in verdicts.spec(lab_id).MISTAKES:
        outcome = outcomes[(lab_id, verdicts.mistake_id(mistake), mistake.exercise)]
        if not _caught(mistake, outcome):
            cells = ", ".join(f"{cell} {outcome.scores.get(cell, 0):g}/{points:g}"
                              for cell, points in outcome.points.items())
            want = (f"0 in {', '.join(mistake.fails)} only" if mistake.fails
                    else "points lost")
            wrong.append(f"{mistake.exercise}/{mistake.name} ({mistake.what}): expected {want}, "
                         f"got {cells}")
    assert not wrong, f"{lab_id}: {len(wrong)} mistakes misjudged:\n" + "\n".join(wrong)


@pytest.mark.parametrize("lab_id", LABS_WITH_SPECS)
def test_every_mistake_fails_its_visible_check_unless_hidden_only(outcomes, lab_id):
    verdicts.assert_visible_checks_catch(lab_id, {
        mistake: bool(outcomes[(lab_id, verdicts.mistake_id(mistake), mistake.exercise)]
                      .check_error)
        for mistake in verdicts.spec(lab_id).MISTAKES})
