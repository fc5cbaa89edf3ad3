"""SFT warm start: train the LoRA on demonstration conversations before RL (also usable for RFT).

A demonstration is a chat (system/user messages, then alternating assistant actions and user
observations). It becomes a Trajectory built with the same ChatFormat the rollouts use, so the SFT
targets are exactly the token layout the policy samples in: loss mask 1 on each assistant message and
its `<|im_end|>`, 0 on everything else. The SFT loss is the token NLL on those tokens.
"""

from __future__ import annotations

from dataclasses import replace

from loop_agents.rollout.trajectory import Trajectory


def sft_warm_start(learner, demonstrations: list[Trajectory], epochs: int, lr: float) -> dict[str, float]:
    """Run `epochs` SFT epochs with the learner's own machinery, then restore the RL settings.

    Adam moments from SFT are cleared so that RL starts with a fresh optimizer state, as if the
    warm-started adapter had been loaded from disk.
    """
    rl_algorithm, rl_epochs = learner.algorithm, learner.cfg.epochs
    rl_lrs = [group["lr"] for group in learner.optimizer.param_groups]
    learner.algorithm = replace(rl_algorithm, loss="sft")
    learner.cfg.epochs = epochs
    for group in learner.optimizer.param_groups:
        group["lr"] = lr
    try:
        metrics = learner.train_iteration(demonstrations)
    finally:
        learner.algorithm, learner.cfg.epochs = rl_algorithm, rl_epochs
        learner.optimizer.state.clear()
        for group, group_lr in zip(learner.optimizer.param_groups, rl_lrs, strict=True):
            group["lr"] = group_lr
        learner.iteration = 0
    return metrics
