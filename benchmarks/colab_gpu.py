"""Every lab top to bottom on a GPU runtime, as a student runs it in Colab.

Each lab's student notebook, its answer cells filled with the solution, runs
in a fresh Jupyter kernel (nbclient) under a Keras backend, with the setup
cell's precision settings (TF32 off, labkit.configure_precision) as Colab's
GPU runtime would run them. Printed per lab and backend: whether every cell
ran, how many visible checks passed (their `✓` lines), the device a tensor
was made on, what the setup cell reported of TF32, and the seconds taken.

    KERAS_BACKEND is set per run:
    python benchmarks/colab_gpu.py --backends torch jax [--write-docs]

On the device machine `bash benchmarks/gpu_run.sh labs` runs it (docs/
performance.md, "GPU runtimes"). On a CPU it runs the same and says "cpu".
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

import _docs  # noqa: E402
from autograder.labs import available_labs  # noqa: E402
from tests.verdicts import solution_reporting_device  # noqa: E402


def _text(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream")


def run_lab(lab_id: str, backend: str, timeout: int) -> dict:
    """Run one solution notebook under ``backend``; what it showed."""
    notebook = solution_reporting_device(lab_id)
    started = time.monotonic()
    env = {**os.environ, "KERAS_BACKEND": backend}
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            allow_errors=True, resources={"metadata": {"path": str(ROOT)}})
    try:
        client.execute(env=env)   # the kernel's own environment: runs at once do not mix
    except CellExecutionError as error:   # allow_errors: only a timeout or a dead kernel
        return {"lab": lab_id, "backend": backend, "error": str(error)[:300]}
    seconds = time.monotonic() - started
    failed = [cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")
              for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
              and any(output.get("output_type") == "error" for output in cell.get("outputs", []))]
    everything = "\n".join(_text(cell) for cell in notebook.cells if cell.cell_type == "code")
    device = re.search(r"RAN ON: (.*)", everything)
    setup = re.search(r"Keras ([\d.]+), backend (\w+), (.*)", everything)
    return {"lab": lab_id, "backend": backend, "failed": failed, "seconds": seconds,
            "checks": everything.count("✓"), "device": device.group(1) if device else "?",
            "keras": setup.group(1) if setup else "?",
            "precision": setup.group(3)[:70] if setup else "?"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"])
    parser.add_argument("--labs", nargs="+", help="lab ids (default: every lab)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="notebooks run at once")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["colab_gpu"])
    labs = [lab.id for lab in available_labs() if not args.labs or lab.id in args.labs]
    runs = [(lab, backend) for backend in args.backends for lab in labs]
    started = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda run: run_lab(*run, args.timeout), runs))
    out = _docs.Recorder()
    out("| lab | backend | cells | visible checks passed | device | setup cell's precision | seconds |")
    out("| --- | --- | --- | --- | --- | --- | --- |")
    failures = 0
    for result in results:
        if "error" in result:
            failures += 1
            out(f"| {result['lab']} | {result['backend']} | did not finish: {result['error']} "
                "| | | | |")
            continue
        failures += bool(result["failed"])
        cells = "all ran" if not result["failed"] else "FAILED: " + ", ".join(result["failed"])
        out(f"| {result['lab']} | {result['backend']} | {cells} | {result['checks']} | "
            f"{result['device']} | {result['precision']} | {result['seconds']:.1f} |")
    out("")
    out(f"{len(results) - failures} of {len(results)} runs with every cell passing; "
        f"{time.monotonic() - started:.0f} s in all, {args.jobs} at once.")
    if args.write_docs:
        details = ""
        try:
            import subprocess

            details = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
        _docs.write("colab_gpu", out.text(), machine_line=_docs.machine(details or "no GPU"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
