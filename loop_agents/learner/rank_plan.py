"""Which micro-batches this rank runs for a set of trajectories, and which of them share a prefix.

Every rank derives the same plan from the same global list: trajectories are balanced over ranks by tokens
(batching.balanced_assignment), then packed into micro-batches of <= `budget` tokens, prefix-aware when
`mode` is not "off" (prefix_sharing.prefix_micro_batches). Under FSDP with several ranks a micro-step shares
its prefix only when every rank's micro-batch of that step does, so all ranks make the same number of
decoder passes and their all-gathers stay in lockstep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loop_agents.learner.batching import balanced_assignment, micro_batches
from loop_agents.learner.prefix_sharing import prefix_micro_batches, shareable_prefix


def rank_plan(
    token_ids: Sequence[Sequence[int]],
    indices: list[int],
    *,
    world_size: int,
    rank: int,
    lockstep: bool,
    mode: str,
    min_tokens: int,
    budget: int,
    log_once: Callable[[str, str], None],
) -> tuple[list[list[int]], list[int]]:
    """This rank's micro-batches of `indices`, and per micro-step the shared prefix length (0 = unshared).

    The prefix list is as long as the most micro-steps any rank runs (the rest are dummies). With `lockstep`
    (FSDP, several ranks) a step shares only if every rank's micro-batch of that step does; a dummy of a
    shared step gets prefix 1 (the learner's shared dummy batch). `log_once(key, message)` reports a fallback
    to unshared computation once per key."""
    chosen = set(indices)
    dense = [len(token_ids[i]) if i in chosen else 0 for i in range(max(indices) + 1)] if indices else []
    per_rank = balanced_assignment(indices, dense, world_size)
    if mode == "off":
        plans = [micro_batches(r, dense, budget) for r in per_rank]
        return plans[rank], [0] * max(len(p) for p in plans)
    tokens = {i: token_ids[i] for i in indices}
    plans = [prefix_micro_batches(r, tokens, budget, mode, min_tokens) for r in per_rank]
    prefixes = [[shareable_prefix([tokens[i] for i in mb], mode, min_tokens) for mb in p] for p in plans]
    for plan, plan_prefixes in zip(plans, prefixes, strict=True):
        for mb, prefix in zip(plan, plan_prefixes, strict=True):
            if len(mb) > 1 and prefix == 0:
                log_once(
                    "unshared",
                    f"learner.share_prefix={mode}: a micro-batch of {len(mb)} trajectories shares fewer than "
                    f"{1 if mode == 'on' else min_tokens} leading tokens (lengths "
                    f"{[len(tokens[i]) for i in mb]}): computed unshared",
                )
    for r, plan_prefixes in enumerate(prefixes):
        if not any(plan_prefixes):  # nothing shared on this rank: the plain plan, summation order included
            plans[r] = micro_batches(per_rank[r], dense, budget)
            prefixes[r] = [0] * len(plans[r])
    steps = max(len(p) for p in plans)
    mine = prefixes[rank] + [0] * (steps - len(plans[rank]))
    if not lockstep:
        return plans[rank], mine
    shared_steps = []
    for k in range(steps):
        shared = all(p[k] > 0 for p in prefixes if k < len(p))
        if not shared and any(k < len(p) and p[k] > 0 for p in prefixes):
            log_once(
                "lockstep",
                "learner.share_prefix: a step whose micro-batch is unshared on one rank runs unshared on all ranks",
            )
        shared_steps.append((mine[k] if k < len(plans[rank]) else 1) if shared else 0)
    return plans[rank], shared_steps
