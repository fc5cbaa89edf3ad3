"""GRPO outcome advantage (Shao et al. 2024, DeepSeekMath §4.1.2).

    A_i = (R_i - mean_j R_j) / (std_j R_j + eps)      (std: unbiased, ddof = 1, as verl/AgentGym-RL)

`normalize_std=False` drops the division (the "GRPO without std" ablation of LOOP Table 1).
"""

from __future__ import annotations

import torch


def grpo_advantages(rewards: torch.Tensor, normalize_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """[K] GRPO advantages of one group (K >= 2)."""
    if rewards.numel() < 2:
        raise ValueError(f"GRPO needs K >= 2 rollouts per group, got {rewards.numel()}")
    centred = rewards - rewards.mean()
    if normalize_std:
        centred = centred / (rewards.std(correction=1) + eps)
    return centred
