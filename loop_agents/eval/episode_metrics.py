"""Evaluation metrics of a set of scored episodes: success rate, reward, TGC/SGC (mean over runs).

Run r of a task is its episode with `sample_index == r` (the evaluator plays each task
`runs_per_task` times). TGC/SGC are computed per run and averaged, as the paper reports the mean of
5 evaluations; per difficulty where the environment defines one. With them, each one's 95 % bootstrap interval over
tasks (`{prefix}success_low/high`: success = TGC; `sgc_low/high` over scenarios), pass@k, and the episodes behind
them (`task_intervals.py`), over every episode given, runs missing a task included.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from loop_agents.eval.goal_completion import (
    goal_completion_by_difficulty,
    mean_over_runs,
    task_results_from_trajectories,
)
from loop_agents.eval.task_intervals import flat_metrics, interval_report
from loop_agents.rollout.trajectory import Trajectory


def evaluation_metrics(
    trajectories: Sequence[Trajectory],
    scenario_of: Callable[[str], str],
    difficulties: Mapping[str, int] | None = None,
    prefix: str = "eval/",
) -> dict[str, float]:
    """{prefix}tgc, {prefix}sgc (and per difficulty), success_rate, reward_mean, num_tasks, num_runs, intervals."""
    if not trajectories:
        return {f"{prefix}num_tasks": 0.0}
    runs: dict[int, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        runs[traj.sample_index].append(traj)
    per_run = [
        goal_completion_by_difficulty(task_results_from_trajectories(run, scenario_of, difficulties))
        for _, run in sorted(runs.items())
    ]
    # a run missing a task (dropped after retries) would make runs incomparable: keep full runs only
    complete = [
        r for r in per_run if r["aggregate"].num_tasks == max(x["aggregate"].num_tasks for x in per_run)
    ]
    summary = mean_over_runs(complete)
    n = len(trajectories)
    metrics = {
        f"{prefix}success_rate": sum(bool(t.success) for t in trajectories) / n,
        f"{prefix}reward_mean": sum(float(t.reward) for t in trajectories) / n,
        f"{prefix}num_tasks": float(len({t.task_id for t in trajectories})),
        f"{prefix}num_runs": float(len(complete)),
    }
    for key, values in summary.items():
        name = "" if key == "aggregate" else f"{key}/"
        metrics[f"{prefix}{name}tgc"] = values["tgc"]
        metrics[f"{prefix}{name}sgc"] = values["sgc"]
    tasks = sorted({t.task_id for t in trajectories})
    planned = max(int(t.sample_index) for t in trajectories) + 1
    levels = {
        r.task_id: r.difficulty
        for r in task_results_from_trajectories(trajectories, scenario_of, difficulties)
    }
    metrics.update(flat_metrics(interval_report(trajectories, tasks, planned, scenario_of, levels), prefix))
    return metrics
