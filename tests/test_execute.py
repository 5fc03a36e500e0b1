"""Unit tests of the split Execute step (the full path is in test_grading_*)."""

from __future__ import annotations

import ast

from autograder.grader.execute import (TESTS_KERNEL_MEMORY_BYTES, TESTS_KERNEL_STARTUP,
                                 TESTS_SESSION_END, TESTS_SESSION_START, TestsKernel,
                                 names_used)


def test_the_test_kernel_startup_code_is_valid_python():
    ast.parse(TESTS_KERNEL_STARTUP)
    ast.parse(TESTS_SESSION_END)
    tree = ast.parse(TESTS_SESSION_START % ("/x/kernel.json", "/x/exchange", None, "lab1", (1, 2)))
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


def test_names_used_finds_what_a_tests_cell_reads():
    source = "out = dot_scores(q, k)\nassert_close(out, reference.dot_scores(q, k), 'x')"
    assert {"dot_scores", "assert_close", "reference", "q", "k"} <= names_used(source)


def test_names_used_of_broken_code_is_empty():
    assert names_used("def (") == set()
