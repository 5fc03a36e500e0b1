"""A real one-node Slurm cluster on loopback, for tests (issue 22).

`one_node_slurm(tmp_path)` starts Debian's Slurm (packages slurmctld, slurmd,
slurm-client and munge; `make slurm` installs them when it can) inside a
temporary folder: a munge daemon with a freshly generated key on its own
socket, `slurmctld -D` and `slurmd -D` with a generated slurm.conf on free
loopback ports. It waits until `sinfo` shows the node idle, yields a
`SlurmCluster` (its `env` runs sbatch, squeue, scontrol ... against this
cluster alone), and stops every daemon it started afterwards.

Where Slurm cannot be used (programs not installed, not root, a daemon that
does not start) it raises `SlurmUnavailable`, whose message says why and ends
with the daemons' logs; tests turn it into `pytest.skip(reason)`.

What this relies on (Slurm 22.05, Debian bookworm; slurm.conf(5) and
munged(8)):
- The controller is `SlurmctldHost=localhost(127.0.0.1)` (slurmctld accepts
  "localhost" as its own name); the node is `NodeName=localhost
  NodeAddr=127.0.0.1` and slurmd is told its name with `-N localhost`, so the
  machine's host name plays no part. Ports are free loopback ports, so two
  test clusters (or a real Slurm) on one machine do not meet.
- `AuthInfo=socket=PATH` points auth/munge and cred/munge at our munged's
  socket; munged runs as root only with `--force`, and its own key file.
- No cgroups: `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`;
  no accounting daemon (`AccountingStorageType=accounting_storage/none`), so
  finished jobs are read with `scontrol show job` (kept `MinJobAge` seconds),
  not sacct.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel")
INSTALL_HINT = ("Debian/Ubuntu: apt-get install slurmctld slurmd slurm-client munge "
                "(`make slurm` does it when run as root)")
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be used here; the message says why (and holds the logs)."""


def missing_reason() -> str | None:
    """Why a one-node Slurm cannot be started here, or None when it can be tried."""
    absent = [name for name in PROGRAMS if shutil.which(name) is None
              and not Path("/usr/sbin", name).exists()]
    if absent:
        return f"Slurm is not installed (missing {', '.join(absent)}); {INSTALL_HINT}"
    if os.geteuid() != 0:
        return ("the test Slurm runs its daemons as root (SlurmUser=root) and this "
                "process is not root; run the Slurm tests as root")
    return None


