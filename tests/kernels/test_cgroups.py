"""autograder.kernels.cgroups: a cgroup for each student kernel, on this
machine's real cgroups (skipped, with the reason, where none is writable),
and the file formats of cgroup v2 on a fake tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.kernels.cgroups import detection, files, groups
from autograder.limits import KERNEL_TASKS

BOUND = detection.detect()
needs_cgroups = pytest.mark.skipif(
    not BOUND.available or (BOUND.kind == "v1" and os.geteuid() != 0),
    reason=f"no writable cgroup here: {BOUND.describe()}")


@pytest.fixture
def run_group() -> Iterator[groups.RunGroup]:
    run = groups.RunGroup(BOUND)
    try:
        yield run
    finally:
        left = run.close()
        assert left == [], f"groups left behind: {left}"
        assert not any(h.path.exists() for h in run.hierarchies)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _python(code: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", textwrap.dedent(code)]


def _busy_children(count: int, seconds: float) -> str:
    """Code that forks ``count`` children, each busy for ``seconds`` in a
    session of its own (as a notebook's runaway processes are), and waits."""
    return f"""
        import os, time
        end = time.monotonic() + {seconds}
        children = []
        for _ in range({count}):
            pid = os.fork()
            if pid == 0:
                os.setsid()
                while time.monotonic() < end:
                    pass
                os._exit(0)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)
    """


def test_detect_says_which_bound_holds() -> None:
    text = BOUND.describe(1.0, KERNEL_TASKS)
    if BOUND.kind == "v2":
        assert text.startswith("cgroup v2 (") and "cpu.max 1 core" in text
    elif BOUND.kind == "v1":
        assert text.startswith("cgroup v1 (") and "cpu.cfs_quota_us 1 core" in text
    else:
        assert text.startswith("none (") and BOUND.reason
    assert f"pids.max {KERNEL_TASKS} a kernel" in text or BOUND.kind == "none"
    assert groups.kernel_cpu_cores(jobs=4, cores=16) == 4.0
    assert groups.kernel_cpu_cores(jobs=4, cores=2) == 1.0


def test_detect_never_raises(tmp_path: Path) -> None:
    missing = detection.detect(mountinfo=str(tmp_path / "nothing"))
    assert missing.kind == "none" and "nothing" in missing.reason
    # A container's cgroups, mounted read-only.
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "31 23 0:28 / /sys/fs/cgroup ro,relatime - tmpfs tmpfs ro,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct ro,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        "39 31 0:36 / /sys/fs/cgroup/pids ro,relatime - cgroup cgroup rw,pids\n"
        "41 31 0:38 / /sys/fs/cgroup/unified ro,relatime - cgroup2 cgroup2 rw\n")
    own = tmp_path / "cgroup"
    own.write_text("2:cpu,cpuacct:/\n1:pids:/\n0::/\n")
    bound = detection.detect(mountinfo=str(mountinfo), own=str(own))
    assert bound.kind == "none"
    assert "cgroup v2 at /sys/fs/cgroup/unified: mounted read-only" in bound.reason
    assert "/sys/fs/cgroup/cpu,cpuacct is read-only" in bound.reason
    assert bound.describe().startswith("none (cgroup v2 at")
    assert bound.describe().endswith("processes limited by RLIMIT_NPROC and nice 10")
    own.write_text("garbage")
    assert detection.detect(mountinfo=str(mountinfo), own=str(own)).kind == "none"


def test_a_mount_of_part_of_a_hierarchy(tmp_path: Path) -> None:
    """A container's mount shows its own subtree (mountinfo's root field)."""
    (tmp_path / "x").mkdir()
    mount = detection._Mount(root="/docker/abc", point=str(tmp_path), writable=True,
                             fstype="cgroup2", super_options=("rw",))
    assert detection._locate(mount, "/docker/abc/x") == tmp_path / "x"
    assert detection._locate(mount, "/docker/abc") == tmp_path
    assert detection._locate(mount, "/docker/abcd") is None
    assert detection._locate(mount, "/elsewhere") is None


