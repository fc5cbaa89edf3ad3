"""The configured policy loss per trainable token: SFT, GSPO, or the PPO clip on a token/turn/trajectory ratio.

Which loss an `AlgorithmConfig` asks for, so the learner stays algorithm-blind: it hands over the micro-batch's
log-probs, π_old, advantages and segment ids and gets back ℓ_t and whether each token was clipped.
"""

from __future__ import annotations

import torch

from loop_agents.algorithms.config import AlgorithmConfig
from loop_agents.algorithms.losses.gspo import gspo_losses
from loop_agents.algorithms.losses.ppo_clip import ppo_clip_losses
from loop_agents.algorithms.losses.ratio import segment_log_ratio
from loop_agents.algorithms.losses.sft import sft_losses


def policy_token_losses(
    alg: AlgorithmConfig,
    logprobs: torch.Tensor,
    old: torch.Tensor,
    adv: torch.Tensor,
    item_of_token: torch.Tensor,
    num_items: int,
    turn_of_token: torch.Tensor,
    num_turns: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ℓ_t, clipped_t) over the [N] trainable tokens; `*_of_token` give each token's trajectory and turn."""
    if alg.loss == "sft":
        return sft_losses(logprobs), torch.zeros_like(logprobs, dtype=torch.bool)
    if alg.loss == "gspo":
        return gspo_losses(logprobs, old, adv, item_of_token, num_items, alg.clip_low, alg.clip_high)
    log_ratio = logprobs - old
    if alg.ratio_level == "turn":
        log_ratio = segment_log_ratio(log_ratio, turn_of_token, num_turns)
    elif alg.ratio_level == "trajectory":
        log_ratio = segment_log_ratio(log_ratio, item_of_token, num_items)
    return ppo_clip_losses(log_ratio, adv, alg.clip_low, alg.clip_high, alg.clip_enabled)
