"""Grading at submission time on Gradescope: a lab's autograder bundle, and what it runs.

``python -m autograder gradescope LAB --out bundle.zip`` writes the zip an
instructor uploads as a Gradescope programming assignment's autograder
("Configure Autograder" > "Zip file upload"). Gradescope's autograder
specification (and otter-grader's bundles, which follow it) lays it out:

- ``setup.sh``, run once as root when Gradescope builds the assignment's
  image (Ubuntu, with network): it installs Python 3.11+, bubblewrap and the
  kit from the bundle into ``/autograder/venv``, then grades the lab's blank
  notebook once (``self_test``), so that an image that cannot grade fails
  to build instead of failing every student;
- ``run_autograder``, run for each submission in a fresh container: it
  grades ``/autograder/submission/`` with the kit's own pipeline (the
  sandboxed student kernel, the test kernel, stand-ins, repairs: the same
  ``grade`` as ``python -m autograder grade``) and writes
  ``/autograder/results/results.json``;
- ``kit/``: the kit's grader, the lab sources (solutions, hidden tests,
  references, stand-ins), labkit and course.toml, and ``bundle.json`` (the
  lab, the kit's version, the visibility settings).

results.json has one test per exercise, named as in the curriculum, with
its score, its points and the feedback a student sees in the kit's
feedback page (what failed, the exercise's hint); the hidden tests' source
and inputs are never in it. Its visibility comes from course.toml::

    [gradescope]
    visibility = "visible"           # the whole result: visible, hidden, after_due_date, after_published
    tests_visibility = "visible"     # each exercise's score and feedback (same values)
    stdout_visibility = "hidden"     # the grader's log

The bundle holds the hidden tests and references: it goes to Gradescope
only, never to students. The student's notebook runs in the bubblewrap
sandbox where Gradescope's container allows user namespaces; where it does
not, the kit grades without it and results.json says so (hidden from the
student, in ``extra_data``), as ``grade`` does on any machine without
bubblewrap (docs/security.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: Gradescope's visibility values (its autograder specification).
VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")
#: What the bundle puts of the kit in kit/, and what it leaves out.
KIT_PARTS = ("autograder", "solutions", "student", "labs", "course.toml", "pyproject.toml",
             "README.md")
_SKIP = {"__pycache__", ".ipynb_checkpoints", "build", "dist"}
#: The kit folder in the bundle, and the bundle's settings file in it.
KIT = "kit"
SETTINGS = "bundle.json"
DEFAULT_ROOT = Path("/autograder")

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
# It installs the kit of this bundle ({lab}) and checks that the image grades.
set -euxo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends bubblewrap ca-certificates curl git
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    apt-get install -y --no-install-recommends python3-venv python3-pip
    python3 -m venv /autograder/venv
else
    # An older image: a Python 3.11 from uv (astral.sh), as the kit requires.
    curl -LsSf https://astral.sh/uv/install.sh | env UV_INSTALL_DIR=/usr/local/bin sh
    uv venv --seed --python 3.11 /autograder/venv
fi
/autograder/venv/bin/python -m pip install --upgrade pip
/autograder/venv/bin/python -m pip install -e /autograder/source/kit/student \\
    -e /autograder/source/kit
cd /autograder/source/kit
/autograder/venv/bin/python -m autograder gradescope-run --self-test
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission: grade /autograder/submission/ and
# write /autograder/results/results.json ({lab}). AUTOGRADER_ROOT and
# LABKIT_PYTHON replace /autograder and its venv's Python (the kit's tests).
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{LABKIT_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source/kit"
export PYTHONPATH="$ROOT/source/kit"
export LABKIT_ROOT="$ROOT/source/kit"
exec "$PYTHON" -m autograder gradescope-run --root "$ROOT"
"""


@dataclass(frozen=True)
class Visibility:
    """course.toml's ``[gradescope]``: who sees what, and when."""

    visibility: str = "visible"
    tests_visibility: str = "visible"
    stdout_visibility: str = "hidden"

    @classmethod
    def from_settings(cls, settings: dict) -> "Visibility":
        """Checked: a value Gradescope does not know is an error saying which are."""
        known = {"visibility", "tests_visibility", "stdout_visibility"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"course.toml [gradescope] has {', '.join(unknown)}, which the kit "
                             f"does not know; the settings are {', '.join(sorted(known))}.")
        for name, value in settings.items():
            if value not in VISIBILITY:
                raise ValueError(f"course.toml [gradescope] {name} = {value!r}: give one of "
                                 f"{', '.join(VISIBILITY)} (Gradescope's values).")
        return cls(**settings)


