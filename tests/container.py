"""Run a command under the restrictions of a default Docker container, as root.

``python -m tests.container -- COMMAND...`` (root only) starts COMMAND

- in a PID namespace and a mount namespace of its own, with a fresh /proc
  whose paths are masked and made read-only as Docker asks runc to for
  every container (``MaskedPaths`` and ``ReadonlyPaths`` of
  ``DefaultLinuxSpec`` in moby/moby oci/defaults.go, read at commit
  0a8650917ad0; runc's own ``runc spec`` example adds
  /sys/devices/virtual/tpm): so bubblewrap's ``--proc /proc`` fails there
  as in opencontainers/runc#1658;
- with the capabilities of Docker's default set only (``DefaultCapabilities``
  in the same file: CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW,
  SETGID, SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL,
  AUDIT_WRITE), in the bounding set too: no CAP_SYS_ADMIN;
- under a seccomp filter with what Docker's default profile (moby's
  profiles/seccomp/default.json) denies a container without CAP_SYS_ADMIN
  that matters here: ``unshare``, ``setns``, ``mount``, ``umount2``,
  ``pivot_root``, the new mount API, ``keyctl``/``add_key``/``request_key``,
  ``bpf``, ``userfaultfd`` (EPERM); ``clone`` only when its flags masked
  with 2114060288 are 0 (the profile's ``SCMP_CMP_MASKED_EQ`` rule: no
  namespace flag; EPERM otherwise), and ``clone3`` with ``errnoRet`` 38
  (ENOSYS, so that libc falls back to ``clone``).

So what the grader does there is what it would do in a default container:
bubblewrap cannot make its namespaces, the grader falls back to its user
layer, and that layer's own network namespace is refused too. This is a
reproduction on this machine, not a container runtime: the file system,
the network and the cgroups are the host's. Only for x86-64 (the filter
names its system call numbers); elsewhere it refuses to run.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
#: Every namespace flag of clone(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
#: NEWUSER, NEWPID, NEWNET (Docker's profile: 2114060288).
NAMESPACE_FLAGS = 0x7E020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18

#: Docker's defaults (moby/moby oci/defaults.go, DefaultLinuxSpec).
MASKED_PATHS = ("/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                "/proc/sched_debug", "/proc/scsi", "/sys/firmware")
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")

#: Docker's default capabilities (moby/moby oci/defaults.go,
#: DefaultCapabilities), by number (include/uapi/linux/capability.h).
DOCKER_CAPS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5,
               "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13,
               "SYS_CHROOT": 18, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31}

#: x86-64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED = {"unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
          "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
          "fsmount": 432, "fspick": 433, "mount_setattr": 442, "keyctl": 250,
          "add_key": 248, "request_key": 249, "bpf": 321, "userfaultfd": 323}
CLONE, CLONE3 = 56, 435
AUDIT_ARCH_X86_64 = 0xC000003E


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _mount(source, target, fstype, flags, data=None) -> None:
    _check(libc.mount(source and source.encode(), target.encode(),
                      fstype and fstype.encode(), flags, data and data.encode()),
           f"mount {target}")


def mask_proc() -> None:
    """A fresh /proc for the new PID namespace, masked as runc does."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in MASKED_PATHS:
        if not os.path.exists(path):
            continue
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY)
        else:
            _mount("/dev/null", path, None, MS_BIND)
    for path in READONLY_PATHS:
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(path, path, None, MS_BIND | MS_REC | MS_REMOUNT | MS_RDONLY)


def seccomp_filter() -> bytes:
    """The BPF program: Docker's denials above, everything else allowed."""
    ld_w_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    program = [(ld_w_abs, 0, 0, 4),                         # arch
               (jeq, 1, 0, AUDIT_ARCH_X86_64), (ret, 0, 0, allow),
               (ld_w_abs, 0, 0, 0)]                         # system call number
    for number in DENIED.values():
        program += [(jeq, 0, 1, number), (ret, 0, 0, eperm)]
    program += [(jeq, 0, 1, CLONE3), (ret, 0, 0, enosys),
                (jeq, 0, 3, CLONE), (ld_w_abs, 0, 0, 16),    # clone's flags (low half)
                (jset, 0, 1, NAMESPACE_FLAGS), (ret, 0, 0, eperm),
                (ret, 0, 0, allow)]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


def install_seccomp() -> None:
    code = seccomp_filter()
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = Program(len(code) // 8, ctypes.addressof(buffer))
    _check(libc.prctl(22, 2, ctypes.byref(program), 0, 0), "prctl(PR_SET_SECCOMP)")


def keep_docker_caps() -> None:
    """Docker's default capabilities: bounding set, then the process's own."""
    with open("/proc/sys/kernel/cap_last_cap") as last:
        top = int(last.read())
    keep = set(DOCKER_CAPS.values())
    for capability in range(top + 1):
        if capability not in keep:
            _check(libc.prctl(24, capability, 0, 0, 0), f"drop capability {capability}")
    mask = sum(1 << c for c in keep)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    data[0].effective = data[0].permitted = data[0].inheritable = mask & 0xFFFFFFFF
    data[1].effective = data[1].permitted = data[1].inheritable = mask >> 32
    _check(libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")


def run(command: list[str]) -> int:
    if os.geteuid() != 0:
        raise SystemExit("tests.container reproduces a container run as root: run it as root")
    if platform.machine() not in ("x86_64", "AMD64"):
        raise SystemExit(f"tests.container's seccomp filter is written for x86-64, not "
                         f"{platform.machine()}")
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare")
    init = os.fork()
    if init:
        _, status = os.waitpid(init, 0)
        return os.waitstatus_to_exitcode(status)
    # pid 1 of the new namespace: sets up /proc, starts the command, reaps.
    try:
        mask_proc()
        child = os.fork()
        if child == 0:
            install_seccomp()
            keep_docker_caps()
            os.environ["LABKIT_CONTAINER_REPRODUCTION"] = "docker-default"
            os.execvp(command[0], command)
        code = 1
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            if pid == child:
                # Its leftovers die with this pid 1, as in a container.
                os._exit(os.waitstatus_to_exitcode(status))
        os._exit(code)
    except BaseException as error:  # noqa: BLE001 - said, then the namespace ends
        print(f"tests.container: {type(error).__name__}: {error}", file=sys.stderr)
        os._exit(125)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        raise SystemExit("usage: python -m tests.container -- COMMAND...")
    sys.exit(run(arguments))
