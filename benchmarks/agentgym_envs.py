"""AgentGym env servers (ours): step latency p50/p95 per env on one instance, and throughput of 16
concurrent episodes (create + reset + steps + close), raw HTTP, no model; then 16 more, which get the
closed instances back (`reused_*`: no JVM start for SciWorld). `--all-babyai` also resets
every item of the named envs once (TextCraft: both task sets) and counts the status codes.

.venv/bin/python benchmarks/agentgym_envs.py [--envs babyai textcraft sciworld] [--steps 40] [--quick] [--all-items babyai textcraft]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import httpx

from loop_agents.envs.agentgym import EnvServerProcess

ACTION = {"babyai": "turn left", "textcraft": "inventory", "sciworld": "look around"}  # never end an episode
ITEM = {"babyai": 1, "textcraft": 13, "sciworld": 3240}
CONCURRENCY = 16


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


async def _episode(http: httpx.AsyncClient, env: str, data_idx: int, steps: int) -> dict[str, float]:
    t0 = time.monotonic()
    env_id = (await http.post("/create")).json()["id"]
    t1 = time.monotonic()
    assert (await http.post("/reset", json={"id": env_id, "data_idx": data_idx})).status_code == 200
    t2 = time.monotonic()
    step_s = []
    for _ in range(steps):
        t = time.monotonic()
        reply = await http.post("/step", json={"id": env_id, "action": ACTION[env]})
        step_s.append(time.monotonic() - t)
        assert reply.status_code == 200, reply.text
    await http.post("/close", json={"id": env_id})
    return {"create_s": t1 - t0, "reset_s": t2 - t1, "steps_s": step_s, "total_s": time.monotonic() - t0}


async def measure_env(env: str, steps: int) -> dict:
    with EnvServerProcess(env, startup_timeout_s=300) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as http:
            single = await _episode(http, env, ITEM[env], steps)
            t = time.monotonic()
            many = await asyncio.gather(
                *(_episode(http, env, ITEM[env] + i, steps) for i in range(CONCURRENCY))
            )
            wall = time.monotonic() - t
            t = time.monotonic()  # again: the server hands out the 16 closed instances
            again = await asyncio.gather(
                *(_episode(http, env, ITEM[env] + i, steps) for i in range(CONCURRENCY))
            )
            wall_again = time.monotonic() - t
    lat = single["steps_s"]
    all_steps = [s for e in many for s in e["steps_s"]]
    return {
        "env": env,
        "steps_per_episode": steps,
        "step_p50_ms": round(1000 * statistics.median(lat), 1),
        "step_p95_ms": round(1000 * _percentile(lat, 0.95), 1),
        "create_s": round(single["create_s"], 3),
        "reset_s": round(single["reset_s"], 3),
        "sequential_steps_per_s": round(steps / sum(lat), 1),
        "concurrent_wall_s": round(wall, 2),
        "concurrent_episodes_per_s": round(CONCURRENCY / wall, 3),
        "concurrent_steps_per_s": round(len(all_steps) / wall, 1),
        "concurrent_step_p50_ms": round(1000 * statistics.median(all_steps), 1),
        "concurrent_step_p95_ms": round(1000 * _percentile(all_steps, 0.95), 1),
        "concurrent_create_p50_s": round(statistics.median(e["create_s"] for e in many), 3),
        "reused_wall_s": round(wall_again, 2),
        "reused_episodes_per_s": round(CONCURRENCY / wall_again, 3),
        "reused_create_p50_s": round(statistics.median(e["create_s"] for e in again), 3),
    }


def reset_all(env: str, task_set: str | None = None) -> dict:
    """Every item of `env` (and task set) reset once on one instance; the status codes counted."""
    with (
        EnvServerProcess(env, startup_timeout_s=300) as server,
        httpx.Client(base_url=server.url, timeout=120) as http,
    ):
        params = {"task_set": task_set} if task_set else {}
        count = sum(len(v) for v in http.get("/splits", params=params).json().values())
        env_id = http.post("/create", json=params or None).json()["id"]
        t, codes = time.monotonic(), {}
        for data_idx in range(count):
            code = http.post("/reset", json={"id": env_id, "data_idx": data_idx}).status_code
            codes[code] = codes.get(code, 0) + 1
        seconds = round(time.monotonic() - t, 1)
        return {"env": env, "task_set": task_set, "items": count, "status_codes": codes, "seconds": seconds}


def reset_each_sciworld_task() -> dict:
    """The first and last variation of every SciWorld task reset once (all items would take hours)."""
    from scienceworld import ScienceWorldEnv

    from loop_agents.envs.agentgym.games.sciworld import EXCLUDED_TASK_IDS

    probe = ScienceWorldEnv("")
    try:
        items, start = [], 0
        for task_id, name in probe.tasks.items():
            if task_id not in EXCLUDED_TASK_IDS:
                count = probe.get_max_variations(name)
                items += [start, start + count - 1]
                start += count
    finally:
        probe.close()
    with (
        EnvServerProcess("sciworld", startup_timeout_s=300) as server,
        httpx.Client(base_url=server.url, timeout=300) as http,
    ):
        env_id = http.post("/create").json()["id"]
        t, codes = time.monotonic(), {}
        for data_idx in items:
            code = http.post("/reset", json={"id": env_id, "data_idx": data_idx}).status_code
            codes[code] = codes.get(code, 0) + 1
        seconds = round(time.monotonic() - t, 1)
    return {
        "env": "sciworld",
        "tasks": len(items) // 2,
        "items_total": start,
        "status_codes": codes,
        "seconds": seconds,
    }


def bench(quick: bool) -> dict:
    """For benchmarks/runner.py: ratio = 16-concurrent steps/s over one instance's sequential steps/s (BabyAI)."""
    result = asyncio.run(measure_env("babyai", 20 if quick else 40))
    ratio = result["concurrent_steps_per_s"] / result["sequential_steps_per_s"]
    summary = (f"babyai step p50 {result['step_p50_ms']} ms p95 {result['step_p95_ms']} ms; "
               f"16 concurrent: {result['concurrent_steps_per_s']} steps/s")  # fmt: skip
    return {"ratio": round(ratio, 2), "summary": summary, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=["babyai", "textcraft", "sciworld"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="10 steps per episode")
    parser.add_argument("--sciworld-each-task", action="store_true", help="first and last item of every task")
    parser.add_argument("--all-items", nargs="*", default=[], help="envs whose every item is reset once")
    args = parser.parse_args()
    for env in args.envs:
        print(json.dumps(asyncio.run(measure_env(env, 10 if args.quick else args.steps))), flush=True)
    if args.sciworld_each_task:
        print(json.dumps(reset_each_sciworld_task()), flush=True)
    for env in args.all_items:
        for task_set in ("ours", "agentgym") if env == "textcraft" else (None,):
            print(json.dumps(reset_all(env, task_set)), flush=True)


if __name__ == "__main__":
    main()
