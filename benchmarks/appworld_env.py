"""AppWorld env overhead: pool start-up for N servers and per-step server round trips (no model).

.venv/bin/python benchmarks/appworld_env.py [--servers 8] [--root artifacts/appworld]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.task_source import AppWorldTaskSource


async def measure(servers: int, root: str, verbose: bool = True) -> dict:
    source = AppWorldTaskSource(AppWorldConfig(root=root, pool_size=servers))
    pool_start_s = await source.start()
    if verbose:
        print(f"pool start ({servers} servers): {pool_start_s:.1f} s")
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
    result = {"servers": servers, "pool_start_s": round(pool_start_s, 2)}
    for name, xs in [("reset", resets), ("step", steps), ("evaluate", evals), ("close", closes)]:
        result[f"{name}_ms_median"] = round(1000 * statistics.median(xs), 1)
        result[f"{name}_ms_max"] = round(1000 * max(xs), 1)
        if verbose:
            print(f"{name}: median {1000 * statistics.median(xs):.0f} ms, max {1000 * max(xs):.0f} ms")
    await source.close()
    return result


async def main(servers: int, root: str) -> None:
    await measure(servers, root)


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run appworld_env` (needs the AppWorld data; no goal: reported)."""
    r = asyncio.run(measure(2 if quick else 8, "", verbose=False))
    return {
        **r,
        "ratio": round(r["step_ms_median"] / r["reset_ms_median"], 4),
        "ratio_definition": "median step round trip / median reset",
        "summary": f"pool of {r['servers']} starts in {r['pool_start_s']:.1f} s; step {r['step_ms_median']:.0f} ms, "
        f"reset {r['reset_ms_median']:.0f} ms, evaluate {r['evaluate_ms_median']:.0f} ms (medians)",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--root", default="")
    args = parser.parse_args()
    asyncio.run(main(args.servers, args.root))
