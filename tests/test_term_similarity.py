"""autograder.term.similarity: answer cells compared pairwise (copydetect), and the report section.

The notebooks are the released lab 1 notebook with answer cells filled
(tests.verdicts.fill), by answers written here: an einsum style, a copy of it
with other names and comments, and a matmul/transpose style written
independently. What the tests expect follows from how the answers were
written (a copy is a copy, independent code is not), not from the module.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from autograder.grader import reports
from autograder.labs import LABS
from autograder.term import similarity
from autograder.term.similarity import (Pairs, answer_code, extract_answers,
                                        find_similar)
from tests.verdicts import fill

LAB = LABS["lab1"]
PLACEHOLDER = "    # YOUR CODE HERE\n    raise NotImplementedError()"

EINSUM = {
    "dot_scores": '''
    q = np.asarray(query)
    k = np.asarray(keys)
    scores = np.einsum("...d,...nd->...n", q, k)  # contract the feature axis
    return scores''',
    "softmax": '''
    x = np.asarray(x, dtype=float)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # a row of -inf only
    e = np.exp(x - top)
    return e / np.sum(e, axis=axis, keepdims=True)''',
    "attention_pool": '''
    scores = np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
    weights = softmax(scores, axis=-1)
    context = np.einsum("...n,...nv->...v", weights, np.asarray(values))
    return context, weights''',
    "scaled_dot_product_attention": '''
    d_k = ops.shape(query)[-1]
    scores = ops.einsum("...qd,...kd->...qk", query, key) / ops.sqrt(ops.cast(d_k, "float32"))
    if mask is not None:
        scores = ops.where(mask, scores, ops.full_like(scores, -1e9))  # hide masked keys
    weights = ops.softmax(scores, axis=-1)
    output = ops.einsum("...qk,...kv->...qv", weights, value)
    return output, weights''',
}

#: EINSUM copied, every name renamed and the comments rewritten.
EINSUM_RENAMED = {
    "dot_scores": '''
    # turn the inputs into arrays first
    qq = np.asarray(query)
    kk = np.asarray(keys)
    s = np.einsum("...d,...nd->...n", qq, kk)  # sum over d
    return s''',
    "softmax": '''
    arr = np.asarray(x, dtype=float)
    m = np.max(arr, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # avoid nan
    expd = np.exp(arr - m)
    return expd / np.sum(expd, axis=axis, keepdims=True)''',
    "attention_pool": '''
    s = np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
    probs = softmax(s, axis=-1)  # normalise
    pooled = np.einsum("...n,...nv->...v", probs, np.asarray(values))
    return pooled, probs''',
    "scaled_dot_product_attention": '''
    dim = ops.shape(query)[-1]
    logits = ops.einsum("...qd,...kd->...qk", query, key) / ops.sqrt(ops.cast(dim, "float32"))
    if mask is not None:
        logits = ops.where(mask, logits, ops.full_like(logits, -1e9))
    probs = ops.softmax(logits, axis=-1)  # attention weights
    out = ops.einsum("...qk,...kv->...qv", probs, value)
    return out, probs''',
}

#: Written independently of EINSUM: matmul and transposes, other helpers.
MATMUL = {
    "dot_scores": '''
    keys_t = np.swapaxes(np.asarray(keys), -1, -2)  # (..., d, n)
    return np.squeeze(np.asarray(query)[..., None, :] @ keys_t, axis=-2)''',
    "softmax": '''
    values = ops.convert_to_tensor(x)
    exps = ops.exp(values - ops.max(values, axis=axis, keepdims=True))
    total = ops.sum(exps, axis=axis, keepdims=True)
    return exps / total''',
    "attention_pool": '''
    q = np.expand_dims(np.asarray(query), -2)  # (..., 1, d)
    raw = (q @ np.swapaxes(np.asarray(keys), -1, -2))[..., 0, :]
    w = softmax(raw)
    ctx = (w[..., None, :] @ np.asarray(values))[..., 0, :]
    return ctx, w''',
    "scaled_dot_product_attention": '''
    depth = ops.cast(ops.shape(key)[-1], "float32")
    logits = ops.matmul(query, ops.moveaxis(key, -1, -2)) / ops.sqrt(depth)
    if mask is not None:
        logits = logits + (1.0 - ops.cast(mask, logits.dtype)) * -1e9
    attn = ops.softmax(logits)
    return ops.matmul(attn, value), attn''',
}


def blank_cells() -> dict[str, str]:
    notebook = nbformat.read(LAB.student_path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in notebook.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def cells(bodies: dict[str, str]) -> dict[str, str]:
    """Whole answer cells: the blank cell with its placeholder replaced by ``body``."""
    blank = blank_cells()
    out = {}
    for exercise, body in bodies.items():
        assert PLACEHOLDER in blank[exercise]
        out[exercise] = blank[exercise].replace(PLACEHOLDER, body.strip("\n"))
    return out


def write(folder, name: str, bodies: dict[str, str]):
    path = folder / f"{name}.ipynb"
    nbformat.write(fill(nbformat.read(LAB.student_path, as_version=4), cells(bodies)), path)
    return path


def write_blank(folder, name: str):
    path = folder / f"{name}.ipynb"
    nbformat.write(nbformat.read(LAB.student_path, as_version=4), path)
    return path


def names(pairs) -> list[tuple[str, str]]:
    return [(p.a, p.b) for p in pairs]


# --------------------------------------------------------------------------
# answer_code
# --------------------------------------------------------------------------


def test_answer_code_keeps_only_the_students_lines_in_curriculum_order(tmp_path):
    path = write(tmp_path, "ann", {"attention_pool": EINSUM["attention_pool"],
                                   "dot_scores": EINSUM["dot_scores"]})
    expected = EINSUM["dot_scores"].strip("\n") + "\n" + EINSUM["attention_pool"].strip("\n")
    assert answer_code(path, LAB) == expected
    assert answer_code(path, "lab1") == expected
    answers = extract_answers(nbformat.read(path, as_version=4), LAB)
    assert len(answers.origins) == len(expected.splitlines()) == 8
    # The first kept line is line 11 of the dot_scores cell (10 lines of
    # signature and docstring are provided), the last is attention_pool's return.
    filled = cells({"dot_scores": EINSUM["dot_scores"]})["dot_scores"].splitlines()
    assert filled[10] == "    q = np.asarray(query)"
    assert answers.origins[0] == ("dot_scores", 11)
    assert answers.origins[4][0] == "attention_pool"
    assert answers.origins[-1][0] == "attention_pool"


def test_answer_code_of_a_blank_notebook_is_empty(tmp_path):
    assert answer_code(write_blank(tmp_path, "blank"), LAB) == ""


def test_answer_code_ignores_cells_that_are_not_answers(tmp_path):
    notebook = fill(nbformat.read(LAB.student_path, as_version=4), cells(EINSUM))
    notebook.cells.append(nbformat.v4.new_code_cell("print('scratch work')"))
    assert "scratch" not in answer_code(notebook, LAB)


# --------------------------------------------------------------------------
# find_similar
# --------------------------------------------------------------------------


def test_a_renamed_copy_is_flagged_and_independent_answers_are_not(tmp_path):
    notebooks = {"ann": write(tmp_path, "ann", EINSUM),
                 "bob": write(tmp_path, "bob", EINSUM_RENAMED),
                 "cid": write(tmp_path, "cid", MATMUL)}
    found = find_similar("lab1", notebooks)
    assert isinstance(found, list) and isinstance(found, Pairs)
    assert names(found) == [("ann", "bob")]
    pair = found[0]
    assert pair.similarity_a >= 0.5 and pair.similarity_b >= 0.5
    assert pair.tokens > 0
    assert found.notebooks == 3 and found.references == 0 and found.more == 0
    assert found.skipped == [] and found.threshold == similarity.THRESHOLD
    # The matches show a's lines beside b's, with their exercises.
    exercises = {s.exercise for m in pair.matches for s in m.a + m.b}
    assert "scaled_dot_product_attention" in exercises
    b_text = "\n".join(s.text for m in pair.matches for s in m.b)
    assert 'logits = ops.einsum("...qd,...kd->...qk", query, key)' in b_text
    a_text = "\n".join(s.text for m in pair.matches for s in m.a)
    assert 'scores = ops.einsum("...qd,...kd->...qk", query, key)' in a_text


def test_independent_answers_stay_well_under_the_threshold(tmp_path):
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "cid": write(tmp_path, "cid", MATMUL)}
    found = find_similar("lab1", notebooks, threshold=1e-9)  # every pair with any overlap
    assert all(pair.similarity < similarity.THRESHOLD for pair in found)


def test_blank_notebooks_are_not_similar(tmp_path):
    notebooks = {f"s{i}": write_blank(tmp_path, f"s{i}") for i in range(3)}
    notebooks["ann"] = write(tmp_path, "ann", EINSUM)
    found = find_similar("lab1", notebooks, threshold=1e-9)
    assert names(found) == []
    assert found.notebooks == 4


def test_a_copied_single_exercise_in_an_otherwise_own_notebook(tmp_path):
    # dan wrote his own code but for scaled_dot_product_attention, copied from ann.
    dan = dict(MATMUL, scaled_dot_product_attention=EINSUM["scaled_dot_product_attention"])
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "dan": write(tmp_path, "dan", dan)}
    (pair,) = find_similar("lab1", notebooks)
    # The exercise is the longest of ann's four, so most of ann's code is in dan's.
    assert pair.similarity_a >= similarity.THRESHOLD
    # dan's side of a block is his copied exercise, beside ann's same lines
    # (and ann's einsum lines elsewhere, which read the same once names are set aside).
    copied = [m for m in pair.matches
              if {s.exercise for s in m.b} == {"scaled_dot_product_attention"}]
    assert len(copied) == 1
    a_side = {s.exercise: s.text for s in copied[0].a}
    line = 'output = ops.einsum("...qk,...kv->...qv", weights, value)'
    assert line in a_side["scaled_dot_product_attention"] and line in copied[0].b[0].text
    assert copied[0].b[0].lines == tuple(range(17, 24))  # the 7 lines after the docstring


def test_references_are_compared_with_students_not_with_each_other(tmp_path):
    refs = tmp_path / "refs"
    (refs / "public").mkdir(parents=True)
    (refs / "2024").mkdir()
    # A solution found online: the einsum answers as a plain module.
    module = "import numpy as np\nfrom keras import ops\n\n\n" + "\n\n".join(
        cells(EINSUM).values()) + "\n"
    (refs / "public" / "attention.py").write_text(module, encoding="utf-8")
    (refs / "public" / "mirror.py").write_text(module, encoding="utf-8")  # the same, twice
    write(refs / "2024", "alice", MATMUL)
    (refs / "notes.txt").write_text("not code", encoding="utf-8")
    students = tmp_path / "students"
    students.mkdir()
    notebooks = {"bob": write(students, "bob", EINSUM_RENAMED),
                 "cid": write(students, "cid", MATMUL)}
    found = find_similar("lab1", notebooks, references=refs)
    assert found.references == 3 and found.notebooks == 2
    assert sorted(names(found)) == [("bob", "reference:public/attention.py"),
                                    ("bob", "reference:public/mirror.py"),
                                    ("cid", "reference:2024/alice.ipynb")]
    pair = next(p for p in found if p.b == "reference:public/attention.py")
    # A module's lines carry the exercise whose def precedes them.
    assert {s.exercise for m in pair.matches for s in m.b} >= {"attention_pool"}


def test_unreadable_notebooks_are_skipped_and_listed(tmp_path):
    (tmp_path / "bad.ipynb").write_text("{ this is not json", encoding="utf-8")
    (tmp_path / "odd.ipynb").write_text(json.dumps({"cells": "nope"}), encoding="utf-8")
    (tmp_path / "bin.ipynb").write_bytes(b"\xff\xfe\x00garbage")
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "bob": write(tmp_path, "bob", EINSUM),
                 "bad": tmp_path / "bad.ipynb", "odd": tmp_path / "odd.ipynb",
                 "bin": tmp_path / "bin.ipynb", "gone": tmp_path / "gone.ipynb"}
    found = find_similar("lab1", notebooks)
    assert names(found) == [("ann", "bob")]
    assert sorted(name for name, _ in found.skipped) == ["bad", "bin", "gone", "odd"]
    assert all(why for _, why in found.skipped)
    assert found.notebooks == 2


def test_pairs_are_sorted_and_capped(tmp_path):
    partial = dict(MATMUL, attention_pool=EINSUM["attention_pool"],
                   scaled_dot_product_attention=EINSUM["scaled_dot_product_attention"])
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "bob": write(tmp_path, "bob", EINSUM),
                 "eve": write(tmp_path, "eve", EINSUM_RENAMED),
                 "dan": write(tmp_path, "dan", partial)}
    every = find_similar("lab1", notebooks, threshold=0.3)
    values = [p.similarity for p in every]
    assert values == sorted(values, reverse=True)
    assert every[0].similarity == 1.0  # ann and bob: the same answers
    assert names(every)[0] == ("ann", "bob")
    capped = find_similar("lab1", notebooks, threshold=0.3, limit=2)
    assert names(capped) == names(every)[:2]
    assert capped.more == len(every) - 2 > 0


@pytest.mark.parametrize("settings", [{"threshold": 0}, {"threshold": 1.5}, {"limit": -1},
                                      {"noise": 0}, {"noise": 30, "guarantee": 20}])
def test_bad_settings_say_what_is_expected(tmp_path, settings):
    with pytest.raises(ValueError, match="expected"):
        find_similar("lab1", {}, **settings)


def test_a_references_path_that_is_no_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        find_similar("lab1", {}, references=tmp_path / "missing")


def test_an_unknown_lab_is_refused():
    with pytest.raises(ValueError, match="Unknown lab"):
        find_similar("lab99", {})


# --------------------------------------------------------------------------
# The report's section
# --------------------------------------------------------------------------


def test_report_shows_the_pairs_escaped(tmp_path):
    hostile = dict(EINSUM, dot_scores=EINSUM["dot_scores"].replace(
        "return scores", 'label = "<script>alert(1)</script>"\n    return scores'))
    notebooks = {"ann<b>": write(tmp_path, "ann", hostile),
                 "bob": write(tmp_path, "bob", hostile),
                 "cid": write(tmp_path, "cid", MATMUL),
                 "bad": tmp_path / "missing.ipynb"}
    found = find_similar("lab1", notebooks)
    assert names(found) == [("ann<b>", "bob")]
    written = reports.write_reports([], tmp_path / "out", "Lab 1", similar=found)
    html = written["report.html"].read_text(encoding="utf-8")
    section = " ".join(html[html.index("<h2>Similar answers</h2>"):].split())
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "ann&lt;b&gt;" in section and "ann<b>" not in html
    assert "changes no score" in section
    assert "50%" in section  # the threshold
    assert "Compared: 3 notebooks and 0 reference files" in section
    assert "100% of bob" in section
    assert "dot_scores, line" in section
    assert "missing.ipynb" in section  # the unread file is listed
    assert "<pre" in section


def test_report_without_similarity_has_no_section(tmp_path):
    html = reports.report_html([], "Lab 1")
    assert "Similar answers" not in html
    empty = reports.report_html([], "Lab 1", similar=Pairs(notebooks=2))
    assert "Similar answers" in empty and "No pair reached the threshold" in empty


def test_a_notebook_padded_with_megabytes_of_code_is_compared_on_its_first_part(tmp_path, monkeypatch):
    monkeypatch.setattr(similarity, "MAX_ANSWER_CHARS", 2_000)
    padded = dict(EINSUM)
    padded["softmax"] = EINSUM["softmax"] + "".join(f"\n    pad_{i} = {i}" for i in range(2000))
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "pad": write(tmp_path, "pad", padded)}
    found = find_similar("lab1", notebooks)
    assert ("pad", "answers longer than 2,000 characters: only the first are compared") \
        in found.skipped
    assert found.notebooks == 2
