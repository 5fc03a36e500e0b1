"""Ready to submit? Every visible check of a lab, run again on your answers.

The last cell of every lab calls ``labkit.ready("lab1")``. It runs the check
cell of each exercise again, in order, on the answers your notebook holds
now, and prints one line per exercise (passed, failed with the check's hint,
or not answered yet), then how to download and submit the notebook.

The checks run in a copy of the notebook's variables, so nothing they assign
changes your notebook, and their own ✓ lines are not repeated. The checks
come with labkit (``labkit/labs/<lab>.json``, written with the labs), because
in Colab a notebook cannot read its own file; ``python -m labkit check
NOTEBOOK`` uses the check cells of the notebook itself instead.

Only the visible checks run here: the hidden tests that grade your notebook
use other inputs and are not part of labkit or the notebook.
"""

from __future__ import annotations

import contextlib
import io
import json
import types
from dataclasses import dataclass
from importlib import resources

__all__ = ["ready", "run_checks", "report", "lab_checks", "Result"]

PASSED, FAILED, MISSING = "passed", "failed", "not answered"
#: A check whose part that calls another exercise failed while that exercise fails its
#: own check (labkit.checks.relying_on): not counted, it waits for that one.
WAITING = "waiting"

#: What the summary says about hidden tests, whatever the checks gave.
NOT_SUFFICIENT = ("Passing every visible check is necessary, not sufficient: hidden tests "
                  "grade your notebook on other inputs.")
#: How to submit when the lab's data says nothing (an older labkit, a notebook of its own).
DEFAULT_SUBMIT = ("Save your notebook with File → Download → Download .ipynb (Colab) or "
                  "File → Download (Jupyter), and upload that file where your course "
                  "collects this lab; the file name does not matter.")


@dataclass(frozen=True)
class Result:
    """What one exercise's check gave: ``status`` is PASSED, FAILED, MISSING or WAITING;
    ``line`` is the one line printed for it, ``hint`` the check's hint, if any."""

    name: str
    status: str
    line: str
    hint: str = ""


def known_labs() -> list[str]:
    """The labs whose checks this labkit carries."""
    folder = resources.files("labkit") / "labs"
    if not folder.is_dir():
        return []
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir()
                  if entry.name.endswith(".json"))


def lab_checks(lab: str) -> dict:
    """The data of ``lab`` carried by labkit: {"lab", "title", "submit", "exercises":
    [{"name", "check"}]}; a ValueError naming the labs it knows otherwise."""
    path = resources.files("labkit") / "labs" / f"{lab}.json" if isinstance(lab, str) else None
    if path is None or not path.is_file():
        raise ValueError(
            f"labkit has no checks for lab {lab!r}; it knows {', '.join(known_labs()) or 'none'}. "
            "Your labkit may be older than this notebook: run the notebook's first cell "
            "again in a new session (Runtime → Restart session), or install the labkit "
            "of your course's release.")
    return json.loads(path.read_text(encoding="utf-8"))


def ready(lab: str) -> None:
    """Run every visible check of ``lab`` on the notebook's current answers and
    print one line per exercise, the total, and how to submit."""
    data = lab_checks(lab)
    namespace = _notebook_namespace()
    results = run_checks(data["exercises"], namespace)
    print(report(results, data.get("submit") or DEFAULT_SUBMIT))


