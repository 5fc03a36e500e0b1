"""autograder.term.similarity: every cell a student wrote compared pairwise, and the report section.

Two kinds of notebooks. Small ones: the released lab 1 notebook with answer
cells filled (tests.verdicts.fill) by answers written here: an einsum style,
a copy of it with other names and comments, and a matmul/transpose style
written independently. And a generated class (tests/similarity_class.py):
30 lab 1 notebooks written independently in styles that follow the hints
more or less closely, with planted copies hidden by renaming, reordering,
moving into new cells, respacing, and a half copy. What the tests expect
follows from how the notebooks were written (a copy is a copy, independent
code is not), not from the module; the class tests are issue 31's criteria:
every planted copy listed, at most 5% of the independent pairs listed, the
copies first.
"""

from __future__ import annotations

import ast
import json
import re

import nbformat
import pytest

from autograder.grader import reports
from autograder.labs import LABS
from autograder.term import similarity
from autograder.term.similarity import (Pairs, answer_code, common_limit, extract_answers,
                                        find_similar)
from tests import similarity_class
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


def filled(bodies: dict[str, str]) -> nbformat.NotebookNode:
    return fill(nbformat.read(LAB.student_path, as_version=4), cells(bodies))


def write(folder, name: str, bodies: dict[str, str]):
    path = folder / f"{name}.ipynb"
    nbformat.write(filled(bodies), path)
    return path


def write_blank(folder, name: str):
    path = folder / f"{name}.ipynb"
    nbformat.write(nbformat.read(LAB.student_path, as_version=4), path)
    return path


def moved(bodies: dict[str, str]) -> nbformat.NotebookNode:
    """The answers as whole functions in one new cell before the last one,
    the answer cells left as released (every cell runs when graded)."""
    notebook = nbformat.read(LAB.student_path, as_version=4)
    definitions = [blank_cells()[e].split("\n", 1)[0] + "\n" + body.strip("\n")
                   for e, body in bodies.items()]
    notebook.cells.insert(len(notebook.cells) - 1,
                          nbformat.v4.new_code_cell("\n\n\n".join(reversed(definitions))))
    return notebook


def names(pairs) -> list[tuple[str, str]]:
    return [(p.a, p.b) for p in pairs]


