"""The LOOP ablation: algorithm x seed on one preset, from one warm start per seed, with the same samples.

    python -m benchmarks.ablation run --preset demo --algorithms loop grpo rloo dr_grpo ppo_gae --seeds 0 1 2
    python -m benchmarks.ablation run --preset demo --algorithms grpo --seeds 0 --iterations 2 \\
        --out /tmp/smoke.json --runs-dir /tmp/smoke_runs --warm-cache /tmp/smoke_cache -- env.concurrency=2
    python -m benchmarks.ablation report --preset demo     # the table (python -m benchmarks.render writes it)

Each run is `python -m loop_agents.train experiment=<preset> algorithm=<a> run.seed=S learner.sft_seed=S
learner.sft_cache_dir=<cache> run.iterations=N algorithm.rollouts_per_task=K algorithm.tasks_per_iteration=T
run.dir=<runs-dir>/<preset>/<a>_s<S>_it<N>`, one after the other (never two at once: they would share the cores).
The warm model is a pure function of the base model, the demonstrations and the SFT settings (not the algorithm),
so with the cache every algorithm of seed S starts from the warm model the first one built; K and T are the
preset's own (as `algorithm=loop` composes it) and pinned for every algorithm, so each run draws K x T x N samples.
Every planned run is composed and validated before the first starts: a bad one is one `config error:` line and
nothing runs. Each finished run, failures included, is appended to `--out` (default
`benchmarks/results/ablation_<preset>.json`) with its exit code, wall time, load, commit, date, CPU, the dev curve,
the warm start's score, final, best, seconds per iteration and the share of groups whose rewards were all equal
(`adv/zero_variance_groups` / `adv/num_groups` of the metrics rows: no advantage, nothing learned from them; an
estimator that is not group-based reports none). A run already recorded is skipped, so the same command resumes
the ablation; a run directory left by an interrupted runner resumes its training from the newest checkpoint.
Extra Hydra overrides after `--` go to every run; `<algorithm>:key=value` to that algorithm's runs alone (e.g.
`rloo:algorithm.epochs=1`). The table's maths: benchmarks/ablation_table.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
from pathlib import Path

from benchmarks.portable import portable_path
from benchmarks.run_records import (
    ROOT,
    append_run,
    dev_curve,
    load_runs,
    metrics_rows,
    provenance,
    run_summary,
    selection_metric,
    train,
    train_command,
)

ALGORITHMS = ("loop", "grpo", "rloo", "dr_grpo", "ppo_gae")
RESULTS = ROOT / "benchmarks" / "results"
WARM_CACHE = "artifacts/warm_models"
_WARM_LINE = re.compile(r"\[warm start\] (?:reused the cached warm model|cached the warm model in) (\S+)")
_MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|tmp|home|root)/[^\s'\"]+")


def default_out(preset: str) -> Path:
    return RESULTS / f"ablation_{preset}.json"


# ---------------------------------------------------------------------------------------------- the plan (pure)


def run_key(
    preset: str, algorithm: str, seed: int, iterations: int, samples: int, overrides: list[str]
) -> str:
    """What makes two runs the same run: a recorded key is not run again."""
    return json.dumps([preset, algorithm, seed, iterations, samples, sorted(overrides)])


def record_key(record: dict) -> str:
    return run_key(record["preset"], record["algorithm"], record["seed"], record["iterations"],
                   record["samples"], record.get("overrides", []))  # fmt: skip


def pending(planned: list[dict], recorded: list[dict], retry_failed: bool = False) -> list[dict]:
    """The planned runs not yet recorded (with retry_failed: also those whose every record failed)."""
    done: dict[str, bool] = {}
    for record in recorded:
        key = record_key(record)
        done[key] = done.get(key, False) or record.get("status") == "ok"
    return [p for p in planned if p["key"] not in done or (retry_failed and not done[p["key"]])]


def run_dir_name(algorithm: str, seed: int, iterations: int, overrides: list[str]) -> str:
    """`grpo_s0_it18`, with a digest of the extra overrides when there are any (another setting, another dir)."""
    name = f"{algorithm}_s{seed}_it{iterations}"
    if overrides:
        name += "_" + hashlib.sha256(json.dumps(sorted(overrides)).encode()).hexdigest()[:8]
    return name


def overrides_for(algorithm: str, overrides: list[str]) -> list[str]:
    """The extra overrides one algorithm's runs take: the plain ones, and `<algorithm>:key=value` for it alone."""
    mine = []
    for override in overrides:
        head = override.partition("=")[0]
        if ":" not in head:
            mine.append(override)
        elif head.partition(":")[0] == algorithm:
            mine.append(override.partition(":")[2])
    return mine


