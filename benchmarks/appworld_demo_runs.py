"""Does a change make `appworld_demo` faster without changing how it learns? Run it for several seeds, tabulate both.

    python -m benchmarks.appworld_demo_runs run --label c16 --seeds 0 1 2 -- env.concurrency=16
    python -m benchmarks.appworld_demo_runs add --label c16 --seed 0 --commit 85ac789 --override env.concurrency=16 <run-dir>
    python -m benchmarks.appworld_demo_runs report --baseline before

`run` starts `python -m loop_agents.train experiment=appworld_demo run.seed=S run.iterations=N run.dir=...` for each
seed, one after the other (never two at once: they would share the cores), and records the run under its label with
the commit and machine; `add` records a run made some other way. `report` prints one row per run (speed: the
command's time from `summary.json`, the mean rollout of iterations 2..N; learning: train success over all iterations
and the last five, dev TGC at every evaluation and its mean after iteration 0) and compares each label with the
baseline by an exact permutation test of the difference of the run means (two-sided: the share of the relabellings
of the pooled runs whose |difference| is at least the observed one), and paired by seed (the seeds both labels ran,
a seed run twice counted by its mean) by an exact sign-flip test: seeds differ more than settings do (one seed's
warm model starts 0.13 higher on dev than another's), so the paired test is the sharper one.

Why these learning measures: one dev evaluation is 30 tasks at temperature 0.3 (binomial standard error ~0.08), and
a seeded run's sampled tokens part from another run's as soon as a batch rounds a logit differently, so two runs of
one setting and seed end apart; train success over all iterations (720 episodes at the preset) and the mean of the
evaluations after the warm start carry less of that noise than the last evaluation alone.

Under the table, every run of one length (15 or 30 iterations, all labels together) is aggregated as the RL
literature asks (rliable: Agarwal et al., NeurIPS 2021; `loop_agents/eval/stats.py`): the interquartile mean of dev
TGC at the warm start, after it (mean of the later evaluations), at the end, and of the gain (after - warm start),
each with its 95 % stratified-bootstrap interval over runs, and P(after > warm start), P(final > warm start) (the
chance that one run's value beats another run's warm start) with theirs. With --baseline, each label's
P(label > baseline) on the dev mean after the warm start and on train success.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path

from benchmarks.portable import portable_path
from benchmarks.run_records import (
    ROOT,
    dev_curve,
    load_runs,
    metrics_rows,
    provenance,
    run_summary,
    save_runs,
    train,
    train_command,
    utc_date,
)
from benchmarks.runner import machine_info
from loop_agents.eval.stats import improvement_probability, iqm_interval

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "appworld_demo_runs.json"
COMPARED = ("train_success", "dev_tgc_mean", "command_s")


def summarize_run(run_dir: Path) -> dict:
    """Speed and learning of one finished run, read from its `metrics.jsonl` and `summary.json`."""
    if not (run_dir / "metrics.jsonl").is_file():
        raise ValueError(f"{run_dir} has no metrics.jsonl: not a run directory")
    rows = metrics_rows(run_dir)
    iterations = [r for r in rows if "time/rollout" in r]
    if not iterations:
        raise ValueError(f"{run_dir}: no finished iteration in metrics.jsonl")
    dev = dev_curve(rows, "tgc")
    later_rollouts = [r["time/rollout"] for r in iterations if r["iteration"] >= 2] or [
        iterations[0]["time/rollout"]
    ]
    success = [float(r["rollout/success_rate"]) for r in iterations]
    summary = run_summary(run_dir)
    if not summary:
        raise ValueError(f"{run_dir} has no summary.json: the run did not finish")
    after_warm_start = [v for it, v in dev.items() if it > 0]
    return {
        "iterations": len(iterations),
        "command_s": round(float(summary["phases_s"]["total"]), 1),
        "rollout_s_mean": round(statistics.mean(later_rollouts), 2),
        "rollout_s_first": round(float(iterations[0]["time/rollout"]), 1),
        "learn_s_mean": round(statistics.mean(r["time/learn"] for r in iterations), 2),
        "train_success": round(statistics.mean(success), 4),
        "train_success_last5": round(statistics.mean(success[-5:]), 4),
        "train_success_by_iteration": [round(s, 4) for s in success],
        "dev_tgc": {str(k): round(v, 4) for k, v in dev.items()},
        "dev_tgc_mean": round(statistics.mean(after_warm_start), 4) if after_warm_start else None,
    }


def permutation_p(a: list[float], b: list[float]) -> float:
    """Exact two-sided permutation p-value of mean(b) - mean(a) over all relabellings of the pooled values."""
    if not a or not b:
        raise ValueError("both groups need at least one run")
    pooled = list(a) + list(b)
    observed = abs(statistics.mean(b) - statistics.mean(a))
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(b)):
        picked = set(chosen)
        in_b = [pooled[i] for i in picked]
        in_a = [pooled[i] for i in range(len(pooled)) if i not in picked]
        total += 1
        hits += abs(statistics.mean(in_b) - statistics.mean(in_a)) >= observed - 1e-12
    return hits / total


def sign_flip_p(differences: list[float]) -> float:
    """Exact two-sided p of a mean paired difference: the share of the 2^n sign flips whose |mean| reaches it."""
    if not differences:
        raise ValueError("no paired difference")
    observed = abs(statistics.mean(differences))
    flips = list(itertools.product((1, -1), repeat=len(differences)))
    hits = sum(
        abs(statistics.mean(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-12
        for signs in flips
    )
    return hits / len(flips)


def by_seed(runs: list[dict], key: str) -> dict[int, float]:
    """A label's value per seed, the mean where a seed was run more than once."""
    seeds: dict[int, list[float]] = {}
    for r in runs:
        seeds.setdefault(r["seed"], []).append(r[key])
    return {seed: statistics.mean(values) for seed, values in seeds.items()}