def _program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _memory_mb() -> int:
    """The node's RealMemory: a little under MemTotal, since slurmd drains a node
    that claims more than it has."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return max(1, int(line.split()[1]) // 1024 - 256)
    return 1024


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"--- {path.name}: (none)"
    return f"--- {path.name} (last {lines} lines):\n" + "\n".join(text[-lines:])


@dataclass
class SlurmCluster:
    """A running one-node cluster: `env` is os.environ plus SLURM_CONF for it."""

    root: Path
    conf: Path
    env: dict[str, str]
    cpus: int
    startup_s: float = 0.0
    _daemons: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    @property
    def logs(self) -> str:
        """The tail of every daemon's log, for failure messages."""
        logs = sorted((self.root / "log").glob("*"))
        # A daemon's .out repeats its .log (-D also logs to stderr): show the
        # .out only where no .log was written (it failed before opening it).
        shown = [path for path in logs
                 if path.suffix == ".log" or not path.with_suffix(".log").exists()]
        return "\n".join(_tail(path) for path in shown)

    def run(self, *args: str, timeout: float = 60, check: bool = True,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm client command (sbatch, squeue, ...) against this cluster."""
        done = subprocess.run(list(args), env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: "
                               f"{done.stderr.strip()}\n{self.logs}")
        return done

    def sbatch(self, *args: str, cwd: Path | str | None = None) -> str:
        """Submit with `sbatch --parsable ARGS`; return the job id."""
        out = self.run("sbatch", "--parsable", *args, cwd=cwd).stdout.strip()
        return out.split(";")[0]

    def jobs(self, *job_ids: str) -> dict[str, str]:
        """The state of each job (array tasks as 'JOB_TASK'), from scontrol."""
        states: dict[str, str] = {}
        for job_id in job_ids:
            shown = self.run("scontrol", "-o", "show", "job", job_id, check=False)
            for line in shown.stdout.splitlines():
                fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
                if "ArrayTaskId" in fields and "ArrayJobId" in fields:
                    key = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
                else:
                    key = fields.get("JobId", job_id)
                states[key] = fields.get("JobState", "UNKNOWN")
        return states

    def wait(self, *job_ids: str, timeout: float = 120) -> dict[str, str]:
        """Wait until every task of these jobs has finished; return their states.

        Raises TimeoutError (with squeue's view and the logs) past `timeout`.
        """
        deadline = time.monotonic() + timeout
        while True:
            states = self.jobs(*job_ids)
            pending = [key for key, state in states.items() if state not in FINISHED]
            if states and not pending and not any("[" in key for key in states):
                return states
            if time.monotonic() > deadline:
                queue = self.run("squeue", "-a", check=False).stdout
                raise TimeoutError(f"jobs {', '.join(job_ids)} not finished after "
                                   f"{timeout:.0f} s: {states}\n{queue}\n{self.logs}")
            time.sleep(0.5)


def _write_conf(root: Path, munge_socket: Path, cpus: int) -> Path:
    conf = root / "slurm.conf"
    conf.write_text(f"""\
# One-node Slurm for the lab kit's tests (tests/slurm_cluster.py).
ClusterName=labkit
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd.pid'}
SlurmctldLogFile={root / 'log' / 'slurmctld.log'}
SlurmdLogFile={root / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# Start batch jobs at once, not up to 3 s later (the default): halves a test's wait.
SchedulerParameters=batch_sched_delay=0
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={_memory_mb()} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def _stop(daemons: dict[str, subprocess.Popen]) -> None:
    """Stop the daemons we started, newest first: SIGTERM, then SIGKILL."""
    for name in reversed(list(daemons)):
        process = daemons[name]
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@contextmanager
def one_node_slurm(tmp_path: Path, *, start_timeout: float = 60) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd under tmp_path; yield the cluster; stop them.

    Raises SlurmUnavailable (message: why, then the logs) where Slurm is not
    installed, we are not root, or the node is not idle within start_timeout.
    Jobs still queued when the block ends are cancelled before the daemons stop.
    """
    reason = missing_reason()
    if reason:
        raise SlurmUnavailable(reason)
    root = Path(tmp_path) / "slurm"
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    munge_socket = root / "munge" / "socket"
    cpus = len(os.sched_getaffinity(0))
    conf = _write_conf(root, munge_socket, cpus)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for variable in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_ARRAY_JOB_ID"):
        env.pop(variable, None)
    cluster = SlurmCluster(root=root, conf=conf, env=env, cpus=cpus)
    log = root / "log"
    commands = {
        "munged": [_program("munged"), "--foreground", "--force",
                   f"--socket={munge_socket}", f"--key-file={key}",
                   f"--log-file={log / 'munged.log'}", f"--pid-file={root / 'munge' / 'pid'}",
                   f"--seed-file={root / 'munge' / 'seed'}"],
        "slurmctld": [_program("slurmctld"), "-D", "-f", str(conf)],
        "slurmd": [_program("slurmd"), "-D", "-f", str(conf), "-N", "localhost"],
    }
    started = time.monotonic()
    try:
        for name, command in commands.items():
            with open(log / f"{name}.out", "wb") as out:
                cluster._daemons[name] = subprocess.Popen(
                    command, env=env, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True)
            if name == "munged":
                _wait_for(lambda: munge_socket.exists(), cluster, "munged's socket", start_timeout)
        _wait_for(lambda: _node_state(cluster) == "idle", cluster, "sinfo to show node localhost idle",
                  start_timeout)
        cluster.startup_s = time.monotonic() - started
        yield cluster
    finally:
        try:
            if "slurmctld" in cluster._daemons and cluster._daemons["slurmctld"].poll() is None:
                subprocess.run(["scancel", "--full", "--user", "root"], env=env,
                               capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            pass
        _stop(cluster._daemons)


def _node_state(cluster: SlurmCluster) -> str:
    try:
        shown = cluster.run("sinfo", "-h", "-N", "-n", "localhost", "-o", "%T",
                            timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return ""
    return shown.stdout.strip()


def _wait_for(ready, cluster: SlurmCluster, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [name for name, process in cluster._daemons.items() if process.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = (f"{', '.join(dead)} exited with status "
                   f"{', '.join(str(cluster._daemons[n].returncode) for n in dead)}"
                   if dead else f"still waiting for {what} after {timeout:.0f} s")
            raise SlurmUnavailable(f"the test Slurm did not start: {why}\n{cluster.logs}")
        time.sleep(0.2)
