"""Seeded task sampler: shuffle the split, pop without replacement, reshuffle when exhausted.

Unlike the reference (seed null, one sampler per rank, duplicates across ranks), there is one sampler
on the driver, seeded from `run.seed`, and its whole state is two integers (epoch, position), so a
resumed run draws exactly the tasks an uninterrupted run would have drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class SamplerState:
    epoch: int = 0  # how many times the split has been reshuffled
    position: int = 0  # index of the next task in the current permutation


class TaskSampler:
    """Deterministic epoch-wise sampling of task ids."""

    def __init__(self, task_ids: list[str], seed: int, state: SamplerState | None = None):
        if not task_ids:
            raise ValueError("the training split is empty: no task ids to sample")
        self.task_ids = sorted(task_ids)
        self.seed = seed
        self.state = state or SamplerState()

    def _permutation(self, epoch: int) -> list[str]:
        order = list(self.task_ids)
        random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order

    def sample(self, n: int) -> list[str]:
        """Next `n` task ids (no repeats within an epoch of the split)."""
        out: list[str] = []
        while len(out) < n:
            order = self._permutation(self.state.epoch)
            take = order[self.state.position : self.state.position + n - len(out)]
            out.extend(take)
            self.state.position += len(take)
            if self.state.position >= len(order):
                self.state = SamplerState(self.state.epoch + 1, 0)
        return out
