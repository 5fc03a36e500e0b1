"""A class graded in parts on several machines, and the parts merged.

``grade --shard K/N --seed S`` grades every N-th student from the K-th on
(autograder.grader.batch.Grader) into its own OUT; `merge` (autograder.pipeline) joins those OUT
folders into the one an unsharded run would have written. Every shard
must grade with the same seed (the same hidden inputs): OUT keeps only a
slow hash of it, `seed_check`, which `merge` compares. `parse_shard` and
`seed_check` are defined with the options they check
(autograder.grader.options) and named here too.
"""

from __future__ import annotations

import json
from pathlib import Path

from autograder.grader.batch import ClassGradebook, result_from_json
from autograder.grader.options import GradingOptions, parse_shard, seed_check
from autograder.grader.results import SubmissionResult
from autograder.labs import get_lab

__all__ = ["merge_shards", "parse_shard", "read_shard", "seed_check"]


def read_shard(folder: Path, lab_id: str) -> tuple[dict, dict[str, dict]]:
    """The run.json of a shard's OUT folder and its saved results by student."""
    try:
        run = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        raise ValueError(
            f"{folder} is not the OUT folder of a grading run (no readable run.json). "
            f"Give the folders passed as --out to each `grade ... --shard K/N`."
        ) from None
    if run.get("lab") != lab_id:
        raise ValueError(f"{folder} holds grades of {run.get('lab')!r}, not {lab_id!r}: "
                         f"merge the shards of one lab at a time.")
    saved = {}
    for path in sorted((folder / "results").glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an unfinished write: that student counts as missing
        saved[entry["result"]["student_id"]] = entry
    return run, saved


def merge_shards(lab_id: str, shard_dirs: list[Path], out_dir: Path,
                 options: GradingOptions | None = None, allow_missing: bool = False,
                 ) -> tuple[ClassGradebook, list[SubmissionResult]]:
    """Merge the OUT folders of `grade --shard K/N` runs into one class's
    gradebook, and return it with every student's results.

    The merged folder is what one unsharded run would have written before
    its reports (autograder.pipeline.merge writes them): one gradebook with
    every student (SQLite, or ``options.db_url``), the autograded notebooks
    and results/. Refuses shards of another lab, graded with different seeds, that
    overlap with different answers, or (unless ``allow_missing``) a class
    with a shard or a student missing.
    """
    lab = get_lab(lab_id)
    if not shard_dirs:
        raise ValueError("merge needs the OUT folders of the shards to merge.")
    runs, entries, origin = _gather(lab.id, shard_dirs)
    check = _one_seed_check(runs, entries)
    problems = _missing(runs, entries)
    if problems and not allow_missing:
        raise ValueError("the merge would lose students: " + "; ".join(problems)
                         + ". Fix that, or pass --allow-missing to merge what there is.")
    # A shard's course folder: OUT/nbgrader unless it was graded with
    # --course-dir (then where run.json says, if this machine sees it).
    roots = {folder: folder / "nbgrader" if (folder / "nbgrader").is_dir()
             else Path(run.get("course_dir", folder / "nbgrader")) for folder, run in runs}
    gradebook = ClassGradebook(lab, out_dir, options or GradingOptions(), check)
    if gradebook.out_dir in {folder.resolve() for folder, _ in runs}:
        raise ValueError(f"--out {out_dir} is one of the shards: merge into a new folder.")
    gradebook.isolation = merged_isolation([run for _, run in runs])
    gradebook.prepare(sorted(entries))
    results = []
    for student_id in sorted(entries):
        entry = entries[student_id]
        result = result_from_json(entry["result"])
        gradebook.record(result, entry.get("grades", {}), roots[origin[student_id]])
        gradebook.save(entry["sha256"], result, entry.get("grades", {}),
                       entry.get("timings", {}))
        results.append(result)
    return gradebook, results


def merged_isolation(runs: list[dict]) -> dict | None:
    """The class's isolation: the shards' own when they agree; else the
    weakest layer, its summary saying that the shards differed."""
    from autograder.kernels.isolation import LAYER_NAMES

    found = [isolation for run in runs if isinstance(isolation := run.get("isolation"), dict)]
    if not found:
        return None
    layers = {item.get("layer") for item in found}
    if len(layers) == 1 and len(found) == len(runs):
        return found[0]
    weakest = max(found, key=lambda item: LAYER_NAMES.index(item.get("layer"))
                  if item.get("layer") in LAYER_NAMES else len(LAYER_NAMES))
    return {"layer": weakest.get("layer"),
            "summary": f"the shards differ ({', '.join(sorted(map(str, layers)))}"
                       f"{', some not recorded' if len(found) < len(runs) else ''}); "
                       f"the weakest: {weakest.get('summary', '')}",
            "details": ["each row's notes say the isolation of its kernel"]}


def _gather(lab_id: str, shard_dirs: list[Path]):
    """Each shard's run.json, every saved result by student, and the shard it came from."""
    runs: list[tuple[Path, dict]] = []
    entries: dict[str, dict] = {}
    origin: dict[str, Path] = {}
    for folder in map(Path, shard_dirs):
        run, saved = read_shard(folder, lab_id)
        runs.append((folder, run))
        for student_id, entry in saved.items():
            if student_id in entries and entries[student_id]["sha256"] != entry["sha256"]:
                raise ValueError(
                    f"{student_id} was graded in {origin[student_id]} and in {folder} from "
                    f"different notebooks: the shards did not grade the same class folder. "
                    f"Grade every shard from one copy of the submissions.")
            entries[student_id], origin[student_id] = entry, folder
    return runs, entries, origin


def _one_seed_check(runs, entries) -> str:
    """The seed check every shard and every result agree on (else why they do not)."""
    checks = {run.get("seed_check") for _, run in runs} | \
        {entry.get("seed_check") for entry in entries.values()}
    if None in checks:
        raise ValueError(
            "a shard was graded without --seed (a secret seed of its own, so hidden inputs "
            "of their own): grade every shard with the same --seed, then merge.")
    if len(checks) > 1:
        raise ValueError(
            "the shards were graded with different seeds (different hidden inputs): "
            "grade every shard with the same --seed, then merge.")
    return checks.pop()


def _missing(runs, entries) -> list[str]:
    """What the merge would lose: shards not given, students without a result."""
    problems = []
    counts = {tuple(run["shard"])[1] for _, run in runs if run.get("shard")}
    if len(counts) > 1:
        problems.append(f"the shards split the class in different ways (N = {sorted(counts)})")
    elif counts:
        have = {tuple(run["shard"])[0] for _, run in runs if run.get("shard")}
        missing = sorted(set(range(1, counts.pop() + 1)) - have)
        if missing:
            problems.append("shard(s) " + ", ".join(map(str, missing)) + " missing")
    for folder, run in runs:
        lost = [s for s in run.get("students", []) if s not in entries]
        if lost:
            problems.append(f"{folder}: {len(lost)} of its {len(run['students'])} students "
                            f"have no result ({', '.join(lost[:5])}"
                            f"{', ...' if len(lost) > 5 else ''}); run its grade command "
                            f"again to resume it")
    return problems
