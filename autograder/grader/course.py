"""The nbgrader course folder the grader works in, and its configuration.

nbgrader reads its settings from nbgrader_config.py files; NbGraderAPI
ignores them unless handed a config. The kit builds one Config in code here
and passes it to every nbgrader call, so no stray config file changes a
verdict.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from traitlets.config import Config

from autograder.labs import Lab

COURSE_ID = "transformer-lab-kit"


def _venv_on_path() -> None:
    """nbgrader shells out to `alembic` to set up a gradebook: make it findable."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


@functools.lru_cache(maxsize=1)
def alembic_head() -> str:
    """The schema revision nbgrader stamps on a new gradebook.

    nbgrader finds it by running `alembic heads` in a subprocess each time it
    creates a gradebook (2.6 s, paid by every grading process); this reads the
    same revision from nbgrader's own migration scripts in-process, once.
    """
    import nbgrader
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic")).get_current_head()
    if not head:
        raise RuntimeError("nbgrader's alembic migrations have no head revision")
    return head


def make_config(root: Path, db_url: str, **overrides) -> Config:
    """The nbgrader configuration of a course folder at ``root``."""
    config = Config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.db_url = db_url
    config.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]
    # Stubs students see: valid Python that says what to do.
    config.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    config.ClearSolutions.text_stub = "YOUR ANSWER HERE"
    # Nothing of the header/footer kind; the labs carry their own header.
    config.GenerateAssignment.create_assignment = True
    for section, values in overrides.items():
        for key, value in values.items():
            setattr(config[section], key, value)
    return config


def make_api(root: Path, db_url: str, config: Config | None = None):
    """An NbGraderAPI bound to ``root`` with the kit's config."""
    import nbgrader.api
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    _venv_on_path()
    nbgrader.api.get_alembic_version = alembic_head
    config = config or make_config(root, db_url)
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def prepare_course(root: Path, lab: Lab, db_url: str, config: Config | None = None):
    """Put ``lab``'s source notebook in ``root``/source and register it.

    Runs nbgrader's generate_assignment, which records the assignment, its
    notebook and every graded cell (with checksums) in the gradebook and
    writes the student version to ``root``/release.
    """
    from autograder.grader.source import build_source_notebook, write_notebook

    root.mkdir(parents=True, exist_ok=True)
    write_notebook(
        build_source_notebook(lab), root / "source" / lab.id / f"{lab.notebook}.ipynb"
    )
    api = make_api(root, db_url, config)
    result = api.generate_assignment(lab.id, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(
            f"nbgrader generate_assignment failed for {lab.id}:\n"
            f"{result.get('error') or ''}\n{result.get('log') or ''}"
        )
    return api
