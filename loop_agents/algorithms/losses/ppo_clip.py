"""PPO clipped surrogate per token (Schulman et al. 2017, Eq. 7) with explicit clip bounds.

    loss_t = -min(r_t · A_t, clip(r_t, low, high) · A_t)

LOOP writes this as -min(r·A, g(A)) with g(A) = (1+ε)A for A >= 0 and A/(1+ε) otherwise, i.e. the
bounds low = 1/(1+ε), high = 1+ε (ml-loop `_ppo_loss`); the two forms are equal (see test). With
`clip_enabled=False` the loss is the importance-weighted policy gradient -r_t · A_t.
A token is "clipped" when the clipped term is strictly the smaller one (its gradient is zero).
"""

from __future__ import annotations

import torch


def ppo_clip_losses(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    clip_enabled: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([N] per-token losses, [N] bool clipped) from per-token log-ratios and advantages."""
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    if not clip_enabled:
        return -unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    clipped = torch.clamp(ratio, clip_low, clip_high) * advantages
    return -torch.minimum(unclipped, clipped), clipped < unclipped