def plan(preset: str, algorithms: list[str], seeds: list[int], iterations: int, rollouts_per_task: int,
         tasks_per_iteration: int, extra: list[str], runs_dir: Path, warm_cache: str) -> list[dict]:  # fmt: skip
    """One entry per (seed, algorithm), seed-major so each seed's warm model is built once and reused at once."""
    samples = rollouts_per_task * tasks_per_iteration * iterations
    runs = []
    for seed in seeds:
        for algorithm in algorithms:
            overrides = overrides_for(algorithm, extra)
            run_dir = runs_dir / preset / run_dir_name(algorithm, seed, iterations, overrides)
            train_overrides = [
                f"experiment={preset}", f"algorithm={algorithm}", f"run.seed={seed}", f"learner.sft_seed={seed}",
                f"learner.sft_cache_dir={warm_cache}", f"run.iterations={iterations}",
                f"algorithm.rollouts_per_task={rollouts_per_task}",
                f"algorithm.tasks_per_iteration={tasks_per_iteration}", *overrides, f"run.dir={run_dir}",
            ]  # fmt: skip
            runs.append({
                "preset": preset, "algorithm": algorithm, "seed": seed, "iterations": iterations,
                "rollouts_per_task": rollouts_per_task, "tasks_per_iteration": tasks_per_iteration,
                "samples": samples, "overrides": list(overrides), "run_dir": run_dir,
                "train_overrides": train_overrides,
                "key": run_key(preset, algorithm, seed, iterations, samples, overrides),
            })  # fmt: skip
    return runs


# ---------------------------------------------------------------------------------------------- a run's record (pure)


def measure(rows: list[dict], metric: str) -> dict:
    """From the metrics rows: the dev curve of `metric` by evaluated iteration (the last row of one wins), the warm
    start's score (iteration 0), final (last evaluation), best (highest), seconds per iteration (mean of
    time/iteration) and the groups whose rewards were all equal (summed over iterations)."""
    curve = dev_curve(rows, metric)
    seconds = [float(r["time/iteration"]) for r in rows if "time/iteration" in r]
    grouped = [r for r in rows if "adv/num_groups" in r and "adv/zero_variance_groups" in r]
    out: dict = {
        "metric": metric,
        "dev_curve": {str(k): round(v, 4) for k, v in curve.items()},
        "iterations_done": max((int(r["iteration"]) for r in rows if "time/iteration" in r), default=0),
        "seconds_per_iteration": round(statistics.mean(seconds), 2) if seconds else None,
        "zero_advantage_groups": None,
        "groups": None,
        "zero_advantage_share": None,
    }
    if grouped:
        zero = sum(float(r["adv/zero_variance_groups"]) for r in grouped)
        groups = sum(float(r["adv/num_groups"]) for r in grouped)
        out.update(zero_advantage_groups=int(zero), groups=int(groups),
                   zero_advantage_share=round(zero / groups, 4) if groups else None)  # fmt: skip
    if 0 in curve:
        out["warm_start"] = curve[0]
    if 0 in curve and len(curve) > 1:
        out["final"], out["best"] = curve[max(curve)], max(curve.values())
    return out


def held_out(run_dir: Path, metric: str) -> dict:
    """start / best / final on the tasks the selection never saw (summary.json), where the run measured them."""
    held = run_summary(run_dir).get("held_out") or {}
    # `held_out/<which>/<metric>` -> which; `held_out/num_tasks` (not `held_out/<which>/num_tasks`, which would
    # overwrite <which>'s score with the task count, as it did in the records before 2026-11-29 12:40 UTC)
    out = {k.split("/")[1]: v for k, v in held.items() if k.count("/") == 2 and k.endswith(f"/{metric}")}
    if "held_out/num_tasks" in held:
        out["num_tasks"] = held["held_out/num_tasks"]
    return out


def scrub(text: str) -> str:
    """This machine's paths out of a log tail kept in a results file (`/work/main/runs/x` -> `runs/x`)."""
    return _MACHINE_PATH.sub(lambda m: portable_path(m.group(0)), text)


def build_record(entry: dict, exit_code: int | None, wall_s: float, load_before: float, load_after: float,
                 log_text: str, resumed: bool) -> dict:  # fmt: skip
    """The raw record of one run: what it was asked, how it ended, what it measured; `status` ok or failed."""
    run_dir = Path(entry["run_dir"])
    metric = selection_metric(run_dir)
    warm = _WARM_LINE.findall(log_text)
    record = {
        **{k: entry[k] for k in ("preset", "algorithm", "seed", "iterations", "rollouts_per_task",
                                 "tasks_per_iteration", "samples", "overrides")},
        "run_dir": portable_path(run_dir),
        "resumed": resumed,
        "exit_code": exit_code,
        "wall_s": round(wall_s, 1),
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
        "warm_model": Path(warm[-1]).name if warm else None,
        **measure(metrics_rows(run_dir), metric),
        "held_out": held_out(run_dir, metric),
    }  # fmt: skip
    problems = []
    if exit_code != 0:
        problems.append(f"exit code {exit_code}")
    if "final" not in record:
        problems.append("no evaluation at the warm start and after it")
    elif record["iterations_done"] < entry["iterations"]:
        problems.append(f"{record['iterations_done']} of {entry['iterations']} iterations")
    record["status"] = "failed" if problems else "ok"
    if problems:
        record["error"] = "; ".join(problems)
        record["log_tail"] = scrub(log_text[-1500:])
    return record


