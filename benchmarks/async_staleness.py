"""Asynchronous LOOP on the node in miniature: samples/s and time to a dev score of 0.6 per `max_staleness`.

    python -m benchmarks.async_staleness --staleness 0 1 2 4 --seeds 0 1 2 --name async_staleness_seeds
    python -m benchmarks.async_staleness --preset appworld_demo --staleness 0 1 2 4 --iterations 30 \
        --name async_staleness_appworld

Each setting is one real run of the preset (`experiment=<preset> gpu_allocation=cpu_split`: learner on CPU 0, vLLM
and the rollout actors on CPU 1), one after the other, with `learner.sft_cache_dir` and `learner.sft_seed=<seed>` set so a
seed's runs share one warm start, the same one the ablation's and the gateway's runs of that seed start from (the
first run of a seed trains and caches it; it is not part of any number below). From each run's metrics rows:
- samples/s = rollouts collected / Σ time/iteration (the RL loop's wall time, evaluations excluded: they run
  beside it on the sampler's core),
- time to 0.6 = Σ time/iteration up to the first iteration whose dev evaluation (every 3) scores >= 0.6 on the
  preset's selection metric (the one that picks `best`: success on the demo, TGC on AppWorld; recorded as `metric`),
- the dev curve, held-out success, and the async metrics (staleness histogram, mixed-version share, drops).
Every run is recorded (benchmarks/results/<name>.json via runner.write_analysis, rewritten after each run so a
stopped series keeps what finished), with the load average before and after: the machine is shared. Started again,
the series keeps the finished runs of the same settings on record and runs only the others.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.ablation import WARM_CACHE
from benchmarks.run_records import dev_curve, load_runs, metrics_rows, run_summary, selection_metric, train
from benchmarks.runner import RESULTS_DIR, ROOT, write_analysis

RUNS = ROOT / "runs" / "async_staleness"
TARGET = 0.6


def summarize(run_dir: Path) -> dict:
    """The numbers of one finished (or stopped) run, from its metrics rows and summary."""
    rows = metrics_rows(run_dir)
    train_rows = sorted((r for r in rows if "rollout/count" in r), key=lambda r: r["iteration"])
    metric = selection_metric(run_dir)
    dev = dev_curve(rows, metric)
    elapsed, clock = 0.0, {}
    for row in train_rows:
        elapsed += row["time/iteration"]
        clock[int(row["iteration"])] = elapsed
    reached = [i for i in sorted(dev) if i in clock and dev[i] >= TARGET]
    samples = sum(r["rollout/count"] for r in train_rows)
    summary = run_summary(run_dir)
    staleness: dict[str, float] = {}
    for row in train_rows:
        for key, value in row.items():
            if key.startswith("async/staleness_tokens_"):
                staleness[key.rsplit("_", 1)[1]] = staleness.get(key.rsplit("_", 1)[1], 0.0) + value
    return {
        "metric": metric,
        "iterations": len(train_rows),
        "samples": samples,
        "rl_seconds": round(elapsed, 1),
        "samples_per_s": round(samples / elapsed, 3) if elapsed else None,
        "time_to_success_0.6_s": round(clock[reached[0]], 1) if reached else None,
        "iteration_reaching_0.6": reached[0] if reached else None,
        "dev_success": dev,
        "held_out": summary.get("held_out"),
        "staleness_tokens": staleness,
        "mixed_version_share_mean": round(
            sum(r.get("async/mixed_version_share", 0.0) for r in train_rows) / max(len(train_rows), 1), 3
        ),
        "dropped_groups": sum(r.get("async/dropped_groups", 0.0) for r in train_rows),
        "time_learn_s": round(sum(r["time/learn"] for r in train_rows), 1),
        "time_rollout_wait_s": round(sum(r["time/rollout"] for r in train_rows), 1),
    }


def run_one(preset: str, staleness: int, seed: int, iterations: int, extra: list[str]) -> dict:
    run_dir = RUNS / ("" if preset == "demo" else preset) / f"k{staleness}_s{seed}_it{iterations}"
    overrides = [
        f"experiment={preset}", "gpu_allocation=cpu_split", f"algorithm.max_staleness={staleness}", f"run.seed={seed}",
        f"learner.sft_seed={seed}", f"run.iterations={iterations}", f"run.dir={run_dir.relative_to(ROOT)}",
        f"learner.sft_cache_dir={WARM_CACHE}", "logging.wandb_mode=disabled", "logging.plots=false", *extra,
    ]  # fmt: skip
    run = train(overrides, run_dir.with_suffix(".log"))
    record = {"preset": preset, "max_staleness": staleness, "seed": seed, "exit_code": run.exit_code,
              "wall_s": round(run.wall_s, 1), "load_before": round(run.load_before, 2),
              "load_after": round(run.load_after, 2), "overrides": overrides, "extra": extra,
              "run_dir": str(run_dir.relative_to(ROOT))}  # fmt: skip
    if (run_dir / "metrics.jsonl").exists():
        record.update(summarize(run_dir))
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo", help="the experiment preset every run composes")
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, default=18)
    parser.add_argument("--name", default="async_staleness", help="benchmarks/results/<name>.json")
    parser.add_argument("--note", default="")
    parser.add_argument("extra", nargs="*", help="more overrides for every run")
    args = parser.parse_args(argv)
    path = RESULTS_DIR / f"{args.name}.json"
    # every run on record stays, the failed ones too
    runs = load_runs(path)
    for seed in args.seeds:
        for k in args.staleness:
            if any(is_finished(r, args.preset, k, seed, args.iterations, args.extra) for r in runs):
                continue
            runs.append(run_one(args.preset, k, seed, args.iterations, args.extra))
            write_analysis(args.name, {"note": args.note, "target_success": TARGET, "runs": runs})


def is_finished(run: dict, preset: str, staleness: int, seed: int, iterations: int, extra: list[str]) -> bool:
    """Whether a run on record is this setting's, finished (exit 0): started again, the series skips it."""
    return (run["exit_code"] == 0 and run.get("preset", "demo") == preset and run["max_staleness"] == staleness
            and run["seed"] == seed
            and run.get("iterations") == iterations and run.get("extra", []) == extra)  # fmt: skip


if __name__ == "__main__":
    main()
