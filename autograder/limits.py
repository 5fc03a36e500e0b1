"""Every limit the grader puts on a submission, in one place, each with its reason.

Time limits, memory caps and sizes that were numbers scattered through the
command line, the grading process, the sandbox and the test kernel live
here; those modules import them (the command line's defaults and help text
included), so one edit changes a limit everywhere it applies. This module
imports nothing: the test kernel (autograder.testkernel) reads it too.

Limits kept where they are, by reference:

- ``autograder.grader.submissions.archives.MAX_FILE_BYTES``, ``MAX_ARCHIVE_BYTES``,
  ``MAX_ARCHIVE_MEMBERS``: the bounds on a submitted file and on a zip
  from the LMS (checked while the submissions are listed);
- ``autograder.kernels.forkserver.server.SANDBOX_WAIT_S`` and the fork server's
  start-up wait (``autograder.kernels.forkserver.client.READY_WAIT_S``): that module runs as a script, by its path, in the
  kernels' minimal environment, and imports nothing of the kit (a forked
  kernel must carry no module a fresh kernel lacks);
- ``autograder.studentkernel.glue``: sent as text into the student's
  kernel, it cannot import either.
"""

# -- time ---------------------------------------------------------------------

#: CPU seconds one student cell may use (``grade --cell-timeout``; the wall
#: clock's backstop: WALL_BACKSTOP_FACTOR). The labs'
#: cells run in seconds with their solutions (lab5 loads a trained model
#: unless TRAIN = True), so 120 s leaves room for a loaded machine and a
#: slow honest answer while an endless loop costs two minutes at most.
CELL_TIMEOUT_S = 120

#: The wall clock's backstop behind every time limit of the student's code
#: (a call, a cell, the notebook), as a multiple of the limit. The limits
#: are in CPU seconds used by the kernel's processes (autograder.cputime:
#: a call or cell ends once it has used its limit of CPU and as many
#: seconds have passed), so a loaded machine cannot time out an honest
#: answer; the wall clock still ends, at 5 times the limit, a kernel that
#: waits (a sleep, input that never comes): the student's doing. A kernel
#: that is runnable but starved has STARVED_BACKSTOP_FACTOR instead.
#: DOMjudge and other contest judges keep the same shape: a CPU limit, and
#: a wall-clock limit a multiple of it.
WALL_BACKSTOP_FACTOR = 5

#: The wall clock's backstop where the kernel's processes were mostly
#: runnable yet given little CPU (a machine loaded past its cores: 48 busy
#: loops on 2 cores slow every process 25 times), as a multiple of the
#: limit: the code was not waiting, the machine was slow, so the grading
#: goes on, slowly, up to 30 times the limit (a cell of 120 s: an hour).
#: Past it, the machine's fault: the submission is graded again, then
#: flagged "needs regrading" (never points taken).
STARVED_BACKSTOP_FACTOR = 30

#: CPU seconds the whole notebook may use (``grade --notebook-timeout``): a
#: lab runs top to bottom in 10-30 s on 2 cores, so 900 s (15 min) is
#: generous for honest work and bounds a notebook of many slow cells,
#: each under CELL_TIMEOUT_S, to a known share of the class's run.
NOTEBOOK_TIMEOUT_S = 900

#: Seconds for each provided (locked) cell before the first answer: the
#: instructor's set-up cells import TensorFlow and friends, which on a
#: loaded machine can outlast CELL_TIMEOUT_S; they are not the student's code.
SETUP_CELL_TIMEOUT_S = 300

#: Seconds a graded test cell may run where the instructor set no cell
#: limit (``--cell-timeout 0``): the hidden tests still end, in the time a
#: set-up cell has.
TESTS_CELL_TIMEOUT_UNSET_S = SETUP_CELL_TIMEOUT_S

#: Seconds the test kernel has to start and to run its start-up and
#: per-submission set-up code: it imports NumPy and the lab's references
#: (Keras, for some), as long as a set-up cell of the student's at worst.
TESTS_KERNEL_START_TIMEOUT_S = 120

#: Seconds to close a submission's session in the test kernel; longer
#: means it is stuck, and it is replaced rather than handed on.
TESTS_SESSION_END_TIMEOUT_S = 30