# ---------------------------------------------------------------------------------------------- running


def preset_samples(preset: str, overrides: list[str]) -> tuple[int, int, int]:
    """(rollouts_per_task, tasks_per_iteration, run.iterations) of `experiment=<preset>` as LOOP composes it (with
    the extra overrides every algorithm takes)."""
    from loop_agents.config.load import compose

    cfg = compose([f"experiment={preset}", "algorithm=loop", *overrides_for("", overrides)])
    a = cfg.algorithm
    return int(a.rollouts_per_task), int(a.tasks_per_iteration), int(cfg.run.iterations)


def check_configs(runs: list[dict]) -> str | None:
    """The first planned run whose config does not compose or validate, as one line; None when all do."""
    from loop_agents.config.load import compose
    from loop_agents.config.validate import ConfigError

    for entry in runs:
        try:
            compose(entry["train_overrides"])
        except ConfigError as error:
            return f"config error: experiment={entry['preset']} algorithm={entry['algorithm']}: {error}"
    return None


def run_one(entry: dict) -> dict:
    """Train one planned run (its log `ablation.log` in the run directory, added to) and return its record, stamped
    with the commit, date, CPU and cores."""
    run_dir = Path(entry["run_dir"])
    resumed = (run_dir / "metrics.jsonl").exists()  # an interrupted runner's run: training resumes from there
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / "ablation.log"
    shown = " ".join(train_command(entry["train_overrides"])[2:])
    print(f"[ablation] {entry['algorithm']} seed {entry['seed']}: {shown}", flush=True)
    run = train(entry["train_overrides"], log_path, append=True)
    text = log_path.read_text(errors="replace")
    record = build_record(entry, run.exit_code, run.wall_s, run.load_before, run.load_after, text, resumed)
    record.update(provenance())
    return record


def row_text(r: dict) -> str:
    if r["status"] != "ok":
        return f"{r['algorithm']} seed {r['seed']}: FAILED ({r['error']}), {r['wall_s']:.0f} s"
    return (
        f"{r['algorithm']} seed {r['seed']}: dev {r['warm_start']:.3f} -> final {r['final']:.3f}, best "
        f"{r['best']:.3f}; {r['seconds_per_iteration']} s/iteration; {r['wall_s']:.0f} s"
    )


def cmd_run(args: argparse.Namespace, overrides: list[str]) -> int:
    from loop_agents.config.validate import ConfigError

    try:
        k, t, preset_iterations = preset_samples(args.preset, overrides)
    except ConfigError as error:
        print(f"config error: experiment={args.preset}: {error}", file=sys.stderr)
        return 2
    iterations = args.iterations or preset_iterations
    out = Path(args.out) if args.out else default_out(args.preset)
    runs = plan(args.preset, args.algorithms, args.seeds, iterations, k, t, overrides, Path(args.runs_dir),
                args.warm_cache)  # fmt: skip
    todo = pending(runs, [r for r in load_runs(out) if r.get("preset") == args.preset], args.retry_failed)
    print(f"[ablation] {args.preset}: {len(runs)} runs planned ({k} x {t} x {iterations} = {k * t * iterations} "
          f"samples each), {len(runs) - len(todo)} already recorded in {portable_path(out)}", flush=True)  # fmt: skip
    problem = check_configs(todo)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    for entry in todo:
        record = run_one(entry)
        append_run(out, record)
        print(f"[ablation] {row_text(record)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ablation", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every (seed, algorithm) not yet recorded, one after the other")
    run.add_argument("--preset", required=True, help="experiment=<preset>: demo, or an AppWorld preset")
    run.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), help="conf/algorithm/<name>")
    run.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    run.add_argument("--iterations", type=int, default=None, help="default: the preset's run.iterations")
    run.add_argument("--out", default=None, help="default: benchmarks/results/ablation_<preset>.json")
    run.add_argument("--runs-dir", default=str(ROOT / "runs" / "ablation"))
    run.add_argument("--warm-cache", default=WARM_CACHE, help="learner.sft_cache_dir shared by the runs")
    run.add_argument(
        "--retry-failed", action="store_true", help="also run again a run whose records all failed"
    )
    report = sub.add_parser("report", help="print the table of the recorded runs")
    report.add_argument("--preset", required=True)
    report.add_argument("--out", default=None, help="default: benchmarks/results/ablation_<preset>.json")
    args, overrides = parser.parse_known_args(argv)
    overrides = [o for o in overrides if o != "--"]
    unknown = [o for o in overrides if o.startswith("-") or "=" not in o]
    if unknown:
        parser.error(f"not a Hydra override: {' '.join(unknown)}")
    if args.command == "run":
        return cmd_run(args, overrides)
    from benchmarks.ablation_table import render_preset

    print(render_preset(RESULTS, args.preset, Path(args.out) if args.out else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
