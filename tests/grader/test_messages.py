"""The messages a student reads (autograder/text.py): escape sequences, the
error's one line and its details, an error said once, cuts after a word,
the kit's explanation first."""

from __future__ import annotations

import re

import pytest

from autograder.text import (DETAILS_START, ERROR_END, MARKS, cut_words, said_once,
                             split_error, strip_escapes, student_error, student_message)

#: What Keras 3 raises when a layer's call fails inside TensorFlow (lab 4's grace).
KERAS_WRAPPED = (
    "Exception encountered when calling DecoderLayer.call().\n\n"
    "\x1b[1m{{function_node __wrapped__AddV2_device_/job:localhost/replica:0/task:0/device:CPU:0}}"
    " Incompatible shapes: [2,4,8] vs. [2,6,8] [Op:AddV2] name: \x1b[0m\n\n"
    "Arguments received by DecoderLayer.call():\n"
    "  • x=tf.Tensor(shape=(2, 4, 8), dtype=float32)\n"
    "  • context=tf.Tensor(shape=(2, 6, 8), dtype=float32)\n"
    "  • x_padding_mask=None")


def test_escape_sequences_go_whole():
    assert strip_escapes("\x1b[1mbold\x1b[0m and \x1b]0;title\x07plain") == "bold and plain"
    # The remains of one whose ESC byte was replaced ("?[1m") go too.
    message = student_message("?[1mIncompatible shapes?[0m")
    assert message.text == "Incompatible shapes"
    assert "?[" not in student_message(student_error("f", "ValueError", "x", "", "?[1mx?[0m")).details


def test_a_keras_error_is_its_one_line_and_where_with_the_rest_as_details():
    headline, details = split_error(KERAS_WRAPPED)
    assert headline == "Incompatible shapes: [2,4,8] vs. [2,6,8] (in DecoderLayer.call())"
    assert "Arguments received by DecoderLayer.call()" in details
    assert "function_node" in details and "\x1b" not in details
    # A plain one-line error has no details.
    assert split_error("index 5 is out of bounds") == ("index 5 is out of bounds", "")
    # A multi-line one keeps its first line; the whole goes to the details.
    assert split_error("bad shape\nsee the docs") == ("bad shape", "bad shape\nsee the docs")


def test_the_kits_explanation_comes_first_and_the_internals_are_folded():
    error = student_error("DecoderLayer", "InvalidArgumentError", *split_error(KERAS_WRAPPED)[:1],
                          "your cell of `DecoderLayer`, line 40, in call",
                          split_error(KERAS_WRAPPED)[1])
    raw = (f"DecoderLayer(d_model=8) on x (2, 4, 8): {error} (Here T = 4 target tokens: the "
           "cross-attention's queries come from x.)")
    message = student_message(raw)
    assert message.text == (
        "Here T = 4 target tokens: the cross-attention's queries come from x. "
        "DecoderLayer(d_model=8) on x (2, 4, 8): `DecoderLayer` raised InvalidArgumentError: "
        "Incompatible shapes: [2,4,8] vs. [2,6,8] (in DecoderLayer.call()) "
        "(your cell of `DecoderLayer`, line 40, in call)")
    assert message.details.startswith("Exception encountered when calling DecoderLayer.call()")
    assert message.error.startswith("`DecoderLayer` raised InvalidArgumentError")
    for mark in MARKS:
        assert mark not in message.text + message.details
    # The message starts as hidden tests read it: re.match(r"`[^`]*` raised (\w+)").
    assert re.match(r"`[^`]*` raised (\w+)", error).group(1) == "InvalidArgumentError"


def test_a_message_without_a_students_error_is_only_cleaned():
    message = student_message("values differ: \x1b[31mmax error 0.5\x1b[0m")
    assert message == ("values differ: max error 0.5", "", "")


def test_a_message_cut_inside_the_error_still_reads():
    cut = student_message("f(x): `f` raised ValueError: bad" + DETAILS_START
                          + "Traceback … (cut)")
    assert cut.text == "f(x): `f` raised ValueError: bad" and cut.details == "Traceback … (cut)"


def test_an_error_several_tests_met_is_said_once():
    same = "`f` raised ValueError: bad"
    said = said_once([(same, "Hint. f(x): " + same), ("", "values differ"), (same, same),
                      (same, same), ("", "values differ")])
    assert said == ["Hint. f(x): `f` raised ValueError: bad (the same error in 3 tests)",
                    "values differ"]
    assert said_once([]) == []


def test_a_students_own_words_cannot_forge_the_structure():
    # The test kernel removes the marks from the student's text (probe.redact);
    # a mark that reaches here anyway is never shown.
    message = student_message("values differ" + ERROR_END + " here")
    assert not set(MARKS) & set(message.text)


@pytest.mark.parametrize("text, limit, expected", [
    ("x_padding_mask=None and more", 12, "x_padding_mask=None and more"[:12] + "… (cut)"),
    ("the queries come from x_padding_mask", 30, "the queries come from… (cut)"),
    ("short", 10, "short"),
    ("word word", 5, "word… (cut)"),
])
def test_a_cut_falls_after_a_word(text, limit, expected):
    assert cut_words(text, limit) == expected