#: CPU seconds a single call from a hidden test into the student's kernel
#: may take (the wall clock's backstop: WALL_BACKSTOP_FACTOR) before it is interrupted and counted as a failure of that test: a
#: forward pass of a lab's model on the tests' small inputs takes well
#: under a second, so 60 s only ever stops a hung or endless answer.
CALL_TIMEOUT_S = 60

#: Seconds (on the wall clock) the pictures of a submission's
#: failed exercises may take (autograder.grader.pictures), once the notebook
#: has run: each is one or two calls on a visible check's small example;
#: past it the page shows no picture and the grade is untouched.
PICTURES_TIMEOUT_S = 30

#: Seconds to bind a test cell's names to proxies into the student's
#: kernel: one call into it, so CALL_TIMEOUT_S.
TESTS_BIND_TIMEOUT_S = CALL_TIMEOUT_S

#: Seconds to learn whether bubblewrap works on this machine (one ``true``
#: run in a sandbox, milliseconds when it works); past that it does not.
BUBBLEWRAP_CHECK_TIMEOUT_S = 20

# -- memory and sizes -----------------------------------------------------------

#: The test kernel's memory cap, as data segment (RLIMIT_DATA: private
#: writable memory, what arrays take; an address-space cap would also count
#: what TensorFlow and CUDA reserve without using). Measured with lab2's
#: references running Keras: 0.5 GiB of data segment, 2.2 GiB of address
#: space (more on a GPU machine). Answers are capped at MAX_ANSWER_BYTES by
#: their headers before they are read, and a test converts one to float64
#: and compares it, a few copies at most: 3 GiB.
TESTS_KERNEL_MEMORY_BYTES = 3 * 1024**3

#: Answers larger than this are refused unread (a student's kernel could
#: otherwise exhaust the test kernel's memory): the arrays of one answer once
#: loaded, by their .npy headers, before any is inflated. The labs' largest
#: answers (a model's weights, a batch of logits) are a few MiB.
MAX_ANSWER_BYTES = 256 * 2**20

#: The JSON part of an answer (values other than arrays: numbers, strings,
#: references): small for every exercise, and a JSON parser needs several
#: times its size in memory.
MAX_ANSWER_JSON_BYTES = 8 * 2**20

#: What a student's exception may show on their feedback page, at most: a
#: message to read, not a channel for the hidden inputs.
MAX_MESSAGE_CHARS = 300

#: A student kernel's memory (address space on a CPU machine, data segment
#: where it sees a GPU: autograder.kernels.isolation.common.rlimits): the labs' models
#: are small and every lab's solution runs under it with TensorFlow
#: imported, while a memory bomb stops at 6 GiB instead of starving the
#: grader and the kernels graded beside it.
KERNEL_MEMORY_BYTES = 6 * 1024**3

#: The largest file a student kernel may write (RLIMIT_FSIZE): no lab
#: writes more than a checkpoint of a few MiB.
KERNEL_FILE_SIZE_BYTES = 256 * 1024**2

#: Processes and threads a student kernel may start beyond those its user
#: already runs (RLIMIT_NPROC counts every one of the user's: where the
#: grader is root, those of the kernel's own user; else the grader's and the
#: other kernels' too). TensorFlow starts a few dozen threads a kernel;
#: 4096 stops a fork bomb long before the machine's own limit.
KERNEL_PROCESSES = 4096

#: Files a student kernel may hold open (RLIMIT_NOFILE): ipykernel,
#: ZeroMQ and TensorFlow need a few hundred.
KERNEL_OPEN_FILES = 4096

#: Sizes of the sandbox's tmpfs mounts, the only file systems a student
#: kernel can write (but for its ipc folder), held in the machine's memory:
#: so a kernel holds at most 832 MiB of files beside its memory cap
#: (``fills_disks`` of the hostile suite). /tmp for libraries' caches,
#: the scratch (working) folder for what a notebook saves, /dev/shm for
#: the shared memory of multiprocessing and some BLAS builds.
SANDBOX_TMP_BYTES = 256 * 1024**2
SANDBOX_SCRATCH_BYTES = 512 * 1024**2
SANDBOX_SHM_BYTES = 64 * 1024**2

