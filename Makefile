# Transformer lab kit. Everything installs through this file:
#   make demo   build .venv if missing, regenerate the labs, grade the samples
#   make test   build .venv if missing, lint (make lint), run the whole test suite
#   make test-fast  lint, then the suite without the tests marked slow (batches graded,
#               notebooks run): a few minutes
#   make lint   ruff, with the rules of pyproject.toml's [tool.ruff], then mypy over
#               autograder/, student/labkit/ and the hidden tests' modules ([tool.mypy])
#   make test-verdicts  the verdict suite's kernel tier whole: every variant and mistake
#               notebook graded through the CLI (make test grades a sample)
#   make test-backends / test-torch / test-jax   the labs under PyTorch and JAX (own suites)
#   make test-slurm  a class graded through a real one-node Slurm (own suite)
#   make test-browser  every lab's feedback page and report.html in headless Chromium at
#               1280 and 390 px (tests/grader/test_browser.py, marker browser; make test checks
#               lab 4's; 2-3 minutes, the six labs graded at once)
#   make chromium  Debian's Chromium, for the browser tests (make test installs it)
#   make test-container  the user layer under a default Docker container's restrictions,
#               reproduced as root (tests/container.py; own suite, about a minute)
#   make test-faults  the grader struck from outside: the CLI interrupted, killed, out
#               of disk; a kernel stopped or killed during a hidden test (own suite)
#   make test-warnings  every lab's solution and correct variants run top to bottom: no
#               provided cell prints a warning; `labkit check` on the labs make test
#               leaves out (own suite, about 10 minutes on 2 cores)
#   make test-plain  `grade --plain` against the fast grading on every lab's samples, and
#               --kernels fresh against fork (own suite, about 10 minutes)
#   make test-load  grades independent of the machine's load (benchmarks/load.py): correct
#               notebooks graded beside 48 busy loops, and beside a notebook that starts
#               300 busy processes while another class is graded; full marks, none flagged
#               (own check, not in make test; LOAD_ARGS="--count 2 --loops 8" for a look)
#   make test-moodle-term  a Moodle term end to end (benchmarks/moodle_term.py): a 30-student
#               class of lab1 and lab4 built as Moodle writes it (4.1+, 4.0 and flat
#               downloads, worksheets with overrides downloaded in another zone), graded,
#               exported and joined with the documented commands, every output checked
#               (own check, not in make test; 11-12 minutes on 2 cores beside others' work)
#   make test-compat  the compatibility matrix: a venv per row (the kit's pins, Colab's
#               Python/TensorFlow/Keras/NumPy, the oldest Keras labkit allows) built in
#               .cache/studentenvs/; in each, labkit installed as students do, every lab's
#               solution run (no cell may raise) and graded (full marks), every sample's
#               visible checks compared with the grader's env; then writes
#               docs/compatibility.md and the README's table (half an hour, builds included)
#   make labs   regenerate labs/ from solutions/
#   make constraints  refresh constraints.txt, the pins of the whole tested environment
#   make publish DEST=dir   write the student repository there (git commit + tag)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
OUT    ?= demo_output

.PHONY: constraints env sandbox postgres slurm chromium torch jax labs publish demo lint test test-fast test-faults test-warnings test-verdicts test-backends test-compat test-slurm test-browser test-container test-load test-moodle-term test-torch test-jax bench clean help

help:
	@echo "make demo | make test | make test-fast | make test-compat | make test-plain | make lint | make labs | make publish DEST=dir | make bench | make clean"

$(STAMP): pyproject.toml student/pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ./student -e ".[dev,postgres]" -c constraints.txt
	@touch $(STAMP)

# constraints.txt pins the whole tested environment. Refreshed here from a new
# resolution of pyproject.toml's ranges, in a virtual environment of its own
# (.cache/constraints-venv); then run make test and commit the file.
constraints:
	rm -rf .cache/constraints-venv
	$(PYTHON) -m venv .cache/constraints-venv
	.cache/constraints-venv/bin/python -m pip install -q --upgrade pip
	.cache/constraints-venv/bin/python -m pip install -q -e ./student -e ".[dev,postgres]"
	{ sed -n '/^#/p' constraints.txt; .cache/constraints-venv/bin/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .cache/constraints-venv
	@echo "constraints.txt refreshed: run make test, then commit it."

# The grader's sandbox needs bubblewrap (Debian/Ubuntu: apt-get install
# bubblewrap). Installed here when we can (root with apt-get); without it the
# grader still runs, without file-system and network isolation, and says so.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing bubblewrap (the grader's sandbox)..."; \
	    (apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1)) || \
	    echo "warning: could not install bubblewrap; grading runs without the sandbox."; \
	  else \
	    echo "warning: bubblewrap (bwrap) not found; install it for the grader's sandbox."; \
	  fi; }

