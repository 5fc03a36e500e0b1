"""What the fork server imports before it forks (autograder.kernels.forkserver.client):
everything a kernel imports as it starts, so that no forked kernel imports it
again (no bubblewrap needed: this is ipykernel's start, in a plain process)."""

from __future__ import annotations

import json
import subprocess
import sys

from autograder.kernels.forkserver import client as forkserver
from autograder.kernels.forkserver import server

#: Imports the fork server's preload (the backend-free part), starts an
#: ipykernel as a forked kernel does (its initialize; start only serves), and
#: prints the modules it imported on the way.
KERNEL_START = r"""
import json, os, sys, tempfile
for name in json.loads(sys.argv[1]):
    try:
        __import__(name)
    except ImportError:
        pass
before = set(sys.modules)
from jupyter_client.connect import write_connection_file
folder = tempfile.mkdtemp()
connection = os.path.join(folder, "kernel.json")
write_connection_file(connection, ip="127.0.0.1")
from ipykernel import kernelapp
kernelapp.IPKernelApp.instance().initialize(["-f", connection, "--IPKernelApp.parent_handle=0"])
with open(os.path.join(sys.argv[2]), "w") as out:
    json.dump(sorted(set(sys.modules) - before), out)
os._exit(0)
"""


def test_a_forked_kernel_imports_nothing_more_to_start(tmp_path):
    preload = forkserver.preload_for("jax")   # the backend-free part every kernel gets
    assert set(forkserver.KERNEL_START_PRELOAD) <= set(preload)
    # What their imports set in the environment, a forked kernel gets as a fresh one does.
    assert {"IPython", "ipykernel", "tornado"} <= server.KERNEL_START_PACKAGES
    out = tmp_path / "imported.json"
    subprocess.run([sys.executable, "-c", KERNEL_START, json.dumps(preload), str(out)],
                   check=True, capture_output=True, timeout=120)
    imported = json.loads(out.read_text())
    # (a handful of small modules imported inside functions may be left)
    assert len(imported) <= 10, imported
