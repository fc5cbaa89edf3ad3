"""Is the CPU demo's learning robust? Run it for several seeds and thread counts and tabulate the result.

    python scripts/demo_seeds.py run --seeds 0 1 2 3 4 --threads 1 2        # one run after the other
    python scripts/demo_seeds.py run --seeds 0 --threads 2 -- run.iterations=9   # extra Hydra overrides
    python scripts/demo_seeds.py report [--readme]    # print the table; --readme rewrites docs/log/demo.md's block

Each (seed, threads) run is `python -m loop_agents.train experiment=demo run.seed=S
gpu_allocation.cpu_learner_threads=T run.dir=<runs-dir>/s<S>_t<T>` (T torch threads for the warm start and the
learner), timed from start to exit. Afterwards the warm model's quality is measured without vLLM
(`warm_start_quality`: P(optimal dev episode) and its factors), and the run's held-out dev success at every
evaluation is read from `metrics.jsonl`. Every run is kept in the JSON (`--out`), failures included; a finished
(seed, threads) pair is not rerun unless `--rerun`. The demo table of docs/log/demo.md (the robustness runs) is
generated from that file.

Under the per-run table, `report` aggregates the evaluated runs as the RL literature asks (rliable: Agarwal et al.,
NeurIPS 2021; `loop_agents/eval/stats.py`): the interquartile mean of the gain and of the final dev success with
95 % stratified-bootstrap intervals over runs, and P(final > warm start), the chance that a run's final dev success
beats another run's warm start (Mann-Whitney), with its interval; the same for the held-out tasks where recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks/ (not an installed package) for portable_path and run_records

from benchmarks.portable import from_portable, portable_path  # noqa: E402
from benchmarks.run_records import (  # noqa: E402
    TrainRun,
    append_run,
    dev_curve,
    load_runs,
    metrics_rows,
    provenance,
    run_summary,
    save_runs,
    train,
    train_command,
)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "demo_seeds.json"
README_BEGIN, README_END = "<!-- demo_seeds:begin -->", "<!-- demo_seeds:end -->"


def eval_curve(run_dir: Path) -> dict[int, dict[str, float]]:
    """Held-out dev success and reward per evaluated iteration (the last row of an iteration wins): the demo's
    record keeps the mean reward beside the success (NaN where an evaluation logged none)."""
    rows = metrics_rows(run_dir)
    reward = dev_curve(rows, "reward_mean")
    return {
        iteration: {"success": success, "reward": reward.get(iteration, float("nan"))}
        for iteration, success in dev_curve(rows).items()
    }


def warm_report(run_dir: Path) -> dict:
    """What the run's `warm_model/warm_start.json` says: final SFT loss, seconds, epochs run and orders drawn."""
    path = run_dir / "warm_model" / "warm_start.json"
    if not path.exists():
        return {}
    report = json.loads(path.read_text())
    return {
        "sft_loss": report["epoch_losses"][-1],
        "sft_seconds": report.get("seconds"),
        "sft_epochs": report.get("epochs_run"),
        "sft_draws": report.get("draws"),
    }


def warm_quality(run_dir: Path, threads: int) -> dict:
    """warm_report plus P(optimal dev episode) and its factors (100 clean dev episodes), in the form the run's agent
    acts in (its `config.yaml`: text actions, or tool calls with quoted observations under `agent=tools`)."""
    report = warm_report(run_dir)
    if not report:
        return {}
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM

    from loop_agents.envs.bundled.family import quoted_names
    from loop_agents.envs.bundled.warm_start_quality import optimal_episode_probabilities
    from loop_agents.envs.settings import env_settings
    from loop_agents.orchestration.warm_model import warm_chat_format

    torch.set_num_threads(threads)
    warm = run_dir / "warm_model"
    cfg = OmegaConf.load(run_dir / "config.yaml")
    model = AutoModelForCausalLM.from_pretrained(warm, dtype=torch.float32).eval()
    chat = warm_chat_format(cfg, str(warm))
    quoted = quoted_names(cfg, env_settings(cfg))
    return {**report, **optimal_episode_probabilities(model, chat, 100, quoted=quoted)}