@dataclass
class Bundle:
    """What `build_bundle` wrote: the zip, its lab, its number of files."""

    path: Path
    lab: str
    files: int
    visibility: Visibility


def build_bundle(lab_id: str, out: Path) -> Bundle:
    """Write the Gradescope autograder zip of ``lab_id`` to ``out``.

    Raises:
        ValueError: an unknown lab, an ``out`` that is not a .zip path, or
            course.toml's [gradescope] settings wrong.
    """
    from autograder.labs import KIT_ROOT, course_settings, get_lab

    lab = get_lab(lab_id)
    out = Path(out)
    if out.suffix.lower() != ".zip":
        raise ValueError(f"--out {out}: Gradescope takes the autograder as a .zip; give a "
                         f"path ending in .zip, e.g. --out {lab.id}-gradescope.zip.")
    visibility = Visibility.from_settings(course_settings().get("gradescope", {}))
    settings = {"lab": lab.id, "kit_version": _kit_version(),
                "visibility": visibility.__dict__}
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text.format(lab=lab.id))
            count += 1
        archive.writestr(f"{KIT}/{SETTINGS}", json.dumps(settings, indent=1))
        count += 1
        for part in KIT_PARTS:
            for path in _files(KIT_ROOT / part):
                archive.write(path, f"{KIT}/{path.relative_to(KIT_ROOT).as_posix()}")
                count += 1
    return Bundle(out, lab.id, count, visibility)


def _kit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformer-lab-kit")
    except PackageNotFoundError:
        return "unknown"


def _files(path: Path):
    """The files of ``path`` the bundle takes (no caches, builds or egg-info)."""
    if path.is_file():
        yield path
        return
    for child in sorted(path.rglob("*")):
        parts = child.relative_to(path).parts
        if child.is_file() and not any(p in _SKIP or p.endswith(".egg-info")
                                       or p.startswith(".") for p in parts) \
                and child.suffix != ".pyc":
            yield child


# -- on Gradescope ---------------------------------------------------------------


def run(root: Path = DEFAULT_ROOT) -> dict:
    """Grade ``root``/submission and write ``root``/results/results.json (returned).

    Never raises for what a submission holds: a notebook that cannot be
    graded gets its exercises at 0 with the reason, and a failure of the
    grader itself is written as a result that says so (Gradescope would
    otherwise show the student only "the autograder failed").
    """
    root = Path(root)
    started = time.monotonic()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    settings = _settings(root)
    visibility = Visibility(**settings.get("visibility", {}))
    try:
        results = _grade(root, settings["lab"], visibility)
    except Exception as error:  # noqa: BLE001 - the student still gets a result
        results = {
            "score": 0.0,
            "output": ("The autograder could not grade this submission "
                       f"({type(error).__name__}). Your instructor has been given the "
                       "details; resubmit later or contact them."),
            "visibility": "visible", "stdout_visibility": "hidden",
            "extra_data": {"grader_error": f"{type(error).__name__}: {error}"[:2000]},
            "tests": [],
        }
    results["execution_time"] = round(time.monotonic() - started)
    (results_dir / "results.json").write_text(json.dumps(results, indent=1),
                                              encoding="utf-8")
    return results


def _settings(root: Path) -> dict:
    from autograder.labs import KIT_ROOT

    for place in (root / "source" / KIT / SETTINGS, KIT_ROOT / SETTINGS):
        if place.is_file():
            return json.loads(place.read_text(encoding="utf-8"))
    raise ValueError(f"no {SETTINGS} in {root / 'source' / KIT}: this is not a bundle made "
                     f"by `python -m autograder gradescope`.")