def cell_number(notebook, grade_id: str) -> int:
    """The position (from 1, markdown included) of the cell with ``grade_id``."""
    return next(i for i, c in enumerate(notebook.cells, start=1)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


# --------------------------------------------------------------------------
# What is compared
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
    filled_cell = cells({"dot_scores": EINSUM["dot_scores"]})["dot_scores"].splitlines()
    assert filled_cell[10] == "    q = np.asarray(query)"
    assert answers.origins[0] == ("dot_scores", 11)
    assert answers.origins[4][0] == "attention_pool"
    assert answers.origins[-1][0] == "attention_pool"
    # Answer cells have no cell label; each answer is a block of its own.
    assert set(answers.cells) == {""}
    assert answers.blocks == (1, 1, 1, 1, 2, 2, 2, 2)


def test_answer_code_of_a_blank_notebook_is_empty(tmp_path):
    assert answer_code(write_blank(tmp_path, "blank"), LAB) == ""


def test_added_and_edited_cells_are_compared_without_their_provided_lines():
    notebook = filled({"dot_scores": EINSUM["dot_scores"]})
    # An edited demo: one number changed, one line added.
    demo = next(c for c in notebook.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == "demo_dot_scores")
    demo.source = demo.source.replace("decoder_state = np.array([0.7, 0.3])",
                                      "decoder_state = np.array([0.5, 0.5])") + "\nprint('mine')"
    # A new cell: a provided check line pasted, and softmax written in it.
    notebook.cells.append(nbformat.v4.new_code_cell(
        "print('scratch work')\n"
        "checks.check_close(softmax(np.array([1.0, 2.0, 3.0])), [0.09003, 0.24473, 0.66524],\n"
        "def softmax(x, axis=-1):\n" + EINSUM["softmax"].strip("\n")))
    answers = extract_answers(notebook, LAB)
    lines = answers.text.splitlines()
    demo_at, added_at = cell_number(notebook, "demo_dot_scores"), len(notebook.cells)
    assert lines[4:6] == ["decoder_state = np.array([0.5, 0.5])", "print('mine')"]
    assert answers.cells[4:6] == (f"cell {demo_at}, demo_dot_scores edited",) * 2
    assert answers.origins[4:6] == (("dot_scores", 3), ("dot_scores", 5))
    assert lines[6] == "print('scratch work')"
    assert "checks.check_close" not in answers.text and "def softmax" not in answers.text
    assert lines[7:] == EINSUM["softmax"].strip("\n").splitlines()
    assert set(answers.cells[6:]) == {f"cell {added_at}, added"}
    # A line carries the exercise of the answer cell above its cell, or of
    # the def before it in its cell; a provided line in between (the demo's
    # print, the pasted check, the def) starts a new block.
    assert answers.origins[6] == ("scaled_dot_product_attention", 1)
    assert {o[0] for o in answers.origins[7:]} == {"softmax"}
    assert answers.origins[7] == ("softmax", 4)
    assert answers.blocks == (1, 1, 1, 1, 2, 3, 4) + (5,) * 5


def test_a_notebook_without_nbgrader_metadata_is_compared_whole():
    notebook = filled(EINSUM)
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
    answers = extract_answers(notebook, LAB)
    assert answers.text == "\n".join(body.strip("\n") for body in EINSUM.values())
    assert [o[0] for o in answers.origins[:3]] == ["dot_scores"] * 3
    assert all(label.endswith(", added") for label in answers.cells)


# --------------------------------------------------------------------------
# find_similar on a few notebooks
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
    assert found.compared == 3 and found.common == similarity.COMMON_AT_LEAST
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
    found = find_similar("lab1", notebooks, threshold=1e-9, min_tokens=0)  # any overlap
    assert all(pair.similarity < similarity.THRESHOLD / 2 for pair in found)


def test_blank_notebooks_are_not_similar(tmp_path):
    notebooks = {f"s{i}": write_blank(tmp_path, f"s{i}") for i in range(3)}
    notebooks["ann"] = write(tmp_path, "ann", EINSUM)
    found = find_similar("lab1", notebooks, threshold=1e-9, min_tokens=0)
    assert names(found) == []
    assert found.notebooks == 4


def test_a_copied_single_exercise_in_an_otherwise_own_notebook(tmp_path):
    # dan wrote his own code but for scaled_dot_product_attention, copied from ann.
    dan = dict(MATMUL, scaled_dot_product_attention=EINSUM["scaled_dot_product_attention"])
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "dan": write(tmp_path, "dan", dan)}
    (pair,) = find_similar("lab1", notebooks)
    # The exercise is the longest of ann's four: a good part of either notebook.
    assert pair.similarity >= similarity.THRESHOLD
    # dan's copied exercise is shown beside ann's same lines.
    copied = [m for m in pair.matches
              if "scaled_dot_product_attention" in {s.exercise for s in m.b}]
    assert len(copied) == 1
    b_side = {s.exercise: s for s in copied[0].b}["scaled_dot_product_attention"]
    a_side = {s.exercise: s for s in copied[0].a}["scaled_dot_product_attention"]
    line = 'output = ops.einsum("...qk,...kv->...qv", weights, value)'
    assert line in a_side.text and line in b_side.text
    assert b_side.lines == tuple(range(17, 24))  # the 7 lines after the docstring
    assert b_side.cell == "" and a_side.cell == ""


