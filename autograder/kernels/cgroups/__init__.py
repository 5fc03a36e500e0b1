"""Each student kernel's CPU and processes, bounded by a cgroup of its own.

Why: a notebook that starts 300 busy processes, each in a session of its own
(``setsid``), starved the correct notebook graded beside it. Linux's
scheduler is fair between sessions (autogroup, sched(7)), and a notebook
makes as many sessions as it likes. Here every student kernel, and
everything it starts, runs in a control group of its own under one group
for the grading process (the run's), so that

- the kernels get equal shares of the CPU whatever their process counts
  (equal weights, and tasks in a cgroup other than the root's are out of
  autogroup's reach);
- a kernel gets at most the CPU it was given (a quota: its share of the
  machine, the cores over the run's jobs, at least one core);
- its tasks (processes and threads) are bounded, and the grader can tell
  that the bound was hit (the student is told "your notebook started more
  than N processes"); RLIMIT_NPROC cannot do that, counting per user;
- the CPU time of everything that ran in it, the dead included, can be read
  (the grader limits a cell by that, not by the wall clock).

What holds where (``detect`` tries, in this order, by creating and removing
a probe group, never by reading mount flags alone; the run prints
``Bound.describe``):

- cgroup v2 (Documentation/admin-guide/cgroup-v2.rst), the unified
  hierarchy at /sys/fs/cgroup or a cgroup2 mount elsewhere: ``cpu.max``
  ("$MAX $PERIOD", the quota in microseconds a period), ``cpu.weight``
  (100, the default: equal shares), ``pids.max``; usage from ``cpu.stat``
  (``usage_usec``); hits of the limit from ``pids.events`` (``max``; since
  Linux 6.13 that counts hits of this group's own limit and
  ``pids.events.local`` the forks refused in it, the larger is taken); the
  whole group ended with ``cgroup.kill``. The "no internal process
  constraint": a group may enable controllers for its children only while
  it holds no process of its own (the root excepted). So the run's group
  is created in this process's own group (the ``0::`` line of
  /proc/self/cgroup) where that already gives its children ``cpu`` and
  ``pids`` (``cgroup.subtree_control``: the root); else, where this process
  is alone in its group (a container's, a delegated one: systemd's
  Delegate=yes), in that group after this process moved into a leaf of it
  (``labkit-grader-<pid>``, left in place) and gave the group's children
  the two controllers (``detect(adopt=False)`` does not); else in the
  nearest ancestor that gives them. The run's group enables them for its
  kernels itself. No other group is written to: a grader that shares its
  group with other processes gets the next bound.
- cgroup v1 (Documentation/admin-guide/cgroup-v1/): one hierarchy for each
  controller (or several mounted together), so a kernel's group is one
  directory in each of the ``cpu`` hierarchy (``cpu.cfs_quota_us`` over
  ``cpu.cfs_period_us``, scheduler/sched-bwc.rst; ``cpu.shares`` 1024, the
  default), the ``cpuacct`` one (``cpuacct.usage``, nanoseconds, children
  and the dead included: cgroup-v1/cpuacct.rst) and the ``pids`` one
  (``pids.max``, ``pids.events``: cgroup-v1/pids.rst). v1 has no
  ``cgroup.kill``: every process listed is sent SIGKILL until none is.
- none (a container whose /sys/fs/cgroup is read-only, or a user without a
  delegated subtree): ``Bound.reason`` says why; the caller falls back to
  the process limit (RLIMIT_NPROC) and a lower priority
  (``autograder.limits.KERNEL_FALLBACK_NICE``).

The run's group weighs (cpu.weight, cpu.shares) its live kernels' count
times the default, so that the grading run's share of a machine it shares
with other work is what it was when each kernel was a session of its own.

A launcher joins a kernel's group in one of two ways: the command prefix
``KernelGroup.join_command_prefix()`` (a shell that writes "0", meaning
itself, into each ``cgroup.procs``, then execs the rest: ``prlimit``,
``bwrap`` and the kernel all start inside), or ``KernelGroup.join(pid)``
(``join_paths``: for the fork server's child, before it enters the
sandbox's namespaces; it needs only ``os``, so a script that imports
nothing of the kit can copy it). Writing "0" moves the writer on v1 and v2
alike (cgroup_procs_write_start in kernel/cgroup/cgroup.c). The kernel's
own user cannot leave its group: the group's files are the grader's.

The modules: `detection` (``detect``, ``Bound``: what holds here) and
`groups` (``RunGroup``, ``KernelGroup``, ``join_paths``, ``kernel_cpu_cores``).
Here: this grading process's bound and run's group, made once
(``cpu_bound``, ``new_kernel_group``), which the kernel manager
(autograder.kernels.jupyter.SandboxKernelManager) starts each kernel in.

Use::

    bound = detection.detect()             # once, early; print bound.describe(cores)
    if bound.available:
        run = groups.RunGroup(bound)       # run.close() at the end (or ``with``)
        kernel = run.new_kernel_group(groups.kernel_cpu_cores(jobs), KERNEL_TASKS)
        command = kernel.join_command_prefix() + command   # or kernel.join(pid)
        ... kernel.cpu_seconds(), kernel.pids_limit_hits() ...
        kernel.remove()
"""

from __future__ import annotations

import atexit
import multiprocessing.util

from autograder.kernels.cgroups import detection, groups

#: The bound on each student kernel's CPU and processes in this grading
#: process (detection.detect, once) and the group of its kernels' groups
#: (made at the first kernel, removed at exit).
_cpu_bound: detection.Bound | None = None
_run_group: groups.RunGroup | None = None


def cpu_bound() -> detection.Bound:
    """What bounds a student kernel's CPU and processes here (a cgroup v2 or
    v1 of its own, or none: then a lower priority and RLIMIT_NPROC)."""
    global _cpu_bound
    if _cpu_bound is None:
        _cpu_bound = detection.detect()
    return _cpu_bound


def describe_cpu_bound(jobs: int) -> str:
    """The bound in force, as the run says it (with the isolation)."""
    bound = cpu_bound()
    cores = groups.kernel_cpu_cores(jobs) if bound.available else None
    return bound.describe(cores)


def new_kernel_group(cpu_cores: float) -> tuple[groups.KernelGroup | None, str]:
    """A cgroup for one kernel, or None and why not."""
    global _run_group
    bound = cpu_bound()
    if not bound.available:
        return None, bound.reason
    try:
        if _run_group is None:
            groups.remove_dead_runs(bound)
            _run_group = groups.RunGroup(bound)
            # At exit: a worker process of a pool ends through multiprocessing's
            # own exit function, which runs its finalizers, not atexit's.
            atexit.register(_close_run_group)
            multiprocessing.util.Finalize(None, _close_run_group, exitpriority=10)
        return _run_group.new_kernel_group(cpu_cores or None), ""
    except OSError as error:
        return None, f"its cgroup could not be made ({type(error).__name__}: {error})"


def _close_run_group() -> None:
    global _run_group
    if _run_group is not None:
        _run_group.close()
        _run_group = None