def test_v2_files_on_a_fake_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a v2 kernel group writes and reads, on plain files."""
    monkeypatch.setattr(files, "write", lambda path, text: Path(path).write_text(text))
    bound = detection.Bound("v2", (groups.Hierarchy(tmp_path, groups.V2_CONTROLLERS),))
    run = groups.RunGroup(bound)
    assert run.name.startswith("labkit-")
    assert (tmp_path / run.name / "cgroup.subtree_control").read_text() == "+cpu +pids"
    kernel = run.new_kernel_group(1.5, 300)
    folder = tmp_path / run.name / "kernel-1"
    assert kernel.paths == (folder,)
    assert (folder / "cpu.max").read_text() == "150000 100000"
    assert (folder / "cpu.weight").read_text() == "100"
    assert (folder / "pids.max").read_text() == "300"
    (folder / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n"
                                     "system_usec 500000\nnr_periods 0\n")
    assert kernel.cpu_seconds() == 2.5
    assert kernel.pids_limit_hits() == 0
    (folder / "pids.events").write_text("max 3\n")
    (folder / "pids.events.local").write_text("max 4\n")
    assert kernel.pids_limit_hits() == 4
    (folder / "cgroup.procs").write_text("")
    assert kernel.pids() == [] and kernel.kill(0.1)
    assert run.new_kernel_group(None).paths == (tmp_path / run.name / "kernel-2",)
    assert not (tmp_path / run.name / "kernel-2" / "cpu.max").exists()


def test_the_join_prefix_takes_paths_as_arguments(tmp_path: Path) -> None:
    """Paths with spaces and shell syntax are written to, never run."""
    folders = [tmp_path / "a b", tmp_path / "$(touch pwned); x"]
    for folder in folders:
        folder.mkdir()
        (folder / "cgroup.procs").write_text("")
    group = groups.KernelGroup("v1", tuple(groups.Hierarchy(folder, ("cpu",))
                                           for folder in folders), 1.0, 8, create=False)
    done = subprocess.run(group.join_command_prefix() + ["sh", "-c", 'echo "ran: $0 $1"', "--",
                                                         "x y"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran: -- x y\n"
    assert [(folder / "cgroup.procs").read_text() for folder in folders] == ["0\n", "0\n"]
    assert not (tmp_path / "pwned").exists()
    group = groups.KernelGroup("v1", (groups.Hierarchy(tmp_path / "missing", ("cpu",)),),
                               1.0, 8, create=False)
    done = subprocess.run(group.join_command_prefix() + ["echo", "ran"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 126 and done.stdout == ""
    assert "labkit: cannot join the cgroup" in done.stderr


@needs_cgroups
def test_the_quota_holds_and_usage_counts_every_child(run_group: groups.RunGroup) -> None:
    kernel = run_group.new_kernel_group(1.0, 64)
    assert kernel.cpu_seconds() == 0.0
    start = time.monotonic()
    done = subprocess.run(kernel.join_command_prefix() + _python(_busy_children(8, 1.5) + """
        times = os.times()
        print(times.children_user + times.children_system, times.user + times.system)
    """), capture_output=True, text=True, timeout=30, check=True)
    wall = time.monotonic() - start
    children, own = map(float, done.stdout.split())
    used = kernel.cpu_seconds()
    # Everything that ran in the group, the dead children included...
    assert children - 0.05 <= used <= children + own + 0.2, (used, children, own)
    # ...and at most one core: 8 busy processes on 2 cores would take 2.
    assert used <= wall * 1.0 + 0.15, (used, wall)
    assert used >= 0.1, f"the group got {used:.2f} s of CPU in {wall:.2f} s"
    assert kernel.pids() == [] and kernel.pids_limit_hits() == 0
    assert kernel.remove() == []


@needs_cgroups
def test_the_task_limit_stops_a_fork_loop(run_group: groups.RunGroup) -> None:
    kernel = run_group.new_kernel_group(1.0, 16)
    done = subprocess.run(kernel.join_command_prefix() + _python("""
        import os, time
        started = 0
        try:
            while started < 200:
                if os.fork() == 0:
                    os.setsid()
                    null = os.open(os.devnull, os.O_WRONLY)     # the pipes end with the loop
                    os.dup2(null, 1)
                    os.dup2(null, 2)
                    time.sleep(60)
                    os._exit(0)
                started += 1
        except BlockingIOError as error:
            print("refused", started, error.errno)
    """), capture_output=True, text=True, timeout=30, check=True)
    word, started, code = done.stdout.split()
    assert word == "refused" and code == "11", done.stdout          # EAGAIN
    assert int(started) == 15            # 16 tasks: the loop's process and 15
    left = kernel.pids()
    assert len(left) == 15 and kernel.tasks() == 15
    assert kernel.pids_limit_hits() >= 1
    assert kernel.remove() == []
    assert not any(path.exists() for path in kernel.paths)
    assert not any(_alive(pid) for pid in left)


@needs_cgroups
def test_kill_ends_processes_that_ignore_sigterm(run_group: groups.RunGroup) -> None:
    kernel = run_group.new_kernel_group(1.0, 64)
    process = subprocess.Popen(kernel.join_command_prefix() + _python("""
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _ in range(3):
            if os.fork() == 0:
                os.setsid()
                time.sleep(60)
                os._exit(0)
        print("ready", flush=True)
        time.sleep(60)
    """), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        inside = kernel.pids()
        assert process.pid in inside and len(inside) == 4
        os.kill(process.pid, signal.SIGTERM)
        time.sleep(0.05)
        assert _alive(process.pid)
        assert kernel.kill() and kernel.pids() == []
        assert process.wait(5) == -signal.SIGKILL
        assert not any(_alive(pid) for pid in inside)
        assert kernel.remove() == []
        assert not any(path.exists() for path in kernel.paths)
    finally:
        process.kill()
        process.wait()


@needs_cgroups
def test_run_close_ends_every_kernel(tmp_path: Path) -> None:
    run = groups.RunGroup(BOUND)
    processes = []
    try:
        for _ in range(2):
            kernel = run.new_kernel_group(1.0, 16)
            processes.append(subprocess.Popen(kernel.join_command_prefix()
                                              + ["sh", "-c", "trap '' TERM; sleep 60 & wait"]))
        deadline = time.monotonic() + 5
        while sum(len(k.pids()) for k in run._kernels) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sum(len(k.pids()) for k in run._kernels) == 4
    finally:
        left = run.close()
        for process in processes:
            process.kill()
            process.wait()
    assert left == [] and not any(h.path.exists() for h in run.hierarchies)


@needs_cgroups
def test_a_forked_child_joins(run_group: groups.RunGroup) -> None:
    kernel = run_group.new_kernel_group(1.0, 16)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                          # the child: join, say so, wait to be killed
        try:
            os.close(read)
            kernel.join()
            os.write(write, b"ok")
            time.sleep(30)
        except BaseException as error:
            os.write(write, repr(error).encode())
        finally:
            os._exit(1)
    try:
        os.close(write)
        assert os.read(read, 1000) == b"ok"
        assert kernel.pids() == [pid]
        own = Path(f"/proc/{pid}/cgroup").read_text()
        assert own.count(f"/{run_group.name}/kernel-1\n") == len(kernel.paths), own
        assert kernel.remove() == []
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    finally:
        os.close(read)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@needs_cgroups
def test_one_process_keeps_its_core_beside_forty(run_group: groups.RunGroup) -> None:
    """The measured problem: 40 busy processes, each in a session of its own,
    beside a kernel with one. With a group each and a core each on 2 cores,
    the one keeps most of its core (without, it got 2 cores / 41)."""
    many, one = run_group.new_kernel_group(1.0, 64), run_group.new_kernel_group(1.0, 64)
    crowd = subprocess.Popen(many.join_command_prefix() + _python(_busy_children(40, 3.0)))
    try:
        time.sleep(0.3)
        before, start = many.cpu_seconds(), time.monotonic()
        done = subprocess.run(one.join_command_prefix() + _python("""
            import time
            start, cpu = time.monotonic(), time.process_time()
            while time.monotonic() - start < 2.0:
                pass
            print(time.process_time() - cpu, time.monotonic() - start)
        """), capture_output=True, text=True, timeout=30, check=True)
        crowd_rate = (many.cpu_seconds() - before) / (time.monotonic() - start)
        cpu, wall = map(float, done.stdout.split())
        # On an idle machine the one gets most of a core, as many seconds as
        # the forty get together; where others load the machine too, at
        # least most of the forty's rate (and always far above the 2/41 of a
        # core it got without cgroups).
        assert cpu / wall > 0.6 * min(1.0, crowd_rate) and cpu / wall > 0.15, (
            f"one process got {cpu:.2f} s of CPU in {wall:.2f} s, "
            f"forty got {crowd_rate:.2f} s a second")
        assert crowd_rate <= 1.1                          # their quota held
        assert crowd.wait(10) == 0
    finally:
        crowd.kill()
        crowd.wait()


def _fake_v2(tmp_path: Path, procs: str) -> tuple[str, str, Path]:
    """A cgroup2 mount at tmp/cg; this process in /a/b, which holds
    ``procs``; /a gives its children cpu and pids."""
    mount = tmp_path / "cg"
    own = mount / "a" / "b"
    own.mkdir(parents=True)
    for folder in (mount, mount / "a", own):
        (folder / "cgroup.controllers").write_text("cpu io memory pids\n")
        (folder / "cgroup.subtree_control").write_text("")
    (mount / "cgroup.subtree_control").write_text("cpu pids\n")
    (mount / "a" / "cgroup.subtree_control").write_text("cpu pids\n")
    for folder in (mount / "a", own):
        (folder / "cgroup.type").write_text("domain\n")
    (own / "cgroup.procs").write_text(procs)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"41 31 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n")
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("0::/a/b\n")
    return str(mountinfo), str(cgroup), own


def test_v2_detection_on_a_fake_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's group goes under the nearest group that gives cpu and pids;
    a grader alone in its group adopts it; one that is not leaves it be."""
    monkeypatch.setattr(files, "write", lambda path, text: Path(path).write_text(text))
    probed: list[detection.Bound] = []
    monkeypatch.setattr(detection, "_probe", lambda bound: probed.append(bound))
    mountinfo, cgroup, own = _fake_v2(tmp_path / "shared", f"{os.getpid()}\n1\n")
    bound = detection.detect(mountinfo=mountinfo, own=cgroup)
    assert bound.kind == "v2" and bound.parents == (groups.Hierarchy(own.parent, ("cpu", "pids")),)
    assert (own / "cgroup.subtree_control").read_text() == ""
    assert not list(own.glob("labkit-*"))

    mountinfo, cgroup, own = _fake_v2(tmp_path / "alone", f"{os.getpid()}\n")
    bound = detection.detect(mountinfo=mountinfo, own=cgroup)
    assert bound.kind == "v2" and bound.parents == (groups.Hierarchy(own, ("cpu", "pids")),)
    leaf = own / f"labkit-grader-{os.getpid()}"
    assert (leaf / "cgroup.procs").read_text() == "0"
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +pids"
    assert "moved to" in bound.reason

    mountinfo, cgroup, own = _fake_v2(tmp_path / "kept", f"{os.getpid()}\n")
    bound = detection.detect(adopt=False, mountinfo=mountinfo, own=cgroup)
    assert bound.parents == (groups.Hierarchy(own.parent, ("cpu", "pids")),)
    (own.parent.parent / "cgroup.subtree_control").write_text("")
    (own.parent / "cgroup.subtree_control").write_text("")
    bound = detection.detect(adopt=False, mountinfo=mountinfo, own=cgroup)
    assert bound.kind == "none" and "no-internal-process rule" in bound.reason


