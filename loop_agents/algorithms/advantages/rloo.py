"""RLOO (Kool et al. 2019 "Buy 4 REINFORCE samples"; Ahmadian et al. 2024, Eq. 5).

    A_i = R_i - (1/(K-1)) Σ_{j≠i} R_j

Numerically the same estimator as LOOP's `loo` without std normalisation; it is a separate name
because AgentGym-RL advertises it (and raises NotImplementedError for it, reference §8.1.3).
"""

from __future__ import annotations

import torch

from loop_agents.algorithms.advantages.loo import leave_one_out_advantages


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """[K] RLOO advantages of one group (K >= 2)."""
    return leave_one_out_advantages(rewards, normalize_std=False)
