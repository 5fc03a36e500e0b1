"""What the isolation layers share (autograder.kernels.isolation): a student
kernel's folders and limits (SandboxSpec, Limits), its resource limits
(rlimits, through prlimit), its environment, and the user it runs as
(kernel_user; become_prefix, the wrapper that makes a fresh kernel that user).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from autograder.kernels.forkserver import server as forkserver
from autograder.limits import (KERNEL_FILE_SIZE_BYTES, KERNEL_MEMORY_BYTES, KERNEL_OPEN_FILES,
                               KERNEL_PROCESSES, SANDBOX_SCRATCH_BYTES, SANDBOX_SHM_BYTES,
                               SANDBOX_TMP_BYTES)

#: How many threads the numerical libraries of a student kernel may use
#: (OpenMP for PyTorch and NumPy's BLAS, MKL, TensorFlow's op pools); set by
#: the grader when it runs several kernels at once (autograder.grader.worker.share_cores).
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
#: Environment variables passed through from the grader (nothing else is).
PASSTHROUGH_ENV = ("LANG", "LC_ALL", "KERAS_BACKEND", "CUDA_VISIBLE_DEVICES",
                   "XLA_PYTHON_CLIENT_PREALLOCATE", "TZ") + THREAD_ENV
#: The users (uid, and gid of the same number) of student kernels where the
#: grader is root, one for each grading process (kernel_user). They lie above
#: every range that accounts, systemd's dynamic users and container id
#: ranges take (systemd ends the last at 1879048191): no file of this machine
#: belongs to them, and RLIMIT_NPROC, counted per user, counts the processes
#: of one kernel.
KERNEL_UIDS = range(2_000_000_000, 2_000_001_000)
#: The wrapper (``python -I -S -c BECOME OPTIONS COMMAND...``, OPTIONS a JSON
#: object of uid, gid, home, net and umask): a network namespace of its own
#: where asked (the user layer: autograder.kernels.isolation.user; bubblewrap makes
#: its own), the umask, the same drop_privileges as a forked kernel's, then
#: the kernel.
BECOME = (inspect.getsource(forkserver.drop_privileges)
          + "\nimport json, os, sys\n"
          "options = json.loads(sys.argv[1])\n"
          "if options.get('net'):\n"
          "    import ctypes\n"
          "    libc = ctypes.CDLL(None, use_errno=True)\n"
          "    if libc.unshare(0x40000000) != 0:\n"
          "        raise OSError(ctypes.get_errno(), 'unshare(CLONE_NEWNET) failed')\n"
          "if 'umask' in options:\n"
          "    os.umask(options['umask'])\n"
          "drop_privileges([options['uid'], options['gid'], options['home']])\n"
          "os.execv(sys.argv[2], sys.argv[2:])\n")


@dataclass
class Limits:
    """Resource limits of one student kernel (each default and why it is
    that value: autograder.limits)."""

    memory_bytes: int = KERNEL_MEMORY_BYTES
    file_size_bytes: int = KERNEL_FILE_SIZE_BYTES
    #: Processes and threads the kernel may start beyond those its user
    #: already runs (RLIMIT_NPROC counts every one of the user's).
    processes: int = KERNEL_PROCESSES
    open_files: int = KERNEL_OPEN_FILES
    #: Sizes of the sandbox's tmpfs mounts: the file systems it can write
    #: (but for its ipc folder), held in the machine's memory.
    tmp_bytes: int = SANDBOX_TMP_BYTES
    scratch_bytes: int = SANDBOX_SCRATCH_BYTES
    shm_bytes: int = SANDBOX_SHM_BYTES


@dataclass
class SandboxSpec:
    """What one student kernel may see.

    Attributes:
        scratch: writable working directory (also HOME) of the kernel.
        ipc_dir: writable folder holding the ZeroMQ sockets and the
            exchange files of the test kernel.
        hidden: folders to hide even if they lie inside a readable path.
        readable: extra folders the kernel may read.
    """

    scratch: Path
    ipc_dir: Path
    hidden: list[Path] = field(default_factory=list)
    readable: list[Path] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class KernelUser:
    """The user a student kernel runs as (where the grader is root)."""

    uid: int
    gid: int


#: The socket that holds this process's claim on its kernel user.
_claim: socket.socket | None = None


@functools.lru_cache(maxsize=1)
def kernel_user() -> KernelUser | None:
    """The user of this grading process's student kernels: None where the
    grader is an ordinary user (the kernel is that user, unprivileged
    already); where it is root, a uid of KERNEL_UIDS that no other grading
    process of this machine holds.

    Run as root, a kernel would own /etc/shadow and every file of root's
    (bubblewrap's --cap-drop only takes its capabilities), and RLIMIT_NPROC
    would not hold. The claim is an abstract Unix socket named after the
    uid, bound while this process lives: the kernel of one process (each
    grading worker runs one student kernel at a time) is alone with its uid.
    """
    global _claim
    if os.geteuid() != 0:
        return None
    for uid in KERNEL_UIDS:
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            claim.bind(f"\0labkit-kernel-user-{uid}")
        except OSError:
            claim.close()
            continue
        _claim = claim
        return KernelUser(uid, uid)
    raise RuntimeError(f"every kernel user ({KERNEL_UIDS.start} to {KERNEL_UIDS.stop - 1}) is "
                       "taken by another grading process of this machine; wait for some to end")


def become_prefix(user: KernelUser | None, home: Path, net: bool = False,
                  umask: int | None = None) -> list[str]:
    """The wrapper in front of a fresh kernel that makes it ``user`` (owner
    of ``home``), with a network namespace of its own if ``net``, or nothing
    where it runs as the grader's user."""
    if user is None:
        return []
    options = {"uid": user.uid, "gid": user.gid, "home": str(home), "net": net}
    if umask is not None:
        options["umask"] = umask
    return [sys.executable, "-I", "-S", "-c", BECOME, json.dumps(options)]


def python_paths() -> list[Path]:
    """The interpreter's installation, the venv, and editable student helpers."""
    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    try:
        import labkit

        paths.add(Path(labkit.__file__).resolve().parent)
    except ImportError:
        pass
    return sorted(paths)


def gpu_devices() -> list[Path]:
    """The NVIDIA device nodes of this machine (bound into the sandbox)."""
    return sorted(Path("/dev").glob("nvidia*"))


def rlimit_prefix(limits: Limits, gpu: bool | None = None, uid: int | None = None) -> list[str]:
    """`prlimit` in front of the kernel command (util-linux), where it exists.

    Memory is capped by address space (RLIMIT_AS) on a CPU machine. Where
    the kernel can see a GPU it is capped by data segment (RLIMIT_DATA:
    private writable memory, which is what a memory bomb allocates) instead:
    CUDA's driver reserves address space the size of the GPU's memory and
    more at start-up, and fails to initialise under any RLIMIT_AS that
    would still stop a runaway notebook.
    """
    return prlimit_arguments(rlimits(limits, gpu, uid))


def prlimit_arguments(values: dict[str, int]) -> list[str]:
    """`prlimit` with the given limits (by `resource` module name), or
    nothing where util-linux's prlimit is missing."""
    prlimit = shutil.which("prlimit")
    if not prlimit:
        return []
    return [prlimit] + [f"--{name[len('RLIMIT_'):].lower()}={value}"
                        for name, value in values.items()]


def rlimits(limits: Limits, gpu: bool | None = None, uid: int | None = None) -> dict[str, int]:
    """The resource limits of a student kernel of user ``uid`` (default:
    this process's), by `resource` module name (see rlimit_prefix for the
    choice of memory limit)."""
    if gpu is None:
        gpu = bool(gpu_devices())
    return {"RLIMIT_DATA" if gpu else "RLIMIT_AS": limits.memory_bytes,
            "RLIMIT_FSIZE": limits.file_size_bytes,
            "RLIMIT_NPROC": limits.processes + user_task_count(uid),
            "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0,
            # No POSIX message queue (one outlives its maker, and the user
            # layer shares the machine's: user_cleanup.clean_user).
            "RLIMIT_MSGQUEUE": 0}


def user_task_count(uid: int | None = None) -> int:
    """Processes and threads user ``uid`` (default: this process's) runs
    now: what RLIMIT_NPROC counts (by real user id)."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for process in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = process.info["uids"], process.info["num_threads"]
        if uids is not None and uids.real == uid:
            count += threads or 0
    return count


def kernel_environment(spec: SandboxSpec) -> dict[str, str]:
    """The whole environment of the student kernel."""
    env = {name: os.environ[name] for name in PASSTHROUGH_ENV if name in os.environ}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin",
                              "/usr/bin", "/bin"]),
        HOME=str(spec.scratch),
        IPYTHONDIR=str(spec.scratch / ".ipython"),
        MPLCONFIGDIR=str(spec.scratch / ".matplotlib"),
        MPLBACKEND="Agg",
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        TF_CPP_MIN_LOG_LEVEL="3",
        JPY_SESSION_NAME="",
    )
    env.setdefault("LANG", "C.UTF-8")
    return env
