"""REINFORCE++ (Hu 2025, arXiv 2501.03262, §3): discounted token returns, whitened over the batch.

Multi-turn aware: only trainable tokens are steps. With the outcome reward r on the last
trainable token (token_placement.token_rewards), for trainable tokens in reverse order

    G_t = r_t + γ · G_{t'}     (t' = next trainable token; G = 0 after the last one)

and masked (observation) tokens carry nothing and consume no discount. Advantages are the returns
whitened over all trainable tokens of the batch: A_t = (G_t - μ) / (σ + eps), σ unbiased.
"""

from __future__ import annotations

import torch


def discounted_returns(rewards: torch.Tensor, loss_mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """[T] returns over trainable tokens only; 0 on masked tokens."""
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in range(rewards.numel() - 1, -1, -1):
        if loss_mask[t]:
            running = float(rewards[t]) + gamma * running
            returns[t] = running
    return returns


def whiten(values: list[torch.Tensor], masks: list[torch.Tensor], eps: float = 1e-6) -> list[torch.Tensor]:
    """Whiten values over the masked tokens of all sequences together; masked tokens stay 0."""
    selected = torch.cat([v[m.bool()] for v, m in zip(values, masks, strict=True)])
    if selected.numel() < 2:
        raise ValueError(f"whitening needs >= 2 trainable tokens in the batch, got {selected.numel()}")
    mean, std = selected.mean(), selected.std(correction=1)
    return [
        torch.where(m.bool(), (v - mean) / (std + eps), torch.zeros_like(v))
        for v, m in zip(values, masks, strict=True)
    ]


def reinforce_pp_advantages(
    rewards: list[torch.Tensor], masks: list[torch.Tensor], gamma: float = 1.0, eps: float = 1e-6
) -> list[torch.Tensor]:
    """Per-token REINFORCE++ advantages for a batch of sequences (token rewards, loss masks)."""
    returns = [discounted_returns(r, m, gamma) for r, m in zip(rewards, masks, strict=True)]
    return whiten(returns, masks, eps)
