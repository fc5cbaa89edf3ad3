"""The policy process's seccomp filter: an allow list of what CPython, IPython and a cell need.

Everything not listed answers EPERM (a PermissionError in Python), so a syscall the kernel adds later is
denied by default. What the list leaves out, by family:

    processes   clone, clone3 (ENOSYS, so libc falls back to clone), fork, vfork, execve(at): no thread and
                no process can be started; the episode is one task
    sockets     socket, socketpair, connect, bind, listen, accept: only the channels the host opened exist
    files       chown and xattr families, link, symlink, mknod, inotify, fanotify, memfd (chmod and utime
                are allowed: the mount view makes every file outside the process's tmpfs read-only)
    kernel      ptrace, process_vm_*, mount, pivot_root, unshare, setns, bpf, perf, io_uring, keyctl,
                userfaultfd, personality, modules, kexec, open_by_handle_at, pidfd_*
    signals     kill, tgkill and tkill only of the process itself (pid 0 = its own group, or its own pid)

The filter is loaded with TSYNC (every thread of the process gets it, or loading fails) and the kernel's
no-new-privileges bit; foreign architectures (the i386 ABI on x86_64) are killed by libseccomp's default.
"""

from __future__ import annotations

import errno
import os

ALLOWED = (
    # files the process may already reach (its mount view and Landlock decide which)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "lseek", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "ioctl", "flock", "fsync", "fdatasync",
    "fstat", "stat", "lstat", "newfstatat", "statx", "fstatfs", "statfs", "access", "faccessat", "faccessat2",
    "open", "openat", "getdents", "getdents64", "readlink", "readlinkat", "getcwd", "chdir", "fchdir",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "ftruncate",
    "truncate", "fadvise64", "readahead", "sendfile", "copy_file_range", "splice", "tee", "umask",
    # mode and times: only the tmpfs is writable in the mount view, so these reach nothing else (EROFS)
    "chmod", "fchmod", "fchmodat", "utime", "utimes", "utimensat", "futimesat",
    # memory
    "mmap", "munmap", "mremap", "mprotect", "madvise", "brk", "mincore", "msync", "membarrier",
    # the runtime
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "arch_prctl",
    "prctl", "restart_syscall", "exit", "exit_group", "wait4", "waitid", "getrandom", "uname", "sysinfo",
    "getrlimit", "prlimit64", "getrusage", "times", "sched_getaffinity", "sched_yield", "getcpu",
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid",
    "getresgid", "getpgrp", "getpgid", "getsid", "capget", "getpriority",
    # time and signals (AppWorld's cell timeout is SIGALRM)
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend",
    "sigaltstack", "alarm", "setitimer", "getitimer", "timer_create", "timer_settime", "timer_gettime",
    "timer_getoverrun", "timer_delete",
    # waiting on and talking over the channels the host opened
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "pipe", "pipe2", "eventfd2", "sendto", "recvfrom", "sendmsg", "recvmsg",
    "shutdown", "getsockname", "getpeername", "getsockopt", "setsockopt",
)  # fmt: skip
_SIGNALS_TO_SELF = ("kill", "tgkill", "tkill")


def load() -> list[str]:
    """Loads the filter on this process (all threads); returns the listed syscalls this kernel lacks."""
    import pyseccomp as sc

    rules = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    rules.set_attr(sc.Attr.CTL_TSYNC, 1)
    rules.set_attr(sc.Attr.CTL_NNP, 1)
    unknown = []
    for name in ALLOWED:
        try:
            rules.add_rule(sc.ALLOW, name)
        except (RuntimeError, ValueError, OSError):
            unknown.append(name)  # not a syscall of this architecture (e.g. `open` on aarch64)
    own = os.getpid()
    for name in _SIGNALS_TO_SELF:
        for target in (0, own):
            rules.add_rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, target))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # pthread_create's fallback then meets clone's EPERM
    rules.load()
    return unknown
