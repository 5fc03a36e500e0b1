"""Each lab's hidden tests as a module: ``solutions/<lab>/hidden.py``.

A hidden test is one function per graded property, named as its tests cell
(``test_<exercise>`` or ``test_<exercise>__<property>``), declared with
`graded` (its exercise and points; its docstring is the sentence the student
reads beside the cell), its parameters naming the student functions and
classes it calls (and ``namespace``, the test cell's globals, where it needs
the grader's fixtures: ``reference.constructor(namespace)``,
``testing.hoster(namespace)``).

The release writes one call into each tests cell of the nbgrader source
notebook (autograder.grader.source.hidden_cell_source)::

    # Hidden tests of `softmax`: no overflow ... (0.5 points).
    ### BEGIN HIDDEN TESTS
    from autograder.hidden.lab1 import test_softmax__overflow
    test_softmax__overflow(softmax)
    ### END HIDDEN TESTS

so nbgrader's cells, points and checksums work as before, and the test
kernel binds ``softmax`` to the student's (a proxy) and runs the function.
``autograder.hidden.<lab>`` is found in the lab's folder
(autograder.labs.find_lab_modules), as ``autograder.references.<lab>`` is; it is imported only where hidden tests
run (the test kernel, the kit's own tests) and by the release, never in the
student's kernel, and nothing of it ships with labkit.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import inspect
from dataclasses import dataclass
from types import FunctionType, ModuleType

from autograder.labs import find_lab_modules, lab_folder

# A package whose modules (one per lab) are found by the finder below.
__path__ = []

#: The parameter through which a hidden test receives the test cell's globals.
NAMESPACE = "namespace"


@dataclass(frozen=True)
class Graded:
    """What `graded` declares on a hidden test."""

    exercise: str
    points: int | float


def graded(exercise: str, points: float):
    """Declare a hidden test: the exercise it grades and its points."""
    if not (isinstance(points, (int, float)) and points > 0):
        raise ValueError(f"graded({exercise!r}, points={points!r}): points must be positive")

    def declare(function: FunctionType) -> FunctionType:
        function.__graded__ = Graded(exercise, points)  # type: ignore[attr-defined]
        return function

    return declare


def declaration(function: FunctionType) -> Graded:
    """What `graded` declared on ``function``."""
    return function.__graded__  # type: ignore[attr-defined]  # set by graded


def tests_of(module: ModuleType) -> dict[str, FunctionType]:
    """The hidden tests of a lab's module, by name, in the order they are defined."""
    found = [(value.__code__.co_firstlineno, name, value) for name, value in vars(module).items()
             if isinstance(value, FunctionType) and hasattr(value, "__graded__")
             and value.__module__ == module.__name__]
    return {name: value for _, name, value in sorted(found)}


def load(lab_id: str) -> ModuleType | None:
    """``autograder.hidden.<lab_id>``, or None when the lab has no hidden.py."""
    folder = lab_folder(lab_id)
    if folder is None or not (folder / "hidden.py").is_file():
        return None
    return importlib.import_module(f"{__name__}.{lab_id}")


def parameters(function: FunctionType) -> list[str]:
    """A hidden test's parameters: the student names it calls (and ``namespace``)."""
    return list(inspect.signature(function).parameters)


def call_source(lab_id: str, name: str, function: FunctionType) -> str:
    """The one call a tests cell holds: import the test, pass it the names."""
    arguments = ", ".join("globals()" if parameter == NAMESPACE else parameter
                          for parameter in parameters(function))
    return f"from {__name__}.{lab_id} import {name}\n{name}({arguments})"


find_lab_modules(__name__, "hidden.py")
