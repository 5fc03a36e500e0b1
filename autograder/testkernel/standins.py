"""A lab's stand-ins: correct versions of its exercises, read from its folder.

While the grader tests one exercise, every other exercise its solution may
call is replaced in the student's kernel by a stand-in, so that a mistake
costs points in one exercise only (autograder.kernels.probe binds them;
see ``RemoteObject`` and ``ship_code``). A lab declares them in its folder:

- ``solutions/<lab>/standins.toml``: for each exercise, the OTHER exercises
  its solution may call (``attention_pool = ["dot_scores", "softmax"]``);
- ``solutions/<lab>/standins/<name>.py``: the stand-in for ``name``, a real
  module (linted like any code, its imports at its top) with the curriculum's
  signature. A stand-in runs in a fresh namespace in the student's kernel, so
  it must be self-contained: a relative import of a sibling file
  (``from ._provided_layers import EncoderLayer``) is replaced by that file's
  code when the source is read. Files whose name starts with ``_`` are such
  parts, not stand-ins.

The sources are read as text here, in the test kernel; the student's kernel
only ever receives them compiled, without docstrings (``probe.ship_code``).
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

__all__ = ["calls", "define", "for_exercise", "sources"]

#: The file, in a lab's folder, that says which stand-ins each exercise gets.
CALLS_FILE = "standins.toml"
#: The folder, in a lab's folder, of the stand-ins' sources.
SOURCES_FOLDER = "standins"


def calls(folder: Path) -> dict[str, list[str]]:
    """exercise -> the other exercises its solution may call ({} without a
    standins.toml)."""
    return {exercise: list(names) for exercise, names in _read(Path(folder))[0].items()}


def sources(folder: Path) -> dict[str, str]:
    """name -> the self-contained source of its stand-in (standins/<name>.py,
    sibling parts put in place of their imports)."""
    return dict(_read(Path(folder))[1])


def for_exercise(folder: Path, exercise: str) -> dict[str, str]:
    """name -> source of each stand-in put in place while ``exercise`` is tested."""
    available = sources(folder)
    return {name: available[name] for name in calls(folder).get(exercise, [])}


def define(folder: Path, name: str):
    """The stand-in ``name``, defined here as the student's kernel defines it:
    its source run in a fresh namespace (for the kit's tests of the stand-ins)."""
    namespace: dict = {}
    exec(compile(sources(folder)[name], f"<stand-in {name}>", "exec"), namespace)
    return namespace[name]


@functools.lru_cache(maxsize=16)
def _read(folder: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """standins.toml and the stand-ins' sources, read once per test kernel. A
    name without a stand-in file is an error of the lab's author, reported
    here rather than when a student is graded."""
    directory = folder / SOURCES_FOLDER
    found = {path.stem: _self_contained(path) for path in sorted(directory.glob("*.py"))
             if not path.stem.startswith("_")}
    path = folder / CALLS_FILE
    if not path.is_file():
        return {}, found
    with open(path, "rb") as handle:
        table = tomllib.load(handle)
    for exercise, names in table.items():
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ValueError(f"{path}: {exercise} = {names!r}; expected a list of exercise "
                             f"names, e.g. {exercise} = [\"softmax\"].")
        missing = [name for name in names if name not in found]
        if missing:
            raise ValueError(
                f"{path}: {exercise} may call {', '.join(missing)}, which has no stand-in; "
                f"add {', '.join(f'{SOURCES_FOLDER}/{name}.py' for name in missing)} (a "
                f"correct version with the curriculum's signature) or remove the name.")
    return table, found


def _self_contained(path: Path, seen: tuple[Path, ...] = ()) -> str:
    """The text of ``path`` with each top-level ``from .<part> import ...`` replaced
    by the code of ``<part>.py`` beside it (less its docstring)."""
    if path in seen:
        raise ValueError(f"{path} imports itself through {' -> '.join(p.name for p in seen)}; "
                         "a stand-in's parts must not import each other in a circle.")
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    for node in reversed(ast.parse(text, str(path)).body):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level != 1 or not node.module:
                raise ValueError(f"{path}:{node.lineno}: a stand-in imports its parts as "
                                 "`from .<part> import <names>` (a file beside it).")
            part = path.with_name(f"{node.module}.py")
            code = _without_docstring(_self_contained(part, seen + (path,)))
            lines[node.lineno - 1:node.end_lineno] = [code]
    return "".join(lines)


def _without_docstring(text: str) -> str:
    """``text`` less its module docstring: inlined mid-file it would be a bare
    string that ship_code does not remove."""
    body = ast.parse(text).body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return "".join(text.splitlines(keepends=True)[first.end_lineno:]).lstrip("\n")
    return text
