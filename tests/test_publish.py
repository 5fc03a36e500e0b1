"""`python -m autograder publish`: the student repository, and nothing else.

The student's whole path from that repository (install in a Colab-like
kernel, checks, a full-marks grade) is tests/test_student_path.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import nbformat
import pytest

from autograder import labs as labs_module
from autograder.grader import publish as publish_module
from autograder.grader.leaks import Scanner, solution_lines
from autograder.grader.publish import PublishError, publish
from autograder.labs import (PLACEHOLDER_REPOSITORY, available_labs, public_repository_problem,
                             public_settings)
from tests.conftest import run_cli

REPOSITORY = "https://github.com/acme-university/transformer-labs"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    dest = tmp_path_factory.mktemp("published") / "student-repo"
    return publish(dest, repository=REPOSITORY, ref="v2026.1", git=shutil.which("git") is not None)


def test_the_repository_holds_labs_labkit_readme_and_licence_only(published):
    top = {entry.name for entry in published.dest.iterdir()} - {".git"}
    assert top == {"README.md", "LICENSE", "labs", "student"}
    notebooks = sorted(str(path.relative_to(published.dest))
                       for path in published.dest.glob("labs/*/*.ipynb"))
    assert notebooks == [f"labs/{lab.id}/{lab.notebook}.ipynb" for lab in available_labs()]
    assert not [name for name in published.files
                if re.search(r"(egg-info|__pycache__|\.pyc$|/build/|solutions|autograder)", name)]
    assert (published.dest / "student" / "labkit" / "checks.py").exists()
    assert "MIT License" in (published.dest / "LICENSE").read_text()


def test_the_labs_install_labkit_from_the_course_repository_at_its_tag(published):
    for lab in available_labs():
        notebook = nbformat.read(published.dest / "labs" / lab.id / f"{lab.notebook}.ipynb", 4)
        setup = next(cell for cell in notebook.cells if cell.cell_type == "code")
        assert f"labkit @ git+{REPOSITORY}@v2026.1#subdirectory=student" in setup.source
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")


def test_the_readme_opens_each_lab_in_colab_at_the_tag(published):
    readme = (published.dest / "README.md").read_text()
    for lab in available_labs():
        url = (f"https://colab.research.google.com/github/acme-university/transformer-labs/"
               f"blob/v2026.1/labs/{lab.id}/{lab.notebook}.ipynb")
        assert url in readme and published.colab_urls[lab.id] == url
    assert PLACEHOLDER_REPOSITORY.removeprefix("https://github.com/") not in readme
    assert readme == (published.dest / "student" / "README.md").read_text()
    # Its relative links lead to files of the published repository.
    for target in re.findall(r"\]\((?!https?://)([^)#]+)", readme):
        assert (published.dest / target).exists(), f"README links to {target}, not published"


def test_nothing_of_the_instructor_is_published(published):
    assert Scanner(available_labs()).tree_leaks(published.dest) == []


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commits_and_tags_and_a_tag_is_never_moved(published):
    tags = subprocess.run(["git", "tag"], cwd=published.dest, capture_output=True, text=True)
    assert tags.stdout.split() == ["v2026.1"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=published.dest,
                            capture_output=True, text=True)
    assert status.stdout == ""
    with pytest.raises(PublishError, match="already has the tag 'v2026.1'.*new `ref`"):
        publish(published.dest, repository=REPOSITORY, ref="v2026.1", replace=True, git=True)
    assert (published.dest / "labs").is_dir(), "a refused publication must not touch the folder"


def test_the_placeholder_repository_is_refused_saying_what_to_set(tmp_path):
    with public_settings(repository=PLACEHOLDER_REPOSITORY):
        problem = public_repository_problem()
    assert problem and "course.toml" in problem and "[public]" in problem and "make labs" in problem
    result = run_cli("publish", str(tmp_path / "out"), "--repository", PLACEHOLDER_REPOSITORY + "/")
    assert result.returncode == 2
    assert "placeholder" in result.stderr and "repository" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_kits_own_settings_are_still_the_placeholder_so_release_warns():
    # The kit ships the placeholder on purpose: an instructor must set it.
    # `make labs` (the CLI's release) prints the same problem as a warning.
    assert public_repository_problem() is not None


def test_a_folder_with_other_files_is_never_cleared(tmp_path):
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "thesis.tex").write_text("precious")
    for replace in (False, True):
        with pytest.raises(PublishError, match="thesis.tex, which publish did not write"):
            publish(dest, repository=REPOSITORY, ref="v1", replace=replace)
    assert (dest / "thesis.tex").read_text() == "precious"


def test_an_earlier_publication_is_replaced_only_when_asked(tmp_path):
    dest = tmp_path / "repo"
    publish(dest, repository=REPOSITORY, ref="v1")
    (dest / "labs" / "stale.ipynb").write_text("{}")
    with pytest.raises(PublishError, match="--replace"):
        publish(dest, repository=REPOSITORY, ref="v2")
    publish(dest, repository=REPOSITORY, ref="v2", replace=True)
    assert not (dest / "labs" / "stale.ipynb").exists()
    assert "@v2#subdirectory" in (dest / "labs" / "lab1" / "lab1_attention.ipynb").read_text()


def test_publishing_into_the_kit_is_refused():
    with pytest.raises(PublishError, match="the kit itself"):
        publish(labs_module.KIT_ROOT, repository=REPOSITORY, ref="v1")


def test_a_leak_in_labkit_stops_the_publication(tmp_path, monkeypatch):
    kit = tmp_path / "kit"
    shutil.copytree(labs_module.KIT_ROOT / "student", kit / "student",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    lab = available_labs()[0]
    line = sorted(solution_lines(lab))[0]
    (kit / "student" / "labkit" / "answers.py").write_text(f"# kept for later\n{line}\n")
    monkeypatch.setattr(publish_module, "KIT_ROOT", kit)
    with pytest.raises(PublishError, match=r"labkit/answers.py: a line of lab1's solutions"):
        publish(tmp_path / "out", repository=REPOSITORY, ref="v1")
    assert not (tmp_path / "out" / "labs").exists()


def test_the_scanner_finds_markers_and_hidden_lines_in_a_notebook(tmp_path):
    lab = available_labs()[1]
    student = json.loads(lab.student_path.read_text())
    student["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                             "execution_count": None,
                             "source": "### BEGIN HIDDEN TESTS\nfrom autograder.references "
                                       "import lab2\n"})
    (tmp_path / "leaky.ipynb").write_text(json.dumps(student))
    (tmp_path / "clean.ipynb").write_text(lab.student_path.read_text())
    found = Scanner(available_labs()).tree_leaks(tmp_path)
    assert {leak.path for leak in found} == {"leaky.ipynb"}
    assert {"contains 'BEGIN HIDDEN TESTS'", "contains 'autograder.references'"} <= \
        {leak.what for leak in found}


def test_a_file_url_without_a_host_is_refused_since_pip_refuses_it(tmp_path):
    # pip: "Invalid requirement: 'labkit @ git+file:///...'" (seen in the Colab-path test).
    with pytest.raises(PublishError, match="file://localhost/<path>"):
        publish(tmp_path / "out", repository=f"file://{tmp_path}/repo", ref="v1")
