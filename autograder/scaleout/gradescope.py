"""Grading at submission time on Gradescope: a lab's autograder bundle, and what it runs.

``python -m autograder gradescope LAB --out bundle.zip`` writes the zip an
instructor uploads as a Gradescope programming assignment's autograder
("Configure Autograder" > "Zip file upload"). Gradescope's autograder
specification (and otter-grader's bundles, which follow it) lays it out:

- ``setup.sh``, run once as root when Gradescope builds the assignment's
  image (Ubuntu, with network): it installs nothing this bundle does not
  pin. Ubuntu's own packages come through apt, which checks the archive's
  signatures: bubblewrap, and the Python that wrote the locks (the image's
  python3 where it is that version, else Ubuntu's ``python3.X`` and
  ``python3.X-venv``: Ubuntu 22.04 has python3.11). The exact versions of
  ``kit/tools.lock`` (pip, setuptools) and ``kit/requirements.lock`` (every
  distribution the kit and labkit need, transitively) come from the package
  index with ``--no-deps``, so pip resolves nothing; then the kit and labkit
  from the bundle, ``--no-deps``. It fails, saying why, where the image has
  no Python of the locks' version or pip cannot install them. Last it
  grades the lab's blank notebook once (``self_test``), so that an image
  that cannot grade fails to build instead of failing every student;
- ``run_autograder``, run for each submission in a fresh container: it
  grades ``/autograder/submission/`` with the kit's own pipeline (the
  sandboxed student kernel, the test kernel, stand-ins, repairs: the same
  ``grade`` as ``python -m autograder grade``) and writes
  ``/autograder/results/results.json``;
- ``kit/``: the kit's grader, the lab sources (solutions, hidden tests,
  references, stand-ins), labkit and course.toml, ``bundle.json`` (the
  lab, the kit's version, the Python of the locks, the visibility
  settings) and the two locks, written by `build_bundle` from the
  environment that builds the bundle (`locks`).

results.json has one test per exercise, named as in the curriculum, with
its score, its points and the feedback a student sees in the kit's
feedback page (what failed: each graded property, ✓ or ✗, its points and
its message; the exercise's hint); the hidden tests' source
and inputs are never in it. Its visibility comes from course.toml::

    [gradescope]
    visibility = "visible"           # the whole result: visible, hidden, after_due_date, after_published
    tests_visibility = "visible"     # each exercise's score and feedback (same values)
    stdout_visibility = "hidden"     # the grader's log

The bundle holds the hidden tests and references: it goes to Gradescope
only, never to students. The student's kernel gets the isolation the kit's
``grade`` chooses, as anywhere (``isolation.choose_isolation``: bubblewrap
where the container allows user namespaces, else a user of its own, since
the grader runs as root there); ``run`` prints it to the grader's log
("Isolation of the student's kernel: ...", which Gradescope always shows
instructors) and puts it in results.json's ``extra_data["isolation"]``.
Where no layer can run, nothing is graded: the result is a grader error,
the student is told to contact the instructor, and the log and
``extra_data`` say why (docs/security.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

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
#: The locks in kit/: the exact versions setup.sh installs (pip --no-deps).
LOCK = "requirements.lock"
TOOLS_LOCK = "tools.lock"
#: What tools.lock pins, and setup.sh installs first: pip, and setuptools,
#: which builds the kit's and labkit's editable installs (--no-build-isolation).
TOOLS = ("pip", "setuptools")
#: The platform of Gradescope's images: the environment markers of the kit's
#: dependencies are evaluated for it, whatever machine writes the bundle.
TARGET_MARKERS = {"sys_platform": "linux", "platform_system": "Linux",
                  "platform_machine": "x86_64", "os_name": "posix"}
#: Where the kit's and labkit's own dependencies are declared (in KIT_ROOT).
PROJECTS = ("pyproject.toml", "student/pyproject.toml")

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
# It installs the kit of this bundle ({lab}) and checks that the image grades.
# It installs nothing that the bundle does not pin, and pipes nothing into a shell:
# - through apt, which checks the signatures of Ubuntu's archive: bubblewrap,
#   and Python {python} (the Python that wrote the locks below): the image's
#   python3 where it is {python}, else Ubuntu's python{python} and python{python}-venv.
#   Ubuntu 22.04 (jammy), whose python3 is 3.10, has python3.11 and
#   python3.11-venv 3.11.0~rc1-1~22.04 in jammy-updates, universe
#   (https://packages.ubuntu.com/jammy-updates/python3.11-venv);
# - from the package index, the exact versions of kit/tools.lock (pip,
#   setuptools) and kit/requirements.lock (every distribution the kit needs),
#   with --no-deps: pip resolves nothing and builds nothing in isolation. The
#   locks hold no hashes, so pip verifies nothing beyond the index's TLS; put
#   --hash=sha256:... on every line of a lock and pip checks each file it
#   downloads against them (and refuses a line without one);
# - the kit and labkit from this bundle, with --no-deps.
set -euxo pipefail
export DEBIAN_FRONTEND=noninteractive
PY={python}
fail() {{ set +x; printf '\\nsetup.sh FAILED: %s\\n\\n' "$*" >&2; exit 1; }}
apt-get update
apt-get install -y --no-install-recommends bubblewrap ca-certificates
if [ "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$PY" ]
then
    apt-get install -y --no-install-recommends python3-venv
    PYTHON=python3
elif apt-cache show "python$PY-venv" >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends "python$PY" "python$PY-venv"
    PYTHON="python$PY"
else
    fail "the locks of this bundle were written with Python $PY, and this image has \\
neither a python3 $PY nor Ubuntu's python$PY-venv. Write the bundle again \\
(python -m autograder gradescope) from an environment with the image's Python \\
(3.11 for Ubuntu 22.04), or choose a base image with Python $PY."
fi
"$PYTHON" -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --no-deps --no-input \\
    -r /autograder/source/kit/tools.lock \\
    || fail "pip could not install kit/tools.lock (pip, setuptools) on Python $PY."
/autograder/venv/bin/python -m pip install --no-deps --no-input --no-build-isolation \\
    -r /autograder/source/kit/requirements.lock \\
    || fail "pip could not install kit/requirements.lock, written with Python $PY on \\
Linux x86_64: a version there may have no file for this image. Write the bundle again \\
from an environment with the image's Python."
/autograder/venv/bin/python -m pip install --no-deps --no-input --no-build-isolation \\
    -e /autograder/source/kit/student -e /autograder/source/kit
/autograder/venv/bin/python -m pip check \\
    || fail "kit/requirements.lock does not hold all that the kit needs on this image."
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
    """What `build_bundle` wrote: the zip, its lab, its number of files, its locks."""

    path: Path
    lab: str
    files: int
    visibility: Visibility
    locks: "Locks | None" = None


@dataclass(frozen=True)
class Locks:
    """The exact versions setup.sh installs, as installed where the bundle is written.

    ``pins``: every distribution the kit and labkit depend on, transitively
    (their pyproject.toml dependencies and, in turn, each one's requirements,
    markers evaluated for Linux x86_64), but pip and setuptools, which are
    ``tools``. ``python``: the Python that wrote them ("3.11"), the one
    setup.sh installs them on.
    """

    python: str
    python_full: str
    pins: tuple[tuple[str, str], ...]
    tools: tuple[tuple[str, str], ...]

    def _header(self, what: str) -> str:
        return (f"# {what}\n"
                f"# As installed where this bundle was written (Python {self.python_full};\n"
                f"# markers evaluated for Linux x86_64). setup.sh installs them with pip\n"
                f"# --no-deps on Python {self.python}. No line has a hash, so pip verifies\n"
                f"# nothing beyond the package index's TLS: put --hash=sha256:... on every\n"
                f"# line (pip hash FILE, or the file's digest on the index) and pip checks\n"
                f"# each file it downloads against them.\n")

    def text(self) -> str:
        """kit/requirements.lock: ``name==version`` lines under a comment."""
        return self._header("Every distribution the kit and labkit need, transitively "
                            "(but pip and\n# setuptools: tools.lock), at its exact version.") \
            + "".join(f"{name}=={version}\n" for name, version in self.pins)

    def tools_text(self) -> str:
        """kit/tools.lock: pip and setuptools, installed before the rest."""
        return self._header("pip and setuptools (which builds the kit's and labkit's "
                            "editable installs),\n# installed first.") \
            + "".join(f"{name}=={version}\n" for name, version in self.tools)


def locks(kit_root: Path | None = None) -> Locks:
    """The locks of this environment: what the kit at ``kit_root`` needs, as installed here.

    Raises:
        ValueError: a distribution the kit needs on Linux x86_64 is not
            installed here (a bundle written on another platform, or a
            broken environment), one is installed from a URL or a folder
            rather than the package index, or setuptools is missing.
    """
    import sys
    import tomllib
    from importlib import metadata

    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    if kit_root is None:
        from autograder.labs import KIT_ROOT
        kit_root = KIT_ROOT
    # packaging's Environment: a TypedDict whose every value is a str.
    environment = {**cast("dict[str, str]", default_environment()), **TARGET_MARKERS}
    own = set()
    todo: list[tuple[Requirement, str, str]] = []
    for project in PROJECTS:
        with open(Path(kit_root) / project, "rb") as handle:
            declared = tomllib.load(handle)["project"]
        own.add(canonicalize_name(declared["name"]))
        todo += [(Requirement(line), "", declared["name"])
                 for line in declared.get("dependencies", [])]
    found: dict[str, tuple[str, frozenset[str]]] = {}
    while todo:
        requirement, extra, wanted_by = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({**environment,
                                                                    "extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        if name in own:
            continue
        _, extras = found.get(name, ("", frozenset()))
        if name in found and set(requirement.extras) <= extras:
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            raise ValueError(
                f"{wanted_by} requires {requirement}, which is not installed here: the "
                f"Gradescope locks are written from the environment that writes the bundle, "
                f"with the kit's dependencies for Linux x86_64. Write the bundle from the "
                f"kit's own environment on Linux x86_64 (make env).") from None
        origin = dist.read_text("direct_url.json")
        if origin:
            raise ValueError(
                f"{dist.metadata['Name']} {dist.version} is installed here from "
                f"{json.loads(origin).get('url', 'a URL')}, not from the package index: "
                f"setup.sh could not install that version on Gradescope. Install it from the "
                f"index (pip install {dist.metadata['Name']}=={dist.version}) and write the "
                f"bundle again.")
        extras = extras | set(requirement.extras)
        found[name] = (dist.version, frozenset(extras))
        for line in dist.requires or []:
            todo += [(Requirement(line), each, dist.metadata["Name"])
                     for each in ("", *sorted(extras))]
    tools = []
    for tool in TOOLS:
        try:
            tools.append((tool, metadata.version(tool)))
        except metadata.PackageNotFoundError:
            if tool == "setuptools":
                raise ValueError("setuptools is not installed here: tools.lock pins the "
                                 "setuptools that builds the kit's editable install on "
                                 "Gradescope. Install it (the kit's dev extra has it) and "
                                 "write the bundle again.") from None
    pins = tuple(sorted((name, version) for name, (version, _) in found.items()
                        if name not in TOOLS))
    version = sys.version_info
    return Locks(f"{version.major}.{version.minor}",
                 f"{version.major}.{version.minor}.{version.micro}", pins, tuple(tools))


def build_bundle(lab_id: str, out: Path) -> Bundle:
    """Write the Gradescope autograder zip of ``lab_id`` to ``out``.

    kit/requirements.lock and kit/tools.lock pin what this environment has
    installed of the kit's dependencies (`locks`); setup.sh installs them on
    Gradescope on the same Python version.

    Raises:
        ValueError: an unknown lab, an ``out`` that is not a .zip path,
            course.toml's [gradescope] settings wrong, or an environment
            that cannot give the locks (`locks`).
    """
    from autograder.labs import KIT_ROOT, course_settings, get_lab

    lab = get_lab(lab_id)
    out = Path(out)
    if out.suffix.lower() != ".zip":
        raise ValueError(f"--out {out}: Gradescope takes the autograder as a .zip; give a "
                         f"path ending in .zip, e.g. --out {lab.id}-gradescope.zip.")
    visibility = Visibility.from_settings(course_settings().get("gradescope", {}))
    pinned = locks(KIT_ROOT)
    settings = {"lab": lab.id, "kit_version": _kit_version(), "python": pinned.python,
                "visibility": visibility.__dict__}
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text.format(lab=lab.id, python=pinned.python))
            count += 1
        archive.writestr(f"{KIT}/{SETTINGS}", json.dumps(settings, indent=1))
        archive.writestr(f"{KIT}/{LOCK}", pinned.text())
        archive.writestr(f"{KIT}/{TOOLS_LOCK}", pinned.tools_text())
        count += 3
        for part in KIT_PARTS:
            for path in _files(KIT_ROOT / part):
                archive.write(path, f"{KIT}/{path.relative_to(KIT_ROOT).as_posix()}")
                count += 1
    return Bundle(out, lab.id, count, visibility, pinned)


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

    The isolation of the student's kernel is the one the kit's `grade`
    chooses (``isolation.choose_isolation``, for the folders it protects):
    printed to the grader's log, which Gradescope always shows the
    instructor ("Isolation of the student's kernel: ..."), and kept in
    ``extra_data["isolation"]``. Where no isolation layer can run, `grade`
    refuses and nothing is graded: the result says the grader could not
    grade the submission, and the log and ``extra_data`` say why.

    Never raises for what a submission holds: a notebook that cannot be
    graded gets its exercises at 0 with the reason, and a failure of the
    grader itself is written as a result that says so (Gradescope would
    otherwise show the student only "the autograder failed").
    """
    from autograder.kernels.isolation import SandboxUnavailable

    root = Path(root)
    started = time.monotonic()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    settings = _settings(root)
    visibility = Visibility(**settings.get("visibility", {}))
    try:
        results, isolated = _grade(root, settings["lab"], visibility)
        say_isolation(isolated)
        results.setdefault("extra_data", {})["isolation"] = isolated
    except SandboxUnavailable as error:
        print(f"Isolation of the student's kernel: none can run here, and the kit grades no "
              f"submission without one, so this one was not graded. {error}", flush=True)
        results = _grader_error(error, "The autograder could not grade this submission: its "
                                       "container cannot isolate your notebook as it must. "
                                       "Contact your instructor.")
        results["extra_data"]["isolation"] = {"layer": "unavailable",
                                              "summary": str(error)[:2000], "details": []}
    except Exception as error:  # noqa: BLE001 - the student still gets a result
        results = _grader_error(error)
    results["execution_time"] = round(time.monotonic() - started)
    (results_dir / "results.json").write_text(json.dumps(results, indent=1),
                                              encoding="utf-8")
    return results


