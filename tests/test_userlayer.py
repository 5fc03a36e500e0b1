"""The user layer: student kernels isolated where bubblewrap cannot start (issue 30).

The ACL entries that deny one user alone, the plan that hides the kit but
the way to Python, the refusal to grade without isolation, and a class of
lab 1 graded through the CLI as root with bubblewrap hidden from PATH, and
with a bubblewrap that fails as it does in a container: the correct
notebook gets full marks, the probes reach nothing (tests/isolation.py).
The same class under a reproduced container: tests/test_container.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grader import acl, sandbox, userlayer
from tests import isolation
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the user layer needs root")

UID = 2_000_000_900


def _as_user(uid: int, code: str) -> subprocess.CompletedProcess:
    """Run Python ``code`` as user ``uid`` (and gid), no groups; the system
    Python, reachable by any user."""
    python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           python, "-c", code], capture_output=True, text=True, timeout=60)


def _can_list(uid: int, path: Path) -> bool:
    return _as_user(uid, f"import os; os.listdir({str(path)!r})").returncode == 0


@pytest.fixture
def open_folder(tmp_path):
    base = Path("/tmp") / f"labkit-acl-test-{os.getpid()}"
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_an_acl_entry_denies_one_user_and_no_one_else(open_folder):
    if not shutil.which("setpriv"):
        pytest.skip("util-linux's setpriv is missing")
    (open_folder / "inside").write_text("x")
    assert _can_list(UID, open_folder) and _can_list(UID + 1, open_folder)
    acl.set_user(open_folder, UID, 0)
    assert acl.user_access(open_folder, UID) == 0
    assert not _can_list(UID, open_folder)
    assert _can_list(UID + 1, open_folder), "another user lost access"
    assert stat.S_IMODE(open_folder.stat().st_mode) == 0o755
    assert acl.remove_user(open_folder, UID)
    assert _can_list(UID, open_folder)
    assert stat.S_IMODE(open_folder.stat().st_mode) == 0o755
    assert os.listxattr(open_folder) == [] or acl.XATTR not in os.listxattr(open_folder)


def test_passing_through_is_not_listing_and_the_group_keeps_its_bits(open_folder):
    if not shutil.which("setpriv"):
        pytest.skip("util-linux's setpriv is missing")
    open_folder.chmod(0o740)                      # others: nothing; group: read
    (open_folder / "file").write_text("readable")
    (open_folder / "file").chmod(0o644)
    acl.set_user(open_folder, UID, acl.SEARCH)
    assert stat.S_IMODE(open_folder.stat().st_mode) & 0o070 == 0o050   # the mask shows r-x
    assert acl.user_access(open_folder, UID) == acl.SEARCH
    assert not _can_list(UID, open_folder)
    assert _as_user(UID, f"print(open({str(open_folder / 'file')!r}).read())").stdout.strip() \
        == "readable"
    assert _as_user(UID + 1, f"open({str(open_folder / 'file')!r})").returncode != 0
    acl.remove_user(open_folder, UID)
    assert stat.S_IMODE(open_folder.stat().st_mode) == 0o740


def test_the_plan_hides_the_kit_but_the_way_to_python(tmp_path):
    kit = tmp_path / "kit"
    for folder in (".venv/bin", "student/labkit", "solutions/lab1", "autograder", "data"):
        (kit / folder).mkdir(parents=True)
    (kit / "student" / "README.md").write_text("x")
    (kit / "course.toml").write_text("x")
    out = tmp_path / "out"
    out.mkdir()
    entries = {str(path.relative_to(tmp_path)): perms for path, perms in userlayer.plan(
        [kit, out], [kit / ".venv", kit / "student" / "labkit"], UID).items()
        if tmp_path in path.parents}
    assert entries == {"kit": acl.SEARCH, "kit/student": acl.SEARCH, "kit/autograder": 0,
                       "kit/course.toml": 0, "kit/data": 0, "kit/solutions": 0,
                       "kit/student/README.md": 0, "out": 0}


def test_the_plan_refuses_to_hide_what_the_kernels_need(tmp_path):
    (tmp_path / "venv").mkdir()
    with pytest.raises(userlayer.LayerUnavailable, match="holds what the student kernels need"):
        userlayer.plan([tmp_path / "venv"], [tmp_path / "venv"], UID)


def test_no_isolation_is_refused_unless_the_instructor_says_so(monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap_problem", lambda: "is not installed (no bwrap)")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    with pytest.raises(sandbox.SandboxUnavailable) as refused:
        sandbox.choose_isolation([ROOT])
    message = str(refused.value)
    assert "bubblewrap is not installed" in message and "needs the grader to run as root" in \
        message and "--unsandboxed" in message
    chosen = sandbox.choose_isolation([ROOT], allow_unsandboxed=True)
    assert chosen.layer == "none" and "NONE (--unsandboxed)" in chosen.summary


def _path_without_bwrap(folder: Path, fake_bwrap: str | None = None) -> str:
    """A PATH with every command of this one but bwrap (or a fake one)."""
    folder.mkdir(parents=True, exist_ok=True)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = folder / name
            if name != "bwrap" and not os.path.lexists(target):
                target.symlink_to(Path(directory) / name)
    if fake_bwrap is not None:
        (folder / "bwrap").write_text(fake_bwrap)
        (folder / "bwrap").chmod(0o755)
    return f"{Path(sys.executable).parent}{os.pathsep}{folder}"


@pytest.mark.slow
def test_without_bubblewrap_the_class_is_graded_under_the_user_layer(tmp_path):
    """bwrap hidden from PATH: every notebook full marks, and the probes
    reached no course file, result, secret or grader process."""
    batch, out = tmp_path / "class", tmp_path / "out"
    isolation.write_class(batch, isolation.secret_paths(out, batch))
    touched = [ROOT, ROOT / "solutions", ROOT / "student",
               *Path(sys.base_prefix).resolve().parents]
    before = {path: acl.named_users(path) for path in touched}
    result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet", "--jobs", "2",
                     env={"PATH": _path_without_bwrap(tmp_path / "bin"),
                          "AUTOGRADER_TEST_SECRET": isolation.SECRET})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Isolation of the student kernels: a user of its own" in result.stderr
    assert "bubblewrap is not installed" in result.stderr
    assert isolation.check(out, network_isolated=userlayer.network_namespace_allowed()) == []
    assert isolation.daemons_left() == []
    assert not (out / "planted.txt").exists() and not (batch / "planted.txt").exists()
    # Whatever this test process holds itself, the run left no entry behind.
    assert {path: acl.named_users(path) for path in touched} == before


@pytest.mark.slow
def test_a_bubblewrap_that_fails_falls_back_to_the_user_layer(tmp_path):
    batch, out = tmp_path / "class", tmp_path / "out"
    batch.mkdir()
    shutil.copyfile(ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb",
                    batch / "alice.ipynb")
    failing = ("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not "
               "permitted' >&2\nexit 1\n")
    result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                     env={"PATH": _path_without_bwrap(tmp_path / "bin", failing)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Creating new namespace failed" in result.stderr
    row = isolation.grades(out)["alice"]
    assert (row["score"], row["status"]) == ("10", "graded")
    assert json.loads((out / "class.json").read_text())["isolation"]["layer"] == "user"


@pytest.mark.slow
def test_where_no_layer_holds_grade_refuses_and_unsandboxed_grades_with_a_note(tmp_path):
    """The user layer cannot hide a folder that holds labkit (here given as
    the earlier terms' solutions): without bubblewrap, grade refuses with
    exit 2 and says why; --unsandboxed grades, and every row says so."""
    batch, out = tmp_path / "class", tmp_path / "out"
    batch.mkdir()
    shutil.copyfile(ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb",
                    batch / "alice.ipynb")
    import labkit

    labkit_dir = str(Path(labkit.__file__).resolve().parent)
    env = {"PATH": _path_without_bwrap(tmp_path / "bin")}
    refused = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                      "--similar-to", labkit_dir, env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "No isolation for the student kernels" in refused.stderr
    assert "holds what the student kernels need" in refused.stderr
    assert "--unsandboxed" in refused.stderr
    assert not (out / "grades.csv").exists()
    graded = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                     "--similar-to", labkit_dir, "--unsandboxed", env=env)
    assert graded.returncode == 0, graded.stderr[-3000:]
    row = isolation.grades(out)["alice"]
    assert row["score"] == "10" and "graded WITHOUT isolation (--unsandboxed)" in row["notes"]
    assert json.loads((out / "class.json").read_text())["isolation"]["layer"] == "none"
    assert "NONE (--unsandboxed)" in (out / "report.html").read_text()
