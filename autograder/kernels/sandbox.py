"""The student's kernel, started inside a sandbox.

On Linux with bubblewrap (Debian/Ubuntu package `bubblewrap`), the kernel of
a submission sees a read-only system (/usr, /etc, the Python installation,
the kit's virtual environment and the student helpers) and nothing else of
this machine: not the course folder, the gradebook, solutions/, the
references, the submissions of other students or the output folder. It has
no network (`--unshare-net`), a private /tmp, a scratch working directory,
a minimal environment (no grader secrets such as a database URL), no
capabilities, and resource limits (address space, file size, processes)
set with setrlimit. Everything it can write is a tmpfs of a fixed size
(/tmp, /dev/shm, the scratch folder) but for its ipc folder.
It talks to the grader over ZeroMQ ipc sockets in a folder bound into the
sandbox, since loopback TCP is gone with the network.

It never runs as root: where the grader is root (a container, a CI runner)
the kernel runs as a user of its own (`kernel_user`), one uid for each
grading process, with no supplementary groups; where the grader is an
ordinary user, the kernel is that user.

Where bubblewrap is missing or cannot run (a container's default seccomp
profile) and the grader is root, each kernel runs as its own user with the
course denied to it by ACL entries instead (autograder.kernels.userlayer),
proved by a probe first; with neither, grading refuses to start unless the
instructor passes --unsandboxed. The layer is chosen once
(choose_isolation), printed, and kept in run.json, class.json, report.html
and every row's notes that is not bubblewrap's.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import multiprocessing.util
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from autograder.kernels.forkserver import client as forkserver_client
from autograder.kernels.forkserver import server as forkserver
from autograder.kernels import cgroups, userlayer
from autograder.limits import (BUBBLEWRAP_CHECK_TIMEOUT_S, KERNEL_FILE_SIZE_BYTES, KERNEL_MEMORY_BYTES, KERNEL_OPEN_FILES, KERNEL_PROCESSES,
                               SANDBOX_SCRATCH_BYTES, SANDBOX_SHM_BYTES, SANDBOX_TMP_BYTES)

#: System folders the kernel may read.
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/opt/conda")
#: How many threads the numerical libraries of a student kernel may use
#: (OpenMP for PyTorch and NumPy's BLAS, MKL, TensorFlow's op pools); set by
#: the grader when it runs several kernels at once (autograder.grader.worker.share_cores).
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
#: Arguments of a kernel started inside the sandbox. ipykernel's parent
#: poller would take bubblewrap's init (pid 1 in the kernel's PID namespace)
#: for a dead parent and quit at once; --die-with-parent ties the kernel's
#: life to the grader instead. (An argument rather than bwrap's --unsetenv,
#: which older bubblewrap releases lack.)
SANDBOXED_KERNEL_ARGS = ["--IPKernelApp.parent_handle=0"]
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
#: The capabilities bubblewrap leaves the wrapper of a fresh kernel where the
#: grader is root: enough to hand the scratch folder over, change user and
#: empty the bounding set (forkserver.drop_privileges), then none.
BECOME_CAPS = ("CAP_CHOWN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
#: The wrapper (``python -I -S -c BECOME OPTIONS COMMAND...``, OPTIONS a JSON
#: object of uid, gid, home, net and umask): a network namespace of its own
#: where asked (the user layer: autograder.kernels.userlayer; bubblewrap makes
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
#: The isolation layers, strongest first (Isolation.layer).
LAYERS = ("bubblewrap", "user", "none")


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


def bubblewrap_works() -> bool:
    """Whether `bwrap` exists here and can start a process with our options."""
    return not bubblewrap_problem()


@functools.lru_cache(maxsize=1)
def bubblewrap_problem() -> str:
    """Why bubblewrap cannot isolate the kernels here ("" where it can)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return "is not installed (no bwrap on PATH)"
    try:
        result = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--unshare-net", "--unshare-pid", "--die-with-parent", "true"],
            capture_output=True, timeout=BUBBLEWRAP_CHECK_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"could not be run ({type(error).__name__}: {error})"
    if result.returncode == 0:
        return ""
    said = result.stderr.decode(errors="replace").strip().splitlines()
    return (f"cannot start a sandbox here ({bwrap} exited with {result.returncode}: "
            f"{said[-1][:200] if said else 'no message'}; a container's default seccomp "
            f"profile denies the user namespaces it needs)")


class SandboxUnavailable(ValueError, RuntimeError):
    """No isolation layer can run here and the instructor did not pass
    ``--unsandboxed``: the message says what is missing and how to fix it."""


