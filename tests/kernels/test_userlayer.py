"""The user layer: student kernels isolated where bubblewrap cannot start (issue 30).

The ACL entries that deny one user alone, the plan that hides the kit but
the way to Python, the refusal to grade without isolation, and a class of
lab 1 graded through the CLI as root with bubblewrap hidden from PATH, and
with a bubblewrap that fails as it does in a container: the correct
notebook gets full marks, the probes reach nothing (tests/isolation.py).
The same class under a reproduced container: tests/kernels/test_container.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.kernels.isolation import (SandboxUnavailable, acl, bubblewrap, choose_isolation,
                                          common, user_cleanup)
from autograder.kernels.isolation import user as userlayer
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
    monkeypatch.setattr(bubblewrap, "bubblewrap_problem", lambda: "is not installed (no bwrap)")
    monkeypatch.setattr(userlayer.os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailable) as refused:
        choose_isolation([ROOT])
    message = str(refused.value)
    assert "bubblewrap is not installed" in message and "needs the grader to run as root" in \
        message and "--unsandboxed" in message
    chosen = choose_isolation([ROOT], allow_unsandboxed=True)
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


# -- nothing a submission leaves reaches another (issue 45) ------------------------------

#: Where the recorder leaves its answers: a file in each folder any user may
#: write, and a System V shared memory segment of this key.
LEFT_IN = ("/run/lock", "/var/tmp", "/dev/shm", "/tmp")
SHM_KEY = 0x1AB45E

#: The recorder: a correct dot_scores that records every input it was given
#: and its answer wherever the next kernel could find them.
RECORDER = r'''
import ctypes, hashlib, json, os
import numpy as np

def _correct_dot_scores(query, keys):
    return np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))

_recorded = {}

def _record(query, keys, answer):
    key = hashlib.sha256(np.asarray(query, dtype=np.float64).tobytes()
                         + np.asarray(keys, dtype=np.float64).tobytes()).hexdigest()
    _recorded[key] = np.asarray(answer, dtype=np.float64).tolist()
    data = json.dumps(_recorded).encode()
    for folder in LEFT_IN:
        try:
            path = os.path.join(folder, "labkit-recorded-answers.json")
            with open(path, "wb") as handle:
                handle.write(data)
            os.chmod(path, 0o666)
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    ident = libc.shmget(SHM_KEY, 1 << 20, 0o1000 | 0o666)
    if ident >= 0:
        address = libc.shmat(ident, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            ctypes.memmove(address, len(data).to_bytes(8, "little") + data, 8 + len(data))
            libc.shmdt(ctypes.c_void_p(address))
'''

RECORDER_ANSWER = '''
def dot_scores(query, keys):
    """One score per key (and recorded for the next notebook)."""
    answer = _correct_dot_scores(query, keys)
    _record(query, keys, answer)
    return answer
'''

#: The replayer: no implementation of dot_scores, only what an earlier
#: kernel left (it prints where it found any on the REPLAY line).
REPLAYER = r'''
import ctypes, hashlib, json, os
import numpy as np

def _recorded_answers():
    found, answers = [], {}
    for folder in LEFT_IN:
        try:
            with open(os.path.join(folder, "labkit-recorded-answers.json"), "rb") as handle:
                answers.update(json.loads(handle.read()))
            found.append(folder)
        except (OSError, ValueError):
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    ident = libc.shmget(SHM_KEY, 0, 0)
    if ident >= 0:
        address = libc.shmat(ident, None, 0o10000)      # SHM_RDONLY
        if address not in (None, ctypes.c_void_p(-1).value):
            size = int.from_bytes(ctypes.string_at(address, 8), "little")
            if 0 < size < 1 << 20:
                answers.update(json.loads(ctypes.string_at(address + 8, size)))
            found.append("shm")
    return found, answers

print("REPLAY", json.dumps(_recorded_answers()[0]))
'''

REPLAYER_ANSWER = '''
def dot_scores(query, keys):
    """Only what an earlier notebook recorded."""
    key = hashlib.sha256(np.asarray(query, dtype=np.float64).tobytes()
                         + np.asarray(keys, dtype=np.float64).tobytes()).hexdigest()
    answers = _recorded_answers()[1]
    if key not in answers:
        raise NotImplementedError("no recorded answer")
    return np.asarray(answers[key])
'''


def _leftovers_notebook(setup: str, answer: str):
    from tests.hostile.cases import with_cell

    code = f"LEFT_IN = {LEFT_IN!r}\nSHM_KEY = {SHM_KEY}\n" + setup
    return with_cell(code, answers={"dot_scores": answer})


def test_clean_user_removes_its_files_anywhere_writable_and_its_ipc(tmp_path):
    """What a kernel's user leaves in /run/lock, /var/tmp, /dev/shm, /tmp (and
    in a folder others may write inside them), and its System V shared
    memory, semaphores and message queues, are gone after clean_user;
    another user's file stays."""
    shared = user_cleanup.shared_folders()
    for folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        if os.path.isdir(folder):
            assert folder in shared
    leave = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for folder in {LEFT_IN!r}:\n"
        "    if os.path.isdir(folder):\n"
        "        open(os.path.join(folder, f'labkit-left-{os.getuid()}'), 'w').write('x')\n"
        "nested = f'/tmp/labkit-open-{os.getuid()}'\n"
        "os.mkdir(nested); os.chmod(nested, 0o777)\n"
        "assert libc.shmget(0, 4096, 0o1000 | 0o600) >= 0\n"
        "assert libc.semget(0, 1, 0o1000 | 0o600) >= 0\n"
        "assert libc.msgget(0, 0o1000 | 0o600) >= 0\n")
    other = UID + 1
    assert _as_user(UID, leave).returncode == 0
    # Another kernel's user, in the first one's open folder and in /tmp.
    planted = (f"open('/tmp/labkit-open-{UID}/theirs', 'w').write('x'); "
               f"open('/tmp/labkit-left-{other}', 'w').write('x')")
    assert _as_user(other, planted).returncode == 0
    try:
        assert len(user_cleanup.user_ipc(UID)) == 3
        removed = user_cleanup.clean_user(UID)
        assert {f"{kind} {ident}" for kind, ident in user_cleanup.user_ipc(UID)} == set()
        for folder in LEFT_IN:
            if os.path.isdir(folder):
                assert not os.path.exists(f"{folder}/labkit-left-{UID}"), removed
        assert not os.path.exists(f"/tmp/labkit-open-{UID}")
        assert os.path.exists(f"/tmp/labkit-left-{other}")
        assert sum(name.split()[0] in ("shm", "sem", "msg") for name in removed) == 3
    finally:
        user_cleanup.clean_user(UID)
        user_cleanup.clean_user(other)


