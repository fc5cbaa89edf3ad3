"""GSPO (Zheng et al. 2025, arXiv 2507.18071, Eq. 5-7): sequence-level, length-normalised ratio.

    s_i = exp((1/|y_i|) Σ_t (log π_θ(y_it) - log π_old(y_it)))
    loss_i = -min(s_i · A_i, clip(s_i, low, high) · A_i)

broadcast to the tokens of sequence i; with a token mean inside each sequence (the `grpo`
aggregation) this is exactly GSPO's per-sequence objective.
"""

from __future__ import annotations

import torch

from loop_agents.algorithms.losses.ppo_clip import ppo_clip_losses
from loop_agents.algorithms.losses.ratio import segment_log_ratio


def gspo_losses(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    sequence_ids: torch.Tensor,
    num_sequences: int,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([N] per-token losses, [N] bool clipped) over the trainable tokens of several sequences."""
    log_ratio = segment_log_ratio(logprobs - old_logprobs, sequence_ids, num_sequences, mean=True)
    return ppo_clip_losses(log_ratio, advantages, clip_low, clip_high)
