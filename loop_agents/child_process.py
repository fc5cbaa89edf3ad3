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


def start_time(proc: psutil.Process) -> float:
    """When `proc` started, in seconds since boot: with its pid, an identity that a reused pid does not share.
    Not psutil's `create_time()`, which adds the wall-clock boot time read at each call: a clock step or NTP
    correction moves that (whole seconds, as /proc/stat gives it), and a record written before the step would
    then match no live process, so a leftover would be spared."""
    if sys.platform.startswith("linux"):
        try:
            stat = Path(f"/proc/{proc.pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError) as exc:
            raise psutil.NoSuchProcess(proc.pid) from exc
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and ')'
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks
    return proc.create_time()


def record_process_tree(pid: int, path: Path) -> None:
    """Write `pid` and its descendants as (pid, start time) to `path`, for `reap_recorded_tree` after a crash."""
    entries = []
    for proc in descendants_and_self(pid):
        try:
            entries.append([proc.pid, start_time(proc)])
        except psutil.NoSuchProcess:
            continue
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(entries))
    os.replace(temp, path)


def recorded_processes(path: Path) -> list[psutil.Process]:
    """The processes of a tree record still running (same pid *and* start time, so a reused pid is not one of
    them); [] if there is no record. Raises ValueError/OSError on an unreadable record."""
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    alive = []
    for pid, started in entries:
        try:
            proc = psutil.Process(pid)
            if abs(start_time(proc) - started) < 1e-3:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def reap_recorded_tree(path: Path) -> int:
    """SIGKILL every recorded process still alive (see `recorded_processes`); returns how many were killed and
    removes the record."""
    try:
        alive = recorded_processes(path)
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return 0
    killed = []
    for proc in alive:
        try:
            proc.kill()
            killed.append(proc)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(killed, timeout=5.0)
    path.unlink(missing_ok=True)
    return len(killed)
