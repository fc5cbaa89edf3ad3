"""Evaluation metrics: TGC/SGC from per-task results, the LOOP paper's behaviour metrics, the results file."""

from loop_agents.eval.behaviour import (
    TrajectoryBehaviour,
    behaviour_metrics,
    code_cells,
    trajectory_behaviour,
)
from loop_agents.eval.goal_completion import (
    GoalCompletion,
    TaskResult,
    goal_completion,
    goal_completion_by_difficulty,
    mean_over_runs,
    numbered_scenario_of,
    task_results_from_official,
    task_results_from_trajectories,
)
from loop_agents.eval.results_file import append_result, read_results, result_record

__all__ = [
    "GoalCompletion",
    "TaskResult",
    "TrajectoryBehaviour",
    "append_result",
    "numbered_scenario_of",
    "behaviour_metrics",
    "code_cells",
    "goal_completion",
    "goal_completion_by_difficulty",
    "mean_over_runs",
    "read_results",
    "result_record",
    "task_results_from_official",
    "task_results_from_trajectories",
    "trajectory_behaviour",
]
