"""The hidden tests' references, one per lab, kept in the lab's own folder.

``autograder.references.lab1`` is ``solutions/lab1/reference.py``: a lab is
one folder, and its references live beside its source, its stand-ins and its
hints (docs/authoring.md). They are imported only where hidden tests run: in
the test kernel, which runs outside the student's sandbox, and in the kit's
own tests. The student's kernel cannot read the kit's checkout (the sandbox
hides it), and nothing of this package ships with labkit.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

from autograder.labs import lab_folder

__path__ = []   # a package whose modules are found by the finder below


class _LabReferenceFinder(importlib.abc.MetaPathFinder):
    """Finds ``autograder.references.<lab>`` in ``solutions/<lab>/reference.py``."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, lab_id = fullname.rpartition(".")
        if package != __name__ or not lab_id:
            return None
        folder = lab_folder(lab_id)
        if folder is None or not (folder / "reference.py").is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, folder / "reference.py")


def __getattr__(name: str) -> ModuleType:
    """``from autograder.references import lab1``: the lab's module, imported by
    the finder below. Declared so that the type checker reads such an import
    (the hidden tests' modules are type-checked) as a module."""
    folder = lab_folder(name) if not name.startswith("_") else None
    if folder is None or not (folder / "reference.py").is_file():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


if not any(isinstance(finder, _LabReferenceFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _LabReferenceFinder())