def say_isolation(isolated: dict) -> None:
    """The grader's log line (and detail lines) of the isolation in force."""
    print(f"Isolation of the student's kernel: {isolated['summary']}", flush=True)
    for line in isolated.get("details", ()):
        print(f"  {line}", flush=True)


def _isolation_of(out: Path) -> dict:
    """The isolation `grade` chose for its run into ``out`` (its run.json)."""
    try:
        chosen = json.loads((out / "run.json").read_text(encoding="utf-8")).get("isolation")
    except (OSError, ValueError, AttributeError):
        chosen = None
    if isinstance(chosen, dict) and chosen.get("layer"):
        return {"layer": chosen["layer"], "summary": str(chosen.get("summary", "")),
                "details": list(chosen.get("details", []))}
    return {"layer": "unknown", "summary": "not recorded: grade kept no isolation in its "
            "run.json (nothing was graded)", "details": []}


def _grader_error(error: Exception, output: str = "") -> dict:
    """The result of a submission the grader itself could not grade: ``output``
    for the student, the error for the instructor (``extra_data``)."""
    return {
        "score": 0.0,
        "output": output or ("The autograder could not grade this submission "
                             f"({type(error).__name__}). Your instructor has been given the "
                             "details; resubmit later or contact them."),
        "visibility": "visible", "stdout_visibility": "hidden",
        "extra_data": {"grader_error": f"{type(error).__name__}: {error}"[:2000]},
        "tests": [],
    }


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


