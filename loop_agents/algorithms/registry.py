"""Name → function tables for the estimators, plus named presets of the algorithm family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from loop_agents.algorithms.advantages.dr_grpo import dr_grpo_advantages
from loop_agents.algorithms.advantages.grpo import grpo_advantages
from loop_agents.algorithms.advantages.loo import leave_one_out_advantages
from loop_agents.algorithms.advantages.rloo import rloo_advantages
from loop_agents.algorithms.config import AlgorithmConfig, loop_clip_range

OutcomeEstimator = Callable[[torch.Tensor, AlgorithmConfig], torch.Tensor]

# Group estimators: rewards of one group [K] -> one scalar advantage per rollout [K].
OUTCOME_ESTIMATORS: dict[str, OutcomeEstimator] = {
    "loo": lambda r, cfg: leave_one_out_advantages(r, cfg.normalize_std, cfg.std_eps),
    "rloo": lambda r, cfg: rloo_advantages(r),
    "grpo": lambda r, cfg: grpo_advantages(r, cfg.normalize_std, cfg.std_eps),
    "dr_grpo": lambda r, cfg: dr_grpo_advantages(r),
}
# Batch estimators that work on token sequences (compute.py dispatches them).
TOKEN_ESTIMATORS = ("reinforce_pp", "gae")


def preset(name: str) -> AlgorithmConfig:
    """Named algorithm presets. `loop` = the paper's defaults (anchors §1.2)."""
    lo, hi = loop_clip_range(0.1)
    loop = AlgorithmConfig(advantage_estimator="loo", clip_low=lo, clip_high=hi, aggregation="loop")
    presets = {
        "loop": loop,
        "loop_per_turn": replace(loop, ratio_level="turn"),
        "loop_per_trajectory": replace(loop, ratio_level="trajectory"),
        "rloo": replace(loop, advantage_estimator="rloo"),
        "grpo": replace(
            loop,
            advantage_estimator="grpo",
            normalize_std=True,
            clip_low=0.8,
            clip_high=1.2,
            aggregation="grpo",
        ),
        "dr_grpo": replace(
            loop, advantage_estimator="dr_grpo", clip_low=0.8, clip_high=1.2, aggregation="dr_grpo"
        ),
        # GSPO (Zheng et al. 2025): sequence ratio, tiny clip range (their 3e-4 / 4e-4).
        "gspo": replace(
            loop,
            advantage_estimator="grpo",
            normalize_std=True,
            loss="gspo",
            ratio_level="trajectory",
            clip_low=1 - 3e-4,
            clip_high=1 + 4e-4,
            aggregation="grpo",
        ),
        "reinforce_pp": replace(
            loop,
            advantage_estimator="reinforce_pp",
            clip_low=0.8,
            clip_high=1.2,
            aggregation="token_mean",
            abs_adv_threshold=0.0,
        ),
        "ppo_gae": replace(loop, advantage_estimator="gae", abs_adv_threshold=0.0),
        "sft": replace(loop, loss="sft", aggregation="token_mean", abs_adv_threshold=0.0),
    }
    if name not in presets:
        raise ValueError(f"unknown algorithm preset {name!r}; known: {sorted(presets)}")
    return presets[name]
