"""Procedurally generated "gem hunt" tasks: follow a chain of notes to the gem, then answer its code.

A task is fully determined by its integer index (the seed), so every process regenerates the same
task from the id alone. Item ids follow AgentGym's `<task>_<int>` convention: `gemhunt_<index>`.
Splits are disjoint index ranges (held out by construction):
    train  [0, 10000)      dev  [10000, 10500)      test  [10500, 11000)

Task family (one task):
- 24 containers named `<color> <thing>` (6 colors x 4 things); 6 of them are in the room.
- A chain of `chain_length` (2..5) of those containers: the first holds a note naming the second, ...,
  the last holds the gem with a two-digit code. The task names the start container.
- The agent opens containers one per turn and finishes with `answer <code>`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

TASK_PREFIX = "gemhunt"
COLORS = ("red", "green", "blue", "yellow", "purple", "grey")
THINGS = ("box", "ball", "key", "door")
CONTAINERS = tuple(f"{color} {thing}" for color in COLORS for thing in THINGS)
ROOM_SIZE = 6  # containers present in one task's room
MIN_CHAIN, MAX_CHAIN = 2, 5  # containers to open, gem container included
SPLITS: dict[str, range] = {
    "train": range(0, 10_000),
    "dev": range(10_000, 10_500),
    "test": range(10_500, 11_000),
}


@dataclass(frozen=True)
class GemHuntTask:
    """One generated task."""

    index: int
    room: tuple[str, ...]  # containers present (chain + distractors), in the order listed to the agent
    chain: tuple[str, ...]  # containers to open in order; chain[-1] holds the gem
    code: str  # the gem's two-digit code (digits separated by a space, as the agent must write it)

    @property
    def task_id(self) -> str:
        return f"{TASK_PREFIX}_{self.index}"

    @property
    def required_actions(self) -> int:
        """Opens along the chain plus the answer: the optimal episode length."""
        return len(self.chain) + 1


def generate_task(index: int) -> GemHuntTask:
    """The task with this index (deterministic: same index, same task, in any process)."""
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"gem hunt task index must be a non-negative int, got {index!r}")
    rng = random.Random(f"gemhunt:{index}")
    chain_length = rng.randint(MIN_CHAIN, MAX_CHAIN)
    room = rng.sample(CONTAINERS, ROOM_SIZE)
    chain = tuple(rng.sample(room, chain_length))
    code = f"{rng.randint(1, 9)} {rng.randint(0, 9)}"
    return GemHuntTask(index=index, room=tuple(room), chain=chain, code=code)


def parse_task_id(task_id: str) -> int:
    """`gemhunt_<index>` -> index, with a clear error for anything else."""
    prefix, _, number = task_id.rpartition("_")
    if prefix != TASK_PREFIX or not number.isdigit():
        raise ValueError(f"unknown bundled task id {task_id!r}: expected '{TASK_PREFIX}_<index>'")
    return int(number)


def task_ids(split: str) -> list[str]:
    """Item ids of a split (`train`, `dev`, `test`)."""
    if split not in SPLITS:
        raise ValueError(f"unknown bundled split {split!r}; choose one of {sorted(SPLITS)}")
    return [f"{TASK_PREFIX}_{i}" for i in SPLITS[split]]


def split_of(index: int) -> str:
    """Name of the split an index belongs to (indices past the test range belong to none)."""
    for name, indices in SPLITS.items():
        if index in indices:
            return name
    raise ValueError(
        f"gem hunt index {index} is outside every split ({ {k: (r.start, r.stop) for k, r in SPLITS.items()} })"
    )
