"""Atomic checkpoints: write everything into a hidden temp dir, add a `done` marker, rename.

Layout of `<dir>/`:
  adapter/adapter_model.safetensors, adapter/adapter_config.json   PEFT format, full (gathered) fp32
                                          tensors: PeftModel.from_pretrained and vLLM's LoRA loader read it
  trainable.safetensors                  every trainable tensor by module name (LoRA + value head)
  optimizer.pt, scheduler.pt             full (rank-independent) optimizer state, LR scheduler state
  rng_rank<r>.pt                         python/numpy/torch(/cuda) RNG state of each rank
  learner_state.json, extra_state.pt     iteration counters; the driver's own state (sampler, metrics)
  manifest.json                          size and sha256 of every file above (learner/manifest.py)
  done                                   commit marker, written last inside the temp dir
A directory without `done` is incomplete and is never resumed from; one whose files do not match its manifest
is skipped on resume (orchestration/resume.py).
"""

from __future__ import annotations

import io
import json
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from loop_agents.errors import CheckpointError
from loop_agents.learner.manifest import write_manifest

DONE_MARKER = "done"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")


def write_failure(directory: Path, err: Exception) -> CheckpointError:
    """The error for a failed checkpoint write: the path, the OS reason, and what is still safe on disk."""
    previous = latest_complete_checkpoint(directory.parent)
    if isinstance(err, OSError):
        reason = f"{err.strerror or err}" + (f" ({err.filename})" if err.filename else "")
    else:
        reason = " ".join(str(err).split())
    try:
        reason += f"; {shutil.disk_usage(directory.parent).free / 2**20:.0f} MiB free on its disk"
    except OSError:
        pass
    kept = (
        f"the previous checkpoint {previous} is intact; free space or fix permissions, then rerun to resume from it"
        if previous is not None
        else "no earlier checkpoint exists in this directory"
    )
    return CheckpointError(f"could not write checkpoint {directory}: {reason}; nothing was committed, {kept}")


class _RecordingWriter(io.RawIOBase):
    """A binary file that remembers the OSError of a failed write (torch.save reports it as a cryptic
    `RuntimeError: ... unexpected pos`)."""

    def __init__(self, raw: io.BufferedWriter) -> None:
        super().__init__()
        self.raw, self.error = raw, None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        try:
            return self.raw.write(data)
        except OSError as err:
            self.error = self.error or err
            raise


def save_torch(obj: Any, path: Path) -> None:
    """torch.save that raises the OSError (ENOSPC, EFBIG, EACCES, with the file name) of a failed write."""
    with open(path, "wb") as raw:
        writer = _RecordingWriter(raw)
        try:
            torch.save(obj, writer)
        except RuntimeError as err:
            if writer.error is None:
                raise
            error = writer.error
            error.filename = error.filename or str(path)
            raise error from err


def read_checkpoint_files(directory: Path, rank: int = 0) -> dict[str, Any]:
    """Every file the learner restores, read into memory; an unreadable one raises CheckpointError."""
    rng = directory / f"rng_rank{rank}.pt"
    readers = {
        "trainable.safetensors": lambda path: load_file(path),
        "optimizer.pt": lambda path: torch.load(path, weights_only=False),
        "scheduler.pt": lambda path: torch.load(path, weights_only=False),
        "extra_state.pt": lambda path: torch.load(path, weights_only=False),
        "learner_state.json": lambda path: json.loads(path.read_text()),
        "rng": lambda _: torch.load(rng if rng.exists() else directory / "rng_rank0.pt", weights_only=False),
    }
    files = {}
    for name, read in readers.items():
        try:
            files[name] = read(directory / name)
        except (OSError, RuntimeError, ValueError, EOFError, SafetensorError, pickle.UnpicklingError) as err:
            reason = " ".join(str(err).split())[:300]
            raise CheckpointError(
                f"checkpoint {directory} is corrupted: {name} cannot be read ({type(err).__name__}: {reason}); "
                f"delete {directory} to resume from the checkpoint before it"
            ) from err
    return files


def check_fits_model(
    directory: Path, state: dict[str, torch.Tensor], model_shapes: dict[str, tuple[int, ...]]
) -> None:
    """Raise CheckpointError unless `state` has exactly the model's trainable tensors, shape for shape."""
    config_file = directory / "learner_state.json"
    saved_from = json.loads(config_file.read_text()).get("config", {}).get("model_path", "?")
    hint = f"(saved from base model {saved_from}: a different base model or LoRA layout?)"
    if set(state) != set(model_shapes):
        names = sorted(set(state) ^ set(model_shapes))[:4]
        raise CheckpointError(
            f"checkpoint {directory} trainable tensors do not match the model: {names} {hint}"
        )
    for name, shape in model_shapes.items():
        if tuple(state[name].shape) != shape:
            raise CheckpointError(
                f"checkpoint {directory} does not fit the model: {name} has shape {tuple(state[name].shape)} "
                f"in the checkpoint but {shape} in the model {hint}"
            )


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
    """Record `temp`'s files in its manifest, mark it complete and move it to `directory` (replacing an older
    one of the same name)."""
    write_manifest(temp)
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