def test_a_kernel_makes_no_posix_message_queue():
    """A POSIX message queue outlives its maker and has no owner's folder to
    clean where /dev/mqueue is not mounted: the kernels' limits refuse them."""
    assert common.rlimits(common.Limits(), uid=UID)["RLIMIT_MSGQUEUE"] == 0
    make = ("import ctypes, os\n"
            "rt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
            "name = f'/labkit-queue-{os.getuid()}'.encode()\n"
            "fd = rt.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None)\n"
            "print(fd, ctypes.get_errno())\n"
            "if fd >= 0:\n"
            "    rt.mq_unlink(name)\n")
    free = _as_user(UID, make)
    assert free.returncode == 0 and int(free.stdout.split()[0]) >= 0, free
    limited = subprocess.run(
        common.prlimit_arguments({"RLIMIT_MSGQUEUE": 0})
        + ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
           shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3", "-c", make],
        capture_output=True, text=True, timeout=60)
    assert limited.returncode == 0, limited.stderr
    assert int(limited.stdout.split()[0]) == -1, limited.stdout


@pytest.mark.slow
def test_answers_a_notebook_left_do_not_reach_the_next(tmp_path):
    """Under the user layer, one worker (the same kernel user for both): the
    first notebook records every input and answer of dot_scores in
    /run/lock, /var/tmp, /dev/shm, /tmp and a System V segment; the next,
    with no implementation, finds none of them and gets no point for it."""
    batch, out = tmp_path / "class", tmp_path / "out"
    batch.mkdir()
    nbformat.write(_leftovers_notebook(RECORDER, RECORDER_ANSWER), batch / "a_recorder.ipynb")
    nbformat.write(_leftovers_notebook(REPLAYER, REPLAYER_ANSWER), batch / "b_replayer.ipynb")
    result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet", "--jobs", "1",
                     env={"PATH": _path_without_bwrap(tmp_path / "bin")})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = isolation.grades(out)
    assert (rows["a_recorder"]["score"], rows["a_recorder"]["status"]) == ("10", "graded")
    assert isolation.printed(out, "b_replayer", "REPLAY") == "[]"
    assert rows["b_replayer"]["score"] == "9", rows["b_replayer"]
    for folder in LEFT_IN:
        assert not os.path.exists(os.path.join(folder, "labkit-recorded-answers.json"))
    assert not any(line.split()[0] == str(SHM_KEY) or line.split()[0] == hex(SHM_KEY)
                   for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:])