def record(out: Path, entry: dict) -> None:
    """Add a run, replacing an earlier record of the same label, seed and run directory."""
    key = (entry["label"], entry["seed"], entry["run_dir"])
    runs = [r for r in load_runs(out) if (r["label"], r["seed"], r["run_dir"]) != key]
    save_runs(out, runs + [entry])


def cmd_run(args: argparse.Namespace) -> int:
    runs_dir = Path(args.runs_dir).resolve()
    commit = provenance()["commit"]  # the code the runs start from, before anything is recorded
    for seed in args.seeds:
        run_dir = runs_dir / f"{args.label}_s{seed}"
        overrides = [
            "experiment=appworld_demo",
            f"run.seed={seed}",
            f"run.iterations={args.iterations}",
            f"run.dir={run_dir}",
            *args.overrides,
        ]
        print("running:", " ".join(train_command(overrides)), flush=True)
        code = train(overrides, run_dir / "command_log.txt").exit_code
        entry = {
            "label": args.label,
            "seed": seed,
            "run_dir": portable_path(run_dir),
            "commit": commit,
            "overrides": args.overrides,
            "exit_code": code,
            "machine": machine_info(),
            "date": utc_date(),
        }
        try:
            entry.update(summarize_run(run_dir))
        except (OSError, ValueError, KeyError) as error:  # a failed run is kept as failed, not dropped
            entry["error"] = str(error)
        record(Path(args.out), entry)
        print(f"{args.label} seed {seed}: exit {code}", flush=True)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).resolve()
    try:
        measured = summarize_run(run_dir)
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    entry = {"label": args.label, "seed": args.seed, "run_dir": portable_path(run_dir), "commit": args.commit,
             "overrides": args.overrides, "note": args.note, **measured}  # fmt: skip
    record(Path(args.out), entry)
    print(
        f"{args.label} seed {args.seed}: command {measured['command_s']:.0f} s, "
        f"train success {measured['train_success']:.3f}, dev mean {_fmt(measured['dev_tgc_mean'])}"
    )
    return 0


