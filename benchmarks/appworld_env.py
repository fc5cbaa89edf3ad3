"""AppWorld env overhead: pool start-up for N servers and per-step server round trips (no model).

The pool starts twice in one run, hosts forked from the warmed-up factory (the default) and each spawned and warmed
up on its own (`fork_hosts=false`); the start's wall time and the machine's busy CPU-seconds are reported for both.

.venv/bin/python benchmarks/appworld_env.py [--servers 8] [--root artifacts/appworld]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.task_source import AppWorldTaskSource


def machine_busy_cpu_s() -> float:
    """CPU-seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


async def measure(servers: int, root: str, verbose: bool = True, fork_hosts: bool = True) -> dict:
    source = AppWorldTaskSource(AppWorldConfig(root=root, pool_size=servers, fork_hosts=fork_hosts))
    busy_before = machine_busy_cpu_s()
    pool_start_s = await source.start()
    pool_start_cpu_s = machine_busy_cpu_s() - busy_before
    if verbose:
        how = "forked" if fork_hosts else "spawned"
        print(
            f"pool start ({servers} servers, {how}): {pool_start_s:.1f} s, {pool_start_cpu_s:.1f} busy CPU-s"
        )
    task_id = source.task_ids("train")[0]
    resets, steps, evals, closes = [], [], [], []
    for _ in range(5):
        env = await source.make_env()
        t = time.monotonic()
        await env.reset(task_id)
        resets.append(time.monotonic() - t)
        for cell in ["print(apis.supervisor.show_profile())", "x = 1", "print(x + 1)"]:
            t = time.monotonic()
            await env.step(cell)
            steps.append(time.monotonic() - t)
        t = time.monotonic()
        await env.evaluate()
        evals.append(time.monotonic() - t)
        t = time.monotonic()
        await env.close()
        closes.append(time.monotonic() - t)
    result = {
        "servers": servers,
        "fork_hosts": fork_hosts,
        "pool_start_s": round(pool_start_s, 2),
        "pool_start_cpu_s": round(pool_start_cpu_s, 1),
    }
    for name, xs in [("reset", resets), ("step", steps), ("evaluate", evals), ("close", closes)]:
        result[f"{name}_ms_median"] = round(1000 * statistics.median(xs), 1)
        result[f"{name}_ms_max"] = round(1000 * max(xs), 1)
        if verbose:
            print(f"{name}: median {1000 * statistics.median(xs):.0f} ms, max {1000 * max(xs):.0f} ms")
    await source.close()
    return result


async def both(servers: int, root: str, verbose: bool = True) -> dict:
    forked = await measure(servers, root, verbose, fork_hosts=True)
    spawned = await measure(servers, root, verbose, fork_hosts=False)
    return {"forked": forked, "spawned": spawned}


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run appworld_env` (needs the AppWorld data; no goal: reported)."""
    r = asyncio.run(both(2 if quick else 8, "", verbose=False))
    forked, spawned = r["forked"], r["spawned"]
    return {
        **r,
        "ratio": round(spawned["pool_start_s"] / forked["pool_start_s"], 2),
        "ratio_definition": "pool start wall time, hosts spawned / hosts forked from the factory",
        "summary": f"pool of {forked['servers']} starts in {forked['pool_start_s']:.1f} s / "
        f"{forked['pool_start_cpu_s']:.0f} CPU-s forked vs {spawned['pool_start_s']:.1f} s / "
        f"{spawned['pool_start_cpu_s']:.0f} CPU-s spawned; step {forked['step_ms_median']:.0f} ms, "
        f"reset {forked['reset_ms_median']:.0f} ms, evaluate {forked['evaluate_ms_median']:.0f} ms (medians, forked)",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--root", default="")
    args = parser.parse_args()
    asyncio.run(both(args.servers, args.root))
