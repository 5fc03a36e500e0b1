"""Grade the hostile suite's cases with plain nbgrader, for comparison.

Plain nbgrader 0.9 here means: the lab's source notebook in a course folder,
`nbgrader generate_assignment`, then `nbgrader autograde` with its default
preprocessors (the hidden tests run inside the student's kernel, with no
sandbox). Each case is graded in its own copy of the course folder with
`--student`, so that one case cannot spoil another; then all of them once
more in one batch run, as an instructor would run it. Prints, as a Markdown
table, each case's honest score, what plain nbgrader gave (with what the
secrets case could read), and what this kit gives (graded here with the
hostile suite's settings, or read from a kit run's OUT folder if given).

    .venv/bin/python benchmarks/plain_nbgrader_hostile.py [KIT_OUT_DIR] [--write-docs]

Cases of every lab are graded, one lab at a time (KIT_OUT_DIR then holds
one OUT folder per lab, named after it); HOSTILE_ONLY=name,name... keeps
only those cases, as in the hostile suite. --write-docs also rewrites the
table in docs/security.md (block "plain_nbgrader_hostile"), dated, with
this machine.
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.labs import LABS  # noqa: E402
import plain_nbgrader as plain  # noqa: E402
import _docs  # noqa: E402
from tests.hostile.cases import PLANTED, labs, write_batch  # noqa: E402
from tests.verdicts import test_cell_points  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kit_out", nargs="?", type=Path,
                        help="a folder with one kit OUT folder per lab, instead of grading here")
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["plain_nbgrader_hostile"])
    out = _docs.Recorder()
    out("| case | what | honest score | plain nbgrader 0.9.6 | this kit |")
    out("| --- | --- | --- | --- | --- |")
    batches = [grade_lab(LABS[lab_id], args.kit_out / lab_id if args.kit_out else None, out)
               for lab_id in labs()]
    for line in batches:
        print(f"\n{line}")
    if args.write_docs:
        import nbgrader
        _docs.write("plain_nbgrader_hostile", out.text() + "\n\n" + "\n\n".join(batches),
                    machine_line=_docs.machine(f"nbgrader {nbgrader.__version__}"))


def _points(lab) -> float:
    return sum(sum(cells.values()) for cells in test_cell_points(lab.id).values())


def grade_lab(lab, kit_out: Path | None, out) -> str:
    """Each case of ``lab`` graded by plain nbgrader and the kit, a row each through
    ``out``; returns what one plain batch run of all of them gave."""
    work = Path(tempfile.mkdtemp(prefix="plain-nbgrader-"))
    skeleton = plain.make_course(lab, work / "skeleton")
    batch = work / "batch"
    batch.mkdir()
    written = write_batch(batch, [str(skeleton), str(skeleton / "gradebook.db"),
                                  str(skeleton / "source"), str(ROOT / "solutions"),
                                  str(ROOT / "autograder" / "references")], lab.id)
    # One course folder per case, so that one case cannot abort or spoil
    # another's grading (a plain batch run stops at the first such case:
    # see `batch_status` below).
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain_scores = dict(zip([case.student_id for case in written],
                                pool.map(lambda case: _plain_one(case, batch, skeleton,
                                                                 work, lab), written)))
    batch_status = _plain_batch(written, batch, skeleton, work, lab)
    if kit_out is None:
        kit_out = work / "kit"
        subprocess.run([sys.executable, "-m", "autograder", "grade", lab.id, str(batch),
                        "--out", str(kit_out), "--quiet",
                        "--cell-timeout", "15",
                        "--notebook-timeout", "75" if lab.id == "lab1" else "300"],
                       cwd=ROOT, check=True, capture_output=True)
    with open(kit_out / "grades.csv", encoding="utf-8", newline="") as handle:
        kit = {row["student_id"]: row for row in csv.DictReader(handle)}
    total = _points(lab)
    for case in written:
        got = kit.get(case.student_id)
        kit_text = (f"{float(got['score']):g}/{total:g}, {got['status'][:60]}" if got
                    else "no row")
        out(f"| {case.name} | {case.what} | {case.expected()} | {plain_scores[case.student_id]} "
            f"| {kit_text} |")
    shutil.rmtree(work, ignore_errors=True)
    return (f"{lab.id}: the same {len(written)} files in one plain `nbgrader autograde` run: "
            f"{batch_status}")


def _submit(case, batch: Path, course: Path, lab) -> None:
    """Put the case where plain nbgrader looks: submitted/<student>/<lab>/<notebook>.ipynb."""
    source = batch / case.path
    target = course / "submitted" / case.student_id / lab.id
    target.mkdir(parents=True, exist_ok=True)
    if source.name == f"{lab.notebook}.ipynb" or source.suffix == ".ipynb" and "/" not in case.path:
        shutil.copy(source, target / f"{lab.notebook}.ipynb")
    else:
        shutil.copy(source, target / source.name)   # e.g. "Copy of ...": nbgrader skips it


def _plain_one(case, batch: Path, skeleton: Path, work: Path, lab) -> str:
    """What plain `nbgrader autograde --student` gives this one case."""
    course = work / "plain" / case.student_id
    shutil.copytree(skeleton, course)
    _submit(case, batch, course, lab)
    started = time.monotonic()
    try:
        result = plain.autograde(course, lab, "--student", case.student_id, timeout=600)
        stopped = ""
    except subprocess.TimeoutExpired:
        result, stopped = None, "still running after 600 s (killed)"
    seconds = time.monotonic() - started
    score = _plain_scores(course, lab, [case.student_id])[case.student_id]
    text = stopped or score
    if result is not None and result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() + result.stderr.splitlines()
                  if "ERROR" in line or "Error" in line]
        reason = errors[-1].split("]")[-1].strip()[:80] if errors else "no reason given"
        text = f"{score}; autograde failed ({reason})"
    if case.name == "reads_secrets":
        text += "; " + _secrets_seen(course, case, lab)
    if case.name == "plants_code":
        planted = Path(sys.prefix) / PLANTED
        text += ("; planted a file in the grader's Python" if planted.exists()
                 else "; planted nothing")
        planted.unlink(missing_ok=True)
    return f"{text} [{seconds:.0f} s]"


def _secrets_seen(course: Path, case, lab) -> str:
    path = course / "autograded" / case.student_id / lab.id / f"{lab.notebook}.ipynb"
    try:
        text = path.read_text()
    except OSError:
        return "no notebook written"
    match = re.search(r"FINDINGS (\{.*?\})\\n", text)
    if not match:
        return "findings not printed"
    findings = match.group(1)
    hidden = 5 - findings.count("FileNotFoundError") - findings.count("PermissionError")
    return (f"read {hidden} of 5 secret paths, references "
            f"{'imported' if 'imported' in findings else 'hidden'}, hidden test source "
            f"{'seen' if 'hidden_source' + chr(39) + ': True' in findings else 'not seen'}")


def _plain_batch(written, batch: Path, skeleton: Path, work: Path, lab) -> str:
    course = work / "plain-batch"
    shutil.copytree(skeleton, course)
    for case in written:
        _submit(case, batch, course, lab)
    try:
        result = plain.autograde(course, lab, timeout=1800)
    except subprocess.TimeoutExpired:
        return "still running after 30 min (killed)"
    scores = _plain_scores(course, lab, [case.student_id for case in written])
    graded = sum(1 for value in scores.values() if not value.startswith("no grade"))
    return (f"exit status {result.returncode}; {graded} of {len(written)} students have a "
            f"grade in the gradebook.")


def _plain_scores(course: Path, lab, students: list[str]) -> dict[str, str]:
    scores = {}
    for student, found in plain.grades(course, lab, students).items():
        if found is None:
            scores[student] = "no grade (skipped or aborted)"
        else:
            scores[student] = f"{found[0]:g}/{_points(lab):g}" + (
                ", needs manual grade" if found[1] else "")
    return scores


if __name__ == "__main__":
    main()
