"""The task sampler is deterministic, covers the split, and resumes exactly from its state."""

from __future__ import annotations

import pytest

from loop_agents.orchestration.task_sampler import SamplerState, TaskSampler


def test_epochs_cover_the_split_without_repeats() -> None:
    ids = [f"t{i}" for i in range(10)]
    sampler = TaskSampler(ids, seed=3)
    first_epoch = sampler.sample(4) + sampler.sample(4) + sampler.sample(2)
    assert sorted(first_epoch) == sorted(ids)
    assert sampler.state == SamplerState(epoch=1, position=0)


def test_resume_from_state_draws_the_same_tasks() -> None:
    ids = [f"t{i}" for i in range(7)]
    straight = TaskSampler(ids, seed=1)
    draws = [straight.sample(3) for _ in range(5)]
    first = TaskSampler(ids, seed=1)
    early = [first.sample(3) for _ in range(2)]
    resumed = TaskSampler(ids, seed=1, state=SamplerState(**vars(first.state)))
    assert early + [resumed.sample(3) for _ in range(3)] == draws


def test_empty_split_is_rejected() -> None:
    with pytest.raises(ValueError, match="training split is empty"):
        TaskSampler([], seed=0)
