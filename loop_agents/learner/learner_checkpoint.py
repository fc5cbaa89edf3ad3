"""Checkpoint and adapter I/O of the Learner (a mixin: the methods use its policy, optimizer and context).

Writes are collective and atomic: every file goes into a temporary directory that rank 0 renames into
place once all of it is written (checkpoint.py has the layout). A write that fails on any rank (full
disk, unwritable directory) fails on every rank with a CheckpointError at the same step, so no rank is
left waiting in a barrier for a rank that gave up, and the previous checkpoint stays the newest one.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

import loop_agents.learner.checkpoint as ckpt
from loop_agents.learner.distributed import full_tensor
from loop_agents.redaction import redact


class LearnerCheckpointing:
    """`save_checkpoint`, `load_checkpoint`, `export_adapter` and `trainable_state` for `Learner`."""

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """Full (gathered) trainable tensors by name, on CPU. Collective under FSDP: call on every rank."""
        return {n: full_tensor(p.detach()).cpu().clone() for n, p in self.policy.named_trainable().items()}

    def _peft_state(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        prefix = "peft_model."
        return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}

    def _optimizer_state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        options = StateDictOptions(full_state_dict=self.ctx.enabled, cpu_offload=self.ctx.enabled)
        return get_optimizer_state_dict(self.policy, self.optimizer, options=options)

    def export_adapter(self, directory: str | Path) -> Path:
        """Write only the PEFT adapter (atomically). Collective under FSDP."""
        directory = Path(directory)
        state = self._peft_state(self.trainable_state())
        temp = ckpt.temp_dir_for(directory)
        if self.ctx.is_main:
            shutil.rmtree(temp, ignore_errors=True)
            ckpt.save_adapter(temp, self.policy.peft_model, state)
            ckpt.commit(temp, directory)
        self.ctx.barrier()
        return directory

    def save_checkpoint(self, directory: str | Path, extra_state: dict[str, Any] | None = None) -> Path:
        """Atomic checkpoint (see checkpoint.py for the layout). Collective: call on every rank."""
        directory = Path(directory)
        temp = ckpt.temp_dir_for(directory)
        state = self.trainable_state()
        optimizer_state = self._optimizer_state()

        def prepare() -> None:
            if self.ctx.is_main:
                shutil.rmtree(temp, ignore_errors=True)
                temp.mkdir(parents=True)

        def write() -> None:
            ckpt.save_torch(ckpt.rng_state(), temp / f"rng_rank{self.ctx.rank}.pt")
            if self.ctx.is_main:
                self._write_files(temp, state, optimizer_state, extra_state)

        def commit() -> None:
            if self.ctx.is_main:
                ckpt.commit(temp, directory)
                if ckpt.CHECKPOINT_PATTERN.match(directory.name) and self.cfg.keep_checkpoints > 0:
                    ckpt.prune_checkpoints(directory.parent, self.cfg.keep_checkpoints)

        for step in (prepare, write, commit):
            self._on_every_rank(step, directory, temp)
        return directory

    def _on_every_rank(self, step: Callable[[], None], directory: Path, temp: Path) -> None:
        """Run one write step on this rank, then agree across ranks whether it worked anywhere; if not, every rank
        removes the temporary directory and raises (the failing rank with its own OS reason)."""
        error: Exception | None = None
        try:
            step()
        except (OSError, RuntimeError, SafetensorError) as err:
            # full disk (ENOSPC, EFBIG) or an unwritable directory: OSError from Python's own writes,
            # RuntimeError from torch.save's and safetensors' native writers
            error = err
        failed = self.ctx.all_reduce_sum(torch.tensor([float(error is not None) * 2**self.ctx.rank]))
        if failed.item() == 0:
            return
        shutil.rmtree(temp, ignore_errors=True)
        if error is not None:
            raise ckpt.write_failure(directory, error) from error
        ranks = [r for r in range(self.ctx.world_size) if int(failed.item()) >> r & 1]
        raise ckpt.write_failure(directory, RuntimeError(f"the write failed on rank(s) {ranks}"))

    def _write_files(
        self,
        temp: Path,
        state: dict[str, torch.Tensor],
        optimizer_state: dict[str, Any],
        extra_state: dict[str, Any] | None,
    ) -> None:
        """Rank 0's files of a checkpoint, into `temp`."""
        ckpt.save_adapter(temp / "adapter", self.policy.peft_model, self._peft_state(state))
        save_file({k: v.contiguous() for k, v in state.items()}, temp / "trainable.safetensors")
        ckpt.save_torch(optimizer_state, temp / "optimizer.pt")
        ckpt.save_torch(self.scheduler.state_dict(), temp / "scheduler.pt")
        ckpt.save_torch(extra_state or {}, temp / "extra_state.pt")
        learner_state = {
            "iteration": self.iteration,
            "global_step": self.global_step,
            "world_size": self.ctx.world_size,
        }
        ckpt.write_json(temp / "learner_state.json", {**learner_state, "config": redact(asdict(self.cfg))})

    def load_checkpoint(self, directory: str | Path) -> dict[str, Any]:
        """Restore weights, optimizer, scheduler, counters and RNG; return the driver's extra_state.

        Every file is read and checked against the model before anything is changed: a corrupted
        checkpoint or one saved from another base model raises CheckpointError naming the file.
        """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        directory = Path(directory)
        if not ckpt.is_complete(directory):
            raise ValueError(f"checkpoint {directory} is incomplete (no '{ckpt.DONE_MARKER}' marker)")
        files = ckpt.read_checkpoint_files(directory, self.ctx.rank)
        state, params = files["trainable.safetensors"], self.policy.named_trainable()
        ckpt.check_fits_model(directory, state, {n: tuple(p.shape) for n, p in params.items()})
        with torch.no_grad():
            for name, param in params.items():
                full = state[name].to(device=self.ctx.device, dtype=param.dtype)
                if hasattr(param, "device_mesh"):
                    from torch.distributed.tensor import distribute_tensor

                    shard = distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None)
                    param.to_local().copy_(shard.to_local())
                else:
                    param.copy_(full)
        set_optimizer_state_dict(
            self.policy,
            self.optimizer,
            files["optimizer.pt"],
            options=StateDictOptions(full_state_dict=self.ctx.enabled),
        )
        self.scheduler.load_state_dict(files["scheduler.pt"])
        learner_state = files["learner_state.json"]
        self.iteration, self.global_step = learner_state["iteration"], learner_state["global_step"]
        ckpt.set_rng_state(files["rng"])
        self.ctx.barrier()
        return files["extra_state.pt"]
