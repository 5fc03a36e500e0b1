"""Output files of a grading run (autograder/grader/reports.py)."""

from __future__ import annotations

import csv
import re

import pytest

from autograder.grader.reports import (
    clean_text,
    common_failures,
    format_score,
    normalize_message,
    pass_rates,
    score_histogram,
    write_gradebook_table,
    write_reports,
)
from autograder.grader.results import ExerciseResult, SubmissionResult

HOSTILE = "<script>alert(1)</script>"
SECRET_NOTE = "NOTE-FOR-INSTRUCTOR-ONLY hidden test source: assert dot_scores(q, k)"


def ex(name, score, max_score, message=""):
    return ExerciseResult(name, score, max_score, message)


@pytest.fixture
def results():
    return [
        SubmissionResult("bob", "lab1", 7.000001, 10, exercises=[
            ex("dot_scores", 4, 4), ex("softmax", 3.000001, 4, "values differ: max error 0.031"),
            ex("attention", 0, 2, "shape (2, 3) expected, got (3, 2)"),
        ], source_name="bob.ipynb", notes=[SECRET_NOTE]),
        SubmissionResult("alice", "lab1", 10, 10, exercises=[
            ex("dot_scores", 4, 4), ex("softmax", 4, 4), ex("attention", 2, 2),
        ], source_name="alice.ipynb"),
        SubmissionResult("carol", "lab1", 2.5, 10, exercises=[
            ex("dot_scores", 2.5, 4, HOSTILE), ex("softmax", 0, 4, "values differ: max error 0.5"),
            ex("attention", 0, 2, "shape (4, 5) expected, got (5, 4)"),
        ], source_name="carol.ipynb"),
        SubmissionResult("dave", "lab1", 0, 10, status="invalid notebook: not JSON " + HOSTILE,
                         source_name="dave.py", notes=["converted from .py"]),
    ]


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


# ---------------------------------------------------------------- CSV


def test_written_paths(tmp_path, results):
    paths = write_reports(results, tmp_path / "out", "Lab 1: Attention")
    assert sorted(paths) == ["exercises.csv", "feedback/alice.html", "feedback/bob.html",
                             "feedback/carol.html", "feedback/dave.html", "grades.csv",
                             "properties.csv", "report.html"]
    assert all(p.is_file() for p in paths.values())
    assert paths["grades.csv"] == tmp_path / "out" / "grades.csv"


def test_grades_csv(tmp_path, results):
    paths = write_reports(results, tmp_path, "Lab 1")
    assert read_csv(paths["grades.csv"]) == [
        ["student_id", "name", "lab", "score", "max_score", "raw_score", "late_hours",
         "penalty", "status", "file", "submitted_at", "notes"],
        ["alice", "", "lab1", "10", "10", "10", "", "0", "graded", "alice.ipynb", "", ""],
        ["bob", "", "lab1", "7", "10", "7", "", "0", "graded", "bob.ipynb", "", SECRET_NOTE],
        ["carol", "", "lab1", "2.5", "10", "2.5", "", "0", "graded", "carol.ipynb", "", ""],
        ["dave", "", "lab1", "0", "10", "0", "", "0", "invalid notebook: not JSON " + HOSTILE,
         "dave.py", "", "converted from .py"],
    ]
    assert paths["grades.csv"].read_text().splitlines()[0] == (
        "student_id,name,lab,score,max_score,raw_score,late_hours,penalty,status,file,"
        "submitted_at,notes")


def test_exercises_csv(tmp_path, results):
    paths = write_reports(results, tmp_path, "Lab 1")
    rows = read_csv(paths["exercises.csv"])
    assert rows[0] == ["student_id", "lab", "exercise", "score", "max_score", "message"]
    assert rows[1:4] == [
        ["alice", "lab1", "dot_scores", "4", "4", ""],
        ["alice", "lab1", "softmax", "4", "4", ""],
        ["alice", "lab1", "attention", "2", "2", ""],
    ]
    assert rows[5] == ["bob", "lab1", "softmax", "3", "4", "values differ: max error 0.031"]
    assert rows[7] == ["carol", "lab1", "dot_scores", "2.5", "4", HOSTILE]
    assert len(rows) == 1 + 9  # dave has no exercise rows


