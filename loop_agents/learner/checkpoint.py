"""Atomic checkpoints: write everything into a hidden temp dir, add a `done` marker, rename.

Layout of `<dir>/`:
  adapter/adapter_model.safetensors, adapter/adapter_config.json   PEFT format, full (gathered) fp32
                                          tensors: PeftModel.from_pretrained and vLLM's LoRA loader read it
  trainable.safetensors                  every trainable tensor by module name (LoRA + value head)
  optimizer.pt, scheduler.pt             full (rank-independent) optimizer state, LR scheduler state
  rng_rank<r>.pt                         python/numpy/torch(/cuda) RNG state of each rank
  learner_state.json, extra_state.pt     iteration counters; the driver's own state (sampler, metrics)
  done                                   commit marker, written last inside the temp dir
A directory without `done` is incomplete and is never resumed from.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

DONE_MARKER = "done"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_name(iteration: int) -> str:
    return f"checkpoint-{iteration}"


def is_complete(directory: str | Path) -> bool:
    return (Path(directory) / DONE_MARKER).is_file()


def latest_complete_checkpoint(run_dir: str | Path) -> Path | None:
    """The `checkpoint-<N>` directory with the largest N that has a `done` marker, or None."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return None
    found = []
    for child in run_dir.iterdir():
        match = CHECKPOINT_PATTERN.match(child.name)
        if match and child.is_dir() and is_complete(child):
            found.append((int(match.group(1)), child))
    return max(found)[1] if found else None


def prune_checkpoints(run_dir: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` complete checkpoints (and stale temp dirs); return deleted."""
    run_dir = Path(run_dir)
    complete = sorted(
        (int(m.group(1)), c)
        for c in run_dir.iterdir()
        if (m := CHECKPOINT_PATTERN.match(c.name)) and is_complete(c)
    )
    doomed = [c for _, c in complete[: max(0, len(complete) - keep)]]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def temp_dir_for(directory: Path) -> Path:
    return directory.parent / f".{directory.name}.tmp"


def commit(temp: Path, directory: Path) -> None:
    """Mark `temp` complete and move it to `directory` (replacing an older one of the same name)."""
    (temp / DONE_MARKER).write_text("ok\n")
    if directory.exists():
        old = directory.parent / f".{directory.name}.old"
        shutil.rmtree(old, ignore_errors=True)
        directory.rename(old)
        temp.rename(directory)
        shutil.rmtree(old)
    else:
        temp.rename(directory)


def save_adapter(directory: Path, peft_model: torch.nn.Module, full_state: dict[str, torch.Tensor]) -> None:
    """Write a PEFT adapter dir from full LoRA tensors keyed by the peft model's parameter names."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    adapter_state = get_peft_model_state_dict(peft_model, state_dict=full_state)
    save_file(
        {k: v.contiguous() for k, v in adapter_state.items()},
        directory / "adapter_model.safetensors",
        metadata={"format": "pt"},
    )
    peft_model.peft_config["default"].save_pretrained(str(directory))


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
