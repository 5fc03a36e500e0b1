"""Every override of jupyter_client's and ZeroMQ's internals, in one file.

This is the module the `jupyter-client` pin in pyproject.toml protects: only
here does the kit name jupyter_client's private attributes
(tests/test_project.py holds the rule). On an upgrade of jupyter_client,
read this file against the new release, or grade with `--plain` meanwhile.

* `ReadyKernelClient`: a kernel client whose wait for a new kernel ends when
  the kernel is ready, not 0.2 s later.
* `SandboxKernelManager`: the kernel manager that starts a student's kernel
  behind the run's isolation layer (autograder.kernels.isolation), forked from
  the fork server where it can be (autograder.kernels.forkserver).
* `StudentOutputChannel` and `BoundedKernelClient`: the grader's client of a
  student's kernel, with every message it reads capped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from queue import Empty

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.session import DELIM
from traitlets import Bool, Dict, Float, List, Type, Unicode
from zmq.utils.monitor import parse_monitor_message

from autograder import cputime, limits
from autograder.kernels import cgroups
from autograder.kernels.forkserver import client as forkserver_client
from autograder.kernels.forkserver import server as forkserver
from autograder.kernels.isolation import Layer, layer_for
from autograder.kernels.isolation.common import (Limits, SandboxSpec, kernel_environment,
                                                 kernel_user, prlimit_arguments, rlimits)
from autograder.limits import KERNEL_FALLBACK_NICE, KERNEL_TASKS


#: How often a kernel client retries to connect to a kernel's socket that is
#: not bound yet (ZeroMQ's default: 100 ms), and how long it waits for IOPub
#: to answer before it asks the kernel again.
RECONNECT_MS = 10
IOPUB_WAIT_S = 0.05
#: How often the grader looks whether a stopping kernel has ended.
STOP_POLL_S = 0.005


class ReadyKernelClient(AsyncKernelClient):
    """jupyter_client's client, with a wait for the kernel that ends when the
    kernel is ready rather than 0.2 s later.

    jupyter_client's wait_for_ready, after the kernel_info reply, reads IOPub
    until nothing has come for 0.2 s: every kernel start paid those 0.2 s
    (a share of a submission's time: docs/performance.md). This one reads
    IOPub until the kernel's "idle" status for the answered request, which
    also proves that IOPub is connected. As there, a kernel that sends nothing
    on IOPub after its reply is asked again (a subscription not yet in place
    loses messages), here after 0.05 s; and the client's sockets retry a
    connection every 10 ms instead of ZeroMQ's 100 ms.
    """

    def _context_default(self):
        # ZeroMQ retries a connection to a socket not yet bound every 100 ms
        # by default; the kernel binds its sockets a moment after the client
        # connects, so waiting 100 ms costs up to 100 ms a kernel start.
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
        return context

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                if await self._iopub_answers(reply["parent_header"].get("msg_id")):
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _iopub_answers(self, msg_id: str | None) -> bool:
        """Read IOPub up to the idle status of request ``msg_id``; whether
        anything came at all."""
        heard = False
        while True:
            try:
                message = await self.iopub_channel.get_msg(timeout=IOPUB_WAIT_S)
            except Empty:
                return heard
            heard = True
            if (message["msg_type"] == "status"
                    and message["content"].get("execution_state") == "idle"
                    and message["parent_header"].get("msg_id") == msg_id):
                return True


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager that starts the kernel inside the sandbox.

    Configured with the folders of one submission; uses the ipc transport
    so that the kernel needs no network.
    """

    scratch = Unicode("", help="Writable working folder of the kernel.").tag(config=True)
    ipc_dir = Unicode("", help="Folder for the kernel's sockets.").tag(config=True)
    hidden = List(Unicode(), help="Folders hidden from the kernel.").tag(config=True)
    readable = List(Unicode(), help="Extra folders the kernel may read.").tag(config=True)
    limits = Dict(help="Overrides of isolation.common.Limits fields.").tag(config=True)
    isolation = Unicode("", help="The isolation layer of the kernels (a name of "
                        "isolation.LAYERS), as the run chose it (isolation.choose_isolation); "
                        "empty: the strongest here (isolation.detected_isolation)."
                        ).tag(config=True)
    cpu_cores = Float(0.0, help="The CPU a kernel may use at most, in cores, where it gets a "
                      "cgroup of its own (cgroups.groups.kernel_cpu_cores: the cores over the "
                      "run's jobs); 0: no quota, equal shares only.").tag(config=True)
    fork_kernels = Bool(True, help="Fork the kernel, its libraries already imported, from the "
                        "grading process's fork server into the sandbox (autograder.kernels.forkserver.server) "
                        "instead of starting a fresh Python.").tag(config=True)

    client_factory = Type(klass=ReadyKernelClient, config=True)

    #: Whether the running kernel was forked (else it was started fresh).
    forked = False
    #: The running kernel's cgroup (None: none here; cgroups.cpu_bound says why).
    cgroup: "cgroups.groups.KernelGroup | None" = None
    #: Where its cgroup counts the CPU its processes used ("" without one).
    cpu_usage_file = ""
    #: How often the kernel's processes hit the cgroup's task limit (read
    #: as the kernel is cleaned up).
    pids_limit_hits = 0
    #: What bounded the kernel's CPU and processes, in words.
    cpu_bound_words = ""

    def _spec(self) -> SandboxSpec:
        return SandboxSpec(
            scratch=Path(self.scratch), ipc_dir=Path(self.ipc_dir),
            hidden=[Path(p) for p in self.hidden],
            readable=[Path(p) for p in self.readable],
            limits=Limits(**self.limits),
        )

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        spec = self._spec()
        if not self.scratch or not self.ipc_dir:
            raise ValueError("SandboxKernelManager needs `scratch` and `ipc_dir`.")
        spec.scratch.mkdir(parents=True, exist_ok=True)
        spec.ipc_dir.mkdir(parents=True, exist_ok=True)
        self._fork_argv = None
        self._fresh_command = None
        self.transport = "ipc"
        self.ip = str(spec.ipc_dir / "kernel")
        self.connection_file = str(spec.ipc_dir / "kernel.json")

    def format_kernel_cmd(self, extra_arguments=None):
        command = super().format_kernel_cmd(extra_arguments)
        spec = self._spec()
        self._fork_argv = None
        user = kernel_user()
        # One scan of /proc (the task count in RLIMIT_NPROC) serves both the
        # prlimit prefix and the forked kernel's own limits.
        values = rlimits(spec.limits, uid=None if user is None else user.uid)
        limited = self._cpu_prefix() + prlimit_arguments(values)
        layer = self.layer()
        layer.check_setup()
        self._fresh_command = (limited + layer.command_prefix(spec, user) + command
                               + list(layer.kernel_arguments))
        if not (layer.forks_kernels and self._can_fork(command)):
            return self._fresh_command
        # The layer sets the sandbox up around the fork server's placeholder;
        # the kernel is forked into it afterwards (_async_launch_kernel), with
        # the same limits.
        self._fork_argv = command[3:] + list(layer.kernel_arguments)
        self._fork_limits = values
        self._fork_user = None if user is None else [user.uid, user.gid]
        return (limited + layer.fork_prefix(spec)
                + forkserver.PLACEHOLDER + [str(self._lifeline())])

    def layer(self) -> Layer:
        """The isolation layer of this manager's kernels."""
        return layer_for(self.isolation)

    def _cpu_prefix(self) -> list[str]:
        """The kernel's cgroup, made now (the previous kernel's removed), and
        the command prefix that starts the kernel in it; where there is none,
        a lower priority instead (nice), so that the grader itself stays
        responsive beside a notebook's runaway processes."""
        self._remove_cgroup()
        group, why = cgroups.new_kernel_group(self.cpu_cores)
        self.cgroup, self._fork_cgroup, self._fork_nice = group, None, None
        if group is not None:
            try:
                self.cpu_usage_file = str(group.usage_file())
            except FileNotFoundError:
                self.cpu_usage_file = ""     # the clock sums the process tree instead
            self._fork_cgroup = group.procs_paths()
            cores = f"{self.cpu_cores:g} cores" if self.cpu_cores else "equal shares"
            self.cpu_bound_words = (f"cgroup {group.kind}: {cores}, "
                                    f"{KERNEL_TASKS} tasks at most")
            return group.join_command_prefix()
        self.cpu_usage_file = ""
        self._fork_nice = KERNEL_FALLBACK_NICE
        self.cpu_bound_words = f"no cgroup ({why}): nice {KERNEL_FALLBACK_NICE}"
        nice = shutil.which("nice")
        return [nice, "-n", str(KERNEL_FALLBACK_NICE)] if nice else []

    def _remove_cgroup(self) -> None:
        """Read the kernel's cgroup's task-limit hits, then remove it (every
        process left in it killed first: a daemon the notebook started)."""
        if self.cgroup is not None:
            try:
                self.pids_limit_hits = self.cgroup.pids_limit_hits()
            except (OSError, ValueError):
                pass
            self.cgroup.remove()
            self.cgroup = None

    def cpu_clock(self) -> cputime.Clock | None:
        """The CPU seconds the running kernel's processes have used (all of
        them: its cgroup's count where it has one, else its process tree and,
        where its layer says so (the user layer), every process of its user);
        None before it starts."""
        pid = getattr(self.provisioner, "pid", None)
        if pid is None:
            return None
        user = self.layer().clock_user(kernel_user())
        return cputime.Clock(pid, None if user is None else user.uid,
                             getattr(self, "cpu_usage_file", ""))

    def exit_words(self) -> str:
        """How the kernel's process ended ("killed by signal 9 (SIGKILL...)",
        "exited with status 1"), as its starter read it; "" while it runs or
        when not known. A forked kernel's status is its sandbox's: the
        placeholder passes it on (forkserver.server.PLACEHOLDER_SOURCE)."""
        process = getattr(self.provisioner, "process", None)
        returncode = process.poll() if process is not None else None
        status = cputime.status_from_returncode(returncode)
        return "" if status is None else cputime.describe_status(status)

    def _lifeline(self) -> Path:
        return Path(self.ipc_dir) / "lifeline"

    def _can_fork(self, command: list[str]) -> bool:
        """A kernel of this very Python, launched the usual way, and a backend
        the fork server knows."""
        return (self.fork_kernels and len(command) > 3
                and command[1:3] == ["-m", "ipykernel_launcher"]
                and os.path.realpath(command[0]) == os.path.realpath(sys.executable)
                and forkserver_client.preload_for(os.environ.get("KERAS_BACKEND")) is not None)

    def _hand_over(self) -> None:
        """Make what the kernel must write its user's: the ipc folder (its
        sockets), the exchange folder (the tests' answers) and the
        connection file (which jupyter_client wrote, readable by its owner
        only). The scratch folder is handed over inside the sandbox."""
        ipc = Path(self.ipc_dir)
        (ipc / "exchange").mkdir(exist_ok=True)
        # What the test kernel checks before it uses the folder: the one made
        # here, before any student code ran (autograder.kernels.probe.StudentKernel).
        made = os.stat(ipc / "exchange", follow_symlinks=False)
        self.exchange_identity = (made.st_dev, made.st_ino)
        user = kernel_user()
        if user is None:
            return
        for path in (ipc, ipc / "exchange", Path(self.connection_file)):
            os.chown(path, user.uid, user.gid)
        # Others may pass through (not list): the placeholder of a forked
        # kernel, root without capabilities, opens the lifeline in it.
        ipc.chmod(0o711)
        (ipc / "exchange").chmod(0o700)

    def _reap_user(self) -> None:
        """End what a kernel of this manager's user left, as its layer does
        (Layer.after_kernel; the user layer: every process of the kernel's
        user, its files in the folders any user may write and its System V
        IPC, so that a daemon, a planted file or segment of one submission
        never meets the next: isolation.user_cleanup.clean_user)."""
        self.layer().after_kernel(kernel_user())

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        self.forked = False
        self._reap_user()
        self._hand_over()
        if self._fork_argv is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        lifeline = self._lifeline()
        lifeline.unlink(missing_ok=True)
        os.mkfifo(lifeline, 0o600)
        await super()._async_launch_kernel(kernel_cmd, **kw)
        env = kw.get("env") or {}
        preload = forkserver_client.preload_for(env.get("KERAS_BACKEND"))
        server = forkserver_client.ForkServer.get(env, preload)
        try:
            if server is None:
                raise forkserver.ForkError("the fork server could not be started")
            import ipykernel_launcher

            server.spawn({
                "bwrap_pid": self.provisioner.pid, "lifeline": str(lifeline),
                "scratch": str(self.scratch), "env": env, "argv": self._fork_argv,
                "launcher": ipykernel_launcher.__file__,
                "limits": self._fork_limits, "user": self._fork_user,
                "cgroup": self._fork_cgroup, "nice": self._fork_nice,
            })
            self.forked = True
        except forkserver.ForkError as error:
            # A fresh kernel instead, in a new sandbox: grading goes on.
            self.log.warning("Starting a fresh kernel: the forked one failed (%s).", error)
            if server is not None:
                forkserver_client.ForkServer.failed()
            await self.provisioner.kill()
            await self.provisioner.wait()
            lifeline.unlink(missing_ok=True)
            await super()._async_launch_kernel(self._fresh_command, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self._remove_cgroup()
        self._reap_user()

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        # jupyter_client polls a stopping kernel every 0.1 s; a sandbox is
        # gone within milliseconds of its kill, so those 0.1 s were waiting
        # for nothing at the end of every submission.
        while await self._async_is_alive():
            await asyncio.sleep(min(pollinterval, STOP_POLL_S))

    async def interrupt_kernel(self):
        """Interrupt by message, not by signal.

        A SIGINT to the kernel's process group would also reach bubblewrap,
        which exits on it and takes the kernel with it (--die-with-parent).
        An interrupt_request on the control channel reaches the kernel only.
        """
        message = self.session.msg("interrupt_request", content={})
        self._connect_control_socket()
        self.session.send(self._control_socket, message)

    async def start_kernel(self, **kw):
        # AsyncKernelManager.start_kernel is the base class's function object,
        # so the override must be of start_kernel itself.
        spec = self._spec()
        kw["env"] = kernel_environment(spec)
        self.layer().environment(spec, kw["env"])
        kw["cwd"] = str(spec.scratch)
        # The kernel's own file descriptors 1 and 2 would be the grader's
        # terminal: TensorFlow's C++ start-up logs, or a notebook's
        # os.write(2, ...), would reach the instructor. What the notebook
        # prints through Python reaches the grader as iopub messages anyway.
        kw["stdout"] = subprocess.DEVNULL
        kw["stderr"] = subprocess.DEVNULL
        return await self._async_start_kernel(**kw)


#: Messages that steer nbclient rather than carry output: kept when small
#: (limits.MAX_STATUS_MESSAGE_BYTES), outside the output caps.
CONTROL_MESSAGES = frozenset({"status", "execute_input", "clear_output"})

#: Kept messages the grader reads ahead of nbclient, at most (see
#: limits.OUTPUT_MESSAGES_QUEUED); past them, ZeroMQ's queue holds the rest.
READ_AHEAD = 1000

#: How long a client waits for its output connection to be back (after a
#: reset) before a cell's request goes out.
RECONNECT_WAIT_S = 1.0


def output_socket(context):
    """A socket for a student kernel's IOPub, not yet connected: what
    jupyter_client's connect_iopub makes (the context's defaults, a linger
    of 1 s; the kit's kernels use no CURVE keys), with the caps that bound
    what ZeroMQ holds (limits.MAX_OUTPUT_MESSAGE_BYTES, OUTPUT_MESSAGES_QUEUED)."""
    socket = context.socket(zmq.SUB)
    socket.linger = 1000
    socket.setsockopt(zmq.MAXMSGSIZE, limits.MAX_OUTPUT_MESSAGE_BYTES)
    socket.setsockopt(zmq.RCVHWM, limits.OUTPUT_MESSAGES_QUEUED)
    return socket


class StudentOutputChannel(AsyncZMQSocketChannel):
    """The grader's IOPub channel from the student's kernel, with a bound.

    nbclient reads every message the kernel publishes and appends the
    outputs to the notebook, whatever their size. Here each message is
    weighed before it is decoded (its parts' sizes on the wire) and only
    the headers of a dropped one are read:

    * outputs of the cell running (``start_cell``) are kept up to
      limits.MAX_CELL_OUTPUT_BYTES a cell and MAX_NOTEBOOK_OUTPUT_BYTES a
      notebook; the rest is counted and dropped (``end_cell`` says how much);
    * outputs of anything else (a thread still printing after its cell, or
      during the hidden tests) are dropped: nbclient would ignore them;
    * status and the like pass when small, as nbclient needs them.

    ZeroMQ itself holds at most limits.OUTPUT_MESSAGES_QUEUED messages of
    parts up to limits.MAX_OUTPUT_MESSAGE_BYTES (output_socket; past them it
    stops reading, and the kernel's side queues, then drops). A larger part
    resets the connection unread, and ZeroMQ does not connect again: this
    channel watches for it (a monitor socket) and replaces the socket (a
    disconnect and connect of the same socket made libzmq abort, `!_more` in
    fq.cpp, when a message was half read), and the cell's note says a
    message was too large. What is read is read ahead of nbclient (up to
    READ_AHEAD kept messages), so that ZeroMQ's queue stays short.

    Not bounded here: the number of parts of one message (ZeroMQ assembles
    a message whole, each part under the cap: print and display send 7 or
    so, but a notebook could send thousands of buffers through its kernel's
    session), and the kernel's own memory, where ipykernel builds each
    message whole (its cap: limits.KERNEL_MEMORY_BYTES).
    """

    def __init__(self, socket, session, loop=None):
        super().__init__(socket, session, loop)
        self.cell: str | None = None
        self.kept = 0                      # output bytes kept for the notebook
        self.cell_kept = 0
        self.cell_dropped = 0
        self.cell_resets = 0
        self.cell_full = ""                # the cap that stopped it: "cell" or "notebook"
        self._ready: deque = deque()
        self._endpoint = socket.getsockopt(zmq.LAST_ENDPOINT).decode()
        self._monitor = None
        self._use(socket)
        self._connected = True

    def _use(self, socket) -> None:
        """Read ``socket`` from now on, watched (before it connects, if it
        is new: its handshake is awaited in ``prepare``)."""
        self.socket = socket
        self._plain: zmq.Socket = zmq.Socket.shadow(socket.underlying)  # non-blocking reads
        self._monitor = socket.get_monitor_socket(
            zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self._monitor_plain: zmq.Socket = zmq.Socket.shadow(self._monitor.underlying)

    def _unwatch(self) -> None:
        if self._monitor is not None:
            try:
                self.socket.disable_monitor()
            except zmq.ZMQError:
                pass
            self._monitor.close(linger=0)
            self._monitor = None

    # -- cells ------------------------------------------------------------------
    def prepare(self) -> None:
        """Before a cell's request: the connection back if it was reset, and
        nothing of before kept."""
        self._ready.clear()
        self._watch()
        deadline = time.monotonic() + RECONNECT_WAIT_S
        while not self._connected and time.monotonic() < deadline:
            if self._monitor_plain.poll(int(RECONNECT_WAIT_S * 1000)):
                self._watch()

    def start_cell(self, msg_id: str) -> None:
        self.cell = msg_id
        self.cell_kept = self.cell_dropped = self.cell_resets = 0
        self.cell_full = ""

    def end_cell(self) -> tuple[int, int]:
        """(bytes dropped, connection resets) of the cell that ran."""
        self.cell = None
        self._ready.clear()
        return self.cell_dropped, self.cell_resets

    # -- reading ------------------------------------------------------------------
    # The ignore: jupyter_client declares get_msg synchronous on the blocking
    # channel this one replaces; nbclient awaits the async client's, as here.
    async def get_msg(self, timeout: float | None = None) -> dict:  # type: ignore[override]
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._ready:
                return self._ready.popleft()
            self._watch()
            self._read_ahead()
            if self._ready:
                return self._ready.popleft()
            poller = zmq.asyncio.Poller()       # (the socket may be a new one)
            poller.register(self.socket, zmq.POLLIN)
            poller.register(self._monitor, zmq.POLLIN)
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not await poller.poll(None if wait is None else int(wait * 1000)) \
                    and wait is not None:
                raise Empty

    def drop_pending(self) -> None:
        """Drop whatever has come (nobody reads it: the hidden tests run),
        without decoding it."""
        self._ready.clear()
        self._watch()
        while True:
            try:
                self._plain.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return

    def _read_ahead(self) -> None:
        while len(self._ready) < READ_AHEAD:
            try:
                frames = self._plain.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            message = self._admit(frames)
            if message is not None:
                self._ready.append(message)

    def _admit(self, frames) -> dict | None:
        """The message, decoded, if it is to be kept; else None (counted
        against the cell when it is the cell's output)."""
        size = sum(len(frame) for frame in frames)
        start = next((i + 1 for i, frame in enumerate(frames)
                      if len(frame) == len(DELIM) and frame.bytes == DELIM), None)
        parts = frames[start:] if start is not None else []
        if len(parts) < 5 or len(parts[1]) > limits.MAX_STATUS_MESSAGE_BYTES \
                or len(parts[2]) > limits.MAX_STATUS_MESSAGE_BYTES:
            return None                    # not a kernel's message
        try:
            msg_type = self.session.unpack(parts[1].bytes).get("msg_type")
            parent = self.session.unpack(parts[2].bytes).get("msg_id")
        except (ValueError, TypeError, AttributeError):
            return None
        if msg_type in CONTROL_MESSAGES:
            if size > limits.MAX_STATUS_MESSAGE_BYTES:
                return None
        elif self.cell is None or parent != self.cell:
            return None                    # nobody shows it
        elif (self.cell_kept + size > limits.MAX_CELL_OUTPUT_BYTES
              or self.kept + size > limits.MAX_NOTEBOOK_OUTPUT_BYTES):
            self.cell_full = self.cell_full or (
                "notebook" if self.kept + size > limits.MAX_NOTEBOOK_OUTPUT_BYTES else "cell")
            self.cell_dropped += size
            return None
        else:
            self.cell_kept += size
            self.kept += size
        try:
            return self.session.deserialize(parts, copy=False)
        except (ValueError, TypeError, KeyError):   # a forged or broken message
            return None

    def _watch(self) -> None:
        """Connect again after ZeroMQ reset the connection (a part over
        limits.MAX_OUTPUT_MESSAGE_BYTES): it does not on its own. (Or the
        kernel ended: the new socket waits for it, harmlessly.)"""
        reset = False
        while True:
            try:
                event = parse_monitor_message(self._monitor_plain.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                break
            if event["event"] == zmq.EVENT_DISCONNECTED:
                reset, self._connected = True, False
            elif event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._connected = True
        if not reset:
            return
        if self.cell is not None:
            self.cell_resets += 1
        old = self.socket
        self._unwatch()
        socket = output_socket(old.context)
        old.close(linger=0)
        self._use(socket)
        socket.connect(self._endpoint)
        socket.setsockopt(zmq.SUBSCRIBE, b"")

    def close(self) -> None:
        if self.socket is not None:
            self._unwatch()
        super().close()


class BoundedKernelClient(ReadyKernelClient):
    """The grader's client of the student's kernel: every message part it
    reads is capped (its IOPub, tighter: StudentOutputChannel)."""

    # The ignore: a traitlets Type, which jupyter_client annotates as the class itself.
    iopub_channel_class = Type(StudentOutputChannel)  # type: ignore[assignment]

    def _context_default(self):
        context = super()._context_default()
        context.setsockopt(zmq.MAXMSGSIZE, limits.MAX_REPLY_MESSAGE_BYTES)
        return context

    def connect_iopub(self, identity=None):
        # jupyter_client's, with the caps set before the socket connects.
        socket = output_socket(self.context)
        socket.connect(self._make_url("iopub"))
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        return socket

    def execute(self, *args, **kwargs) -> str:
        self.iopub_channel.prepare()
        msg_id = super().execute(*args, **kwargs)
        self.iopub_channel.start_cell(msg_id)
        return msg_id


def student_output_channel(client) -> StudentOutputChannel | None:
    """``client``'s IOPub channel where it is a StudentOutputChannel already
    made (None before it is: the public ``iopub_channel`` would make one)."""
    channel = getattr(client, "_iopub_channel", None)
    return channel if isinstance(channel, StudentOutputChannel) else None


def drop_pending_output(client) -> None:
    """Drop what the student's kernel has published while the tests run.

    Nothing reads it (the test cells' outputs are the grader's record),
    yet this process's subscription to the student's iopub queues every
    message until the next student cell: a thread printing during the
    tests held its whole flood here. Read through a plain (blocking
    API) socket on nbclient's asyncio one, without waiting, every
    STUDENT_OUTPUT_DROP_S (autograder.kernels.testskernel) while a test
    runs (ZeroMQ holds at most limits.OUTPUT_MESSAGES_QUEUED messages in
    between). ``client``: the student's kernel client (None once nbclient
    has let go of it: nothing to drop).
    """
    channel = getattr(client, "_iopub_channel", None)
    if channel is None or channel.socket is None:
        return
    if isinstance(channel, StudentOutputChannel):
        channel.drop_pending()
        return
    socket: zmq.Socket = zmq.Socket.shadow(channel.socket.underlying)
    while True:
        try:
            socket.recv(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return
