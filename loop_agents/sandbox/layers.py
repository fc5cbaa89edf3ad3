"""The sandbox layers: detect what the kernel offers, then apply them to the calling (forked) process.

    namespaces  unshare(user, net, pid, ipc): no network but a down loopback, no sight of or signal
                to processes outside, and the whole tree dies with the namespace's pid 1
    landlock    filesystem allow list (read: interpreter, libraries, public task inputs; write: the
                episode's output folder; no exec); also denies ptrace of processes outside it, so
                /proc/<pid>/environ of the trainer is unreadable
    seccomp     EPERM for starting programs (execve), new processes (fork, non-thread clone),
                ptrace, process_vm_*, mount/unshare/setns, io_uring, bpf, and new sockets (a
                socketpair stays possible; a path Unix socket of the host is not reachable)
    rlimits     address space, file size, CPU seconds, open files, no core dumps

All layers are applied by the process to itself after fork, without root, in that order.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import stat
from dataclasses import dataclass
from pathlib import Path

LAYERS = ("namespaces", "landlock", "seccomp", "rlimits")
MODES = ("strict", "available", "off")
HOW_TO_ENABLE = {
    "namespaces": "allow unprivileged user namespaces (sysctl user.max_user_namespaces>0, "
    "kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0)",
    "landlock": "boot a kernel >= 5.13 with landlock in its LSM list (lsm=landlock,...) and run "
    "scripts/install_appworld.sh (installs the `landlock` package)",
    "seccomp": "install libseccomp2 (apt-get install libseccomp2) and run scripts/install_appworld.sh "
    "(installs the `pyseccomp` package)",
    "rlimits": "nothing (POSIX rlimits are always available)",
}

_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CLONE_THREAD = 0x00010000
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)

# Syscalls the policy's code never needs; each answers EPERM (a PermissionError in Python).
_DENIED_SYSCALLS = (
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "open_by_handle_at",
)  # fmt: skip


class SandboxUnavailable(RuntimeError):
    """A layer required by `strict` mode is missing."""


@dataclass
class Limits:
    """rlimits of a sandboxed process (0 = leave unlimited)."""

    memory_mb: int = 4096  # RLIMIT_AS
    file_size_mb: int = 256  # RLIMIT_FSIZE (larger writes fail with EFBIG)
    cpu_s: int = 600  # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL 5 s later
    open_files: int = 256  # RLIMIT_NOFILE


def _namespaces_work() -> str | None:
    pid = os.fork()
    if pid == 0:  # probe in a child: unshare changes the caller for good
        code = 0 if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC) == 0 else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return "user+net+pid+ipc" if os.waitstatus_to_exitcode(status) == 0 else None


def _landlock_abi() -> str | None:
    try:
        import landlock

        abi = landlock.landlock_abi_version()
    except Exception:  # noqa: BLE001 - missing package, kernel without Landlock, or disabled LSM
        return None
    return f"abi {abi}" if abi >= 1 else None


def _seccomp_works() -> str | None:
    try:
        import pyseccomp

        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    except Exception:  # noqa: BLE001 - missing package or libseccomp.so.2
        return None
    return "libseccomp"


def detect() -> dict[str, str | None]:
    """Each layer -> a short detail if this machine offers it, else None."""
    return {
        "namespaces": _namespaces_work(),
        "landlock": _landlock_abi(),
        "seccomp": _seccomp_works(),
        "rlimits": "as,fsize,cpu,nofile,core",
    }


def choose(mode: str, offered: dict[str, str | None]) -> tuple[list[str], list[str], str]:
    """(active layers, missing layers, start line) for `mode`; raises SandboxUnavailable in strict."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {MODES}, got {mode!r}")
    missing = [name for name in LAYERS if not offered.get(name)]
    if mode == "off":
        return (
            [],
            [],
            "[sandbox] off by explicit choice (env.options.sandbox=off): the policy's code runs unconfined",
        )
    if mode == "strict" and missing:
        first = missing[0]
        raise SandboxUnavailable(
            f"[sandbox] strict mode: layer {first!r} is missing on this machine; to enable it: {HOW_TO_ENABLE[first]}"
        )
    active = [name for name in LAYERS if offered.get(name)]
    line = "[sandbox] layers on: " + ", ".join(f"{name} ({offered[name]})" for name in active)
    if missing:
        line += "; WARNING missing: " + ", ".join(
            f"{name} (to enable: {HOW_TO_ENABLE[name]})" for name in missing
        )
    return active, missing, line


