"""LOOP's advantage filter with redistribution (ml-loop `_filter_rollouts`; docs/reference-ml-loop.md §2.4).

Rollouts are sorted by |A| (by A with `pos_adv_only`), those with |A| >= threshold are kept, and
the kept count is rounded UP to a multiple of `multiple_of` (the world size, or the global
minibatch size to keep every minibatch full), capped at the largest such multiple <= N. The few
below-threshold rollouts that come back carry |A| ~ 0 and, with the constant-divisor aggregation,
change the gradient by at most their tiny advantage. The kept set is then permuted with a seeded
generator (same order on every rank).

When no rollout reaches the threshold nothing is kept (the reference keeps `multiple_of` anyway):
an optimizer step on zero advantages has no gradient yet still moves the weights through Adam's
momentum and weight decay, and advances the LR schedule for nothing.
"""

from __future__ import annotations

import math

import torch

from loop_agents.rollout.trajectory import Trajectory


def filter_by_advantage(
    trajectories: list[Trajectory],
    threshold: float = 0.01,
    multiple_of: int = 1,
    pos_adv_only: bool = False,
    seed: int = 0,
) -> tuple[list[Trajectory], dict[str, float]]:
    """Keep rollouts with |A| >= threshold, padded to a multiple of `multiple_of`; return (kept, stats)."""
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be >= 1, got {multiple_of}")
    missing = [t.task_id for t in trajectories if t.advantage is None]
    if missing:
        raise ValueError(f"filter_by_advantage: no advantage computed for tasks {missing[:5]}")
    # A NaN compares false both ways, so the sort and the threshold would keep or drop it by position.
    non_finite = [(t.task_id, t.advantage) for t in trajectories if not math.isfinite(t.advantage)]
    if non_finite:
        task_id, value = non_finite[0]
        raise ValueError(
            f"filter_by_advantage: non-finite advantage {value} for task {task_id!r} "
            f"({len(non_finite)} rollout(s)); check its rewards and the estimator's std"
        )
    n = len(trajectories)
    if n < multiple_of:
        raise ValueError(f"{n} trajectories cannot be split into multiples of {multiple_of}")

    def score(t: Trajectory) -> float:
        return t.advantage if pos_adv_only else abs(t.advantage)

    # Stable sort, so ties keep their input order and the result is deterministic.
    order = sorted(range(n), key=lambda i: -score(trajectories[i]))
    n_above = sum(1 for t in trajectories if score(t) >= threshold)
    n_keep = min(math.ceil(n_above / multiple_of) * multiple_of, (n // multiple_of) * multiple_of)
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n_keep, generator=generator).tolist()
    kept = [trajectories[order[p]] for p in perm]
    first_dropped = score(trajectories[order[n_keep]]) if n_keep < n else 0.0
    stats = {
        "filter/num_in": float(n),
        "filter/num_kept": float(n_keep),
        "filter/num_above_threshold": float(n_above),
        "filter/num_readded": float(max(0, n_keep - n_above)),
        "adv_filtered_fraction": 1.0 - n_keep / n,
        "empirical_adv_filter_threshold": float(first_dropped),
    }
    return kept, stats
