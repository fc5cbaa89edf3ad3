"""π_old of the first minibatch from that minibatch's own step, and the recompute planned by minibatch.

Before an iteration's first optimizer step the weights are π_old's, so recomputing π_old for the items of the
first minibatch would be a second forward of the same function (issue 21: work not done twice). The recompute
skips them; the first step records their log-probs from its own forward, and later epochs read what it recorded
(shared over ranks, since a later epoch may train an item on another rank). Not where dropout makes the training
forward another function. The other items are recomputed minibatch by minibatch of the first epoch: planned all
at once they made micro-batches of more rows, which ran slower per token on CPU (96 items of the 25 M trl_compare
batch: 2.75-3.16 s at once, 2.20-2.26 s by minibatch, 2026-11-26).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from loop_agents.learner.batching import epoch_order


def first_epoch_minibatches(
    num_items: int, seed: int, iteration: int, minibatch_size: int
) -> list[list[int]]:
    """The first epoch's minibatches, in the order the learner steps through them."""
    order = epoch_order(num_items, seed, iteration, 0)
    return [order[first : first + minibatch_size] for first in range(0, num_items, minibatch_size)]


def training_forward_is_stochastic(policy: nn.Module, model_config: object | None) -> bool:
    """Dropout active in train mode: the first step's forward is then not π_old's function."""
    dropout = any(isinstance(m, nn.Dropout) and m.p > 0 for m in policy.modules())
    return dropout or bool(getattr(model_config, "attention_dropout", 0.0))


def record_step_logprobs(old: list, items: Sequence, minibatch: list[int], logprobs: torch.Tensor) -> None:
    """Fill the missing π_old of `minibatch`'s items from the log-probs its step computed (packed in its order)."""
    parts = torch.split(logprobs.detach().float().cpu(), [items[i].num_trainable for i in minibatch])
    for i, part in zip(minibatch, parts, strict=True):
        if old[i] is None:
            old[i] = part.clone()


def share_over_ranks(ctx, items: Sequence, old: list, indices: list[int]) -> None:
    """Every rank gets the π_old that the first step recorded on the rank that trained each of `indices`."""
    if ctx.world_size == 1:
        return
    sizes = [items[i].num_trainable for i in indices]
    buf = torch.zeros(sum(sizes), dtype=torch.float32)
    for i, part in zip(indices, torch.split(buf, sizes), strict=True):
        if old[i] is not None:
            part.copy_(old[i])
    ctx.all_reduce_sum(buf)
    for i, part in zip(indices, torch.split(buf, sizes), strict=True):
        old[i] = part.clone()
