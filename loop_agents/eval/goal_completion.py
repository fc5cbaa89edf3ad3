"""TGC and SGC from per-task results, overall and per difficulty (docs/reference-ml-loop.md §5.4).

TGC (task goal completion)     = #tasks whose tests all passed / #tasks
SGC (scenario goal completion) = #scenarios all of whose tasks passed / #scenarios
Both are fractions in [0, 1] (AppWorld prints them as percentages). Per difficulty, only the tasks
of that difficulty count, as in AppWorld's `evaluate`. With N evaluation runs per task (the paper
reports the mean of 5), compute one GoalCompletion per run and combine them with `mean_over_runs`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loop_agents.rollout.trajectory import Trajectory


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one task in one evaluation run."""

    task_id: str
    scenario_id: str
    success: bool  # every unit test of the task passed
    difficulty: int | None = None  # AppWorld's 1..3; None when the environment has none


@dataclass(frozen=True)
class GoalCompletion:
    """TGC and SGC of a set of task results."""

    tgc: float
    sgc: float
    num_tasks: int
    num_scenarios: int


def numbered_scenario_of(task_id: str) -> str:
    """The scenario of a task id `<scenario>_<n>` (task variants share the prefix, as AppWorld names them)."""
    scenario, sep, number = task_id.rpartition("_")
    if not sep or not scenario or not number.isdigit():
        raise ValueError(f"task id {task_id!r} is not of the form <scenario>_<number>")
    return scenario


def goal_completion(results: Sequence[TaskResult]) -> GoalCompletion:
    """TGC and SGC of one evaluation run (each task at most once)."""
    if not results:
        raise ValueError("goal_completion needs at least one task result")
    _check_unique(results)
    by_scenario: dict[str, list[bool]] = defaultdict(list)
    for result in results:
        by_scenario[result.scenario_id].append(bool(result.success))
    tgc = sum(bool(r.success) for r in results) / len(results)
    sgc = sum(all(flags) for flags in by_scenario.values()) / len(by_scenario)
    return GoalCompletion(tgc=tgc, sgc=sgc, num_tasks=len(results), num_scenarios=len(by_scenario))


def goal_completion_by_difficulty(results: Sequence[TaskResult]) -> dict[str, GoalCompletion]:
    """{"aggregate": ..., "difficulty_1": ..., ...}; tasks without a difficulty count only in the aggregate."""
    out = {"aggregate": goal_completion(results)}
    for level in sorted({r.difficulty for r in results if r.difficulty is not None}):
        out[f"difficulty_{level}"] = goal_completion([r for r in results if r.difficulty == level])
    return out


def mean_over_runs(runs: Sequence[Mapping[str, GoalCompletion]]) -> dict[str, dict[str, float]]:
    """Mean and sample std of TGC/SGC per key over N runs of `goal_completion_by_difficulty`."""
    if not runs:
        raise ValueError("mean_over_runs needs at least one run")
    out: dict[str, dict[str, float]] = {}
    for key in runs[0]:
        missing = [i for i, run in enumerate(runs) if key not in run]
        if missing:
            raise ValueError(f"runs {missing} have no {key!r} result; every run must cover the same tasks")
        tgcs = [run[key].tgc for run in runs]
        sgcs = [run[key].sgc for run in runs]
        out[key] = {
            "tgc": statistics.fmean(tgcs),
            "sgc": statistics.fmean(sgcs),
            "tgc_std": statistics.stdev(tgcs) if len(runs) > 1 else 0.0,
            "sgc_std": statistics.stdev(sgcs) if len(runs) > 1 else 0.0,
            "num_runs": float(len(runs)),
        }
    return out


def task_results_from_trajectories(
    trajectories: Iterable[Trajectory],
    scenario_of: Callable[[str], str] = numbered_scenario_of,
    difficulties: Mapping[str, int] | None = None,
) -> list[TaskResult]:
    """One TaskResult per trajectory (one run: each task once).

    The difficulty is taken from `difficulties[task_id]`, else `reward_details["difficulty"]`, else
    `metadata["difficulty"]`, else None.
    """
    results = []
    for traj in trajectories:
        difficulty = (difficulties or {}).get(traj.task_id)
        if difficulty is None:
            difficulty = traj.reward_details.get("difficulty", traj.metadata.get("difficulty"))
        results.append(
            TaskResult(
                task_id=traj.task_id,
                scenario_id=scenario_of(traj.task_id),
                success=bool(traj.success),
                difficulty=None if difficulty is None else int(difficulty),
            )
        )
    return results


def task_results_from_official(
    per_task: Mapping[str, Mapping[str, Any]], scenario_of: Callable[[str], str] = numbered_scenario_of
) -> list[TaskResult]:
    """TaskResults from AppWorld's official per-task scores: task id -> {"success", "difficulty"}."""
    results = []
    for task_id, row in per_task.items():
        if "success" not in row:
            raise ValueError(f"official result of task {task_id!r} has no 'success' field: {sorted(row)}")
        difficulty = row.get("difficulty")
        results.append(
            TaskResult(
                task_id,
                scenario_of(task_id),
                bool(row["success"]),
                None if difficulty is None else int(difficulty),
            )
        )
    return results


def _check_unique(results: Sequence[TaskResult]) -> None:
    seen: set[str] = set()
    duplicates = sorted({r.task_id for r in results if r.task_id in seen or seen.add(r.task_id)})
    if duplicates:
        raise ValueError(
            f"tasks {duplicates[:5]} appear more than once in one run; split repeated evaluations into "
            "separate runs and combine them with mean_over_runs"
        )
