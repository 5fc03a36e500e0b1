"""The run's temporary folders (autograder/tempdirs.py).

Every temporary folder of a run lies in its run folder; a killed run's
folder is removed by the next run, a live run's never.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder import tempdirs
from tests.conftest import ROOT

#: Holds a run folder in TMPDIR, prints it, then waits for stdin to close
#: (as a grading run would, while alive).
HOLDER = ("from autograder import tempdirs; import sys\n"
          "print(tempdirs.run_folder(), flush=True)\n"
          "sys.stdin.read()\n")


@pytest.fixture
def short_tmp():
    """A temporary folder with a short path (the kernels' ipc sockets lie
    under it, and a Unix socket's path has at most 107 bytes)."""
    folder = tempfile.mkdtemp(prefix="lkt")
    yield Path(folder)
    subprocess.run(["rm", "-rf", folder], check=False)


def _env(tmp: Path) -> dict:
    env = {key: value for key, value in os.environ.items() if key != tempdirs.ENVIRONMENT}
    return dict(env, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))


def _holder(tmp: Path) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER], env=_env(tmp), cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return process, Path(process.stdout.readline().strip())


def test_a_live_runs_folder_stays_and_a_dead_runs_folder_goes(short_tmp):
    alive, alive_folder = _holder(short_tmp)
    dead, dead_folder = _holder(short_tmp)
    try:
        dead.kill()
        dead.wait()
        # One made by a process that died before it took its lock.
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip()
        unlocked = short_tmp / f"{tempdirs.PREFIX}{gone}-abcdefgh"
        unlocked.mkdir()
        assert sorted(tempdirs.remove_dead_runs(short_tmp)) == sorted([dead_folder, unlocked])
        assert alive_folder.is_dir() and not dead_folder.exists() and not unlocked.exists()
    finally:
        alive.stdin.close()
        alive.wait(timeout=30)


def test_the_workers_lock_keeps_a_run_whose_first_process_died(short_tmp):
    """A worker of the run (a child that joined its folder) keeps it alive."""
    code = ("import subprocess, sys\nfrom autograder import tempdirs\n"
            "folder = tempdirs.run_folder()\n"
            "child = subprocess.Popen([sys.executable, '-c', 'from autograder import tempdirs; "
            "import time; print(tempdirs.run_folder(), flush=True); time.sleep(600)'], "
            "stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)\n"
            "print(folder, child.stdout.readline().strip(), child.pid, flush=True)\n"
            "import os; os._exit(0)\n")
    first = subprocess.run([sys.executable, "-c", code], env=_env(short_tmp), cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    folder, joined, worker = first.stdout.split()
    try:
        assert folder == joined, "the worker made a folder of its own"
        assert tempdirs.remove_dead_runs(short_tmp) == []
        assert Path(folder).is_dir()
    finally:
        os.kill(int(worker), signal.SIGKILL)
    time.sleep(0.2)
    assert tempdirs.remove_dead_runs(short_tmp) == [Path(folder)]


@pytest.mark.slow
def test_a_killed_run_leaves_one_folder_that_the_next_run_removes(short_tmp, tmp_path):
    """SIGKILL to the CLI and its process group while a kernel runs: what is
    left lies in the run's folder, and the next run into the same OUT
    removes it; a run that ends normally leaves nothing."""
    batch, out = tmp_path / "batch", tmp_path / "out"
    batch.mkdir()
    notebook = nbformat.read(ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb",
                             as_version=4)
    notebook.cells.insert(1, nbformat.v4.new_code_cell("import time\ntime.sleep(60)"))
    nbformat.write(notebook, batch / "sleeper.ipynb")
    command = [sys.executable, "-m", "autograder", "grade", "lab1", str(batch), "--out", str(out),
               "--quiet", "--jobs", "1", "--cell-timeout", "3"]
    run = subprocess.Popen(command, env=_env(short_tmp), cwd=ROOT, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not list(short_tmp.glob(f"{tempdirs.PREFIX}*/lk-*/ipc/kernel-*")):
        assert run.poll() is None and time.monotonic() < deadline, "no kernel started"
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    left = [path.name for path in short_tmp.iterdir()]
    assert len(left) == 1 and left[0].startswith(f"{tempdirs.PREFIX}{run.pid}-"), left
    inside = {path.name.split("-")[0] for path in (short_tmp / left[0]).iterdir()}
    assert {"lk", "lock"} <= inside, inside

    # The next run, of a batch that needs no kernel (an empty file): quick.
    (batch / "sleeper.ipynb").unlink()
    (batch / "bob.ipynb").write_bytes(b"")
    again = subprocess.run(command, env=_env(short_tmp), cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "bob" in (out / "grades.csv").read_text()
    assert list(short_tmp.iterdir()) == []
