"""How the kit's processes end with the process that started them.

Used by both layers that start processes: the grader's workers die with the
command (autograder.grader.batch), each fork server with its grading process
(autograder.kernels.forkserver.client).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
try:
    # Found now, not after a fork: die_with_parent also runs between fork and
    # exec (a Popen's preexec_fn), where nothing should be loaded.
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
except (OSError, AttributeError):
    _prctl = None


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """Have the kernel send ``signum`` to this process when its parent dies.

    Linux's PR_SET_PDEATHSIG, which fires when the *thread* that started
    this process ends: call it in a process started by a thread that lives
    as long as its process (a main thread). Where the parent, ``parent_pid``,
    died before the call, this process gets ``signum`` at once. Nothing
    elsewhere than Linux.
    """
    if _prctl is None:
        return
    _prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)