def test_csv_formula_injection_is_defused(tmp_path):
    results = [SubmissionResult("eve", "lab1", 0, 1, status="=HYPERLINK(\"x\")",
                                exercises=[ex("a", 0, 1, "@SUM(1)")])]
    paths = write_reports(results, tmp_path, "Lab 1")
    assert read_csv(paths["grades.csv"])[1][8] == "'=HYPERLINK(\"x\")"
    assert read_csv(paths["exercises.csv"])[1][5] == "'@SUM(1)"


@pytest.mark.parametrize("value, text", [
    (7, "7"), (7.0, "7"), (7.5, "7.5"), (7.000001, "7"), (6.9999999, "7"), (1 / 3, "0.33"),
    (0.125, "0.12"), (-0.0, "0"), (None, ""), (float("nan"), ""),
])
def test_format_score(value, text):
    assert format_score(value) == text


# ---------------------------------------------------------------- feedback


def test_feedback_content(tmp_path, results):
    hints = {"softmax": "Subtract the row maximum before exp.",
             "attention": "Check which axis you transpose.",
             "dot_scores": "Scale by sqrt(d_k)."}
    paths = write_reports(results, tmp_path, "Lab 1: Attention", hints=hints)
    page = paths["feedback/bob.html"].read_text(encoding="utf-8")
    assert "Lab 1: Attention" in page
    assert "7 / 10" in page
    assert "graded" in page
    assert "&#10003;" in page  # dot_scores passed
    assert "values differ: max error 0.031" in page
    assert "shape (2, 3) expected, got (3, 2)" in page
    assert "Subtract the row maximum before exp." in page
    assert "Check which axis you transpose." in page
    assert "Scale by sqrt(d_k)." not in page  # passed: no hint
    assert "<script" not in page.lower()


def test_feedback_has_no_notes(tmp_path, results):
    paths = write_reports(results, tmp_path, "Lab 1")
    for name, path in paths.items():
        if name.startswith("feedback/"):
            page = path.read_text(encoding="utf-8")
            assert "NOTE-FOR-INSTRUCTOR-ONLY" not in page
            assert "hidden test source" not in page
            assert "converted from .py" not in page
    assert "NOTE-FOR-INSTRUCTOR-ONLY" in paths["report.html"].read_text(encoding="utf-8")


def test_feedback_escapes_hostile_text(tmp_path, results):
    results.append(SubmissionResult("mallory", "lab1", 0, 10, status=HOSTILE,
                                    exercises=[ex(HOSTILE, 0, 1, HOSTILE)]))
    paths = write_reports(results, tmp_path, "Lab <b>1</b>", hints={HOSTILE: HOSTILE})
    for name in ("feedback/carol.html", "feedback/dave.html", "feedback/mallory.html",
                 "report.html"):
        page = paths[name].read_text(encoding="utf-8")
        assert HOSTILE not in page, name
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, name
        assert "<b>1</b>" not in page, name


def test_feedback_filename_stays_in_folder(tmp_path):
    results = [SubmissionResult("../../escape", "lab1", 0, 1),
               SubmissionResult("Alice", "lab1", 0, 1), SubmissionResult("alice", "lab1", 0, 1)]
    paths = write_reports(results, tmp_path / "out", "Lab 1")
    feedback = sorted(n for n in paths if n.startswith("feedback/"))
    assert feedback == ["feedback/Alice.html", "feedback/_.._escape.html", "feedback/alice-2.html"]
    assert all((tmp_path / "out" / "feedback") == paths[n].parent for n in feedback)


def test_pages_are_self_contained(tmp_path, results):
    paths = write_reports(results, tmp_path, "Lab 1")
    for name, path in paths.items():
        if name.endswith(".html"):
            page = path.read_text(encoding="utf-8")
            assert "<script" not in page.lower()
            assert not re.search(r"(src|href)\s*=", page, re.IGNORECASE)
            assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
            assert "https://" not in page


# ---------------------------------------------------------------- report


def test_score_histogram_bins():
    assert score_histogram([0, 0.5, 1, 7, 7.5, 9.99, 10, 10, 6.9999999], 10) == [
        2, 1, 0, 0, 0, 0, 0, 3, 0, 1, 2]
    assert score_histogram([], 3) == [0, 0, 0, 0]
    assert score_histogram([-1, 12], 4) == [1, 0, 0, 0, 1]  # clipped
    assert score_histogram([2.5, 3.5], 3.5) == [0, 0, 1, 1]  # 3.5 -> bin 3


