"""A private filesystem view: a size- and inode-capped tmpfs as `/`, with read-only binds of what is listed.

Built inside a fresh mount namespace (the caller holds CAP_SYS_ADMIN in its own user namespace):

    /                a tmpfs (`size=`, `nr_inodes=`): the process's only writable place, gone with the namespace
    <each ro path>   bound read-only at the same path (the interpreter, its libraries, public task inputs)
    <each device>    /dev/null, /dev/zero, /dev/urandom bound read-write

Everything else (the data root, ground truth, other episodes, the host's sockets, /proc, $HOME) is not in
the view at all: nothing to open, stat, list, watch or read an extended attribute of. The old root is
detached after pivot_root, so no path leads back to it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 1, 2, 4, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {source or ''} on {target}: {os.strerror(error)}")


def _make_mount_point(target: Path, like: Path) -> None:
    if like.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)


def build(new_root: Path, read_only: list[Path], size_mb: int, inodes: int, make_dirs: list[Path]) -> None:
    """Makes `new_root` (an empty directory of the host) this process's `/`, as described above.

    `make_dirs` are created in the tmpfs (the process's scratch: its working and output folders)."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here propagates to the host
    _mount("tmpfs", str(new_root), "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"size={size_mb}m,nr_inodes={inodes},mode=0755")  # fmt: skip
    for path in sorted({Path(p) for p in read_only}):
        if not path.exists():
            continue  # an optional path this machine lacks
        target = new_root / path.relative_to("/")
        _make_mount_point(target, path)
        _mount(str(path), str(target), None, _MS_BIND | _MS_REC)
        _mount(None, str(target), None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    for device in DEVICES:
        target = new_root / device.lstrip("/")
        _make_mount_point(target, Path(device))
        _mount(device, str(target), None, _MS_BIND)
    for path in make_dirs:
        (new_root / path.relative_to("/")).mkdir(parents=True, exist_ok=True)
    old = new_root / ".old_root"
    old.mkdir()
    machine = os.uname().machine
    if _libc.syscall(_SYS_PIVOT_ROOT[machine], str(new_root).encode(), str(old).encode()) != 0:
        raise OSError(ctypes.get_errno(), "pivot_root failed")
    os.chdir("/")
    if _libc.umount2(b"/.old_root", _MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "umount of the old root failed")
    os.rmdir("/.old_root")
