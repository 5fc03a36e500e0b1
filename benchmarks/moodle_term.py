"""A Moodle term, end to end, as an instructor runs it (issue 46's acceptance run).

Builds a 30-student Moodle class for lab 1 and lab 4 of one term with the
fixture builders of data/sample_term/shapes.py (each file as Moodle's own
code writes it, sources cited there), then grades, exports and joins the
term with the documented commands only (``python -m autograder grade``,
``export``, ``term``; docs/instructors.md, "A term with the kit"), and
checks every output against what it must be, worked out here from the
samples' expected scores (tests/samples.py ``expectations``) and the
course's late policy, never read back from the kit's own files.

The class (the same people in both labs; Moodle numbers its participants
per assignment, so lab 1 and lab 4 give the same person another
"Participant N", and the emails join them):

- the 4.1+ download (folders, every entry stamped with the download's
  time), the 4.0 one (folders ``..._file_/``, entries stamped with the
  file pool's times) and, for lab 1, a flat one;
- the grading worksheet of each lab with user overrides (Moodle's "Allow
  submissions from", "Due date", "Cut-off date" columns), downloaded by a
  TA whose Moodle profile is in Europe/Berlin while the course is in
  America/New_York; lab 4's worksheet says Maximum grade 100.00 (Moodle's
  default), lab 1's 10.00; a TA's grade already in lab 1's worksheet;
- José Núñez, 李 雷, Seán O'Brien (Moodle drops the apostrophe from the
  folder), Mary_Ann Lee (the underscore becomes a space), two participants
  called Jane Doe;
- notebooks as Colab saves them (nbformat 4.0, ids in the cells'
  metadata) and as JupyterLab 4 does (nbformat 4.5, cell ids, a cell the
  student added, full language_info); a notebook whose hidden-test cell
  was deleted; an empty upload, one cut short, a ``.py``, a ``.zip``
  holding the notebook; a resubmission kept beside the first
  (``<notebook> (1).ipynb``, the newer the better one);
- late by 26 h and by 20 h, 10 min late (within the 15 min grace), a
  Moodle extension (submitted within it), a user override of the due date
  (moved 3 days; submitted 2 days 18 h after the course's due date), one
  who sent nothing, a draft, one untouched notebook.

Steps (each timed): build; the Berlin worksheet graded WITHOUT
``--worksheet-timezone`` (must stop, naming rows); each lab graded from
each download version (``--worksheet-timezone Europe/Berlin``, one seed a
lab, ``--jobs 2``); the exports (Moodle worksheet and gradebook routes);
``term`` with course.toml's [term] (weights lab1 1, lab4 2, one excused
lab); then the checks and a summary. Exits 1 when a check fails.

    .venv/bin/python benchmarks/moodle_term.py [--keep DIR] [--jobs 2] [--write-docs]
    make test-moodle-term

--write-docs rewrites the block "moodle_term" of docs/performance.md ("A
Moodle term, end to end"), dated, with this machine.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _docs  # noqa: E402
from autograder.labs import LABS  # noqa: E402
from tests.samples import expectations  # noqa: E402
from tests.term.test_term_whole import moodle_gradebook_import  # noqa: E402

TERM_DATA = ROOT / "data" / "sample_term"
SAMPLES = ROOT / "data" / "sample_submissions"
NEW_YORK = ZoneInfo("America/New_York")
UTC = datetime.timezone.utc
COURSE_ZONE = "America/New_York"
TA_ZONE = "Europe/Berlin"
DUE = {"lab1": datetime.datetime(2026, 10, 5, 23, 59, tzinfo=NEW_YORK),     # a Monday
       "lab4": datetime.datetime(2026, 11, 2, 23, 59, tzinfo=NEW_YORK)}     # after both DST ends
MAXIMUM = {"lab1": 10.0, "lab4": 100.0}          # the worksheets' Maximum grade
WEIGHTS = {"lab1": 1, "lab4": 2}
GRACE_MINUTES, PERCENT_PER_DAY, MAX_PERCENT = 15, 10, 50
SEED = {"lab1": "moodle-term-lab1-7f3a9c", "lab4": "moodle-term-lab4-2b8e61"}
DELETED_TEST = {"lab1": "test_softmax__overflow", "lab4": "test_causal_mask"}

# (first name, last name, email local part, case, lab 1 sample, lab 4 sample)
PEOPLE = [
    ("Alice", "Able", "alice.able", "on time", "alice", "alice"),
    ("Bob", "Brown", "bob.brown", "late 26h", "alice", "alice"),
    ("Chidi", "Chen", "chidi.chen", "late 20h", "alice", "alice"),
    ("Dana", "Evans", "dana.evans", "in grace 10min", "alice", "alice"),
    ("Emeka", "Fischer", "emeka.fischer", "moodle extension", "alice", "alice"),
    ("Fatima", "Garcia", "fatima.garcia", "user override", "alice", "alice"),
    ("Jane", "Doe", "jane.doe", "same name", "bob", "bob"),
    ("Jane", "Doe", "jdoe2", "same name", "carol", "carol"),
    ("Mary_Ann", "Lee", "maryann.lee", "underscore", "frank", "frank"),
    ("Seán", "O'Brien", "sean.obrien", "apostrophe", "bob", "erin"),
    ("José", "Núñez", "jose.nunez", "accents", "carol", "grace"),
    ("李", "雷", "li.lei", "CJK name", "alice", "heidi"),
    ("Gus", "Hughes", "gus.hughes", "nothing sent", None, None),
    ("Hana", "Ito", "hana.ito", "draft", "alice", "alice"),
    ("Ines", "Jones", "ines.jones", "Colab", "alice", "alice"),
    ("Jon", "Kowalski", "jon.kowalski", "JupyterLab 4", "alice", "alice"),
    ("Karl", "Lopez", "karl.lopez", "deleted test cell", "alice", "alice"),
    ("Laura", "Meyer", "laura.meyer", "empty upload", None, None),
    ("Mallory", "Nakamura", "mallory.nakamura", "cut short", None, None),
    ("Niaj", "Okafor", "niaj.okafor", ".py upload", None, None),
    ("Olivia", "Patel", "olivia.patel", ".zip upload", "alice", "alice"),
    ("Peggy", "Quinn", "peggy.quinn", "resubmitted", "alice", "alice"),   # (older: carol)
    ("Quentin", "Rossi", "quentin.rossi", "untouched", "dave", "dave"),
    ("Rupert", "Schmidt", "rupert.schmidt", "TA graded", "frank", "bob"),
    ("Sybil", "Tanaka", "sybil.tanaka", "on time", "bob", "carol"),
    ("Trent", "Ueda", "trent.ueda", "on time", "carol", "frank"),
    ("Ursula", "Vargas", "ursula.vargas", "excused lab4", "frank", "grace"),
    ("Victor", "Wong", "victor.wong", "on time", "alice", "heidi"),
    ("Wendy", "Xu", "wendy.xu", "on time", "bob", "erin"),
    ("Xavier", "Young", "xavier.young", "on time", "carol", "bob"),
]
EXCUSED = ("ursula.vargas", "lab4", "medical note")
TA_GRADE = ("rupert.schmidt", "lab1", 7.0)
RESUBMITTED_OLDER = "carol"                      # the first upload, worse than the second


def load_shapes():
    spec = importlib.util.spec_from_file_location("sample_term_shapes", TERM_DATA / "shapes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sample_term_shapes"] = module
    spec.loader.exec_module(module)
    return module


shapes = load_shapes()


# ----------------------------------------------------------------- notebooks


def sample_bytes(lab: str, name: str) -> bytes:
    return (SAMPLES / lab / f"{name}.ipynb").read_bytes()


def jupyterlab4(data: bytes, rng: random.Random) -> bytes:
    """A notebook as JupyterLab 4 saves it: nbformat 4.5, every cell with an id
    (the released cells keep theirs, a cell the student added gets a UUID),
    the kernel's full language_info, execution counts, indent 1, keys sorted,
    non-ASCII as is, a final newline (nbformat.writes' layout)."""
    nb = json.loads(data)
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    nb["metadata"]["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python",
                                    "name": "python3"}
    nb["metadata"]["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
        "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3", "version": "3.11.7"}
    count = 0
    for cell in nb["cells"]:
        cell.setdefault("id", str(uuid.UUID(int=rng.getrandbits(128))))
        if cell["cell_type"] == "code":
            count += 1
            cell["execution_count"] = count
    scratch = {"cell_type": "code", "execution_count": count + 1,
               "id": str(uuid.UUID(int=rng.getrandbits(128))), "metadata": {},
               "outputs": [{"name": "stdout", "output_type": "stream", "text": ["3\n"]}],
               "source": ["# trying things out\n", "print(1 + 2)"]}
    nb["cells"].insert(5, scratch)
    return (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def colab(data: bytes, rng: random.Random, name: str) -> bytes:
    """A notebook as Colab saves it: nbformat 4.0 (no cell ``id``: Colab keeps
    its own ids in each cell's metadata), Colab's notebook metadata, keys in
    Colab's order, indent 2."""
    nb = json.loads(data)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
    cells = []
    for cell in nb["cells"]:
        cell.pop("id", None)
        meta = dict(cell.get("metadata", {}))
        meta["id"] = "".join(rng.choice(letters) for _ in range(12))
        if cell["cell_type"] == "code":
            meta.setdefault("colab", {"base_uri": "https://localhost:8080/"})
            out = {"cell_type": "code", "source": cell["source"], "metadata": meta,
                   "execution_count": None, "outputs": []}
        else:
            out = {"cell_type": cell["cell_type"], "source": cell["source"], "metadata": meta}
        cells.append(out)
    metadata = {"colab": {"provenance": [], "toc_visible": True, "name": name},
                "kernelspec": {"name": "python3", "display_name": "Python 3"},
                "language_info": {"name": "python"}, "accelerator": "GPU"}
    doc = {"nbformat": 4, "nbformat_minor": 0, "metadata": metadata, "cells": cells}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def without_cell(data: bytes, grade_id: str) -> bytes:
    nb = json.loads(data)
    before = len(nb["cells"])
    nb["cells"] = [c for c in nb["cells"]
                   if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") != grade_id]
    if len(nb["cells"]) != before - 1:
        raise SystemExit(f"the released notebook has no cell {grade_id!r} to delete")
    return (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def zipped(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


# ----------------------------------------------------------------- the class


@dataclass
class Expected:
    """What one student's row of one lab must be, worked out here."""

    sid: str
    name: str
    case: str
    raw: float | None             # None: no graded notebook (no row score to compare)
    percent: float = 0.0          # late penalty, percent of the lab's points
    status: str = "graded"
    note: str = ""                # a word the row's notes must hold
    lab_id: int = 0               # Moodle's participant id in this lab
    submitted_at: datetime.datetime | None = None
    files: list[str] = field(default_factory=list)


def late_percent(seconds: float) -> float:
    """course.toml's [late]: within 15 min nothing, else 10% a day, a part of
    a day counting whole, at most 50% (docs/instructors.md)."""
    if seconds <= GRACE_MINUTES * 60:
        return 0.0
    return float(min(MAX_PERCENT, math.ceil(seconds / 86400) * PERCENT_PER_DAY))


def build_lab(lab: str, folder: Path, rng: random.Random) -> dict:
    """The lab's participants, downloads, worksheet; {sid: Expected}."""
    notebook = LABS[lab].notebook
    points = sum(sum(v.values()) for v in [expectations(lab)["alice.ipynb"]])
    scores = {name.removesuffix(".ipynb"): sum(v.values())
              for name, v in expectations(lab).items()}
    due = DUE[lab]
    ids = list(range(len(PEOPLE)))
    random.Random(f"{lab}-participants").shuffle(ids)   # Moodle's numbering, per assignment
    base = {"lab1": 413207, "lab4": 528911}[lab]
    parts, truth = [], {}
    full = sample_bytes(lab, "alice")
    for i, (first, last, local, case, sample, _) in enumerate(PEOPLE):
        sample = PEOPLE[i][4] if lab == "lab1" else PEOPLE[i][5]
        pid = base + 3 * ids[i]
        p = shapes.MoodleParticipant(pid, first, last, email=f"{local}@uni.example")
        when = due - datetime.timedelta(minutes=rng.randint(30, 3 * 24 * 60),
                                        seconds=rng.randint(0, 59))
        ex = Expected(local, p.fullname, case, scores.get(sample) if sample else None,
                      lab_id=pid)
        filename = f"{notebook}.ipynb"
        files: list[tuple[str, bytes]] = []
        if case == "nothing sent":
            when = None
            ex.status, ex.raw = "no submission", 0.0
        elif case == "late 26h":
            when = due + datetime.timedelta(hours=26, seconds=rng.randint(1, 59))
        elif case == "late 20h":
            when = due + datetime.timedelta(hours=20, seconds=rng.randint(1, 59))
        elif case == "in grace 10min":
            when = due + datetime.timedelta(minutes=10, seconds=rng.randint(1, 59))
        elif case == "moodle extension":
            p.extension_due = due + datetime.timedelta(days=2)
            when = due + datetime.timedelta(days=1, hours=3, minutes=12)
        elif case == "user override":
            p.override_due = due + datetime.timedelta(days=3)
            when = due + datetime.timedelta(days=2, hours=18, minutes=rng.randint(0, 30))
        if case == "Colab":
            name = f"Copy of {notebook}.ipynb"
            files = [(name, colab(full, rng, name))]
        elif case == "JupyterLab 4":
            files = [(filename, jupyterlab4(full, rng))]
        elif case == "deleted test cell":
            files = [(filename, without_cell(full, DELETED_TEST[lab]))]
            ex.note = f"cell {DELETED_TEST[lab]!r} was missing: put back"
        elif case == "empty upload":
            files = [(filename, b"")]
            ex.raw, ex.status, ex.note = 0.0, "not graded", "empty"
        elif case == "cut short":
            files = [(filename, full[: len(full) // 2])]
            ex.raw, ex.status, ex.note = 0.0, "not graded", ""
        elif case == ".py upload":
            files = [(f"{notebook}.py", b"import numpy as np\n\n\ndef dot_scores(query, keys):\n"
                                         b"    return keys @ query\n")]
            ex.raw, ex.status, ex.note = 0.0, "not graded", "not a notebook"
        elif case == ".zip upload":
            files = [(f"{notebook}.zip", zipped(filename, full))]
            ex.note = "from inside the student's zip"
        elif case == "resubmitted":
            second = shapes.moodle_unused_filename(filename, [filename])
            files = [(filename, sample_bytes(lab, RESUBMITTED_OLDER)), (second, full)]
            ex.note = second
        elif sample:
            files = [(filename, sample_bytes(lab, sample))]
        if when is not None:
            p.status = "draft" if case == "draft" else "submitted"
            p.timemodified = when
            p.files = files
            if case == "resubmitted":        # the first file reached the pool two days earlier
                p.pooled_at = {files[0][0]: when - datetime.timedelta(days=2, hours=1),
                               files[1][0]: when - datetime.timedelta(minutes=3)}
            else:
                p.pooled_at = when - datetime.timedelta(minutes=rng.randint(1, 90))
            if case == "draft":
                ex.note = "draft"
        if (local, lab) == TA_GRADE[:2]:
            p.grade = TA_GRADE[2]
            p.timemarked = due + datetime.timedelta(days=3, hours=2)
        parts.append(p)
        ex.submitted_at = when
        deadline = p.extension_due or p.override_due or due
        if when is not None and ex.status == "graded":
            ex.percent = late_percent((when - deadline).total_seconds())
        ex.files = [shapes.moodle_entry_name(p, f) for f, _ in p.files]
        truth[local] = ex
    built = due + datetime.timedelta(days=10, hours=14, minutes=4, seconds=6)
    paths = {}
    for version, folders, tag in (("4.1", True, "41"), ("4.0", True, "40"), ("4.1", False, "flat")):
        if tag == "flat" and lab != "lab1":
            continue
        path = folder / f"{lab}_moodle{tag}.zip"
        shapes.moodle_zip(path, parts, built, server_tz=COURSE_ZONE, folders=folders,
                          version=version)
        paths[tag] = path
    sheet = folder / f"{lab}_worksheet_berlin.csv"
    shapes.moodle_worksheet(sheet, parts, due=due, downloaded_at=built, user_tz=TA_ZONE,
                            max_grade=MAXIMUM[lab])
    paths["worksheet"] = sheet
    return {"truth": truth, "paths": paths, "points": points, "participants": parts}


def write_course(folder: Path, outs: dict) -> Path:
    (folder / "excused.csv").write_text(
        "student_id,lab,reason\n" + f"{EXCUSED[0]}@uni.example,{EXCUSED[1]},{EXCUSED[2]}\n",
        encoding="utf-8")
    labs = ", ".join(f'{lab} = "{os.path.relpath(out, folder)}"' for lab, out in outs.items())
    text = (f'[deadlines]\ntimezone = "{COURSE_ZONE}"\n'
            + "".join(f'{lab} = "{DUE[lab]:%Y-%m-%d %H:%M}"\n' for lab in DUE)
            + f"\n[late]\ngrace_minutes = {GRACE_MINUTES}\npenalty_percent = {PERCENT_PER_DAY}\n"
            f'per = "day"\nmax_penalty_percent = {MAX_PERCENT}\n'
            f"\n[term]\nlabs = {{ {labs} }}\n"
            f"weights = {{ {', '.join(f'{k} = {v}' for k, v in WEIGHTS.items())} }}\n"
            'drop_lowest = 0\nexcused = "excused.csv"\n')
    path = folder / "course.toml"
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------- running


@dataclass
class Step:
    name: str
    seconds: float
    rc: int
    output: str


def run(name: str, args: list[str], steps: list[Step], quiet: bool = True) -> Step:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=ROOT,
                          capture_output=True, text=True)
    step = Step(name, time.monotonic() - start, done.returncode, done.stdout + done.stderr)
    steps.append(step)
    print(f"  {name}: exit {step.rc}, {step.seconds:.1f} s", flush=True)
    if step.rc not in (0,) and not quiet:
        print(step.output[-3000:])
    return step


def read_grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


class Checks:
    def __init__(self):
        self.results: list[tuple[str, bool, str]] = []

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        self.results.append((name, bool(ok), detail))
        print(f"  {'PASS' if ok else 'FAIL'}  {name}" + (f"  -- {detail}" if detail and not ok
                                                         else ""), flush=True)
        return bool(ok)


def num(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def close(a, b) -> bool:
    return a is not None and b is not None and abs(a - b) < 1e-6


# ----------------------------------------------------------------- checks


def check_lab(lab: str, data: dict, rows: dict, check: Checks, tag: str) -> None:
    truth, points = data["truth"], data["points"]
    where = f"{lab} ({tag})"
    check(f"{where}: one row per participant ({len(truth)})",
          set(rows) == set(truth), f"missing {sorted(set(truth) - set(rows))}, "
          f"extra {sorted(set(rows) - set(truth))}")
    wrong = []
    for sid, ex in truth.items():
        row = rows.get(sid)
        if row is None:
            continue
        raw, score = num(row.get("raw_score")), num(row.get("score"))
        want_raw = ex.raw
        want_score = (want_raw - min(want_raw, points * ex.percent / 100)
                      if want_raw else want_raw)
        if want_raw is not None and not (close(raw, want_raw) and close(score, want_score)):
            wrong.append(f"{sid} ({ex.case}): raw {raw} score {score}, expected raw "
                         f"{want_raw} score {want_score}")
        if ex.note and ex.note not in row.get("notes", "") + row.get("status", ""):
            wrong.append(f"{sid} ({ex.case}): notes {row.get('notes')!r} lack {ex.note!r}")
    check(f"{where}: every row's raw score and score as worked out here "
          "(samples' scores, late policy)", not wrong, "; ".join(wrong[:6]))

    def row(sid):
        return rows.get(sid, {})

    full = points
    override = row("fatima.garcia")
    check(f"{where}: the user override student keeps full marks, no penalty "
          f"({override.get('score')}/{full:g})",
          close(num(override.get("score")), full) and close(num(override.get("raw_score")), full)
          and not num(override.get("penalty")), f"row {override}")
    late26 = row("bob.brown")
    check(f"{where}: 26 h late lost 20% (2 days: a part of a day counts whole): "
          f"{late26.get('score')} of raw {late26.get('raw_score')}",
          close(num(late26.get("score")), full * 0.8), f"row {late26}")
    late20 = row("chidi.chen")
    check(f"{where}: 20 h late lost 10%: {late20.get('score')} of raw {late20.get('raw_score')}",
          close(num(late20.get("score")), full * 0.9), f"row {late20}")
    for sid, what in (("dana.evans", "in-grace (10 min)"), ("emeka.fischer", "extended")):
        r = row(sid)
        check(f"{where}: {what} lost nothing ({r.get('score')})",
              close(num(r.get("score")), full) and not num(r.get("penalty")), f"row {r}")
    resub = row("peggy.quinn")
    check(f"{where}: the resubmission graded the newer file ({resub.get('score')}, the older "
          f"would be {data['older']:g})", close(num(resub.get("score")), full)
          and resub.get("file", "").endswith(f"{LABS[lab].notebook} (1).ipynb")
          and f"{LABS[lab].notebook} (1).ipynb" in resub.get("notes", ""),
          f"row {resub}")
    zipped_row = row("olivia.patel")
    check(f"{where}: the .zip upload graded with a note ({zipped_row.get('score')})",
          close(num(zipped_row.get("score")), full)
          and "inside the student's zip" in zipped_row.get("notes", "")
          and zipped_row.get("file", "").endswith(f".zip/{LABS[lab].notebook}.ipynb"),
          f"row {zipped_row}")
    reasons = {"laura.meyer": "empty file", "mallory.nakamura": "cut short",
               "niaj.okafor": "not a notebook: .py uploaded"}
    check(f"{where}: empty, cut-short and .py rows present, 0, the reason in the status",
          all(sid in rows and num(rows[sid]["score"]) == 0
              and why in rows[sid].get("status", "") for sid, why in reasons.items()),
          f"{ {sid: row(sid).get('status') for sid in reasons} }")
    does = [r for r in rows.values() if r.get("name") == "Jane Doe"]
    check(f"{where}: the two Jane Does are two rows with their own scores",
          len(does) == 2 and {d["student_id"] for d in does} == {"jane.doe", "jdoe2"}
          and num(rows["jane.doe"]["raw_score"]) != num(rows["jdoe2"]["raw_score"]),
          f"{[(d['student_id'], d['raw_score']) for d in does]}")
    names = {"jose.nunez": "José Núñez", "li.lei": "李 雷", "sean.obrien": "Seán O'Brien",
             "maryann.lee": "Mary_Ann Lee"}
    check(f"{where}: accented, 李 雷, apostrophe and Mary_Ann matched their roster rows",
          all(row(s).get("status") == "graded" and row(s).get("name") == n
              for s, n in names.items()),
          f"{[(s, row(s).get('name'), row(s).get('status')) for s in names]}")
    for sid, what in (("ines.jones", "Colab"), ("jon.kowalski", "JupyterLab 4"),
                      ("karl.lopez", "deleted hidden-test cell")):
        r = row(sid)
        check(f"{where}: {what} notebook full marks ({r.get('score')})",
              close(num(r.get("score")), full), f"row {r}")
    draft, none = row("hana.ito"), row("gus.hughes")
    check(f"{where}: the draft graded with a note, the one who sent nothing 0 'no submission'",
          close(num(draft.get("score")), full) and "draft" in draft.get("notes", "").lower()
          and none.get("status") == "no submission" and num(none.get("score")) == 0,
          f"draft {draft}, none {none}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build and grade in this folder, kept")
    parser.add_argument("--jobs", type=int, default=2)
    _docs.add_option(parser)
    args = parser.parse_args()
    if args.write_docs:
        _docs.check(["moodle_term"])
    began = time.monotonic()
    load_before = os.getloadavg()[0]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="moodle-term-"))
    if args.keep:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    folder = folder.resolve()
    steps: list[Step] = []
    check = Checks()
    rng = random.Random(46)

    print(f"Building the class in {folder}", flush=True)
    start = time.monotonic()
    labs = {lab: build_lab(lab, folder, rng) for lab in ("lab1", "lab4")}
    for lab, data in labs.items():
        data["older"] = sum(expectations(lab)[f"{RESUBMITTED_OLDER}.ipynb"].values())
    outs = {lab: folder / "out" / f"{lab}-41" for lab in labs}
    course = write_course(folder, outs)
    steps.append(Step("build the class (2 labs, 5 zips, 2 worksheets)",
                      time.monotonic() - start, 0, ""))
    lab1_ids = {ex.sid: ex.lab_id for ex in labs["lab1"]["truth"].values()}
    lab4_ids = {ex.sid: ex.lab_id for ex in labs["lab4"]["truth"].values()}
    check("fixture: every person has another participant id in lab 1 and lab 4",
          all(lab1_ids[s] != lab4_ids[s] for s in lab1_ids))
    sheet = labs["lab1"]["paths"]["worksheet"].read_text(encoding="utf-8-sig")
    check("fixture: the worksheet has Moodle's override columns and Berlin dates",
          '"Allow submissions from","Due date","Cut-off date"' in sheet
          and "Tuesday, 6 October 2026, 5:59 AM" in sheet)

    print("The Berlin worksheet without --worksheet-timezone", flush=True)
    stopped = run("grade lab1 (4.1+) without --worksheet-timezone",
                  ["grade", "lab1", str(labs["lab1"]["paths"]["41"]), "--out",
                   str(folder / "out" / "lab1-no-zone"), "--roster",
                   str(labs["lab1"]["paths"]["worksheet"]), "--course", str(course),
                   "--seed", SEED["lab1"], "--jobs", str(args.jobs), "--quiet"], steps)
    # the rows are named by their lines in the worksheet, the zone to give said
    named = re.search(r"on (\d+) of (\d+) rows \(lines \d+, \d+", stopped.output)
    check("the Berlin worksheet without --worksheet-timezone stops before grading, naming "
          f"the rows ({named[0] if named else 'none named'}) and --worksheet-timezone",
          stopped.rc != 0 and named and "--worksheet-timezone" in stopped.output
          and not (folder / "out" / "lab1-no-zone" / "grades.csv").exists(),
          f"exit {stopped.rc}; output tail: {stopped.output[-800:]!r}")

    grades: dict[tuple[str, str], dict] = {}
    for lab, data in labs.items():
        for tag in ("41", "40", "flat"):
            if tag not in data["paths"]:
                continue
            out = folder / "out" / f"{lab}-{tag}"
            label = {"41": "4.1+ folders", "40": "4.0 folders", "flat": "flat"}[tag]
            print(f"Grading {lab} from the {label} download", flush=True)
            step = run(f"grade {lab} ({label}), 30 students",
                       ["grade", lab, str(data["paths"][tag]), "--out", str(out), "--roster",
                        str(data["paths"]["worksheet"]), "--course", str(course),
                        "--worksheet-timezone", TA_ZONE, "--seed", SEED[lab],
                        "--jobs", str(args.jobs), "--quiet"], steps, quiet=False)
            if not check(f"{lab} ({label}): grade exits 0", step.rc == 0,
                         step.output[-1500:]) or not (out / "grades.csv").exists():
                continue
            grades[(lab, tag)] = read_grades(out)
            check_lab(lab, data, grades[(lab, tag)], check, label)
            unmatched = out / "unmatched.csv"
            rows = (list(csv.DictReader(open(unmatched, encoding="utf-8-sig")))
                    if unmatched.exists() else [])
            check(f"{lab} ({label}): no file left unmatched", not rows, f"{rows[:3]}")
        base = grades.get((lab, "41"))
        for tag in ("40", "flat"):
            other = grades.get((lab, tag))
            if base is None or other is None:
                continue
            keys = ("score", "raw_score", "penalty", "status")
            diff = [(sid, [base[sid].get(k) for k in keys], [other.get(sid, {}).get(k)
                                                           for k in keys])
                    for sid in base if [base[sid].get(k) for k in keys]
                    != [other.get(sid, {}).get(k) for k in keys]]
            check(f"{lab}: the {'4.0' if tag == '40' else 'flat'} download gives the 4.1+ "
                  f"grades.csv scores, row for row", not diff and set(base) == set(other),
                  f"{diff[:5]}")

    print("Exports", flush=True)
    exports = {}
    for lab in labs:
        out = outs[lab]
        if (lab, "41") not in grades:
            continue
        exports[(lab, "worksheet")] = run(f"export {lab} --to moodle (worksheet)",
                                          ["export", lab, str(out), "--to", "moodle"], steps)
        if lab == "lab4":
            exports[(lab, "scaled")] = run(
                f"export {lab} --to moodle --moodle-route gradebook --max-grade 100",
                ["export", lab, str(out), "--to", "moodle", "--moodle-route", "gradebook",
                 "--max-grade", "100", "--dest", str(out / "export" / "moodle-scaled")], steps)
        exports[(lab, "gradebook")] = run(
            f"export {lab} --to moodle --moodle-route gradebook",
            ["export", lab, str(out), "--to", "moodle", "--moodle-route", "gradebook",
             "--dest", str(out / "export" / "moodle-gradebook")], steps)
    maximum = "Maximum grade"
    if exports:
        ws1, gb1 = exports.get(("lab1", "worksheet")), exports.get(("lab1", "gradebook"))
        ws4, gb4 = exports.get(("lab4", "worksheet")), exports.get(("lab4", "gradebook"))
        failed = {k: v.output[-600:] for k, v in exports.items() if v.rc != 0}
        check(f"every export exits 0 ({len(exports)})", not failed, f"{failed}")
        written = outs["lab1"] / "export" / "moodle" / labs["lab1"]["paths"]["worksheet"].name
        filled = {}
        if written.exists():
            for r in csv.DictReader(io.StringIO(written.read_text(encoding="utf-8-sig"))):
                filled[r["Identifier"]] = r["Grade"]
        lab1_rows = grades.get(("lab1", "41"), {})
        want = {f"Participant {ex.lab_id}": lab1_rows.get(ex.sid, {}).get("score")
                for ex in labs["lab1"]["truth"].values()}
        bad = [(k, filled.get(k), v) for k, v in want.items()
               if num(v) and not close(num(filled.get(k)), num(v))]
        check("export lab1 worksheet route: every participant's Grade is the score "
              f"({len(filled)} rows)", written.exists() and len(filled) == len(PEOPLE)
              and not bad, f"{written} exists={written.exists()}; {bad[:5]}")
        check("export lab4 gradebook route warns about Moodle's Maximum grade 100.00 (lab: 16)",
              gb4 is not None and gb4.rc == 0 and maximum in gb4.output
              and "100" in gb4.output, gb4.output[-1500:] if gb4 else "")
        scaled = outs["lab4"] / "export" / "moodle-scaled" / "grades.csv"
        lab4_rows = grades.get(("lab4", "41"), {})
        got = {}
        if scaled.exists():
            for r in csv.DictReader(io.StringIO(scaled.read_text(encoding="utf-8-sig"))):
                got[r["Email address"].split("@")[0]] = next(
                    v for k, v in r.items() if k.startswith("Lab 4") and "(Feedback)" not in k)
        half_up = {sid: f"{int(float(r['score']) * 100 / 16 * 100 + 0.5 + 1e-9) / 100:.2f}"
                   for sid, r in lab4_rows.items()}
        bad = [(sid, got.get(sid), want) for sid, want in half_up.items()
               if num(got.get(sid)) is None or abs(num(got[sid]) - float(want)) > 1e-9]
        check("export lab4 --max-grade 100: every grade scaled to 100 (two decimals, half up: "
              f"14.5 of 16 -> {half_up.get('sean.obrien')})", scaled.exists()
              and len(got) == len(PEOPLE) and not bad, f"{bad[:5]}")
        check("export lab4 worksheet route warns about the Maximum grade too",
              ws4 is not None and maximum in ws4.output and "100" in ws4.output,
              ws4.output[-1000:] if ws4 else "")
        check("export lab1 (Maximum grade 10.00 = the lab's 10) gives no maximum warning",
              gb1 is not None and "Maximum grade for this assignment" not in gb1.output,
              gb1.output[-1000:] if gb1 else "")
        check("export lab1 lists the TA's grade it replaces (Rupert Schmidt, 7.00)",
              ws1 is not None and "Rupert Schmidt" in ws1.output and "7" in ws1.output,
              ws1.output[-1500:] if ws1 else "")

    print("The term", flush=True)
    term_out = folder / "out" / "term"
    if len(exports) >= 4:
        term = run("term lab1=OUT1 lab4=OUT4 --course course.toml",
                   ["term", f"lab1={outs['lab1']}", f"lab4={outs['lab4']}", "--out",
                    str(term_out), "--course", str(course)], steps, quiet=False)
        check("term exits 0", term.rc == 0, term.output[-1500:])
        if term.rc == 0:
            check_term(labs, grades, term_out, check)

    total = time.monotonic() - began
    return summary(labs, steps, check, total, folder, args, (load_before, os.getloadavg()[0]))


def expected_totals(labs: dict, grades: dict) -> dict[str, float]:
    """Each student's term percent from the labs' grades.csv (4.1+ downloads):
    the weighted mean of score/points over the labs that count (not excused)."""
    totals = {}
    for sid in labs["lab1"]["truth"]:
        num_, den = 0.0, 0.0
        for lab in labs:
            if (sid, lab) == EXCUSED[:2]:
                continue
            row = grades[(lab, "41")][sid]
            num_ += WEIGHTS[lab] * float(row["score"]) / float(row["max_score"])
            den += WEIGHTS[lab]
        totals[sid] = round(100 * num_ / den, 2)
    return totals


def check_term(labs: dict, grades: dict, term_out: Path, check: Checks) -> None:
    path = term_out / "term.csv"
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    want = expected_totals(labs, grades)
    total_key = next((k for k in next(iter(rows.values())) if "total" in k.lower()), None)
    bad = [(sid, rows.get(sid, {}).get(total_key), t) for sid, t in want.items()
           if not (sid in rows and abs(float(rows[sid][total_key]) - t) <= 0.005 + 1e-9)]
    check(f"term.csv: {len(rows)} students, totals follow the weights lab1 1, lab4 2 "
          "(computed here from each lab's grades.csv)", len(rows) == len(PEOPLE) and not bad,
          f"{bad[:6]}")
    ex = rows.get(EXCUSED[0], {})
    check(f"term.csv: {EXCUSED[0]}'s lab4 is excused (EX) and left out of the total",
          ex.get("lab4 score") == "EX" and "excused" in ex.get("notes", "") and abs(float(ex.get(total_key, -1)) - want[
              EXCUSED[0]]) < 0.01, f"{ex}")
    moodle = term_out / "export" / "moodle" / "grades.csv"
    header = next(csv.reader(io.StringIO(moodle.read_text(encoding="utf-8-sig"))))
    columns = {lab: next((h for h in header if h == LABS[lab].title or lab in h.lower()
                          or h.startswith(f"Lab {lab[-1]}")), None) for lab in labs}
    users = {f"{sid}@uni.example": n for n, sid in enumerate(labs["lab1"]["truth"], 1)}
    mapping = {columns[lab]: 10 + n for n, lab in enumerate(labs) if columns[lab]}
    try:
        seen = moodle_gradebook_import(moodle, "Email address", mapping, users)
    except AssertionError as error:
        check("Moodle's gradebook import (grade/import/csv rules) reads the term export", False,
              f"{error}; header {header}")
        return
    missing = []
    for sid, n in users.items():
        sid = sid.split("@")[0]
        got = seen.get(n)
        if got is None:
            missing.append((sid, "no row"))
            continue
        for i, lab in enumerate(labs):
            value = got.get(10 + i)
            score = float(grades[(lab, "41")][sid]["score"])
            if (sid, lab) == EXCUSED[:2]:
                if value is not None:
                    missing.append((sid, lab, value, "excused: no grade expected"))
            elif value is None or abs(value - score) > 1e-6:
                missing.append((sid, lab, value, score))
    check(f"Moodle's gradebook import of term export: a column per lab ({list(mapping)}), "
          f"every student's lab grades set ({len(seen)} students)",
          len(mapping) == 2 and not missing, f"{missing[:6]}")


def summary(labs, steps, check, total, folder, args, load) -> int:
    out = _docs.Recorder()
    passed = sum(1 for _, ok, _ in check.results if ok)
    failed = [(n, d) for n, ok, d in check.results if not ok]
    people = len(PEOPLE)
    files = {lab: sum(len(ex.files) for ex in data["truth"].values()) for lab, data in
             labs.items()}
    out("")
    out(f"Class: {people} Moodle participants in lab1 and lab4 ({files['lab1']} and "
        f"{files['lab4']} files; downloads: lab1 4.1+, 4.0, flat; lab4 4.1+, 4.0), "
        f"worksheets downloaded in {TA_ZONE}, course in {COURSE_ZONE}; --jobs {args.jobs}. "
        f"Load average (1 min) when it began {load[0]:.1f}, when it ended {load[1]:.1f} "
        "(the machine's other work included).")
    out("")
    out("| step | exit | wall time |")
    out("| --- | --- | --- |")
    for step in steps:
        out(f"| {step.name} | {step.rc} | {step.seconds:.1f} s |")
    out(f"| the whole run (build, grading, exports, term, checks) | | {total:.0f} s |")
    out("")
    out(f"Checks: {passed} of {len(check.results)} passed.")
    out("")
    out("| check | result |")
    out("| --- | --- |")
    for name, ok, _ in check.results:
        out(f"| {name.replace('|', '/')} | {'pass' if ok else 'FAIL'} |")
    if failed:
        print("\nFailed checks:")
        for name, detail in failed:
            print(f"- {name}\n    {detail}")
    if args.write_docs:
        _docs.write("moodle_term", out.text())
    if failed or args.keep:
        print(f"\nThe class and the OUT folders are in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
