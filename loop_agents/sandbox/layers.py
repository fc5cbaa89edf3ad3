"""The sandbox layers: detect what the kernel offers, choose per mode (failing closed), apply to trusted forks.

    namespaces  user, mount, pid, network, IPC, UTS: the policy process's private tmpfs view, no network, no
                sight of or signal to processes outside; also the trusted API and evaluator forks' network
    landlock    filesystem rules, TCP bind/connect denied (ABI >= 4), signals and abstract Unix sockets scoped
                to the domain (ABI >= 6); through its syscalls (landlock_rules.py)
    seccomp     the policy process: an allow list with TSYNC (seccomp_allow.py); the trusted forks that parse
                policy-written data: the deny list below
    rlimits     address space, file size, CPU seconds, open files, tasks, no core dumps

Modes: `strict` needs every layer, Landlock with scoping included; `available` (the default) needs namespaces
and seccomp, without which the policy's process would share the host's filesystem, processes and network, and
uses Landlock where the kernel has it (one warning line where it does not); `off` runs the policy's code
unconfined and says so at every start. A mode whose needs are missing refuses with one line naming the layer
and how to enable it (the host exits 2).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from loop_agents.sandbox import confine, landlock_rules

LAYERS = ("namespaces", "landlock", "seccomp", "rlimits")
MODES = ("strict", "available", "off")
REQUIRED = {"strict": LAYERS, "available": ("namespaces", "seccomp", "rlimits"), "off": ()}
HOW_TO_ENABLE = {
    "namespaces": "allow unprivileged user namespaces (sysctl user.max_user_namespaces>0, "
    "kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0; in a container, a "
    "seccomp profile that permits unshare and mount)",
    "landlock": "boot a kernel >= 6.12 (Landlock ABI 6: scoping of signals and abstract sockets) with landlock "
    "in its LSM list (lsm=landlock,...)",
    "seccomp": "install libseccomp2 (apt-get install libseccomp2) and run scripts/install_appworld.sh "
    "(installs the `pyseccomp` package)",
    "rlimits": "nothing (POSIX rlimits are always available)",
}

_CLONE_THREAD = 0x00010000
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)

# The trusted forks' deny list (API process, evaluator): they parse policy-written data but run no policy
# code; each answers EPERM. The policy process has the allow list of seccomp_allow.py instead.
_DENIED_SYSCALLS = (
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "open_by_handle_at",
)  # fmt: skip


class SandboxUnavailable(RuntimeError):
    """A layer the chosen mode needs is missing."""


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
        os._exit(0 if _libc.unshare(confine.NAMESPACES) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return "user+mount+pid+net+ipc+uts" if os.waitstatus_to_exitcode(status) == 0 else None


def _landlock_abi() -> str | None:
    abi = landlock_rules.abi_version()
    return f"abi {abi}" if abi >= 1 else None


def landlock_abi(offered: dict[str, str | None]) -> int:
    detail = offered.get("landlock") or ""
    return int(detail.split()[-1]) if detail.startswith("abi ") else 0


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
        "rlimits": "as,fsize,cpu,nofile,nproc,core",
    }


def choose(mode: str, offered: dict[str, str | None]) -> tuple[list[str], list[str], str]:
    """(active layers, missing layers, start line) for `mode`; raises SandboxUnavailable when `mode` needs a
    layer this machine lacks (strict: Landlock below ABI 6 counts as missing)."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {MODES}, got {mode!r}")
    if mode == "off":
        return (
            [],
            [],
            "[sandbox] WARNING off by explicit choice (env.options.sandbox=off): the policy's code runs "
            "unconfined, with the host's files, processes and network",
        )
    offered = dict(offered)
    if mode == "strict" and offered.get("landlock") and landlock_abi(offered) < landlock_rules.SCOPE_ABI:
        offered["landlock"] = None
    missing = [name for name in LAYERS if not offered.get(name)]
    needed = [name for name in REQUIRED[mode] if name in missing]
    if needed:
        first = needed[0]
        raise SandboxUnavailable(
            f"[sandbox] {mode} mode: layer {first!r} is missing on this machine; to enable it: "
            f"{HOW_TO_ENABLE[first]} (or run unconfined with env.options.sandbox=off)"
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


def enter_namespaces() -> None:
    """The trusted forks' namespaces: new user, network and IPC, own uid/gid mapped."""
    confine.enter_namespaces(confine.TRUSTED_FORK_NAMESPACES)


def apply_rlimits(limits: Limits) -> None:
    """The trusted forks' rlimits (0 = leave unlimited); no task cap: the API process's client starts a thread."""
    confine.set_rlimits(limits.memory_mb, limits.file_size_mb, limits.cpu_s, limits.open_files, tasks=0)


def apply_landlock(read: list[Path], write: list[Path]) -> None:
    """Only `read` (read-only) and `write` (read, create, write, delete; no exec, links or devices)."""
    landlock_rules.restrict_self(read, write)


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
    paths = {
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path(sys.executable).resolve().parent,
    }
    paths |= {
        Path(p)
        for p in (
            "/usr/lib",
            "/usr/lib64",
            "/lib",
            "/lib64",
            "/usr/share/zoneinfo",
            "/etc/localtime",
            "/etc/ld.so.cache",
        )
    }
    paths |= {Path(p) for p in ("/dev/null", "/dev/urandom", "/dev/zero")}
    return sorted(paths)