@dataclass(frozen=True)
class Isolation:
    """The isolation in force for this run's student kernels.

    ``layer``: "bubblewrap" (namespaces), "user" (a user of its own per
    kernel, where bubblewrap cannot start: containers) or "none" (only with
    the instructor's ``--unsandboxed``). ``summary``: one line for the
    terminal, report.html, class.json and Gradescope's output. ``details``:
    what holds and what does not, a line each.
    """

    layer: str
    summary: str
    details: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"layer": self.layer, "summary": self.summary, "details": list(self.details)}


#: The user layer's preparation in this process (prepare_user_layer): what it
#: was set up for, the ACL entries it wrote, or why it could not be.
#: The bound on each student kernel's CPU and processes in this grading
#: process (cgroups.detect, once) and the group of its kernels' groups
#: (made at the first kernel, removed at exit).
_cpu_bound: "cgroups.Bound | None" = None
_run_group: "cgroups.RunGroup | None" = None


def cpu_bound() -> cgroups.Bound:
    """What bounds a student kernel's CPU and processes here (a cgroup v2 or
    v1 of its own, or none: then a lower priority and RLIMIT_NPROC)."""
    global _cpu_bound
    if _cpu_bound is None:
        _cpu_bound = cgroups.detect()
    return _cpu_bound


def describe_cpu_bound(jobs: int) -> str:
    """The bound in force, as the run says it (with the isolation)."""
    bound = cpu_bound()
    cores = cgroups.kernel_cpu_cores(jobs) if bound.available else None
    return bound.describe(cores)


def _new_kernel_group(cpu_cores: float) -> "tuple[cgroups.KernelGroup | None, str]":
    """A cgroup for one kernel, or None and why not."""
    global _run_group
    bound = cpu_bound()
    if not bound.available:
        return None, bound.reason
    try:
        if _run_group is None:
            cgroups.remove_dead_runs(bound)
            _run_group = cgroups.RunGroup(bound)
            # At exit: a worker process of a pool ends through multiprocessing's
            # own exit function, which runs its finalizers, not atexit's.
            atexit.register(_close_run_group)
            multiprocessing.util.Finalize(None, _close_run_group, exitpriority=10)
        return _run_group.new_kernel_group(cpu_cores or None), ""
    except OSError as error:
        return None, f"its cgroup could not be made ({type(error).__name__}: {error})"


def _close_run_group() -> None:
    global _run_group
    if _run_group is not None:
        _run_group.close()
        _run_group = None


_prepared: "userlayer.Preparation | None" = None
_prepared_for: frozenset = frozenset()
_applied: list = []
_prepare_error: str = ""


def choose_isolation(protected=(), allow_unsandboxed: bool = False) -> Isolation:
    """The strongest isolation that works here, chosen once at start-up.

    bubblewrap where it starts; else, where the grader is root, a user of
    its own per kernel (autograder.kernels.userlayer), set up for
    ``protected`` (the course, OUT, submissions, the kit's sources, the
    instructor's files) and proved by a probe run as that user; else none,
    but only with the instructor's explicit ``allow_unsandboxed``.

    Raises:
        SandboxUnavailable: neither layer works and ``allow_unsandboxed`` is
            false; the message says what is missing and the fixes.
    """
    problem = bubblewrap_problem()
    if not problem:
        kernel = ("a user of its own (uid from 2,000,000,000)" if os.geteuid() == 0
                  else "the grader's user, unprivileged")
        return Isolation("bubblewrap", "bubblewrap: each student kernel in namespaces "
                               "of its own (no course files, no network, its own processes "
                               f"and /tmp), as {kernel}", (
                                   "file system: the system, Python and labkit, read-only",
                                   "network: none", "processes: its own only",
                                   "limits: memory, processes, file size, open files, "
                                   "tmpfs sizes"))
    reasons = [f"bubblewrap {problem}"]
    if os.geteuid() == 0:
        try:
            preparation = prepare_user_layer(protected)
        except userlayer.LayerUnavailable as error:
            reasons.append(f"a user of its own per kernel could not be set up: {error}")
        else:
            if preparation.network_isolated:
                network, network_detail = "none", "none (a network namespace of its own)"
            else:
                network = "NOT isolated"
                network_detail = ("NOT isolated: this container allows no new network "
                                  "namespace (deny it outside: a NetworkPolicy, a firewall)")
            return Isolation(
                "user", f"a user of its own per student kernel (bubblewrap {problem}); "
                        f"course files denied to it; network: {network}",
                tuple([f"network: {network_detail}"] + preparation.details))
    else:
        reasons.append("a user of its own per kernel needs the grader to run as root "
                       f"(it runs as uid {os.geteuid()})")
    if allow_unsandboxed:
        return Isolation(
            "none", "NONE (--unsandboxed): student notebooks run as the grader's user and "
                    "can read the hidden tests, references, seed and other students' files",
            tuple(reasons))
    raise SandboxUnavailable(
        "No isolation for the student kernels on this machine: "
        + "; ".join(reasons) + ". Fix one of them: install bubblewrap where it can make "
        "namespaces (apt-get install bubblewrap; in a container, a seccomp profile that "
        "allows user namespaces), or run the grader as root so that each kernel gets a "
        "user of its own. Or pass --unsandboxed to grade anyway, knowing that a notebook "
        "can then read the hidden tests and other students' files.")