def test_report_contents(tmp_path, results):
    paths = write_reports(results, tmp_path, "Lab 1: Attention")
    page = paths["report.html"].read_text(encoding="utf-8")
    assert "<svg" in page
    assert re.search(r"Submissions</th><td class=\"num\">4<", page)
    # mean of 7.000001, 10, 2.5, 0 = 4.875 -> "4.88"; median = 4.75
    assert ">4.88<" in page and ">4.75<" in page
    bars = re.findall(r'<rect class="bin"[^>]*><title>(\d+): (\d+)</title>', page)
    counts = {int(k): int(v) for k, v in bars}
    assert len(counts) == 11
    assert counts[0] == 1 and counts[2] == 1 and counts[7] == 1 and counts[10] == 1
    assert sum(counts.values()) == 4
    # curriculum order
    assert page.index(">dot_scores<") < page.index(">softmax<") < page.index(">attention<")
    # non-graded submissions with their reasons
    assert "dave.py" in page
    assert "invalid notebook: not JSON &lt;script&gt;" in page


def test_pass_rates_in_curriculum_order(results):
    assert pass_rates(results) == [("dot_scores", 2, 3), ("softmax", 1, 3), ("attention", 1, 3)]


def test_normalize_message():
    assert normalize_message("max abs error 0.031 at [2, 3]") == "max abs error # at [#, #]"
    assert normalize_message("got -1e-05\n  and  4") == "got # and #"


def test_common_failures_group_numbers(results):
    failures = common_failures(results)
    assert failures["softmax"] == [(2, "values differ: max error 0.031")]
    assert failures["attention"] == [(2, "shape (2, 3) expected, got (3, 2)")]
    assert failures["dot_scores"] == [(1, HOSTILE)]


def test_common_failures_top_five():
    results = [SubmissionResult(f"s{i}", "lab1", 0, 1, exercises=[ex("a", 0, 1, f"error kind {chr(97 + i % 7)}")])
               for i in range(30)]
    failures = common_failures(results)["a"]
    assert len(failures) == 5
    assert [count for count, _ in failures] == [5, 5, 4, 4, 4]


def test_report_with_no_results(tmp_path):
    paths = write_reports([], tmp_path, "Lab 1")
    assert read_csv(paths["grades.csv"]) == [[
        "student_id", "name", "lab", "score", "max_score", "raw_score", "late_hours", "penalty",
        "status", "file", "submitted_at", "notes"]]
    assert "Submissions</th><td class=\"num\">0<" in paths["report.html"].read_text()


# ---------------------------------------------------------------- terminal


