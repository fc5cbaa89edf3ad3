"""How many runs per task (and tasks) one evaluation needs for a given interval width (issue 39, part 1).

    python -m benchmarks.eval_sizing --name appworld_demo_eval_sizing --max-tasks 30 --half-width 0.08 \\
        runs/appworld_demo_runs/issue43-c16_s0/evaluate/start/dev ...

Each directory is a `scripts/evaluate.py ... runs=k` output (k >= 2): its `trajectories/run_<r>.jsonl` give each
task's success in every run. On the evaluator's selection (the first `--max-tasks` task ids in sorted order, as
`eval.max_tasks` takes them) the success table splits into between-task σ_b² and run-to-run σ_w² variance
(`stats.variance_components`); the 95 % interval of one evaluation on n tasks × k runs is then about
z·sqrt((σ_b² + σ_w²/k) / n). Per evaluation this reports the half-width at k = 1, 2, 4, 8, the fewest runs per task
that reach `--half-width` (none when σ_b² alone is wider: only more tasks help) and the tasks that would at one
run. Writes `benchmarks/results/<name>.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.portable import portable_path
from benchmarks.runner import write_analysis
from loop_agents.checkpoint_eval.episode_store import EpisodeStore
from loop_agents.eval.stats import variance_components

RUNS_SHOWN = (1, 2, 4, 8)


def success_table(out: Path, max_tasks: int | None) -> tuple[list[str], np.ndarray]:
    """Task ids and their tasks × runs success table: only tasks played in every run (a lost episode drops the
    task)."""
    runs = EpisodeStore(out).load()
    if len(runs) < 2:
        raise ValueError(
            f"{out}: {len(runs)} run(s) of episodes; the split into σ_b² and σ_w² needs runs >= 2"
        )
    tasks = sorted(set.intersection(*(set(episodes) for episodes in runs.values())))[:max_tasks]
    return tasks, np.array([[float(runs[r][t].success) for r in sorted(runs)] for t in tasks])


def adapter_of(out: Path) -> str | None:
    """The sha256 of the adapter an evaluation played (its metrics.json), to count each policy once."""
    metrics = out / "metrics.json"
    return json.loads(metrics.read_text()).get("adapter_sha256") if metrics.is_file() else None


def sizing_row(out: Path, max_tasks: int | None, half_width: float) -> dict:
    tasks, table = success_table(out, max_tasks)
    parts = variance_components(table)
    n = len(tasks)
    return {
        "evaluation": portable_path(out),
        "tasks": n,
        "runs": parts.runs,
        "success": float(table.mean()),
        "between": parts.between,
        "within": parts.within,
        "half_width": {str(k): parts.half_width(n, k) for k in RUNS_SHOWN},
        "runs_for_target": parts.runs_for(n, half_width),
        "tasks_for_target_at_1_run": parts.tasks_for(half_width, 1),
    }


def summarise(rows: list[dict]) -> dict:
    """The plan that meets the target on every evaluation measured: the most runs asked (None if any is out of
    reach), and the most tasks at one run."""
    needed = [row["runs_for_target"] for row in rows]
    return {
        "evaluations": len(rows),
        "runs_for_target": None if None in needed else max(needed),
        "tasks_for_target_at_1_run": max(row["tasks_for_target_at_1_run"] for row in rows),
        "between_over_total": float(np.median([r["between"] / (r["between"] + r["within"]) for r in rows])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="benchmarks/results/<name>.json")
    parser.add_argument("--max-tasks", type=int, default=None, help="the in-run evaluation's eval.max_tasks")
    parser.add_argument("--half-width", type=float, required=True, help="the target, e.g. 0.08 for ±8 points")
    parser.add_argument("--note", default="")
    parser.add_argument("evaluations", nargs="+", help="scripts/evaluate.py output directories (runs >= 2)")
    args = parser.parse_args(argv)
    rows, seen = [], {}
    for given in args.evaluations:
        out = Path(given).resolve()
        adapter = adapter_of(out)
        if adapter is not None and adapter in seen:  # `best` saved as a copy of the final checkpoint
            print(f"{given}: skipped, the same adapter as {seen[adapter]}")
            continue
        seen[adapter] = given
        rows.append(sizing_row(out, args.max_tasks, args.half_width))
    for row in rows:
        widths = ", ".join(f"k={k} ±{w:.3f}" for k, w in row["half_width"].items())
        print(
            f"{row['evaluation']}: {row['tasks']} tasks x {row['runs']} runs, success {row['success']:.3f}, "
            f"σ_b² {row['between']:.3f} σ_w² {row['within']:.3f}; {widths}; ±{args.half_width} needs "
            f"{row['runs_for_target'] or 'no number of'} runs, or {row['tasks_for_target_at_1_run']} tasks at 1"
        )
    summary = summarise(rows)
    print(
        f"all {summary['evaluations']} evaluations within ±{args.half_width}: "
        f"{summary['runs_for_target'] or 'no number of'} runs per task on {rows[0]['tasks']} tasks, or "
        f"{summary['tasks_for_target_at_1_run']} tasks at 1 run; between-task share of the variance (median) "
        f"{summary['between_over_total']:.2f}"
    )
    fields = {"max_tasks": args.max_tasks, "target_half_width": args.half_width, "note": args.note}
    write_analysis(args.name, {**fields, "evaluations": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
