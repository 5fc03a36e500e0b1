"""The first isolation layer: bubblewrap, each student kernel in namespaces of
its own (what it sees and does not: autograder.kernels.isolation).

`bwrap_prefix` is the command line that wraps a fresh kernel; a forked
kernel (autograder.kernels.forkserver) enters the same sandbox, set up
around a placeholder (`BubblewrapLayer.fork_prefix`).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from autograder.kernels.isolation.base import Isolation, Layer
from autograder.kernels.isolation.common import (KernelUser, SandboxSpec, become_prefix,
                                                 gpu_devices, python_paths)
from autograder.limits import BUBBLEWRAP_CHECK_TIMEOUT_S

#: System folders the kernel may read.
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/opt/conda")
#: Arguments of a kernel started inside the sandbox. ipykernel's parent
#: poller would take bubblewrap's init (pid 1 in the kernel's PID namespace)
#: for a dead parent and quit at once; --die-with-parent ties the kernel's
#: life to the grader instead. (An argument rather than bwrap's --unsetenv,
#: which older bubblewrap releases lack.)
SANDBOXED_KERNEL_ARGS = ["--IPKernelApp.parent_handle=0"]
#: The capabilities bubblewrap leaves the wrapper of a fresh kernel where the
#: grader is root: enough to hand the scratch folder over, change user and
#: empty the bounding set (forkserver.drop_privileges), then none.
BECOME_CAPS = ("CAP_CHOWN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


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
    bound = [path for path in python_paths() + [Path(p) for p in spec.readable]
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
        if any(_inside(path, Path(p)) for p in python_paths() + list(spec.readable)):
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


class BubblewrapLayer(Layer):
    """Namespaces of its own for each kernel (bwrap_prefix): the strongest
    layer, where bubblewrap starts."""

    name = "bubblewrap"
    title = "bubblewrap"
    fix = ("install bubblewrap where it can make namespaces (apt-get install bubblewrap; "
           "in a container, a seccomp profile that allows user namespaces)")
    forks_kernels = True
    kernel_arguments = tuple(SANDBOXED_KERNEL_ARGS)

    def problem(self) -> str:
        return bubblewrap_problem()

    def isolation(self, passed_over: list[str]) -> Isolation:
        kernel = ("a user of its own (uid from 2,000,000,000)" if os.geteuid() == 0
                  else "the grader's user, unprivileged")
        return Isolation(self.name, "bubblewrap: each student kernel in namespaces of its "
                         "own (no course files, no network, its own processes and /tmp), "
                         f"as {kernel}", (
                             "file system: the system, Python and labkit, read-only",
                             "network: none", "processes: its own only",
                             "limits: memory, processes, file size, open files, tmpfs sizes"))

    def command_prefix(self, spec: SandboxSpec, user: KernelUser | None) -> list[str]:
        become = become_prefix(user, spec.scratch)
        keep = BECOME_CAPS if user is not None else ()
        return bwrap_prefix(spec, keep) + become

    def fork_prefix(self, spec: SandboxSpec) -> list[str]:
        # bubblewrap sets the sandbox up around a placeholder; the kernel is
        # forked into it afterwards (SandboxKernelManager._async_launch_kernel),
        # with the same limits. The placeholder is the PID namespace's init
        # (--as-pid-1), which no process inside can kill: a notebook that
        # kills every process it sees would otherwise end its own sandbox.
        sandboxed = bwrap_prefix(spec)
        assert sandboxed[-1] == "--"
        return sandboxed[:-1] + ["--as-pid-1", "--"]
