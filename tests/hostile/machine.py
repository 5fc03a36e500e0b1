"""The grading machine: uid, tmpfs, processes, folders left behind (issue 18: 6, 9, 11, 16).

Each notebook prints what it managed (a marker line in its own output, kept
in the graded notebook) and the case's check reads it back: the score alone
cannot tell a notebook that was stopped from one that got its way.
(Folders left behind by a killed run are tests/kernels/test_tempdirs.py's.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from autograder.kernels.isolation.common import Limits
from tests.hostile.cases import Case, feedback_of, with_cell

SECRET_FILES = ("/etc/shadow", "/etc/gshadow")

READS_SHADOW = f'''
import os
found = {{}}
for path in {SECRET_FILES!r}:
    try:
        found[path] = open(path).read()
    except OSError as error:
        found[path] = type(error).__name__
print("UID", os.getuid(), "GROUPS", os.getgroups())
print("SHADOW", found)
raise RuntimeError(f"here they are: {{found}}")
'''

#: How many 256 MiB files the notebook tries in each place: enough to pass
#: any sized tmpfs of the sandbox, few enough not to hurt the machine if
#: one is not sized (2 GiB each).
TRIES = 8
FILLS_DISKS = f'''
import os
chunk = b"x" * 2**24
written = {{}}
for folder in ("/tmp", os.getcwd(), "/dev/shm"):
    total = 0
    try:
        for number in range({TRIES}):
            with open(os.path.join(folder, f"fill{{number}}.bin"), "wb") as handle:
                for _ in range(16):                    # 16 x 16 MiB: 256 MiB a file
                    handle.write(chunk)
                    total += len(chunk)
    except OSError as error:
        print("refused in", folder, "after", total // 2**20, "MiB:", type(error).__name__)
    written[folder] = total
print("FILLED", written)
'''

STARTS_THREADS = '''
import threading
threading.stack_size(64 * 1024)
release = threading.Event()
threads = []
try:
    while len(threads) < 20000:
        thread = threading.Thread(target=release.wait, daemon=True)
        thread.start()
        threads.append(thread)
except RuntimeError as error:
    print("refused:", error)
print("THREADS", len(threads))
release.set()
for thread in threads:
    thread.join()
'''


def graded_text(out: Path, student: str) -> str:
    """The student's graded notebook (its outputs included), as text."""
    notebooks = (out / "nbgrader" / "autograded" / student).glob("*/*.ipynb")
    return "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in notebooks)


def _printed(out: Path, student: str, marker: str) -> str | None:
    """What the notebook printed after ``marker`` (the graded notebook's JSON
    escapes included), or None."""
    found = re.search(marker + r" (.*?)\\n", graded_text(out, student))
    return found.group(1) if found else None


def _secret_lines() -> list[str]:
    """The lines of the secret files, as far as this test process can read them."""
    lines = []
    for path in SECRET_FILES:
        try:
            lines += [line for line in Path(path).read_text().splitlines() if line.strip()]
        except OSError:
            pass
    return lines


def _check_shadow(out: Path, row: dict) -> str:
    shown = feedback_of(out, "reads_shadow") + graded_text(out, "reads_shadow")
    if not shown:
        return "neither a feedback page nor a graded notebook"
    leaked = [line.split(":")[0] for line in _secret_lines()
              if line in shown or json.dumps(line)[1:-1] in shown]
    if leaked:
        return f"lines of /etc/shadow or /etc/gshadow shown (users {leaked[:5]})"
    uid = _printed(out, "reads_shadow", "UID")
    if uid is None or uid.split()[0] == "0":
        return f"the kernel ran as root (printed: {uid})"
    if "'/etc/shadow': 'PermissionError'" not in (_printed(out, "reads_shadow", "SHADOW") or ""):
        return "the notebook did not find /etc/shadow closed to it"
    return ""


def _check_fills(out: Path, row: dict) -> str:
    printed = _printed(out, "fills_disks", "FILLED")
    if printed is None:
        return "the notebook printed no FILLED line"
    written = {folder: int(size) for folder, size in re.findall(r"'([^']+)': (\d+)", printed)}
    limits = Limits()
    tmp, shm = written.get("/tmp", -1), written.get("/dev/shm", -1)
    scratch = [size for folder, size in written.items() if folder not in ("/tmp", "/dev/shm")]
    if not 0 <= tmp <= limits.tmp_bytes or not 0 <= shm <= limits.shm_bytes:
        return f"/tmp took {tmp} bytes, /dev/shm {shm}"
    if len(scratch) != 1 or scratch[0] > limits.scratch_bytes:
        return f"the working folder took {scratch} bytes"
    return ""


def _check_threads(out: Path, row: dict) -> str:
    printed = _printed(out, "starts_threads", "THREADS")
    if printed is None:
        return "the notebook printed no THREADS line"
    count = int(printed)
    # The kernel's own threads count against the cap too; a cap that holds
    # also lets an ordinary notebook start a few hundred.
    if not 200 <= count <= Limits().processes:
        return f"{count} threads started (cap {Limits().processes})"
    return ""


def cases() -> list[Case]:
    return [
        Case("reads_shadow", "machine", "reads /etc/shadow and /etc/gshadow, prints them and "
             "raises with them", lambda: with_cell(READS_SHADOW), 10, needs_sandbox=True,
             check=_check_shadow),
        Case("fills_disks", "machine", "writes 256 MiB files into /tmp, its working folder and "
             "/dev/shm until refused", lambda: with_cell(FILLS_DISKS), 10, needs_sandbox=True,
             check=_check_fills),
        Case("starts_threads", "machine", "starts threads until refused",
             lambda: with_cell(STARTS_THREADS), 10, check=_check_threads),
    ]
