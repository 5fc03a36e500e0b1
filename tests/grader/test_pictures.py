"""The pictures of what differs (autograder.grader.pictures): the SVG drawn from
the test kernel's JSON, its marks, its escaping, its size, and that it carries
no number of the student's; lab 4's picture on the visible check's example."""

from __future__ import annotations

import json
import re

import numpy as np

from autograder.grader import pictures


def _json(student, expected, title="t", note="", scale=(0.0, 1.0), panels=1) -> str:
    panel = {"label": "head 1", "student": None if student is None else np.asarray(student).tolist(),
             "expected": np.asarray(expected).tolist()}
    return json.dumps({"E": {"title": title, "note": note, "scale": list(scale),
                             "rows": "queries", "cols": "keys", "panels": [panel] * panels}})


def _drawn(text: str) -> str:
    """The SVG of picture "E" of ``text`` (drawn gives data URIs)."""
    uri = pictures.drawn(text)["E"]
    assert uri.startswith("data:image/svg+xml;base64,")
    return pictures.svg_of(uri)


def _cells(svg: str) -> int:
    """How many cells the heatmaps of ``svg`` draw (one square each)."""
    return sum(path.count("z") for path in re.findall(r'<path fill="#[0-9a-f]{6}" d="([^"]*)"', svg))


def test_differing_cells_are_outlined_and_only_those():
    expected = np.full((3, 4), 0.25)
    student = expected.copy()
    student[1, 2] = 0.9
    student[2, 0] = np.nan
    svg = _drawn(_json(student, expected))
    marks = re.findall(r'<path class="differs"[^>]* d="([^"]*)"', svg)
    assert len(marks) == 1 and marks[0].count("z") == 2  # the two differing cells
    assert svg.count("<svg") == 1 and "<script" not in svg and "href" not in svg


def test_the_student_values_are_colours_of_the_fixed_scale_only():
    """What the student's kernel returns is drawn in one of LEVELS colours, no
    number of it written: values kept from a hidden test would show as colours."""
    hidden = np.random.default_rng(5).normal(size=(4, 5)) * 7.123456
    svg = _drawn(_json(hidden, np.full((4, 5), 0.2)))
    assert not re.search(r"\d\.\d", svg)
    fills = set(re.findall(r'fill="(#[0-9a-f]{6})"', svg))
    assert fills <= pictures.palette_fills()
    assert len(fills) <= pictures.LEVELS + 1


def test_the_feedback_page_shows_the_picture_as_an_image_escaped_as_text():
    """The template puts the data URI in an <img> (no markup passes unescaped:
    test_reports.test_no_template_turns_escaping_off) and pictures_in reads it back."""
    from autograder.grader.reports import feedback_html
    from autograder.grader.results import ExerciseResult, SubmissionResult

    uri = pictures.drawn(_json(np.eye(2) * 0.5, np.eye(2)))["E"]
    result = SubmissionResult("s", "lab4", 0.0, 1.0, exercises=[
        ExerciseResult("E", 0.0, 1.0, "wrong", picture=uri),
        ExerciseResult("F", 1.0, 1.0)])
    page = feedback_html(result, "Lab")
    assert page.count('<img class="picture"') == 1
    assert pictures.pictures_in(page) == [pictures.svg_of(uri)]
    hostile = ExerciseResult("E", 0.0, 1.0, "wrong", picture='x" onerror="alert(1)')
    page = feedback_html(SubmissionResult("s", "lab4", 0.0, 1.0, exercises=[hostile]), "Lab")
    assert 'onerror="' not in page


def test_text_is_escaped_and_control_characters_dropped():
    svg = _drawn(_json(np.eye(2), np.eye(2), title="<script>alert(1)</script>\x1b[1m",
                               note='a "note" & <b>'))
    assert "<script>" not in svg and "\x1b" not in svg
    assert "&lt;script&gt;" in svg and "&amp; &lt;b&gt;" in svg


