"""One evaluation's numbers with their uncertainty, per split and per difficulty (statistics in `stats.py`).

For the episodes of an evaluation of n tasks × k runs (run r of a task = its episode with sample_index r):
- success (= TGC): each task's mean success over the runs it has, then the mean over tasks with a bootstrap
  interval over tasks;
- SGC: each scenario's share of runs in which all its tasks passed (runs where one of its tasks has no episode
  do not count), then the mean over scenarios with a bootstrap interval over scenarios;
- avg@k (the mean over tasks of c/n) and pass@k (Chen et al. 2021) with k = the fewest episodes a task has;
- the episodes behind each, and how many of the n × k are missing (lost after retries): the intervals then
  cover the episodes there are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loop_agents.eval.stats import bootstrap_mean, mean_pass_at_k, paired_difference
from loop_agents.rollout.trajectory import Trajectory


def task_outcomes(trajectories: Sequence[Trajectory]) -> dict[str, dict[int, bool]]:
    """task id -> {run: success}; a (task, run) seen twice keeps the last episode."""
    outcomes: dict[str, dict[int, bool]] = defaultdict(dict)
    for traj in trajectories:
        outcomes[traj.task_id][int(traj.sample_index)] = bool(traj.success)
    return dict(outcomes)


def task_means(outcomes: Mapping[str, Mapping[int, bool]]) -> dict[str, float]:
    """task id -> mean success over the runs it has (tasks without an episode are left out)."""
    return {task: sum(runs.values()) / len(runs) for task, runs in outcomes.items() if runs}


def _scenario_means(
    outcomes: Mapping[str, Mapping[int, bool]], tasks: Sequence[str], scenario_of: Callable[[str], str]
) -> list[float]:
    members: dict[str, list[str]] = defaultdict(list)
    for task in tasks:
        members[scenario_of(task)].append(task)
    means = []
    for scenario_tasks in members.values():
        runs = set.intersection(*(set(outcomes.get(t, {})) for t in scenario_tasks))
        if runs:
            means.append(sum(all(outcomes[t][r] for t in scenario_tasks) for r in runs) / len(runs))
    return means


def interval_summary(
    outcomes: Mapping[str, Mapping[int, bool]],
    tasks: Sequence[str],
    runs: int,
    scenario_of: Callable[[str], str],
) -> dict[str, Any]:
    """success / SGC intervals, avg@k, pass@k and episode counts of `tasks` (each meant to have `runs` runs)."""
    have = {t: outcomes[t] for t in tasks if outcomes.get(t)}
    episodes = sum(len(r) for r in have.values())
    summary: dict[str, Any] = {
        "tasks": len(tasks),
        "tasks_with_episodes": len(have),
        "runs": runs,
        "episodes": episodes,
        "missing": len(tasks) * runs - episodes,
    }
    if not have:
        return summary
    means = task_means(have)
    k = min(len(r) for r in have.values())
    summary["success"] = bootstrap_mean(list(means.values())).as_dict()
    scenarios = _scenario_means(have, sorted(have), scenario_of)
    if scenarios:
        summary["sgc"] = bootstrap_mean(scenarios).as_dict()
    summary["k"] = k
    summary["avg@k"] = sum(means.values()) / len(means)
    summary["pass@k"] = mean_pass_at_k([(len(r), sum(r.values())) for r in have.values()], k)
    return summary


def interval_report(
    trajectories: Sequence[Trajectory],
    tasks: Sequence[str],
    runs: int,
    scenario_of: Callable[[str], str],
    difficulties: Mapping[str, int] | None = None,
) -> dict[str, dict[str, Any]]:
    """{"aggregate": interval_summary, "difficulty_1": ..., ...} of every saved episode of `tasks`."""
    outcomes = task_outcomes(trajectories)
    report = {"aggregate": interval_summary(outcomes, tasks, runs, scenario_of)}
    for level in sorted({d for d in (difficulties or {}).values() if d is not None}):
        chosen = [t for t in tasks if (difficulties or {}).get(t) == level]
        report[f"difficulty_{level}"] = interval_summary(outcomes, chosen, runs, scenario_of)
    return report


def paired_report(
    base: Sequence[Trajectory], other: Sequence[Trajectory], tasks: Sequence[str]
) -> dict[str, Any]:
    """other - base per task (each side's mean over the runs both have of it), then bootstrap over tasks.

    Only (task, run) pairs played by both count, so a lost episode on one side drops its pair on the other."""
    a, b = task_outcomes(base), task_outcomes(other)
    left: dict[str, float] = {}
    right: dict[str, float] = {}
    pairs = 0
    for task in tasks:
        shared = sorted(set(a.get(task, {})) & set(b.get(task, {})))
        if shared:
            left[task] = sum(a[task][r] for r in shared) / len(shared)
            right[task] = sum(b[task][r] for r in shared) / len(shared)
            pairs += len(shared)
    result: dict[str, Any] = {"tasks": len(left), "pairs": pairs}
    if left:
        result["difference"] = paired_difference(left, right).as_dict()
        result["base"] = sum(left.values()) / len(left)
        result["other"] = sum(right.values()) / len(right)
    return result


def flat_metrics(report: Mapping[str, Mapping[str, Any]], prefix: str = "eval/") -> dict[str, float]:
    """Scalar keys for metrics.jsonl / wandb: {prefix}success_low/high, sgc_low/high, pass@k, episodes, missing."""
    out: dict[str, float] = {}
    for key, summary in report.items():
        name = prefix + ("" if key == "aggregate" else f"{key}/")
        for metric in ("success", "sgc"):
            if metric in summary:
                out[f"{name}{metric}_low"] = summary[metric]["low"]
                out[f"{name}{metric}_high"] = summary[metric]["high"]
        if "pass@k" in summary:
            out[f"{name}pass@k"] = summary["pass@k"]
            out[f"{name}k"] = float(summary["k"])
        out[f"{name}episodes"] = float(summary["episodes"])
        out[f"{name}missing"] = float(summary["missing"])
    return out
