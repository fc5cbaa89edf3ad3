"""Learning-rate schedules, stepped once per iteration (the number of optimizer steps per iteration
varies with filtering, which is why ml-loop steps per iteration too)."""

from __future__ import annotations

import math

import torch

from loop_agents.learner.config import LearnerConfig


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: LearnerConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """constant (LOOP), linear_warmup (then constant), or cosine (warmup, then cosine to 0)."""
    warmup = max(cfg.warmup_iterations, 0)

    def factor(iteration: int) -> float:
        if cfg.scheduler == "constant":
            return 1.0
        if iteration < warmup:
            return (iteration + 1) / (warmup + 1)
        if cfg.scheduler == "linear_warmup":
            return 1.0
        progress = min(1.0, (iteration - warmup) / max(1, cfg.total_iterations - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
