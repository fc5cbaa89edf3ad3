"""LOOP's leave-one-out advantage (Chen et al. 2025, arXiv 2502.01600, Eq. 6; ml-loop `_compute_adv_estimates`).

    A_i = R_i - (1/(K-1)) Σ_{j≠i} R_j  =  K/(K-1) · (R_i - mean_j R_j)

With `normalize_std` (ml-loop `adv_normalization`, off in LOOP) A_i is divided by
max(std(R), eps) with the population std (ddof = 0), as ml-loop does.
"""

from __future__ import annotations

import torch


def leave_one_out_advantages(
    rewards: torch.Tensor, normalize_std: bool = False, eps: float = 1e-6
) -> torch.Tensor:
    """[K] advantages of one group of K >= 2 rollouts of the same task."""
    k = rewards.numel()
    if k < 2:
        raise ValueError(f"leave-one-out needs K >= 2 rollouts per group, got {k}")
    baseline = (rewards.sum() - rewards) / (k - 1)
    advantages = rewards - baseline
    if normalize_std:
        advantages = advantages / torch.clamp(rewards.std(correction=0), min=eps)
    return advantages
