"""Grade every lab's samples through the real CLI, then check them from every side.

For each lab with a samples.py (tests/samples.py says what it holds), one
batch: the lab's samples (data/sample_submissions/<lab>/) and its solution,
graded once for the module by `python -m autograder grade` (a notebook takes
a few seconds: two kernels and TensorFlow's import). Then: the solution gets
full marks, the untouched notebook 0 without a grader failure, every row is
named as in the curriculum, each sample scores exactly what its mistakes
leave it, the feedback names the mistakes and never shows the hidden tests.
Lab 1's batch also holds a hostile notebook and notebooks damaged the ways
GRADING.md lists (the checks at the end).

The checks that need no grading (points, samples up to date) are fast; the
others are marked slow (`make test-fast` leaves them out). `-k lab3` runs
one lab's.
"""

from __future__ import annotations

import ast
import csv
import filecmp
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.kernels.isolation.bubblewrap import bubblewrap_works
from autograder.grader.source import build_source_notebook, write_notebook
from autograder.labs import LABS
from tests import samples as samples_of
from tests.conftest import ROOT, run_cli
from tests.verdicts import test_cell_points as source_cell_points

LAB_IDS = samples_of.labs_with_samples()
slow = pytest.mark.slow


def _per_lab(attribute: str) -> list:
    """(lab, *entry) for each entry of every lab's samples.<attribute>."""
    return [pytest.param(lab, *entry, id=f"{lab}-{'-'.join(map(str, entry))}")
            for lab in LAB_IDS for entry in getattr(samples_of.load(lab), attribute)]


SAMPLE_FILES = [pytest.param(lab, sample, id=f"{lab}-{sample}")
                for lab in LAB_IDS for sample in sorted(samples_of.expectations(lab))]


def _points(lab: str) -> dict[str, float]:
    return samples_of.points(lab)


#: The least share of an exercise's points that its main computation (the tests
#: cell ``test_<exercise>``) carries, where the exercise is graded in parts: a kit-wide
#: rule, not a lab's fact (lab 6's ``generate`` and ``DecoderOnlyBlock`` are at 3/7).
MAIN_SHARE = 0.4


# -- grading each lab's batch once --------------------------------------------------------------
def _grade(lab: str, batch: Path, out: Path) -> dict:
    """Grade ``batch`` as ``lab``; the CSV rows by student (and exercise)."""
    result = run_cli("grade", lab, str(batch), "--out", str(out), "--quiet", "--seed", "tests")
    assert result.returncode == 0, result.stderr[-3000:]
    grades = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    exercises = {}
    for row in csv.DictReader(open(out / "exercises.csv")):
        exercises.setdefault(row["student_id"], {})[row["exercise"]] = row
    return {"out": out, "grades": grades, "exercises": exercises, "stdout": result.stdout}


@pytest.fixture(scope="module")
def grade_lab(tmp_path_factory):
    """lab -> its graded batch; each lab graded once for the module, on first use
    (a failed grading is reported again, not retried, by every test that needs it)."""
    results: dict[str, dict | str] = {}

    def graded(lab: str) -> dict:
        if lab not in results:
            batch = tmp_path_factory.mktemp(f"{lab}-submissions")
            out = tmp_path_factory.mktemp(f"{lab}-out")
            shutil.copytree(samples_of.SAMPLES_ROOT / lab, batch, dirs_exist_ok=True)
            write_notebook(build_source_notebook(LABS[lab]), batch / "solution.ipynb")
            EXTRA_SUBMISSIONS.get(lab, lambda batch, out: None)(batch, out)
            try:
                results[lab] = _grade(lab, batch, out)
            except AssertionError as error:
                results[lab] = f"grading the {lab} batch failed: {error}"
        if isinstance(results[lab], str):
            pytest.fail(results[lab])
        return results[lab]

    return graded


@pytest.fixture
def graded(lab, grade_lab) -> dict:
    return grade_lab(lab)