# tests/grader/test_postgres.py grades into a real PostgreSQL server that it starts
# on loopback (Debian's package); the test is skipped, saying why, without it.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing PostgreSQL (for the --db postgresql test)..."; \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null 2>&1)) || \
	    echo "warning: could not install PostgreSQL; its test will be skipped."; \
	  else \
	    echo "note: PostgreSQL not found; tests/grader/test_postgres.py will be skipped."; \
	  fi; }

# The slurm tests (marker slurm, make test-slurm) run jobs on a real one-node
# Slurm that they start on loopback (tests/slurm_cluster.py) from Debian's
# packages; they are skipped, saying why, without them.
SLURM_PACKAGES = slurmctld slurmd slurm-client munge
slurm:
	@{ command -v sbatch && command -v slurmctld && command -v slurmd && command -v munged; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Slurm and munge (for the slurm tests)..."; \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(SLURM_PACKAGES) >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(SLURM_PACKAGES) >/dev/null 2>&1)) || \
	    echo "warning: could not install Slurm; the slurm tests will be skipped."; \
	  else \
	    echo "note: Slurm not found; the slurm tests (pytest -m slurm) will be skipped."; \
	  fi; }

# tests/grader/test_browser.py opens the pages the kit writes in headless Chromium
# (Debian's package; driven over the DevTools protocol by websocket-client, the
# dev extra); the tests are skipped, saying why, without it.
chromium:
	@{ command -v chromium || command -v chromium-browser; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Chromium (for the browser tests)..."; \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1)) || \
	    echo "warning: could not install Chromium; the browser tests will be skipped."; \
	  else \
	    echo "note: Chromium not found; tests/grader/test_browser.py will be skipped."; \
	  fi; }

# The student kernels' user layer (autograder.kernels.isolation.user) where bubblewrap
# cannot start: a class graded inside a default Docker container's restrictions,
# reproduced as root on this machine (tests/container.py: runc's masked /proc,
# Docker's default capabilities and seccomp denials). Needs root on x86-64.
test-container: env
	$(PY) -m pytest -m container tests/kernels/test_container.py

# Grades independent of the machine's load (issue 45, item 8): benchmarks/load.py
# asserts full marks and no row flagged for correct notebooks graded beside busy
# loops (each in a session of its own) and beside a notebook that starts 300 busy
# processes; prints the figures (LOAD_ARGS="--write-docs" writes them into
# docs/performance.md). Its own check, not part of make test: it loads the machine.
test-load: env
	$(PY) benchmarks/load.py $(LOAD_ARGS)

# Issue 46's acceptance run (benchmarks/moodle_term.py): a 30-student Moodle class of
# lab1 and lab4 (every download version, the grading worksheets with overrides, in a
# TA's zone) graded, exported and joined into the term with the documented commands;
# prints the figures and each check, exits 1 when one fails. Its own check, not part
# of make test (MOODLE_TERM_ARGS="--keep DIR" keeps the class and the OUT folders;
# "--write-docs" writes the figures into docs/performance.md).
test-moodle-term: env
	$(PY) benchmarks/moodle_term.py $(MOODLE_TERM_ARGS)

# The grader struck from outside (tests/grader/test_faults.py, tests/grader/test_machine_faults.py):
# the CLI interrupted (Ctrl-C, SIGTERM, SIGHUP), killed, a worker killed, the disk
# full; a student kernel stopped for 5 s or killed during a hidden test; and
# tests/kernels/test_userlayer.py's record spy (two kernels at once, which make test's busy
# workers do not always give). Each grades a small class through the CLI: a few
# minutes, its own suite.
test-faults: env
	$(PY) -m pytest $(PARALLEL) -m faults

# `grade --plain` (every speed-up off) against the fast grading: every lab's samples
# graded both ways, every score compared (tests/grader/test_plain.py; make test: lab 1).
test-plain: env
	$(PY) -m pytest $(PARALLEL) -m plain

# Every provided cell of every lab prints no warning (tests/student/test_no_warnings.py): the
# solution and each correct variant of the verdict suite run top to bottom as a
# student runs them (38 notebooks, 20 to 140 s each: docs/performance.md); and
# `labkit check` on the labs make test leaves out (tests/student/test_ready.py).
test-warnings: env
	$(PY) -m pytest $(PARALLEL) -m notebooks tests/student/test_no_warnings.py tests/student/test_ready.py

# Other Keras backends, CPU builds (tests/labs/test_backends.py grades every lab's
# solution under each one installed; make test-torch runs the verdict suite).
# PyTorch's CPU wheel is pinned; without it pip would fetch the CUDA build.
torch: $(STAMP)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==2.13.0" || \
	  echo "warning: could not install PyTorch; the torch backend tests will be skipped."

jax: $(STAMP)
	@$(PY) -c "import jax" 2>/dev/null || $(PY) -m pip install -q "jax[cpu]" || \
	  echo "warning: could not install JAX; the jax backend tests will be skipped."

env: $(STAMP) sandbox

labs: env
	$(PY) -m autograder release

# The student repository (labs, labkit, README, licence), committed and tagged
# with course.toml's [public] ref: make publish DEST=../my-course-labs
publish: env
	@test -n "$(DEST)" || { echo "usage: make publish DEST=<folder of the student repository>"; exit 2; }
	$(PY) -m autograder publish "$(DEST)" --replace --git

demo: env labs
	$(PY) -m autograder demo --out $(OUT)

# Lint first: a finding fails in seconds, not after the half-hour suite.
lint: $(STAMP)
	$(PY) -m ruff check . && $(PY) -m mypy

# The suites run in two pytest-xdist workers, a test file to a worker (its
# module fixtures, a lab's CLI batch, computed once): one worker alone left a
# core idle half the time (kernels waiting on each other, CLI start-ups).
# PARALLEL= runs them in one process, PARALLEL="-n 4 --dist loadfile" in four.
PARALLEL ?= -n 2 --dist loadfile

test: env lint postgres chromium
	$(PY) -m pytest $(PARALLEL) -m "not backends and not compat and not slurm and not container and not faults and not notebooks and not browser and not plain"

# Every lab's feedback page and report.html in headless Chromium, at 1280 and
# 390 px (tests/grader/test_browser.py; make test runs lab 4's). BROWSER_SCREENSHOTS=docs/screenshots
# writes the README's screenshots (lab 4's grace and report).
test-browser: env chromium
	$(PY) -m pytest tests/grader/test_browser.py

# A class graded through a real one-node Slurm (tests/scaleout/test_slurm.py's cluster
# test, tests/scaleout/test_slurm_cluster.py): Slurm and munge from Debian's packages,
# started on loopback by the tests; skipped, saying why, where they cannot be.
test-slurm: env slurm
	$(PY) -m pytest -m slurm tests/scaleout/test_slurm.py tests/scaleout/test_slurm_cluster.py

# Every lab's solution graded under PyTorch and JAX (tests/labs/test_backends.py,
# about a minute a backend, plus installing them): other backends are a suite
# of their own, like test-torch and test-jax below.
test-backends: env torch jax
	$(PY) -m pytest -m backends

# The compatibility matrix (tests/student/test_compat.py, marker compat; the Makefile's
# header says what it does). The docs are written from the run even when a test
# fails (they say which), then make fails with pytest's status.
test-compat: env
	$(PY) -m pytest -m compat tests/student/test_compat.py tests/student/test_student_path.py tests/student/test_studentenv.py; status=$$?; \
	  $(PY) -m tests.compat_docs; exit $$status

# Everything but the tests marked slow (pyproject.toml lists the markers).
test-fast: env lint
	$(PY) -m pytest $(PARALLEL) -m "not slow and not backends and not slurm and not container and not faults and not notebooks and not browser"

# The verdict suite's kernel tier whole: every variant and mistake notebook of
# every lab graded through the CLI (make test grades a sample of the mistake
# notebooks; every entry runs in process in make test and make test-fast).
test-verdicts: env
	VERDICT_SAMPLE=all $(PY) -m pytest $(PARALLEL) tests/labs/test_verdicts.py

# The verdict suite and every lab's grading tests under another backend.
BACKEND_TESTS = tests/labs/test_verdicts.py tests/labs/test_verdicts_inprocess.py tests/grader/test_grading.py
test-torch: env torch
	KERAS_BACKEND=torch VERDICT_SAMPLE=all $(PY) -m pytest $(PARALLEL) $(BACKEND_TESTS)

test-jax: env jax
	KERAS_BACKEND=jax VERDICT_SAMPLE=all $(PY) -m pytest $(PARALLEL) $(BACKEND_TESTS)

# Grading speed against plain serial nbgrader (issue 9): labs 1-4, 40
# submissions each; BENCH_ARGS="--labs lab1 --count 10" for a quick look.
bench: env
	$(PY) benchmarks/grading_speed.py $(BENCH_ARGS)

clean:
	rm -rf $(OUT) build .pytest_cache
