"""Child servers die with the process that started them.

Every server we spawn (vLLM, AppWorld, AgentGym env servers) runs in its own session so that its whole
tree can be signalled, which also detaches it from the terminal's SIGINT/SIGHUP. If the parent is
killed with SIGKILL (OOM killer, a crashed Ray actor, `kill -9` of the driver) no cleanup code runs,
and the children would keep their CPU threads, memory and ports forever. Linux's parent-death signal
closes that gap: the kernel sends SIGKILL to the child when the thread that spawned it exits.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn` for subprocess.Popen: SIGKILL this child when its parent dies (Linux; no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