def test_gradebook_table(results):
    results.append(SubmissionResult("zed", "lab1", 1.5, 10, status="kernel died: " + "x" * 100))
    lines = write_gradebook_table(results).splitlines()
    assert lines[0].split() == ["student_id", "score", "status"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == ["alice", "10/10", "graded"]
    assert lines[3].split() == ["bob", "7/10", "graded"]
    assert lines[4].split()[:2] == ["carol", "2.5/10"]
    zed = lines[-1]
    status = zed.split("  ")[-1].strip()
    assert len(status) == 60 and status.endswith("...")
    assert status.startswith("kernel died: xxx")


# ---------------------------------------------------------------- control sequences

#: What a student's file name or exception message may carry to the
#: instructor's terminal: hide what follows, set the window title (OSC, BEL
#: and ST terminated), switch to the alternate screen, an 8-bit CSI, a DCS,
#: a carriage return that overwrites the line, a bidi override.
ESCAPES = ("\x1b[8m", "\x1b]0;owned\x07", "\x1b]2;t\x1b\\", "\x1b[?1049h", "\x9b31m",
           "\x1bP+q\x1b\\", "\r", "\u202e")


@pytest.mark.parametrize("escape", ESCAPES)
def test_clean_text_removes_each_control_sequence_and_keeps_the_text(escape):
    assert clean_text(f"lab2{escape}.ipynb") == "lab2.ipynb"


def test_clean_text_keeps_lines_where_asked_and_makes_any_text_utf8():
    assert clean_text("a\n\tb") == "a\n\tb"
    assert clean_text("a\n\tb", keep_lines=False) == "a  b"
    assert clean_text("ren\udce9e") == "ren\ufffde"
    assert clean_text(None) == ""


def test_no_control_byte_reaches_the_csvs_the_pages_or_the_terminal_table(tmp_path):
    dirty = "".join(ESCAPES)
    results = [SubmissionResult(
        "mallory", "lab1", 0, 10, status=f"this looks like lab2's notebook (lab2{dirty}.ipynb)",
        source_name=f"mallory/lab2{dirty}.ipynb\udce9", notes=[f"note{dirty}"],
        exercises=[ex("dot_scores", 0, 1, f"ValueError: {dirty}gone")])]
    paths = write_reports(results, tmp_path, f"Lab 1{dirty}")
    table = write_gradebook_table(results)
    for name, text in [*((str(k), v.read_text(encoding="utf-8")) for k, v in paths.items()),
                       ("table", table)]:
        found = sorted({hex(ord(c)) for c in text
                        if ord(c) < 32 and c not in "\n\r\t" or 0x7f <= ord(c) < 0xa0
                        or c == "\u202e"})
        assert not found, f"{name} holds {found}"
    assert "lab2.ipynb" in table and "mallory/lab2.ipynb\ufffd" in paths["grades.csv"].read_text()


# ---------------------------------------------------------------- templates


def test_quotes_in_names_are_escaped_in_text_and_title(tmp_path):
    name = 'x" onmouseover="alert(1)'
    results = [SubmissionResult(name, "lab1", 0, 1, status=name, source_name=name,
                                notes=[name], exercises=[ex(name, 0, 1, name)])]
    paths = write_reports(results, tmp_path, name, hints={name: name})
    for key, path in paths.items():
        if key.endswith(".html"):
            page = path.read_text(encoding="utf-8")
            assert 'onmouseover="' not in page, key
            assert "x&#34; onmouseover=&#34;alert(1)" in page, key
            assert "<title>x&#34; onmouseover" in page, key


def test_a_name_missing_from_a_template_is_an_error():
    import jinja2

    from autograder.grader import reports

    with pytest.raises(jinja2.UndefinedError, match="result"):
        reports._render("feedback.html.j2", lab_title="Lab 1", graded="graded", hints=[])


def test_no_template_turns_escaping_off():
    # Escaping holds as long as no template marks a value as safe markup.
    from autograder.grader.reports import TEMPLATES

    templates = sorted(TEMPLATES.glob("*.j2"))
    assert {t.name for t in templates} >= {"base.html.j2", "feedback.html.j2", "report.html.j2"}
    for template in templates:
        text = re.sub(r"\s+", "", template.read_text(encoding="utf-8")).lower()
        for switch in ("|safe", "autoescapefalse", "markup"):
            assert switch not in text, f"{template.name} uses {switch!r}"


def test_a_feedback_page_says_when_the_grader_dropped_output_and_shows_no_other_note(tmp_path):
    from autograder.grader.reports import OUTPUT_TRUNCATED, feedback_html
    from autograder.grader.results import GRADED

    result = SubmissionResult("alice", "lab1", 10, 10, GRADED, "alice.ipynb", [],
                              notes=[f"{OUTPUT_TRUNCATED} in 2 cell(s): 3.5 MB dropped",
                                     "graded the newest of two files"])
    page = feedback_html(result, "Lab 1")
    assert "printed more than the grader keeps (1 MB a cell, 8 MB in all)" in page
    assert "3.5 MB dropped" in page and "newest of two files" not in page
    assert "printed more" not in feedback_html(
        SubmissionResult("bob", "lab1", 10, 10, GRADED, "bob.ipynb", []), "Lab 1")


def test_a_row_to_grade_again_says_so_to_the_student_and_the_instructor():
    # The grader failed twice on it (autograder.grader.worker.Worker._again):
    # its scores are not the student's grade, and nothing blames the notebook.
    from autograder.grader.reports import feedback_html, report_html
    from autograder.grader.results import NEEDS_REGRADING, ExerciseResult, SubmissionResult

    row = SubmissionResult("yan", "lab1", 3, 10,
                           status=f"{NEEDS_REGRADING}: the grader's test kernel died",
                           exercises=[ExerciseResult("dot_scores", 1, 1),
                                      ExerciseResult("softmax", 0, 2, "The hidden tests did not "
                                                                      "run.")])
    page = feedback_html(row, "Lab 1")
    assert "the grader failed on your notebook" in page and "not your grade" in page
    assert '<th>To grade again (the grader failed twice)</th><td class="num">1</td>' in \
        report_html([row], "Lab 1")


# ---------------------------------------------------------------- per property


def _with_properties():
    from autograder.grader.results import PropertyResult

    error = "`DecoderLayer` raised InvalidArgumentError: Incompatible shapes"
    properties = [
        PropertyResult("test_DecoderLayer", "outputs at inference", 0, 2.75,
                       "Queries come from x. " + error, "Arguments received by <internals>"),
        PropertyResult("test_DecoderLayer__padding", "with padding masks", 0.5, 0.5),
        PropertyResult("test_DecoderLayer__training", "dropout while training", 0, 0.25,
                       error, "Arguments received by <internals>",
                       same_as="test_DecoderLayer"),
        PropertyResult("test_DecoderLayer__config", "get_config()", 0.5, 0.5),
    ]
    return SubmissionResult("grace", "lab4", 1, 4, exercises=[
        ExerciseResult("DecoderLayer", 1, 4, "Queries come from x. " + error
                       + " (the same error in 2 tests)", properties=properties)],
        source_name="grace.ipynb")


def test_properties_csv_adds_up_to_exercises_csv(tmp_path, results):
    rows = results + [_with_properties()]
    write_reports(rows, tmp_path, "Lab 4")
    properties = read_csv(tmp_path / "properties.csv")
    assert properties[0] == ["student_id", "lab", "exercise", "property", "sentence", "score",
                             "max_score", "message"]
    assert [row[3] for row in properties[1:]] == ["test_DecoderLayer",
                                                   "test_DecoderLayer__padding",
                                                   "test_DecoderLayer__training",
                                                   "test_DecoderLayer__config"]
    exercises = {(row[0], row[2]): float(row[3]) for row in read_csv(tmp_path / "exercises.csv")[1:]}
    assert sum(float(row[5]) for row in properties[1:]) == exercises[("grace", "DecoderLayer")]
    assert "<internals>" not in (tmp_path / "properties.csv").read_text()


def test_the_feedback_page_has_a_line_per_property_and_folds_the_details(tmp_path):
    from autograder.grader.reports import feedback_html

    page = feedback_html(_with_properties(), "Lab 4")
    lines = re.findall(r'<li class="(ok|bad)-line">(.*?)</li>', page, re.S)
    assert [kind for kind, _ in lines] == ["bad", "ok", "bad", "ok"]
    first, padding, training, _ = (text for _, text in lines)
    assert "&#10007;" in first and "(0 / 2.75)" in first
    assert "Queries come from x." in first and "(the same error in 2 tests)" in first
    assert "<details><summary>details</summary>" in first and "&lt;internals&gt;" in first
    assert "&#10003;" in padding and "(0.5 / 0.5)" in padding and "msg" not in padding
    assert "The same error as in \u201coutputs at inference\u201d above." in training
    assert "<details>" not in training


def test_the_report_gives_the_pass_rate_of_each_property(tmp_path):
    from autograder.grader.reports import property_pass_rates, report_html

    passed = _with_properties()
    passed.student_id = "heidi"
    for prop in passed.exercises[0].properties:
        prop.score = prop.max_score
    rates = property_pass_rates([_with_properties(), passed])
    assert [(r["test"], r["passed"], r["graded"], r["share"]) for r in rates] == [
        ("test_DecoderLayer", 1, 2, "50%"), ("test_DecoderLayer__padding", 2, 2, "100%"),
        ("test_DecoderLayer__training", 1, 2, "50%"), ("test_DecoderLayer__config", 2, 2, "100%")]
    page = report_html([_with_properties(), passed], "Lab 4")
    assert "Pass rate per property" in page and "dropout while training" in page


def test_saved_results_load_with_and_without_properties():
    from dataclasses import asdict

    from autograder.grader.batch import result_from_json

    saved = asdict(_with_properties())
    again = result_from_json(saved)
    assert again == _with_properties()
    for exercise in saved["exercises"]:
        del exercise["properties"]          # a result saved before they were kept
    assert result_from_json(saved).exercises[0].properties == []


def test_the_lms_comment_lists_each_property():
    from dataclasses import asdict

    from autograder.term.export import feedback_text
    from autograder.term.model import ClassRow

    result = _with_properties()
    row = ClassRow(student=None, lab="lab4", score=1, raw_score=1, max_score=4,
                   status="graded", exercises=[asdict(x) for x in result.exercises])
    assert feedback_text(row).splitlines() == [
        "Score: 1/4", "DecoderLayer: 1/4",
        "  \u2717 outputs at inference (0/2.75): Queries come from x. `DecoderLayer` raised "
        "InvalidArgumentError: Incompatible shapes",
        "  \u2713 with padding masks (0.5/0.5)",
        "  \u2717 dropout while training (0/0.25): the same error as above",
        "  \u2713 get_config() (0.5/0.5)"]
