"""Train lab 5's date translator from scratch with the lab's own code; time it.

Runs the code cells of solutions/lab5/lab5_transformer.py (the solution, the
provided layers and the notebook's own training cell, with TRAIN = True) in
this process, up to the cell that decodes every held-out test date, then
prints the training time (model.fit only, as the notebook measures it) and
the exact-match accuracy of greedy decoding on the test split. Hidden-test
cells and the Colab cell are skipped; plots go to a non-interactive backend.

    .venv/bin/python benchmarks/lab5_training.py [--epochs N] [--save]

--save writes the trained weights and their metadata (hyperparameters,
training curves, measured time and accuracy, machine) to
student/labkit/checkpoints/, the checkpoint that the notebook loads when
TRAIN = False. --write-docs also rewrites the figures in docs/performance.md
(block "lab5_training"), dated, with this machine. Take timings on an otherwise idle machine: the load average
is printed before and after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _docs  # benchmarks/_docs.py: this script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "solutions" / "lab5" / "lab5_transformer.py"
CHECKPOINTS = ROOT / "student" / "labkit" / "checkpoints"
STOP_AFTER = "demo_greedy_decode"  # this cell computes test_exact_match


def code_cells(source: Path = SOURCE, stop_after: str = STOP_AFTER):
    """(grade_id, source) of the code cells of the lab's ``source`` to run, in order,
    up to ``stop_after`` (hidden tests and the Colab cell left out)."""
    import jupytext

    notebook = jupytext.read(source, fmt="py:percent")
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kind, grade_id = cell.metadata.get("nbgrader"), cell.metadata.get("grade_id")
        if kind == "tests" or grade_id == "colab_setup":
            continue
        yield grade_id, cell.source
        if grade_id == stop_after:
            return


def copy_without_optimizer(source: Path, destination: Path) -> None:
    """Copy a .weights.h5 file without the optimizer's state (Adam's moments
    triple the size; a model that only predicts does not need them)."""
    import h5py

    with h5py.File(source, "r") as original, h5py.File(destination, "w") as copy:
        for key, value in original.attrs.items():
            copy.attrs[key] = value
        for name in original:
            if name != "optimizer":
                original.copy(original[name], copy, name=name)


def machine() -> str:
    import keras

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{cores}-core CPU ({cpu}), {platform.system()}, Keras {keras.__version__} "
            f"with {keras.config.backend()}")


def docs_table(namespace: dict, exact_match: float, total: float, load_before,
               load_after) -> str:
    """The run's figures as the Markdown table of docs/performance.md."""
    curves = namespace["curves"]
    return "\n".join([
        "| epochs | training pairs | model.fit | final val. token accuracy | exact match "
        "(greedy, held-out dates) | whole run | load average before, after |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(curves['loss'])} | {len(namespace['train_pairs'])} | "
        f"{namespace['training_seconds']:.1f} s | {curves['val_masked_accuracy'][-1]:.4f} | "
        f"{exact_match:.2%} of {len(namespace['test_pairs'])} | {total:.1f} s | "
        f"{load_before[0]:.2f}, {load_after[0]:.2f} |",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, help="override the notebook's epochs")
    parser.add_argument("--save", action="store_true",
                        help="write the checkpoint to student/labkit/checkpoints/")
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["lab5_training"])

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("MPLBACKEND", "Agg")
    load_before = os.getloadavg()
    namespace: dict = {"__name__": "__lab5__"}
    work = Path(tempfile.mkdtemp(prefix="lab5-benchmark-"))
    previous = Path.cwd()
    os.chdir(work)  # the notebook saves its weights in the working directory
    started = time.perf_counter()
    try:
        for grade_id, source in code_cells():
            if grade_id == "train_flag":
                source = "TRAIN = True"
            if grade_id == "train_or_load" and args.epochs:
                namespace["TRAINING"]["epochs"] = args.epochs
            if grade_id == STOP_AFTER:
                source = source.replace("EVALUATED = 500", "EVALUATED = len(test_pairs)")
            exec(compile(source, f"<lab5 cell {grade_id}>", "exec"), namespace)
            if grade_id == "train_or_load":
                print(f"[cell train_or_load done: {namespace['training_seconds']:.1f} s of "
                      "model.fit]", flush=True)
    finally:
        os.chdir(previous)
    total = time.perf_counter() - started
    load_after = os.getloadavg()

    training_seconds = namespace["training_seconds"]
    exact_match = namespace["test_exact_match"]
    curves = namespace["curves"]
    print()
    print(f"machine:          {machine()}")
    print(f"load average:     {load_before[0]:.2f} before, {load_after[0]:.2f} after "
          "(1-minute)")
    print(f"training:         {training_seconds:.1f} s for {len(curves['loss'])} epochs "
          f"({namespace['TRAINING']}, {len(namespace['train_pairs'])} pairs)")
    print(f"final epoch:      loss {curves['loss'][-1]:.4f}, val_loss "
          f"{curves['val_loss'][-1]:.4f}, val token accuracy "
          f"{curves['val_masked_accuracy'][-1]:.4f}")
    print(f"exact match:      {exact_match:.2%} of {len(namespace['test_pairs'])} held-out "
          "test dates (greedy decoding)")
    print(f"whole run:        {total:.1f} s")
    if args.write_docs:
        _docs.write("lab5_training", docs_table(namespace, exact_match, total, load_before,
                                                load_after), machine_line=machine())

    if args.save:
        CHECKPOINTS.mkdir(parents=True, exist_ok=True)
        for name in ("dates_transformer", "toy_dialogue"):
            copy_without_optimizer(work / f"{name}.weights.h5",
                                   CHECKPOINTS / f"{name}.weights.h5")
        toy = {
            "model": "lab 5 smoke test: the lecture's toy dialogue (Transformer)",
            "hyperparameters": {"num_layers": 1, "d_model": 6, "num_heads": 2, "dff": 12,
                                "dropout_rate": 0.0},
            "input_vocab_size": 11, "target_vocab_size": 11,
            "training": {"steps": 150, "batch_size": 2, "optimizer": "Adam(0.02)"},
            "trained_on": machine(),
            "licence": "CC0 1.0",
        }
        (CHECKPOINTS / "toy_dialogue.json").write_text(json.dumps(toy, indent=1) + "\n",
                                                       encoding="utf-8")
        metadata = {
            "model": "lab 5 date translator (Transformer)",
            "hyperparameters": namespace["HYPERPARAMETERS"],
            "input_vocab_size": namespace["SOURCE"].size,
            "target_vocab_size": namespace["TARGET"].size,
            "training": namespace["TRAINING"],
            "data": {"dates": len(namespace["pairs"]), "seed": 0,
                     "train": len(namespace["train_pairs"]),
                     "validation": len(namespace["validation_pairs"]),
                     "test": len(namespace["test_pairs"])},
            "history": curves,
            "training_seconds": round(training_seconds, 1),
            "test_exact_match": round(exact_match, 4),
            "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
            "trained_on": machine(),
            "date": datetime.date.today().isoformat(),
            "licence": "CC0 1.0 (weights trained on data generated by labkit.datasets)",
        }
        (CHECKPOINTS / "dates_transformer.json").write_text(
            json.dumps(metadata, indent=1) + "\n", encoding="utf-8")
        print(f"saved:            {CHECKPOINTS.relative_to(ROOT)}/dates_transformer.* and "
              "toy_dialogue.*")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
