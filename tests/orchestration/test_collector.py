"""Straggler cut and retries of the collector, on an episode function with controlled durations."""

from __future__ import annotations

import asyncio

from loop_agents.orchestration.collector import collect_groups, min_per_task
from loop_agents.rollout.trajectory import FinishReason, Trajectory


def _episode(durations: dict[tuple[str, int], float], failures: dict[tuple[str, int], int]):
    attempts: dict[tuple[str, int], int] = {}

    async def run(task_id: str, group_id: str, sample_index: int) -> Trajectory:
        key = (task_id, sample_index)
        attempts[key] = attempts.get(key, 0) + 1
        await asyncio.sleep(durations.get(key, 0.01))
        traj = Trajectory(task_id=task_id, group_id=group_id, sample_index=sample_index)
        traj.append_generation(
            [1] * int(100 * durations.get(key, 0.01)), [0.0] * int(100 * durations.get(key, 0.01))
        )
        if attempts[key] <= failures.get(key, 0):
            traj.finish_reason = FinishReason.ENV_ERROR
        return traj

    return run


def test_min_per_task_uses_python_rounding_like_the_reference() -> None:
    assert min_per_task(6, 0.75) == 4  # banker's rounding of 4.5
    assert min_per_task(2, 0.1) == 1


def test_collects_everything_in_group_order_without_a_cut() -> None:
    trajs, stats = asyncio.run(collect_groups(["a", "b"], 3, _episode({}, {}), concurrency=4))
    assert [(t.task_id, t.sample_index) for t in trajs] == [(t, s) for t in "ab" for s in range(3)]
    assert stats.finished == 6 and stats.cancelled == 0


def test_failed_episodes_are_retried_then_dropped_and_counted() -> None:
    failures = {("a", 0): 1, ("a", 1): 5}
    trajs, stats = asyncio.run(collect_groups(["a"], 3, _episode({}, failures), concurrency=2, retries=2))
    assert sorted(t.sample_index for t in trajs) == [0, 2]
    assert stats.retried == 3 and stats.failed == 1


def test_drop_inflight_cut_discards_the_long_episode() -> None:
    durations = {("a", 2): 2.0}
    trajs, stats = asyncio.run(
        collect_groups(
            ["a"],
            3,
            _episode(durations, {}),
            concurrency=3,
            rollouts_fraction=0.6,
            rollouts_per_task_fraction=0.5,
            cut_policy="drop_inflight",
        )
    )
    assert sorted(t.sample_index for t in trajs) == [0, 1]
    assert stats.cancelled == 1


def test_finish_started_cut_keeps_the_long_episode_but_starts_no_new_one() -> None:
    durations = {("a", 0): 0.5}
    trajs, stats = asyncio.run(
        collect_groups(
            ["a"],
            4,
            _episode(durations, {}),
            concurrency=2,
            rollouts_fraction=0.5,
            rollouts_per_task_fraction=0.5,
            cut_policy="finish_started",
        )
    )
    kept = sorted(t.sample_index for t in trajs)
    assert 0 in kept, "the long episode that had started is kept"
    assert stats.cancelled >= 1 and stats.started + stats.cancelled == 4


def test_episodes_in_flight_change_the_schedule_not_the_batch() -> None:
    """Without a cut, 1, 8 or 16 episodes at once hand the learner the same trajectories in the same order (group
    order), however their finishing order shuffles: `env.concurrency` is a speed setting, not a learning one."""
    tasks = [f"t{i}" for i in range(8)]
    # durations that make later-started episodes finish first, so finishing order differs across concurrencies
    durations = {(t, s): 0.001 * ((7 - i) * 6 + (5 - s)) for i, t in enumerate(tasks) for s in range(6)}
    batches = {}
    for concurrency in (1, 8, 16):
        trajs, stats = asyncio.run(collect_groups(tasks, 6, _episode(durations, {}), concurrency=concurrency))
        assert stats.finished == 48 and stats.cancelled == 0
        batches[concurrency] = [(t.task_id, t.sample_index, len(t.token_ids)) for t in trajs]
    assert batches[1] == batches[8] == batches[16]
    assert batches[1] == [(t, s, int(100 * durations[(t, s)])) for t in tasks for s in range(6)]


def test_retries_back_off_and_losses_are_counted_by_cause() -> None:
    """Each retry waits retry_backoff_s doubling (0.2 + 0.4 s for two), then before_retry; a dropped episode is
    counted under its cause (collect/lost_<cause>) with its last error."""
    waits: list[float] = []
    loop_started: list[float] = []

    async def episode(task_id, group_id, sample_index):
        loop_started.append(asyncio.get_running_loop().time())
        traj = Trajectory(task_id=task_id, group_id=group_id, sample_index=sample_index)
        traj.append_generation([1], [0.0])
        traj.finish_reason = FinishReason.ENV_ERROR
        traj.metadata["error"] = (
            "step timed out after 3.0 s" if sample_index == 0 else "OpenEnv server x is at capacity"
        )
        return traj

    async def before_retry(failed):
        waits.append(asyncio.get_running_loop().time())

    trajs, stats = asyncio.run(collect_groups(["a"], 2, episode, concurrency=1, retries=2, retry_backoff_s=0.2,
                                              before_retry=before_retry))  # fmt: skip
    assert trajs == [] and stats.failed == 2 and stats.retried == 4
    gaps = [loop_started[i + 1] - loop_started[i] for i in (0, 1)]  # the first episode's three attempts
    assert 0.2 <= gaps[0] < 0.35 and 0.4 <= gaps[1] < 0.55, gaps
    assert 1.2 <= stats.backoff_s < 1.6 and len(waits) == 4
    metrics = stats.as_metrics()
    assert (metrics["collect/lost_env_timeout"], metrics["collect/lost_env_capacity"]) == (1.0, 1.0)
    assert stats.last_errors == {
        "env_timeout": "step timed out after 3.0 s",
        "env_capacity": "OpenEnv server x is at capacity",
    }