def _mean_or_none(values) -> float | None:
    values = list(values)
    return None if not values or any(v is None for v in values) else statistics.mean(values)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(runs: list[dict], baseline: str | None) -> str:
    """The per-run table, each label's means, and each label against the baseline: unpaired (exact permutation p)
    and paired by seed (exact sign-flip p)."""
    done = [r for r in runs if "error" not in r]
    lines = [
        "| label | seed | commit | command s | rollout s (it. 2+) | it. 1 rollout | train success (all / last 5) "
        "| dev TGC by evaluation | dev mean after 0 |",
        "| --- " * 9 + "|",
    ]
    for r in done:
        dev = " ".join(f"{v:.3f}" for v in r["dev_tgc"].values())
        lines.append(
            f"| {r['label']} | {r['seed']} | {r['commit']} | {r['command_s']:.0f} | {r['rollout_s_mean']:.1f} "
            f"| {r['rollout_s_first']:.0f} | {r['train_success']:.3f} / {r['train_success_last5']:.2f} "
            f"| {dev} | {_fmt(r['dev_tgc_mean'])} |"
        )
    for r in runs:
        if "error" in r:
            lines.append(f"| {r['label']} | {r['seed']} | {r.get('commit', '?')} | failed: {r['error']} |")
    labels = list(dict.fromkeys(r["label"] for r in done))
    lines.append("")
    for label in labels:
        group = [r for r in done if r["label"] == label]
        means = ", ".join(f"{k} {_fmt(_mean_or_none(r[k] for r in group))}" for k in COMPARED)
        lines.append(f"- {label} ({len(group)} runs): {means}")
    lines += aggregate_lines(done)
    if baseline is not None:
        base = [r for r in done if r["label"] == baseline]
        for label in labels:
            group = [r for r in done if r["label"] == label]
            if label == baseline or not base or not group:
                continue
            lengths = sorted({r["iterations"] for r in base + group})
            if len(lengths) > 1:  # a 30-iteration run's time and success are not a 15-iteration run's
                lines.append(
                    f"- {label} vs {baseline}: not compared (runs of {', '.join(map(str, lengths))} iterations)"
                )
                continue
            parts = []
            # a run without a dev evaluation after the warm start has dev_tgc_mean None: that key is left out
            measured = [k for k in COMPARED if all(r[k] is not None for r in base + group)]
            for key in measured:
                a, b = [r[key] for r in base], [r[key] for r in group]
                diff = statistics.mean(b) - statistics.mean(a)
                parts.append(f"{key} {diff:+.3f} (p = {permutation_p(a, b):.2f})")
            speed = statistics.mean(r["command_s"] for r in base) / statistics.mean(
                r["command_s"] for r in group
            )
            lines.append(f"- {label} vs {baseline}: command {speed:.2f}x faster; " + "; ".join(parts))
            seeds = sorted({r["seed"] for r in base} & {r["seed"] for r in group})
            if seeds:
                paired = []
                for key in measured:
                    a, b = by_seed(base, key), by_seed(group, key)
                    diffs = [b[s] - a[s] for s in seeds]
                    paired.append(f"{key} {statistics.mean(diffs):+.3f} (p = {sign_flip_p(diffs):.2f})")
                lines.append(f"  - paired by seed ({', '.join(map(str, seeds))}): " + "; ".join(paired))
            better = [
                f"{key} {improvement_probability([r[key] for r in group], [r[key] for r in base]).text(2)}"
                for key in ("dev_tgc_mean", "train_success")
                if key in measured
            ]
            if better:
                lines.append(f"  - P({label} > {baseline}) over runs (rliable): " + "; ".join(better))
    return "\n".join(lines)


def dev_scores(run: dict) -> dict[str, float] | None:
    """Dev TGC at the warm start (iteration 0), after it (mean of the later evaluations), at the end, and the gain."""
    dev = run.get("dev_tgc", {})
    if "0" not in dev or run.get("dev_tgc_mean") is None:
        return None
    warm, after = dev["0"], run["dev_tgc_mean"]
    return {"warm": warm, "after": after, "final": dev[max(dev, key=int)], "gain": after - warm}


def aggregate_lines(done: list[dict]) -> list[str]:
    """rliable aggregates of every run of one length: IQM [95 % CI] and P(improvement) [95 % CI] over runs."""
    lines = []
    for length in sorted({r["iterations"] for r in done}):
        scores = [s for r in done if r["iterations"] == length and (s := dev_scores(r)) is not None]
        if not scores:
            continue
        iqm = {key: iqm_interval([s[key] for s in scores]) for key in ("warm", "after", "final", "gain")}
        warm = [s["warm"] for s in scores]
        after = improvement_probability([s["after"] for s in scores], warm)
        final = improvement_probability([s["final"] for s in scores], warm)
        lines.append(
            f"- all {len(scores)} runs of {length} iterations (rliable: IQM [95 % stratified bootstrap over runs]): "
            f"dev TGC warm start {iqm['warm'].text(3)}, mean after it {iqm['after'].text(3)}, final "
            f"{iqm['final'].text(3)}; gain after - warm start {iqm['gain'].text(3, signed=True)}; "
            f"P(after > warm start) {after.text(2)}, P(final > warm start) {final.text(2)}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="the JSON the runs are recorded in")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run appworld_demo for each seed, one after the other")
    run.add_argument("--label", required=True)
    run.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    run.add_argument("--iterations", type=int, default=15)
    run.add_argument("--runs-dir", default=str(ROOT / "runs" / "appworld_demo_runs"))
    run.add_argument("overrides", nargs="*", help="Hydra overrides after --")
    add = sub.add_parser("add", help="record a finished run made some other way")
    add.add_argument("--label", required=True)
    add.add_argument("--seed", type=int, required=True)
    add.add_argument("--commit", required=True)
    add.add_argument("--note", default="")
    add.add_argument("--override", dest="overrides", action="append", default=[], help="one per override")
    add.add_argument("run_dir")
    rep = sub.add_parser("report", help="print the table and the comparisons")
    rep.add_argument("--baseline", default=None, help="the label every other label is compared with")
    args = parser.parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "add":
        return cmd_add(args)
    print(report(load_runs(Path(args.out)), args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
