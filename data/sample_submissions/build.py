"""Build the sample submissions of data/sample_submissions/<lab>/.

Each sample is the student notebook of labs/ with its answer cells filled in
the way a real student might: correct answers written differently from the
solution, the mistakes students really make, an untouched notebook, a copy
saved by Colab, code that raises, a file cut short by a bad download.
EXPECTED holds what each one must score (tests/test_grading_lab1.py checks
it through the real CLI). Run `python data/sample_submissions/build.py`
after changing a lab.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

LAB1_CORRECT = {
    "dot_scores": '''
def dot_scores(query, keys):
    """One score per key: einsum over the last axis."""
    return np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
''',
    "softmax": '''
def softmax(x, axis=-1):
    """Stable softmax: subtract the max before exponentiating."""
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
''',
    "attention_pool": '''
def attention_pool(query, keys, values):
    """Weights from my softmax of my dot scores; context as an einsum."""
    weights = softmax(dot_scores(query, keys), axis=-1)
    context = np.einsum("...n,...nv->...v", weights, np.asarray(values))
    return context, weights
''',
    "bilinear_scores": '''
def bilinear_scores(query, keys, W):
    """q^T W k_i for each key, one loop over the keys."""
    query, keys, W = np.asarray(query), np.asarray(keys), np.asarray(W)
    projected = query @ W                      # (..., d_k)
    scores = [np.sum(projected * keys[..., i, :], axis=-1) for i in range(keys.shape[-2])]
    return np.stack(scores, axis=-1)
''',
    "additive_scores": '''
def additive_scores(query, keys, W1, w2):
    """Split W1 into its query and key halves instead of concatenating."""
    query, keys, W1, w2 = map(np.asarray, (query, keys, W1, w2))
    d_q = query.shape[-1]
    hidden = np.tanh((query @ W1[:d_q])[..., None, :] + keys @ W1[d_q:])
    return hidden @ w2
''',
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """keras.ops throughout; masked scores set to -1e9."""
    d_k = ops.shape(key)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    scores = scores / ops.sqrt(ops.cast(d_k, scores.dtype))
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''',
}

LAB1_MISTAKES = {
    "softmax_overflow": ("softmax", '''
def softmax(x, axis=-1):
    exponentials = np.exp(np.asarray(x))          # no max subtracted: overflows at 1000
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
'''),
    "softmax_axis0": ("softmax", '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    exponentials = np.exp(x - np.max(x, axis=0, keepdims=True))
    return exponentials / np.sum(exponentials, axis=0, keepdims=True)   # always axis 0
'''),
    "additive_no_tanh": ("additive_scores", '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    pairs = np.concatenate(
        [np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:]), keys], axis=-1)
    return (pairs @ W1) @ w2                      # tanh forgotten
'''),
    "sdpa_scale_by_dk": ("scaled_dot_product_attention", '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(key)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / d_k   # d_k, not sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
    "dot_scores_typo": ("dot_scores", '''
def dot_scores(query, keys):
    return np.asarray(keys) @ np.asarray(queyr)   # typo: NameError when called
'''),
}

# student file -> (answers, expected score per exercise that LOSES points)
LAB1_SAMPLES = {
    "alice.ipynb": ({}, {}),
    "bob.ipynb": ({"softmax_overflow"}, {"softmax"}),
    "carol.ipynb": ({"softmax_axis0", "additive_no_tanh", "sdpa_scale_by_dk"},
                    {"softmax", "additive_scores", "scaled_dot_product_attention"}),
    "frank.ipynb": ({"dot_scores_typo"}, {"dot_scores"}),
}


def _fill(notebook, answers: dict[str, str]):
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id].strip("\n")
    return notebook


def _colab_metadata(notebook):
    notebook.metadata["colab"] = {"provenance": [], "toc_visible": True,
                                  "name": "Copy of lab1_attention.ipynb"}
    notebook.metadata["accelerator"] = "GPU"
    for cell in notebook.cells:
        cell.metadata["id"] = cell.get("id", "x")
        cell.metadata.setdefault("colab", {"base_uri": "https://localhost:8080/"})
    return notebook


def build_expectations() -> dict[str, dict[str, str]]:
    """What each lab1 sample must score: {file: {exercise: 'kept' | 'lost'}}."""
    exercises = list(LAB1_CORRECT)
    expected = {name: {e: ("lost" if e in losing else "kept") for e in exercises}
                for name, (_, losing) in LAB1_SAMPLES.items()}
    expected["dave.ipynb"] = {e: "lost" for e in exercises}
    expected["erin/Copy of lab1_attention.ipynb"] = {e: "kept" for e in exercises}
    expected["heidi.ipynb"] = {e: "lost" for e in exercises}
    return expected


def build_lab1() -> dict[str, dict]:
    """Write the lab1 samples; return {file: {exercise: 'lost' | 'kept'}}."""
    student = nbformat.read(ROOT / "labs" / "lab1" / "lab1_attention.ipynb", as_version=4)
    folder = HERE / "lab1"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, (mistakes, _losing) in LAB1_SAMPLES.items():
        answers = dict(LAB1_CORRECT)
        for mistake in mistakes:
            exercise, code = LAB1_MISTAKES[mistake]
            answers[exercise] = code
        nbformat.write(_fill(nbformat.from_dict(json.loads(json.dumps(student))), answers),
                       folder / name)
    # Untouched: the released notebook as downloaded.
    nbformat.write(student, folder / "dave.ipynb")
    # A copy saved by Colab, in a student folder, all correct.
    (folder / "erin").mkdir()
    copy = _colab_metadata(_fill(nbformat.from_dict(json.loads(json.dumps(student))),
                                 LAB1_CORRECT))
    nbformat.write(copy, folder / "erin" / "Copy of lab1_attention.ipynb")
    # A download cut short: not valid JSON.
    text = nbformat.writes(_fill(nbformat.from_dict(json.loads(json.dumps(student))),
                                 LAB1_CORRECT))
    (folder / "heidi.ipynb").write_text(text[: len(text) // 2])
    return build_expectations()


if __name__ == "__main__":
    for sample, outcome in build_lab1().items():
        print(sample, sum(v == "kept" for v in outcome.values()), "exercises kept")
