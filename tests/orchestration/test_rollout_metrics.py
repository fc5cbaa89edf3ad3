"""Rollout metrics of a batch, checked by hand: reward, success, finish reasons, and the episodes the policy's
own code ended (AppWorld's timeout / env_killed / output_too_large: scored 0, counted, not dropped)."""

from __future__ import annotations

import pytest

from loop_agents.orchestration.components import rollout_metrics
from loop_agents.rollout.trajectory import FinishReason, Trajectory


def _traj(reward: float, reason: FinishReason, ended: str | None = None) -> Trajectory:
    traj = Trajectory(task_id="t", group_id="t", sample_index=0, reward=reward, success=reward == 1.0)
    traj.finish_reason = reason
    if ended:
        traj.reward_details["episode_ended"] = ended
    return traj


def test_episodes_ended_by_the_policy_are_counted_beside_the_finish_reasons() -> None:
    batch = [
        _traj(1.0, FinishReason.DONE),
        _traj(0.0, FinishReason.DONE, "timeout"),
        _traj(0.0, FinishReason.DONE, "timeout"),
        _traj(0.0, FinishReason.DONE, "env_killed"),
        _traj(0.5, FinishReason.TURN_BUDGET),
    ]
    m = rollout_metrics(batch)
    assert m["rollout/count"] == 5 and m["rollout/reward_mean"] == pytest.approx(1.5 / 5)
    assert m["rollout/success_rate"] == pytest.approx(1 / 5)
    assert m["rollout/finish_done"] == pytest.approx(4 / 5) and m[
        "rollout/finish_turn_budget"
    ] == pytest.approx(1 / 5)
    assert m["rollout/ended_timeout"] == pytest.approx(2 / 5) and m[
        "rollout/ended_env_killed"
    ] == pytest.approx(1 / 5)
    assert not any(key.startswith("rollout/ended_") for key in rollout_metrics(batch[:1]))


def test_an_empty_batch_has_only_its_count() -> None:
    assert rollout_metrics([], prefix="eval") == {"eval/count": 0.0}
