"""RL's gain over the warm start, measured so that noise cannot pass for it (issue 39, part 4).

    python -m benchmarks.rl_gain --name appworld_demo_rl_gain --split dev runs/appworld_demo_runs/issue43-c16_s0 ...

Each run directory must hold what `scripts/evaluate.py checkpoint=<run>/checkpoints/<checkpoint-N | best>
compare=<run>/held_out_adapters/start split=<split> runs=k` leaves in `<run>/evaluate/<label>/<split>/`: both
policies played on the same tasks and runs. Per seed: the paired difference checkpoint - start (per task, the mean
success over its runs; mean over tasks with its 95 % percentile bootstrap over tasks, `stats.paired_difference`),
for the final checkpoint and for `best` where it is another adapter. Over seeds, as the RL literature asks (rliable,
Agarwal et al. 2021), one score per run: the interquartile mean of start and final success, the IQM of the seeds'
differences, and P(final > start), each with its stratified-bootstrap interval over runs. Writes
`benchmarks/results/<name>.json` and prints one line per seed and the aggregate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from benchmarks.portable import portable_path
from benchmarks.runner import write_analysis
from loop_agents.eval.stats import Interval, improvement_probability, iqm_interval

START = "start"


def compared(run: Path, split: str) -> dict[str, dict]:
    """label -> metrics.json of every evaluation in `run` that was compared with the start policy."""
    found = {}
    for metrics in sorted((run / "evaluate").glob(f"*/{split}/metrics.json")):
        report = json.loads(metrics.read_text())
        if Path(report.get("compare", {}).get("checkpoint", "")).name == START:
            found[metrics.parent.parent.name] = report
    return found


def final_label(labels: list[str]) -> str:
    checkpoints = [label for label in labels if label.startswith("checkpoint-")]
    if not checkpoints:
        raise ValueError("no checkpoint-N evaluation compared with the start policy")
    return max(checkpoints, key=lambda label: int(label.split("-")[1]))


def seed_row(run: Path, split: str) -> dict:
    reports = compared(run, split)
    final = final_label(list(reports))
    seed = int(OmegaConf.load(run / "config.yaml").run.seed)
    row = {"run_dir": portable_path(run), "seed": seed, "final_label": final, "runs": reports[final]["runs"]}
    for label in (final, "best"):
        if label not in reports:
            continue
        aggregate = reports[label]["compare"]["aggregate"]
        key = "final" if label == final else "best"
        row[key] = {"start": aggregate["base"], "checkpoint": aggregate["other"], **aggregate["difference"]}
        row[key]["tasks"], row[key]["pairs"] = aggregate["tasks"], aggregate["pairs"]
    return row


def aggregate(rows: list[dict]) -> dict:
    """Over seeds, one score per run (its mean success over the split's tasks and runs), as rliable aggregates."""
    start = [[r["final"]["start"]] for r in rows]
    final = [[r["final"]["checkpoint"]] for r in rows]
    gains = [[r["final"]["mean"]] for r in rows]
    return {
        "seeds": len(rows),
        "iqm_start": vars(iqm_interval(start)),
        "iqm_final": vars(iqm_interval(final)),
        "iqm_gain": vars(iqm_interval(gains)),
        "p_final_above_start": vars(improvement_probability(final, start)),
        "intervals_excluding_zero": sum(r["final"]["low"] > 0 for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="benchmarks/results/<name>.json")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--note", default="")
    parser.add_argument("runs", nargs="+", help="run directories, one per seed")
    args = parser.parse_args(argv)
    rows = [seed_row(Path(run).resolve(), args.split) for run in args.runs]
    for row in rows:
        final = Interval.from_dict(row["final"]).text(3, signed=True)
        best = (
            f", best {Interval.from_dict(row['best']).text(3, signed=True)}"
            if "best" in row
            else " (best = final)"
        )
        print(
            f"seed {row['seed']}: {row['final_label']} - start {final} "
            f"({row['final']['start']:.3f} -> {row['final']['checkpoint']:.3f}; {row['final']['pairs']} pairs){best}"
        )
    summary = aggregate(rows)
    start, final = Interval.from_dict(summary["iqm_start"]), Interval.from_dict(summary["iqm_final"])
    gain, better = Interval.from_dict(summary["iqm_gain"]), Interval.from_dict(summary["p_final_above_start"])
    print(
        f"over {summary['seeds']} seeds (rliable IQM [95 % stratified bootstrap]): start {start.text(3)}, final "
        f"{final.text(3)}, gain {gain.text(3, signed=True)}, P(final > start) {better.text(2)}; interval above 0 "
        f"on {summary['intervals_excluding_zero']} of {summary['seeds']} seeds"
    )
    write_analysis(args.name, {"split": args.split, "note": args.note, "seeds": rows, "aggregate": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
