"""The configured policy loss per trainable token: SFT, GSPO, or the PPO clip on a token/turn/trajectory ratio.

Which loss an `AlgorithmConfig` asks for, so the learner stays algorithm-blind: it hands over the micro-batch's
log-probs, π_old, advantages and segment ids (and the sampler's behaviour log-probs) and gets back ℓ_t and whether
each token was clipped. With `behaviour_weight="decoupled"` (asynchronous LOOP) π_old is the proximal policy and
every ℓ_t is weighted by w_t = min(π_old(t)/π_behav(t), cap), without gradient (AReaL's decoupled PPO objective,
arXiv 2505.24298 Eq. 5; reference.py's off-policy form).
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
    behaviour: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ℓ_t, clipped_t) over the [N] trainable tokens; `*_of_token` give each token's trajectory and turn,
    `behaviour` the sampler's log-prob of each token (used by the decoupled objective only)."""
    if alg.loss == "sft":
        return sft_losses(logprobs), torch.zeros_like(logprobs, dtype=torch.bool)
    if alg.loss == "gspo":
        losses, clipped = gspo_losses(
            logprobs, old, adv, item_of_token, num_items, alg.clip_low, alg.clip_high
        )
    else:
        log_ratio = logprobs - old
        if alg.ratio_level == "turn":
            log_ratio = segment_log_ratio(log_ratio, turn_of_token, num_turns)
        elif alg.ratio_level == "trajectory":
            log_ratio = segment_log_ratio(log_ratio, item_of_token, num_items)
        losses, clipped = ppo_clip_losses(log_ratio, adv, alg.clip_low, alg.clip_high, alg.clip_enabled)
    if alg.behaviour_weight == "decoupled":
        if behaviour is None:
            raise ValueError("behaviour_weight='decoupled' needs the sampler's behaviour log-probs")
        losses = decoupled_behaviour_weights(old, behaviour, alg.behaviour_weight_cap) * losses
    return losses, clipped


def decoupled_behaviour_weights(
    prox: torch.Tensor, behaviour: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """[N] w_t = min(π_prox(t)/π_behav(t), cap), detached: it reweights the samples, it is not optimised."""
    weights = torch.exp(prox.detach() - behaviour.to(prox.device, prox.dtype))
    return weights if cap is None else torch.clamp(weights, max=cap)
