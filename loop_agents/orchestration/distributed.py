"""Process-group plumbing between the driver (rank 0) and the other learner ranks.

Launchers (torchrun, accelerate launch) set RANK/WORLD_SIZE/MASTER_ADDR; with one process nothing is
initialised and every collective is the identity. Python objects (trajectories, commands) travel on a
gloo group even when tensors use NCCL, so rollouts are never pickled through NCCL.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as torch_dist

T = TypeVar("T")


class Distributed:
    """Rank facts plus the two collectives the driver needs (broadcast an object, barrier)."""

    def __init__(self, rank: int = 0, world_size: int = 1, object_group: Any = None):
        self.rank, self.world_size, self._group = rank, world_size, object_group

    @classmethod
    def from_environment(cls, device: str) -> Distributed:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        if not torch_dist.is_initialized():
            backend = "nccl" if device == "cuda" else "gloo"
            if device == "cuda":
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            # Long timeout: ranks wait on the driver while it collects rollouts.
            timeout = timedelta(hours=6)
            store, rank, world_size = next(torch_dist.rendezvous("env://", timeout=timeout))
            # A launcher restart (`torchrun --max-restarts`) keeps its store: without a per-attempt prefix
            # the new ranks read the dead ranks' gloo addresses and fail to connect.
            attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
            store = torch_dist.PrefixStore(f"loop_agents/attempt_{attempt}", store)
            torch_dist.init_process_group(
                backend=backend, store=store, rank=rank, world_size=world_size, timeout=timeout
            )
        group = torch_dist.new_group(backend="gloo", timeout=timedelta(hours=6))
        return cls(torch_dist.get_rank(), torch_dist.get_world_size(), group)

    @property
    def is_driver(self) -> bool:
        return self.rank == 0

    def broadcast(self, obj: T) -> T:
        """Rank 0's `obj` on every rank."""
        if self.world_size == 1:
            return obj
        box = [obj]
        torch_dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]

    def on_driver_first(self, fn: Callable[[], T]) -> T:
        """Run `fn` on rank 0 only and give its result to every rank."""
        return self.broadcast(fn() if self.is_driver else None)

    def shutdown(self) -> None:
        if self.world_size > 1 and torch_dist.is_initialized():
            torch_dist.destroy_process_group()
