"""Train lab 6's language model from scratch with the lab's own code; time it.

Runs the code cells of solutions/lab6/lab6_language_model.py (the solution,
the provided code and the notebook's own training cell, with TRAIN = True) in
this process, up to the cell that times generation with and without the
key/value cache, then prints the training time (model.fit only, as the
notebook measures it), the validation perplexity against the language's
floor (``labkit.language.floor()``, the best any model can reach) and the
cache's speed-up. Hidden-test cells and the Colab cell are skipped; plots go
to a non-interactive backend.

    .venv/bin/python benchmarks/lab6_training.py [--epochs N] [--save] [--write-docs]

--save writes the trained weights and their metadata (hyperparameters,
curves, measured time and perplexity, machine) to
student/labkit/checkpoints/tiny_gpt.*, the checkpoint the notebook loads
when TRAIN = False. --write-docs rewrites the figures in docs/performance.md
(block "lab6_training"), dated, with this machine. Take timings on an
otherwise idle machine: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _docs  # benchmarks/_docs.py: this script's folder is on sys.path
from lab5_training import code_cells as lab5_code_cells
from lab5_training import copy_without_optimizer, machine

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "solutions" / "lab6" / "lab6_language_model.py"
CHECKPOINTS = ROOT / "student" / "labkit" / "checkpoints"
STOP_AFTER = "demo_cache"  # this cell times generation with and without the cache


def code_cells():
    """(grade_id, source) of lab 6's code cells to run, in order (lab5_training's reader)."""
    return lab5_code_cells(SOURCE, STOP_AFTER)


def docs_table(namespace: dict, total: float, load_before, load_after) -> str:
    """The run's figures as the Markdown table of docs/performance.md."""
    curves = namespace["curves"]
    speedups = ", ".join(f"{n} tokens: {recompute / cache:.1f}x ({cache:.2f} s against "
                         f"{recompute:.2f} s)" for n, cache, recompute in namespace["rows"])
    return "\n".join([
        "| epochs | training sentences | weights | model.fit | validation perplexity | "
        "the floor | cache speed-up (greedy) | whole run | load average before, after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(curves['loss'])} | {len(namespace['train_sentences'])} | "
        f"{namespace['language_model'].count_params()} | "
        f"{namespace['training_seconds']:.1f} s | {namespace['validation_perplexity']:.3f} | "
        f"{namespace['floor_perplexity']:.3f} | {speedups} | {total:.1f} s | "
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
        _docs.check(["lab6_training"])

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("MPLBACKEND", "Agg")
    load_before = os.getloadavg()
    namespace: dict = {"__name__": "__lab6__"}
    work = Path(tempfile.mkdtemp(prefix="lab6-benchmark-"))
    previous = Path.cwd()
    os.chdir(work)  # the notebook saves its weights in the working directory
    started = time.perf_counter()
    try:
        for grade_id, source in code_cells():
            if grade_id == "train_flag":
                source = "TRAIN = True"
            if grade_id == "train_or_load" and args.epochs:
                source = source.replace('"epochs": 4', f'"epochs": {args.epochs}')
            exec(compile(source, f"<lab6 cell {grade_id}>", "exec"), namespace)
            if grade_id == "train_or_load":
                print(f"[cell train_or_load done: {namespace['training_seconds']:.1f} s of "
                      "model.fit]", flush=True)
    finally:
        os.chdir(previous)
    total = time.perf_counter() - started
    load_after = os.getloadavg()

    curves = namespace["curves"]
    print()
    print(f"machine:          {machine()}")
    print(f"load average:     {load_before[0]:.2f} before, {load_after[0]:.2f} after "
          "(1-minute)")
    print(f"training:         {namespace['training_seconds']:.1f} s for "
          f"{len(curves['loss'])} epochs ({namespace['TRAINING']}, "
          f"{len(namespace['train_sentences'])} sentences)")
    print(f"perplexity:       validation {namespace['validation_perplexity']:.3f}, the "
          f"floor {namespace['floor_perplexity']:.3f}")
    for n, cache, recompute in namespace["rows"]:
        print(f"generation:       {n} tokens: cache {cache:.2f} s, recompute "
              f"{recompute:.2f} s ({recompute / cache:.1f}x)")
    print(f"whole run:        {total:.1f} s")
    if args.write_docs:
        _docs.write("lab6_training", docs_table(namespace, total, load_before, load_after),
                    machine_line=machine())

    if args.save:
        CHECKPOINTS.mkdir(parents=True, exist_ok=True)
        copy_without_optimizer(work / "tiny_gpt.weights.h5", CHECKPOINTS / "tiny_gpt.weights.h5")
        metadata = {
            "model": "lab 6 language model (MiniGPT)",
            "hyperparameters": namespace["HYPERPARAMETERS"],
            "training": namespace["TRAINING"],
            "data": {"generator": "labkit.language", "train": len(namespace["train_sentences"]),
                     "train_seed": 0, "validation": len(namespace["validation_sentences"]),
                     "validation_seed": 1, "length": namespace["LENGTH"]},
            "history": curves,
            "training_seconds": round(namespace["training_seconds"], 1),
            "validation_perplexity": round(namespace["validation_perplexity"], 4),
            "floor_perplexity": round(namespace["floor_perplexity"], 4),
            "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
            "trained_on": machine(),
            "date": datetime.date.today().isoformat(),
            "licence": "CC0 1.0 (weights trained on text generated by labkit.language)",
        }
        (CHECKPOINTS / "tiny_gpt.json").write_text(json.dumps(metadata, indent=1) + "\n",
                                                   encoding="utf-8")
        print(f"saved:            {CHECKPOINTS.relative_to(ROOT)}/tiny_gpt.*")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
