"""Asynchronous LOOP's staleness bound: how many adapter versions behind the learner a sample may be.

The learner of iteration i holds policy i-1 (the adapter published after iteration i-1). A token sampled by
adapter v is i-1-v versions stale; a trajectory is as stale as its oldest token (partial rollouts: an episode in
flight when a new adapter lands continues on it, so its later turns are fresher). `algorithm.max_staleness=k`
bounds that: the driver submits iteration i+k's collection while iteration i is learned (k = 0: the synchronous
loop; k = 1: the former `rollout.async_one_step_off`), so by construction no sample is more than k versions
behind; a group that still is (a resubmitted collection, a resumed run) is dropped whole and counted
(`async/dropped_groups`), never trained on: LOOP's leave-one-out baseline needs the whole group.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from omegaconf import DictConfig

from loop_agents.rollout.trajectory import Trajectory

DEPRECATED_ASYNC = (
    "[config] rollout.async_one_step_off=true is deprecated: it runs as algorithm.max_staleness=1 "
    "(the asynchronous loop with at most one adapter version of staleness)"
)


def max_staleness(cfg: DictConfig) -> int:
    """`algorithm.max_staleness`, or 1 where only the deprecated `rollout.async_one_step_off` asks for async."""
    k = int(cfg.algorithm.max_staleness)
    return max(k, 1) if cfg.rollout.async_one_step_off else k


def staleness(traj: Trajectory, iteration: int) -> int | None:
    """Versions between the learner of `iteration` (policy iteration-1) and the trajectory's oldest token."""
    oldest = traj.oldest_version()
    return None if oldest is None else iteration - 1 - oldest


def drop_stale_groups(
    rollouts: list[Trajectory], iteration: int, bound: int
) -> tuple[list[Trajectory], dict[str, float]]:
    """The rollouts of every group whose samples are all within `bound` versions, and the staleness metrics:
    a histogram of per-token staleness (`async/staleness_tokens_<s>`), the share of episodes sampled by more than
    one adapter version (`async/mixed_version_share`), the oldest sample's staleness and the dropped groups."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in rollouts:
        groups[traj.group_id].append(traj)
    kept, dropped_groups, dropped_episodes = [], 0, 0
    for members in groups.values():
        stale = [staleness(t, iteration) for t in members]
        if any(s is not None and s > bound for s in stale):
            dropped_groups += 1
            dropped_episodes += len(members)
        else:
            kept.extend(members)
    histogram: Counter = Counter()
    for traj in rollouts:
        for version in traj.token_versions():
            if version is not None:
                histogram[iteration - 1 - version] += 1
    mixed = sum(len({v for v in t.token_versions() if v is not None}) > 1 for t in rollouts)
    stalest = [s for s in (staleness(t, iteration) for t in rollouts) if s is not None]
    metrics = {
        "async/max_staleness": float(bound),
        "async/dropped_groups": float(dropped_groups),
        "async/dropped_episodes": float(dropped_episodes),
        "async/mixed_version_share": mixed / len(rollouts) if rollouts else 0.0,
        **{f"async/staleness_tokens_{s}": float(n) for s, n in sorted(histogram.items())},
    }
    if stalest:
        metrics["async/staleness_max"] = float(max(stalest))
    return kept, metrics


def resampled_in_flight(start_iteration: int, bound: int, iterations: int, checkpoint) -> dict[str, float]:
    """A resumed asynchronous run: the collections that were in flight when the run stopped (iterations
    start+1 .. start+k, submitted before checkpoint `start` was saved) are sampled again, from the checkpoint's
    adapter and with the tasks the checkpoint's sampler state draws, so no group is lost or trained twice.
    Says so once and returns the count for the first row after the resume ({} when nothing was in flight)."""
    in_flight = min(bound, iterations - start_iteration) if checkpoint is not None else 0
    if in_flight <= 0:
        return {}
    last = start_iteration + in_flight
    span = f"{start_iteration + 1}" if in_flight == 1 else f"{start_iteration + 1}-{last}"
    print(
        f"[resume] asynchronous (max_staleness={bound}): the collection(s) of iteration(s) {span} were in flight "
        f"when the run stopped; sampling them again from checkpoint-{start_iteration} (same tasks), none kept",
        flush=True,
    )
    return {"resume/resampled_iterations": float(in_flight)}