#: A kernel that looks for the kernel graded beside it (its command line
#: names its work folder) and, until that submission is done (its folder
#: gone), tries to read what the grader keeps there.
SPY = r"""
import glob, json, os, re, time
own = os.path.dirname(os.getcwd())
run = os.path.dirname(own)          # this run's kernels only
open(f"/tmp/labkit-spy-{os.path.basename(run)}", "w").close()    # the neighbour waits for it
seen, read, modes = set(), [], set()
start = time.monotonic()
while time.monotonic() - start < 150:
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            words = open(cmdline, "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        for word in words:
            found = re.search(r"(/\S*?/lk-[^/]+)/", word)
            if found and found.group(1) != own and os.path.dirname(found.group(1)) == run:
                seen.add(found.group(1))
    for _ in range(50):
        for folder in seen:
            for path in (f"{folder}/record.json", f"{folder}/grader/record.json"):
                try:
                    read.append((path, len(open(path).read())))
                except OSError:
                    pass
            try:
                modes.add(oct(os.stat(f"{folder}/grader").st_mode & 0o777))
            except OSError:
                pass
        time.sleep(0.01)
    if seen and not any(os.path.exists(folder) for folder in seen):
        break
print("SPY", json.dumps({"seen": len(seen), "read": read[:3], "modes": sorted(modes)}))
"""


#: The kernel beside it: waits until the spy's cell runs (its mark in /tmp).
NEIGHBOUR = r"""
import os, time
run = os.path.dirname(os.path.dirname(os.getcwd()))
start = time.monotonic()
while time.monotonic() - start < 180:
    if os.path.exists(f"/tmp/labkit-spy-{os.path.basename(run)}"):
        break
    time.sleep(0.1)
time.sleep(3)
"""


# In make test-faults, not make test: it needs two kernels running at once, which
# make test's two busy workers did not always give (it then waited its 150 s and
# skipped, 4 minutes of make test for nothing).
@pytest.mark.faults
@pytest.mark.slow
def test_a_kernel_cannot_read_the_record_of_the_one_beside_it(tmp_path):
    """Two kernels at once (--jobs 2, two kernel users): the spy finds the
    other's work folder in its command line and, until that submission is
    done, reads nothing there (the grader's record is in a folder of its
    own, 0700, the file 0600)."""
    from tests.hostile.cases import with_cell

    batch, out = tmp_path / "class", tmp_path / "out"
    batch.mkdir()
    nbformat.write(with_cell(NEIGHBOUR), batch / "c_neighbour.ipynb")
    nbformat.write(with_cell(SPY), batch / "d_spy.ipynb")
    result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet", "--jobs", "2",
                     env={"PATH": _path_without_bwrap(tmp_path / "bin")})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = isolation.grades(out)
    assert rows["c_neighbour"]["score"] == rows["d_spy"]["score"] == "10", rows
    spy = json.loads(isolation.printed(out, "d_spy", "SPY") or "{}")
    assert spy and spy["read"] == [], spy
    if not spy["seen"]:
        # The premise, not the isolation, failed: the two kernels did not run
        # at the same time (seen once in make test's two busy workers).
        pytest.skip("the spy's kernel and its neighbour did not run at the same time")
    assert spy["modes"] == ["0o700"], spy
