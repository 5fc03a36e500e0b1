"""The project's own files agree with each other."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from packaging.requirements import Requirement

from autograder.labs import LABS, available_labs, colab_url, labkit_requirement


def _normal(requirement: str) -> str:
    return str(Requirement(requirement))


def _requirements(pyproject: dict, *extras: str) -> list[str]:
    """pyproject's dependencies and those of ``extras``."""
    found = list(pyproject["project"]["dependencies"])
    for extra in extras:
        found += pyproject["project"]["optional-dependencies"][extra]
    return found


def test_environment_yml_takes_every_pin_from_pyproject(root):
    # One list of dependencies (pyproject.toml): the conda file adds Python
    # and installs the kit with the extras `make test` installs, nothing else.
    lines = [line.strip() for line in (root / "environment.yml").read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    pip = lines[lines.index("- pip:") + 1:]
    assert pip == ["- -e ./student", '- -e ".[dev,postgres]"', "- -c constraints.txt"], pip
    assert '-e ".[dev,postgres]"' in (root / "Makefile").read_text()


def test_the_kits_python_passes_ruff(root):
    # Catches what no test runs into: e.g. a benchmark whose local variable
    # shadowed the module it had just used (UnboundLocalError at its start).
    # make test runs the same check (make lint) before the suite.
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."],
                            cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_makefile_lints_before_the_suite_and_installs_the_postgres_extra(root):
    makefile = (root / "Makefile").read_text()
    test_rule = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert "lint" in test_rule.split(":", 1)[1].split(), test_rule
    assert '-e ".[dev,postgres]"' in makefile


def test_constraints_pin_the_installed_environment(root):
    # constraints.txt pins every package make env installs (make constraints
    # refreshes it): each pin names one exact version, the one installed here,
    # and it satisfies pyproject.toml's ranges (checked by the test below).
    from importlib.metadata import PackageNotFoundError, version

    pins = [line.strip() for line in (root / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert len(pins) > 50 and all("==" in pin for pin in pins), pins[:5]
    wrong = []
    for pin in pins:
        name, wanted = pin.split("==", 1)
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != wanted:
            wrong.append(f"{pin} (installed: {installed})")
    assert not wrong, f"make env installs the pins; or refresh them (make constraints): {wrong}"
    assert "-c constraints.txt" in (root / "Makefile").read_text()


def test_the_installed_packages_satisfy_pyproject(root):
    # A pin (jupyter-client's minor series, ruff's version) that the
    # environment does not hold would otherwise go unnoticed until it bites.
    from importlib.metadata import PackageNotFoundError, version

    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    wrong = []
    for requirement in map(Requirement, _requirements(pyproject, "dev", "postgres")):
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            installed = None
        if installed is None or not requirement.specifier.contains(installed, prereleases=True):
            wrong.append(f"{requirement} (installed: {installed})")
    assert not wrong, f"reinstall (make test does it): {wrong}"


def test_psycopg_is_the_postgres_extra_not_a_dependency(root):
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    names = {Requirement(r).name for r in pyproject["project"]["dependencies"]}
    extra = {Requirement(r).name for r in pyproject["project"]["optional-dependencies"]["postgres"]}
    assert "psycopg" not in names and extra == {"psycopg"}


def test_every_report_template_is_package_data(root):
    # Without it an installed (not editable) kit writes no report.
    from fnmatch import fnmatch

    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["autograder.grader"]
    folder = root / "autograder" / "grader"
    files = [p.relative_to(folder).as_posix() for p in (folder / "templates").iterdir()
             if p.is_file()]
    assert files
    assert [f for f in files if not any(fnmatch(f, p) for p in patterns)] == []


def test_ci_runs_make_test(root):
    script = (root / ".ci" / "run").read_text()
    assert "make test" in script


def test_readme_shows_the_two_commands_and_a_colab_badge_per_lab(root):
    readme = (root / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    for lab in available_labs():
        assert colab_url(lab) in readme, f"README lacks the Colab badge of {lab.id}"


def test_every_available_lab_has_its_student_notebook(root):
    assert available_labs(), "no lab has a source"
    for lab in available_labs():
        assert lab.student_path.exists(), f"run `make labs`: {lab.student_path} is missing"


def test_labkit_requirement_is_pinned_to_the_configured_ref(root):
    settings = tomllib.loads((root / "course.toml").read_text())
    requirement = labkit_requirement()
    assert requirement.startswith("labkit @ git+")
    assert f"@{settings['public']['ref']}#subdirectory=student" in requirement


CURRICULUM = Path(__file__).resolve().parents[2] / "shared" / "CURRICULUM.md"


def _curriculum_sections(text: str) -> dict[str, str]:
    """{lab id: its section's text} of CURRICULUM.md ("## lab1: ..." headings)."""
    parts = re.split(r"^## (lab\d+)\b.*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_lab_ids_are_consecutive_from_lab1():
    assert list(LABS) == [f"lab{n}" for n in range(1, len(LABS) + 1)]


@pytest.mark.skipif(not CURRICULUM.exists(), reason=f"{CURRICULUM} is not beside this checkout")
@pytest.mark.parametrize("lab_id", list(LABS))
def test_each_labs_exercises_are_the_curriculums_graded_names(lab_id):
    # lab.toml is the one place a lab's graded names are declared in the kit;
    # the curriculum (shared with graders and instructors) is the contract it keeps.
    section = _curriculum_sections(CURRICULUM.read_text(encoding="utf-8"))[lab_id]
    bullets = set(re.findall(r"^- `(\w+)", section, flags=re.M))
    for name in LABS[lab_id].exercises:
        assert re.search(rf"`{name}\b", section), f"{lab_id}'s lab.toml names {name!r}, " \
            "which its curriculum section does not"
    assert bullets <= set(LABS[lab_id].exercises), (
        f"the curriculum grades {sorted(bullets - set(LABS[lab_id].exercises))} in {lab_id}, "
        f"missing from solutions/{lab_id}/lab.toml")


def test_readme_badge_tables_are_up_to_date(root):
    # The kit's README and the students' (student/README.md) carry the same table.
    from autograder.grader.release import README_BEGIN, README_END, badge_table

    for readme in (root / "README.md", root / "student" / "README.md"):
        text = readme.read_text()
        block = text[text.index(README_BEGIN) + len(README_BEGIN): text.index(README_END)]
        assert block.strip() == badge_table(), f"run `make labs` to refresh {readme.name}'s badges"


@pytest.mark.parametrize("text,message", [
    ('title = "t"\nnotebook = "n"\n', "lacks exercises"),
    ('title = "t"\nnotebook = "n"\nexercises = ["not a name"]\n', "list of Python names"),
    ('title = "t\n', "not valid TOML"),
])
def test_a_broken_lab_toml_says_what_to_fix(tmp_path, text, message):
    from autograder.labs import LabDefinitionError, discover

    folder = tmp_path / "solutions" / "lab7"
    folder.mkdir(parents=True)
    (folder / "lab.toml").write_text(text)
    with pytest.raises(LabDefinitionError, match=message):
        discover(tmp_path)


def test_labs_are_discovered_in_number_order_and_other_folders_ignored(tmp_path):
    from autograder.labs import discover

    for name in ("lab10", "lab2", "notes"):
        folder = tmp_path / "solutions" / name
        folder.mkdir(parents=True)
        (folder / "lab.toml").write_text(f'title = "{name}"\nnotebook = "n"\nexercises = ["f"]\n')
    assert list(discover(tmp_path)) == ["lab2", "lab10"]


def test_a_postgresql_gradebook_without_psycopg_says_how_to_install_it(monkeypatch, capsys,
                                                                       tmp_path):
    import sys

    from autograder import cli

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    for command in (["grade", "lab1", str(tmp_path)], ["merge", "lab1", str(tmp_path)]):
        code = cli.main([*command, "--out", str(tmp_path / "out"),
                         "--db", "postgresql://grader@127.0.0.1/gradebook"])
        error = capsys.readouterr().err
        assert code == 2, error
        assert "pip install 'transformer-lab-kit[postgres]'" in error
    assert not (tmp_path / "out").exists()


def test_database_url_gives_postgresql_the_psycopg_driver():
    from autograder.cli import database_url

    assert database_url(None) is None
    assert database_url("sqlite:///g.db") == "sqlite:///g.db"
    assert database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url("postgresql+asyncpg://u@h/db") == "postgresql+asyncpg://u@h/db"


def test_readme_is_short_and_its_links_lead_somewhere(root):
    # The README is the kit's front page: what it is, the commands, where to read
    # more. Rationale and figures belong in docs/ (docs/performance.md and co.).
    readme = root / "README.md"
    size = len(readme.read_bytes())
    assert size < 8192, f"README.md is {size} bytes, expected under 8192: move detail to docs/"
    for text_path in (readme, *sorted((root / "docs").glob("*.md")), root / "student" / "README.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text_path.read_text()):
            if "://" in target:
                continue
            assert (text_path.parent / target).exists(), (
                f"{text_path.relative_to(root)} links to {target}, which does not exist")


#: Which package of the kit may import which (issue 33): the grader grades, the
#: term makes the rows of record above it, the entry point calls both; publish
#: (the student repository) releases the labs with the grader's release. A module
#: of a lower layer never imports a higher one, not even inside a function.
LAYERS = {
    "autograder/grader": ("autograder.term", "autograder.pipeline", "autograder.cli",
                          "autograder.publish"),
    "autograder/publish": ("autograder.term", "autograder.pipeline", "autograder.cli"),
    "autograder/testkernel": ("autograder.grader", "autograder.term", "autograder.pipeline"),
    # The kernel machinery sits below the grader (issue 49): it starts, isolates,
    # feeds and reads kernels, and knows nothing of nbgrader or of grading.
    "autograder/kernels": ("autograder.grader", "autograder.term", "autograder.pipeline",
                           "autograder.cli", "autograder.publish", "nbgrader"),
    "autograder/term": ("autograder.pipeline", "autograder.cli"),
}


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_no_package_imports_back_into_the_one_that_calls_it(root, folder):
    found = []
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if name.startswith(LAYERS[folder]):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    assert not found, "\n".join(found)


#: The most lines a module of the kit's packages may have (issue 49): past it, a
#: module holds more than one thing a maintainer reads at once.
MAX_MODULE_LINES = 650


def test_no_module_of_the_kit_is_over_650_lines(root):
    modules = sorted(root.glob("autograder/**/*.py")) + sorted(root.glob("student/labkit/**/*.py"))
    assert len(modules) > 50, "the kit's modules were not found"
    long = [f"{path.relative_to(root)}: {count} lines"
            for path in modules
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert not long, (f"modules over {MAX_MODULE_LINES} lines (split each by what it does, "
                      "docs/authoring.md, \"Where a new piece goes\"):\n" + "\n".join(long))


def test_the_kits_packages_pass_mypy(root):
    # autograder/ and student/labkit/, with pyproject.toml's [tool.mypy]: catches
    # what no test runs into, e.g. an Optional used without its None case. make test
    # runs the same check (make lint) before the suite, which warms the cache
    # (.mypy_cache, git-ignored) that makes this run take seconds.
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=root, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# -- who may touch which library's insides (issue 49) ---------------------------
#
# Each library whose internals the kit overrides or patches is touched by one
# module only: on an upgrade of that library, that module is the one to read
# against the new release. The rules read the source (ast): an attribute named
# in code, not a word in a comment.

def _kit_sources(root: Path) -> list[tuple[str, ast.Module]]:
    """The kit's Python the rules read, parsed, by path: the grader and its
    kernels, the students' labkit, and each lab's hidden tests and references
    (they run in the test kernel)."""
    paths = [*sorted((root / "autograder").rglob("*.py")),
             *sorted((root / "student" / "labkit").rglob("*.py")),
             *sorted((root / "solutions").glob("*/hidden.py")),
             *sorted((root / "solutions").glob("*/reference.py"))]
    return [(str(path.relative_to(root)), ast.parse(path.read_text(encoding="utf-8")))
            for path in paths]


def _in(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def _root_name(expr: ast.expr) -> str | None:
    """The name an attribute chain starts from: ``a`` of ``a.b.c`` and of
    ``getattr(a.b, "c")``; None for anything else (a call's result)."""
    while True:
        if isinstance(expr, ast.Attribute):
            expr = expr.value
        elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
              and expr.func.id == "getattr" and expr.args):
            expr = expr.args[0]
        else:
            return expr.id if isinstance(expr, ast.Name) else None


def _imports_module(expr: ast.expr, packages: tuple[str, ...]) -> bool:
    """``importlib.import_module("pkg.mod")`` or ``__import__("pkg")``."""
    return (isinstance(expr, ast.Call) and bool(expr.args)
            and (isinstance(expr.func, ast.Name) and expr.func.id in ("__import__", "import_module")
                 or isinstance(expr.func, ast.Attribute) and expr.func.attr == "import_module")
            and isinstance(expr.args[0], ast.Constant) and isinstance(expr.args[0].value, str)
            and _in(expr.args[0].value, packages))


def _bound_to(tree: ast.Module, packages: tuple[str, ...]) -> set[str]:
    """The names ``tree`` binds to a module or object of ``packages``: by an
    import (``import pkg.mod``, ``from pkg.mod import X as Y``), or by an
    assignment from such a name (``x = pkg.mod.Class``, ``x = getattr(Y, "n")``,
    ``x = importlib.import_module("pkg.mod")``). Not a call's result: an
    object the kit made with a library (``layer = keras.layers.Dense(2)``)
    is the kit's to set."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names
                         if _in(alias.name, packages))
        elif isinstance(node, ast.ImportFrom) and not node.level and _in(node.module or "",
                                                                          packages):
            bound.update(alias.asname or alias.name for alias in node.names)
    assignments = [(node.targets if isinstance(node, ast.Assign) else [node.target], node.value)
                   for node in ast.walk(tree)
                   if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
                   and node.value is not None]
    while True:
        before = len(bound)
        for targets, value in assignments:
            if _root_name(value) in bound or _imports_module(value, packages):
                bound.update(target.id for target in targets if isinstance(target, ast.Name))
        if len(bound) == before:
            return bound


def _patches(tree: ast.Module, packages: tuple[str, ...],
             settings: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """Where ``tree`` sets or deletes an attribute of a module or object of
    ``packages`` (_bound_to): ``X.attr = ...`` (or ``+=``, ``del``),
    ``setattr(X, ...)``, ``monkeypatch.setattr(X, ...)``,
    ``mock.patch.object(X, ...)``, and their string forms
    (``monkeypatch.setattr("pkg.mod.attr", ...)``, ``mock.patch("pkg...")``).
    ``settings``: targets (as written) that are a library's documented
    settings, not patches."""
    bound = _bound_to(tree, packages)
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = (
            node.targets if isinstance(node, (ast.Assign, ast.Delete))
            else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        while any(isinstance(target, (ast.Tuple, ast.List)) for target in targets):
            targets = [element for target in targets for element in (
                target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])]
        for target in targets:
            if (isinstance(target, ast.Attribute) and _root_name(target.value) in bound
                    and ast.unparse(target) not in (settings or {})):
                found.append((node.lineno, f"sets {ast.unparse(target)}"))
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func, first = node.func, node.args[0]
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        patch_object = (name == "object" and isinstance(func, ast.Attribute)
                        and _root_name(func.value) is not None
                        and ast.unparse(func.value).split(".")[-1] == "patch")
        if (name in ("setattr", "delattr") or patch_object) and _root_name(first) in bound:
            found.append((node.lineno, f"{name}({ast.unparse(first)}, ...)"))
        elif (name in ("setattr", "delattr", "patch") and isinstance(first, ast.Constant)
              and isinstance(first.value, str) and _in(first.value, packages)):
            found.append((node.lineno, f"{name}({first.value!r}, ...)"))
    return found


def _subclasses(sources, packages: tuple[str, ...]) -> set[str]:
    """The names of the kit's classes that derive from a class of
    ``packages``, directly or through another of the kit's classes."""
    derived: set[str] = set()
    while True:
        before = len(derived)
        for _, tree in sources:
            bound = _bound_to(tree, packages)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                        _root_name(base) in bound
                        or isinstance(base, ast.Name) and base.id in derived
                        for base in node.bases):
                    derived.add(node.name)
        if len(derived) == before:
            return derived


def _imported_bases(sources, packages: tuple[str, ...]) -> list[type]:
    """The classes of ``packages`` that the kit's classes name as a base
    (imported, then found: ``from pkg.mod import C`` or ``pkg.mod.C``)."""
    import importlib

    found = []
    for _, tree in sources:
        paths = {}     # the names the module's imports bind -> what they are
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                paths.update({alias.asname or alias.name.split(".")[0]:
                              alias.name if alias.asname else alias.name.split(".")[0]
                              for alias in node.names if _in(alias.name, packages)})
            elif isinstance(node, ast.ImportFrom) and not node.level and _in(node.module or "",
                                                                              packages):
                paths.update({alias.asname or alias.name: f"{node.module}.{alias.name}"
                              for alias in node.names})
        for node in ast.walk(tree):
            for base in node.bases if isinstance(node, ast.ClassDef) else []:
                first, *rest = ast.unparse(base).split(".")
                if first not in paths:
                    continue
                parts = [*paths[first].split("."), *rest]
                for cut in range(len(parts), 0, -1):
                    try:
                        value = importlib.import_module(".".join(parts[:cut]))
                    except ImportError:
                        continue
                    for name in parts[cut:]:
                        value = getattr(value, name)
                    if isinstance(value, type):
                        found.append(value)
                    break
    return found


def _overrides(tree: ast.Module, subclasses: set[str], names: set[str]) -> list[tuple[int, str]]:
    """The methods named in ``names`` that a class of ``subclasses`` defines."""
    return [(item.lineno, f"overrides {node.name}.{item.name}")
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            and node.name in subclasses
            for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and item.name in names]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _machinery() -> set[str]:
    """Private names every class of a kind gets from its metaclass, whatever
    its library: traitlets' (``_traits``, ``_descriptors``, ...) and abc's
    (``_abc_impl``). They are no library's internals to override."""
    import abc

    from traitlets import HasTraits, Unicode

    traits = type("Probe", (HasTraits,), {"name": Unicode()})
    checked = abc.ABCMeta("Probe", (abc.ABC,), {})
    return {name for cls in (traits, checked) for name in vars(cls) if _private(name)}


def _private_names(classes, package: str) -> set[str]:
    """The private (``_x``, not dunder) names that the classes of ``package``
    in the MROs of ``classes`` define: their class attributes and methods,
    and the attributes their methods set on ``self``."""
    import inspect
    import textwrap

    names: set[str] = set()
    for cls in {cls for start in classes for cls in start.__mro__
                if cls.__module__.split(".")[0] == package}:
        names.update(name for name in vars(cls) if _private(name))
        try:
            source = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError, SyntaxError):
            continue
        names.update(node.attr for node in ast.walk(source) if isinstance(node, ast.Attribute)
                     and isinstance(node.value, ast.Name) and node.value.id == "self"
                     and _private(node.attr))
    return names - _machinery()


#: Names of jupyter_client's internals that the rule leaves alone, each with
#: why: none so far (no attribute of the kit's own outside kernels/jupyter.py
#: has one of their names). A name too generic to mean jupyter_client's, that
#: the kit uses for its own attribute, goes here.
JUPYTER_CLIENT_NAMES_NOT_CHECKED: dict[str, str] = {}


def _jupyter_client_private_names(bases=()) -> set[str]:
    """The private names of the jupyter_client classes the kit uses (and of
    ``bases``: those its classes derive from)."""
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel, ZMQSocketChannel
    from jupyter_client.client import KernelClient
    from jupyter_client.manager import AsyncKernelManager, KernelManager
    from jupyter_client.provisioning import LocalProvisioner
    from jupyter_client.session import Session

    classes = (AsyncKernelManager, KernelManager, AsyncKernelClient, BlockingKernelClient,
               KernelClient, AsyncZMQSocketChannel, ZMQSocketChannel, Session,
               LocalProvisioner, *bases)
    return _private_names(classes, "jupyter_client") - set(JUPYTER_CLIENT_NAMES_NOT_CHECKED)


def _private_uses(tree: ast.Module, names: set[str], subclasses: set[str]) -> list[tuple[int, str]]:
    """Where ``tree`` names one of ``names``: as an attribute (``km._x``), in
    getattr/setattr/hasattr/delattr (``getattr(kc, "_x")``), or as a method
    of a class of ``subclasses`` (an override)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append((node.lineno, f"names {ast.unparse(node)}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and node.args[1].value in names):
            found.append((node.lineno, ast.unparse(node)))
    return found + _overrides(tree, subclasses, names)


def _outside(sources, allowed: str, check) -> list[str]:
    return [f"{path}:{line}: {what}" for path, tree in sources if path != allowed
            for line, what in check(tree)]


def test_only_kernels_jupyter_names_jupyter_clients_internals(root):
    sources = _kit_sources(root)
    names = _jupyter_client_private_names(_imported_bases(sources, ("jupyter_client",)))
    subclasses = _subclasses(sources, ("jupyter_client",))
    found = _outside(sources, "autograder/kernels/jupyter.py",
                     lambda tree: _private_uses(tree, names, subclasses))
    assert not found, (
        "jupyter_client's private attributes are named outside autograder/kernels/jupyter.py "
        "(the one module the jupyter-client pin protects):\n" + "\n".join(found)
        + "\nMove the code that touches them into a function or method of "
          "autograder/kernels/jupyter.py, and call that.")
    # Not vacuous: the module that may is where they are found.
    assert _private_uses(dict(sources)["autograder/kernels/jupyter.py"], names, subclasses)


def test_only_grader_course_patches_nbgrader(root):
    sources = _kit_sources(root)
    subclasses = _subclasses(sources, ("nbgrader",))
    # The private methods of the nbgrader classes the kit subclasses (nbgrader's
    # Execute: IsolatedExecute); nbclient's hooks that IsolatedExecute overrides
    # (_async_poll_for_reply) are nbclient's, not nbgrader's.
    bases = _imported_bases(sources, ("nbgrader",))
    names = _private_names(bases, "nbgrader")
    found = _outside(sources, "autograder/grader/course.py",
                     lambda tree: _patches(tree, ("nbgrader",))
                     + _overrides(tree, subclasses, names))
    assert not found, (
        "nbgrader is patched outside autograder/grader/course.py:\n" + "\n".join(found)
        + "\nMove the patch into a function of autograder/grader/course.py (make_api applies "
          "the kit's patches) and call that; an override of nbgrader's private method "
          "goes the same way, as a patch there.")
    assert _patches(dict(sources)["autograder/grader/course.py"], ("nbgrader",))


#: Keras and its backends: what autograder/studentkernel/glue.py alone patches.
KERAS_PACKAGES = ("keras", "tensorflow", "torch", "jax")

#: Attributes of those packages that are their documented settings, set as
#: their documentation says (an assignment is how one sets them), not patches:
#: what may be set outside autograder/studentkernel/glue.py, with why.
KERAS_SETTINGS = {
    "torch.backends.cuda.matmul.allow_tf32":
        "PyTorch's switch for TF32 in matrix products (its CUDA semantics page): "
        "labkit.precision turns TF32 off in the students' notebooks, where the kit's "
        "grader is not (glue.py runs only in the grader's student kernel)",
    "torch.backends.cudnn.allow_tf32": "the same for cuDNN's convolutions",
}


def test_only_studentkernel_glue_patches_keras(root):
    sources = _kit_sources(root)
    found = _outside(sources, "autograder/studentkernel/glue.py",
                     lambda tree: _patches(tree, KERAS_PACKAGES, KERAS_SETTINGS))
    assert not found, (
        "Keras (or its backends) is patched outside autograder/studentkernel/glue.py:\n"
        + "\n".join(found)
        + "\nMove the patch into autograder/studentkernel/glue.py (where the student's "
          "kernel applies it around the grader's requests, with its undo), and call that.")
    assert _patches(dict(sources)["autograder/studentkernel/glue.py"], KERAS_PACKAGES)


# The rules' checks on sources made to break them: a rule that finds nothing
# where something is would pass whatever the kit does.

def test_the_jupyter_client_rule_finds_each_way_of_naming_its_internals():
    names = _jupyter_client_private_names()
    source = ast.parse(
        "from jupyter_client.manager import AsyncKernelManager as Manager\n"
        "import jupyter_client\n"
        "def start(km, kc):\n"
        "    km._async_launch_kernel(['python'])\n"                  # 4
        "    return getattr(kc, '_iopub_channel', None)\n"           # 5
        "class Mine(Manager):\n"
        "    async def _async_wait(self, pollinterval=0.1):\n"       # 7
        "        pass\n"
        "class Theirs(jupyter_client.KernelClient):\n"
        "    def _context_default(self):\n"                          # 10
        "        return None\n"
        "class Below(Mine):\n"
        "    def _async_wait(self):\n"                               # 13
        "        pass\n"
        "class Own:\n"
        "    def _async_wait(self):\n"                               # 16: not theirs
        "        pass\n")
    subclasses = _subclasses([("x.py", source)], ("jupyter_client",))
    assert subclasses == {"Mine", "Theirs", "Below"}
    assert sorted(line for line, _ in _private_uses(source, names, subclasses)) == [
        4, 5, 7, 10, 13]
    message = _outside([("autograder/grader/x.py", source)], "autograder/kernels/jupyter.py",
                       lambda tree: _private_uses(tree, names, subclasses))
    assert "autograder/grader/x.py:4: names km._async_launch_kernel" in message


def test_the_nbgrader_rule_finds_each_way_of_patching_it():
    source = ast.parse(
        "import nbgrader.api\n"
        "from nbgrader.nbgraderformat import common as fmt\n"
        "from nbgrader.preprocessors import Execute\n"
        "def patch(monkeypatch, mock):\n"
        "    nbgrader.api.get_alembic_version = str\n"              # 5
        "    setattr(fmt, 'jsonschema', None)\n"                      # 6
        "    monkeypatch.setattr('nbgrader.api.Gradebook', None)\n"   # 7
        "    mock.patch.object(Execute, 'preprocess')\n"             # 8
        "    validator = getattr(fmt, 'jsonschema')\n"
        "    validator.validate = None\n"                             # 10
        "    del fmt.jsonschema\n"                                    # 11
        "    config = {}\n"
        "    config.x = 1\n"                                          # not nbgrader's
        "class Step(Execute):\n"
        "    def _private_of_theirs(self):\n"                         # 15
        "        self.ours = 1\n")
    assert sorted(line for line, _ in _patches(source, ("nbgrader",))) == [5, 6, 7, 8, 10, 11]
    subclasses = _subclasses([("x.py", source)], ("nbgrader",))
    assert _overrides(source, subclasses, {"_private_of_theirs"}) == [
        (15, "overrides Step._private_of_theirs")]


def test_the_keras_rule_finds_its_patches_not_the_settings_of_its_objects():
    source = ast.parse(
        "import importlib\n"
        "import keras\n"
        "from keras.src.layers import layer as layer_module\n"
        "layer_class = getattr(layer_module, 'Layer', None)\n"
        "layer_class._maybe_build = None\n"                           # 5
        "keras.layers.Dense.call = None\n"                            # 6
        "torch = importlib.import_module('torch')\n"
        "torch.backends.cudnn.allow_tf32 = False\n"                   # 8: a setting
        "torch.compile = None\n"                                      # 9
        "dense = keras.layers.Dense(2)\n"
        "dense.trainable = False\n"                                   # the kit's object
        "import tensorflow as tf\n"
        "tf.random.uniform = None\n")                                 # 13
    assert sorted(line for line, _ in _patches(source, KERAS_PACKAGES, KERAS_SETTINGS)) == [
        5, 6, 9, 13]
    assert 8 in [line for line, _ in _patches(source, KERAS_PACKAGES)]
