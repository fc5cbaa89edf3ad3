"""Per-file summary numbers for the index: counts, reward, |A|-filter, TGC/SGC, behaviour metrics."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from loop_agents.eval.behaviour import behaviour_metrics
from loop_agents.eval.goal_completion import (
    goal_completion_by_difficulty,
    mean_over_runs,
    numbered_scenario_of,
    task_results_from_trajectories,
)
from loop_agents.rollout.trajectory import Trajectory


def group_trajectories(trajectories: list[Trajectory]) -> dict[str, list[Trajectory]]:
    """Trajectories by group id (first-seen order), each group sorted by sample index."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        groups[traj.group_id].append(traj)
    return {gid: sorted(members, key=lambda t: t.sample_index) for gid, members in groups.items()}


def scenario_function(task_ids: list[str]):
    """AppWorld's `<scenario>_<n>` grouping when every task id has that form, else one scenario per task."""
    try:
        for task_id in task_ids:
            numbered_scenario_of(task_id)
    except ValueError:
        return lambda task_id: task_id
    return numbered_scenario_of


def goal_completion_summary(trajectories: list[Trajectory]) -> dict[str, float]:
    """TGC/SGC (flat keys like `tgc`, `sgc_2`), averaged over runs when tasks were evaluated several times.

    Run r is made of the trajectories with sample_index r (the r-th evaluation of each task).
    """
    runs: dict[int, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        runs[traj.sample_index].append(traj)
    scenario_of = scenario_function([t.task_id for t in trajectories])
    per_run = [
        goal_completion_by_difficulty(task_results_from_trajectories(r, scenario_of)) for r in runs.values()
    ]
    common = set.intersection(*(set(run) for run in per_run))
    mean = mean_over_runs([{k: run[k] for k in sorted(common)} for run in per_run])
    out: dict[str, float] = {}
    for key, values in mean.items():
        suffix = "" if key == "aggregate" else "_" + key.removeprefix("difficulty_")
        out[f"tgc{suffix}"] = values["tgc"]
        out[f"sgc{suffix}"] = values["sgc"]
    out["eval_runs"] = float(len(per_run))
    return out


def episode_file_summary(trajectories: list[Trajectory], with_goal_completion: bool) -> dict[str, Any]:
    """Numbers shown for one iteration or evaluation in the run index."""
    if not trajectories:
        return {"episodes": 0}
    filtered = [t.metadata["filtered"] for t in trajectories if "filtered" in t.metadata]
    summary: dict[str, Any] = {
        "episodes": len(trajectories),
        "groups": len({t.group_id for t in trajectories}),
        "reward_mean": statistics.fmean(t.reward for t in trajectories),
        "success_rate": statistics.fmean(float(t.success) for t in trajectories),
        "dropped_fraction": statistics.fmean(map(float, filtered)) if filtered else None,
    }
    if with_goal_completion:
        summary.update(goal_completion_summary(trajectories))
    summary.update(behaviour_metrics(trajectories))
    return summary
