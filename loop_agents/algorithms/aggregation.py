"""How per-token losses of a minibatch become one scalar: a weight per trajectory.

Every aggregation here is Σ_i w_i Σ_{t∈O_i} ℓ_it with w_i depending only on the *global*
minibatch (never on how it is split over ranks or micro-steps), so sharded gradient accumulation
reproduces the single-process loss exactly. |O_i| = trainable tokens of trajectory i, n = number
of trajectories in the minibatch, C = constant divisor (LOOP: minibatch size M), L = constant length.

    loop        w_i = 1 / (|O_i| · C)     token mean in a trajectory, constant divisor across
                                          trajectories (LOOP paper Eq. 10; ml-loop `loss_div_factor`)
    grpo        w_i = 1 / (|O_i| · n)     mean over trajectories of token means (GRPO Eq. 3)
    token_mean  w_i = 1 / Σ_j |O_j|       one mean over all tokens of the minibatch (DAPO Eq. 8)
    dr_grpo     w_i = 1 / (C · L)         Dr. GRPO: constant length normaliser instead of |O_i|
"""

from __future__ import annotations

import torch


def trajectory_weights(
    num_tokens: torch.Tensor, mode: str, constant_divisor: float, length_constant: float | None = None
) -> torch.Tensor:
    """[n] weight of every token of trajectory i; trajectories with no trainable token get 0."""
    counts = num_tokens.to(torch.float64)
    has_tokens = counts > 0
    safe = counts.clamp(min=1)
    if mode == "loop":
        weights = 1.0 / (safe * constant_divisor)
    elif mode == "grpo":
        weights = 1.0 / (safe * int(has_tokens.sum().clamp(min=1)))
    elif mode == "token_mean":
        weights = torch.full_like(counts, 1.0 / float(counts.sum().clamp(min=1)))
    elif mode == "dr_grpo":
        if not length_constant:
            raise ValueError("aggregation 'dr_grpo' needs a length_constant (e.g. max_seq_len)")
        weights = torch.full_like(counts, 1.0 / (constant_divisor * length_constant))
    else:
        raise ValueError(f"unknown aggregation {mode!r}")
    return torch.where(has_tokens, weights, torch.zeros_like(weights))


def aggregate(
    token_losses: list[torch.Tensor], mode: str, constant_divisor: float, length_constant: float | None = None
) -> torch.Tensor:
    """Scalar loss of a minibatch from each trajectory's [|O_i|] per-token losses."""
    counts = torch.tensor([t.numel() for t in token_losses])
    weights = trajectory_weights(counts, mode, constant_divisor, length_constant)
    return sum((w.to(t.dtype) * t.sum() for w, t in zip(weights, token_losses, strict=True)), torch.zeros(()))
