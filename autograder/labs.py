"""The labs of the kit, each one folder: ``solutions/<lab>/``.

A lab is declared by its folder alone (docs/authoring.md): ``lab.toml``
(title, notebook name and the curriculum's exercise names, in order), the
source ``<notebook>.py`` (solutions, visible checks, hidden tests with their
points), ``reference.py`` (the hidden tests' references, imported in the test
kernel as ``autograder.references.<lab>``), ``standins/`` and
``standins.toml`` (correct versions of the exercises, and which exercise may
call which), ``hints.toml`` (feedback hints),
and, for the kit's own tests, ``samples.py``, ``verdicts.py`` and
``test_reference.py``. Every list of labs (the CLI, the tests, the
benchmarks, the README's table) is read from here, so adding a lab touches
its folder and nothing else.

The exercise names are those of ../shared/CURRICULUM.md; graders and
instructors rely on them (exercises.csv, feedback, reports).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
import tomllib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

#: The kit's checkout (solutions/, labs/, data/ live here).
KIT_ROOT = Path(os.environ.get("LABKIT_ROOT", Path(__file__).resolve().parent.parent))

#: A lab id: "lab" and a number (the folder's name).
LAB_ID = re.compile(r"lab\d+")

#: The grade_id of an exercise's visible check is this prefix and the
#: exercise's name (CURRICULUM.md): the one place that spells it.
CHECK_PREFIX = "check_"


def check_id(exercise: str) -> str:
    """The grade_id of ``exercise``'s visible check."""
    return CHECK_PREFIX + exercise


def checked_exercise(grade_id: str) -> str | None:
    """The exercise whose visible check ``grade_id`` is; None for any other cell."""
    return grade_id.removeprefix(CHECK_PREFIX) if grade_id.startswith(CHECK_PREFIX) else None


class LabDefinitionError(ValueError):
    """A lab folder whose lab.toml is missing a field or malformed."""


@dataclass(frozen=True)
class Lab:
    """One lab: one nbgrader assignment with one notebook, one folder."""

    id: str
    notebook: str
    title: str
    exercises: tuple[str, ...]

    @property
    def folder(self) -> Path:
        """solutions/<lab>/: the lab's source, references, hints, samples and verdicts."""
        return KIT_ROOT / "solutions" / self.id

    @property
    def source_path(self) -> Path:
        """The single source (jupytext percent) with solutions and hidden tests."""
        return self.folder / f"{self.notebook}.py"

    @property
    def student_path(self) -> Path:
        """The generated student notebook, committed under labs/."""
        return KIT_ROOT / "labs" / self.id / f"{self.notebook}.ipynb"

    @property
    def hints_path(self) -> Path:
        """Feedback hints per exercise (hints.toml), shown on the students' pages."""
        return self.folder / "hints.toml"

    @property
    def available(self) -> bool:
        return self.source_path.exists()

    def hints(self) -> dict[str, str]:
        """exercise -> the hint shown to a student who lost its points (the
        lab's hints.toml; none when the lab has no such file)."""
        try:
            with open(self.hints_path, "rb") as handle:
                return {exercise: str(hint) for exercise, hint in tomllib.load(handle).items()}
        except FileNotFoundError:
            return {}


def read_lab(folder: Path) -> Lab:
    """The lab declared by ``folder``/lab.toml, or a LabDefinitionError saying what to fix."""
    path = Path(folder) / "lab.toml"
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise LabDefinitionError(
            f"{path} is not valid TOML ({error}); see docs/authoring.md.") from None
    missing = [key for key in ("title", "notebook", "exercises") if key not in data]
    if missing:
        raise LabDefinitionError(
            f"{path} lacks {', '.join(missing)}: a lab.toml needs title (a string), notebook "
            f"(the source's file name without .py) and exercises (the graded names, in order)."
        )
    exercises = data["exercises"]
    if not (isinstance(exercises, list) and exercises
            and all(isinstance(name, str) and name.isidentifier() for name in exercises)):
        raise LabDefinitionError(
            f"{path}: exercises must be a non-empty list of Python names, got {exercises!r}."
        )
    return Lab(Path(folder).name, str(data["notebook"]), str(data["title"]), tuple(exercises))


def discover(root: Path | None = None) -> dict[str, Lab]:
    """Every lab folder under ``root``/solutions, in curriculum order (lab1, lab2, ... lab10)."""
    solutions = Path(root or KIT_ROOT) / "solutions"
    folders = [path.parent for path in solutions.glob("lab*/lab.toml")
               if LAB_ID.fullmatch(path.parent.name)]
    folders.sort(key=lambda folder: int(folder.name[3:]))
    return {folder.name: read_lab(folder) for folder in folders}


LABS: dict[str, Lab] = discover()


def lab_folder(lab_id: str) -> Path | None:
    """solutions/<lab_id>/ when it declares a lab, else None."""
    if not LAB_ID.fullmatch(lab_id):
        return None
    folder = KIT_ROOT / "solutions" / lab_id
    return folder if (folder / "lab.toml").is_file() else None


class LabModuleFinder(importlib.abc.MetaPathFinder):
    """Finds ``<package>.<lab>`` in ``solutions/<lab>/<filename>``: a lab's hidden
    tests (``autograder.hidden.lab1``: hidden.py) and references
    (``autograder.references.lab1``: reference.py) live in its folder, beside
    its source, and are imported as modules of the kit's packages."""

    def __init__(self, package: str, filename: str):
        self.package, self.filename = package, filename

    def find_spec(self, fullname, path=None, target=None):
        package, _, lab_id = fullname.rpartition(".")
        if package != self.package or not lab_id:
            return None
        folder = lab_folder(lab_id)
        if folder is None or not (folder / self.filename).is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, folder / self.filename)


