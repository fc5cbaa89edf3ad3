"""Small hand-written trajectories for the algorithm tests."""

from __future__ import annotations

from loop_agents.rollout.trajectory import Trajectory


def make_trajectory(
    task_id: str, reward: float, mask: list[int], group_id: str | None = None, index: int = 0
) -> Trajectory:
    """A trajectory with the given loss mask (token ids and logprobs are placeholders)."""
    return Trajectory(
        task_id=task_id,
        group_id=group_id or task_id,
        sample_index=index,
        token_ids=list(range(len(mask))),
        loss_mask=list(mask),
        sample_logprobs=[-0.5 if m else 0.0 for m in mask],
        reward=reward,
    )


def group(task_id: str, rewards: list[float], mask: list[int]) -> list[Trajectory]:
    return [make_trajectory(task_id, r, mask, index=i) for i, r in enumerate(rewards)]
