"""No provided cell of a lab prints a framework warning (issue 47, items 4 and 5).

Each lab's student notebook, filled with the solution, runs top to bottom in a
kernel as a student runs it (tests/studentenv.py's `run_notebook`, the kit's
own interpreter; the Colab install cell does nothing outside Colab), and every
provided cell (setup, helpers, visible checks, demonstrations, the ready cell:
every code cell but the answers) must print no warning: a Python warning
(`UserWarning: ...`, `DeprecationWarning`, ...), a Keras or TensorFlow warning
or an absl/C++ log line (`W0000 ...`, `E0000 ...`). A warning printed by a check
on a correct answer misleads: a student "fixes" a right answer (issue 47: lab
2's check printed Keras's "softmax over axis of size 1 ... Did you mean to use a
sigmoid instead?").

No exception, not even in the setup cell: TensorFlow 2.21 writes its C++
start-up notices ("WARNING: All log messages before absl::InitializeLog() is
called are written to STDERR", "I0000 ... oneDNN custom operations are on
...") to file descriptor 2 whatever `TF_CPP_MIN_LOG_LEVEL` says (2 and 3
tried), so every lab's setup cell calls `labkit.start_keras()` before `import
keras`: it starts Keras with descriptor 2 captured and passes every other line
on (student/labkit/startup.py; tests/student/test_student_package.py shows it silences
them where a plain import prints them).

The notebooks: each lab's solution and each of the verdict suite's correct
variant notebooks (`variantK`, as the verdict suite writes them). Cost: about
20 to 100 s a notebook on the 2-core machine (the solutions: lab3 20 s, lab4
27 s, lab1 24 s, lab2 34 s, lab5 98 s, lab6 140 s, on a loaded machine), too
much for `make test`: marker `notebooks`, its own target `make test-warnings`
(docs/performance.md gives its time); the filter's own test is in `make
test`. One lab alone: `pytest -m notebooks tests/student/test_no_warnings.py -k lab3`.
"""

from __future__ import annotations

import re

import pytest

from autograder.labs import available_labs
from tests import verdicts
from tests.studentenv import KIT_VENV, StudentEnv, run_notebook

#: What a warning looks like in a cell's stderr: Python's warnings module
#: (``file:line: UserWarning: ...``), Keras's and TensorFlow's Python loggers
#: (``WARNING:...``, ``... - WARNING - ...``), absl's C++ log lines
#: (``W0000 00:00:...``, ``E0000 ...``, ``F0000 ...``) and lower-case ``warning:``.
WARNING = re.compile(r"Warning\b|warning:|WARNING|^[WEF]\d{4} ", re.M)

def provided_cell_warnings(notebook) -> list[str]:
    """"<cell>: <the warning's lines>" for each provided (non-answer) code cell of an
    executed notebook whose stderr holds a warning; the answers' cells are the
    student's."""
    found = []
    for index, cell in enumerate(notebook.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        label = meta.get("grade_id") or f"cell {index}"
        text = "".join(output.get("text", "") for output in cell.get("outputs", [])
                       if output.get("output_type") == "stream"
                       and output.get("name") == "stderr")
        lines = [line for line in text.splitlines() if line.strip()]
        if lines and WARNING.search("\n".join(lines)):
            found.append(f"{label}: " + "\n    ".join(lines)[:1500])
    return found


def test_the_pattern_finds_warnings_and_startup_notices():
    """The filter itself, on lines seen in the labs' runs (issue 47): a warning printed
    by Keras, absl's C++ lines, and TensorFlow's start-up notice (in any cell: the
    setup cell's labkit.start_keras() keeps it out)."""
    keras_warning = ("/venv/keras/src/ops/nn.py:959: UserWarning: You are using a softmax over "
                     "axis -1 of a tensor of shape (32, 2, 4, 1). This axis has size 1.")
    startup = ("WARNING: All log messages before absl::InitializeLog() is called are written "
               "to STDERR")
    assert WARNING.search(keras_warning)
    assert WARNING.search(startup)
    assert WARNING.search("W0000 00:00:17.1 1 op_level_cost_estimator.cc:699] Error in cost")
    assert not WARNING.search("✓ causal_mask(3)")

    import nbformat

    def notebook(grade_id, text):
        cell = nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {"grade_id": grade_id}})
        cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=text)]
        return nbformat.v4.new_notebook(cells=[cell])

    assert provided_cell_warnings(notebook("setup", startup + "\n"))
    assert provided_cell_warnings(notebook("check_x", keras_warning))
    assert provided_cell_warnings(notebook("setup", "Keras 3.15, backend tensorflow\n")) == []


def _notebooks() -> list[tuple[str, str]]:
    """(lab, "solution" or "variantK") for every lab: the solution and each of the
    verdict suite's correct variant notebooks (variantK: the K-th correct
    variant of every exercise that has one, the solution elsewhere, as
    tests/verdicts.build writes them)."""
    found = []
    for lab in available_labs():
        found.append((lab.id, "solution"))
        module = verdicts.spec(lab.id)
        most = max((len(v) for v in getattr(module, "VARIANTS", {}).values()), default=0)
        found += [(lab.id, f"variant{k + 1}") for k in range(most)]
    return found


def _notebook(lab_id: str, which: str):
    if which == "solution":
        return verdicts.solution_notebook(lab_id)
    k = int(which.removeprefix("variant")) - 1
    answers = {e: v[k] for e, v in verdicts.spec(lab_id).VARIANTS.items() if k < len(v)}
    return verdicts.fill(verdicts.solution_notebook(lab_id), answers)


@pytest.mark.notebooks
@pytest.mark.slow
@pytest.mark.parametrize("lab_id,which", _notebooks())
def test_no_provided_cell_prints_a_warning(lab_id, which):
    env = StudentEnv("kit", KIT_VENV / "bin" / "python", {})
    executed, errors = run_notebook(_notebook(lab_id, which), env, timeout=600)
    assert not errors, f"{lab_id} {which}: the cells raised: {errors}"
    warnings = provided_cell_warnings(executed)
    assert not warnings, (f"{lab_id} {which}: {len(warnings)} provided cells print a warning:"
                          "\n  " + "\n  ".join(warnings))
