"""The instructor's command line: `python -m autograder --help`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import warnings

from autograder.grader.options import GradingOptions, add_arguments, from_arguments
from autograder.grader.options import TERM_FLAGS

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# nbgrader 0.9 trips SQLAlchemy's autoflush warnings on every autograde; they
# are noise for the instructor (the gradebook is written correctly).
warnings.filterwarnings("ignore", message=".*not in session.*")


def _release(args) -> int:
    from autograder.labs import KIT_ROOT, available_labs, get_lab, public_repository_problem
    from autograder.grader.release import release, update_readme

    problem = public_repository_problem()
    if problem:
        print(f"warning: {problem}", file=sys.stderr)
    labs = [get_lab(args.lab)] if args.lab else available_labs()
    for lab in labs:
        started = time.monotonic()
        path = release(lab)
        print(f"{lab.id}: wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}"
              f" ({time.monotonic() - started:.1f} s)")
    # The kit's README and the students' (student/README.md, also labkit's
    # package description) carry the same generated table of Colab links.
    for readme in (KIT_ROOT / "README.md", KIT_ROOT / "student" / "README.md"):
        if readme.exists() and update_readme(readme):
            print(f"{readme.relative_to(KIT_ROOT)}: updated the Colab links of the labs")
    return 0


def _publish(args) -> int:
    from autograder.publish.repository import publish

    started = time.monotonic()
    done = publish(Path(args.dest), repository=args.repository, ref=args.ref,
                   replace=args.replace, git=args.git)
    print(f"Published {len(done.files)} files to {done.dest} "
          f"({time.monotonic() - started:.1f} s): labs pin labkit at {done.ref} of "
          f"{done.repository}")
    for lab_id, url in done.colab_urls.items():
        print(f"  {lab_id}: {url}")
    if done.commit:
        print(f"Committed {done.commit[:12]} and tagged {done.ref}. Push both: "
              f"cd {done.dest} && git push <remote> HEAD {done.ref}")
    else:
        print(f"Next: commit the folder, tag it {done.ref} and push both to {done.repository} "
              "(or publish again with --git to commit and tag here).")
    return 0


def database_url(url: str | None) -> str | None:
    """``--db`` checked before any grading starts.

    A PostgreSQL gradebook needs the driver psycopg, the kit's ``postgres``
    extra (SQLite, the default, needs nothing): without it, say how to
    install it rather than fail in every worker. ``postgresql://`` names
    psycopg, since SQLAlchemy's default driver for it (psycopg2) is not one
    the kit installs; a URL that names another driver is left as it is.
    """
    if not url:
        return url
    scheme, _, rest = url.partition("://")
    dialect, _, driver = scheme.partition("+")
    if dialect != "postgresql" or driver not in ("", "psycopg"):
        return url
    try:
        import psycopg  # noqa: F401 - only whether it is installed
    except ImportError:
        raise ValueError(
            "--db names a PostgreSQL gradebook, but its driver (psycopg) is not installed: "
            "pip install 'transformer-lab-kit[postgres]' (or leave --db out for the default "
            "SQLite gradebook in the course folder)") from None
    return f"postgresql+psycopg://{rest}"


def _seed(args) -> str | None:
    """--seed, or the seed read from --seed-file (which keeps it off the command
    line that ps and squeue show)."""
    if not getattr(args, "seed_file", None):
        return args.seed
    if args.seed:
        raise ValueError("give --seed or --seed-file, not both.")
    try:
        seed = Path(args.seed_file).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ValueError(f"--seed-file {args.seed_file}: {error.strerror or error}; give the "
                         f"file that holds the seed.") from None
    if not seed:
        raise ValueError(f"--seed-file {args.seed_file} is empty: write the seed in it.")
    return seed


def grading_options(args) -> GradingOptions:
    """The options of `grade` (or `merge`, which has only --db and --course-dir),
    built once from the command line's flags, each declared once with its option
    (autograder.grader.options), and checked (GradingOptions says what is wrong)."""
    if args.command == "grade":
        return from_arguments(args, seed=_seed(args))
    return from_arguments(args)


def _grade(args) -> int:
    args.db_url = database_url(args.db_url)
    options = grading_options(args)
    from autograder.pipeline import grade
    from autograder.grader.reports import write_gradebook_table
    from autograder.grader.results import NO_SUBMISSION

    started = time.monotonic()
    results, paths = grade(args.lab, Path(args.submissions), Path(args.out), options)
    print(write_gradebook_table(results))
    seconds = time.monotonic() - started
    part = f" (shard {args.shard})" if args.shard else ""
    missing = sum(r.status == NO_SUBMISSION for r in results)
    print(f"\n{len(results) - missing} submissions of {args.lab}{part} graded in "
          f"{seconds:.1f} s." + (f" {_count(missing, 'enrolled student')} sent nothing "
                                 f"(0 points)." if missing else ""))
    if "unmatched.csv" in paths:
        with open(paths["unmatched.csv"], encoding="utf-8") as handle:
            files = sum(1 for _ in handle) - 1
        print(f"{_count(files, 'file')} {'matches' if files == 1 else 'match'} no one on the "
              f"roster, not graded: {paths['unmatched.csv']} (and report.html) says whose "
              f"{'it seems' if files == 1 else 'they seem'} to be.", file=sys.stderr)
    print(f"Grades:   {Path(args.out) / 'grades.csv'}")
    print(f"Report:   {Path(args.out) / 'report.html'}")
    print(f"Feedback: {Path(args.out) / 'feedback'}/")
    return _regrade_status(results)


#: The exit status of a run that left rows to grade again (sysexits.h's
#: EX_TEMPFAIL: a temporary failure, the same command may succeed).
EXIT_REGRADE = 75


def _regrade_status(results) -> int:
    """Say on the terminal which rows must be graded again (the grader or
    the machine failed twice on them: results.NEEDS_REGRADING), and the
    run's exit status: EXIT_REGRADE where there are any, else 0."""
    from autograder.grader.results import needs_regrading

    again = [r.student_id for r in results if needs_regrading(r.status)]
    if not again:
        return 0
    one = len(again) == 1
    shown = ", ".join(again[:10]) + (", ..." if len(again) > 10 else "")
    print(f"{_count(len(again), 'submission')} could not be graded: the grader or the machine "
          f"failed twice on {'it' if one else 'each'}, not the notebook (grades.csv's status "
          f"says why): {shown}. Run the same command again to grade "
          f"{'it' if one else 'them'} again.", file=sys.stderr)
    return EXIT_REGRADE


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def _merge(args) -> int:
    args.db_url = database_url(args.db_url)
    options = grading_options(args)
    from autograder.pipeline import merge
    from autograder.grader.reports import write_gradebook_table

    started = time.monotonic()
    results, _ = merge(args.lab, [Path(p) for p in args.shards], Path(args.out), options,
                       allow_missing=args.allow_missing)
    print(write_gradebook_table(results))
    print(f"\n{len(results)} submissions of {args.lab} merged from {len(args.shards)} "
          f"folders in {time.monotonic() - started:.1f} s.")
    print(f"Grades:   {Path(args.out) / 'grades.csv'}")
    print(f"Report:   {Path(args.out) / 'report.html'}")
    print(f"Feedback: {Path(args.out) / 'feedback'}/")
    return _regrade_status(results)


