"""The test kernel's side of the pictures (autograder.grader.pictures).

Each lab may declare, in ``solutions/<lab>/pictures.py``, a function per
exercise, ``PICTURES = {"DecoderLayer": picture_DecoderLayer}``, that takes
the student's object (a proxy, as a hidden test's parameter is), calls it on
the notebook's own visible example, the inputs of the exercise's visible
check, written out in that file, never drawn from ``testing.rng``, and
returns::

    {"title": ..., "rows": ..., "cols": ..., "scale": (low, high), "note": ...,
     "panels": [{"label": ..., "student": 2-D array or None, "expected": 2-D array}]}

the expected values computed by the lab's reference on the same inputs. The
grader calls ``make`` once the notebook has run, for the exercises that lost
points only: a correct notebook pays nothing.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType

import numpy as np

#: The most values one matrix of a picture carries back to the grader (it draws 32 x 32).
MAX_SIDE = 33


def declarations(lab_id: str) -> ModuleType | None:
    """``solutions/<lab>/pictures.py`` as a module, or None."""
    from autograder.labs import lab_folder

    name = f"autograder_pictures_{lab_id}"
    if name in sys.modules:
        return sys.modules[name]
    folder = lab_folder(lab_id)
    path = folder / "pictures.py" if folder is not None else None
    if path is None or not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def declared(lab_id: str) -> list[str]:
    """The exercises of ``lab_id`` that have a picture."""
    module = declarations(lab_id)
    return list(getattr(module, "PICTURES", {})) if module is not None else []


def _plain(matrix) -> list | None:
    if matrix is None:
        return None
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        return None
    array = array[:MAX_SIDE, :MAX_SIDE]
    # NaN and infinities as JSON's null (drawn grey) or clipped by the grader.
    return [[None if np.isnan(v) else float(np.clip(v, -1e30, 1e30)) for v in row]
            for row in array]


def encode(spec: dict) -> dict:
    """A picture as plain JSON data."""
    return {"title": str(spec.get("title", "")), "rows": str(spec.get("rows", "")),
            "cols": str(spec.get("cols", "")), "note": str(spec.get("note", "")),
            "scale": [float(v) for v in spec.get("scale", (0.0, 1.0))],
            "panels": [{"label": str(p.get("label", "")), "student": _plain(p.get("student")),
                        "expected": _plain(p.get("expected"))}
                       for p in spec.get("panels", [])]}


def make(kernel, lab_id: str, exercises) -> str:
    """The pictures of ``exercises`` (those the lab declares), as JSON text:
    exercise -> picture. A picture whose making fails is left out."""
    module = declarations(lab_id)
    functions = getattr(module, "PICTURES", {}) if module is not None else {}
    pictures = {}
    for exercise in exercises:
        function = functions.get(exercise)
        if function is None:
            continue
        namespace: dict = {}
        kernel.bind(namespace, [exercise])
        try:
            spec = function(namespace[exercise])
        except Exception:  # noqa: BLE001 - no picture, the grade is untouched
            continue
        if not spec.get("note") and all(_same(p.get("student"), p.get("expected"))
                                        for p in spec.get("panels", [])):
            spec["note"] = ("Your values are right on this example: what the message says "
                            "shows on the hidden tests' inputs (other sizes or options).")
        pictures[exercise] = encode(spec)
    return json.dumps(pictures, allow_nan=False)


def answer(call) -> np.ndarray | None:
    """What ``call()`` (a call of the student's code) returns, as a float array;
    None when it raises or returns something else than numbers."""
    from autograder.testkernel.testing import as_array

    try:
        value = as_array(call(), "the picture's call")
        return np.asarray(value, dtype=np.float64)
    except Exception:  # noqa: BLE001 - no values to draw: the panel says so
        return None


def recognise(student: np.ndarray | None, expected, mistakes) -> str:
    """The sentence of the first of ``mistakes`` ((values, sentence) pairs, the
    lab's own recognisers) that ``student`` matches where it differs from
    ``expected`` (a mistake that gives the right values on this example is no
    mistake here); "" when none does."""
    if student is None or _same(student, expected):
        return ""
    for values, sentence in mistakes:
        if _same(student, values) and not _same(values, expected):
            return sentence
    return ""


def _same(student, expected) -> bool:
    if student is None:
        return False
    student, expected = np.asarray(student, np.float64), np.asarray(expected, np.float64)
    return student.shape == expected.shape and bool(np.allclose(student, expected, rtol=1e-3,
                                                                 atol=1e-4))
