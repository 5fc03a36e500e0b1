"""Write docs/compatibility.md and the README's table from the compatibility run.

`make test-compat` runs tests/student/test_compat.py, which notes in
.cache/compat/results.json what each row reported (versions, build time,
run times, each lab's outcome); then `python -m tests.compat_docs` turns
that file into docs/compatibility.md (the whole matrix) and the short table
between the README's ``compat`` markers. Figures come from a run only, never
by hand, so the docs say what a machine really did and when.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autograder.labs import LABS as ALL_LABS

ROOT = Path(__file__).resolve().parent.parent
RESULTS_FILE = ROOT / ".cache" / "compat" / "results.json"
DOC = ROOT / "docs" / "compatibility.md"
README = ROOT / "README.md"
README_BEGIN = "<!-- compat:begin (written by `make test-compat`; do not edit) -->"
README_END = "<!-- compat:end -->"
#: Every lab of the kit (a lab added later gets its column without an edit here).
LABS = tuple(ALL_LABS)
#: A lab passes a row when all three of its checks passed there.
CHECKS = ("solution_runs", "full_marks", "same_verdicts")

INTRO = """# Compatibility: the labs with the versions students run

Students run the labs in Colab, or locally with whatever `pip install
./student` allows; the grader runs them with the kit's pins. `make
test-compat` (tests/student/test_compat.py) builds one environment per row from the
package registry (tests/studentenv.py; cached in `.cache/studentenvs/`),
installs labkit there as a student does (`pip install ./student`, which
must leave the row's versions as they are), and for every lab checks that

1. the solution notebook runs top to bottom with no cell raising, every
   visible check passing, in a kernel of that environment;
2. the grader (the kit's CLI, in the kit's own environment) gives that
   executed notebook full marks;
3. each sample submission of the lab (`data/sample_submissions/<lab>/`,
   each with known mistakes) fails exactly the visible checks it fails in
   the grader's environment: a student sees the same checks pass and fail
   there as the grader's environment would.

A lab counts as passed in a row when all three hold. The tables below are
written by `python -m tests.compat_docs` from the last run's
`.cache/compat/results.json`; `make test-compat` runs both.

`make test-compat` also runs the student's whole path
(tests/student/test_student_path.py) in the Colab row: the student repository
published to a local git repository, each lab's first cell installing labkit
from it at the course's tag in a Colab-like kernel (`google.colab` present,
no labkit), the solutions run with every check and the "Ready to submit?"
cell passing, the notebook saved as Colab saves it (metadata, widget state,
outputs) and graded by the kit's grader: full marks; and the same path
with the kit's own versions for every lab (`make test` runs lab 1's).
"""

OLDEST = """## The oldest Keras

`student/pyproject.toml` said `keras>=3`; the matrix proves `keras>=3.8`,
now the bound. Bisected over the Keras 3 releases with TensorFlow 2.16.2 (the
first TensorFlow built for Keras 3; NumPy 1.26), Python 3.11, running the
five solution notebooks of the time (lab 6 came later; the matrix above runs it):

| Keras | what fails |
| --- | --- |
| 3.0.0 | lab2: `MultiHeadAttention` with a look-ahead mask (shapes), a symbolic tensor iterated; lab3: `MultiHeadAttention(seed=...)` unknown; lab4: no `num_heads`/`key_dim` attributes; lab5: the shipped weights do not load |
| 3.3.3 | lab2: the look-ahead mask; lab3: `seed=` unknown |
| 3.5.0, 3.6.0, 3.7.0 | lab2: the look-ahead mask (`demo_mask_by_keyword`) |
| 3.8.0 | nothing: every lab runs with every check passing |

`test_keras_below_the_bound_fails_a_lab` keeps the release below the bound
failing ({below}); the row "oldest Keras" above is 3.8.0 itself.
"""


def _lab_passed(lab: dict) -> bool:
    return all(lab.get(check) is True for check in CHECKS)


def _lab_cell(lab: dict | None) -> str:
    """One lab of one row: its solution's run time and what failed, if anything."""
    if not lab:
        return "not run"
    failed = [check.replace("_", " ") for check in CHECKS if lab.get(check) is False]
    missing = [check for check in CHECKS if check not in lab]
    seconds = lab.get("solution_seconds")
    text = f"{seconds:.0f} s" if seconds is not None else "?"
    if failed:
        return f"{text}, FAILED: {', '.join(failed)}"
    return f"{text}, not all checked" if missing else f"{text} ✓"


def _versions(row: dict) -> dict[str, str]:
    return row.get("versions") or row.get("before_labkit") or {}


def matrix(results: dict) -> str:
    """The whole matrix in Markdown."""
    lines = ["| row | Python | TensorFlow | Keras | NumPy | Matplotlib | labs passed | "
             "env build | " + " | ".join(LABS) + " | samples run |",
             "| --- " * (9 + len(LABS)) + "|"]
    for row in results["rows"].values():
        versions, labs = _versions(row), row.get("labs", {})
        passed = sum(_lab_passed(labs.get(lab, {})) for lab in LABS)
        samples = sum(labs.get(lab, {}).get("samples_seconds", 0) for lab in LABS)
        count = sum(labs.get(lab, {}).get("samples", 0) for lab in LABS)
        build = row.get("build_seconds")
        lines.append(
            f"| {row['name']} | " + " | ".join(versions.get(key, "?") for key in (
                "python", "tensorflow", "keras", "numpy", "matplotlib")) +
            f" | {passed}/{len(LABS)} | {f'{build:.0f} s' if build else '?'} | " +
            " | ".join(_lab_cell(labs.get(lab)) for lab in LABS) +
            f" | {count} in {samples:.0f} s |")
    return "\n".join(lines)


def readme_table(results: dict) -> str:
    """The README's short table: versions and labs passed."""
    lines = ["| environment | Python | TensorFlow | Keras | NumPy | labs passed |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in results["rows"].values():
        versions = _versions(row)
        passed = sum(_lab_passed(row.get("labs", {}).get(lab, {})) for lab in LABS)
        lines.append(f"| {row['name']} | " + " | ".join(versions.get(key, "?") for key in (
            "python", "tensorflow", "keras", "numpy")) + f" | {passed}/{len(LABS)} |")
    return "\n".join(lines)


def document(results: dict) -> str:
    below = results.get("below_bound")
    below_text = (f"Keras {below['keras']} with TensorFlow {below['tensorflow']}: "
                  f"{below['lab']} raises in " +
                  ", ".join(f"`{error.split(':')[0]}`" for error in below["errors"])
                  if below else "not run in the last run")
    return "\n".join([
        INTRO,
        "## The matrix",
        "",
        f"Last run: {results['date']}, on {results['machine']}; CPU only. Versions as "
        "each environment reports them; per lab, the solution notebook's run time in "
        "that environment; env build: building the venv from the package registry "
        "(a cached build is reused, its first build time shown); samples run: the "
        "sample submissions run there for the verdict comparison.",
        "",
        matrix(results),
        "",
        OLDEST.format(below=below_text),
    ])


def replace_block(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with what lies between ``begin`` and ``end`` replaced by ``block``."""
    if begin not in text or end not in text:
        raise SystemExit(f"README.md lacks the markers {begin!r} ... {end!r}: put them "
                         f"back in the students' part, around the compatibility table.")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{block}\n{end}{rest.split(end, 1)[1]}"


def main() -> int:
    if not RESULTS_FILE.exists():
        print(f"{RESULTS_FILE} not found: run `make test-compat` (it runs "
              f"tests/student/test_compat.py, which writes it) first.", file=sys.stderr)
        return 1
    results = json.loads(RESULTS_FILE.read_text())
    DOC.write_text(document(results))
    README.write_text(replace_block(README.read_text(), README_BEGIN, README_END,
                                    readme_table(results)))
    print(f"wrote {DOC.relative_to(ROOT)} and README.md's table from "
          f"{RESULTS_FILE.relative_to(ROOT)} ({results['date']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
