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


def test_environment_yml_lists_the_pyproject_dependencies(root):
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    wanted = {_normal(r) for r in pyproject["project"]["dependencies"]}
    wanted |= {_normal(r) for r in pyproject["project"]["optional-dependencies"]["dev"]}
    lines = [line.strip() for line in (root / "environment.yml").read_text().splitlines()]
    pip_lines = [line[2:].strip().strip('"') for line in lines
                 if line.startswith("- ") and not line.startswith("- python")
                 and line not in ("- pip", "- pip:", "- conda-forge")]
    listed = {_normal(line) for line in pip_lines if not line.startswith("-e ")}
    assert listed == wanted, (
        f"environment.yml and pyproject.toml differ: only in environment.yml "
        f"{sorted(listed - wanted)}, only in pyproject.toml {sorted(wanted - listed)}"
    )
    assert "-e ./student" in pip_lines and "-e ." in pip_lines


def test_the_kits_python_has_no_undefined_or_unused_names(root):
    # Catches what no test runs into: e.g. a benchmark whose local variable
    # shadowed the module it had just used (UnboundLocalError at its start).
    import subprocess
    import sys

    folders = ["autograder", "benchmarks", "tests", "student/labkit",
               "data/sample_submissions"]
    result = subprocess.run([sys.executable, "-m", "pyflakes", *folders], cwd=root,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


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