def die_with_parent() -> None:
    """SIGKILL this process when the process that forked it dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)


def enter_namespaces(pid: bool) -> None:
    """New user, network and IPC namespaces (and pid for the caller's next child), own uid/gid mapped."""
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC | (_CLONE_NEWPID if pid else 0)
    if _libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def apply_rlimits(limits: Limits) -> None:
    mb = 1024 * 1024
    for which, soft, hard in (
        (resource.RLIMIT_AS, limits.memory_mb * mb, limits.memory_mb * mb),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb, limits.file_size_mb * mb),
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 5),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        if soft > 0 or which == resource.RLIMIT_CORE:
            resource.setrlimit(which, (soft, hard))


def apply_landlock(read: list[Path], write: list[Path]) -> None:
    """Only `read` (read-only) and `write` (read, create, write, delete; no exec, links or devices)."""
    import landlock
    from landlock import FSAccess

    ruleset = landlock.Ruleset()  # handles every access right of this kernel's ABI
    file_rights = FSAccess.all_file()
    read_rights = FSAccess.READ_FILE | FSAccess.READ_DIR
    write_rights = read_rights | FSAccess.WRITE_FILE | FSAccess.REMOVE_DIR | FSAccess.REMOVE_FILE
    write_rights |= FSAccess.MAKE_DIR | FSAccess.MAKE_REG
    if landlock.landlock_abi_version() >= 3:
        write_rights |= FSAccess.TRUNCATE
    for paths, rights in ((read, read_rights), (write, write_rights)):
        for path in paths:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                continue  # an optional path this machine lacks
            ruleset.allow(str(path), rules=rights if stat.S_ISDIR(mode) else rights & file_rights)
    ruleset.apply()
    os.close(ruleset._fd)  # the package keeps it open; the sandboxed code has no use for it


def reopen_files_read_only(writable: list[Path]) -> list[str]:
    """Re-points every open regular file above stderr that is open for writing, and is not under
    `writable`, at a read-only descriptor of the same file (same fd number); returns their paths.

    Landlock checks paths at open() only: a descriptor opened for writing before the sandbox (SQLite's
    cached connections to the shared base DBs are O_RDWR) would stay writable inside it.
    """
    reopened = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd <= 2 or not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            if (_file_status_flags(fd) & os.O_ACCMODE) == os.O_RDONLY:
                continue
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
        if any(path.is_relative_to(root) for root in writable):
            continue
        read_only = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(read_only, fd, inheritable=False)
        os.close(read_only)
        reopened.append(str(path))
    return reopened


def _file_status_flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


def apply_seccomp() -> None:
    """EPERM for `_DENIED_SYSCALLS`, new processes and new sockets; threads and socketpair stay allowed.

    Unix sockets are denied too: Landlock does not guard connect() to a socket file, and the host's
    services (Ray, X11, ...) listen on such files.
    """
    import pyseccomp as sc

    denied = sc.ERRNO(errno.EPERM)
    rules = sc.SyscallFilter(sc.ALLOW)
    for name in _DENIED_SYSCALLS:
        rules.add_rule(denied, name)
    rules.add_rule(denied, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # flags sit in a struct; libc falls back to clone
    rules.add_rule(denied, "socket")
    rules.load()


def system_read_paths() -> list[Path]:
    """What a forked interpreter of this venv reads after start-up: itself, its stdlib, shared libraries."""
    import sys

    paths = {
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path(sys.executable).resolve().parent,
    }
    paths |= {
        Path(p) for p in ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo", "/etc/localtime")
    }
    paths |= {Path(p) for p in ("/dev/null", "/dev/urandom", "/dev/zero")}
    return sorted(paths)
