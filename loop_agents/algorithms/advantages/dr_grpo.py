"""Dr. GRPO advantage (Liu et al. 2025, "Understanding R1-Zero-Like Training", Eq. 3 / §3.2).

    A_i = R_i - mean_j R_j

No std division (it biases towards too-easy/too-hard questions). The other half of Dr. GRPO,
the constant length normaliser, is the `dr_grpo` aggregation.
"""

from __future__ import annotations

import torch


def dr_grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """[K] mean-centred advantages of one group (K >= 2)."""
    if rewards.numel() < 2:
        raise ValueError(f"Dr. GRPO needs K >= 2 rollouts per group, got {rewards.numel()}")
    return rewards - rewards.mean()
