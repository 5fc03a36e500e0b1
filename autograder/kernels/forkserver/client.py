"""The grading process's end of the fork server (autograder.kernels.forkserver.server).

`ForkServer` starts the fork server of this grading process (one per worker)
as a script, by the server module's path, with the kernels' environment and
the modules to import (`preload_for`): as the worker starts
(`ForkServer.prestart`, autograder.kernels.isolation.prestart_fork_server),
so that its imports overlap the worker's own set-up, or else on first use.
It keeps it while the settings stay the same, and asks it for one kernel per
submission, forked into that
submission's sandbox. After three failures in a process the grader starts
fresh kernels instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.kernels.forkserver import server
from autograder.kernels.forkserver.server import (KERNEL_START_PRELOAD, PER_SANDBOX, SANDBOX_WAIT_S,
                                         ForkError)

#: Environment variables that jupyter_client's launcher adds to each
#: kernel's (launch_kernel: the grading process's pid); each forked kernel
#: takes them from its own request, so they are no part of a fork server's
#: settings.
PER_LAUNCH = ("JPY_PARENT_PID",)

#: How long a fork server may take to import what it preloads.
READY_WAIT_S = 300

__all__ = ["ForkServer", "ForkError", "preload_for", "COMMON_PRELOAD", "KERNEL_START_PRELOAD",
           "BACKEND_PRELOAD"]

#: What the fork server imports before it forks, by Keras backend: the labs'
#: set-up cells import these. JAX starts threads at import and is not safe to
#: fork, so its kernels get only the backend-free part.
COMMON_PRELOAD = ("numpy", "matplotlib", "matplotlib.pyplot", "IPython", "ipykernel.kernelapp",
                  "ipykernel.ipkernel", "labkit", "labkit.datasets")
BACKEND_PRELOAD = {"tensorflow": ("tensorflow", "keras"), "torch": ("torch", "keras")}


def preload_for(backend: str | None) -> list[str] | None:
    """Modules to import before forking, or None where forking is not used."""
    backend = backend or "tensorflow"
    if backend == "jax":
        return list(COMMON_PRELOAD + KERNEL_START_PRELOAD)
    if backend not in BACKEND_PRELOAD:
        return None
    return list(COMMON_PRELOAD + KERNEL_START_PRELOAD) + list(BACKEND_PRELOAD[backend])


class ForkServer:
    """The fork server of this grading process (one per worker), started as
    the worker starts or on first use, with the kernels' environment, and
    kept while it stays the same."""

    _kept: "ForkServer | None" = None
    _failures = 0
    MAX_FAILURES = 3

    def __init__(self, env: dict, preload: list[str], wait: bool = True):
        self.key = self.key_for(env, preload)
        from autograder import tempdirs

        self.home = tempdirs.make_folder("labkit-forkserver-")
        env = dict(self.key[1], HOME=self.home, IPYTHONDIR=str(Path(self.home) / ".ipython"),
                   MPLCONFIGDIR=str(Path(self.home) / ".matplotlib"))
        self.process = subprocess.Popen(
            # Run as a script, by its path: the same code as this grader's,
            # whatever the working folder or the installed copy of the kit.
            [sys.executable, str(Path(server.__file__).resolve()), *preload],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=self.home, start_new_session=True, preexec_fn=_dies_with_us())
        self.ready = False
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait (once) for the server's imports to end; ForkError where it did
        not come up."""
        if self.ready:
            return
        line = self._read_line(READY_WAIT_S)
        if not line.get("ready"):
            self.close()
            raise ForkError(f"the fork server did not start: {line.get('error', line)}")
        self.ready = True

    @staticmethod
    def key_for(env: dict, preload: list[str]) -> tuple:
        """What a fork server is started with: the kernels' environment but
        for each sandbox's own folders and each launch's own variables
        (PER_LAUNCH), and the modules it imports."""
        shared = sorted((name, value) for name, value in env.items()
                        if name not in PER_SANDBOX and name not in PER_LAUNCH)
        return (sys.executable, tuple(shared), tuple(preload))

    def _read_line(self, timeout: float) -> dict:
        stdout = self.process.stdout
        assert stdout is not None   # Popen(stdout=PIPE)
        if not select.select([stdout], [], [], timeout)[0]:
            return {"error": f"no answer in {timeout:.0f} s"}
        line = stdout.readline()
        if not line:
            return {"error": f"it exited (code {self.process.poll()})"}
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            return {"error": f"an answer that is not the fork server's: {line[:200]!r}"}
        return answer

    def spawn(self, request: dict) -> None:
        """Fork a kernel into the sandbox of ``request["bwrap_pid"]``."""
        if self.process.poll() is not None:
            raise ForkError(f"the fork server exited (code {self.process.returncode})")
        assert self.process.stdin is not None   # Popen(stdin=PIPE)
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
        except OSError as error:
            raise ForkError(f"the fork server is gone ({error})") from error
        answer = self._read_line(SANDBOX_WAIT_S + 60)
        if not answer.get("ok"):
            raise ForkError(answer.get("error", "unknown error"))

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        assert self.process.stdin is not None   # Popen(stdin=PIPE)
        if not self.ready:
            # Still importing (a prestarted server not wanted after all, or
            # one that never came up): no kernel of it to wait for.
            self.process.kill()
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    @classmethod
    def get(cls, env: dict, preload: list[str]) -> "ForkServer | None":
        """The kept fork server for these settings, a new one, or None once it
        has failed too often in this process (fresh kernels from then on)."""
        if cls._failures >= cls.MAX_FAILURES:
            return None
        kept = cls._kept
        if kept is None or kept.key != cls.key_for(env, preload) or not kept.alive():
            cls.discard()
            try:
                kept = cls._kept = cls(env, preload, wait=False)
            except OSError:
                cls._failures += 1
                return None
        try:
            kept.wait_ready()
        except ForkError:
            cls._kept = None
            cls._failures += 1
            return None
        return kept

    @classmethod
    def prestart(cls, env: dict, preload: list[str]) -> None:
        """Start the fork server for these settings without waiting for it:
        it imports while the grading process sets itself up, and the first
        `get` with the same settings waits for what is left. ``env`` need
        not name a sandbox's own folders (PER_SANDBOX): the key leaves them
        out."""
        if cls._kept is not None or cls._failures >= cls.MAX_FAILURES:
            return
        try:
            cls._kept = cls(env, preload, wait=False)
        except OSError:
            cls._failures += 1

    @classmethod
    def failed(cls) -> None:
        """Count a failed spawn; the server is replaced on next use."""
        cls._failures += 1
        cls.discard()

    @classmethod
    def discard(cls) -> None:
        kept, cls._kept = cls._kept, None
        if kept is not None:
            kept.close()


def _dies_with_us():
    """What makes a fork server die with this grading process, however it
    ends (SIGKILL included: autograder.lifetime.die_with_parent, run in
    the child before it becomes the server). Only when started from the main
    thread, which lives as long as the process; from another one, the
    server ends when its stdin closes, as it does when this process dies."""
    import functools
    import threading

    from autograder import lifetime

    if threading.current_thread() is not threading.main_thread():
        return None
    return functools.partial(lifetime.die_with_parent, os.getpid())


atexit.register(ForkServer.discard)
