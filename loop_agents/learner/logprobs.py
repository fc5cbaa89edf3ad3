"""Token log-probabilities (and entropies) from hidden states without materialising [seq x vocab] logits.

Only the positions that are trained need a log-prob, and those are computed `chunk_size` rows at a
time: logits of one chunk, log-softmax, gather of the target. Under autograd each chunk is wrapped
in activation checkpointing, so backward also holds one chunk's logits at a time (the same idea as
Cut Cross-Entropy, which ml-loop uses on GPU, without its custom kernels).

The entropy of the sampling distribution at a position, H = -Σ_v p_v log p_v with p = softmax(logits / T),
comes from the same log-softmax (the entropy bonus of verl / AgentGym-RL, temperature-scaled as theirs).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _log_softmax(hidden: torch.Tensor, weight: torch.Tensor, inv_temp: float) -> torch.Tensor:
    logits = (hidden @ weight.t()).float()
    if inv_temp != 1.0:
        logits = logits * inv_temp
    return F.log_softmax(logits, dim=-1)


def _chunk_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, inv_temp: float
) -> torch.Tensor:
    return torch.gather(_log_softmax(hidden, weight, inv_temp), 1, targets[:, None])[:, 0]


def _chunk_logprobs_and_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, inv_temp: float
) -> tuple[torch.Tensor, torch.Tensor]:
    logp = _log_softmax(hidden, weight, inv_temp)
    return torch.gather(logp, 1, targets[:, None])[:, 0], -(logp.exp() * logp).sum(-1)


def _by_chunks(
    chunk_fn: Callable,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    chunk_size: int,
    temperature: float,
) -> list:
    if hidden.shape[0] != targets.shape[0]:
        raise ValueError(f"hidden rows {hidden.shape[0]} != targets {targets.shape[0]}")
    pieces = []
    for start in range(0, hidden.shape[0], chunk_size):
        h, t = hidden[start : start + chunk_size], targets[start : start + chunk_size]
        if torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
            pieces.append(checkpoint(chunk_fn, h, weight, t, 1.0 / temperature, use_reentrant=False))
        else:
            pieces.append(chunk_fn(h, weight, t, 1.0 / temperature))
    return pieces


def chunked_token_logprobs(
    hidden: torch.Tensor,
    lm_head_weight: torch.Tensor,
    targets: torch.Tensor,
    chunk_size: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """[n] float32 log π(target_i | hidden_i) for hidden [n, H], lm-head weight [V, H], targets [n]."""
    pieces = _by_chunks(_chunk_logprobs, hidden, lm_head_weight, targets, chunk_size, temperature)
    return torch.cat(pieces) if pieces else hidden.new_zeros(0, dtype=torch.float32)


def chunked_token_logprobs_and_entropy(
    hidden: torch.Tensor,
    lm_head_weight: torch.Tensor,
    targets: torch.Tensor,
    chunk_size: int,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([n] log π(target_i | hidden_i), [n] entropy H(π(· | hidden_i))), float32, chunked as above."""
    pieces = _by_chunks(_chunk_logprobs_and_entropy, hidden, lm_head_weight, targets, chunk_size, temperature)
    if not pieces:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat([p[0] for p in pieces]), torch.cat([p[1] for p in pieces])
