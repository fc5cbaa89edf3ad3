"""Deterministic work split: epoch order, rank assignment, token-budget micro-batches, packing.

Every rank receives the same global list and computes the same plan, so no communication is
needed to agree on it. Minibatch membership depends only on the seed (never on the world size),
which is what makes 1-process and W-process training give the same update.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def epoch_order(num_items: int, seed: int, iteration: int, epoch: int) -> list[int]:
    """Seeded visiting order of one epoch (same rule as loop_agents.reference.epoch_order)."""
    generator = torch.Generator().manual_seed(seed * 1_000_000 + iteration * 1_000 + epoch)
    return torch.randperm(num_items, generator=generator).tolist()


def balanced_assignment(items: list[int], lengths: list[int], world_size: int) -> list[list[int]]:
    """Split `items` over ranks, longest first to the least-loaded rank (ties: lowest rank)."""
    loads = [0] * world_size
    ranks: list[list[int]] = [[] for _ in range(world_size)]
    for item in sorted(items, key=lambda i: (-lengths[i], i)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        ranks[rank].append(item)
        loads[rank] += lengths[item]
    return [sorted(r) for r in ranks]


def micro_batches(items: list[int], lengths: list[int], token_budget: int) -> list[list[int]]:
    """Greedy packing in order: a micro-batch holds <= token_budget tokens (a longer item goes alone)."""
    batches: list[list[int]] = []
    current: list[int] = []
    used = 0
    for item in items:
        if current and used + lengths[item] > token_budget:
            batches.append(current)
            current, used = [], 0
        current.append(item)
        used += lengths[item]
    if current:
        batches.append(current)
    return batches


@dataclass
class PackedBatch:
    """One packed row: several trajectories back to back, and where their trained tokens are."""

    input_ids: torch.Tensor  # [1, N]
    position_ids: torch.Tensor  # [1, N], restarting at 0 for every trajectory
    gather_index: torch.Tensor  # [n] row of the hidden state that predicts each trained token
    targets: torch.Tensor  # [n] the trained token ids
    item_of_token: torch.Tensor  # [n] index (0..k-1) of the trajectory in this micro-batch
    turn_of_token: torch.Tensor  # [n] turn id, unique across the micro-batch
    num_turns: int
    num_tokens: int  # N


def pack(
    token_ids: list[list[int]],
    masks: list[list[int]],
    device: torch.device,
    segment_starts: list[tuple[int, ...]] | None = None,
) -> PackedBatch:
    """Pack trajectories; trained tokens are mask-1 positions t >= 1 (position 0 has no prefix). A trajectory of
    several segments (`segment_starts[i]`: where each later one begins) restarts its positions at each, so the
    model runs every segment as a sequence of its own."""
    ids, positions, gather, targets, item_of, turn_of = [], [], [], [], [], []
    offset = turns = 0
    for item, (seq, mask) in enumerate(zip(token_ids, masks, strict=True)):
        ids.extend(seq)
        bounds = [0, *(segment_starts[item] if segment_starts else ()), len(seq)]
        for begin, end in zip(bounds, bounds[1:], strict=False):
            positions.extend(range(end - begin))
        previous = 0
        for t, m in enumerate(mask):
            if m:
                if not previous:
                    turns += 1
                gather.append(offset + t - 1)
                targets.append(seq[t])
                item_of.append(item)
                turn_of.append(turns - 1)
            previous = m
        offset += len(seq)

    def as_tensor(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.long, device=device)

    return PackedBatch(
        input_ids=as_tensor(ids)[None],
        position_ids=as_tensor(positions)[None],
        gather_index=as_tensor(gather),
        targets=as_tensor(targets),
        item_of_token=as_tensor(item_of),
        turn_of_token=as_tensor(turn_of),
        num_turns=turns,
        num_tokens=offset,
    )
