"""Token log-probabilities from hidden states without materialising [seq x vocab] logits.

Only the positions that are trained need a log-prob, and those are computed `chunk_size` rows at a
time: logits of one chunk, log-softmax, gather of the target. Under autograd each chunk is wrapped
in activation checkpointing, so backward also holds one chunk's logits at a time (the same idea as
Cut Cross-Entropy, which ml-loop uses on GPU, without its custom kernels).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _chunk_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, inv_temp: float
) -> torch.Tensor:
    logits = (hidden @ weight.t()).float()
    if inv_temp != 1.0:
        logits = logits * inv_temp
    return torch.gather(F.log_softmax(logits, dim=-1), 1, targets[:, None])[:, 0]


def chunked_token_logprobs(
    hidden: torch.Tensor,
    lm_head_weight: torch.Tensor,
    targets: torch.Tensor,
    chunk_size: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """[n] float32 log π(target_i | hidden_i) for hidden [n, H], lm-head weight [V, H], targets [n]."""
    if hidden.shape[0] != targets.shape[0]:
        raise ValueError(f"hidden rows {hidden.shape[0]} != targets {targets.shape[0]}")
    inv_temp = 1.0 / temperature
    pieces = []
    for start in range(0, hidden.shape[0], chunk_size):
        h, t = hidden[start : start + chunk_size], targets[start : start + chunk_size]
        if torch.is_grad_enabled() and (h.requires_grad or lm_head_weight.requires_grad):
            pieces.append(checkpoint(_chunk_logprobs, h, lm_head_weight, t, inv_temp, use_reentrant=False))
        else:
            pieces.append(_chunk_logprobs(h, lm_head_weight, t, inv_temp))
    if not pieces:
        return hidden.new_zeros(0, dtype=torch.float32)
    return torch.cat(pieces)
