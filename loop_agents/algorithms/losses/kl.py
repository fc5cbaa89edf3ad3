"""Per-token k3 KL estimator (Schulman 2020, "Approximating KL divergence").

For samples x ~ q and log_ratio = log p(x) - log q(x):  k3 = exp(log_ratio) - 1 - log_ratio >= 0,
an unbiased, low-variance estimate of KL(q || p). Used as the optional KL-to-reference penalty
(log_ratio = log π_ref - log π_θ, estimating KL(π_θ || π_ref)) and as the monitor of the drift from
the behaviour policy (log_ratio = log π_θ - log π_old, estimating KL(π_old || π_θ)).
"""

from __future__ import annotations

import torch


def k3_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """[N] per-token k3 estimates."""
    return torch.expm1(log_ratio) - log_ratio
