"""Each submission's hidden inputs are its own (issue 45).

Every submission of a run drew the same hidden inputs: a notebook that
recorded its inputs and answers where another kernel could read them (a
shared folder, shared memory, while graded beside it) gave a notebook with
no implementation those answers. Now the test kernel draws each
submission's inputs from the run's secret seed and a SHA-256 of the code
the submission runs (autograder.grader.worker.submission_seed): two
different notebooks get different inputs, the same notebook graded twice
with the same seed gets the same (a resumed run with --seed gives the same
grade).
"""

from __future__ import annotations

import csv
import shutil

import nbformat
import pytest

from autograder.grader.worker import submission_seed
from tests.conftest import run_cli
from tests.hostile.cases import notebook

#: dot_scores tells, in words the redaction keeps, what inputs it was given.
TELLS_ITS_INPUTS = '''
def dot_scores(query, keys):
    """Says which hidden inputs it got (their digest, in letters)."""
    import hashlib
    if np.shape(query) == (2,):        # the fixed case the hidden test starts with
        return np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
    digest = hashlib.sha256(np.asarray(query, dtype=np.float64).tobytes()
                            + np.asarray(keys, dtype=np.float64).tobytes()).hexdigest()
    raise ValueError("inputs " + digest[:16].translate(str.maketrans(
        "0123456789abcdef", "ghijklmnopqrstuv")))
'''


def _code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def test_the_seed_is_the_runs_and_the_code_the_submission_runs():
    nb = notebook()
    seed = submission_seed("run-seed", nb)
    assert seed == submission_seed("run-seed", notebook())
    assert seed != submission_seed("another-run-seed", nb)
    assert len(seed) == 64 and "run-seed" not in seed
    # What does not run (markdown, outputs, metadata) changes nothing.
    same = notebook()
    same.cells.append(nbformat.v4.new_markdown_cell("a note"))
    _code_cells(same)[0].outputs = [nbformat.v4.new_output("stream", text="printed\n")]
    same.metadata["kernelspec"] = {"name": "other"}
    assert submission_seed("run-seed", same) == seed
    # Any change of the code does.
    other = notebook()
    _code_cells(other)[-1].source += "\n# a comment"
    assert submission_seed("run-seed", other) != seed
    moved = notebook()
    moved.cells.append(nbformat.v4.new_code_cell(""))
    assert submission_seed("run-seed", moved) != seed


def _inputs_told(out) -> dict[str, str]:
    with open(out / "exercises.csv", encoding="utf-8", newline="") as handle:
        return {row["student_id"]: row["message"] for row in csv.DictReader(handle)
                if row["exercise"] == "dot_scores"}


@pytest.mark.slow
def test_two_submissions_get_different_inputs_and_the_same_one_the_same(tmp_path):
    """One run with a seed: a notebook and a copy of it (other outputs, a
    markdown cell) get the same inputs; a notebook whose code differs by a
    comment gets others. Graded again in another run with the same seed,
    the notebook gets the same inputs and the same grade."""
    batch, out, again, out_again = (tmp_path / name for name in
                                    ("class", "out", "again", "out-again"))
    batch.mkdir()
    again.mkdir()
    first = notebook({"dot_scores": TELLS_ITS_INPUTS})
    nbformat.write(first, batch / "anna.ipynb")
    copy = notebook({"dot_scores": TELLS_ITS_INPUTS})
    copy.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    nbformat.write(copy, batch / "anna_copy.ipynb")
    nbformat.write(notebook({"dot_scores": TELLS_ITS_INPUTS + "\n# mine\n"}),
                   batch / "bert.ipynb")
    shutil.copyfile(batch / "anna.ipynb", again / "anna.ipynb")
    for folder, target in ((batch, out), (again, out_again)):
        result = run_cli("grade", "lab1", str(folder), "--out", str(target), "--quiet",
                         "--seed", "issue-45-seed")
        assert result.returncode == 0, result.stderr[-3000:]
    told, told_again = _inputs_told(out), _inputs_told(out_again)
    assert all("inputs " in message for message in told.values()), told
    assert told["anna"] == told["anna_copy"] == told_again["anna"]
    assert told["bert"] != told["anna"]
