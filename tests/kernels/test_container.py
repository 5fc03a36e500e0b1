"""The user layer under a default container's restrictions (`make test-container`).

tests/container.py reproduces, as root on this machine, what a default
Docker container imposes (runc's masked /proc, Docker's default
capabilities without CAP_SYS_ADMIN, its seccomp denials of namespaces and
mounts): bubblewrap cannot start there, and neither can a network namespace.
The grader, run inside it through the CLI, must choose the user layer and
hold: tests/isolation.py's class (a correct notebook, probes of the course,
results, secrets, the grader's processes, /etc/shadow, threads) graded, full
marks for all, nothing reached, the layer in class.json, report.html and every
row, and no process of the kernels left behind.
"""

from __future__ import annotations

import json
import os
import platform
import sys

import pytest

from tests import isolation
from tests.conftest import ROOT

pytestmark = [
    pytest.mark.container,
    pytest.mark.skipif(os.geteuid() != 0 or platform.machine() != "x86_64",
                       reason="the container reproduction runs as root on x86-64"),
]


def _in_container(*command: str, env: dict | None = None, timeout: int = 900):
    import subprocess

    return subprocess.run([sys.executable, "-m", "tests.container", "--", *command],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_the_reproduction_denies_what_a_default_container_denies():
    probe = ("import ctypes, os, subprocess; libc = ctypes.CDLL(None, use_errno=True); "
             "print(libc.unshare(0x10000000), libc.unshare(0x40000000), "
             "subprocess.run(['bwrap', '--ro-bind', '/', '/', '--proc', '/proc', 'true'], "
             "capture_output=True).returncode, "
             "[l for l in open('/proc/self/status') if l.startswith('CapBnd')][0].split()[1])")
    result = _in_container(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    user_ns, net_ns, bwrap, bounding = result.stdout.split()
    assert (user_ns, net_ns) == ("-1", "-1")
    assert bwrap != "0"
    assert bounding == "00000000a80425fb"      # Docker's default capability set


def test_a_class_graded_in_the_container_keeps_to_the_user_layer(tmp_path):
    batch, out = tmp_path / "class", tmp_path / "out"
    isolation.write_class(batch, isolation.secret_paths(out, batch))
    result = _in_container(sys.executable, "-m", "autograder", "grade", "lab1", str(batch),
                           "--out", str(out), "--quiet", "--jobs", "2",
                           env={"AUTOGRADER_TEST_SECRET": isolation.SECRET})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Isolation of the student kernels: a user of its own" in result.stderr
    assert "network: NOT isolated" in result.stderr
    assert isolation.check(out, network_isolated=False) == []
    assert isolation.daemons_left() == []
    details = json.loads((out / "class.json").read_text())["isolation"]["details"]
    assert any("NOT isolated" in line for line in details)
