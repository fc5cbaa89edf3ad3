"""`compute_advantages`: a finished batch of rollouts → per-token advantages (the algorithm's half).

Outcome estimators (loo, rloo, grpo, dr_grpo) give one scalar per rollout, broadcast to its
trainable tokens. Token-level estimators (reinforce_pp, gae) put the reward on the last trainable
token and recurse over trainable tokens only. Every estimator writes `Trajectory.advantage` (for
token-level ones: the advantage at the last trainable token). A group whose rewards are all equal
gets exactly zero advantage under the group estimators; such groups are counted, and the |A|
filter then skips them (LOOP drops zero-variance groups).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from loop_agents.algorithms.advantages.gae import gae_advantages
from loop_agents.algorithms.advantages.reinforce_pp import reinforce_pp_advantages, whiten
from loop_agents.algorithms.config import AlgorithmConfig
from loop_agents.algorithms.grouping import check_rewards, group_indices
from loop_agents.algorithms.registry import OUTCOME_ESTIMATORS
from loop_agents.algorithms.token_placement import token_rewards
from loop_agents.rollout.trajectory import Trajectory


@dataclass
class AdvantageResult:
    """Per-token advantages ([T_i] float32 each, 0 on masked tokens), value targets for gae, stats."""

    token_advantages: list[torch.Tensor]
    returns: list[torch.Tensor] | None = None
    stats: dict[str, float] = field(default_factory=dict)


def _loss_mask(traj: Trajectory) -> torch.Tensor:
    return torch.tensor(traj.loss_mask, dtype=torch.bool)


def _outcome(trajectories: list[Trajectory], cfg: AlgorithmConfig) -> tuple[list[float], dict[str, float]]:
    estimator = OUTCOME_ESTIMATORS[cfg.advantage_estimator]
    advantages = [0.0] * len(trajectories)
    zero_variance = singletons = 0
    for group_id, idx in group_indices(trajectories).items():
        rewards = torch.tensor([float(trajectories[i].reward) for i in idx], dtype=torch.float64)
        if len(idx) == 1:
            if cfg.singleton_groups == "error":
                raise ValueError(
                    f"group {group_id!r} (task {trajectories[idx[0]].task_id!r}) has K=1 rollout; "
                    f"{cfg.advantage_estimator} needs K >= 2 (set singleton_groups='zero' to skip it)"
                )
            singletons += 1
            continue
        if bool((rewards == rewards[0]).all()):
            zero_variance += 1  # exact zeros, not fp residue, so the |A| filter drops them
            continue
        for i, a in zip(idx, estimator(rewards, cfg).tolist(), strict=True):
            advantages[i] = a
    n_groups = len(group_indices(trajectories))
    stats = {
        "adv/num_groups": float(n_groups),
        "adv/zero_variance_groups": float(zero_variance),
        "adv/singleton_groups": float(singletons),
    }
    return advantages, stats


def compute_advantages(
    trajectories: list[Trajectory], cfg: AlgorithmConfig, values: list[torch.Tensor] | None = None
) -> AdvantageResult:
    """Per-token advantages for a batch grouped by `group_id`; `values` ([T_i] each) only for gae."""
    cfg.validate()
    check_rewards(trajectories)
    for traj in trajectories:
        traj.validate()
    masks = [_loss_mask(t) for t in trajectories]
    returns = None
    if cfg.advantage_estimator in OUTCOME_ESTIMATORS:
        scalars, stats = _outcome(trajectories, cfg)
        token_adv = [
            torch.where(m, torch.tensor(a, dtype=torch.float64), 0.0)
            for a, m in zip(scalars, masks, strict=True)
        ]
    elif cfg.advantage_estimator == "reinforce_pp":
        rewards = [token_rewards(t) for t in trajectories]
        token_adv = reinforce_pp_advantages(rewards, masks, cfg.gamma, cfg.std_eps)
        stats = {"adv/num_groups": float(len(group_indices(trajectories)))}
    else:  # gae
        if values is None or len(values) != len(trajectories):
            raise ValueError("advantage_estimator='gae' needs one [T_i] value tensor per trajectory")
        pairs = [
            gae_advantages(token_rewards(t), v.detach().double().cpu(), m, cfg.gamma, cfg.lam)
            for t, v, m in zip(trajectories, values, masks, strict=True)
        ]
        token_adv = [a for a, _ in pairs]
        returns = [r.float() for _, r in pairs]
        if cfg.whiten_gae:
            token_adv = whiten(token_adv, masks, cfg.std_eps)
        stats = {"adv/num_groups": float(len(group_indices(trajectories)))}
    for traj, adv in zip(trajectories, token_adv, strict=True):
        last = traj.last_trainable_index()
        traj.advantage = float(adv[last]) if last is not None else 0.0
    scalars_all = torch.tensor([t.advantage for t in trajectories], dtype=torch.float64)
    stats["adv/mean"] = float(scalars_all.mean())
    stats["adv/abs_mean"] = float(scalars_all.abs().mean())
    return AdvantageResult([a.float() for a in token_adv], returns, stats)
