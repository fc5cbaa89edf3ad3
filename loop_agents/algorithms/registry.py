"""Name → function tables for the estimators, plus named presets of the algorithm family.

The presets are read from `conf/algorithm/<name>.yaml`, the files training composes, so a preset used by a test
or a benchmark is the algorithm `algorithm=<name>` trains with. `from_schema` is the one mapping from the Hydra
`algorithm.*` keys onto `AlgorithmConfig`; the driver uses it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from omegaconf import OmegaConf

from loop_agents.algorithms.advantages.dr_grpo import dr_grpo_advantages
from loop_agents.algorithms.advantages.grpo import grpo_advantages
from loop_agents.algorithms.advantages.loo import leave_one_out_advantages
from loop_agents.algorithms.advantages.rloo import rloo_advantages
from loop_agents.algorithms.config import AlgorithmConfig
from loop_agents.config.load import CONF_DIR
from loop_agents.config.schema import AlgorithmConfig as AlgorithmSchema

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

# `algorithm.loss` -> (AlgorithmConfig.loss, clip_enabled); `reinforce` is the unclipped ratio-weighted gradient.
LOSS_NAMES = {"ppo": ("ppo_clip", True), "gspo": ("gspo", True), "reinforce": ("ppo_clip", False)}


def from_schema(a: Any) -> AlgorithmConfig:
    """Map a composed `algorithm.*` node (conf/algorithm/*.yaml over the schema) onto `AlgorithmConfig`.

    `loss_divisor` stays None (= the learner's minibatch size, which the driver sets from `algorithm.minibatch_size`).
    """
    loss, clip_enabled = LOSS_NAMES[a.loss]
    return AlgorithmConfig(
        advantage_estimator=a.advantage,
        normalize_std=a.std_normalize,
        gamma=a.gamma,
        lam=a.lam,
        abs_adv_threshold=a.abs_adv_threshold,
        pos_adv_only=a.pos_adv_only,
        loss=loss,
        ratio_level=a.ratio_level,
        clip_enabled=clip_enabled,
        clip_low=a.clip_low,
        clip_high=a.clip_high,
        aggregation=a.aggregation,
        kl_coef=a.kl_coef,
        entropy_coef=a.entropy_coef,
        high_kl_threshold=a.high_kl_threshold,
        value_loss_coef=a.value_coef,
    )


def _preset_files() -> dict[str, Any]:
    return {path.stem: path for path in sorted((CONF_DIR / "algorithm").glob("*.yaml"))}


def _load(path: Any) -> AlgorithmConfig:
    node = OmegaConf.merge(OmegaConf.structured(AlgorithmSchema), OmegaConf.load(path))
    return from_schema(node)


def preset(name: str) -> AlgorithmConfig:
    """The algorithm `algorithm=<name>` trains with (conf/algorithm/<name>.yaml), plus three variants of LOOP:
    `loop_per_turn`, `loop_per_trajectory` (the ratio per turn / per trajectory) and `sft` (token-mean NLL)."""
    files = _preset_files()
    variants = {
        "loop_per_turn": lambda loop: replace(loop, ratio_level="turn"),
        "loop_per_trajectory": lambda loop: replace(loop, ratio_level="trajectory"),
        "sft": lambda loop: replace(loop, loss="sft", aggregation="token_mean", abs_adv_threshold=0.0),
    }
    if name in files:
        return _load(files[name])
    if name in variants:
        return variants[name](_load(files["loop"]))
    raise ValueError(f"unknown algorithm preset {name!r}; known: {sorted([*files, *variants])}")
