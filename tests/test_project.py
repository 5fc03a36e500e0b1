"""The project's own files agree with each other."""

from __future__ import annotations

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
    "autograder/term": ("autograder.pipeline", "autograder.cli"),
}


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_no_package_imports_back_into_the_one_that_calls_it(root, folder):
    import ast

    found = []
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if name.startswith(LAYERS[folder]):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    assert not found, "\n".join(found)


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
