"""POSIX access control lists, for one user at a time: read, add, remove.

The second isolation layer (autograder.kernels.isolation.user) runs each student
kernel as a user of its own, where bubblewrap cannot start (a container's
default seccomp profile). That user owns no file and is in no group, so
what it may do with a file is decided by the file's "other" permission bits,
unless the file's access control list has an entry naming it. One such
entry, added by the grader and removed after the run, is the whole of what
the layer changes on the instructor's files: ``user:UID:---`` on the course
folder, OUT, the submissions and the kit's sources (the kernel cannot even
look inside), ``user:UID:--x`` on the folders on the way to Python, the
virtual environment and labkit (it may pass through, not list). No one
else's access changes: the mask is kept at least the owning group's bits,
so that group's access is what it was.

The entries are the kernel's ``system.posix_acl_access`` extended
attribute, read and written through one descriptor of the path held under
an exclusive lock (two grading processes adding entries for their own users
never lose each other's). The binary format is the kernel's
(include/uapi/linux/posix_acl_xattr.h): a little-endian version 2, then
(tag u16, permissions u16, id u32) entries, sorted by tag and id.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
from contextlib import contextmanager
from pathlib import Path

XATTR = "system.posix_acl_access"
VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
UNDEFINED_ID = 0xFFFFFFFF
ENTRY = struct.Struct("<HHI")

READ, WRITE, SEARCH = 4, 2, 1


class AclUnsupported(OSError):
    """The file system of a path keeps no access control lists."""


def _entries(fd: int, mode: int) -> list[tuple[int, int, int]]:
    """The file's ACL, or the one its mode bits amount to where it has none."""
    try:
        data = os.getxattr(fd, XATTR)
    except OSError as error:
        if error.errno == errno.ENODATA:
            data = b""
        elif error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise AclUnsupported(error.errno, "access control lists are not supported") from error
        else:
            raise
    if not data:
        return [(USER_OBJ, (mode >> 6) & 7, UNDEFINED_ID), (GROUP_OBJ, (mode >> 3) & 7,
                UNDEFINED_ID), (OTHER, mode & 7, UNDEFINED_ID)]
    (version,) = struct.unpack_from("<I", data)
    if version != VERSION or (len(data) - 4) % ENTRY.size:
        raise ValueError(f"an access control list of an unknown format (version {version})")
    return [ENTRY.unpack_from(data, offset) for offset in range(4, len(data), ENTRY.size)]


def _write(fd: int, entries: list[tuple[int, int, int]]) -> None:
    named = [e for e in entries if e[0] in (USER, GROUP)]
    entries = [e for e in entries if e[0] != MASK]
    if named:
        # The mask bounds every named entry and the owning group; kept at
        # least the owning group's bits, so that group loses nothing.
        group = next(e[1] for e in entries if e[0] == GROUP_OBJ)
        mask = group
        for entry in named:
            mask |= entry[1]
        entries.append((MASK, mask, UNDEFINED_ID))
    entries.sort(key=lambda e: (e[0], e[2]))
    data = struct.pack("<I", VERSION) + b"".join(ENTRY.pack(*e) for e in entries)
    try:
        os.setxattr(fd, XATTR, data)
    except OSError as error:
        if error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise AclUnsupported(error.errno, "access control lists are not supported") from error
        raise


@contextmanager
def _locked(path: Path):
    """A descriptor of ``path`` (not followed if it is a link), locked."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def user_access(path: Path, uid: int) -> int:
    """What user ``uid`` (owner of nothing, in no group of the file's) may
    do with ``path``: READ | WRITE | SEARCH bits, as the kernel decides."""
    info = os.stat(path)
    if info.st_uid == uid:
        return (info.st_mode >> 6) & 7
    with _locked(path) as fd:
        try:
            entries = _entries(fd, info.st_mode)
        except AclUnsupported:
            return info.st_mode & 7
    named = [e[1] for e in entries if e[0] == USER and e[2] == uid]
    if named:
        masks = [e[1] for e in entries if e[0] == MASK]
        return named[0] & (masks[0] if masks else 7)
    return next(e[1] for e in entries if e[0] == OTHER)


def named_users(path: Path) -> dict[int, int]:
    """The users ``path``'s ACL names, with their permissions."""
    with _locked(path) as fd:
        try:
            entries = _entries(fd, os.fstat(fd).st_mode)
        except AclUnsupported:
            return {}
    return {uid: perms for tag, perms, uid in entries if tag == USER}


def set_user(path: Path, uid: int, perms: int) -> None:
    """Give user ``uid`` exactly ``perms`` on ``path`` (an ACL entry naming it)."""
    with _locked(path) as fd:
        entries = [e for e in _entries(fd, os.fstat(fd).st_mode)
                   if not (e[0] == USER and e[2] == uid)]
        _write(fd, entries + [(USER, perms, uid)])


def remove_user(path: Path, uid: int) -> bool:
    """Remove the entry naming ``uid`` from ``path``'s ACL; whether there was one."""
    try:
        with _locked(path) as fd:
            info = os.fstat(fd)
            entries = _entries(fd, info.st_mode)
            kept = [e for e in entries if not (e[0] == USER and e[2] == uid)]
            if len(kept) == len(entries):
                return False
            if not any(e[0] in (USER, GROUP) for e in kept):
                # Back to the plain mode: the group bits were the mask.
                group = next(e[1] for e in kept if e[0] == GROUP_OBJ)
                kept = [e for e in kept if e[0] != MASK]
                _write(fd, kept)
                os.fchmod(fd, (stat.S_IMODE(os.fstat(fd).st_mode) & ~0o070) | (group << 3))
            else:
                _write(fd, kept)
            return True
    except FileNotFoundError:
        return False