def test_answers_moved_into_a_new_cell_are_found(tmp_path):
    # eve left every answer cell as released and defined the functions, in
    # another order and renamed, in one cell of her own.
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "cid": write(tmp_path, "cid", MATMUL)}
    eve = moved(EINSUM_RENAMED)
    nbformat.write(eve, tmp_path / "eve.ipynb")
    notebooks["eve"] = tmp_path / "eve.ipynb"
    found = find_similar("lab1", notebooks)
    assert names(found) == [("ann", "eve")]
    label = f"cell {len(eve.cells) - 1}, added"
    eve_side = [s for m in found[0].matches for s in m.b]
    assert {s.cell for s in eve_side} == {label}
    assert {s.exercise for s in eve_side} >= {"softmax", "scaled_dot_product_attention"}


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
    assert found.references == 3 and found.notebooks == 2 and found.compared == 7
    assert sorted(names(found)) == [("bob", "reference:public/attention.py"),
                                    ("bob", "reference:public/mirror.py"),
                                    ("cid", "reference:2024/alice.ipynb")]
    pair = next(p for p in found if p.b == "reference:public/attention.py")
    # A module's lines carry the exercise whose def precedes them.
    assert {s.exercise for m in pair.matches for s in m.b} >= {"attention_pool"}


def test_students_who_copied_one_reference_are_listed_beside_it_not_together(tmp_path):
    refs = tmp_path / "refs"
    refs.mkdir()
    write(refs, "public", EINSUM)
    notebooks = {"bob": write(tmp_path, "bob", EINSUM_RENAMED),
                 "eve": write(tmp_path, "eve", EINSUM),
                 "cid": write(tmp_path, "cid", MATMUL)}
    found = find_similar("lab1", notebooks, references=refs)
    assert sorted(names(found)) == [("bob", "reference:public.ipynb"),
                                    ("eve", "reference:public.ipynb")]
    # Without the reference, bob and eve are listed together.
    assert names(find_similar("lab1", notebooks)) == [("bob", "eve")]


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
    # Four notebooks: what all four have is not common (at most 3 of them).
    every = find_similar("lab1", notebooks, common=4)
    values = [p.similarity for p in every]
    assert values == sorted(values, reverse=True) and len(every) >= 4
    assert every[0].similarity == 1.0  # ann and bob: the same answers
    assert names(every)[0] == ("ann", "bob")
    capped = find_similar("lab1", notebooks, common=4, limit=2)
    assert names(capped) == names(every)[:2]
    assert capped.more == len(every) - 2 > 0


def test_code_most_of_the_class_wrote_does_not_count(tmp_path):
    # Five of six students wrote the same softmax: it is common code (more
    # than max(3, 6/3) notebooks), not evidence against any two of them.
    notebooks = {f"s{i}": write(tmp_path, f"s{i}", {"softmax": EINSUM["softmax"]})
                 for i in range(5)}
    notebooks["cid"] = write(tmp_path, "cid", MATMUL)
    assert common_limit(6) == 3 and common_limit(36) == 12
    found = find_similar("lab1", notebooks, threshold=1e-9, min_tokens=0)
    assert names(found) == [] and found.common == 3
    # A ring of five is found when told that five is not many.
    assert len(find_similar("lab1", notebooks, common=5)) == 10


def test_a_verbatim_copy_of_code_everybody_writes_alike_is_found(tmp_path):
    # Six students wrote softmax the same way, each with names of their own
    # (common code, names set aside); zoe copied ann's, names and all.
    notebooks = {}
    for i, student in enumerate(["ann", "bob", "cid", "dan", "eve", "fay"]):
        body = EINSUM["softmax"] if i == 0 else re.sub(
            r"\btop\b", f"peak{i}", re.sub(r"\be\b", f"exps{i}", EINSUM["softmax"]))
        notebooks[student] = write(tmp_path, student, {"softmax": body})
    notebooks["zoe"] = write(tmp_path, "zoe", {"softmax": EINSUM["softmax"]})
    found = find_similar("lab1", notebooks)
    assert names(found) == [("ann", "zoe")]
    assert found[0].tokens >= similarity.MIN_TOKENS


@pytest.mark.parametrize("settings", [{"threshold": 0}, {"threshold": 1.5}, {"limit": -1},
                                      {"noise": 0}, {"noise": 30, "guarantee": 20},
                                      {"min_tokens": -1}, {"common": 1}])
def test_bad_settings_say_what_is_expected(tmp_path, settings):
    with pytest.raises(ValueError, match="expected"):
        find_similar("lab1", {}, **settings)