def _v2_core() -> Path | None:
    """This process's group in a writable cgroup v2 hierarchy, where the
    bound found is not v2 (then the v2 tests above cover it)."""
    if BOUND.kind == "v2" or os.geteuid() != 0:
        return None
    try:
        own_groups = detection._own_groups("/proc/self/cgroup")
        for mount in detection._mounts("/proc/self/mountinfo"):
            if mount.fstype == "cgroup2" and mount.writable:
                return detection._locate(mount, own_groups.get(""))
    except OSError:
        pass
    return None


V2_CORE = _v2_core()


@pytest.mark.skipif(V2_CORE is None, reason="no writable cgroup v2 hierarchy beside v1 here")
def test_v2_without_controllers(tmp_path: Path) -> None:
    """cgroup v2's core (no controller needed: cgroup.procs, cpu.stat,
    cgroup.kill) on a machine whose cpu and pids are v1's: joining, the CPU
    of the dead children, killing and removing."""
    assert V2_CORE is not None
    try:
        run = groups.RunGroup(detection.Bound("v2", (groups.Hierarchy(V2_CORE, ()),)))
    except OSError as error:
        pytest.skip(f"cannot create a group in {V2_CORE}: {error}")
    try:
        kernel = run.new_kernel_group(1.0, 16)
        assert not (kernel.paths[0] / "cpu.max").exists()
        done = subprocess.run(kernel.join_command_prefix() + _python("""
            import os, time
            for _ in range(2):
                if os.fork() == 0:
                    end = time.monotonic() + 0.3
                    while time.monotonic() < end:
                        pass
                    os._exit(0)
            os.wait(); os.wait()
            times = os.times()
            print(times.children_user + times.children_system, times.user + times.system)
        """), capture_output=True, text=True, timeout=30, check=True)
        children, own = map(float, done.stdout.split())
        assert children - 0.05 <= kernel.cpu_seconds() <= children + own + 0.2
        process = subprocess.Popen(kernel.join_command_prefix()
                                   + ["sh", "-c", "trap '' TERM; sleep 60 & sleep 60 & wait"])
        try:
            deadline = time.monotonic() + 5
            while len(kernel.pids()) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            inside = kernel.pids()
            assert len(inside) == 3 and (kernel.paths[0] / "cgroup.kill").exists()
            assert kernel.kill() and process.wait(5) == -signal.SIGKILL
            assert not any(_alive(pid) for pid in inside)
        finally:
            process.kill()
            process.wait()
        assert kernel.remove() == [] and not kernel.paths[0].exists()
    finally:
        assert run.close() == []


@needs_cgroups
def test_the_groups_a_killed_grader_left_are_removed_by_the_next_run() -> None:
    # A grading process killed before its close (SIGKILL: no atexit, no
    # finalizer) leaves its run's group; the next run removes it, and never
    # the group of a grader that still runs.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = groups.RunGroup(BOUND, name=f"{groups.PREFIX}{gone.pid}-0badc0de")
    dead.new_kernel_group(None)
    alive = groups.RunGroup(BOUND, name=f"{groups.PREFIX}{os.getpid()}-0badc0de")
    try:
        removed = groups.remove_dead_runs(BOUND)
        assert {str(h.path) for h in dead.hierarchies} <= set(removed)
        assert not any(h.path.exists() for h in dead.hierarchies)
        assert all(h.path.exists() for h in alive.hierarchies)
    finally:
        dead.close()
        alive.close()