def use_isolation(layer: str, protected=()) -> None:
    """In a grading worker: set up the layer the run chose (for the user
    layer, this worker's own kernel user and its ACL entries). A failure is
    kept and reported by every kernel start (user_layer_error). Which layer
    a kernel gets is the kernel manager's setting (SandboxKernelManager.isolation)."""
    global _prepare_error
    if layer not in LAYERS:
        raise ValueError(f"unknown isolation layer {layer!r}; one of {', '.join(LAYERS)}")
    if layer == "user":
        try:
            prepare_user_layer(protected)
        except userlayer.LayerUnavailable as error:
            _prepare_error = str(error)


def detected_isolation() -> str:
    """The strongest layer here, for kernels started outside a grading run
    (tests, tools): bubblewrap where it starts, else the user layer where
    the grader is root, else none."""
    if bubblewrap_works():
        return "bubblewrap"
    return "user" if os.geteuid() == 0 else "none"


def needed_paths() -> list[Path]:
    """What a student kernel must reach: Python, the venv, labkit, and the
    run's folder (its scratch and ipc folders are inside)."""
    from autograder.grader import tempdirs

    return _python_paths() + [tempdirs.run_folder()]


def prepare_user_layer(protected=()) -> "userlayer.Preparation":
    """Set the user layer up for this process's kernel user and prove it.

    Raises:
        userlayer.LayerUnavailable: it cannot hold here (why, and the fix).
    """
    global _prepared, _prepared_for, _applied
    from autograder.grader import tempdirs

    protected = [Path(p) for p in protected]
    asked = frozenset(str(p) for p in protected)
    if _prepared is not None and asked <= _prepared_for:
        return _prepared
    user = kernel_user()
    if user is None:
        raise userlayer.LayerUnavailable("the grader does not run as root")
    if _prepared is not None:
        # Asked again for more: set up for everything asked so far.
        protected = sorted({*protected, *map(Path, _prepared_for)})
        asked = frozenset(str(p) for p in protected)
        userlayer.undo(_applied, user.uid)
        _prepared = None
    entries = userlayer.plan(protected, needed_paths(), user.uid)
    # What a killed run's kernel of this user left; files any user may write
    # would carry one kernel's answers to the next.
    userlayer.clean_user(user.uid)
    entries.update({path: 0 for path in userlayer.shared_files(user.uid, entries)})
    done = _applied = userlayer.apply(entries, user.uid)
    network = userlayer.network_namespace_allowed()
    home = Path(tempdirs.make_folder("labkit-probe-", mode=0o711))
    try:
        become = prlimit_arguments(rlimits(Limits(), uid=user.uid)) + \
            become_prefix(user, home, net=network, umask=0o077)
        denied_paths = [path for path, perms in entries.items() if perms == 0]
        passable = [path for path in entries if path not in denied_paths
                    and any(path == guard.resolve() for guard in protected)]
        found = userlayer.probe(become, denied_paths, passable, [os.getpid(), os.getppid()])
    finally:
        userlayer.kill_user(user.uid)
        shutil.rmtree(home, ignore_errors=True)
    wrong = list(found.get("reached", []))
    if found.get("uid") != user.uid or found.get("groups"):
        wrong.append(f"ran as uid {found.get('uid')} with groups {found.get('groups')}")
    if found.get("labkit") is not True:
        wrong.append(f"cannot import labkit ({found.get('labkit')})")
    if network and found.get("interfaces") != ["lo"]:
        wrong.append(f"sees network interfaces {found.get('interfaces')}")
    if wrong:
        userlayer.undo(done, user.uid)
        raise userlayer.LayerUnavailable("the probe as the kernels' user could "
                                         + "; ".join(wrong[:5]))
    _prepared_for = asked
    _prepared = userlayer.Preparation(
        user.uid, network, [
            f"user: uid {user.uid}, gid {user.gid}, no supplementary groups, no capabilities",
            f"course files: {len(denied_paths)} paths denied to it by ACL, "
            f"{len(entries) - len(denied_paths)} "
            f"folders passable (not listable) on the way to Python and labkit; probed as "
            f"that user: {len(denied_paths) + len(passable)} paths unreadable and unwritable",
            *([f"closed to every other user while grading (no ACLs on their file system): "
               f"{', '.join(userlayer.closed())}"] if userlayer.closed() else []),
            "passable for it (not listable): " + ", ".join(
                str(path) for path, perms in entries.items() if perms),
            "limits: memory, processes, file size, open files (setrlimit)",
            "not isolated: the machine's world-readable files, the process list; /tmp and "
            "/dev/shm shared (limited per file, cleaned after each kernel)"])
    return _prepared