def _student(root: Path) -> str:
    """The submitter's id from Gradescope's submission_metadata.json ("student" when none)."""
    from autograder.grader.submissions import sanitize_id

    try:
        metadata = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        user = (metadata.get("users") or [{}])[0]
        raw = str(user.get("sid") or user.get("email", "").split("@")[0] or user.get("id", ""))
    except (OSError, ValueError, AttributeError, IndexError, TypeError):
        raw = ""
    return sanitize_id(raw) or "student"


def _grade(root: Path, lab_id: str, visibility: Visibility) -> dict:
    """The kit's `grade` of the one submission in ``root``, as results.json."""
    from autograder.grader.grade import grade
    from autograder.grader.options import GradingOptions
    from autograder.labs import get_lab

    lab = get_lab(lab_id)
    submission = root / "submission"
    student = _student(root)
    with tempfile.TemporaryDirectory(prefix="labkit-gradescope-") as work:
        folder = Path(work) / "submissions" / student
        folder.mkdir(parents=True)
        if submission.is_dir():
            for path in sorted(submission.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    target = folder / path.relative_to(submission)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
        options = GradingOptions(jobs=1, progress=False, similarity=False, regrade=True)
        rows, _ = grade(lab.id, folder.parent, Path(work) / "out", options)
    hints = lab.hints()
    row = rows[0] if rows else None
    return results_json(lab, row, hints, visibility)


def results_json(lab, row, hints: dict[str, str], visibility: Visibility) -> dict:
    """Gradescope's results.json of one graded row (None: nothing was submitted)."""
    from autograder.grader.reports import clean_text, format_score
    from autograder.grader.results import GRADED

    if row is None:
        return {"score": 0.0, "output": "No file was submitted: upload the lab's .ipynb "
                                        f"({lab.notebook}.ipynb, saved from Colab or Jupyter).",
                "visibility": visibility.visibility,
                "stdout_visibility": visibility.stdout_visibility, "tests": []}
    tests = []
    for number, exercise in enumerate(row.exercises, start=1):
        passed = exercise.passed
        output = "Passed." if passed else clean_text(exercise.message or "Not full marks.")
        if not passed and hints.get(exercise.exercise):
            output += f"\n\nHint: {clean_text(hints[exercise.exercise])}"
        tests.append({"name": exercise.exercise, "number": str(number),
                      "score": float(exercise.score), "max_score": float(exercise.max_score),
                      "status": "passed" if passed else "failed", "output": output,
                      "output_format": "text", "visibility": visibility.tests_visibility})
    summary = f"{lab.title}: {format_score(row.score)} of {format_score(row.max_score)} points."
    if row.status != GRADED:
        summary += f"\n\nYour notebook was not graded normally: {clean_text(row.status)}"
    extra = {"status": clean_text(row.status), "file": clean_text(row.source_name)}
    sandbox_note = [note for note in row.notes if "bubblewrap" in note]
    if sandbox_note:
        extra["sandbox"] = clean_text(sandbox_note[0])
    return {"score": float(row.score), "output": summary, "output_format": "text",
            "visibility": visibility.visibility,
            "stdout_visibility": visibility.stdout_visibility, "tests": tests,
            "extra_data": extra}


def self_test() -> dict:
    """Grade the lab's blank notebook as Gradescope would (what setup.sh runs last).

    Raises:
        RuntimeError: the image did not grade it (results.json says why).
    """
    from autograder.labs import KIT_ROOT, get_lab

    settings = KIT_ROOT / SETTINGS
    if not settings.is_file():
        raise RuntimeError(f"{settings} is missing: the self-test runs in a bundle's kit "
                           f"(python -m autograder gradescope LAB --out bundle.zip).")
    lab = get_lab(json.loads(settings.read_text(encoding="utf-8"))["lab"])
    with tempfile.TemporaryDirectory(prefix="labkit-selftest-") as work:
        root = Path(work)
        (root / "submission").mkdir()
        shutil.copyfile(lab.student_path, root / "submission" / f"{lab.notebook}.ipynb")
        (root / "source").mkdir()
        (root / "source" / KIT).symlink_to(KIT_ROOT)
        results = run(root)
    if "grader_error" in results.get("extra_data", {}) or \
            len(results.get("tests", [])) != len(lab.exercises):
        raise RuntimeError(f"the self-test did not grade {lab.id}'s blank notebook: "
                           f"{json.dumps(results)[:2000]}")
    return results
