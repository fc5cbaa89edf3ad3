"""What one invocation of scripts/evaluate.py asks for, and what `prepare` settled before any server starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from loop_agents.checkpoint_eval.eval_target import Target

KEYS = {
    "checkpoint": str,
    "split": str,
    "runs": int,
    "server_url": str,
    "out": str,
    "max_tasks": int,
    "max_turns": int,
    "appworld_experiment": str,
    "official": bool,
    "compare": str,
}
# settings that must match between the invocations that fill one out/ directory
MANIFEST_KEYS = ("adapter_sha256", "model_path", "split", "env", "max_turns", "temperature", "max_context")


@dataclass
class EvalRequest:
    checkpoint: str = "base"
    split: str | None = None
    runs: int = 1
    server_url: str | None = None
    out: str | None = None
    max_tasks: int | None = None
    max_turns: int | None = None
    appworld_experiment: str | None = None
    official: bool = True
    compare: str | None = None
    overrides: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    cfg: DictConfig
    target: Target
    split: str
    out: Path
    model_path: str
    task_ids: list[str]
    difficulties: dict[str, int] | None
    max_turns: int
    manifest: dict[str, Any]
    experiments: dict[int, str] | None  # AppWorld: run -> experiment name
