"""vLLM start-up stages read from the server log (the lines are vLLM 0.32's, from a CPU demo run)."""

from __future__ import annotations

from pathlib import Path

from loop_agents.inference.startup_stage import log_stage, stage_of

LOG = """
=== 2026-11-28 01:18:47 starting: python -m vllm.entrypoints.openai.api_server --model tiny_model
[loop_agents] applied vLLM patch cpu_lora_ops to vllm.lora.ops.torch_ops.lora_ops
(APIServer pid=11572) INFO 11-28 01:19:26 [model.py:733] Resolved architecture: Qwen2ForCausalLM
(EngineCore pid=11794) INFO 11-28 01:19:41 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: ...
(Worker pid=11926) INFO 11-28 01:19:53 [cpu_model_runner.py:68] Starting to load model tiny_model...
"""


def test_the_newest_known_line_names_the_stage():
    lines = LOG.splitlines()
    assert stage_of(lines[:3]) == "importing vLLM"
    assert stage_of(lines) == "loading the model weights"
    assert stage_of(["Triton not available", "unrelated"]) is None


def test_only_the_latest_start_of_the_log_counts(tmp_path: Path):
    log = tmp_path / "vllm_0.log"
    log.write_text(LOG + "\n=== 2026-11-28 02:00:00 starting: python -m vllm...\n")
    assert log_stage(log) == "launching the Python process"
    assert log_stage(tmp_path / "missing.log") is None