def phases_and_held_out(run_dir: Path) -> dict:
    """From the run's summary.json: time per phase, and held-out success (the tasks the selection never saw)."""
    summary = run_summary(run_dir)
    if not summary:
        return {}
    out: dict = {"phases_s": {k: round(v, 1) for k, v in summary.get("phases_s", {}).items()}}
    held = summary.get("held_out") or {}
    if "held_out/start/success_rate" in held:
        out["held_out"] = {
            "tasks": int(held.get("held_out/num_tasks", held.get("held_out/start/num_tasks", 0))),
            **{
                which: held[f"held_out/{which}/success_rate"]
                for which in ("start", "best", "final")
                if f"held_out/{which}/success_rate" in held
            },
        }
    return out


def run_one(seed: int, threads: int, runs_dir: Path, overrides: list[str]) -> dict:
    run_dir, repeat = runs_dir / f"s{seed}_t{threads}", 1
    while run_dir.exists():  # a new directory per run: an old one would be resumed, not rerun
        repeat += 1
        run_dir = runs_dir / f"s{seed}_t{threads}_r{repeat}"
    run_dir.mkdir(parents=True)
    train_overrides = [
        "experiment=demo",
        f"run.seed={seed}",
        f"gpu_allocation.cpu_learner_threads={threads}",
        f"run.dir={run_dir}",
        *overrides,
    ]
    shown = " ".join(train_command(train_overrides)[2:])
    print(f"[demo_seeds] seed {seed}, {threads} thread(s): {shown}", flush=True)
    run = train(train_overrides, run_dir / "demo_seeds.log")
    result = summarize(run_dir, seed, threads, overrides, run)
    print(f"[demo_seeds] {row_text(result)}", flush=True)
    return result


def summarize(
    run_dir: Path,
    seed: int,
    threads: int,
    overrides: list[str],
    run: TrainRun,
    commit: str | None = None,
    note: str | None = None,
    date: str | None = None,
) -> dict:
    """The JSON record of one finished (or stopped) demo run in `run_dir`, stamped with this checkout's provenance
    (`commit` and `date` given: the run's own, for a run made elsewhere)."""
    curve = eval_curve(run_dir)
    stamp = provenance()
    result = {
        "seed": seed,
        "threads": threads,
        "overrides": overrides,
        "exit_code": run.exit_code,
        "wall_s": round(run.wall_s, 1),
        "load_before": round(run.load_before, 2),
        "load_after": round(run.load_after, 2),
        "run_dir": portable_path(run_dir),
        "date": date or stamp["date"],
        "commit": commit or stamp["commit"],
        "cpu": stamp["cpu"],
        "cores": stamp["cores"],
        "warm": warm_quality(run_dir, threads),
        "dev_curve": {str(k): v for k, v in curve.items()},
        **phases_and_held_out(run_dir),
    }
    if note:
        result["note"] = note
    if curve:
        successes = [v["success"] for v in curve.values()]
        result["dev_start"], result["dev_end"] = successes[0], successes[-1]
        result["dev_best"] = max(successes)
        result["gain_points"] = round(100 * (successes[-1] - successes[0]), 1)
    return result


def row_text(r: dict) -> str:
    gain = f"{r['gain_points']:+.0f} points" if "gain_points" in r else "no evaluation"
    return (
        f"seed {r['seed']} threads {r['threads']}: exit {r['exit_code']}, {r['wall_s']:.0f} s, "
        f"dev {r.get('dev_start', float('nan')):.2f} -> {r.get('dev_end', float('nan')):.2f} ({gain})"
    )


def summary_line(runs: list[dict]) -> str:
    """`N runs, M evaluated: gain min/median/max; runs with a gain >= +30; runs within 20 minutes`."""
    gains = sorted(r["gain_points"] for r in runs if "gain_points" in r)
    if not gains:
        return f"{_runs(len(runs))}, none evaluated."
    half = len(gains) // 2
    median = gains[half] if len(gains) % 2 else (gains[half - 1] + gains[half]) / 2
    return (
        f"{_runs(len(runs))}, {len(gains)} evaluated: gain min {gains[0]:+.0f}, median {median:+.0f}, "
        f"max {gains[-1]:+.0f} points; runs with a gain ≥ +30: {sum(g >= 30 for g in gains)} of {len(runs)}; "
        f"runs within 20 minutes: {sum(r['wall_s'] <= 1200 for r in runs)} of {len(runs)}."
    )


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def descends_from(commit: str, ancestor: str) -> bool:
    """True if `commit` (`+dirty` or not) is `ancestor` or comes after it in this repository's history."""
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, commit.removesuffix("+dirty")],
        cwd=ROOT,
        capture_output=True,
    )
    return done.returncode == 0