def test_a_references_path_that_is_no_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        find_similar("lab1", {}, references=tmp_path / "missing")


def test_an_unknown_lab_is_refused():
    with pytest.raises(ValueError, match="Unknown lab"):
        find_similar("lab1" + "9", {})


def test_a_notebook_padded_with_megabytes_of_code_is_compared_on_its_first_part(tmp_path, monkeypatch):
    monkeypatch.setattr(similarity, "MAX_ANSWER_CHARS", 2_000)
    padded = dict(EINSUM)
    padded["softmax"] = EINSUM["softmax"] + "".join(f"\n    pad_{i} = {i}" for i in range(2000))
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "pad": write(tmp_path, "pad", padded)}
    found = find_similar("lab1", notebooks)
    assert ("pad", "answers longer than 2,000 characters: only the first are compared") \
        in found.skipped
    assert found.notebooks == 2


# --------------------------------------------------------------------------
# The generated class (issue 31's criteria)
# --------------------------------------------------------------------------

KINDS = similarity_class.COPY_KINDS + similarity_class.MORE_KINDS


@pytest.fixture(scope="module")
def generated():
    return {seed: similarity_class.generate(authors=30, kinds=KINDS, seed=seed)
            for seed in (0, 1, 2)}


def test_the_generated_class_is_valid_python_written_independently(generated):
    generated_class = generated[0]
    assert generated_class.authors == 30 and len(generated_class.notebooks) == 30 + len(KINDS)
    assert sorted(generated_class.copies.values()) == sorted(KINDS)
    assert len({a for pair in generated_class.copies for a in pair}) == 2 * len(KINDS)
    sources = set()
    for notebook in generated_class.notebooks.values():
        for cell in notebook.cells:
            if cell.cell_type == "code" and not cell.source.startswith("np.einsum?"):
                ast.parse(cell.source)
        sources.add(answer_code(notebook, LAB))
    assert len(sources) == len(generated_class.notebooks)  # no two notebooks alike


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_planted_copy_is_listed_first_and_few_independent_pairs(generated, seed):
    generated_class = generated[seed]
    found = find_similar("lab1", generated_class.notebooks, limit=10**6)
    listed = names(found)
    copies = set(generated_class.copies)
    n = len(generated_class.notebooks)
    innocent_pairs = n * (n - 1) // 2 - len(copies)
    assert found.compared == n * (n - 1) // 2
    assert copies <= set(listed), f"missed: {copies - set(listed)}"
    innocents = [pair for pair in listed if pair not in copies]
    assert len(innocents) <= 0.05 * innocent_pairs
    assert set(listed[:len(copies)]) == copies  # the copies come first
    # Above every independent pair, listed or not.
    every = find_similar("lab1", generated_class.notebooks, threshold=1e-9, min_tokens=0,
                         limit=10**6)
    assert set(names(every)[:len(copies)]) == copies


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
    assert "25%" in section  # the threshold
    assert "Compared: 3 notebooks and 0 reference files" in section
    assert "100% of bob" in section
    assert "dot_scores, line" in section
    assert "missing.ipynb" in section  # the unread file is listed
    assert "<pre" in section


def test_report_names_the_cell_of_code_outside_the_answer_cells(tmp_path):
    eve = moved(EINSUM_RENAMED)
    nbformat.write(eve, tmp_path / "eve.ipynb")
    notebooks = {"ann": write(tmp_path, "ann", EINSUM), "eve": tmp_path / "eve.ipynb"}
    html = reports.report_html([], "Lab 1", similar=find_similar("lab1", notebooks))
    section = " ".join(html[html.index("<h2>Similar answers</h2>"):].split())
    assert f"softmax (cell {len(eve.cells) - 1}, added), lines" in section
    assert "more than a third" in section  # how common code is set aside


def test_report_without_similarity_has_no_section(tmp_path):
    html = reports.report_html([], "Lab 1")
    assert "Similar answers" not in html
    empty = reports.report_html([], "Lab 1", similar=Pairs(notebooks=2))
    assert "Similar answers" in empty and "No pair reached the threshold" in empty
