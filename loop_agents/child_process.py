"""Child servers die with the process that started them, and leftovers of a killed run are reaped.

Every server we spawn (vLLM, AppWorld, AgentGym env servers) runs in its own session so that its whole
tree can be signalled, which also detaches it from the terminal's SIGINT/SIGHUP. If the parent is
killed with SIGKILL (OOM killer, a crashed Ray actor, `kill -9` of the driver) no cleanup code runs,
and the children would keep their CPU threads, memory and ports forever. Linux's parent-death signal
closes that gap for the process we spawn, but not for *its* children: vLLM's `EngineCore` process
outlives an api_server killed with SIGKILL (it has no parent-death watch of its own), and Ray SIGKILLs
the children of a dead worker. So the vLLM server gets SIGTERM when its owner dies (its handler shuts
the engine down), every other Python process of its tree arms a parent-death SIGKILL at start-up
(`inference/server_site`), and every server records its tree in the run directory, so that the
next start in that directory kills whatever still escaped.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: signal.Signals) -> None:
    if not sys.platform.startswith("linux"):
        return
    # A child inherits its spawning thread's signal mask and ignored signals across exec; Ray's worker threads
    # block SIGTERM, which would leave the parent-death SIGTERM pending forever.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def die_with_parent() -> None:
    """`preexec_fn` for subprocess.Popen: SIGKILL this child when its parent dies (Linux; no-op elsewhere)."""
    _set_parent_death_signal(signal.SIGKILL)


def terminate_with_parent() -> None:
    """`preexec_fn`: SIGTERM this child when its parent dies, for servers whose SIGTERM handler stops their own children."""
    _set_parent_death_signal(signal.SIGTERM)


def descendants_and_self(pid: int) -> list[psutil.Process]:
    """The process `pid` and all its descendants ([] if it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def record_process_tree(pid: int, path: Path) -> None:
    """Write `pid` and its descendants as (pid, create time) to `path`, for `reap_recorded_tree` after a crash."""
    entries = []
    for proc in descendants_and_self(pid):
        try:
            entries.append([proc.pid, proc.create_time()])
        except psutil.NoSuchProcess:
            continue
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(entries))
    os.replace(temp, path)


def reap_recorded_tree(path: Path) -> int:
    """SIGKILL every recorded process still alive (same pid *and* create time, so a reused pid is spared); returns
    how many were killed and removes the record."""
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return 0
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return 0
    killed = []
    for pid, created in entries:
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - created) < 1e-3:
                proc.kill()
                killed.append(proc)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(killed, timeout=5.0)
    path.unlink(missing_ok=True)
    return len(killed)
