"""AppWorld isolation overhead per episode: sandboxed episode hosts vs the pre-issue-26 pooled server.

Both play the same episode (reset, 3 cells, evaluate, close) on one warm server each, no model. The
episodes alternate (legacy, isolated, legacy, ...) so that both see the same machine load, and the
overhead is taken per pair:

    overhead_i = isolated episode_i - legacy episode_i      reported: median and p95 over i

Legacy = `uvicorn appworld.serve.environment:app` (the world, its ground truth and the evaluation all in
the process that runs the cells, reused across episodes). Isolated = our episode host: per episode an API
process holding the databases and a confined zygote fork running the cells (docs/security.md), evaluation
in a separate sandboxed fork. For the cost beside the previous isolated design, see appworld_sandbox_cost.py.

.venv/bin/python benchmarks/appworld_isolation.py [--episodes 10] [--root artifacts/appworld]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time

import httpx

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.server import host_environment
from loop_agents.envs.appworld.task_source import AppWorldTaskSource
from loop_agents.ports import free_port

CELLS = ["print(apis.supervisor.show_profile())", "x = 1", "print(x + 1)"]


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


class LegacyServer:
    """AppWorld's own env server, driven over raw HTTP as the pool did before issue 26."""

    def __init__(self, config: AppWorldConfig, task_id: str) -> None:
        self.task_id = task_id
        port = free_port("127.0.0.1")
        cmd = [str(config.python_path), "-m", "uvicorn", "appworld.serve.environment:app", "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning"]  # fmt: skip
        self.process = subprocess.Popen(
            cmd, cwd=config.root_path, env=host_environment(config), start_new_session=True
        )
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120)

    async def post(self, method: str, **body):
        reply = await self.client.post(f"/{method}", json={"task_id": self.task_id, **body})
        reply.raise_for_status()
        return reply.json()["output"]

    async def wait_ready(self) -> None:
        while True:
            try:
                await self.client.get("/")
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.25)

    async def episode(self, n: int) -> dict[str, float]:
        began = time.monotonic()
        await self.post("initialize", experiment_name=f"bench_legacy_{n}", timeout_seconds=20)
        initialized = time.monotonic()
        for cell in CELLS:
            await self.post("execute", code=cell)
            await self.post("task_completed")
        evaluating = time.monotonic()
        await self.post("evaluate", suppress_errors=True, report=False)
        evaluated = time.monotonic()
        await self.post("close")
        return {
            "episode_s": time.monotonic() - began,
            "reset_s": initialized - began,
            "evaluate_s": evaluated - evaluating,
        }

    async def stop(self) -> None:
        await self.client.aclose()
        self.process.kill()
        self.process.wait()


async def isolated_episode(source: AppWorldTaskSource, task_id: str) -> dict[str, float]:
    env = await source.make_env()
    began = time.monotonic()
    reset = await env.reset(task_id)
    initialized = time.monotonic()
    for cell in CELLS:
        await env.step(cell)
    evaluating = time.monotonic()
    evaluation = await env.evaluate()
    evaluated = time.monotonic()
    await env.close()
    timing = reset.info["isolation_timing"]
    return {
        "episode_s": time.monotonic() - began,
        "reset_s": initialized - began,
        "evaluate_s": evaluated - evaluating,
        "fork_s": timing["fork_s"],
        "policy_confine_s": timing[
            "policy_confine_s"
        ],  # the policy process's layers (mount view ... seccomp)
        "policy_init_s": timing["policy_init_s"],  # its remote-API world
        "api_init_s": timing["api_init_s"],  # the API process's world (databases), in parallel
        "evaluate_task_s": evaluation.details["evaluator_timing"]["evaluate_task_s"],
        "evaluator_prepare_s": evaluation.details["evaluator_timing"]["prepare_s"],  # while the cells ran
    }


def medians(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(row[key] for row in rows), 4) for key in rows[0]}


async def measure(episodes: int, root: str) -> dict:
    config = AppWorldConfig(root=root, pool_size=1)
    source = AppWorldTaskSource(config)
    task_id = source.task_ids("train")[0]
    legacy = LegacyServer(config, task_id)
    await source.start()
    await legacy.wait_ready()
    legacy_rows, isolated_rows = [], []
    try:
        await legacy.episode(-1)  # warms the legacy server as the pool's warm-up did
        for n in range(episodes):
            legacy_rows.append(await legacy.episode(n))
            isolated_rows.append(await isolated_episode(source, task_id))
    finally:
        await legacy.stop()
        await source.close()
    overhead = [i["episode_s"] - g["episode_s"] for i, g in zip(isolated_rows, legacy_rows, strict=True)]
    legacy_s = [row["episode_s"] for row in legacy_rows]
    return {
        "episodes": episodes,
        "overhead_s_median": round(statistics.median(overhead), 3),
        "overhead_s_p95": round(p95(overhead), 3),
        "legacy_episode_s_median": round(statistics.median(legacy_s), 3),
        "overhead_share_of_env_episode": round(statistics.median(overhead) / statistics.median(legacy_s), 3),
        "legacy_parts_median_s": medians(legacy_rows),
        "isolated_parts_median_s": medians(isolated_rows),
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run appworld_isolation` (needs the AppWorld data)."""
    r = asyncio.run(measure(6 if quick else 20, ""))
    return {
        **r,
        "ratio": r["overhead_s_median"],
        "ratio_definition": "median over paired episodes of (isolated - legacy) episode seconds (goal <= 0.2)",
        "summary": f"isolation overhead {r['overhead_s_median']:.3f} s median, {r['overhead_s_p95']:.3f} s p95 per "
        f"env-only episode (legacy episode {r['legacy_episode_s_median']:.2f} s)",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--root", default="")
    args = parser.parse_args()
    print(asyncio.run(measure(args.episodes, args.root)))