def _export(args) -> int:
    from autograder.text import clean_text
    from autograder.term.export import README, export

    done = export(Path(args.out), args.to, dest=Path(args.dest) if args.dest else None,
                  assignment=args.assignment, moodle_key=args.moodle_key, lab=args.lab,
                  late=args.late, moodle_route=args.moodle_route,
                  worksheet=Path(args.worksheet) if args.worksheet else None,
                  max_grade=args.max_grade)
    print(f"Exported {done.grades} grades and {done.feedback} feedback pages of {args.lab} "
          f"for {args.to} into {done.dest}:")
    for name in sorted(done.files):
        print(f"  {name}")
    for student_id, why in done.skipped:
        print(f"  no feedback file for {clean_text(student_id, keep_lines=False)}: "
              f"{clean_text(why, keep_lines=False)}")
    _print_notes_and_steps(done.notes, done.steps)
    print(f"(The same in {done.dest / README}.)")
    return 0


def _print_notes_and_steps(notes: list[str], steps: list[str],
                           between: tuple[str, ...] | list[str] = ()) -> None:
    """What an export (one lab's, or the term's) prints last: "Read first:" and
    its notes, any ``between`` lines, then the numbered steps (also in its
    README.txt)."""
    from autograder.text import clean_text

    if notes:
        print("Read first:")
        for note in notes:
            print(f"  - {clean_text(note, keep_lines=False)}")
    for line in between:
        print(line)
    print("Steps:")
    for number, step in enumerate(steps, 1):
        print(f"  {number}. {clean_text(step, keep_lines=False)}")


