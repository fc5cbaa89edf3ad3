"""Supervised fine-tuning loss: token negative log-likelihood on trainable (loss-mask) tokens."""

from __future__ import annotations

import torch


def sft_losses(logprobs: torch.Tensor) -> torch.Tensor:
    """[N] per-token NLL = -log π_θ(a_t)."""
    return -logprobs