def _grade(root: Path, lab_id: str, visibility: Visibility) -> tuple[dict, dict]:
    """The kit's `grade` of the one submission in ``root``, as results.json, and
    the isolation its student kernel had (``Isolation.to_json()``).

    Raises:
        SandboxUnavailable: no isolation layer can run here (`grade` refuses).
    """
    from autograder.pipeline import grade
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
        # unsandboxed=False: `grade` refuses where no isolation layer can run.
        options = GradingOptions(jobs=1, progress=False, similarity=False, regrade=True,
                                 unsandboxed=False)
        rows, _ = grade(lab.id, folder.parent, Path(work) / "out", options)
        isolated = _isolation_of(Path(work) / "out")
    hints = lab.hints()
    row = rows[0] if rows else None
    return results_json(lab, row, hints, visibility), isolated


def results_json(lab, row, hints: dict[str, str], visibility: Visibility) -> dict:
    """Gradescope's results.json of one graded row (None: nothing was submitted).

    `run` adds ``extra_data["isolation"]``, the isolation of the student's kernel.
    """
    from autograder.text import clean_text, format_score
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
        if not passed and exercise.properties:
            # each graded property, one line (the framework's details left out)
            output = "\n".join(property_line(p) for p in exercise.properties)
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
    return {"score": float(row.score), "output": summary, "output_format": "text",
            "visibility": visibility.visibility,
            "stdout_visibility": visibility.stdout_visibility, "tests": tests,
            "extra_data": extra}


def property_line(prop) -> str:
    """One graded property in a test's output: "✓ sentence (0.5/0.5)", or
    "✗ sentence (0/2.75): message" (an error an earlier one met: "the same
    error as above")."""
    from autograder.text import clean_text, format_score

    mark = "\u2713" if prop.passed else "\u2717"
    line = f"{mark} {prop.sentence or prop.test} ({format_score(prop.score)}/" \
           f"{format_score(prop.max_score)})"
    if not prop.passed:
        line += ": the same error as above" if prop.same_as else f": {prop.message}"
    return clean_text(line)


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
