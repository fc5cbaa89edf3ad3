"""Value-head regression loss for PPO with a critic (Schulman et al. 2017; PPO2 value clipping).

loss_t = 1/2 · (V_t - R_t)^2,   or with clip c:  1/2 · max((V_t - R_t)^2, (clip(V_t, V_old ± c) - R_t)^2)
"""

from __future__ import annotations

import torch


def value_losses(
    values: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip: float | None = None,
) -> torch.Tensor:
    """[N] per-token value losses."""
    loss = (values - returns) ** 2
    if clip is not None:
        if old_values is None:
            raise ValueError("value clipping needs old_values")
        clipped = old_values + torch.clamp(values - old_values, -clip, clip)
        loss = torch.maximum(loss, (clipped - returns) ** 2)
    return 0.5 * loss
