"""Typed configuration of an RL algorithm: advantage estimator + loss + aggregation + filter."""

from __future__ import annotations

from dataclasses import dataclass, field

ADVANTAGE_ESTIMATORS = ("loo", "rloo", "grpo", "dr_grpo", "reinforce_pp", "gae")
LOSSES = ("ppo_clip", "gspo", "sft")
RATIO_LEVELS = ("token", "turn", "trajectory")
BEHAVIOUR_WEIGHTS = ("none", "decoupled")
AGGREGATIONS = ("loop", "grpo", "token_mean", "dr_grpo")


def loop_clip_range(epsilon: float) -> tuple[float, float]:
    """LOOP's ratio clip range [1/(1+ε), 1+ε] (ml-loop `_ppo_loss`), as explicit (low, high)."""
    if epsilon <= 0:
        raise ValueError(f"ppo epsilon must be > 0, got {epsilon}")
    return 1.0 / (1.0 + epsilon), 1.0 + epsilon


@dataclass
class AlgorithmConfig:
    """An algorithm = advantage estimator + loss + aggregation (+ advantage filter). Defaults = LOOP."""

    advantage_estimator: str = "loo"  # one of ADVANTAGE_ESTIMATORS
    normalize_std: bool = False  # divide group advantages by the group std (LOOP ships without it)
    std_eps: float = 1e-6  # added to the std before dividing (GRPO, REINFORCE++ whitening)
    singleton_groups: str = "error"  # a group with K=1: "error" (raise) or "zero" (advantage 0, counted)
    gamma: float = 1.0  # discount over trainable tokens (reinforce_pp, gae); LOOP paper's critic: 1
    lam: float = 1.0  # GAE lambda; the LOOP paper's PPO baseline used 1 (0.95-0.999 diverged)
    whiten_gae: bool = True  # whiten GAE advantages over all trainable tokens of the batch
    abs_adv_threshold: float = 0.01  # drop rollouts with |A| below this (LOOP: 0.01); 0 keeps all
    pos_adv_only: bool = False  # keep only A >= threshold (ml-loop's pos_adv_only)
    loss: str = "ppo_clip"  # one of LOSSES
    ratio_level: str = "token"  # importance ratio per token, per turn or per trajectory
    clip_enabled: bool = True  # False gives the unclipped importance-weighted policy gradient
    clip_low: float = field(default_factory=lambda: loop_clip_range(0.1)[0])  # lower ratio bound
    clip_high: float = field(default_factory=lambda: loop_clip_range(0.1)[1])  # upper ratio bound
    aggregation: str = "loop"  # one of AGGREGATIONS
    loss_divisor: int | None = (
        None  # constant divisor C of the loop/dr_grpo aggregation; None = minibatch size
    )
    dr_grpo_length_constant: int | None = None  # Dr.GRPO's constant length L; None = learner max_seq_len
    kl_coef: float = 0.0  # weight of the per-token k3 KL to the reference (base model); 0 = off
    entropy_coef: float = 0.0  # entropy bonus: loss - c * Σ_i w_i Σ_t H_it (verl / AgentGym-RL); 0 = off
    # skip the step and end the iteration's epochs when KL(π_old ‖ π_θ), nats per trajectory (Σ of per-token
    # k3), exceeds this before a step (ml-loop's guard, which uses a noisier k1); None = off
    high_kl_threshold: float | None = 20.0
    value_loss_coef: float = 0.5  # weight of the value loss (gae only)
    value_clip: float | None = None  # clip value predictions to old ± this (PPO value clipping); None = off
    # off-policy samples (asynchronous LOOP): "decoupled" weights each token's loss by π_prox/π_behav (AReaL's
    # decoupled PPO; π_prox = the recomputed π_old, π_behav = the sampler's log-prob of that token), "none" = 1
    behaviour_weight: str = "none"
    behaviour_weight_cap: float | None = None  # w_t = min(π_prox/π_behav, cap); None = uncapped

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        choices = {
            "advantage_estimator": ADVANTAGE_ESTIMATORS,
            "loss": LOSSES,
            "ratio_level": RATIO_LEVELS,
            "aggregation": AGGREGATIONS,
            "singleton_groups": ("error", "zero"),
            "behaviour_weight": BEHAVIOUR_WEIGHTS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"algorithm.{name}={getattr(self, name)!r} is not one of {allowed}")
        if not 0 < self.clip_low <= 1 <= self.clip_high:
            raise ValueError(f"need 0 < clip_low <= 1 <= clip_high, got {self.clip_low}, {self.clip_high}")
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ValueError(f"gamma and lam must be in [0, 1], got {self.gamma}, {self.lam}")
        if self.abs_adv_threshold < 0 or self.kl_coef < 0 or self.entropy_coef < 0:
            raise ValueError("abs_adv_threshold, kl_coef and entropy_coef must be >= 0")
        if self.high_kl_threshold is not None and self.high_kl_threshold <= 0:
            raise ValueError(f"high_kl_threshold must be > 0 or None (off), got {self.high_kl_threshold}")
        if self.behaviour_weight_cap is not None and self.behaviour_weight_cap <= 0:
            raise ValueError(f"behaviour_weight_cap must be > 0 or None, got {self.behaviour_weight_cap}")
        if self.loss == "gspo" and self.ratio_level != "trajectory":
            raise ValueError("loss=gspo uses a sequence-level ratio: set ratio_level='trajectory'")
