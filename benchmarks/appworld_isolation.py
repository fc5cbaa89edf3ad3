"""AppWorld isolation overhead per episode: sandboxed episode hosts vs the pre-issue-26 pooled server.

Both sides play the same episodes (reset, 3 cells, evaluate, close) on one warm server each, one after
the other; no model is involved. Legacy = `uvicorn appworld.serve.environment:app` (the world, its
ground truth and the evaluation all in the process that runs the cells, reused across episodes).
Isolated = our episode host: fork + namespaces + Landlock + seccomp + rlimits per episode, no ground
truth loaded, evaluation in a separate sandboxed fork.

    overhead = median(isolated episode) - median(legacy episode)   (and the same for p95)

.venv/bin/python benchmarks/appworld_isolation.py [--episodes 8] [--root artifacts/appworld]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time

import httpx

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.server import free_port, host_environment
from loop_agents.envs.appworld.task_source import AppWorldTaskSource

CELLS = ["print(apis.supervisor.show_profile())", "x = 1", "print(x + 1)"]


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


async def legacy_episodes(config: AppWorldConfig, task_id: str, episodes: int) -> tuple[list[float], dict]:
    """Episode wall times on AppWorld's own env server (what the pool ran before issue 26)."""
    port = free_port("127.0.0.1")
    cmd = [str(config.python_path), "-m", "uvicorn", "appworld.serve.environment:app", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(
        cmd, cwd=config.root_path, env=host_environment(config), start_new_session=True
    )
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120)

    async def post(method: str, **body):
        reply = await client.post(f"/{method}", json={"task_id": task_id, **body})
        reply.raise_for_status()
        return reply.json()["output"]

    try:
        while True:
            try:
                await client.get("/")
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.25)
        times, parts = [], {"initialize_s": [], "evaluate_s": []}
        for n in range(episodes + 1):  # the first one warms the server up and is not counted
            began = time.monotonic()
            await post("initialize", experiment_name=f"bench_legacy_{n}", timeout_seconds=20)
            initialized = time.monotonic()
            for cell in CELLS:
                await post("execute", code=cell)
                await post("task_completed")
            evaluating = time.monotonic()
            await post("evaluate", suppress_errors=True, report=False)
            evaluated = time.monotonic()
            await post("close")
            if n:
                times.append(time.monotonic() - began)
                parts["initialize_s"].append(initialized - began)
                parts["evaluate_s"].append(evaluated - evaluating)
        return times, {key: statistics.median(xs) for key, xs in parts.items()}
    finally:
        await client.aclose()
        process.kill()
        process.wait()


async def isolated_episodes(config: AppWorldConfig, task_id: str, episodes: int) -> tuple[list[float], dict]:
    source = AppWorldTaskSource(config)
    await source.start()
    times, parts = (
        [],
        {
            "fork_s": [],
            "sandbox_s": [],
            "init_s": [],
            "evaluate_s": [],
            "evaluate_task_s": [],
            "reset_s": [],
            "evaluate_call_s": [],
        },
    )
    try:
        for _ in range(episodes):
            env = await source.make_env()
            began = time.monotonic()
            reset = await env.reset(task_id)
            parts["reset_s"].append(time.monotonic() - began)
            for cell in CELLS:
                await env.step(cell)
            evaluating = time.monotonic()
            evaluation = await env.evaluate()
            parts["evaluate_call_s"].append(time.monotonic() - evaluating)
            await env.close()
            times.append(time.monotonic() - began)
            timing = reset.info["isolation_timing"]
            for key in ("fork_s", "sandbox_s", "init_s"):
                parts[key].append(timing[key])
            parts["evaluate_s"].append(evaluation.details["evaluate_s"])
            parts["evaluate_task_s"].append(evaluation.details["evaluator_timing"]["evaluate_task_s"])
        return times, {key: statistics.median(xs) for key, xs in parts.items()}
    finally:
        await source.close()


async def measure(episodes: int, root: str) -> dict:
    config = AppWorldConfig(root=root, pool_size=1)
    task_id = AppWorldTaskSource(config).task_ids("train")[0]
    legacy, legacy_parts = await legacy_episodes(config, task_id, episodes)
    isolated, parts = await isolated_episodes(config, task_id, episodes)
    return {
        "episodes": episodes,
        "legacy_episode_s_median": round(statistics.median(legacy), 3),
        "legacy_episode_s_p95": round(p95(legacy), 3),
        "isolated_episode_s_median": round(statistics.median(isolated), 3),
        "isolated_episode_s_p95": round(p95(isolated), 3),
        "overhead_s_median": round(statistics.median(isolated) - statistics.median(legacy), 3),
        "overhead_s_p95": round(p95(isolated) - p95(legacy), 3),
        "legacy_parts_median_s": {key: round(value, 4) for key, value in legacy_parts.items()},
        "isolated_parts_median_s": {key: round(value, 4) for key, value in parts.items()},
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run appworld_isolation` (needs the AppWorld data)."""
    r = asyncio.run(measure(6 if quick else 20, ""))
    return {
        **r,
        "ratio": round(r["overhead_s_median"], 4),
        "ratio_definition": "median isolated episode - median legacy episode, seconds (goal <= 0.2)",
        "summary": f"isolation overhead {r['overhead_s_median']:.3f} s median, {r['overhead_s_p95']:.3f} s p95 per "
        f"env-only episode ({r['legacy_episode_s_median']:.2f} s legacy -> {r['isolated_episode_s_median']:.2f} s)",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--root", default="")
    args = parser.parse_args()
    print(asyncio.run(measure(args.episodes, args.root)))
