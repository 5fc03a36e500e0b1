"""The student kernel's resource limits and environment (autograder/kernels/isolation/).

The memory cap must stop a notebook that allocates without end on a CPU
machine (address space) and on a GPU machine (data segment, since CUDA
reserves address space the size of the GPU at start-up); both are run here
on a real process. The thread settings that --jobs gives each kernel must
reach it, and nothing else of the grader's environment may.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from autograder.grader import worker
from autograder.kernels import jupyter
from autograder.kernels.isolation import bubblewrap, common

BOMB = "b = bytearray(400 * 1024 * 1024); print('allocated', len(b))"
SMALL = "b = bytearray(20 * 1024 * 1024); print('allocated', len(b))"


def _run_limited(code: str, gpu: bool) -> subprocess.CompletedProcess:
    limits = common.Limits(memory_bytes=200 * 1024**2)
    prefix = common.rlimit_prefix(limits, gpu=gpu)
    return subprocess.run(prefix + [sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit (util-linux) is not installed")
@pytest.mark.parametrize("gpu", [False, True], ids=["cpu-address-space", "gpu-data-segment"])
def test_the_memory_cap_stops_a_memory_bomb_and_allows_ordinary_use(gpu):
    assert ("--data" if gpu else "--as") in " ".join(common.rlimit_prefix(common.Limits(), gpu=gpu))
    bomb = _run_limited(BOMB, gpu)
    assert bomb.returncode != 0 and "MemoryError" in bomb.stderr, (bomb.stdout, bomb.stderr)
    small = _run_limited(SMALL, gpu)
    assert small.returncode == 0 and "allocated" in small.stdout, small.stderr


def test_the_gpu_device_nodes_are_bound_into_the_sandbox(tmp_path, monkeypatch):
    fake = [tmp_path / "nvidia0", tmp_path / "nvidiactl"]
    monkeypatch.setattr(bubblewrap, "gpu_devices", lambda: fake)
    spec = common.SandboxSpec(scratch=tmp_path / "s", ipc_dir=tmp_path / "i")
    args = bubblewrap.bwrap_prefix(spec)
    for device in fake:
        at = args.index(str(device))
        assert args[at - 1] == "--dev-bind" and args[at + 1] == str(device)


def _private_environ(monkeypatch) -> None:
    """A copy of os.environ without thread settings, thrown away after the test."""
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if k not in common.THREAD_ENV})


def test_parallel_kernels_share_the_cores_and_the_instructor_setting_wins(monkeypatch, tmp_path):
    _private_environ(monkeypatch)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    os.environ["MKL_NUM_THREADS"] = "3"          # the instructor's own choice
    os.environ["GRADER_SECRET"] = "do-not-pass"
    worker.share_cores(4)
    env = common.kernel_environment(common.SandboxSpec(scratch=tmp_path, ipc_dir=tmp_path))
    assert env["OMP_NUM_THREADS"] == "2" and env["TF_NUM_INTRAOP_THREADS"] == "2"
    assert env["MKL_NUM_THREADS"] == "3"
    assert "GRADER_SECRET" not in env


def test_one_job_leaves_the_thread_settings_alone(monkeypatch):
    _private_environ(monkeypatch)
    worker.share_cores(1)
    assert not any(name in os.environ for name in common.THREAD_ENV)


def _sandboxed(tmp_path, code: str) -> subprocess.CompletedProcess:
    spec = common.SandboxSpec(scratch=tmp_path / "scratch", ipc_dir=tmp_path / "ipc")
    spec.scratch.mkdir()
    spec.ipc_dir.mkdir()
    return subprocess.run(bubblewrap.bwrap_prefix(spec) + [sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})


needs_bubblewrap = pytest.mark.skipif(not bubblewrap.bubblewrap_works(),
                                      reason="bubblewrap (bwrap) does not run here")


@needs_bubblewrap
def test_a_sandboxed_process_cannot_see_or_signal_the_grader_or_other_kernels(tmp_path):
    victim = subprocess.Popen(["sleep", "300"])
    try:
        result = _sandboxed(tmp_path, (
            "import os, signal\n"
            f"try:\n    os.kill({victim.pid}, signal.SIGKILL)\n    print('KILLED')\n"
            "except ProcessLookupError:\n    print('NOT FOUND')\n"
            f"print('GRADER VISIBLE' if os.path.exists('/proc/{os.getpid()}') else 'GRADER HIDDEN')\n"
            "print('PARENT', os.getppid())"))
        assert result.returncode == 0, result.stderr
        assert "NOT FOUND" in result.stdout and victim.poll() is None
        assert "GRADER HIDDEN" in result.stdout
        # Its parent is bubblewrap's init, pid 1 inside: why the kernel is told
        # not to poll its parent (a real kernel starts there in the CLI tests).
        assert "PARENT 1" in result.stdout
        assert "--IPKernelApp.parent_handle=0" in bubblewrap.SANDBOXED_KERNEL_ARGS
    finally:
        victim.kill()


@needs_bubblewrap
def test_what_a_sandboxed_process_leaves_running_dies_with_it(tmp_path):
    marker = "987.654"                        # a sleep no one else runs
    result = _sandboxed(tmp_path, (
        "import subprocess\n"
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print('LEFT A DAEMON')"))
    assert "LEFT A DAEMON" in result.stdout, result.stderr
    survivors = []
    for _ in range(20):
        survivors = [line for line in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                                     text=True).stdout.splitlines()
                     if line.strip() == f"sleep {marker}"]
        if not survivors:
            break
        time.sleep(0.1)
    assert not survivors, "a process started in the sandbox outlived it"


@needs_bubblewrap
def test_a_sandboxed_process_has_no_capabilities_and_cannot_make_python_writable(tmp_path):
    # Run by root, bubblewrap would leave the sandboxed process CAP_SYS_ADMIN:
    # it could remount the read-only Python installation writable and plant
    # code there that the grader's own kernels import (the hostile case
    # plants_code tries the same through the CLI).
    from tests.hostile.cases import PLANT, PLANTED

    planted = os.path.join(sys.prefix, PLANTED)
    try:
        result = _sandboxed(tmp_path, PLANT + "\nprint('CAPEFF', open('/proc/self/status')"
                                              ".read().split('CapEff:')[1].split()[0])")
        assert result.returncode == 0, result.stderr
        assert "CAPEFF 0000000000000000" in result.stdout, result.stdout
        assert not os.path.exists(planted)
    finally:
        if os.path.exists(planted):
            os.remove(planted)


class _ScriptedKernel(jupyter.ReadyKernelClient):
    """A ReadyKernelClient whose kernel is a script: it answers every
    kernel_info request on shell, and on IOPub only once its subscription is
    in place (from request number ``iopub_from``)."""

    def __init__(self, iopub_from: int = 1, answers: bool = True):
        super().__init__()
        self.iopub_from, self.answers = iopub_from, answers
        self.requests: list[str] = []
        self.shell_queue: list[dict] = []
        self.iopub_queue: list[dict] = []
        self.handled = None

    class _Channel:
        def __init__(self, queue):
            self.queue = queue

        async def get_msg(self, timeout=None):
            if self.queue:
                return self.queue.pop(0)
            from queue import Empty

            raise Empty

    @property
    def shell_channel(self):
        return self._Channel(self.shell_queue)

    @property
    def iopub_channel(self):
        return self._Channel(self.iopub_queue)

    def kernel_info(self):
        msg_id = f"request-{len(self.requests) + 1}"
        self.requests.append(msg_id)
        if self.answers:
            parent = {"msg_id": msg_id}
            self.shell_queue.append({"msg_type": "kernel_info_reply", "parent_header": parent,
                                     "content": {}})
            if len(self.requests) >= self.iopub_from:
                for state in ("busy", "idle"):
                    self.iopub_queue.append({"msg_type": "status", "parent_header": parent,
                                             "content": {"execution_state": state}})
        return msg_id

    async def _async_is_alive(self):
        return True

    def _handle_kernel_info_reply(self, msg):
        self.handled = msg["parent_header"]["msg_id"]


def test_a_kernel_is_ready_once_iopub_has_answered_and_not_before():
    import asyncio

    connected = _ScriptedKernel(iopub_from=1)
    asyncio.run(connected.wait_for_ready(timeout=5))
    assert connected.requests == ["request-1"] and connected.handled == "request-1"
    assert not connected.iopub_queue, "the idle status of the request was left unread"

    # IOPub's subscription is not in place for the first two requests: their
    # status messages are lost, so the client must ask again.
    late = _ScriptedKernel(iopub_from=3)
    asyncio.run(late.wait_for_ready(timeout=5))
    assert late.requests == ["request-1", "request-2", "request-3"]
    assert late.handled == "request-3"

    silent = _ScriptedKernel(answers=False)
    with pytest.raises(RuntimeError, match="didn't respond"):
        asyncio.run(silent.wait_for_ready(timeout=0))


def test_the_sandboxed_kernel_is_waited_for_by_the_prompt_client(tmp_path):
    import zmq

    km = jupyter.SandboxKernelManager(scratch=str(tmp_path / "s"), ipc_dir=str(tmp_path / "i"))
    client = km.client()
    assert isinstance(client, jupyter.ReadyKernelClient)
    # Its sockets retry a connection to a kernel not yet bound every 10 ms.
    socket = client.context.socket(zmq.DEALER)
    try:
        assert socket.getsockopt(zmq.RECONNECT_IVL) == jupyter.RECONNECT_MS < 100
    finally:
        socket.close(0)
        client.context.term()


@pytest.mark.skipif(os.geteuid() != 0, reason="the grader is an ordinary user: its kernels are it")
def test_each_grading_process_of_a_root_grader_has_a_kernel_user_of_its_own():
    code = ("from autograder.kernels.isolation import common; import sys\n"
            "print(common.kernel_user().uid, flush=True); sys.stdin.read()")
    own = common.kernel_user().uid
    holders = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        uids = [int(holder.stdout.readline()) for holder in holders]
    finally:
        for holder in holders:
            holder.stdin.close()
            holder.wait(timeout=30)
    assert len(set(uids + [own])) == 3
    assert all(uid in common.KERNEL_UIDS and uid != 0 for uid in uids)


def test_user_task_count_counts_this_process_threads_and_no_one_elses():
    # RLIMIT_NPROC is set above what the kernel's user already runs: a count
    # short of that would leave the kernel fewer processes than Limits says.
    import threading

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert common.user_task_count() >= threading.active_count() >= 2
    finally:
        stop.set()
        worker.join()
    unused = max(common.KERNEL_UIDS) + 1000
    assert common.user_task_count(unused) == 0
