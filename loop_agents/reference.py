"""LOOP in one file: the readable reference the real learner is tested against (CleanRL style).

LOOP = leave-one-out advantages + per-token PPO clipped objective on LoRA weights
(Chen et al. 2025, "Reinforcement Learning for Long-Horizon Interactive LLM Agents", arXiv 2502.01600;
what the released code really does: docs/reference-ml-loop.md §2).

One iteration, top to bottom:
  1. advantages   A_i = R_i - mean_{j≠i} R_j within each task's group of K rollouts (paper Eq. 6);
                  no std normalisation (LOOP ships without it).
  2. filter       drop rollouts with |A_i| < 0.01 (zero-variance groups vanish).
  3. old logprobs recomputed with the current weights, no grad (the rollout policy in sync mode).
  4. E epochs; each epoch visits the rollouts in a seeded random order, in minibatches of M.
     For rollout i with trainable (sampled) tokens O_i and per-token ratio r_t = π_θ/π_old:
        L_i = -(1/|O_i|) Σ_{t∈O_i} min(r_t · A_i, g(A_i)),  g(A) = (1+ε)A if A >= 0 else A/(1+ε)
     i.e. the ratio is clipped to [1/(1+ε), 1+ε] (ml-loop `_ppo_loss`). The minibatch loss is
     Σ_i L_i / M with the CONSTANT M (also for a short last minibatch), so every trajectory weighs
     the same regardless of its length. One forward/backward per rollout (batch 1, no packing),
     gradient-norm clipping, one AdamW step per minibatch.

Off-policy form (asynchronous LOOP, `algorithm.max_staleness > 0`): AReaL's decoupled PPO objective
(Fu et al. 2025, "AReaL: A Large-Scale Asynchronous Reinforcement Learning System", arXiv 2505.24298, Eq. 5).
A rollout sampled by older adapters carries each token's behaviour log-prob log π_behav(t) (what the sampler
returned for that token, under the adapter that sampled it). π_prox is step 3's recompute (the weights at the
start of the update), the clip is taken on r_t = π_θ/π_prox and every token is weighted, without gradient, by
w_t = min(π_prox(t)/π_behav(t), c) (c = `behaviour_weight_cap`, None = uncapped):
        L_i = -(1/|O_i|) Σ_{t∈O_i} w_t · min(r_t · A_i, g(A_i))
On-policy (π_behav = π_prox) w_t = 1 and this is the loss above.

Simplifications on purpose: one process, no FSDP, no chunked logprobs (full [T x vocab] logits),
no KL, no value head, no checkpointing. Everything that makes the real learner fast lives in
loop_agents/learner/ and must give the same numbers as this file on tiny inputs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn.functional as F

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class ReferenceConfig:
    """The knobs of one LOOP iteration (defaults: the paper's, except M and lr for tiny tests)."""

    epochs: int = 2  # PPO epochs per iteration
    minibatch_size: int = 32  # M: rollouts per optimizer step, and the constant loss divisor
    epsilon: float = 0.1  # ratio clipped to [1/(1+ε), 1+ε]
    abs_adv_threshold: float = 0.01  # drop rollouts with |A| below this
    lr: float = 5e-5  # AdamW learning rate (constant)
    weight_decay: float = 0.01  # AdamW weight decay
    max_grad_norm: float = 0.1  # global gradient-norm clip
    seed: int = 0  # seeds the LoRA init and the epoch order
    lora_r: int = 16  # LoRA rank
    lora_alpha: int = 32  # LoRA alpha
    behaviour_weight_cap: float | None = (
        None  # off-policy form: w_t = min(π_prox/π_behav, cap); None = uncapped
    )


@dataclass
class Rollout:
    """What the reference needs of a trajectory: tokens, loss mask, reward, group."""

    group_id: str
    token_ids: list[int]
    loss_mask: list[int]
    reward: float
    behaviour_logprobs: list[float] | None = None  # per token, the sampler's log π_behav; None = on-policy


def epoch_order(num_rollouts: int, seed: int, iteration: int, epoch: int) -> list[int]:
    """The seeded visiting order of one epoch (the learner uses the same rule)."""
    generator = torch.Generator().manual_seed(seed * 1_000_000 + iteration * 1_000 + epoch)
    return torch.randperm(num_rollouts, generator=generator).tolist()


def load_lora_policy(model_dir: str, cfg: ReferenceConfig) -> torch.nn.Module:
    """The HF model in fp32 with a fresh LoRA adapter on all 7 projections (B = 0: starts at the base)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.config.use_cache = False
    torch.manual_seed(cfg.seed)
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=0.0,
        target_modules=list(LORA_TARGETS),
        bias="none",
    )
    return get_peft_model(model, lora)


def leave_one_out(rollouts: list[Rollout]) -> list[float]:
    """Step 1: A_i = R_i - mean of the other rewards of the same group."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rollouts):
        groups[r.group_id].append(i)
    advantages = [0.0] * len(rollouts)
    for idx in groups.values():
        if len(idx) < 2:
            raise ValueError("leave-one-out needs >= 2 rollouts per group")
        total = sum(rollouts[i].reward for i in idx)
        for i in idx:
            advantages[i] = rollouts[i].reward - (total - rollouts[i].reward) / (len(idx) - 1)
    return advantages


def token_logprobs(model: torch.nn.Module, token_ids: list[int]) -> torch.Tensor:
    """[T] log π(token_t | tokens_<t); position 0 has no prediction and gets 0."""
    ids = torch.tensor([token_ids])
    logits = model(input_ids=ids).logits[0, :-1].float()
    picked = torch.gather(F.log_softmax(logits, dim=-1), 1, ids[0, 1:, None])[:, 0]
    return torch.cat([torch.zeros(1), picked])


def behaviour_weights(
    prox_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """w_t = min(π_prox(t)/π_behav(t), cap), no gradient (AReaL's decoupled objective)."""
    weights = torch.exp(prox_logprobs.detach() - behaviour_logprobs)
    return weights if cap is None else torch.clamp(weights, max=cap)


def rollout_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantage: float,
    epsilon: float,
    behaviour_logprobs: torch.Tensor | None = None,
    behaviour_weight_cap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """L_i = -mean_{t∈O_i} w_t·min(r_t·A, g(A)) and the number of clipped tokens; r_t = π_θ/π_old (π_old is
    π_prox in the off-policy form), w_t = 1 without `behaviour_logprobs`, else `behaviour_weights`."""
    ratio = torch.exp(logprobs - old_logprobs)[mask]
    a = torch.tensor(advantage)
    g = (1 + epsilon) * a if advantage >= 0 else a / (1 + epsilon)
    surrogate = torch.minimum(ratio * a, g)
    if behaviour_logprobs is not None:
        surrogate = (
            behaviour_weights(old_logprobs[mask], behaviour_logprobs[mask], behaviour_weight_cap) * surrogate
        )
    return -surrogate.mean(), (ratio * a > g).sum()


def loop_iteration(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rollouts: list[Rollout],
    cfg: ReferenceConfig,
    iteration: int = 0,
) -> list[dict[str, float]]:
    """One LOOP iteration (steps 1-4); returns the metrics of every optimizer step."""
    advantages = leave_one_out(rollouts)
    keep = [i for i, a in enumerate(advantages) if abs(a) >= cfg.abs_adv_threshold]
    rollouts = [rollouts[i] for i in keep]
    advantages = [advantages[i] for i in keep]
    masks = [torch.tensor(r.loss_mask, dtype=torch.bool) for r in rollouts]

    model.eval()
    with torch.no_grad():
        old_logprobs = [token_logprobs(model, r.token_ids) for r in rollouts]
    model.train()

    params = [p for p in model.parameters() if p.requires_grad]
    history = []
    for epoch in range(cfg.epochs):
        order = epoch_order(len(rollouts), cfg.seed, iteration, epoch)
        for start in range(0, len(order), cfg.minibatch_size):
            minibatch_loss, clipped, tokens, weight_sum = 0.0, 0, 0, 0.0
            for i in order[start : start + cfg.minibatch_size]:
                logprobs = token_logprobs(model, rollouts[i].token_ids)
                behaviour = rollouts[i].behaviour_logprobs
                loss, n_clipped = rollout_loss(
                    logprobs, old_logprobs[i], masks[i], advantages[i], cfg.epsilon,
                    None if behaviour is None else torch.tensor(behaviour), cfg.behaviour_weight_cap,
                )  # fmt: skip
                (loss / cfg.minibatch_size).backward()
                minibatch_loss += float(loss.detach()) / cfg.minibatch_size
                clipped += int(n_clipped)
                tokens += int(masks[i].sum())
                if behaviour is not None:
                    weight_sum += float(behaviour_weights(old_logprobs[i][masks[i]],
                                                          torch.tensor(behaviour)[masks[i]],
                                                          cfg.behaviour_weight_cap).sum())  # fmt: skip
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step = {
                "loss": minibatch_loss,
                "grad_norm": float(grad_norm),
                "clip_fraction": clipped / max(tokens, 1),
            }
            if any(
                rollouts[i].behaviour_logprobs is not None for i in order[start : start + cfg.minibatch_size]
            ):
                step["behaviour_weight"] = weight_sum / max(tokens, 1)  # token mean of the applied w_t
            history.append(step)
    return history


def make_optimizer(model: torch.nn.Module, cfg: ReferenceConfig) -> torch.optim.Optimizer:
    """AdamW over the LoRA parameters only (constant LR, default betas and eps)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def lora_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable (LoRA) tensors by name, detached copies."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
