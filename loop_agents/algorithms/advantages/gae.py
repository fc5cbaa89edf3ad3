"""GAE over trainable tokens (Schulman et al. 2016, Eq. 16), multi-turn aware.

The critic's value `values[t]` estimates the return before token t is sampled. Steps are the
trainable tokens only (observations are the environment's part of the transition), so for the
trainable positions p_1 < ... < p_n, with the outcome reward on p_n:

    δ_k = r_{p_k} + γ · V(p_{k+1}) - V(p_k)      (V(p_{n+1}) = 0: the episode ended)
    A_k = δ_k + γλ · A_{k+1},                   returns_k = A_k + V(p_k)

Unlike AgentGym-RL (reference §2.2) the bootstrap value is taken at the next *trainable* token,
a position the critic is trained on, never at an observation token, and the reward is never
placed on a masked token. The LOOP paper's PPO baseline used γ = λ = 1 (anchors §1.3).
"""

from __future__ import annotations

import torch


def gae_advantages(
    rewards: torch.Tensor, values: torch.Tensor, loss_mask: torch.Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """([T] advantages, [T] returns) of one sequence; both 0 on masked tokens."""
    if values.shape != rewards.shape:
        raise ValueError(f"values shape {tuple(values.shape)} != rewards shape {tuple(rewards.shape)}")
    advantages = torch.zeros_like(rewards)
    returns = torch.zeros_like(rewards)
    next_value, next_advantage = 0.0, 0.0
    for t in range(rewards.numel() - 1, -1, -1):
        if not loss_mask[t]:
            continue
        value = float(values[t])
        delta = float(rewards[t]) + gamma * next_value - value
        next_advantage = delta + gamma * lam * next_advantage
        advantages[t] = next_advantage
        returns[t] = next_advantage + value
        next_value = value
    return advantages, returns