def _notebook_namespace() -> dict:
    """The variables of the notebook this runs in (IPython's user_ns)."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    if shell is None:
        raise RuntimeError(
            "labkit.ready() runs in the lab's notebook (its last cell), where your answers "
            "are. Outside a notebook, check a saved notebook with: "
            "python -m labkit check NOTEBOOK.ipynb")
    return shell.user_ns


def run_checks(exercises: list[dict], namespace: dict) -> list[Result]:
    """Each exercise's check source run, in order, in one copy of ``namespace``
    (its output captured): one Result per exercise."""
    from labkit.checks import WAITING as waiting

    scope = dict(namespace)
    names = [exercise["name"] for exercise in exercises]
    results = []
    for exercise in exercises:
        name = exercise["name"]
        if name not in namespace:
            results.append(Result(name, MISSING, f"… {name}: not answered yet "
                                                 f"(`{name}` is not defined: run its cell)"))
            continue
        waiting.pop(name, None)
        try:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                exec(compile(exercise["check"], f"<check of {name}>", "exec"), scope)
        except Exception as error:  # noqa: BLE001 - every failure is reported, none raised
            results.append(_failure(name, error, scope, names))
        else:
            if waiting.get(name):
                others = " and ".join(f"`{other}`" for other in waiting[name])
                results.append(Result(
                    name, WAITING, f"… {name}: waits for {others}, which a part of its "
                                   "check calls",
                    f"{others} fails its own check: fix it first, then check again."))
            else:
                results.append(Result(name, PASSED, f"✓ {name}: passed"))
    return results


def _failure(name: str, error: Exception, scope: dict, names: list[str]) -> Result:
    """The Result of a check that raised ``error``."""
    stub = _stub_error(error)
    if stub is not None:
        owner = _raised_in(stub, scope, names)
        if owner == name or (owner is None and stub is error and not str(error)):
            return Result(name, MISSING, f"… {name}: not answered yet")
        if owner is not None:
            return Result(name, MISSING, f"… {name}: waits for `{owner}`, not answered yet")
    if isinstance(error, AssertionError):
        message, _, hint = str(error).partition("\nHint: ")
        first = message.strip().splitlines()[0] if message.strip() else "the check failed"
        return Result(name, FAILED, f"✗ {name}: {first}", " ".join(hint.split()))
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    if isinstance(error, NameError) and _raised_by_the_check(error):
        hint = "run every cell above first (Runtime → Run before), then this one."
    else:
        hint = f"run the check cell below `{name}` to see the whole error."
    return Result(name, FAILED, f"✗ {name}: the check raised {text}", hint)


def _raised_by_the_check(error: BaseException) -> bool:
    """Whether ``error`` comes from the check cell's own lines (a name the
    notebook's earlier cells define, not yet run), not from the code it calls."""
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    return traceback is not None and traceback.tb_frame.f_code.co_filename.startswith("<check of ")


def _stub_error(error: BaseException | None) -> BaseException | None:
    """The NotImplementedError of a stub behind ``error``: itself, or the one a
    check caught and turned into its own AssertionError ("... raised ...")."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, NotImplementedError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _raised_in(error: BaseException, scope: dict, names: list[str]) -> str | None:
    """The exercise whose own code raised ``error`` (the innermost frame that
    belongs to one), or None when none did."""
    owners = {}
    for name in names:
        for code in _code_objects(scope.get(name)):
            owners[code] = name
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame.f_code)
        traceback = traceback.tb_next
    for code in reversed(frames):
        if code in owners:
            return owners[code]
    return None


def _code_objects(value) -> list[types.CodeType]:
    """The code objects of a function, or of a class's methods, with the
    functions nested in them."""
    functions: list = []   # functions, and a property's getter and setter
    if isinstance(value, type):
        for attribute in vars(value).values():
            attribute = getattr(attribute, "__func__", attribute)      # static/class methods
            if isinstance(attribute, property):
                functions.extend(f for f in (attribute.fget, attribute.fset) if f)
            elif isinstance(attribute, types.FunctionType):
                functions.append(attribute)
    elif isinstance(value, types.FunctionType):
        functions.append(value)
    codes, pending = [], [function.__code__ for function in functions]
    while pending:
        code = pending.pop()
        codes.append(code)
        pending.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
    return codes


def report(results: list[Result], submit: str) -> str:
    """The text printed: one line per exercise (with its hint), the total,
    what passing means, and how to submit."""
    lines = ["Ready to submit? The visible check of each exercise, on your answers now:", ""]
    for result in results:
        lines.append(result.line)
        if result.hint:
            lines.append(f"    Hint: {result.hint}")
    passed = sum(result.status == PASSED for result in results)
    missing = sum(result.status == MISSING for result in results)
    lines += ["", f"{passed} of {len(results)} exercises pass their checks"
                  + (f" ({missing} not answered yet)." if missing else ".")]
    if passed < len(results):
        lines.append("Fix the exercises above, run their cells and this one again. You may "
                     "also submit as it is: every exercise is graded on its own.")
    lines += [NOT_SUFFICIENT, "", "How to submit: " + submit]
    return "\n".join(lines)
