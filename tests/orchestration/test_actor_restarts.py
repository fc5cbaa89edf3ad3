"""The restart budget of a run's Ray actors: every restart is counted per role and in total, and the one past
`run.max_actor_restarts` raises with a message naming the key (the real restarts: test_fault_matrix.py)."""

from __future__ import annotations

import pytest

from loop_agents.config.load import compose
from loop_agents.orchestration.cluster import ActorRestartsExhausted, Cluster


def _cluster(max_restarts: int) -> Cluster:
    cluster = Cluster.__new__(Cluster)  # the budget alone: no Ray, no servers
    cluster.max_actor_restarts = max_restarts
    cluster.restarts = {"rollout_worker": 0, "inference": 0, "evaluator": 0}
    return cluster


def test_restarts_are_counted_and_bounded() -> None:
    cluster = _cluster(2)
    died = RuntimeError("killed")
    assert cluster._spend_restart("rollout_worker", "rollout worker", died) == 1
    assert cluster._spend_restart("inference", "inference actor 0", died) == 2
    with pytest.raises(ActorRestartsExhausted) as raised:
        cluster._spend_restart("evaluator", "evaluator", died)
    assert str(raised.value) == (
        "evaluator died (RuntimeError) and this launch already restarted 2 actors (run.max_actor_restarts=2)"
    )
    assert cluster.restart_metrics() == {
        "cluster/actor_restarts": 2,
        "cluster/restarts_rollout_worker": 1,
        "cluster/restarts_inference": 1,
        "cluster/restarts_evaluator": 0,
    }


def test_zero_restarts_means_the_first_death_ends_the_launch() -> None:
    with pytest.raises(ActorRestartsExhausted):
        _cluster(0)._spend_restart("rollout_worker", "rollout worker", RuntimeError("killed"))


def test_the_keys_are_in_the_schema_with_their_defaults() -> None:
    cfg = compose(["experiment=demo"])
    assert cfg.run.max_actor_restarts == 10 and cfg.run.auto_resume_attempts == 3
