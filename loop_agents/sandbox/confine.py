"""Confining a process that will run untrusted code, every layer while it is still single-threaded.

    enter_namespaces   (in the parent-to-be) new user, mount, pid, network, IPC and UTS namespaces, its own
                       uid and gid mapped; its next child is pid 1 of the new pid namespace
    confine            (in that child) the mount view (mount_view.py), all capabilities dropped, rlimits,
                       Landlock (landlock_rules.py), then the seccomp allow list (seccomp_allow.py) with
                       TSYNC, after checking that the process has exactly one thread

Order matters: mounts need CAP_SYS_ADMIN (dropped right after), Landlock and seccomp come last because they
forbid what the earlier steps do. The single-thread check runs while /proc is still in the view: Landlock
binds only the calling thread, so a thread started earlier would run outside it (seccomp's TSYNC would
cover it, Landlock would not); such a process exits instead of running code.
"""

from __future__ import annotations

import ctypes
import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

from loop_agents.sandbox import landlock_rules, mount_view, seccomp_allow

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
TRUSTED_FORK_NAMESPACES = (
    _CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC
)  # the API process and evaluator: no network
_PR_CAPBSET_DROP = 24
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


class NotSingleThreaded(RuntimeError):
    """A thread exists that the sandbox would not cover."""


@dataclass
class Confinement:
    """What the confined process may see and use."""

    new_root: Path  # an empty directory of the host, the mount point of the process's tmpfs root
    read_only: list[Path]  # bound read-only into the view
    scratch: list[Path]  # folders made in the tmpfs (writable)
    scratch_mb: int = 64  # tmpfs size
    scratch_inodes: int = 4096  # tmpfs inodes (files + folders)
    memory_mb: int = 4096  # RLIMIT_AS
    file_size_mb: int = 64  # RLIMIT_FSIZE
    cpu_s: int = 600  # RLIMIT_CPU of the whole episode
    open_files: int = 64  # RLIMIT_NOFILE
    landlock_abi: int = 0  # 0 = none offered
    report: dict[str, object] = field(default_factory=dict)


def enter_namespaces(flags: int = NAMESPACES) -> None:
    """unshare(2) the namespaces in `flags` (default: all above) and map the caller's own uid and gid (no other
    id exists inside)."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare of namespaces {flags:#x} failed: {os.strerror(error)}")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def drop_capabilities() -> None:
    """Empties the bounding set, then the effective, permitted and inheritable sets."""
    cap = 0
    while _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if _libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def set_rlimits(memory_mb: int, file_size_mb: int, cpu_s: int, open_files: int, tasks: int) -> None:
    """Address space, file size, CPU seconds (SIGXCPU, SIGKILL 5 s later), open files, tasks (RLIMIT_NPROC,
    counted per uid: a cap where the uid is not root) and no core dumps; 0 leaves a limit as it is."""
    mb = 1024 * 1024
    for which, soft, hard in (
        (resource.RLIMIT_AS, memory_mb * mb, memory_mb * mb),
        (resource.RLIMIT_FSIZE, file_size_mb * mb, file_size_mb * mb),
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 5),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_NPROC, tasks, tasks),
    ):
        if soft > 0:
            resource.setrlimit(which, (soft, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def confine(c: Confinement) -> None:
    """The layers above, in order, on the calling process (pid 1 of its namespaces)."""
    threads = thread_count()
    if threads != 1:
        raise NotSingleThreaded(f"{threads} threads before the sandbox; refusing to run code")
    mount_view.build(c.new_root, c.read_only, c.scratch_mb, c.scratch_inodes, c.scratch)
    drop_capabilities()
    set_rlimits(c.memory_mb, c.file_size_mb, c.cpu_s, c.open_files, tasks=1)
    if c.landlock_abi:
        landlock_rules.restrict_self([Path("/")], [Path("/dev/null"), *c.scratch], c.landlock_abi)
    c.report["seccomp_unknown"] = seccomp_allow.load()