def test_a_large_matrix_is_cropped_with_a_note_and_the_page_stays_small():
    big = np.random.default_rng(0).random((40, 50))
    svg = _drawn(_json(big, big * 0.5, panels=pictures.MAX_PANELS + 2))
    side = pictures.MAX_SIDE
    assert f"only the first {side} rows and columns" in svg
    # As many panels as MAX_CELLS holds, each a student's and an expected heatmap of
    # side x side cells; the others said.
    drawn = pictures.MAX_CELLS // (2 * side * side)
    assert _cells(svg) == drawn * 2 * side * side
    assert f"({pictures.MAX_PANELS - drawn} more not drawn)" in svg
    assert len(svg) < 120_000


def test_no_values_and_bad_data_are_drawn_or_dropped_safely():
    svg = _drawn(_json(None, np.eye(3)))
    assert "(no values)" in svg
    assert pictures.drawn("not json") == {}
    assert pictures.drawn(json.dumps({"E": {"scale": [1, 0], "panels": []}})) == {}
    assert pictures.drawn(json.dumps({"E": {"panels": [{"expected": "abc"}]}})) == {}
    shapes = _drawn(_json(np.ones((5, 4)), np.ones((4, 5))))
    assert 'class="differs"' not in shapes  # shapes differ: nothing to compare cell by cell


def test_lab4_picture_uses_the_visible_checks_example():
    """The inputs of lab 4's picture are check_DecoderLayer's, written in the
    notebook: the reference's cross-attention weights on them are those the
    visible check compares with (its numpy_identity_attention)."""
    from autograder.labs import LABS
    from autograder.testkernel.pictures import declarations

    module = declarations("lab4")
    x, context, weights = module.visible_decoder_example()
    source = LABS["lab4"].source_path.read_text()
    check = source[source.index('grade_id="check_DecoderLayer"'):]
    assert "demo_rng = np.random.default_rng(2)" in check
    assert "x = demo_rng.normal(size=(2, 4, 6))" in check
    assert "context = demo_rng.normal(size=(2, 5, 6))" in check
    rng = np.random.default_rng(2)
    np.testing.assert_array_equal(x, rng.normal(size=(2, 4, 6)).astype("float32"))
    np.testing.assert_array_equal(context, rng.normal(size=(2, 5, 6)).astype("float32"))
    for text in ('linspace(0.5, 1.5, 6', 'linspace(-0.3, 0.3, 6', 'linspace(2.0, 1.0, 6',
                 'linspace(0.4, -0.1, 6', 'linspace(0.8, 1.2, 6', 'np.full(6, 0.1'):
        assert text in check
    assert set(module.PICTURES) == {"causal_mask", "DecoderLayer"}


class _Kernel:
    """A stand-in for the probe's StudentKernel: binds each name to a local function."""

    def __init__(self, **functions):
        self.functions = functions

    def bind(self, namespace: dict, names) -> None:
        for name in names:
            namespace[name] = self.functions[name]


def test_the_test_kernel_makes_the_declared_pictures_and_names_the_mistake():
    from autograder.testkernel.pictures import make

    def shifted(length):
        return np.tril(np.ones((length, length), bool), k=-1)

    def broken(length):
        raise ValueError("no")

    made = json.loads(make(_Kernel(causal_mask=shifted, padding_mask=shifted), "lab4",
                           ["causal_mask", "padding_mask"]))
    assert set(made) == {"causal_mask"}  # padding_mask declares no picture
    svg = pictures.svg_of(pictures.drawn(json.dumps(made))["causal_mask"])
    assert "shifted by one" in pictures.text_of(svg)
    assert svg.count('class="differs"') == 2  # causal_mask(3) and (4): the diagonals
    right = json.loads(make(_Kernel(causal_mask=lambda n: np.tril(np.ones((n, n), bool))),
                            "lab4", ["causal_mask"]))
    assert "right on this example" in right["causal_mask"]["note"]
    failed = json.loads(make(_Kernel(causal_mask=broken), "lab4", ["causal_mask"]))
    assert all(p["student"] is None for p in failed["causal_mask"]["panels"])
    assert json.loads(make(_Kernel(), "lab0", ["anything"])) == {}
