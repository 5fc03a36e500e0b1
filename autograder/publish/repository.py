"""The student repository: what students open in Colab and install labkit from.

`python -m autograder publish DEST` (`make publish DEST=...`) writes it:

    README.md      the students' front page (student/README.md: Colab badges,
                   what to do, how to check, download and submit)
    LICENSE        the licence of the labs and labkit (student/LICENSE)
    labs/<lab>/    every lab's student notebook, released afresh
    student/       the labkit package (pip installs it from here)

and nothing else: the labs read no data files (labkit generates lab 5's dates
and ships its trained model). Every file is then decoded (any text encoding,
archives, notebooks' cells, outputs and attachments, text encoded in base64,
hex, base85, rot13 or reversed; autograder.publish.decode) and scanned for
what only the instructor holds (solutions, hidden tests, references,
stand-ins, compared as Python tokens: restyling hides nothing;
autograder.publish.leaks): a leak stops the publication. So
does a file the scanner cannot read (a JPEG, an unknown archive, an encrypted
zip), unless course.toml's ``[public] allow_binary`` lists it: globs relative
to the student repository, e.g. ``allow_binary = ["student/labkit/data/*.bin"]``
(the labs' HDF5 weights and PNG images are read, and need no listing).

The labs' first cell installs labkit from course.toml's ``[public]``
repository at its ``ref``; publishing refuses the placeholder repository the
kit ships with, since labs pointing at it fail in Colab. With ``git=True``
the folder becomes a git repository with one commit per publication and the
tag ``ref``, ready to push.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from autograder.publish.leaks import Leak, Scanner
from autograder.grader.release import release, update_readme
from autograder.labs import (KIT_ROOT, available_labs, colab_url, course_settings,
                             public_repository_problem, public_settings)

#: Build products and caches that never go into the student repository.
_IGNORED = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                  ".ipynb_checkpoints", ".pytest_cache")


class PublishError(ValueError):
    """Publishing cannot go on; the message says why and what to do."""


@dataclass
class Publication:
    dest: Path
    repository: str
    ref: str
    files: list[str] = field(default_factory=list)
    colab_urls: dict[str, str] = field(default_factory=dict)
    commit: str | None = None


#: What a publication holds at its top level (with .git): --replace clears a
#: folder of these only, never one that holds anything else.
PUBLISHED = {"README.md", "LICENSE", "labs", "student"}


def _prepare(dest: Path, replace: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise PublishError(f"{dest} is a file; publish writes a folder. Name a new or empty "
                           "folder (or a previous publication, with --replace).")
    dest.mkdir(parents=True, exist_ok=True)
    present = [entry for entry in dest.iterdir() if entry.name != ".git"]
    foreign = sorted(entry.name for entry in present if entry.name not in PUBLISHED)
    if foreign:
        raise PublishError(f"{dest} holds {', '.join(foreign[:5])}, which publish did not "
                           "write: the student repository holds only what publish writes. "
                           "Name a new or empty folder (or a previous publication).")
    if present and not replace:
        raise PublishError(f"{dest} holds an earlier publication; pass --replace to write "
                           "this one over it (its .git is kept), or name an empty folder.")
    for entry in present:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _git(dest: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=labkit publish", "-c", "user.email=publish@labkit.invalid",
         "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false",
         *args], cwd=dest, capture_output=True, text=True)
    if result.returncode:
        raise PublishError(f"git {' '.join(args)} failed in {dest}: "
                           f"{(result.stderr or result.stdout).strip()}")
    return result.stdout.strip()


def _check_git(dest: Path, ref: str) -> None:
    """Before anything is written: git is there and ``ref`` is a new tag."""
    if shutil.which("git") is None:
        raise PublishError("--git needs git, which is not installed: install it, or publish "
                           "without --git and commit the folder yourself.")
    if (dest / ".git").exists() and _git(dest, "tag", "--list", ref):
        raise PublishError(f"{dest} already has the tag {ref!r}: the labs of that tag are "
                           "what students installed. Set a new `ref` in course.toml's [public] "
                           "section (for example v0.2.0) and publish again.")


def _commit_and_tag(dest: Path, ref: str, title: str) -> str:
    if not (dest / ".git").exists():
        _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "--allow-empty", "-m", f"{title}: labs and labkit at {ref}")
    _git(dest, "tag", "-a", ref, "-m", f"{title} {ref}")
    return _git(dest, "rev-parse", "HEAD")


def allowed_binary(settings: dict) -> list[str]:
    """course.toml's ``[public] allow_binary``: globs of files publish may ship
    though the leak scanner cannot read them."""
    allow = settings.get("public", {}).get("allow_binary", [])
    if not isinstance(allow, list) or not all(isinstance(item, str) and item.strip()
                                              for item in allow):
        raise PublishError(f"course.toml: [public] allow_binary must be a list of paths or "
                           f"globs relative to the student repository (for example "
                           f'allow_binary = ["student/labkit/data/*.bin"]), got {allow!r}.')
    return allow


def _refusal(leaks: list[Leak]) -> str:
    """Why the publication stopped, what was expected, and what to do."""
    secret = [leak for leak in leaks if leak.kind != "unreadable"]
    unreadable = [leak for leak in leaks if leak.kind == "unreadable"]
    parts = []
    if secret:
        shown = "\n  ".join(str(leak) for leak in secret[:10])
        more = f"\n  ... and {len(secret) - 10} more" if len(secret) > 10 else ""
        parts.append(
            f"instructor-only code found in the student repository ({len(secret)} finding(s), "
            f"each: file [where in it]: what it matches, its first line):\n  {shown}{more}\n"
            "Expected: the labs as `make labs` releases them and labkit, with nothing of the "
            "solutions, hidden tests, references, stand-ins, samples or verdicts, however "
            "formatted, encoded or packed. Fix: keep solutions between ### BEGIN SOLUTION / "
            "### END SOLUTION and hidden tests between ### BEGIN HIDDEN TESTS / ### END "
            "HIDDEN TESTS in the lab's source and run `make labs`; clear the notebooks' "
            "outputs and attachments; remove the file (or the copied code) from student/ "
            "and nothing of autograder in student/.")
    if unreadable:
        shown = "\n  ".join(str(leak) for leak in unreadable[:10])
        more = f"\n  ... and {len(unreadable) - 10} more" if len(unreadable) > 10 else ""
        example = unreadable[0].path
        parts.append(
            f"file(s) the leak scanner cannot read, so cannot check ({len(unreadable)}):"
            f"\n  {shown}{more}\n"
            "Expected: text (any encoding), notebooks, archives it can open (gzip, bz2, xz, "
            "zip, tar), PNG images, HDF5 weights or NumPy arrays. Fix: remove the file from "
            "student/, or publish it in one of those formats; if it must ship as it is and "
            "you have checked it yourself, list it in course.toml's [public] section: "
            f'allow_binary = ["{example}"] (globs relative to the student repository).')
    return "The student repository was not published (labs/ removed).\n" + "\n".join(parts)


def publish(dest: Path, repository: str | None = None, ref: str | None = None,
            replace: bool = False, git: bool = False) -> Publication:
    """Write the student repository to ``dest`` (see the module's docstring)."""
    dest = Path(dest).resolve()
    if dest == KIT_ROOT.resolve() or KIT_ROOT.resolve().is_relative_to(dest) \
            or dest.is_relative_to(KIT_ROOT.resolve() / "solutions"):
        raise PublishError(f"{dest} is the kit itself (or holds it): publish writes the student "
                           "repository to a folder of its own, outside the kit.")
    with public_settings(repository=repository, ref=ref):
        problem = public_repository_problem()
        if problem:
            raise PublishError(problem)
        settings = course_settings()
        allow = allowed_binary(settings)
        labs = available_labs()
        if not labs:
            raise PublishError(f"no lab has a source under {KIT_ROOT / 'solutions'}: nothing "
                               "to publish.")
        student = KIT_ROOT / "student"
        for needed in ("pyproject.toml", "README.md", "LICENSE", "labkit"):
            if not (student / needed).exists():
                raise PublishError(f"{student / needed} is missing: the student repository "
                                   "needs labkit's package, its README and its LICENSE.")
        if git:
            _check_git(dest, settings["public"]["ref"])
        _prepare(dest, replace)
        publication = Publication(dest, settings["public"]["repository"],
                                  settings["public"]["ref"])
        for lab in labs:
            release(lab, dest / "labs" / lab.id / f"{lab.notebook}.ipynb")
            publication.colab_urls[lab.id] = colab_url(lab)
        shutil.copytree(student, dest / "student", ignore=_IGNORED)
        update_readme(dest / "student" / "README.md")
        shutil.copyfile(dest / "student" / "README.md", dest / "README.md")
        shutil.copyfile(student / "LICENSE", dest / "LICENSE")

    leaks = Scanner(labs).tree_leaks(dest, allow=allow)
    if leaks:
        shutil.rmtree(dest / "labs", ignore_errors=True)
        raise PublishError(_refusal(leaks))
    publication.files = sorted(str(path.relative_to(dest)) for path in dest.rglob("*")
                               if path.is_file() and ".git" not in path.relative_to(dest).parts)
    if git:
        publication.commit = _commit_and_tag(dest, publication.ref,
                                             settings.get("course", {}).get("title", "labs"))
    return publication
