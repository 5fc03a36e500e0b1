"""Unit tests of the split Execute step (the full path is in test_grading_*)."""

from __future__ import annotations

import ast
import re

from autograder.grader.execute import names_used, followed_by_tests
from autograder.kernels.testskernel import (TESTS_KERNEL_MEMORY_BYTES, TESTS_KERNEL_STARTUP,
                                            TESTS_SESSION_END, TESTS_SESSION_START, TestsKernel)


def test_the_test_kernel_startup_code_is_valid_python():
    ast.parse(TESTS_KERNEL_STARTUP)
    ast.parse(TESTS_SESSION_END)
    tree = ast.parse(TESTS_SESSION_START % ("/x/kernel.json", "/x/exchange", None, "lab1", (1, 2),
                                                (123, None, ""), False))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert "construct_in_student_kernel" in defined


def _run(kernel: TestsKernel, code: str) -> dict:
    msg_id = kernel.kc.execute(code, stop_on_error=False,
                               user_expressions={"seen": "sorted(k for k in globals() "
                                                       "if not k.startswith('_'))"})
    while True:
        reply = kernel.kc.get_shell_msg(timeout=60)
        if reply["parent_header"]["msg_id"] == msg_id:
            return reply["content"]


def test_the_test_kernel_is_kept_for_the_same_run_and_forgets_each_submission():
    try:
        first, new = TestsKernel.get(("lab1", "seed-a"))
        assert new
        assert _run(first, "left_by_submission_1 = 42")["status"] == "ok"
        # What the executor runs after each submission: the namespace is emptied.
        content = _run(first, "get_ipython().reset(new_session=False)")
        assert "left_by_submission_1" not in content["user_expressions"]["seen"]["data"][
            "text/plain"]
        again, new = TestsKernel.get(("lab1", "seed-a"))
        assert again is first and not new
        # Another run (another seed or lab) never shares it.
        other, new = TestsKernel.get(("lab1", "seed-b"))
        assert new and other is not first and not first.alive()
    finally:
        TestsKernel.discard()


def test_the_test_kernel_has_a_memory_cap():
    # It reads the students' answers: an answer that inflates (a compressed
    # .npz) must stop there, not take the grading machine's memory.
    try:
        kernel, _ = TestsKernel.get(("lab1", "seed-memory"))
        assert _run(kernel, TESTS_KERNEL_STARTUP)["status"] == "ok"
        content = _run(kernel, "import resource\n"
                               "cap = resource.getrlimit(resource.RLIMIT_DATA)[0]\n"
                               f"block = bytearray({TESTS_KERNEL_MEMORY_BYTES + 2**30})")
        assert content["status"] == "error" and content["ename"] == "MemoryError"
        assert _run(kernel, f"assert cap == {TESTS_KERNEL_MEMORY_BYTES}")["status"] == "ok"
        assert _run(kernel, "small = bytearray(2**28)")["status"] == "ok"   # still usable
    finally:
        TestsKernel.discard()


def test_a_failed_hidden_test_keeps_a_plain_traceback():
    # The instructor's autograded notebook keeps the failed test's traceback:
    # every frame's file, line and source line, as Python prints it, without
    # IPython's highlighted context (25 to 100 ms a failed cell).
    try:
        kernel, _ = TestsKernel.get(("lab1", "seed-traceback"))
        assert _run(kernel, TESTS_KERNEL_STARTUP)["status"] == "ok"
        assert _run(kernel, "def check(value):\n"
                            "    assert value == 2, 'expected 2'\n")["status"] == "ok"
        content = _run(kernel, "check(1)")
        assert content["status"] == "error" and content["ename"] == "AssertionError"
        text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(content["traceback"]))  # colours
        assert "Traceback (most recent call last)" in text
        assert "check(1)" in text and "assert value == 2, 'expected 2'" in text
        assert "---->" not in text   # IPython's context view
    finally:
        TestsKernel.discard()


def test_names_used_finds_what_a_tests_cell_reads():
    source = "out = dot_scores(q, k)\nassert_close(out, reference.dot_scores(q, k), 'x')"
    assert {"dot_scores", "assert_close", "reference", "q", "k"} <= names_used(source)


def test_names_used_of_broken_code_is_empty():
    assert names_used("def (") == set()


# -- the output the grader keeps of a student's cells ----------------------------

def _note(cell) -> str:
    """The grader's line about dropped output at the end of ``cell`` ("" if none)."""
    last = cell.outputs[-1] if cell.outputs else {}
    text = last.get("text", "")
    return text if text.startswith("[output truncated by the grader") else ""


