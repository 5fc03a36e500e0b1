"""Grade into a real PostgreSQL gradebook (`--db postgresql+psycopg://...`).

The test starts its own server on loopback from Debian's package (`make
test` installs it when it can) in a temporary folder, grades two samples
into it, and checks that nbgrader's gradebook there holds the same scores
as the default SQLite gradebook of the same run. Skipped, saying why, where
PostgreSQL's server programs are not installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from autograder.labs import LABS
from tests.conftest import ROOT, gradebook_scores, run_cli

pytestmark = pytest.mark.slow

LAB = LABS["lab1"]


def _server_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url(tmp_path_factory):
    bindir = _server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL's server is not installed (Debian: apt-get install "
                    "postgresql; `make test` installs it when run as root)")
    data = tmp_path_factory.mktemp("pgdata")
    run_as: list[str] = []
    if os.geteuid() == 0:
        # The server refuses to run as root: run it as Debian's postgres user.
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        run_as = ["runuser", "-u", "postgres", "--"]
        shutil.chown(data, "postgres")
        for parent in list(data.parents)[:3]:
            os.chmod(parent, os.stat(parent).st_mode | 0o711)
    port = _free_port()

    def pg(*args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([*run_as, *args], capture_output=True, text=True,
                              timeout=120, **kwargs)

    made = pg(str(bindir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "grader")
    assert made.returncode == 0, made.stderr
    started = pg(str(bindir / "pg_ctl"), "-D", str(data / "db"), "-l", str(data / "log"),
                 "-w", "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start")
    assert started.returncode == 0, started.stderr + (data / "log").read_text()
    try:
        deadline = time.monotonic() + 30
        while True:
            created = pg(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port),
                         "-U", "grader", "gradebook")
            if created.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert created.returncode == 0, created.stderr
        yield f"postgresql+psycopg://grader@127.0.0.1:{port}/gradebook"
    finally:
        pg(str(bindir / "pg_ctl"), "-D", str(data / "db"), "-m", "fast", "stop")


def test_grading_into_postgresql_matches_sqlite(tmp_path, postgres_url):
    batch = tmp_path / "in"
    batch.mkdir()
    for name in ("alice", "carol"):
        shutil.copy(ROOT / "data" / "sample_submissions" / "lab1" / f"{name}.ipynb", batch)
    outs = {"sqlite": tmp_path / "sqlite", "postgres": tmp_path / "postgres"}
    for kind, out in outs.items():
        extra = ["--db", postgres_url] if kind == "postgres" else []
        result = run_cli("grade", "lab1", str(batch), "--out", str(out), "--quiet",
                         "--seed", "pg", "--jobs", "2", *extra)
        assert result.returncode == 0, result.stderr[-2000:]
    assert (outs["sqlite"] / "grades.csv").read_text() == (outs["postgres"] / "grades.csv").read_text()
    in_postgres = gradebook_scores(postgres_url, LAB)
    in_sqlite = gradebook_scores(f"sqlite:///{outs['sqlite'] / 'nbgrader' / 'gradebook.db'}", LAB)
    assert {student for student, _ in in_postgres} == {"alice", "carol"}
    assert in_postgres == in_sqlite
    assert sum(score for (student, _), score in in_postgres.items() if student == "alice") == 10
    # The password-free URL is recorded; no gradebook file was made beside it.
    assert not (outs["postgres"] / "nbgrader" / "gradebook.db").exists()
    assert "127.0.0.1" in (outs["postgres"] / "run.json").read_text()