# -- fast: the lab's points and samples ---------------------------------------------------------
@pytest.mark.parametrize("lab", LAB_IDS)
def test_points_follow_the_curriculum_and_the_source(lab):
    """Every exercise of the curriculum has its hidden tests, the source's tests cells
    carry the points they declare, and each exercise's main computation is worth the
    largest part of it."""
    exercises = LABS[lab].exercises
    assert tuple(samples_of.load(lab).CORRECT) == exercises
    cells = samples_of.cell_points(lab)
    assert tuple(cells) == exercises and all(cells.values()), \
        f"exercises without hidden tests: {[e for e, points in cells.items() if not points]}"
    assert source_cell_points(lab) == cells, \
        "the source's tests cells differ from the @graded declarations of the hidden tests"
    for exercise, points in cells.items():
        main = points[f"test_{exercise}"]
        assert main >= MAIN_SHARE * sum(points.values()), (exercise, points)
        assert all(main > value for cell, value in points.items() if cell != f"test_{exercise}"), \
            (exercise, points)


@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_committed_samples_are_up_to_date(lab, tmp_path):
    samples_of.build(lab, tmp_path)
    committed = samples_of.SAMPLES_ROOT / lab
    stale = [str(path.relative_to(tmp_path)) for path in sorted(tmp_path.rglob("*.ipynb"))
             if not (committed / path.relative_to(tmp_path)).is_file()
             or not filecmp.cmp(path, committed / path.relative_to(tmp_path), shallow=False)]
    extra = sorted({str(path.relative_to(committed)) for path in committed.rglob("*.ipynb")}
                   - {str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*.ipynb")})
    assert not stale and not extra, (
        f"data/sample_submissions/{lab} differs from what solutions/{lab}/samples.py "
        f"builds (stale: {stale}, not built: {extra}); run "
        f"`python data/sample_submissions/build.py {lab}` and commit the notebooks.")


# -- slow: the graded batch ---------------------------------------------------------------------
@slow
@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_solution_scores_full_marks(lab, graded):
    total = sum(_points(lab).values())
    row = graded["grades"]["solution"]
    assert (float(row["score"]), float(row["max_score"]), row["status"]) == \
        (total, total, "graded"), graded["exercises"]["solution"]


@slow
@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_untouched_notebook_scores_zero_without_a_grader_failure(lab, graded):
    student = samples_of.student_of(samples_of.load(lab).UNTOUCHED)
    row = graded["grades"][student]
    assert (float(row["score"]), row["status"]) == (0, "graded"), row
    messages = {r["message"] for r in graded["exercises"][student].values()}
    assert all("NotImplementedError" in message for message in messages), messages


@slow
@pytest.mark.parametrize("lab", LAB_IDS)
def test_every_exercise_has_a_row_named_as_in_the_curriculum(lab, graded):
    """Every student has one row per exercise, in curriculum order, with its points."""
    assert graded["exercises"], "no exercise rows at all"
    for student, rows in graded["exercises"].items():
        assert list(rows) == list(LABS[lab].exercises), student
        for name, row in rows.items():
            assert float(row["max_score"]) == _points(lab)[name], (student, name)


@slow
@pytest.mark.parametrize("lab, sample", SAMPLE_FILES)
def test_samples_lose_points_exactly_where_they_are_wrong(lab, sample, graded):
    """Full marks where a sample is right; where it is wrong, exactly the points of
    the tests cells its mistakes do not fail (0 when they fail all), with a message."""
    expected = samples_of.expectations(lab)[sample]
    student = samples_of.student_of(sample)
    rows = graded["exercises"][student]
    for exercise, want in expected.items():
        score = float(rows[exercise]["score"])
        assert score == pytest.approx(want), (student, exercise, score, want,
                                              rows[exercise]["message"])
        if want < _points(lab)[exercise]:
            assert rows[exercise]["message"], (student, exercise)
    status = graded["grades"][student]["status"]
    if sample == samples_of.load(lab).CUT_SHORT:
        assert status.startswith("invalid notebook"), status
    else:
        assert status == "graded", status


@slow
@pytest.mark.parametrize("lab", [lab for lab in LAB_IDS if samples_of.load(lab).CUT_SHORT])
def test_an_unreadable_notebook_gets_a_row_with_the_reason(lab, graded):
    row = graded["grades"][samples_of.student_of(samples_of.load(lab).CUT_SHORT)]
    assert float(row["score"]) == 0
    assert row["status"].startswith("invalid notebook"), row["status"]


@slow
@pytest.mark.parametrize("lab, student, exercise, words", _per_lab("FEEDBACK_WORDS"))
def test_feedback_names_the_mistake(lab, student, exercise, words, graded):
    message = graded["exercises"][student][exercise]["message"]
    assert words in message, (student, exercise, message)


@slow
@pytest.mark.parametrize("lab, student, words", _per_lab("FEEDBACK_PAGE_WORDS"))
def test_feedback_pages_give_hints(lab, student, words, graded):
    assert words in (graded["out"] / "feedback" / f"{student}.html").read_text()


@slow
@pytest.mark.parametrize("lab", LAB_IDS)
def test_feedback_never_shows_hidden_test_source(lab, graded):
    """No feedback page shows a line of the lab's hidden tests."""
    source = LABS[lab].source_path.read_text()
    hidden_lines = {line.strip() for block in re.findall(
        r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", source, re.S)
        for line in block.splitlines() if len(line.strip()) > 20}
    module = LABS[lab].folder / "hidden.py"   # the hidden tests as functions (autograder.hidden)
    if module.is_file():
        text = module.read_text()
        docstrings = {line.strip() for line in re.findall(r'"""(.*?)"""', text, re.S)
                      for line in line.splitlines()}
        hidden_lines |= {line.strip() for line in text.splitlines()
                         if len(line.strip()) > 20 and line.strip() not in docstrings
                         and not line.strip().startswith(('"""', "@graded", "def test_"))}
    assert hidden_lines, f"{lab}: no hidden test lines found to look for"
    pages = list((graded["out"] / "feedback").glob("*.html"))
    assert pages, "no feedback pages"
    for page in pages + [graded["out"] / "properties.csv"]:
        text = page.read_text()
        leaked = [line for line in hidden_lines if line in text]
        assert not leaked, f"{page.name} shows hidden test lines: {leaked[:2]}"


@slow
@pytest.mark.parametrize("lab", LAB_IDS)
def test_properties_add_up_to_the_exercises_and_each_has_its_line(lab, graded):
    """properties.csv: one row per tests cell of each graded notebook's
    exercises, with the sentence students read, adding up to exercises.csv
    (score and points) for every student; the feedback page has one line per
    property, and no escape code (cuts: tests/grader/test_messages.py)."""
    out = graded["out"]
    rows = list(csv.DictReader(open(out / "properties.csv", encoding="utf-8")))
    cells = samples_of.cell_points(lab)
    summed: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        assert row["sentence"] and row["property"] in cells[row["exercise"]], row
        assert float(row["max_score"]) == cells[row["exercise"]][row["property"]], row
        assert (row["message"] == "") == (row["score"] == row["max_score"]), row
        total = summed.setdefault((row["student_id"], row["exercise"]), [0.0, 0.0])
        total[0] += float(row["score"])
        total[1] += float(row["max_score"])
    for student, exercises in graded["exercises"].items():
        if not graded["grades"][student]["status"].startswith(("graded", "partly")):
            continue
        for exercise, row in exercises.items():
            assert summed[(student, exercise)] == pytest.approx(
                [float(row["score"]), float(row["max_score"])]), (student, exercise)
        page = (out / "feedback" / f"{student}.html").read_text()
        assert page.count('-line"><span') == sum(r["student_id"] == student for r in rows)
        text = re.sub(r"<[^>]+>", "", page)
        assert not re.search(r"\x1b|\?\[\d+m", text), student


@slow
def test_grace_reads_the_kits_explanation_then_one_clean_error_said_once(grade_lab):
    """Issue 48's example: lab 4's grace, whose cross-attention takes its
    queries from the context: Keras's InvalidArgumentError met by two tests,
    told once, after the kit's explanation, TensorFlow's internals folded."""
    graded = grade_lab("lab4")
    message = graded["exercises"]["grace"]["DecoderLayer"]["message"]
    first = message.splitlines()[0]
    assert first.startswith("Here T = 4 target tokens and S = 6 source tokens: the "
                            "cross-attention's queries come from x"), first
    assert "raised InvalidArgumentError: Incompatible shapes" in first, first
    assert first.endswith("(the same error in 2 tests)"), first
    assert message.count("InvalidArgumentError") == 1, message
    for internal in ("function_node", "Arguments received", "[Op:", "?[", "(cut)"):
        assert internal not in message, (internal, message)
    page = (graded["out"] / "feedback" / "grace.html").read_text()
    folded = re.findall(r"<details><summary>details</summary>(.*?)</details>", page, re.S)
    assert any("Arguments received by DecoderLayer.call()" in fold for fold in folded)
    assert "The same error as in" in page
    report = (graded["out"] / "report.html").read_text()
    assert "Pass rate per property" in report and "with both padding masks" in report


@slow
@pytest.mark.parametrize("lab", LAB_IDS)
def test_report_and_feedback_files_exist(lab, graded):
    out = graded["out"]
    assert (out / "report.html").read_text().count("<svg") >= 2
    assert {page.stem for page in (out / "feedback").glob("*.html")} == set(graded["grades"])


@slow
def test_a_failed_matrix_exercise_shows_its_picture_on_public_values_only(grade_lab):
    """lab4's grace takes the cross-attention's queries from the encoder: her
    DecoderLayer feedback shows the cross-attention weights on
    check_DecoderLayer's example beside the reference's, the mistake named,
    and nothing else: the same picture drawn here from the public example
    alone (her weights there are those of queries and keys swapped) is the
    one on her page (autograder.grader.pictures). No other exercise of hers
    lost points, and a sample without a mistake in DecoderLayer has no picture."""
    from autograder.grader.pictures import drawn, pictures_in, svg_of, text_of
    from autograder.testkernel.pictures import declarations, encode

    graded = grade_lab("lab4")
    figures = pictures_in((graded["out"] / "feedback" / "grace.html").read_text())
    assert len(figures) == 1 and "queries and keys swapped" in text_of(figures[0]), figures
    module = declarations("lab4")
    spec = module.decoder_picture(module.swapped_scores(), "InvalidArgumentError")
    assert figures[0] == svg_of(drawn(json.dumps({"DecoderLayer": encode(spec)}))["DecoderLayer"])
    assert not re.search(r"\d\.\d", figures[0])  # colours, no number of hers
    assert not pictures_in((graded["out"] / "feedback" / "alice.html").read_text())


#: (lab, student, exercise, words): a sample whose exercise lost points gets the
#: picture of its values on the notebook's own example, its mistake named.
PICTURES = [("lab1", "carol", "scaled_dot_product_attention", "divided by d_k"),
            ("lab3", "bob", "positional_encoding", "sine and cosine are swapped"),
            ("lab4", "bob", "causal_mask", "the diagonal is False"),
            ("lab6", "erin", "RotaryEmbedding", "turned clockwise")]


@slow
@pytest.mark.parametrize("lab, student, exercise, words", PICTURES)
def test_a_failed_exercise_with_a_picture_shows_it_named(lab, student, exercise, words,
                                                         grade_lab):
    from autograder.grader.pictures import pictures_in, text_of

    figures = pictures_in((grade_lab(lab)["out"] / "feedback" / f"{student}.html").read_text())
    assert any(text_of(f).startswith(f"{exercise}:") and words in text_of(f)
               for f in figures), figures


# -- lab 1's batch also holds a hostile notebook and damaged ones ------------------------------
HOSTILE = r'''
import os, socket
import numpy as np

findings = {}
for path in [%(paths)s]:
    try:
        findings[path] = os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(16)
    except Exception as error:
        findings[path] = type(error).__name__
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    findings["network"] = "open"
except OSError as error:
    findings["network"] = type(error).__name__
try:
    import autograder.references
    findings["references"] = "imported"
except ImportError as error:
    findings["references"] = type(error).__name__
print("FINDINGS", repr(findings))

# Forgery attempts: none of these may turn wrong answers into points.
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
import builtins
builtins.AssertionError = type("Harmless", (Exception,), {})
get_ipython().display_formatter.formatters["text/plain"].for_type(int, lambda *a: "1.0")

def dot_scores(query, keys):
    return np.zeros(np.asarray(keys).shape[:-1])   # wrong on purpose
'''

NOISE = r'''
import sys, warnings, logging
import tensorflow as tf            # TensorFlow's own start-up lines on stderr
print("a line on stderr", file=sys.stderr)
warnings.warn("a Python warning")
logging.getLogger("tensorflow").warning("a TensorFlow log line")
tf.get_logger().error("an error-level log line that is not an error")
'''


def _answered(answers: dict[str, str]):
    """Lab 1's student notebook with ``answers`` in its cells."""
    notebook = nbformat.read(LABS["lab1"].student_path, as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return notebook


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _add_hostile_and_damaged(batch: Path, out: Path) -> None:
    """mallory (hostile) and correct answers in notebooks damaged the ways GRADING.md lists."""
    correct = samples_of.load("lab1").CORRECT
    secret_paths = [str(out), str(out / "nbgrader" / "gradebook.db"),
                    str(ROOT / "solutions"), str(ROOT / "autograder" / "references"), str(batch)]
    hostile = HOSTILE % {"paths": ", ".join(repr(path) for path in secret_paths)}
    nbformat.write(_answered({**correct, "dot_scores": hostile}), batch / "mallory.ipynb")

    noisy = _answered(correct)
    for cell in noisy.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = NOISE + "\n" + cell.source
    nbformat.write(noisy, batch / "noisy.ipynb")

    deleted = _answered(correct)
    deleted.cells = [cell for cell in deleted.cells if _grade_id(cell) != "test_softmax"]
    nbformat.write(deleted, batch / "deleted_tests.ipynb")

    duplicated = _answered(correct)
    position = next(i for i, cell in enumerate(duplicated.cells)
                    if _grade_id(cell) == "test_dot_scores")
    duplicated.cells.insert(position, nbformat.from_dict(
        json.loads(json.dumps(duplicated.cells[position]))))
    duplicated.cells[position].id = "a-copy"
    nbformat.write(duplicated, batch / "duplicated_tests.ipynb")

    dying = _answered(correct)
    for cell in dying.cells:
        if _grade_id(cell) == "attention_pool":
            cell.source = "import os\nos._exit(1)\n" + cell.source
    nbformat.write(dying, batch / "kernel_dies.ipynb")


#: Submissions added to a lab's batch besides its samples and solution.
EXTRA_SUBMISSIONS = {"lab1": _add_hostile_and_damaged}


@slow
@pytest.mark.parametrize("lab", ["lab1"])
def test_a_hostile_notebook_cannot_forge_points_or_read_secrets(lab, graded):
    points = _points(lab)
    rows = graded["exercises"]["mallory"]
    assert float(rows["dot_scores"]["score"]) == 0
    assert all(float(rows[e]["score"]) == points[e] for e in points if e != "dot_scores")
    if not bubblewrap_works():
        pytest.skip("bubblewrap is not available here: isolation is not enforced")
    autograded = graded["out"] / "nbgrader" / "autograded" / "mallory" / lab / \
        f"{LABS[lab].notebook}.ipynb"
    text = json.dumps(nbformat.read(autograded, as_version=4))
    # Every probe must have failed: each value is an exception's name (the
    # paths themselves may hold any word, e.g. pytest-xdist's "popen-gw0").
    findings = ast.literal_eval(re.search(r"FINDINGS (\{.*?\})\\n", text).group(1))
    assert all(isinstance(found, str) and found.endswith("Error")
               for found in findings.values()), findings
    assert list(findings.values()).count("FileNotFoundError") == 5, findings


@slow
@pytest.mark.parametrize("lab", ["lab1"])
@pytest.mark.parametrize("student", ["noisy", "deleted_tests", "duplicated_tests"])
def test_logs_and_damaged_test_cells_do_not_cost_a_correct_notebook(lab, student, graded):
    row = graded["grades"][student]
    assert (float(row["score"]), row["status"]) == (10, "graded"), row


@slow
@pytest.mark.parametrize("lab", ["lab1"])
def test_a_kernel_that_dies_keeps_the_points_earned_before(lab, graded):
    row = graded["grades"]["kernel_dies"]
    # dot_scores (1) and softmax (2) were tested before the kernel died.
    assert float(row["score"]) == 3, row
    assert row["status"].startswith("partly graded") and "died" in row["status"], row
    rows = graded["exercises"]["kernel_dies"]
    assert "died" in rows["additive_scores"]["message"]
