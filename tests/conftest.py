"""Shared fixtures: the tiny model directories every test builds locally (nothing is downloaded)."""

from __future__ import annotations

import os

import pytest

from loop_agents.inference.api_key import ensure_run_key

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One vLLM API key for the session: the servers, runs and Ray workers the tests start inherit it, and the
# tests' own requests send it with auth_headers().
ensure_run_key()


@pytest.fixture(autouse=True)
def _process_environment_restored():
    """Each test leaves os.environ as it found it. Libraries write to it on import: TRL's sets
    VLLM_LOGGING_LEVEL=ERROR, and every vLLM server and training run a later test started then logged no INFO
    line (CI: the fault matrix found no EngineCore in the server log, the plain-log test no weight loading)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A tiny Qwen2 model (Qwen2.5 chat template), built once per test session."""
    from loop_agents.tiny_model import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny_qwen2_5")))


@pytest.fixture(scope="session")
def tiny_qwen3_model_dir(tmp_path_factory) -> str:
    """The same tiny model with the Qwen3 chat template (thinking on/off)."""
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny_qwen3"), TinyModelSpec(chat_template="qwen3")))