def _kept(cell) -> int:
    """Characters of printed output kept in ``cell`` (the grader's note aside)."""
    return sum(len(out.get("text", "")) for out in cell.outputs if out is not cell.outputs[-1]
               or not _note(cell))


def test_the_grader_keeps_a_bounded_share_of_each_cell_and_of_the_notebook(tmp_path,
                                                                          monkeypatch):
    """Output past the caps (lowered here) is dropped as it arrives, and the
    cell says so; a message over the largest the grader reads resets its
    connection, which it makes again (the next cell's output is there)."""
    import json

    import nbformat
    from traitlets.config import Config

    from autograder import limits
    from autograder.grader.execute import IsolatedExecute

    monkeypatch.setattr(limits, "MAX_CELL_OUTPUT_BYTES", 64 * 2**10)
    monkeypatch.setattr(limits, "MAX_NOTEBOOK_OUTPUT_BYTES", 160 * 2**10)
    monkeypatch.setattr(limits, "MAX_OUTPUT_MESSAGE_BYTES", 256 * 2**10)
    chunks = 'for _ in range({n}):\n    print("x" * 10_000, flush=True)'   # a message each
    sources = [chunks.format(n=20),                  # 0: 200 KB, past the cell's cap
               'print("small")',                     # 1: kept
               chunks.format(n=5),                   # 2: 50 KB, kept (about 120 KB so far)
               chunks.format(n=5),                   # 3: past the notebook's cap
               'print("y" * 1_000_000)',             # 4: one message over 256 KB
               'print("after the reset")']           # 5: kept (the notebook's cap not reached)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    config = Config()
    config.SandboxKernelManager.scratch = str(tmp_path / "scratch")
    config.SandboxKernelManager.ipc_dir = str(tmp_path / "ipc")
    config.SandboxKernelManager.fork_kernels = False
    record = tmp_path / "record.json"
    executor = IsolatedExecute(config=config, timeout=60, iopub_timeout=1,
                               report_file=str(record))
    cells = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})[0].cells

    assert 50_000 <= _kept(cells[0]) <= 64 * 2**10
    assert "a cell" in _note(cells[0]) and "more dropped" in _note(cells[0])
    assert cells[1].outputs[0]["text"] == "small\n" and not _note(cells[1])
    assert _kept(cells[2]) == 50_005 and not _note(cells[2])
    assert _kept(cells[3]) < 50_000 and "a notebook" in _note(cells[3])
    assert "a message over 0.2 MB dropped" in _note(cells[4]) and _kept(cells[4]) == 0
    assert not any(out.get("ename") == "CellTimeoutError" for out in cells[4].outputs)
    assert [out["text"] for out in cells[5].outputs] == ["after the reset\n"]
    dropped = json.loads(record.read_text())["output_dropped"]
    assert dropped["cells"] == 3 and dropped["resets"] == 1
    assert dropped["bytes"] > 150_000          # (a message too large to read: size unknown)


def _cell(kind: str, grade_id: str = ""):
    from nbformat.v4 import new_code_cell, new_markdown_cell

    if kind == "markdown":
        return new_markdown_cell("text")
    meta = {"own": {}, "answer": {"solution": True, "grade": False, "locked": False},
            "tests": {"grade": True, "solution": False, "locked": True, "points": 1},
            "provided": {"grade": False, "solution": False, "locked": True}}[kind]
    if meta:
        meta = dict(meta, grade_id=grade_id, schema_version=3)
    return new_code_cell("x = 1", metadata={"nbgrader": meta} if meta else {})


def test_the_student_kernel_serves_on_only_from_a_tests_cell_to_the_next():
    # Between two tests cells nothing runs in the student's kernel (a skipped
    # demonstration or check does not run, markdown is not run); any other
    # code cell, the student's own or provided, runs there: serving stops.
    from nbformat.v4 import new_notebook

    cells = [_cell("answer", "a"), _cell("tests", "test_a"),            # 0, 1
             _cell("markdown"), _cell("tests", "test_a__b"),            # 2, 3
             _cell("provided", "check_a"), _cell("tests", "test_a__c"),  # 4, 5
             _cell("answer", "b"), _cell("tests", "test_b"),            # 6, 7
             _cell("own"), _cell("tests", "test_b__c"),                 # 8, 9
             _cell("provided", "demo_b"), _cell("tests", "test_b__d"),  # 10, 11
             _cell("tests", "test_b__e")]                               # 12
    nb = new_notebook(cells=cells)
    assert followed_by_tests(nb, {"check_a"}) == {1, 3, 11}
    assert followed_by_tests(nb, {"check_a", "demo_b"}) == {1, 3, 9, 11}
    assert followed_by_tests(nb, set()) == {1, 11}
