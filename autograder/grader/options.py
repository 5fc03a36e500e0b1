"""How a class is graded: every option of `grade` and `merge`, checked once.

The command line (autograder.cli) builds one `GradingOptions` from its
arguments and hands it on: to `grade` (autograder.pipeline), the batch
(autograder.grader.batch.Grader), its worker processes
(autograder.grader.worker) and, through nbgrader's configuration, the
Execute step (autograder.grader.execute). Each default is written here
once, the limits among them taken from autograder.limits; a wrong value
is refused here, before anything is graded, with what to give instead.

The seed of the hidden tests' inputs is an option too, and so is what OUT
keeps of it (`seed_check`); a shard (``--shard K/N``) is parsed here, and
it needs a seed (`parse_shard`).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path

from autograder.limits import CELL_TIMEOUT_S, NOTEBOOK_TIMEOUT_S, WALL_BACKSTOP_FACTOR

#: How student kernels start: forked from a fork server with the libraries
#: imported (autograder.kernels.forkserver.server), or a fresh Python each.
KERNELS = ("fork", "fresh")

#: The speed-ups `--plain` turns off, each with its plain twin (docs/instructors.md).
PLAIN = {
    "forked kernels (autograder.kernels.forkserver)": "a fresh Python for each student kernel",
    "visible checks skipped (they grade nothing)": "the visible checks run",
    "the hidden tests' calls on a pipe (autograder.kernels.probe)":
        "each call an execute request, as Jupyter runs a cell",
    "a layer's first build by its eager call (autograder.studentkernel.glue)":
        "Keras's own build, by a symbolic trace",
}

#: PBKDF2 rounds of seed_check: a guessed seed costs this many hashes.
SEED_CHECK_ROUNDS = 200_000


def option(default, flag: str, help: str, *, group: str = "run", merge: bool = False,
           invert: bool = False, **argparse_options):
    """A field of GradingOptions with its command-line flag, declared once.

    ``help`` is the flag's help; ``group`` "term" puts it under grade's "the
    term" heading; ``merge``: `merge` takes it too; ``invert``: a flag that
    turns the (true) default off (``--quiet`` for ``progress``). Other
    keywords go to argparse (``type``, ``choices``, ``metavar``, ``action``).
    autograder.cli builds grade's and merge's flags from these, and the
    options from the flags (``add_arguments``, ``from_arguments``).
    """
    return field(default=default, metadata={
        "flag": flag, "help": help, "group": group, "merge": merge, "invert": invert,
        "argparse": argparse_options})


@dataclass(frozen=True)
class GradingOptions:
    """Every choice an instructor makes about a grading run, with its default.

    Args:
        jobs: submissions graded at once, each in a worker process (None:
            one per core; `workers` says how many).
        cell_timeout: seconds one student cell may run (0: none for the
            student's own cells; set-up and test cells still have
            autograder.limits' SETUP_CELL_TIMEOUT_S).
        notebook_timeout: seconds the whole notebook may run.
        seed: the hidden tests' inputs' seed (None: a fresh secret one each
            run, written nowhere: autograder.pipeline).
        regrade: grade everyone again, even those an earlier run into the
            same OUT finished.
        run_demos: run every cell: also the provided cells that grade
            nothing, the demonstrations (``grading="skip"`` in the lab's
            source) and the visible checks (skipped by default, unless a
            submission's own cells read what they define:
            autograder.grader.cellnames).
        run_checks: also run the visible checks (their output then shows in
            the feedback); the demonstrations stay skipped.
        kernels: "fork" or "fresh" (`KERNELS`).
        plain: every speed-up off, each for its plain twin (`PLAIN`): fresh
            kernels, the visible checks run, the hidden tests' calls as
            execute requests, Keras's own first build. The scores are the
            same (tests/grader/test_plain.py); for a library upgrade that breaks a
            fast path.
        db_url: the class's gradebook, an SQLAlchemy URL (None: SQLite in
            the course folder).
        course_dir: the nbgrader course folder (None: OUT/nbgrader).
        shard: this run's part of the class, (K, N) or "K/N" (needs `seed`).
        progress: show a progress bar with an ETA on stderr.
        only: grade only these students again (their ids in grades.csv);
            everyone else keeps the result an earlier run into OUT saved.
        course_file: the course settings with the deadlines and late policy
            (None: the kit's course.toml).
        roster: the class list an LMS exports (autograder.term.roster).
        times: a CSV of submission times (autograder.term.late).
        extensions: a CSV of extensions (None: course.toml's, if any).
        overrides: the instructor's scores and notes (None: OUT/overrides.csv
            when it exists).
        worksheet_timezone: the zone of Moodle's grading worksheet's dates, an
            IANA name (None: course.toml's, else the course's; autograder.term.late.
            worksheet_zone).
        similarity: compare the answers pairwise after grading.
        similar_to: a folder of earlier terms' or public solutions to compare with.
        similarity_threshold: the pair's similarity (the mean of the two sides'
            rarity-weighted shared code, autograder.term.similarity) from which a
            pair is listed (None: its default, 0.25).
        unsandboxed: grade even where no isolation layer works (the
            instructor's explicit word: autograder.kernels.isolation.choose_isolation).
    """

    jobs: int | None = option(
        None, "--jobs", "submissions graded at once (default: the number of cores)", type=int)
    cell_timeout: int = option(
        CELL_TIMEOUT_S, "--cell-timeout",
        f"CPU seconds one cell may use (default {CELL_TIMEOUT_S}; the wall clock stops it at "
        f"{WALL_BACKSTOP_FACTOR} times that)",
        type=int)
    notebook_timeout: int = option(
        NOTEBOOK_TIMEOUT_S, "--notebook-timeout",
        f"CPU seconds the whole notebook may use (default {NOTEBOOK_TIMEOUT_S}; the wall clock "
        f"stops it at {WALL_BACKSTOP_FACTOR} times that)", type=int)
    seed: str | None = option(None, "--seed",
                              "seed of the hidden tests' inputs (default: random)")
    regrade: bool = option(
        False, "--regrade", "grade everyone again, even those an earlier run in OUT finished")
    run_demos: bool = option(
        False, "--run-demos", "run every cell, as plain nbgrader does: also the provided "
        "cells that grade nothing, the demonstrations (grading=\"skip\" in the lab's source) "
        "and the exercises' visible checks (skipped by default, unless a submission's own "
        "cells read what they define)")
    run_checks: bool = option(
        False, "--run-checks", "also run the exercises' visible checks, so that the "
        "feedback shows what each said (they grade nothing; skipped by default)")
    kernels: str = option(
        "fork", "--kernels", "fork each student kernel, libraries already imported, into its "
        "sandbox (default), or start a fresh Python for each", choices=KERNELS)
    plain: bool = option(
        False, "--plain", "grade without any speed-up, the plain and slower way (same "
        "scores): a fresh Python for each student kernel, the visible checks run, the "
        "hidden tests' calls sent as execute requests (no pipe), Keras's own first build; "
        "for a TensorFlow, Keras, jupyter_client or nbgrader upgrade that breaks a fast path")
    db_url: str | None = option(
        None, "--db", "gradebook SQLAlchemy URL (default: SQLite in the course folder; "
        "postgresql://... needs the postgres extra)", merge=True, metavar="URL")
    course_dir: Path | None = option(
        None, "--course-dir", "nbgrader course folder (default: OUT/nbgrader)", merge=True,
        type=Path)
    shard: tuple[int, int] | None = option(
        None, "--shard", "grade only part K of N of the class (sorted by student id; needs "
        "--seed); join the parts with `merge`", metavar="K/N")
    progress: bool = option(True, "--quiet", "no progress bar", invert=True)
    only: tuple[str, ...] = option(
        (), "--only", "grade only this student again (repeat, or give a,b,c); the others keep "
        "their saved results", group="term", action="append", metavar="STUDENT")
    course_file: Path | None = option(
        None, "--course", "course settings with [deadlines] and [late] (default: the kit's "
        "course.toml)", group="term", type=Path, metavar="COURSE_TOML")
    roster: Path | None = option(
        None, "--roster", "the class list your LMS exports (Canvas gradebook CSV, Moodle "
        "grading worksheet or gradebook export, or a CSV with student_id, name, email): every "
        "enrolled student gets a row, files that match no one are listed, not graded",
        group="term", type=Path)
    times: Path | None = option(
        None, "--times", "submission times: a CSV student_id,submitted_at, or the JSON of "
        "Canvas's submissions API (instead of what the download carries)", group="term",
        type=Path)
    extensions: Path | None = option(
        None, "--extensions", "CSV student_id,lab,due or student_id,lab,days (default: "
        "course.toml's [late] extensions)", group="term", type=Path)
    overrides: Path | None = option(
        None, "--overrides", "CSV student_id,exercise,score,note,by: your scores and notes "
        "(default: OUT/overrides.csv when it exists)", group="term", type=Path)
    worksheet_timezone: str | None = option(
        None, "--worksheet-timezone", "the time zone of the Moodle profile of whoever downloaded "
        "the grading worksheet given as --roster: Moodle writes its dates in it (default: "
        "course.toml's [moodle] worksheet_timezone, else the course's; checked against "
        "Moodle's Status)", group="term", metavar="ZONE")
    similarity: bool = option(True, "--no-similarity",
                              "do not compare the answers pairwise after grading",
                              group="term", invert=True)
    similar_to: Path | None = option(
        None, "--similar-to", "also compare with these notebooks or .py files (earlier terms, "
        "public solutions)", group="term", type=Path, metavar="FOLDER")
    similarity_threshold: float | None = option(
        None, "--similarity-threshold", "list pairs from this similarity on (0-1; "
        "rarity-weighted shared code, default 0.25)", group="term", type=float, metavar="SHARE")
    unsandboxed: bool = option(
        False, "--unsandboxed", "grade even where neither bubblewrap nor a user of its own per "
        "kernel can isolate the students' notebooks (they could then read the hidden tests and "
        "other students' files); without it such a run refuses to start")

    def __post_init__(self):
        if self.jobs is not None and (not _is_int(self.jobs) or self.jobs < 1):
            raise ValueError(
                f"--jobs {self.jobs} is not a number of submissions to grade at once: give "
                f"1 or more (or leave it out: one per core, {os.cpu_count() or 1} here).")
        if not _is_int(self.cell_timeout) or self.cell_timeout < 0:
            raise ValueError(
                f"--cell-timeout {self.cell_timeout} is not a number of seconds: give the "
                f"seconds one cell may run (default {CELL_TIMEOUT_S}).")
        if not _is_int(self.notebook_timeout) or self.notebook_timeout < 1:
            raise ValueError(
                f"--notebook-timeout {self.notebook_timeout} is not a number of seconds: "
                f"give the seconds the whole notebook may run (default {NOTEBOOK_TIMEOUT_S}).")
        if self.kernels not in KERNELS:
            raise ValueError(f"--kernels {self.kernels!r} is not one of {', '.join(KERNELS)}: "
                             f"fork (the default) or fresh.")
        if self.plain:  # every speed-up off (PLAIN): these two are options of their own
            object.__setattr__(self, "kernels", "fresh")
            object.__setattr__(self, "run_checks", True)
        if self.seed is not None and not isinstance(self.seed, str):
            raise ValueError(f"--seed must be text, got {type(self.seed).__name__}: give "
                             f"a long random word.")
        for name in ("course_dir", "course_file", "roster", "times", "extensions", "overrides",
                     "similar_to"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        object.__setattr__(self, "only", tuple(
            part.strip() for item in self.only or () for part in str(item).split(",")
            if part.strip()))
        if self.only and self.shard:
            raise ValueError("--only and --shard do not go together: regrade students in the "
                             "OUT folder of the whole class (after `merge`).")
        if self.worksheet_timezone is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(str(self.worksheet_timezone))
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"--worksheet-timezone {str(self.worksheet_timezone)!r} is not a time "
                    f"zone: give the IANA name of the time zone in the Moodle profile of the "
                    f"user who downloaded the grading worksheet, such as \"Europe/Berlin\" "
                    f"or \"UTC\".") from None
        if self.similarity_threshold is not None and not (
                isinstance(self.similarity_threshold, (int, float))
                and 0 < self.similarity_threshold <= 1):
            raise ValueError(f"--similarity-threshold {self.similarity_threshold!r}: give the "
                             f"similarity from which a pair is listed, above 0 and at most 1 "
                             f"(the default 0.25 is calibrated: docs/instructors.md, step 4).")
        if isinstance(self.shard, str):
            object.__setattr__(self, "shard", parse_shard(self.shard))
        if self.shard is not None:
            self._check_shard()

    def _check_shard(self) -> None:
        assert self.shard is not None   # called only for a shard (__post_init__)
        shard = tuple(self.shard)
        if len(shard) != 2 or not all(map(_is_int, shard)) or not 1 <= shard[0] <= shard[1]:
            parse_shard(str(self.shard))   # raises, saying what a shard is
        object.__setattr__(self, "shard", shard)
        if not self.seed:
            raise ValueError(
                f"--shard {shard[0]}/{shard[1]} needs --seed: every shard of a class must "
                f"grade with the same hidden inputs. Pick a long random word and give it "
                f"to every shard, e.g. --seed {secrets.token_hex(16)} (OUT keeps only a "
                f"slow hash of it).")

    @property
    def workers(self) -> int:
        """Submissions graded at once: ``jobs``, or one per core."""
        return self.jobs or os.cpu_count() or 1


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N), with 1 <= K <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ValueError(
            f"--shard {text!r} is not K/N with 1 <= K <= N. Give this machine's part of "
            f"the class, e.g. --shard 1/4 ... --shard 4/4 on four machines (a Slurm "
            f"array: --shard $((SLURM_ARRAY_TASK_ID+1))/$SLURM_ARRAY_TASK_COUNT)."
        )
    return int(match[1]), int(match[2])


def seed_check(seed: str, lab_id: str) -> str:
    """What OUT keeps of an instructor's --seed: a slow keyed hash, never the seed.

    Shards graded with one seed have equal checks, which is all `merge`
    needs; the seed itself (the hidden inputs) cannot be read back from
    OUT, short of guessing it (so give a long random one).
    """
    return hashlib.pbkdf2_hmac("sha256", seed.encode("utf-8", "surrogatepass"),
                               f"labkit seed check {lab_id}".encode(),
                               SEED_CHECK_ROUNDS).hex()


#: The instructor's files of a term, by option: `grade` reads them, a run into
#: OUT remembers them (autograder.pipeline.remembered_term), `slurm` and
#: `kubernetes` pass them on to every shard and the merge.
TERM_FILES = ("roster", "course_file", "times", "extensions", "overrides")


def flag_of(name: str) -> str:
    """The command-line flag of option ``name`` ("course_file" -> "--course")."""
    return {item.name: item for item in fields(GradingOptions)}[name].metadata["flag"]


def add_arguments(parser, command: str, groups: dict | None = None) -> None:
    """Add the flags of `command` ("grade" or "merge") to ``parser``, each from
    its declaration (`option`); ``groups`` maps a group name to an argparse
    argument group."""
    for item in fields(GradingOptions):
        meta = item.metadata
        if command == "merge" and not meta["merge"]:
            continue
        target = (groups or {}).get(meta["group"], parser)
        extra = dict(meta["argparse"])
        if item.type == "bool" or isinstance(item.default, bool):
            extra.setdefault("action", "store_true")
        elif "action" not in extra:
            extra.setdefault("default", item.default)
        target.add_argument(meta["flag"], dest=item.name, help=meta["help"], **extra)


def from_arguments(args, **given) -> GradingOptions:
    """The options of the flags ``add_arguments`` added, checked
    (GradingOptions says what is wrong); ``given`` wins (a seed read from a file)."""
    values = {}
    for item in fields(GradingOptions):
        if not hasattr(args, item.name):
            continue
        value = getattr(args, item.name)
        if item.metadata["invert"]:
            value = not value
        elif item.name == "only":
            value = tuple(value or ())
        values[item.name] = value
    values.update(given)
    return GradingOptions(**values)


#: The same, by flag name without its dashes ("course"): how `slurm` and
#: `kubernetes` name them.
TERM_FLAGS = tuple(flag_of(name).removeprefix("--") for name in TERM_FILES)
