"""A class of lab 1 that probes the student kernel's isolation, and its checks.

Used by tests/kernels/test_userlayer.py (the user layer in `make test`: bubblewrap
hidden from PATH, or failing) and tests/kernels/test_container.py (the same class
graded under a default Docker container's restrictions, `make
test-container`). Each hostile notebook prints what it reached on a marker
line that the graded notebook keeps; `check` reads those lines back, since
the score alone cannot tell a notebook that was stopped from one that got
its way.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import nbformat

from tests.conftest import ROOT
from tests.hostile.cases import with_cell
from tests.hostile.machine import READS_SHADOW, STARTS_THREADS

SECRET = "s3cr3t-of-the-isolation-tests"
#: A daemon the notebook leaves behind; no process of this command line
#: may be left once grading is over.
DAEMON_SECONDS = "987.6"

PROBE = r'''
import json, os, socket, subprocess
found = {"uid": os.getuid(), "groups": os.getgroups(), "reached": []}
for path in SECRET_PATHS:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(8)
        found["reached"].append("read " + path)
    except OSError:
        pass
    try:
        target = os.path.join(path, "planted.txt") if os.path.isdir(path) else path
        open(target, "a").close()
        found["reached"].append("write " + path)
    except OSError:
        pass
try:
    os.kill(os.getppid(), 0)
    found["reached"].append("signal the grader")
except OSError:
    pass
try:
    import autograder.references
    found["reached"].append("import autograder.references")
except Exception:
    pass
found["secret_env"] = os.environ.get("AUTOGRADER_TEST_SECRET", "absent")
found["interfaces"] = sorted(name for _, name in socket.if_nameindex())
found["tmpdir"] = os.environ.get("TMPDIR", "")
subprocess.Popen(["sleep", DAEMON], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("ISOLATION", json.dumps(found))
'''


def write_class(batch: Path, secret_paths: list[str]) -> None:
    """The class: a correct notebook, and one notebook per probe."""
    batch.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "data" / "sample_submissions" / "lab1" / "alice.ipynb",
                    batch / "alice.ipynb")
    probe = (f"SECRET_PATHS = {secret_paths!r}\nDAEMON = {DAEMON_SECONDS!r}\n" + PROBE)
    for name, code in (("probes", probe), ("reads_shadow", READS_SHADOW),
                       ("starts_threads", STARTS_THREADS)):
        nbformat.write(with_cell(code), batch / f"{name}.ipynb")


def secret_paths(out: Path, batch: Path) -> list[str]:
    return [str(out), str(out / "nbgrader" / "gradebook.db"), str(ROOT / "solutions"),
            str(ROOT / "autograder" / "references"), str(batch), str(batch / "alice.ipynb")]


def printed(out: Path, student: str, marker: str) -> str | None:
    notebook = out / "nbgrader" / "autograded" / student / "lab1" / "lab1_attention.ipynb"
    text = json.dumps(nbformat.read(notebook, as_version=4))
    found = re.search(marker + r" (.*?)\\n", text)
    return found.group(1).encode().decode("unicode_escape") if found else None


def grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", encoding="utf-8", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def check(out: Path, network_isolated: bool) -> list[str]:
    """What went wrong in the graded class (empty: the isolation held)."""
    problems = []
    rows = grades(out)
    for student, row in rows.items():
        if float(row["score"]) != 10:
            problems.append(f"{student}: {row['score']}/10 ({row['status']})")
        if "isolation: a user of its own" not in row["notes"]:
            problems.append(f"{student}: no isolation note ({row['notes']!r})")
    found = json.loads(printed(out, "probes", "ISOLATION") or "{}")
    if not found:
        problems.append("probes printed nothing")
    else:
        if found["uid"] < 2_000_000_000 or found["groups"]:
            problems.append(f"probes ran as uid {found['uid']}, groups {found['groups']}")
        problems += [f"probes could {what}" for what in found["reached"]]
        if found["secret_env"] != "absent":
            problems.append("probes read the grader's environment")
        if network_isolated and found["interfaces"] != ["lo"]:
            problems.append(f"probes saw network interfaces {found['interfaces']}")
        if not found["tmpdir"]:
            problems.append("probes had no private TMPDIR")
    shadow = printed(out, "reads_shadow", "SHADOW") or ""
    if "root:" in shadow or shadow.count("PermissionError") != 2:
        problems.append(f"reads_shadow read: {shadow[:200]}")
    threads = printed(out, "starts_threads", "THREADS")
    if threads is None or int(threads) >= 20000:
        problems.append(f"starts_threads started {threads} threads")
    isolation = json.loads((out / "class.json").read_text())["isolation"]
    if not isolation or isolation["layer"] != "user":
        problems.append(f"class.json's isolation: {isolation}")
    if "a user of its own per student kernel" not in (out / "report.html").read_text():
        problems.append("report.html does not say the isolation")
    return problems


def daemons_left() -> list[str]:
    """Command lines of the probe's daemon still running (none may be)."""
    import psutil

    left = []
    for process in psutil.process_iter(["cmdline"]):
        if (process.info["cmdline"] or [])[-1:] == [DAEMON_SECONDS]:
            left.append(" ".join(process.info["cmdline"]))
            process.kill()
    return left