def _term(args) -> int:
    from autograder.labs import KIT_ROOT, read_course_file
    from autograder.text import clean_text
    from autograder.term.whole import TermSettings, build_gradebook, parse_lab_arguments
    from autograder.term.whole_files import rule_text, write_term

    course = Path(args.course) if args.course else KIT_ROOT / "course.toml"
    settings = TermSettings.from_settings(
        read_course_file(course).get("term"), course.parent, parse_lab_arguments(args.labs),
        Path(args.excused) if args.excused else None)
    book = build_gradebook(settings)
    done = write_term(book, Path(args.out), moodle_key=args.moodle_key)
    print(f"The term: {_count(len(book.labs), 'lab')} "
          f"({', '.join(lab.lab for lab in book.labs)}), {_count(len(book.rows), 'student')}, "
          f"into {done.dest}:")
    for name in sorted(done.files):
        print(f"  {name}")
    print(clean_text(rule_text(book), keep_lines=False))
    not_written = [f"Not written: the {lms} import: {clean_text(why, keep_lines=False)}"
                   for lms, why in done.not_written.items()]
    _print_notes_and_steps(book.notes + done.notes, done.steps, between=not_written)
    print(f"(The same in {done.dest / 'README.txt'}; the report in {done.dest / 'term.html'}.)")
    return 0


def _gradescope(args) -> int:
    from autograder.scaleout.gradescope import build_bundle

    started = time.monotonic()
    bundle = build_bundle(args.lab, Path(args.out))
    print(f"Wrote {bundle.path} ({bundle.files} files, {time.monotonic() - started:.1f} s): "
          f"the Gradescope autograder of {bundle.lab}.")
    print("Upload it to Gradescope: the programming assignment > Configure Autograder > Zip "
          "file upload (Ubuntu base image), then Update Autograder; the build grades the blank "
          "notebook once as a self-test. It holds the hidden tests: never give it to students.")
    v = bundle.visibility
    print(f"Visibility (course.toml [gradescope]): results {v.visibility}, each exercise "
          f"{v.tests_visibility}, the grader's log {v.stdout_visibility}.")
    return 0


def _gradescope_run(args) -> int:
    from autograder.scaleout import gradescope

    if args.self_test:
        results = gradescope.self_test()
        print(f"self-test: graded the blank notebook, {len(results['tests'])} exercises, "
              f"score {results['score']}")
        return 0
    results = gradescope.run(Path(args.root))
    print(json.dumps({k: results[k] for k in ("score", "execution_time") if k in results}))
    return 0


def _slurm(args) -> int:
    from autograder.scaleout import slurm

    term = {name: getattr(args, name) for name in TERM_FLAGS}
    run = slurm.prepare(args.lab, Path(args.submissions), Path(args.out), args.shards,
                        seed=args.seed, partition=args.partition, account=args.account,
                        time=args.time, mem=args.mem, cpus_per_task=args.cpus_per_task,
                        sbatch_args=tuple(args.sbatch_arg or ()), term=term)
    print(f"Wrote {run.grade_script} ({run.shards} array tasks: grade --shard K/{run.shards})")
    print(f"  and {run.merge_script} (merge into {run.out / 'class'}, then the term's rules "
          f"and the similarity check over the whole class).")
    if args.dry_run:
        print("Dry run: nothing submitted. Submit them with:")
        for command in run.commands:
            print("  " + " ".join(command))
        for script in (run.grade_script, run.merge_script):
            print(f"\n--- {script.name} ---\n{script.read_text()}", end="")
        return 0
    slurm.submit(run)
    print(f"Submitted: array job {run.job_ids[0]} (grading), job {run.job_ids[1]} (merge, "
          f"after every task succeeds). Follow them with: squeue -j "
          f"{','.join(run.job_ids)}")
    print(f"The class's results: {run.out / 'class' / 'grades.csv'} and report.html, once "
          f"the merge job has finished; each task's log in {run.out / 'slurm'}/.")
    return 0


def _kubernetes(args) -> int:
    from autograder.scaleout import kubernetes

    term = {name: getattr(args, name) for name in TERM_FLAGS}
    made = kubernetes.write(args.lab, Path(args.out), args.shards, args.image, args.submissions,
                            pvc=args.pvc, seed_secret=args.seed_secret,
                            namespace=args.namespace, cpu=args.cpu, memory=args.memory,
                            bubblewrap=args.bubblewrap, term=term)
    print(made.text())
    return 0


