"""Lab 6's visible checks judge their own exercise only, and state every rule they grade.

Lab 6's `perplexity` may call the student's `next_token_loss`, and `generate`
calls the student's `top_k_filter` and `top_p_filter`. The grader tests each
with correct stand-ins for the others (solutions/lab6/standins.toml); the
visible checks do the same in their own way (`labkit.checks.relying_on`): a
failure of the part that runs another exercise, while that exercise fails its
own check, is shown but not raised, and `labkit.ready` says which exercise to
fix first. The verdict suite (tests/labs/test_verdicts.py) grades every mistake
through the CLI; here the lab's cells run in this process (no grader, no
demonstrations), which is enough to see which check cells raise (seconds).

Also: a `next_token_loss` computed in NumPy fails its own check, with a
message that names it (it would pass the values and crash `model.fit`), and
`top_p_filter`'s tie rule (equal probabilities, the lower id first) is in its
check.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from autograder.grader.source import build_source_notebook
from autograder.labs import LABS
from labkit import checks, readiness
from solutions.lab6 import verdicts
from tests.verdicts import fill

pytestmark = pytest.mark.skipif("lab6" not in LABS, reason="lab 6 is not in this kit")

#: Cells that train, time or only demonstrate: not needed by any check.
SKIPPED = ("colab_setup", "train_or_load", "training_curves", "ready_to_submit")


def _mistake(exercise: str, name: str) -> str:
    return next(m.source for m in verdicts.MISTAKES if (m.exercise, m.name) == (exercise, name))


def _run(answers: dict[str, str]) -> tuple[dict, dict[str, str], dict[str, str]]:
    """The lab's source with ``answers``, run cell by cell here (its hidden tests and
    demonstrations left out): (namespace, {check: error}, {check: what it printed})."""
    namespace: dict = {"__name__": "__main__"}
    failed, printed = {}, {}
    for cell in fill(build_source_notebook(LABS["lab6"]), answers).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type != "code" or grade_id in SKIPPED or \
                grade_id.startswith(("test_", "demo_")):
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(cell.source, f"<cell {grade_id}>", "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - a failing check is what is looked at
            failed[grade_id] = f"{type(error).__name__}: {error}"
        printed[grade_id] = out.getvalue()
    return namespace, failed, printed


@pytest.fixture(scope="module")
def mistaken():
    """One run with the loss averaged sentence by sentence and top-p dropping the
    crossing token, both correct elsewhere."""
    return _run({"next_token_loss": _mistake("next_token_loss", "mean-per-sentence"),
                 "top_p_filter": _mistake("top_p_filter", "crossing-dropped")})


def test_a_mistake_elsewhere_fails_only_its_own_check(mistaken):
    _, failed, printed = mistaken
    assert set(failed) == {"check_next_token_loss", "check_top_p_filter"}, failed
    for check, other in [("check_perplexity", "next_token_loss"),
                         ("check_generate", "top_p_filter")]:
        exercise = check.removeprefix("check_")
        assert f"Not counted against `{exercise}`: your `{other}` fails its own check" \
            in printed[check], printed[check]


def test_ready_says_which_exercise_to_fix_first(mistaken):
    namespace, _, _ = mistaken
    results = {result.name: result for result in readiness.run_checks(
        readiness.lab_checks("lab6")["exercises"], namespace)}
    assert results["next_token_loss"].status == results["top_p_filter"].status == \
        readiness.FAILED
    for exercise, other in [("perplexity", "next_token_loss"), ("generate", "top_p_filter")]:
        assert results[exercise].status == readiness.WAITING, results[exercise]
        assert f"waits for `{other}`" in results[exercise].line
    assert {name for name, result in results.items() if result.status == readiness.PASSED} \
        == {"RotaryEmbedding", "DecoderOnlyBlock", "MiniGPT", "top_k_filter"}


def test_the_checks_still_fail_a_wrong_perplexity_and_a_wrong_generate():
    _, failed, printed = _run({
        "perplexity": _mistake("perplexity", "mean-of-batch-means"),
        "generate": _mistake("generate", "top-p-before-top-k")})
    assert set(failed) == {"check_perplexity", "check_generate"}, failed
    assert "Not counted" not in printed["check_perplexity"] + printed["check_generate"]


def test_a_numpy_loss_and_top_p_ties_fail_their_own_checks():
    _, failed, _ = _run({"next_token_loss": _mistake("next_token_loss", "numpy-loss"),
                         "top_p_filter": _mistake("top_p_filter", "ties-higher-id-first")})
    assert set(failed) == {"check_next_token_loss", "check_top_p_filter"}, failed
    assert "next_token_loss is differentiable" in failed["check_next_token_loss"]
    assert "the lower id first" in failed["check_top_p_filter"]


def test_relying_on_raises_when_the_other_exercise_passes_its_check(monkeypatch):
    monkeypatch.setattr(checks, "_fails_own_check", lambda lab, name, scope: False)
    with pytest.raises(AssertionError, match="its own"):
        with checks.relying_on("perplexity", "next_token_loss", lab="lab6", scope={}):
            raise AssertionError("its own mistake")
    monkeypatch.setattr(checks, "_fails_own_check", lambda lab, name, scope: True)
    with pytest.raises(NotImplementedError):  # a stub is "not answered", never waiting
        with checks.relying_on("perplexity", "next_token_loss", lab="lab6", scope={}):
            raise NotImplementedError()
    with checks.relying_on("perplexity", "next_token_loss", lab="lab6", scope={}):
        raise AssertionError("the loss's mistake")
    assert checks.WAITING.pop("perplexity") == ["next_token_loss"]


def _variant(exercise: str, name: str) -> str:
    return next(source for source in verdicts.VARIANTS[exercise] if name in source)


def test_the_two_halves_are_named_by_the_check_and_the_hidden_feedback(monkeypatch):
    """GPT-NeoX's and keras-hub's layout (the two halves) fails its check and its values
    cell with a message that names it, and keeps the start's and the config's points."""
    from solutions.lab6 import hidden

    monkeypatch.setenv("AUTOGRADER_SEED", "lab6-checks")
    namespace, failed, _ = _run({"RotaryEmbedding": _mistake("RotaryEmbedding", "halves")})
    assert set(failed) == {"check_RotaryEmbedding"}, failed
    assert "the two halves rotated" in failed["check_RotaryEmbedding"]
    with pytest.raises(AssertionError, match="the two halves rotated .* Meta's LLaMA"):
        hidden.test_RotaryEmbedding(namespace["RotaryEmbedding"])
    hidden.test_RotaryEmbedding__start(namespace["RotaryEmbedding"])  # the positions are right
    hidden.test_RotaryEmbedding__config(namespace["RotaryEmbedding"])


def test_a_block_without_its_attention_weights_passes_and_the_plot_says_why_not():
    """The weights in last_attention_scores are for the plot only (not graded): a block
    that computes attention without them (ops.dot_product_attention) passes its check,
    is listed as passing, and the attention plot says what is missing."""
    fused = _variant("DecoderOnlyBlock", "ops.dot_product_attention(")
    namespace, failed, printed = _run({"DecoderOnlyBlock": fused})
    assert not failed, failed
    assert "does not keep its attention weights" in printed["check_DecoderOnlyBlock"]
    results = {result.name: result for result in readiness.run_checks(
        readiness.lab_checks("lab6")["exercises"], namespace)}
    assert results["DecoderOnlyBlock"].status == readiness.PASSED, results["DecoderOnlyBlock"]
    plot = next(cell.source for cell in build_source_notebook(LABS["lab6"]).cells
                if cell.metadata.get("nbgrader", {}).get("grade_id") == "demo_attention")
    namespace["language_model"] = namespace["MiniGPT"](
        vocab_size=28, num_layers=1, d_model=8, num_heads=2, dff=8)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(plot, "<cell demo_attention>", "exec"), namespace)
    assert "does not keep its attention weights in self.last_attention_scores; the plot " \
        "needs them" in out.getvalue(), out.getvalue()