def markdown_table(runs: list[dict], since: str | None = None) -> str:
    """One row per run, failures included; dev success at the evaluated iterations 0 -> ... -> end."""
    lines = [
        "| seed | threads | warm start: SFT loss, P(optimal dev episode), P(code symbols) | "
        "dev success at RL iterations (0 → … → end) | gain | held out: other dev tasks, start → final | "
        "wall time (warm start) | date, CPU, commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        warm = r.get("warm", {})
        warm_text = (
            f"{warm['sft_loss']:.3f}, {warm['p_optimal_dev_episode']:.3f}, "
            f"{warm['p_code_1']:.2f} / {warm['p_code_2']:.2f}"
            if warm
            else "not built"
        )
        curve = r.get("dev_curve", {})
        shown = [k for i, k in enumerate(curve) if i % 2 == 0 or i == len(curve) - 1]
        curve_text = " → ".join(f"{curve[k]['success']:.2f}@{k}" for k in shown) or "none"
        gain = f"**{r['gain_points']:+.0f}**" if "gain_points" in r else "—"
        status = "" if r["exit_code"] == 0 else f" (exit {r['exit_code']})"
        if r.get("note"):  # what the operator knows about the run that the JSON cannot (e.g. why it died)
            status += f" ({r['note']})"
        held = r.get("held_out", {})
        held_text = (
            f"{held['start']:.2f} → {held['final']:.2f} ({held['tasks']} tasks)" if "final" in held else "—"
        )
        lines.append(
            f"| {r['seed']} | {r['threads']} | {warm_text} | {curve_text} | {gain}{status} | {held_text} | "
            f"{r['wall_s'] / 60:.1f} min ({_warm_time(r)}load {r['load_before']:.1f}) | "
            f"{r['date']}, {r['cpu']}, {r['commit']} |"
        )
    lines.append("")
    lines.append(f"All {summary_line(runs)}")
    lines += aggregate_lines(runs)
    if since is not None:
        current = [r for r in runs if descends_from(r["commit"], since)]
        lines.append("")
        lines.append(f"The current preset (commits since `{since}`): {summary_line(current)}")
        lines += aggregate_lines(current)
    return "\n".join(lines)


def aggregate_lines(runs: list[dict]) -> list[str]:
    """IQM [95 % CI] of the gain and the final success, and P(final > start) [95 % CI], over the evaluated runs."""
    from loop_agents.eval.stats import improvement_probability, iqm_interval

    evaluated = [r for r in runs if "gain_points" in r]
    if not evaluated:
        return []
    gain = iqm_interval([r["gain_points"] for r in evaluated])
    end = iqm_interval([r["dev_end"] for r in evaluated])
    better = improvement_probability([r["dev_end"] for r in evaluated], [r["dev_start"] for r in evaluated])
    lines = [
        "",
        f"Aggregate over the {len(evaluated)} evaluated runs (rliable: IQM, 95 % stratified-bootstrap interval over "
        f"runs): dev gain {gain.text(0, signed=True)} points, final dev success {end.text(2)}; "
        f"P(final > warm start) {better.text(2)}.",
    ]
    held = [r["held_out"] for r in evaluated if "final" in r.get("held_out", {})]
    if held:
        final = iqm_interval([h["final"] for h in held])
        held_gain = iqm_interval([100 * (h["final"] - h["start"]) for h in held])
        held_better = improvement_probability([h["final"] for h in held], [h["start"] for h in held])
        lines.append(
            f"Held out ({held[0]['tasks']} other dev tasks, {len(held)} runs): gain {held_gain.text(0, signed=True)} "
            f"points, final success {final.text(2)}; P(final > start) {held_better.text(2)}."
        )
    return lines


def refreshed(record: dict) -> dict:
    """`record` with what its run directory (if it still exists) says about phases, held-out tasks and epochs."""
    run_dir = from_portable(record["run_dir"])
    if not run_dir.is_dir():
        return record
    record = {**record, **phases_and_held_out(run_dir)}
    report = warm_report(run_dir)
    if record.get("warm") and report:
        record["warm"] = {
            **record["warm"],
            "sft_epochs": report["sft_epochs"],
            "sft_draws": report["sft_draws"],
        }
    return record


def _warm_time(r: dict) -> str:
    """`warm start 5.5 min, 4 epochs; ` where the record knows it."""
    seconds = r.get("phases_s", {}).get("warm start")
    if seconds is None:
        return ""
    epochs = r.get("warm", {}).get("sft_epochs")
    draws = r.get("warm", {}).get("sft_draws") or 1
    parts = [f"warm start {seconds / 60:.1f} min"]
    if epochs:
        parts.append(f"{epochs} epochs" + (f" of order {draws}" if draws > 1 else ""))
    return ", ".join(parts) + "; "


def write_readme(table: str, readme: Path = ROOT / "docs" / "log" / "demo.md") -> None:
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise SystemExit(f"{readme} has no {README_BEGIN} ... {README_END} block to replace")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    readme.write_text(f"{head}{README_BEGIN}\n{table}\n{README_END}{tail}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the demo for every (seed, threads) pair, one after the other")
    run.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    run.add_argument("--threads", type=int, nargs="+", default=[2])
    run.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "demo_seeds")
    run.add_argument("--rerun", action="store_true", help="run pairs that already have a result again")
    report = sub.add_parser("report", help="print the table of every recorded run")
    report.add_argument(
        "--readme", action="store_true", help="also rewrite the demo_seeds block of docs/log/demo.md"
    )
    report.add_argument(
        "--since", help="also summarise the runs of this commit and later (the current preset)"
    )
    report.add_argument(
        "--refresh", action="store_true", help="re-read phase times, held-out success and warm-start epochs "
        "from the run directories that still exist (records made by an older version of this script)",
    )  # fmt: skip
    record = sub.add_parser(
        "record",
        help="add a run made outside `run` (e.g. `bash scripts/demo.sh` on a fresh clone) to the JSON",
    )
    record.add_argument("run_dir", type=Path)
    record.add_argument("--seed", type=int, required=True)
    record.add_argument("--threads", type=int, required=True)
    record.add_argument("--exit-code", type=int, required=True)
    record.add_argument(
        "--wall-s", type=float, required=True, help="the run's wall time (install not counted)"
    )
    record.add_argument("--load-before", type=float, required=True)
    record.add_argument("--commit", help="the commit the run used (default: this checkout's)")
    record.add_argument("--date", help="when the run ended, e.g. '2026-11-25 14:17 UTC' (default: now)")
    record.add_argument("--note", help="what the JSON cannot say (where it ran, why it stopped)")
    for p in (run, report, record):
        p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args, overrides = parser.parse_known_args(argv)
    overrides = [o for o in overrides if o != "--"]
    if args.command == "record":
        if not (args.run_dir / "metrics.jsonl").is_file():
            parser.error(f"{args.run_dir} has no metrics.jsonl: not a run directory")
        run = TrainRun(args.exit_code, args.wall_s, args.load_before, os.getloadavg()[0])
        result = summarize(args.run_dir, args.seed, args.threads, overrides, run, commit=args.commit,
                           note=args.note, date=args.date)  # fmt: skip
        append_run(args.out, result)
        print(f"[demo_seeds] recorded: {row_text(result)}")
        overrides = []
    if args.command == "report" and overrides:
        parser.error(f"unrecognized arguments: {' '.join(overrides)}")
    if args.command == "run":
        if any(t < 1 for t in args.threads):
            parser.error("--threads must be >= 1")
        for seed in args.seeds:
            for threads in args.threads:
                runs = load_runs(args.out)
                same = [
                    r for r in runs if (r["seed"], r["threads"], r["overrides"]) == (seed, threads, overrides)
                ]
                if same and not args.rerun:
                    print(f"[demo_seeds] already recorded: {row_text(same[-1])}")
                    continue
                append_run(args.out, run_one(seed, threads, args.runs_dir, overrides))
    runs = load_runs(args.out)
    if args.command == "report" and args.refresh:
        runs = [refreshed(r) for r in runs]
        save_runs(args.out, runs)
    table = markdown_table(runs, getattr(args, "since", None))
    print(table)
    if args.command == "report" and args.readme:
        write_readme(table)


if __name__ == "__main__":
    main()
