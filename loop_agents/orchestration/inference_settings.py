"""Map the Hydra config and one planned server (placement.plan) onto the inference package's config."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from loop_agents.inference.config import InferenceConfig


def inference_config(cfg: DictConfig, model_path: str, server: dict[str, Any]) -> InferenceConfig:
    """Settings of one vLLM server: the context equals the learner's max_seq_len, LoRA rank from llm.lora."""
    on_cpu = cfg.gpu_allocation.device == "cpu"
    return InferenceConfig(
        model_path=model_path,
        served_model_name="base",
        max_model_len=int(cfg.learner.max_seq_len),
        enable_lora=True,
        max_lora_rank=max(8, int(cfg.llm.lora.r)),
        max_loras=4,  # the policy, the previous policy during a publish, and evaluator adapters
        enable_prefix_caching=True,
        gpu_memory_utilization=None if on_cpu else server["gpu_memory_utilization"],
        cpu_kvcache_space_gib=server.get("kv_cache_gb") if on_cpu else None,
        cpu_threads=server.get("threads") if on_cpu else None,
        dtype="float32" if on_cpu else str(cfg.llm.dtype),
        seed=int(cfg.run.seed),
        gpu_ids=list(server.get("gpus", [])),
        time_share_mode="sleep" if server.get("sleeps_while_learning") else "stop",
    )