def _demo(args) -> int:
    from autograder.labs import KIT_ROOT, available_labs

    status = 0
    for lab in available_labs():
        samples = KIT_ROOT / "data" / "sample_submissions" / lab.id
        if not samples.exists():
            continue
        print(f"== {lab.title}: grading {samples.relative_to(KIT_ROOT)} ==")
        out = Path(args.out) / lab.id
        # Through the real parser: every option of `grade` gets its default.
        status |= _grade(build_parser().parse_args(
            ["grade", lab.id, str(samples), "--out", str(out), "--seed", args.seed,
             "--regrade"]))
        print()
    return status | _demo_term(args)


def _demo_term(args) -> int:
    """The README's walk through a term, on the sample term (data/sample_term/):
    lab 1 from a Canvas download, with the roster, the late policy, an
    extension and an override, then exported for Canvas."""
    from autograder.labs import KIT_ROOT

    term = KIT_ROOT / "data" / "sample_term"
    if not (term / "lab1_canvas.zip").exists():
        return 0
    out = Path(args.out) / "term-lab1"
    print(f"== A term: lab 1 from Canvas, with its roster and late policy "
          f"({term.relative_to(KIT_ROOT)}) ==")
    status = _grade(build_parser().parse_args(
        ["grade", "lab1", str(term / "lab1_canvas.zip"), "--out", str(out), "--roster",
         str(term / "roster.csv"), "--course", str(term / "course.toml"), "--times",
         str(term / "lab1_submissions.json"), "--overrides",
         str(term / "overrides.csv"), "--seed", args.seed, "--regrade"]))
    print()
    return status | _export(build_parser().parse_args(
        ["export", "lab1", str(out), "--to", "canvas"]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Release and grade the Transformer labs (nbgrader underneath).",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    release = commands.add_parser("release", help="regenerate the student notebooks in labs/")
    release.add_argument("lab", nargs="?", help="lab id (default: every lab with a source)")
    release.set_defaults(func=_release)

    publish = commands.add_parser(
        "publish", help="write the student repository (labs, labkit, README, licence) to DEST")
    publish.add_argument("dest", help="a new or empty folder (or a previous publication, "
                                      "with --replace)")
    publish.add_argument("--repository", help="the public repository the labs install labkit "
                                              "from (default: course.toml [public] repository)")
    publish.add_argument("--ref", help="the tag the labs pin (default: course.toml [public] ref)")
    publish.add_argument("--replace", action="store_true",
                         help="clear DEST first (its .git is kept)")
    publish.add_argument("--git", action="store_true",
                         help="commit DEST (git init if needed) and tag it with the ref")
    publish.set_defaults(func=_publish)

    grade = commands.add_parser("grade", help="grade a folder or zip of submissions")
    grade.add_argument("lab", help="lab id, e.g. lab1")
    grade.add_argument("submissions", help="folder of .ipynb files, or a .zip from the LMS")
    grade.add_argument("--out", required=True, help="folder for grades.csv, reports, feedback")
    grade.add_argument("--seed-file", type=Path,
                       help="read --seed from this file (off the command line: `slurm` uses it)")
    term = grade.add_argument_group(
        "the term", "roster, deadlines, overrides and similarity (docs/instructors.md, "
                    "\"A term with the kit\")")
    add_arguments(grade, "grade", {"term": term})
    grade.set_defaults(func=_grade)

    merge = commands.add_parser(
        "merge", help="join the OUT folders of `grade --shard K/N` runs into one")
    merge.add_argument("lab", help="lab id, e.g. lab1")
    merge.add_argument("shards", nargs="+", help="the OUT folder of each shard")
    merge.add_argument("--out", required=True, help="a new folder for the whole class")
    add_arguments(merge, "merge")
    merge.add_argument("--allow-missing", action="store_true",
                       help="merge even when a shard or a student's result is missing")
    merge.set_defaults(func=_merge)

    export = commands.add_parser(
        "export", help="write a graded lab's grades and feedback for Canvas, Moodle or a CSV")
    export.add_argument("lab", help="lab id, e.g. lab1 (checked against OUT's class.json)")
    export.add_argument("out", help="the --out folder of `grade`")
    export.add_argument("--to", required=True, choices=("canvas", "moodle", "csv"),
                        help="the LMS whose import files to write")
    export.add_argument("--dest", help="output folder (default: OUT/export/<to>)")
    export.add_argument("--assignment", help="the grade column's name (Canvas: \"Name (id)\" "
                        "as the gradebook's export heads it; default: the roster's column of "
                        "the lab, else the lab's title; Moodle gradebook: default the lab's "
                        "title)")
    export.add_argument("--late", choices=("kit", "lms"), default="kit",
                        help="who takes the late penalty: kit (default: the scores after the "
                             "kit's penalty; turn the LMS's own deduction off, as printed) or "
                             "lms (the scores before it; the LMS's late policy decides)")
    export.add_argument("--moodle-route", choices=("worksheet", "gradebook"),
                        default="worksheet",
                        help="Moodle: worksheet (default: the assignment's grading worksheet, "
                             "the roster grade read, with Grade and Feedback comments filled "
                             "in) or gradebook (a CSV for the gradebook's import)")
    export.add_argument("--worksheet", metavar="FILE",
                        help="Moodle: the grading worksheet to fill in (default: the roster "
                             "the lab was graded with); a fresh download after an earlier "
                             "upload; with --moodle-route gradebook, read for the Maximum "
                             "grade and the grades Moodle holds")
    export.add_argument("--max-grade", type=float, metavar="N",
                        help="Moodle: the assignment's (grade item's) Maximum grade in Moodle; "
                             "when it is not the lab's points the grades are scaled to N "
                             "(default: the lab's points, checked against the worksheet)")
    export.add_argument("--moodle-key", choices=("email", "id_number"), default="email",
                        help="how Moodle's gradebook import finds each student (default: email)")
    export.set_defaults(func=_export)

    whole = commands.add_parser(
        "term", help="the whole term in one gradebook: every lab's graded OUT, the weights, "
                     "drops and excused labs of course.toml [term]; term.csv, term.html and "
                     "Canvas, Moodle and CSV imports with a column per lab")
    whole.add_argument("labs", nargs="*", metavar="LAB=OUT",
                      help="each lab and the --out folder it was graded into, e.g. "
                           "lab1=lab1-out lab4=lab4-out (default: course.toml [term] labs)")
    whole.add_argument("--out", required=True, help="folder for term.csv, term.html, export/")
    whole.add_argument("--course", help="the course settings with [term] (default: the kit's "
                                       "course.toml)")
    whole.add_argument("--excused", help="CSV student_id,lab,reason of excused labs (default: "
                                        "course.toml [term] excused)")
    whole.add_argument("--moodle-key", choices=("email", "id_number"), default="email",
                      help="how Moodle's gradebook import finds each student (default: email)")
    whole.set_defaults(func=_term)

    gradescope = commands.add_parser(
        "gradescope", help="write a lab's Gradescope autograder bundle (grading at submission "
                           "time on Gradescope)")
    gradescope.add_argument("lab", help="lab id, e.g. lab1")
    gradescope.add_argument("--out", required=True, help="the bundle, a .zip to upload")
    gradescope.set_defaults(func=_gradescope)

    gradescope_run = commands.add_parser(
        "gradescope-run", help="(what a bundle runs on Gradescope) grade ROOT/submission and "
                               "write ROOT/results/results.json")
    gradescope_run.add_argument("--root", default="/autograder",
                                help="Gradescope's folder (default /autograder)")
    gradescope_run.add_argument("--self-test", action="store_true",
                                help="grade the lab's blank notebook (setup.sh's last step)")
    gradescope_run.set_defaults(func=_gradescope_run)

    slurm = commands.add_parser(
        "slurm", help="grade a class across a Slurm cluster: an array job of shards, then a "
                      "dependent merge")
    slurm.add_argument("lab", help="lab id, e.g. lab1")
    slurm.add_argument("submissions", help="folder or .zip of the class, on shared storage")
    slurm.add_argument("--out", required=True, help="folder for the shards, logs and OUT/class")
    slurm.add_argument("--shards", type=int, required=True, help="array tasks (e.g. one a node)")
    slurm.add_argument("--seed", help="the hidden inputs' seed (default: a fresh secret one)")
    slurm.add_argument("--partition")
    slurm.add_argument("--account")
    slurm.add_argument("--time", help="each task's time limit, e.g. 01:00:00")
    slurm.add_argument("--mem", help="each task's memory, e.g. 16G")
    slurm.add_argument("--cpus-per-task", type=int, default=2,
                       help="CPUs of each task, the submissions it grades at once (default 2)")
    slurm.add_argument("--sbatch-arg", action="append", metavar="ARG",
                       help="any other sbatch option, e.g. --sbatch-arg=--qos=short (repeat)")
    for name in TERM_FLAGS:
        slurm.add_argument(f"--{name}", type=Path, help=f"as grade's --{name}")
    slurm.add_argument("--dry-run", action="store_true",
                       help="write and print the scripts and sbatch commands; submit nothing")
    slurm.set_defaults(func=_slurm)

    k8s = commands.add_parser(
        "kubernetes", help="write an indexed Job of shards, a merge Job and the grader's "
                           "Dockerfile for a Kubernetes cluster")
    k8s.add_argument("lab", help="lab id, e.g. lab1")
    k8s.add_argument("submissions", help="the class's folder or .zip inside the volume, "
                                         "e.g. /data/lab1/submissions.zip")
    k8s.add_argument("--out", required=True, help="folder for the manifests and Dockerfile")
    k8s.add_argument("--shards", type=int, required=True, help="pods grading at once")
    k8s.add_argument("--image", required=True, help="the grader's image, by tag (e.g. "
                     "registry.example.edu/cs101/labkit:2026) or digest (...@sha256:<hex>)")
    k8s.add_argument("--pvc", required=True, help="the PersistentVolumeClaim mounted at /data")
    k8s.add_argument("--seed-secret", default="labkit-seed",
                     help="the Secret whose key `seed` holds the seed (default labkit-seed)")
    k8s.add_argument("--namespace", help="the namespace of the Jobs (in every printed "
                                          "kubectl step as -n NAMESPACE)")
    k8s.add_argument("--cpu", default="2", help="CPUs of each pod (default 2)")
    k8s.add_argument("--memory", default="8Gi", help="memory of each pod (default 8Gi)")
    k8s.add_argument("--bubblewrap", action="store_true",
                     help="run bubblewrap in the pods: seccomp Unconfined and a non-root "
                          "user, which Pod Security baseline forbids (default: root with 7 "
                          "capabilities under RuntimeDefault, a user of its own for each "
                          "student kernel: passes baseline)")
    for name in TERM_FLAGS:
        k8s.add_argument(f"--{name}", metavar="PATH",
                         help=f"as grade's --{name}: a path in the volume, under /data")
    k8s.set_defaults(func=_kubernetes)

    demo = commands.add_parser("demo", help="grade the bundled sample submissions")
    demo.add_argument("--out", default="demo_output", help="output folder (default: demo_output)")
    demo.add_argument("--seed", default="demo", help="seed of the hidden tests' inputs")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from autograder import tempdirs
    from autograder.grader import faults

    # Ctrl-C, SIGTERM and SIGHUP stop the run with a sentence, not a traceback
    # (autograder.grader.faults says what is left after each fault).
    handlers = faults.stop_on_signals()
    try:
        # The run's folder of temporary folders, made before any worker starts
        # so that the workers join it; dead runs' folders go first.
        tempdirs.run_folder()
        return args.func(args)
    except ValueError as error:
        from autograder.text import clean_text

        print(f"error: {clean_text(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        return _stopped(stop)
    except faults.DiskFull as error:
        print(faults.disk_full_sentence(faults.full_path(error)), file=sys.stderr)
        return faults.EXIT_DISK_FULL
    except faults.RunStopped as error:
        print(error, file=sys.stderr)
        return error.exit_status
    except Exception as error:
        stopping = faults.stopping()
        if stopping is not None:     # a signal a library turned into its own error
            return _stopped(faults.Interrupted(stopping))
        if not faults.is_disk_full(error):
            raise
        print(faults.disk_full_sentence(faults.full_path(error)), file=sys.stderr)
        return faults.EXIT_DISK_FULL
    finally:
        faults.restore_signals(handlers)


def _stopped(stop: KeyboardInterrupt) -> int:
    """Say where an interrupted run stopped; a shell's exit status for its signal."""
    from autograder.grader import faults

    stop = stop if isinstance(stop, faults.Interrupted) else faults.Interrupted()
    progress = faults.progress
    if progress.total is None:
        said = "interrupted before grading began; the same command starts it again"
    else:
        said = f"interrupted: {progress.so_far()}; the same command goes on"
    print(f"\n{said}", file=sys.stderr, flush=True)
    return stop.exit_status
