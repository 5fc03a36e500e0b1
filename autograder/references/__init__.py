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
from types import ModuleType

from autograder.labs import find_lab_modules, lab_folder

__path__ = []   # a package whose modules are found in the labs' folders (find_lab_modules)


def __getattr__(name: str) -> ModuleType:
    """``from autograder.references import lab1``: the lab's module, imported
    from its folder (find_lab_modules). Declared so that the type checker reads such an import
    (the hidden tests' modules are type-checked) as a module."""
    folder = lab_folder(name) if not name.startswith("_") else None
    if folder is None or not (folder / "reference.py").is_file():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


find_lab_modules(__name__, "reference.py")
