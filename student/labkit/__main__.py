"""``python -m labkit check NOTEBOOK``: is a lab notebook ready to submit?

For students working locally: runs the notebook from top to bottom in a fresh
kernel (as *Restart and run all* would, going on past errors), then runs the
visible check of every exercise again and prints the same summary as the
lab's last cell. The checks are the notebook's own check cells, not the ones
this labkit carries (those may be of another release).

Exit status: 0 when every exercise passes its check, 1 when one does not,
2 when the notebook could not be checked (no such file, not a notebook, not
one of the labs, nbclient missing).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

#: The line the appended cell prints with the counts (read back, not shown).
MARKER = "LABKIT-READY-RESULT "
READY_ID = "ready_to_submit"

INSTALL = ("`python -m labkit check` runs your notebook in a fresh Jupyter kernel with "
           "nbclient; install it with: pip install nbclient ipykernel")


class CheckError(Exception):
    """A notebook that cannot be checked; the message says why and what to do."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="run a lab notebook and its visible checks")
    check.add_argument("notebook", help="the lab notebook (.ipynb) to check")
    check.add_argument("--timeout", type=int, default=1200,
                       help="seconds a cell may run before it is stopped (default 1200)")
    args = parser.parse_args(argv)
    try:
        return check_notebook(Path(args.notebook), args.timeout)
    except CheckError as error:
        print(f"labkit check: {error}", file=sys.stderr)
        return 2


def check_notebook(path: Path, timeout: int) -> int:
    """Run ``path`` and its checks; print the summary; 0 when every check passes."""
    notebook = read_notebook(path)
    exercises = exercises_of(notebook, path)
    try:
        from nbclient import NotebookClient
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
    except ImportError:
        raise CheckError(INSTALL) from None
    lab = lab_of(notebook, exercises)
    notebook.cells = [cell for cell in notebook.cells if _grade_id(cell) != READY_ID]
    import nbformat

    notebook.cells.append(nbformat.v4.new_code_cell(_summary_code(exercises, lab)))
    kernel = notebook.metadata.get("kernelspec", {}).get("name") or "python3"
    print(f"Running {path} in a fresh {kernel} kernel ({len(notebook.cells)} cells)...",
          flush=True)
    client = NotebookClient(notebook, timeout=timeout, kernel_name=kernel, allow_errors=True,
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    try:
        client.execute()
    except (CellTimeoutError, DeadKernelError) as error:
        raise CheckError(f"running {path} stopped: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''}. A cell ran "
                         "longer than --timeout or the kernel died (memory?); fix that cell "
                         "and check again.") from None
    except Exception as error:  # noqa: BLE001 - kernel start-up problems, said plainly
        raise CheckError(f"could not run {path} in a {kernel!r} kernel ({type(error).__name__}: "
                         f"{error}). {INSTALL}, in the environment that has keras and "
                         "labkit.") from None
    return _print_summary(notebook.cells[-1])


def read_notebook(path: Path):
    """``path`` read as a notebook, or a CheckError saying what is wrong with it."""
    try:
        import nbformat
    except ImportError:
        raise CheckError(INSTALL) from None
    if not path.is_file():
        raise CheckError(f"no file {path}. Expected the path of a lab notebook (.ipynb), "
                         "e.g. python -m labkit check lab1_attention.ipynb")
    try:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # noqa: BLE001 - any reading failure is the same answer
        raise CheckError(
            f"{path} is not a Jupyter notebook ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}). Expected an .ipynb file "
            "as Jupyter or Colab saves it; if the download was cut short, download it "
            "again.") from None
    return notebook


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def exercises_of(notebook, path: Path) -> list[dict[str, str]]:
    """[{"name", "check"}]: each answer cell followed by its check cell, in order."""
    cells = {_grade_id(cell): cell for cell in notebook.cells if _grade_id(cell)}
    answers = [_grade_id(cell) for cell in notebook.cells
               if cell.get("metadata", {}).get("nbgrader", {}).get("solution")]
    exercises = [{"name": name, "check": cells[f"check_{name}"].source}
                 for name in answers if f"check_{name}" in cells]
    if not exercises:
        raise CheckError(
            f"{path} is not one of the course's labs: it has no exercise (an answer cell "
            "followed by its locked check cell, with their nbgrader metadata). Open the lab "
            "from the course's link, or copy your answers into a fresh copy of the lab.")
    return exercises


def lab_of(notebook, exercises: list[dict[str, str]]) -> str | None:
    """The lab id: from the notebook's last cell, else the carried lab with
    these exercises, else None."""
    for cell in notebook.cells:
        if _grade_id(cell) == READY_ID:
            found = re.search(r"""ready\(\s*["'](lab\d+)["']""", cell.source)
            if found:
                return found.group(1)
    from labkit.readiness import known_labs, lab_checks

    names = [exercise["name"] for exercise in exercises]
    for lab in known_labs():
        if [exercise["name"] for exercise in lab_checks(lab)["exercises"]] == names:
            return lab
    return None


def _summary_code(exercises: list[dict[str, str]], lab: str | None) -> str:
    """The cell appended to the notebook: the checks, the report, the counts."""
    return f"""import json as _json
from labkit import readiness as _readiness
_submit = _readiness.DEFAULT_SUBMIT
try:
    _submit = _readiness.lab_checks({lab!r})["submit"]
except Exception:
    pass
_results = _readiness.run_checks(_json.loads({json.dumps(exercises)!r}), globals())
print(_readiness.report(_results, _submit))
print({MARKER!r} + _json.dumps({{"passed": sum(r.status == _readiness.PASSED for r in _results),
                                 "total": len(_results)}}))
"""


def _print_summary(cell) -> int:
    """Print what the summary cell printed (the counts line aside); 0 when all passed."""
    text = "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream" and output.get("name") == "stdout")
    counts = None
    for line in text.splitlines():
        if line.startswith(MARKER):
            counts = json.loads(line[len(MARKER):])
        else:
            print(line)
    if counts is None:
        errors = [f"{output.get('ename')}: {output.get('evalue')}"
                  for output in cell.get("outputs", []) if output.get("output_type") == "error"]
        raise CheckError("the checks could not run after the notebook "
                         f"({'; '.join(errors) or 'no output'}). Is labkit installed in the "
                         "kernel's environment (pip install ./student)?")
    return 0 if counts["passed"] == counts["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
