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
from typing import Any

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
    creates a gradebook (seconds, paid by every grading process: docs/performance.md,
    "Why the code is shaped this way"); this reads the
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


class SchemaCheckedOnce:
    """``jsonschema`` as nbgrader's cell metadata validator uses it, with the
    schema checked once instead of for every cell.

    nbgrader checks every graded cell's metadata with ``jsonschema.validate``,
    which first checks the schema itself (nbgrader's own file, the same every
    time): twice a submission, a share of a worker's time worth saving
    (docs/performance.md, "Why the code is shaped this way"). Here the
    validation and the error raised are jsonschema's own (``validate``: the
    best match of the errors); only the schema's check is done once for each
    schema.
    """

    def __init__(self) -> None:
        import jsonschema  # type: ignore[import-untyped]

        self._jsonschema = jsonschema
        self._validators: dict[str, Any] = {}

    def __getattr__(self, name: str):
        return getattr(self._jsonschema, name)

    def validate(self, instance, schema, cls=None, *args, **kwargs) -> None:
        import json

        key = json.dumps([repr(cls), schema, args, kwargs], sort_keys=True, default=repr)
        validator = self._validators.get(key)
        if validator is None:
            cls = cls or self._jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators[key] = cls(schema, *args, **kwargs)
        error = self._jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def _schema_checked_once() -> None:
    """Have nbgrader's metadata validator check its schema once (SchemaCheckedOnce)."""
    from nbgrader.nbgraderformat import common

    if not isinstance(common.jsonschema, SchemaCheckedOnce):
        common.jsonschema = SchemaCheckedOnce()


def make_api(root: Path, db_url: str, config: Config | None = None):
    """An NbGraderAPI bound to ``root`` with the kit's config."""
    import nbgrader.api
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    _venv_on_path()
    _schema_checked_once()
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
