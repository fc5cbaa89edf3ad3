"""Landlock through its three system calls (no binding package): filesystem rules, TCP and scoping.

    handled_access_fs   every filesystem right this kernel's ABI knows; granted back only beneath the
                        `read` paths (read files, list directories) and the `write` paths (also create,
                        write, truncate, remove); no execute, no links, no devices, no sockets or fifos
    handled_access_net  TCP bind and connect (ABI >= 4), with no rule: both denied
    scoped              signals and abstract Unix sockets (ABI >= 6): the process can signal and connect
                        to processes of its own Landlock domain only

The `landlock` package on PyPI (1.0.0.dev5) knows neither the network rights nor scoping, so the rules are
built here from the kernel's UAPI (include/uapi/linux/landlock.h). Applies to the calling thread; call it
while the process is single-threaded (`confine.assert_single_threaded`).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_DIR, MAKE_REG, TRUNCATE = 1 << 4, 1 << 5, 1 << 7, 1 << 8, 1 << 14
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights that make sense on a file
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
NET_ABI, SCOPE_ABI = 4, 6

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The Landlock ABI of this kernel; 0 when Landlock is missing or disabled."""
    version = _libc.syscall(
        _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(key for key in _FS_BY_ABI if key <= abi)]


def restrict_self(read: list[Path], write: list[Path], abi: int | None = None) -> int:
    """Applies the rules above to the calling thread (and its future threads); returns the ABI used."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= NET_ABI else 0,
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= SCOPE_ABI else 0)  # fmt: skip
    size = ctypes.sizeof(_RulesetAttr) if abi >= SCOPE_ABI else (16 if abi >= NET_ABI else 8)
    ruleset = _libc.syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        read_rights = READ_FILE | READ_DIR
        write_rights = read_rights | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | TRUNCATE
        for paths, rights in ((read, read_rights), (write, write_rights)):
            for path in paths:
                _allow(int(ruleset), path, rights & handled)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(int(ruleset)), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(int(ruleset))
    return abi


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # an optional path this machine lacks
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        if _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                         ctypes.byref(rule), ctypes.c_uint32(0)) != 0:  # fmt: skip
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
