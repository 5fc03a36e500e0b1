"""Student kernels forked into their sandbox (autograder/kernels/forkserver/server.py).

A forked kernel must be indistinguishable, from inside, from a fresh one:
the same files, environment, user, limits, writable file systems and their
sizes, processes and (no) capabilities; it
must get its own random seeds; the grader must still learn when it dies; and
when forking fails, grading goes on with a fresh kernel.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from autograder.kernels.isolation import bubblewrap, common, layer_named, prestart_fork_server
from autograder.kernels.forkserver import client as forkserver
from autograder.kernels.jupyter import SandboxKernelManager
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not bubblewrap.bubblewrap_works(),
                                reason="bubblewrap (bwrap) does not run here: no fork into a sandbox")

#: What a notebook can find out about where it runs.
PROBE = r"""
import json, os, resource, socket, sys
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\t" in line)
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    network = "open"
except OSError as error:
    network = type(error).__name__
limits = {name: resource.getrlimit(getattr(resource, name)) for name in
          ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_NOFILE",
           "RLIMIT_CORE")}
def readable(path):
    try:
        open(path).close()
        return True
    except OSError as error:
        return type(error).__name__
def size(folder):
    stat = os.statvfs(folder)
    return stat.f_blocks * stat.f_frsize
print("PROBE" + json.dumps({
    "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path, "argv0": sys.argv[0],
    "uids": os.getresuid(), "gids": os.getresgid(), "groups": os.getgroups(),
    "shadow": readable("/etc/shadow"), "own_fds": len(os.listdir("/proc/self/fd")) > 0,
    "sizes": {folder: size(folder) for folder in ("/tmp", "/dev/shm", os.getcwd())},
    "cwd_owner": os.stat(".").st_uid, "cwd_mode": oct(os.stat(".").st_mode),
    "writable": [folder for folder in ("/", "/dev", "/tmp", "/dev/shm", ".")
                 if os.access(folder, os.W_OK)],
    "hostname": socket.gethostname(),
    "caps": [status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": status["NoNewPrivs"].strip(), "network": network, "limits": limits,
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "kit_visible": sorted(os.listdir(%(root)r)) if os.path.isdir(%(root)r) else None,
    "solutions_visible": os.path.exists(%(solutions)r),
    "tmp": sorted(os.listdir("/tmp")),
    "autograder_loaded": sorted(m for m in sys.modules if m.startswith("autograder")),
}))
"""


def _manager(tmp_path, name: str, fork: bool) -> SandboxKernelManager:
    return SandboxKernelManager(scratch=str(tmp_path / name / "scratch"),
                                ipc_dir=str(tmp_path / name / "ipc"),
                                hidden=[str(ROOT)], fork_kernels=fork)


async def _run(km: SandboxKernelManager, *cells: str) -> list[str]:
    """Start the kernel, run ``cells``, shut it down; the printed text of each."""
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        printed = []
        for code in cells:
            text = []
            await kc.execute_interactive(
                code, timeout=120,
                output_hook=lambda msg: text.append(msg["content"].get("text", "")))
            printed.append("".join(text))
        return printed
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


def _probe(tmp_path, name: str, fork: bool) -> tuple[dict, bool]:
    km = _manager(tmp_path, name, fork)
    code = PROBE % {"root": str(ROOT), "solutions": str(ROOT / "solutions")}
    (text,) = asyncio.run(_run(km, code))
    return json.loads(text.split("PROBE", 1)[1]), km.forked


def test_a_forked_kernel_finds_what_a_fresh_kernel_finds(tmp_path):
    fresh, fresh_forked = _probe(tmp_path, "same", fork=False)
    forked, was_forked = _probe(tmp_path, "same", fork=True)
    assert was_forked and not fresh_forked
    # RLIMIT_NPROC counts from what the kernel's user runs at its start.
    for probe in (fresh, forked):
        soft, hard = probe["limits"].pop("RLIMIT_NPROC")
        assert soft == hard >= common.Limits().processes
    assert forked == fresh, {key: (fresh[key], forked[key]) for key in fresh
                             if fresh[key] != forked.get(key)}
    # And what both find is the sandbox: no capabilities, no network, only
    # its own processes (the namespace's init and the kernel), no kit, no
    # trace of the fork server's grader-side modules.
    assert set(forked["caps"]) == {"0000000000000000"} and forked["no_new_privs"] == "1"
    # Never root: where the grader is root, a user of its own with no
    # supplementary groups, who cannot read root's files.
    user = common.kernel_user()
    uid = os.getuid() if user is None else user.uid
    assert forked["uids"] == [uid] * 3 and forked["cwd_owner"] == uid
    if user is not None:
        assert uid != 0 and forked["gids"] == [user.gid] * 3 and forked["groups"] == []
        assert forked["shadow"] == "PermissionError"
    # What it can write is sized (the scratch folder is its working folder).
    limits = common.Limits()
    assert forked["sizes"] == {"/tmp": limits.tmp_bytes, "/dev/shm": limits.shm_bytes,
                               forked["cwd"]: limits.scratch_bytes}
    assert forked["writable"] == ["/tmp", "/dev/shm", "."]
    assert forked["network"] != "open" and len(forked["pids"]) == 2
    assert not forked["solutions_visible"] and forked["autograder_loaded"] == []


def test_forked_kernels_get_their_own_random_seeds(tmp_path):
    draws = []
    for name in ("first", "second"):
        km = _manager(tmp_path, name, fork=True)
        (text,) = asyncio.run(_run(km, "import numpy as np, random\n"
                                       "print(np.random.rand(), random.random())"))
        assert km.forked
        draws.append(text.strip())
    assert draws[0] != draws[1]


def test_the_grader_learns_that_a_forked_kernel_died(tmp_path):
    async def scenario():
        km = _manager(tmp_path, "dies", fork=True)
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            assert km.forked and await km.is_alive()
            # A child it forks must not keep the sandbox up after the kernel died.
            kc.execute("import os, time\nif os.fork() == 0:\n    time.sleep(60)\n"
                       "    os._exit(0)\nos._exit(3)")
            deadline = time.monotonic() + 10
            while await km.is_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            return await km.is_alive()
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    assert asyncio.run(scenario()) is False


def test_a_failed_fork_falls_back_to_a_fresh_kernel(tmp_path, monkeypatch):
    def fail(self, request):
        raise forkserver.ForkError("made to fail by the test")

    monkeypatch.setattr(forkserver.ForkServer, "spawn", fail)
    monkeypatch.setattr(forkserver.ForkServer, "_failures", 0)
    km = _manager(tmp_path, "fallback", fork=True)
    (text,) = asyncio.run(_run(km, "print(6 * 7)"))
    assert text.strip() == "42" and not km.forked


def test_no_fork_server_for_an_unknown_backend():
    assert forkserver.preload_for("tensorflow")[-1] == "keras"
    assert "torch" in forkserver.preload_for("torch")
    assert not {"jax", "keras"} & set(forkserver.preload_for("jax"))
    assert forkserver.preload_for("mlx") is None


def test_the_fork_server_ends_with_its_grader(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    server = forkserver.ForkServer(env, ["json"])
    home = server.home
    assert server.alive() and os.path.isdir(home)
    server.process.stdin.close()               # as when the grading process dies
    server.process.wait(timeout=10)
    assert not os.path.exists(home)


def test_what_a_library_prints_on_import_does_not_garble_the_fork_server(tmp_path):
    (tmp_path / "noisy.py").write_text("print('hello from an import')\n"
                                       "import sys; sys.stdout.flush()\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    server = forkserver.ForkServer(env, ["noisy"])
    try:
        assert server.alive()
    finally:
        server.close()


def test_a_prestarted_fork_server_is_the_one_the_first_kernel_uses(tmp_path, monkeypatch):
    # A grading worker starts its fork server as it sets itself up
    # (isolation.prestart_fork_server), without waiting for its imports; the
    # first kernel must be forked from that very server, not a second one.
    monkeypatch.setattr(forkserver.ForkServer, "_failures", 0)
    forkserver.ForkServer.discard()
    started = []
    original = forkserver.ForkServer.__init__

    def counted(self, *args, **kwargs):
        started.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(forkserver.ForkServer, "__init__", counted)
    prestart_fork_server(layer_named("bubblewrap"))
    assert len(started) == 1 and not started[0].ready      # not waited for
    km = _manager(tmp_path, "prestarted", fork=True)
    (text,) = asyncio.run(_run(km, "print(6 * 7)"))
    assert text.strip() == "42" and km.forked
    assert started == [forkserver.ForkServer._kept] and started[0].ready
    prestart_fork_server(layer_named("bubblewrap"))         # kept: nothing new
    assert len(started) == 1


def test_no_fork_server_is_prestarted_outside_bubblewrap(monkeypatch):
    forkserver.ForkServer.discard()
    for layer in ("user", "none"):
        prestart_fork_server(layer_named(layer))
    assert forkserver.ForkServer._kept is None


def test_a_prestarted_fork_server_that_fails_to_start_means_fresh_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(forkserver.ForkServer, "_failures", 0)
    forkserver.ForkServer.discard()
    # It dies while it imports (a module that ends the process), before it is ready.
    (tmp_path / "dies_on_import.py").write_text("import os\nos._exit(3)\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    forkserver.ForkServer.prestart(env, ["json", "dies_on_import"])
    assert forkserver.ForkServer._kept is not None
    assert forkserver.ForkServer.get(env, ["json", "dies_on_import"]) is None
    assert forkserver.ForkServer._failures == 1 and forkserver.ForkServer._kept is None
