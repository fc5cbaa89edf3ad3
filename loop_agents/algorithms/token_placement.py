"""Where a trajectory-level reward lands in the token sequence, and how turns are delimited.

The outcome reward belongs on the LAST TRAINABLE token (the last sampled token, usually the
final turn's stop token), never on the last token of the sequence: when a trajectory ends on an
observation, that token is masked and multiplying by the loss mask erases the reward. That is the
AgentGym-RL bug (docs/reference-agentgym-rl.md §2.2 and §8.1.1) that zeroes GAE and REINFORCE++.
"""

from __future__ import annotations

import torch

from loop_agents.rollout.trajectory import Trajectory


def token_rewards(traj: Trajectory) -> torch.Tensor:
    """[T] float64 rewards: the trajectory reward on its last trainable token, zero elsewhere."""
    last = traj.last_trainable_index()
    if last is None:
        raise ValueError(
            f"trajectory of task {traj.task_id!r} (sample {traj.sample_index}) has no trainable token: "
            "a token-level estimator cannot place its reward"
        )
    rewards = torch.zeros(len(traj.token_ids), dtype=torch.float64)
    rewards[last] = float(traj.reward)
    return rewards


def turn_ids(loss_mask: torch.Tensor) -> torch.Tensor:
    """[T] long: index of the turn (maximal run of mask-1 tokens) each token belongs to, -1 on masked.

    Example: mask 0 1 1 0 0 1 → -1 0 0 -1 -1 1.
    """
    mask = loss_mask.bool()
    starts = mask & ~torch.cat([torch.zeros(1, dtype=torch.bool, device=mask.device), mask[:-1]])
    ids = torch.cumsum(starts.long(), dim=0) - 1
    return torch.where(mask, ids, torch.full_like(ids, -1))
