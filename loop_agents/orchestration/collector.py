"""Collect K rollouts for each task concurrently, with retries and a straggler cut.

The cut follows the reference (docs/reference-ml-loop.md §2.2): collection may stop once a fraction
`rollouts_fraction` of all rollouts is finished and every task has at least
max(1, round(K * rollouts_per_task_fraction)) finished rollouts. Two policies:
- `drop_inflight`: the reference's — in-flight episodes are cancelled and discarded. This biases the
  data toward short episodes (long ones are the ones still running).
- `finish_started` (default): no new episode starts after the cut, but every started one finishes, so
  the only episodes lost are ones that never began, which are not selected by length.
A failed episode (environment or inference error) is retried up to `retries` times, each retry after a wait that
doubles (`retry_backoff_s`, 2x, 4x, ...: a bounded total) and after `before_retry` (which waits, bounded, for a
restarting server); episodes that still fail are dropped and counted by cause (`loss_cause`: env_timeout,
env_capacity, env_error, inference_error), never passed to the learner. Whether the losses are too many is the
driver's call (`collect.max_lost_fraction`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from loop_agents.rollout.trajectory import FinishReason, Trajectory

EpisodeFn = Callable[[str, str, int], Awaitable[Trajectory]]  # (task_id, group_id, sample_index)
FAILED = (FinishReason.ENV_ERROR, FinishReason.INFERENCE_ERROR)
LOSS_CAUSES = ("env_timeout", "env_capacity", "env_error", "inference_error")


def loss_cause(traj: Trajectory) -> str:
    """The cause a failed episode is counted under: a timed-out environment call, a server at its session
    capacity, any other environment failure, or the inference server."""
    if traj.finish_reason == FinishReason.INFERENCE_ERROR:
        return "inference_error"
    error = str(traj.metadata.get("error", ""))
    # the runner's words for a reset/step/evaluate past its timeout, and the OpenEnv client's for a reply
    if "timed out after" in error or "no answer to" in error:
        return "env_timeout"
    if "capacity" in error:  # envs/openenv/client.py's words for a refused session
        return "env_capacity"
    return "env_error"


@dataclass
class CollectionStats:
    started: int = 0
    finished: int = 0
    retried: int = 0
    failed: int = 0  # episodes dropped after exhausting retries
    cancelled: int = 0  # episodes cut as stragglers (in flight or never started)
    cancelled_lengths: list[int] = field(default_factory=list)  # tokens of cut in-flight episodes, if known
    lost_causes: Counter = field(default_factory=Counter)  # cause (LOSS_CAUSES) -> dropped episodes
    last_errors: dict[str, str] = field(default_factory=dict)  # cause -> the last dropped episode's error
    backoff_s: float = 0.0  # seconds spent waiting before retries (backoff, summed over episodes)

    def lose(self, traj: Trajectory) -> None:
        """Count `traj` (failed after its last retry) as lost, under its cause."""
        cause = loss_cause(traj)
        self.failed += 1
        self.lost_causes[cause] += 1
        self.last_errors[cause] = str(traj.metadata.get("error", traj.finish_reason.value))

    @property
    def ended(self) -> int:
        """Episodes that will not run any more: finished, dropped after retries, or cut."""
        return self.finished + self.failed + self.cancelled

    def as_metrics(self) -> dict[str, float]:
        return {
            "collect/started": self.started,
            "collect/finished": self.finished,
            "collect/retried": self.retried,
            "collect/lost": self.failed,
            "collect/cancelled": self.cancelled,
            "collect/backoff_s": self.backoff_s,
            **{f"collect/lost_{cause}": float(self.lost_causes[cause]) for cause in LOSS_CAUSES},
        }


def min_per_task(k: int, fraction: float) -> int:
    """Minimum finished rollouts per task before the cut may happen (Python rounding, as the reference)."""
    return max(1, round(k * fraction))


async def collect_groups(
    task_ids: list[str],
    k: int,
    episode_fn: EpisodeFn,
    *,
    concurrency: int,
    retries: int = 2,
    rollouts_fraction: float = 1.0,
    rollouts_per_task_fraction: float = 1.0,
    cut_policy: str = "finish_started",
    group_prefix: str = "",
    before_retry: Callable[[Trajectory], Awaitable[None]] | None = None,
    stats: CollectionStats | None = None,
    retry_backoff_s: float = 0.0,
) -> tuple[list[Trajectory], CollectionStats]:
    """Run k episodes per task; returns finished trajectories (group order) and collection stats.

    `before_retry(failed)` is awaited before an episode is retried (e.g. wait for a restarting server), after
    `retry_backoff_s * 2**attempt` seconds (at most `retry_backoff_s * (2**retries - 1)` an episode).
    `stats`, if given, is filled in as episodes end (the worker reports it as progress while collecting).
    """
    stats = stats if stats is not None else CollectionStats()
    need_total = max(1, -(-len(task_ids) * k * rollouts_fraction // 1)) if rollouts_fraction < 1 else None
    need_each = min_per_task(k, rollouts_per_task_fraction)
    done_per_task = {t: 0 for t in task_ids}
    results: dict[tuple[int, int], Trajectory] = {}
    cut = asyncio.Event()
    slots = asyncio.Semaphore(concurrency)
    loop = asyncio.get_running_loop()

    def cut_reached() -> bool:
        if need_total is None and rollouts_per_task_fraction >= 1:
            return False
        total_ok = need_total is None or stats.finished >= need_total
        return total_ok and all(n >= need_each for n in done_per_task.values())

    async def one(task_index: int, task_id: str, sample_index: int) -> None:
        async with slots:
            if cut.is_set():
                stats.cancelled += 1
                return
            stats.started += 1
            group_id = f"{group_prefix}{task_id}"
            for attempt in range(retries + 1):
                traj = await episode_fn(task_id, group_id, sample_index)
                if traj.finish_reason not in FAILED:
                    break
                if attempt < retries:
                    stats.retried += 1
                    began = loop.time()
                    await asyncio.sleep(retry_backoff_s * 2**attempt)
                    if before_retry is not None:
                        await before_retry(traj)
                    stats.backoff_s += loop.time() - began
            else:
                stats.lose(traj)
                return
            traj.metadata.setdefault("attempts", attempt + 1)
            results[(task_index, sample_index)] = traj
            stats.finished += 1
            done_per_task[task_id] += 1
            if cut_reached():
                cut.set()

    tasks = [asyncio.create_task(one(i, task_id, s)) for i, task_id in enumerate(task_ids) for s in range(k)]
    if cut_policy == "drop_inflight":
        waiter = asyncio.create_task(cut.wait())
        pending = set(tasks)
        while pending and not cut.is_set():
            _, pending = await asyncio.wait(pending | {waiter}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(waiter)
        for task in pending:
            task.cancel()
            stats.cancelled += 1
        waiter.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    else:
        await asyncio.gather(*tasks)
    ordered = [results[key] for key in sorted(results)]
    return ordered, stats
