"""The hostile suite: notebooks that try to fool, stop or read the grader.

Each case is a submission of lab1 built from the student notebook with
correct answers (10 points), damaged or armed in one way, and what the
grader must make of it: an exact score, or a score bound, and a status.
tests/labs/test_hostile.py grades them all in one run of the real CLI.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat

ROOT = Path(__file__).resolve().parents[2]
STUDENT = ROOT / "labs" / "lab1" / "lab1_attention.ipynb"

#: The limits the suite grades under (`grade --cell-timeout/--notebook-timeout`).
#: The cell limit leaves room for compressed_answer, whose hidden test takes
#: 10 s on an idle machine and 15 s with `make test`'s two pytest workers
#: busy; lab 1's notebook limit is what spins_under_limit runs into, at its
#: third answer (24 CPU seconds each): 60 s, four times what lab 1's slowest
#: case, compressed_answer, needs in all.
CELL_TIMEOUT_S = 25
NOTEBOOK_TIMEOUT_S = {"lab1": 60}
NOTEBOOK_TIMEOUT_DEFAULT_S = 300

WRONG_DOT = '''
def dot_scores(query, keys):
    return np.zeros(np.asarray(keys).shape[:-1])      # wrong on purpose
'''


def _samples():
    """data/sample_submissions/build.py: the samples' answers and mistakes."""
    spec = importlib.util.spec_from_file_location(
        "build_samples", ROOT / "data" / "sample_submissions" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLES = _samples()
CORRECT = dict(SAMPLES.LAB1_CORRECT)


@dataclass
class Case:
    """One hostile submission and the verdict the grader owes it."""

    name: str
    group: str
    what: str
    build: Callable[[], object]          # a notebook, or bytes for a raw file
    score: float | None = None           # exact score expected
    at_most: float | None = None         # or an upper bound
    status: str = "graded"               # exact status, or a prefix ending in "*"
    contains: list[str] = field(default_factory=list)   # words the status must hold
    filename: str = ""                   # path inside the batch (default: NAME.ipynb)
    #: Its check (files unread, sizes held) needs the bubblewrap sandbox:
    #: without it only the score is asserted.
    needs_sandbox: bool = False
    #: The lab it is graded as (one CLI run per lab; lab1 unless said).
    lab: str = "lab1"
    #: The gradebook's student id when it is not the file's (odd names).
    student: str = ""
    #: More to require, beyond score and status: called with the run's OUT
    #: folder and the student's row of grades.csv; returns what is wrong, or
    #: "" when all is well.
    check: Callable[[Path, dict], str] | None = None
    #: Other files of the same student (path inside the batch -> build),
    #: written after the case's own file, which is then made an hour older.
    beside: dict[str, Callable[[], object]] = field(default_factory=dict)

    @property
    def student_id(self) -> str:
        if self.student:
            return self.student
        return self.path.split("/")[0] if "/" in self.path else self.path.rsplit(".", 1)[0]

    @property
    def path(self) -> str:
        return self.filename or f"{self.name}.ipynb"

    def expected(self) -> str:
        score = f"{self.score:g}" if self.score is not None else f"<= {self.at_most:g}"
        return f"{score}, {self.status}"


def notebook(answers: dict[str, str] | None = None):
    """The student notebook with correct answers, some replaced."""
    nb = nbformat.read(STUDENT, as_version=4)
    merged = dict(CORRECT, **(answers or {}))
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in merged:
            cell.source = merged[grade_id].strip("\n")
    return nb


def lab_notebook(lab_id: str, answers: dict[str, str] | None = None):
    """``lab_id``'s student notebook with the solutions, some answers replaced."""
    from tests.verdicts import solution_notebook, fill

    return fill(solution_notebook(lab_id), answers or {})


def feedback_of(out: Path, student: str) -> str:
    """The text of ``student``'s feedback page in the run's OUT folder ("" if none)."""
    pages = list((out / "feedback").glob(f"{student}*.html"))
    return "\n".join(page.read_text(encoding="utf-8", errors="replace") for page in pages)


def with_cell(code: str, before: str = "dot_scores", answers=None):
    """A notebook with an extra student cell before the cell ``before``."""
    nb = notebook(answers)
    index = next(i for i, c in enumerate(nb.cells)
                 if c.metadata.get("nbgrader", {}).get("grade_id") == before)
    nb.cells.insert(index, nbformat.v4.new_code_cell(code))
    return nb


def prefixed(exercise: str, code: str, answers=None):
    """Correct answers, with ``code`` run at the top of ``exercise``'s cell."""
    answers = dict(CORRECT, **(answers or {}))
    answers[exercise] = code + "\n" + answers[exercise]
    return notebook(answers)


def edit_metadata(edit: Callable):
    nb = notebook()
    for cell in nb.cells:
        edit(cell)
    return nb


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _drop(*grade_ids):
    nb = notebook()
    nb.cells = [c for c in nb.cells if _grade_id(c) not in grade_ids]
    return nb


def _duplicate(grade_id):
    nb = notebook()
    index = next(i for i, c in enumerate(nb.cells) if _grade_id(c) == grade_id)
    copy_ = copy.deepcopy(nb.cells[index])
    copy_["id"] = "copied-cell"
    nb.cells.insert(index, copy_)
    return nb


def _strip_all_metadata():
    nb = notebook()
    for cell in nb.cells:
        cell.metadata = {}
    return nb


def _tamper_solution_points(cell):
    if _grade_id(cell) == "dot_scores":
        cell.metadata["nbgrader"].update(grade=True, points=1000)


def _tamper_test_points(cell):
    if _grade_id(cell) == "test_softmax":
        cell.metadata["nbgrader"]["points"] = 100


def _tamper_schema(cell):
    if "nbgrader" in cell.metadata:
        cell.metadata["nbgrader"]["schema_version"] = 99


def _rename_answer(cell):
    if _grade_id(cell) == "softmax":
        cell.metadata["nbgrader"]["grade_id"] = "my_softmax"


def _tests_first():
    nb = notebook()
    tests = [c for c in nb.cells if (_grade_id(c) or "").startswith("test_")]
    rest = [c for c in nb.cells if c not in tests]
    nb.cells = tests + rest
    return nb


def _answer_twice():
    nb = notebook({"dot_scores": WRONG_DOT})
    index = next(i for i, c in enumerate(nb.cells) if _grade_id(c) == "dot_scores")
    later = copy.deepcopy(nb.cells[index])
    later["id"] = "my-second-try"
    later.source = CORRECT["dot_scores"].strip("\n")
    nb.cells.insert(index + 1, later)
    return nb


def _no_cell_ids():
    nb = notebook()
    text = json.loads(nbformat.writes(nb))
    text["nbformat_minor"] = 4
    for cell in text["cells"]:
        cell.pop("id", None)
    return json.dumps(text).encode()


def _raw_same_ids(nb):
    data = json.loads(nbformat.writes(nb))
    for cell in data["cells"]:
        cell["id"] = "same"
    return json.dumps(data).encode()


def _colab_copy():
    nb = notebook()
    nb.metadata["colab"] = {"provenance": [], "name": "Copy of lab1_attention.ipynb"}
    nb.metadata["accelerator"] = "GPU"
    for cell in nb.cells:
        cell.metadata["colab"] = {"base_uri": "https://localhost:8080/"}
        cell.metadata["outputId"] = "abc"
    return nb


def _other_lab():
    nb = notebook()
    names = iter(["mha_weight_shapes", "SelfAttention", "split_heads", "merge_heads",
                  "MultiHeadAttention", "extra"])
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.metadata["nbgrader"]["grade_id"] = next(names)
    return nb


def _truncated():
    text = nbformat.writes(notebook())
    return text[: len(text) // 3].encode()


FINDINGS = r'''
import os, socket, sys
findings = {}
for path in SECRET_PATHS:
    try:
        findings[path] = sorted(os.listdir(path))[:3] if os.path.isdir(path) else open(path, "rb").read(8)
    except Exception as error:
        findings[path] = type(error).__name__
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    findings["network"] = "open"
except OSError as error:
    findings["network"] = type(error).__name__
findings["secret_env"] = os.environ.get("AUTOGRADER_TEST_SECRET", "absent")
def _seen(marker="autograder" + ".references"):   # what every hidden test imports
    # The notebook's own variables and earlier cells; IPython's history
    # variables (In, _ih, _i1...) also hold this cell, so they are skipped.
    values = [v for k, v in globals().items() if not k.startswith("_") and k not in ("In", "Out")]
    return any(marker in str(v) for v in values + list(In[:-1]))
findings["hidden_source"] = _seen()
try:
    import autograder.references
    findings["references"] = "imported"
except ImportError as error:
    findings["references"] = type(error).__name__
print("FINDINGS", repr(findings))
'''

#: Where plants_code tries to write (the grader's own Python installation,
#: which its test kernels import from).
PLANTED = "labkit-hostile-planted.txt"
PLANT = f"""
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mount(None, sys.prefix.encode(), None, 32 | 4096, None)   # MS_REMOUNT | MS_BIND
subprocess.run(["mount", "-o", "remount,rw,bind", sys.prefix], capture_output=True)
try:
    open(os.path.join(sys.prefix, {PLANTED!r}), "w").write("planted by a notebook")
except OSError:
    pass
"""


def cases() -> list[Case]:
    wrong = {"dot_scores": WRONG_DOT}
    return [
        # -- forgery: a wrong dot_scores must stay wrong (9 of 10) -------------
        Case("patch_numpy", "forgery", "np.allclose and np.testing patched to pass",
             lambda: with_cell("import numpy as np\nnp.allclose = lambda *a, **k: True\n"
                               "np.testing.assert_allclose = lambda *a, **k: None\n"
                               "np.array_equal = lambda *a, **k: True", answers=wrong), 9),
        Case("patch_keras", "forgery", "keras.ops.convert_to_numpy patched",
             lambda: with_cell("from keras import ops\n_real = ops.convert_to_numpy\n"
                               "ops.convert_to_numpy = lambda x: _real(x) * 0 + 1",
                               answers=wrong), at_most=9),
        Case("fake_assert_helpers", "forgery", "fake autograder.testkernel.testing in sys.modules",
             lambda: with_cell("import sys, types\nfake = types.ModuleType('autograder')\n"
                               "fake.testing = types.SimpleNamespace(assert_close=lambda *a, **k: None)\n"
                               "sys.modules['autograder'] = fake\n"
                               "sys.modules['autograder.testkernel.testing'] = fake.testing\n"
                               "assert_close = lambda *a, **k: None", answers=wrong), 9),
        Case("input_transformer", "forgery", "IPython input transformer strips asserts",
             lambda: with_cell("def strip(lines):\n    return [l for l in lines if 'assert' not in l"
                               " and 'raise' not in l]\n"
                               "get_ipython().input_transformers_post.append(strip)",
                               answers=wrong), 9),
        Case("ast_transformer", "forgery", "AST transformer turns asserts into pass",
             lambda: with_cell("import ast\nclass NoAssert(ast.NodeTransformer):\n"
                               "    def visit_Assert(self, node):\n        return ast.Pass()\n"
                               "get_ipython().ast_transformers.append(NoAssert())",
                               answers=wrong), 9),
        Case("custom_exception_handler", "forgery", "set_custom_exc swallows every error",
             lambda: with_cell("def quiet(shell, etype, value, tb, tb_offset=None):\n"
                               "    return None\n"
                               "get_ipython().set_custom_exc((BaseException,), quiet)",
                               answers=wrong), 9),
        Case("displayhook_score", "forgery", "display hook and results print a score",
             lambda: with_cell("import sys\nsys.displayhook = lambda value: print('10.0')\n"
                               "get_ipython().display_formatter.formatters['text/plain']"
                               ".for_type(int, lambda *a: '1.0')\n10", answers=wrong), 9),
        Case("files_in_cwd", "forgery", "writes autograder/testkernel/testing.py into the working dir",
             lambda: with_cell("import os\nos.makedirs('autograder', exist_ok=True)\n"
                               "open('autograder/__init__.py', 'w').close()\n"
                               "open('autograder/testkernel/testing.py', 'w').write("
                               "'def assert_close(*a, **k): pass\\n')", answers=wrong), 9),
        Case("builtins_patched", "forgery", "builtins.AssertionError replaced",
             lambda: with_cell("import builtins\nbuiltins.AssertionError = "
                               "type('Harmless', (Warning,), {})", answers=wrong), 9),
        Case("visible_inputs_hardcoded", "forgery", "answers only the visible check's inputs",
             lambda: notebook({"dot_scores": '''
def dot_scores(query, keys):
    keys = np.asarray(keys)
    if keys.shape == (1, 2):
        return np.asarray(keys) @ np.asarray(query)
    return np.full(keys.shape[:-1], 0.62)
'''}), 9),
        Case("detects_grading", "forgery", "behaves differently when it thinks it is graded",
             lambda: notebook({"dot_scores": '''
import os
def dot_scores(query, keys):
    if "NBGRADER_EXECUTION" in os.environ or os.environ.get("HOME", "").startswith("/tmp"):
        return np.zeros(np.asarray(keys).shape[:-1])
    return np.asarray(keys) @ np.asarray(query)
'''}), 9),
        Case("fake_answers_thread", "forgery", "a thread writes fake answers into the exchange",
             lambda: with_cell('''
import glob, json, threading, time
def forge():
    for _ in range(4000):
        for path in glob.glob("/tmp/**/exchange/*.request.json", recursive=True):
            answer = path.replace(".request.json", ".answer.json")
            try:
                open(answer, "w").write(json.dumps({"ok": True, "value": {"t": "plain", "v": None}}))
            except OSError:
                pass
        time.sleep(0.005)
threading.Thread(target=forge, daemon=True).start()
''', answers=wrong), at_most=9),
        Case("huge_answer", "forgery", "returns a 300 MB array to the test kernel",
             lambda: notebook({"dot_scores": '''
def dot_scores(query, keys):
    return np.broadcast_to(np.float64(1.0), (6200, 6200))    # 300 MB once written out
'''}), 9),
        # -- secrecy ------------------------------------------------------------
        Case("reads_secrets", "secrecy", "reads course, gradebook, solutions, references, "
             "other submissions, env; opens a socket",
             lambda: with_cell(FINDINGS), 10, needs_sandbox=True),
        Case("plants_code", "secrecy", "remounts the grader's Python writable and plants a file",
             lambda: with_cell(PLANT), 10, needs_sandbox=True),
        # -- structure ----------------------------------------------------------
        Case("deleted_test_cell", "structure", "a test cell deleted",
             lambda: _drop("test_softmax"), 10),
        Case("deleted_all_test_cells", "structure", "every test cell deleted",
             lambda: _drop(*[f"test_{e}" for e in CORRECT]), 10),
        Case("deleted_setup_cell", "structure", "the setup (imports) cell deleted",
             lambda: _drop("setup"), 10),
        Case("duplicated_test_cell", "structure", "a test cell duplicated",
             lambda: _duplicate("test_dot_scores"), 10),
        Case("metadata_stripped", "structure", "all nbgrader metadata gone (cells recreated)",
             _strip_all_metadata, 10),
        Case("solution_made_graded", "structure", "answer cell flagged grade with 1000 points",
             lambda: edit_metadata(_tamper_solution_points), 10),
        Case("test_points_edited", "structure", "test cell worth 100 points",
             lambda: edit_metadata(_tamper_test_points), 10),
        Case("schema_version_edited", "structure", "schema_version set to 99",
             lambda: edit_metadata(_tamper_schema), 10),
        Case("answer_renamed", "structure", "answer cell's grade_id renamed",
             lambda: edit_metadata(_rename_answer), 10),
        Case("tests_moved_first", "structure", "all test cells moved to the top",
             _tests_first, 10),
        Case("answer_duplicated", "structure", "answer cell copied; the last copy is right",
             _answer_twice, 10),
        Case("no_cell_ids", "structure", "nbformat 4.4 file without cell ids",
             _no_cell_ids, 10),
        Case("same_cell_ids", "structure", "every cell has the same id",
             lambda: _raw_same_ids(notebook()), 10),
        Case("colab_copy", "structure", "saved by Colab as 'Copy of ...' in a folder",
             _colab_copy, 10, filename="zoe/Copy of lab1_attention.ipynb"),
        # -- input --------------------------------------------------------------
        Case("cut_short", "input", "download cut short (invalid JSON)", _truncated, 0,
             status="invalid notebook*"),
        Case("empty_file", "input", "empty file", lambda: b"", 0, status="empty file*"),
        Case("python_file", "input", ".py uploaded", lambda: b"def dot_scores(q, k): pass\n",
             0, status="not a notebook*", filename="yan/lab1_attention.py"),
        Case("html_file", "input", ".html uploaded", lambda: b"<html>lab1</html>", 0,
             status="not a notebook*", filename="xia/lab1_attention.html"),
        Case("json_not_notebook", "input", "JSON that is not a notebook",
             lambda: b'{"hello": "world"}', 0, status="invalid notebook*"),
        Case("binary_garbage", "input", "binary bytes", lambda: bytes(range(256)) * 10, 0,
             status="not a notebook*"),
        Case("other_lab", "input", "lab2's notebook submitted for lab1", _other_lab, 0,
             status="wrong notebook*"),
        # -- faults -------------------------------------------------------------
        Case("sys_exit", "fault", "sys.exit() at the top of an answer",
             lambda: prefixed("dot_scores", "import sys\nsys.exit()"), 9),
        Case("exit_builtin", "fault", "exit() in the third answer",
             lambda: prefixed("attention_pool", "exit()"), 3,
             status="partly graded*", contains=["died"]),
        Case("os_exit", "fault", "os._exit(1) in the third answer",
             lambda: prefixed("attention_pool", "import os\nos._exit(1)"), 3,
             status="partly graded*", contains=["died"]),
        Case("sigkill_self", "fault", "the kernel kills itself with SIGKILL",
             lambda: prefixed("attention_pool", "import os, signal\n"
                              "os.kill(os.getpid(), signal.SIGKILL)"), 3,
             status="partly graded*", contains=["died"]),
        Case("out_of_memory", "fault", "allocates 8 GiB at the top of an answer",
             lambda: prefixed("dot_scores", "_block = bytearray(8 * 1024**3)"), 9),
        Case("infinite_loop", "fault", "infinite loop in an answer (cell time limit)",
             lambda: prefixed("bilinear_scores", "while True:\n    pass"), 9),
        # The limits count CPU seconds (autograder.cputime): an answer that
        # spins just under the cell's limit, in every answer, reaches the
        # notebook's.
        Case("spins_under_limit", "fault", "spins just under the cell limit in every answer",
             lambda: notebook({e: f"import time\n_end = time.process_time() + {CELL_TIMEOUT_S - 1}"
                                  f"\nwhile time.process_time() < _end:\n    pass\n" + CORRECT[e]
                               for e in CORRECT}),
             at_most=9, status="partly graded*", contains=["time limit"]),
        Case("huge_text_output", "fault", "prints 40 MB",
             lambda: with_cell("print('x' * 40_000_000)"), 10),
        Case("huge_image_output", "fault", "displays 100 large images",
             lambda: with_cell("import matplotlib.pyplot as plt\nimport numpy as np\n"
                               "for _ in range(100):\n    plt.figure(figsize=(12, 12))\n"
                               "    plt.imshow(np.random.rand(300, 300))\n    plt.show()"), 10),
        Case("fills_disk", "fault", "writes a 1 GB file (file-size limit)",
             lambda: with_cell("try:\n    with open('big.bin', 'wb') as f:\n"
                               "        for _ in range(1024):\n"
                               "            f.write(b'0' * 2**20)\nexcept OSError as e:\n"
                               "    print('write stopped:', e)"), 10),
        Case("stdin_request", "fault", "asks for input()",
             lambda: prefixed("dot_scores", "name = input('your name? ')"), 9),
        Case("busy_thread", "fault", "leaves a busy thread running",
             lambda: with_cell("import threading\ndef spin():\n    while True:\n        pass\n"
                               "threading.Thread(target=spin, daemon=True).start()"), 10),
        Case("stderr_flood", "fault", "writes 10 MB to stderr",
             lambda: with_cell("import sys\nsys.stderr.write('warning\\n' * 1_000_000)"), 10),
        Case("chdir_and_clean", "fault", "changes directory and empties its scratch dir",
             lambda: with_cell("import os, shutil\nhere = os.getcwd()\nos.chdir('/')\n"
                               "shutil.rmtree(here, ignore_errors=True)"), 10),
    ]


def all_cases() -> list[Case]:
    """The cases above and those of the security mends (issue 18), by theme.

    HOSTILE_ONLY=name,name... in the environment keeps only those cases (a
    quick run while a case is written; `make test` sets nothing).
    """
    import os

    from tests.hostile import answers, batch, machine, trust

    every = cases() + answers.cases() + trust.cases() + machine.cases() + batch.cases()
    only = [name for name in os.environ.get("HOSTILE_ONLY", "").split(",") if name]
    return [case for case in every if case.name in only] if only else every


def labs() -> list[str]:
    """The labs the cases are graded as, lab1 first."""
    return sorted({case.lab for case in all_cases()})


def write_batch(folder: Path, secret_paths: list[str], lab: str = "lab1") -> list[Case]:
    """Write the file of every case of ``lab`` into ``folder``; returns the cases."""
    written = []
    for case in (c for c in all_cases() if c.lab == lab):
        content = case.build()
        path = folder / case.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if case.name == "reads_secrets":
            for cell in content.cells:
                if "FINDINGS" in cell.source:
                    cell.source = f"SECRET_PATHS = {secret_paths!r}\n" + cell.source
        _write(path, content)
        if case.beside:
            os.utime(path, (path.stat().st_mtime - 3600,) * 2)
        for other, build in case.beside.items():
            _write(folder / other, build())
        written.append(case)
    return written


def _write(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        nbformat.write(content, path)
