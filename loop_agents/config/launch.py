"""Checks of how `loop_agents.train` was launched (torchrun / accelerate launch) against the config."""

from __future__ import annotations

import os
from collections.abc import Mapping

from omegaconf import DictConfig

from loop_agents.config.validate import ConfigError


def launched_world_size(environ: Mapping[str, str] | None = None) -> int:
    """WORLD_SIZE set by the launcher (1 without one)."""
    return int((os.environ if environ is None else environ).get("WORLD_SIZE", "1"))


def launched_rank(environ: Mapping[str, str] | None = None) -> int:
    return int((os.environ if environ is None else environ).get("RANK", "0"))


def check_world_size(cfg: DictConfig, environ: Mapping[str, str] | None = None) -> None:
    """On GPUs one learner rank runs per `gpu_allocation.learner_gpus` entry, so the launcher must start that many
    processes (accelerate's `num_processes`, torchrun's `--nproc-per-node`). On CPU any number of gloo ranks works."""
    world_size = launched_world_size(environ)
    learner_gpus = list(cfg.gpu_allocation.learner_gpus)
    if cfg.gpu_allocation.device == "cuda" and world_size != len(learner_gpus):
        raise ConfigError(
            f"launched with WORLD_SIZE={world_size} processes but gpu_allocation={cfg.gpu_allocation.name} has "
            f"{len(learner_gpus)} learner GPUs {learner_gpus}; launch {len(learner_gpus)} processes "
            f"(conf/accelerate/fsdp2_{len(learner_gpus)}gpu.yaml) or pick another gpu_allocation preset"
        )