def find_lab_modules(package: str, filename: str) -> None:
    """Have ``<package>.<lab>`` imported from each lab folder's ``filename`` (once
    per package, however often this runs)."""
    if not any(isinstance(finder, LabModuleFinder) and finder.package == package
               for finder in sys.meta_path):
        sys.meta_path.insert(0, LabModuleFinder(package, filename))


def get_lab(lab_id: str) -> Lab:
    """The lab called ``lab_id``, or a ValueError that lists the labs there are."""
    lab = LABS.get(lab_id)
    if lab is None:
        raise ValueError(
            f"Unknown lab {lab_id!r}. Expected one of: {', '.join(LABS)}."
        )
    if not lab.available:
        ready = ", ".join(l.id for l in LABS.values() if l.available) or "none"
        raise ValueError(
            f"{lab_id} has no source yet ({lab.source_path} is missing). "
            f"Labs with a source: {ready}."
        )
    return lab


def available_labs() -> list[Lab]:
    """The labs whose source exists, in curriculum order."""
    return [lab for lab in LABS.values() if lab.available]


#: The public repository course.toml ships with: it does not exist. Labs that
#: point at it install nothing in Colab (their first cell fails), so
#: `publish` refuses it and `release` warns.
PLACEHOLDER_REPOSITORY = "https://github.com/transformer-lab-kit/transformer-lab-kit"

_public_override: ContextVar[dict | None] = ContextVar("public_override", default=None)


@contextmanager
def public_settings(**override: str | None):
    """Within this block, course_settings()["public"] has ``override``'s keys
    (``repository``, ``ref``) in place of course.toml's: `publish --repository`."""
    token = _public_override.set({key: value for key, value in override.items() if value})
    try:
        yield
    finally:
        _public_override.reset(token)


def read_course_file(path: Path | None = None) -> dict:
    """A course.toml parsed: the kit's (None), or the one an instructor gives
    (`grade --course`). The one place a course file is read.

    Raises:
        LabDefinitionError (a ValueError): the file is missing or not TOML,
            saying which and how to fix it.
    """
    path = Path(path) if path else KIT_ROOT / "course.toml"
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise LabDefinitionError(
            f"The course settings {path} do not exist: give the course.toml with the course's "
            f"settings (public repository, deadlines and late policy).") from None
    except tomllib.TOMLDecodeError as error:
        raise LabDefinitionError(f"{path} is not valid TOML: {error}. Fix that line.") from None


def course_settings() -> dict:
    """The parsed course.toml of the kit (with the public_settings() override)."""
    path = KIT_ROOT / "course.toml"
    settings = read_course_file(path)
    public = settings.setdefault("public", {})
    public.update(_public_override.get() or {})
    missing = [key for key in ("repository", "ref") if not public.get(key)]
    if missing:
        raise LabDefinitionError(f"{path}: [public] lacks {', '.join(missing)}: set the public "
                                 "repository students install labkit from and the tag the "
                                 "labs pin (see docs/instructors.md).")
    return settings


def public_repository_problem() -> str | None:
    """Why the labs would not install in Colab with course.toml's [public]
    settings, or None when they name a repository of the course's own."""
    repository = course_settings()["public"]["repository"].rstrip("/").removesuffix(".git")
    if repository == PLACEHOLDER_REPOSITORY:
        return (f"course.toml's [public] repository is still the kit's placeholder "
                f"({PLACEHOLDER_REPOSITORY}), which does not exist: the labs' first cell would "
                "fail to install labkit in Colab. Set `repository` in course.toml's [public] "
                "section to your course's public GitHub repository (for example "
                "https://github.com/<you>/<course>-labs) and `ref` to the tag you will push, "
                "then run `make labs` and `make publish DEST=<folder>`.")
    if repository.startswith("file:") and not repository.startswith("file://localhost/"):
        return (f"course.toml's [public] repository is {repository}: pip refuses a file URL "
                "without a host in the labs' first cell (`labkit @ git+file:///...` is an "
                "invalid requirement). Write it file://localhost/<path> for a local "
                "repository, or use https://github.com/<you>/<course>-labs.")
    return None


def labkit_requirement() -> str:
    """The pinned pip requirement of the student helpers, for Colab's setup cell."""
    public = course_settings()["public"]
    return f"labkit @ git+{public['repository']}@{public['ref']}#subdirectory=student"


#: How students submit, when course.toml has no [submit] instructions.
DEFAULT_SUBMIT = ("Save your notebook with File → Download → Download .ipynb (Colab) or "
                  "File → Download (Jupyter), and upload that file where your course "
                  "collects this lab; the file name does not matter.")


def submit_instructions() -> str:
    """course.toml's [submit] instructions (what a student does to hand a lab in),
    printed by every lab's last cell; DEFAULT_SUBMIT when the course sets none."""
    text = course_settings().get("submit", {}).get("instructions", DEFAULT_SUBMIT)
    if not isinstance(text, str) or not text.strip():
        raise LabDefinitionError(
            f"course.toml: [submit] instructions must be a non-empty string (what students do "
            f"to hand in a lab), got {text!r}; remove it to use the default.")
    return " ".join(text.split())


def colab_url(lab: Lab) -> str:
    """The 'Open in Colab' address of a lab's student notebook.

    Colab opens notebooks from GitHub: for a repository elsewhere (a local
    ``file://`` one in the kit's tests) the address is the notebook's own.
    """
    public = course_settings()["public"]
    repository = public["repository"].rstrip("/").removesuffix(".git")
    path = f"labs/{lab.id}/{lab.notebook}.ipynb"
    if not repository.startswith("https://github.com/"):
        return f"{repository}/{path}"
    return (f"https://colab.research.google.com/github/"
            f"{repository.removeprefix('https://github.com/')}/blob/{public['ref']}/{path}")
