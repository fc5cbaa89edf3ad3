"""Group trajectories by `group_id` (the K rollouts of one task) and reject bad rewards."""

from __future__ import annotations

import math

from loop_agents.rollout.trajectory import Trajectory


def check_rewards(trajectories: list[Trajectory]) -> None:
    """Raise ValueError if the batch is empty or any reward is NaN/inf (naming the task id)."""
    if not trajectories:
        raise ValueError("compute_advantages got an empty list of trajectories")
    for traj in trajectories:
        if not isinstance(traj.reward, int | float) or not math.isfinite(traj.reward):
            raise ValueError(
                f"non-finite reward {traj.reward!r} for task {traj.task_id!r} "
                f"(group {traj.group_id!r}, sample {traj.sample_index})"
            )


def group_indices(trajectories: list[Trajectory]) -> dict[str, list[int]]:
    """Indices of the trajectories of each group, groups in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, traj in enumerate(trajectories):
        groups.setdefault(traj.group_id, []).append(i)
    return groups