def user_layer_error() -> str:
    return _prepare_error


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


def _python_paths() -> list[Path]:
    """The interpreter's installation, the venv, and editable student helpers."""
    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    try:
        import labkit

        paths.add(Path(labkit.__file__).resolve().parent)
    except ImportError:
        pass
    return sorted(paths)


def bwrap_prefix(spec: SandboxSpec, keep_caps: tuple[str, ...] = ()) -> list[str]:
    """The bubblewrap command line that wraps the kernel command (where the
    grader is root, with no capabilities but ``keep_caps``).

    What the sandbox can write is sized: /tmp, /dev/shm and the scratch
    folder are tmpfs mounts of spec.limits' sizes (a tmpfs is sized to half
    the machine's memory unless told, and its files are held in memory
    outside the kernel's own memory cap), and the root and /dev, tmpfs
    mounts that bubblewrap makes, are made read-only once set up.
    """
    # A private /tmp first: the binds below may lie inside /tmp (a checkout
    # or a virtual environment there) and must stay visible on top of it.
    # Its own PID namespace: the notebook sees and can signal only its own
    # processes (not the grader, the test kernels or other students'
    # kernels, which run as the same user), and whatever it leaves running
    # (a daemon in a new session) dies with the kernel. (ipykernel must not
    # poll its parent there: see SANDBOXED_KERNEL_ARGS.)
    limits = spec.limits
    args = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc",
            "--unshare-pid", "--unshare-uts", "--hostname", "grader",
            "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    if os.geteuid() == 0:
        # Run by root (a container, a CI runner), bubblewrap keeps nearly
        # every capability for the sandboxed process: with CAP_SYS_ADMIN a
        # notebook could remount the read-only Python installation writable
        # and plant code that the grader's own processes then run. Without
        # capabilities it is an ordinary process that cannot remount.
        args += ["--cap-drop", "ALL"]
        for capability in keep_caps:
            args += ["--cap-add", capability]
    for system_path in SYSTEM_PATHS:
        if os.path.islink(system_path):
            args += ["--symlink", os.readlink(system_path), system_path]
        elif os.path.isdir(system_path):
            args += ["--ro-bind", system_path, system_path]
    bound = [path for path in _python_paths() + [Path(p) for p in spec.readable]
             if path.exists()]
    # The folders on the way to what is bound in: made by bubblewrap, run by
    # root, readable by root alone, which would shut out the kernel's user.
    for folder in _on_the_way(bound + [spec.scratch, spec.ipc_dir]):
        args += ["--perms", "0755", "--dir", str(folder)]
    for path in bound:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind-try", "/sys", "/sys", "--dev", "/dev", "--proc", "/proc",
             "--perms", "1777", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"]
    for device in gpu_devices():
        args += ["--dev-bind", str(device), str(device)]
    for path in spec.hidden:
        if any(_inside(path, Path(p)) for p in _python_paths() + list(spec.readable)):
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    args += ["--perms", "0700", "--size", str(limits.scratch_bytes),
             "--tmpfs", str(spec.scratch),
             "--bind", str(spec.ipc_dir), str(spec.ipc_dir),
             "--remount-ro", "/dev", "--remount-ro", "/",
             "--chdir", str(spec.scratch), "--"]
    return args


def _on_the_way(paths: list[Path]) -> list[Path]:
    """The folders above ``paths`` that the sandbox's own root holds (not
    those inside a system folder bound in), parents first."""
    mounted = [Path(p) for p in SYSTEM_PATHS + ("/dev", "/proc", "/sys")]
    folders = {parent for path in paths for parent in Path(path).parents
               if parent != Path("/") and parent != Path("/tmp")
               and not any(parent == top or top in parent.parents for top in mounted)}
    return sorted(folders, key=lambda folder: (len(folder.parts), str(folder)))


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False


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
            # layer shares the machine's: userlayer.clean_user).
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


def prestart_fork_server(layer: str) -> None:
    """In a grading worker whose student kernels are forked (bubblewrap,
    a backend the fork server knows): start the fork server now, so that it
    imports TensorFlow while the worker sets itself up; the first kernel
    start waits for what is left. It is the server the kernels would start
    (the same key: the kernels' environment but for each sandbox's own
    folders); where it is not (settings changed since), it is replaced."""
    if layer != "bubblewrap":
        return
    env = kernel_environment(SandboxSpec(scratch=Path("/nonexistent"),
                                         ipc_dir=Path("/nonexistent")))
    preload = forkserver_client.preload_for(env.get("KERAS_BACKEND"))
    if preload is not None:
        forkserver_client.ForkServer.prestart(env, preload)