#: What the grader keeps of a student cell's output (the messages its
#: kernel publishes: printed text, images, errors; counted as they arrive,
#: in bytes on the wire), and of the whole notebook's: past either, the
#: rest is dropped unread and the cell ends with a line that says how much
#: (autograder.kernels.jupyter.StudentOutputChannel). Output nobody keeps
#: (a thread that prints after its cell, or while the hidden tests run) is
#: dropped whatever its size. A lab's notebook prints a few KB a cell and
#: shows plots of about 100 KB; nbgrader's LimitOutput keeps 1000 lines of a
#: text output anyway. A thread printing 250 x 4 MB during the hidden
#: tests grew the grader to 3.1 GiB before (hostile case ``output_flood``).
MAX_CELL_OUTPUT_BYTES = 2**20
MAX_NOTEBOOK_OUTPUT_BYTES = 8 * 2**20

#: The largest message part the grader reads from a student kernel's output
#: (ZeroMQ's MAXMSGSIZE): ZeroMQ allocates a part whole before anyone sees
#: it, and ipykernel sends all that was printed in 0.2 s as one message (a
#: flood of prints is one message of hundreds of MB). A larger part resets
#: the connection unread (the grader connects again, the cell says so);
#: one up to this size is read and dropped with its size said when it is
#: past MAX_CELL_OUTPUT_BYTES.
MAX_OUTPUT_MESSAGE_BYTES = 2 * 2**20

#: Output messages ZeroMQ holds for the grader (RCVHWM; ZeroMQ's default is
#: 1000): with MAX_OUTPUT_MESSAGE_BYTES, at most 128 MiB of a kernel's
#: unread output. Past them ZeroMQ stops reading; the kernel queues 1000
#: more messages on its side (in its own memory), then drops what it
#: publishes. The grader reads them as they come (ahead of nbclient, while
#: a cell runs; every 0.05 s, unread, while the hidden tests run).
OUTPUT_MESSAGES_QUEUED = 64

#: A status, execute_input or clear_output message of a student kernel
#: larger than this is not ipykernel's: it is dropped unread.
MAX_STATUS_MESSAGE_BYTES = 16 * 2**10

#: The largest message part on the student kernel's other channels (shell
#: replies, whose tracebacks can be long; control, stdin): a bound on what
#: a forged reply makes the grader allocate, far above what a kernel sends.
MAX_REPLY_MESSAGE_BYTES = 64 * 2**20

#: The most characters of a failure's reason kept in a student's status
#: (grades.csv, the report): enough for the exception and its message,
#: short enough to read in a table cell.
MAX_STATUS_CHARS = 300

# -- CPU and processes of a kernel (cgroups: autograder.kernels.cgroups) -------------

#: Tasks (processes and threads: pids.max counts both) a student kernel's
#: cgroup may hold, where the machine has cgroups. Measured on 2 cores, an
#: ipykernel kernel holds 13 tasks; with TensorFlow and Keras imported and a
#: small attention model fitted, 30 at its peak (27 with KERAS_BACKEND=
#: tensorflow, 21 after). TensorFlow's thread pools grow with the cores: with
#: its two pools and OpenMP at 64 threads each (a 64-core machine's
#: defaults, where the grader does not set THREAD_ENV) the same kernel peaks
#: at 155 tasks, at 128 each at 283. 512 leaves that room, is far below
#: KERNEL_PROCESSES (4096, which counts a user's every process), and stops a
#: fork bomb at a few hundred tasks.
KERNEL_TASKS = 512

#: The least CPU a kernel's cgroup may use (cpu.max / cpu.cfs_quota_us),
#: in cores: a kernel's share is the cores over the kernels run at once
#: (autograder.kernels.cgroups.groups.kernel_cpu_cores), and TensorFlow's start
#: and a lab's cells are timed for one core at least.
KERNEL_MIN_CPU_CORES = 1.0

#: The nice value of a student kernel where no cgroup can bound it (a
#: container whose cgroups are read-only): below the grader's priority, so
#: a notebook's busy processes cannot starve the grader's own work, though
#: kernels graded side by side then share the CPU only as the scheduler's
#: sessions allow. RLIMIT_NPROC (KERNEL_PROCESSES) then bounds processes.
KERNEL_FALLBACK_NICE = 10

#: Seconds to kill what runs in a kernel's (or the run's) cgroup and remove
#: it: SIGKILL ends a process at once, but a process in uninterruptible
#: sleep (D) ends when its I/O does.
CGROUP_KILL_WAIT_S = 5
