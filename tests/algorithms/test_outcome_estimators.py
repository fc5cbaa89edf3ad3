"""Outcome estimators against hand-computed values (loo, rloo, grpo, dr_grpo)."""

from __future__ import annotations

import math

import pytest
import torch

from loop_agents.algorithms import AlgorithmConfig, compute_advantages
from loop_agents.algorithms.advantages.dr_grpo import dr_grpo_advantages
from loop_agents.algorithms.advantages.grpo import grpo_advantages
from loop_agents.algorithms.advantages.loo import leave_one_out_advantages
from loop_agents.algorithms.advantages.rloo import rloo_advantages
from tests.algorithms.helpers import group, make_trajectory

REWARDS = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)


def test_leave_one_out_by_hand():
    # A_0 = 1 - (0 + 0.5)/2 = 0.75; A_1 = 0 - (1 + 0.5)/2 = -0.75; A_2 = 0.5 - (1 + 0)/2 = 0
    assert leave_one_out_advantages(REWARDS).tolist() == pytest.approx([0.75, -0.75, 0.0])


def test_leave_one_out_identity_k_over_k_minus_1():
    rewards = torch.tensor([0.3, 0.9, 0.1, 0.4, 1.0, 0.0], dtype=torch.float64)
    k = rewards.numel()
    expected = k / (k - 1) * (rewards - rewards.mean())
    assert torch.allclose(leave_one_out_advantages(rewards), expected)
    assert torch.equal(rloo_advantages(rewards), leave_one_out_advantages(rewards))


def test_leave_one_out_std_normalised_uses_population_std():
    # population std of [1, 0, 0.5] = sqrt(1/6)
    expected = [0.75 / math.sqrt(1 / 6), -0.75 / math.sqrt(1 / 6), 0.0]
    assert leave_one_out_advantages(REWARDS, normalize_std=True).tolist() == pytest.approx(expected)


def test_grpo_by_hand():
    # mean 0.5, unbiased std sqrt((0.25 + 0.25 + 0) / 2) = 0.5
    assert grpo_advantages(REWARDS).tolist() == pytest.approx([1.0, -1.0, 0.0], abs=1e-5)
    assert grpo_advantages(REWARDS, normalize_std=False).tolist() == pytest.approx([0.5, -0.5, 0.0])


def test_dr_grpo_by_hand():
    assert dr_grpo_advantages(REWARDS).tolist() == pytest.approx([0.5, -0.5, 0.0])


def test_outcome_advantage_broadcast_only_to_trainable_tokens_of_several_turns():
    # prompt, turn 1 (2 tokens), observation, turn 2 (2 tokens), final observation: ends on an observation
    mask = [0, 1, 1, 0, 0, 1, 1, 0]
    trajs = group("t1", [1.0, 0.0, 0.5], mask)
    result = compute_advantages(trajs, AlgorithmConfig(advantage_estimator="loo"))
    m = torch.tensor(mask, dtype=torch.float32)
    for traj, adv, scalar in zip(trajs, result.token_advantages, [0.75, -0.75, 0.0], strict=True):
        assert traj.advantage == pytest.approx(scalar)
        assert torch.allclose(adv, m * scalar)


def test_groups_are_independent_and_zero_variance_groups_counted():
    trajs = (
        group("a", [1.0, 0.0], [0, 1]) + group("b", [0.5, 0.5, 0.5], [0, 1, 1]) + group("c", [0.0, 0.6], [1])
    )
    result = compute_advantages(trajs, AlgorithmConfig(advantage_estimator="loo"))
    assert [t.advantage for t in trajs] == pytest.approx([1.0, -1.0, 0.0, 0.0, 0.0, -0.6, 0.6])
    assert all(t.advantage == 0.0 for t in trajs[2:5])  # exact zeros, no fp residue
    assert result.stats["adv/zero_variance_groups"] == 1
    assert result.stats["adv/num_groups"] == 3


@pytest.mark.parametrize("estimator", ["loo", "rloo", "grpo", "dr_grpo"])
def test_k_equals_one_is_rejected_naming_the_task(estimator):
    trajs = group("a", [1.0, 0.0], [1]) + [make_trajectory("lonely_task", 1.0, [1])]
    with pytest.raises(ValueError, match="lonely_task.*K=1"):
        compute_advantages(trajs, AlgorithmConfig(advantage_estimator=estimator))


def test_k_equals_one_can_be_zeroed_and_counted():
    trajs = group("a", [1.0, 0.0], [1]) + [make_trajectory("lonely", 1.0, [1])]
    result = compute_advantages(trajs, AlgorithmConfig(singleton_groups="zero"))
    assert trajs[2].advantage == 0.0
    assert result.stats["adv/singleton_groups"] == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_reward_rejected_with_task_id(bad):
    trajs = group("fine", [1.0, 0.0], [1]) + [
        make_trajectory("broken_task", bad, [1], group_id="g"),
        make_trajectory("broken_task", 0.0, [1], group_id="g"),
    ]
    with pytest.raises(ValueError, match="broken_task"):
        compute_advantages(trajs, AlgorithmConfig())


def test_empty_batch_rejected():
    with pytest.raises(ValueError, match="empty"):
        compute_advantages([], AlgorithmConfig())


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="advantage_estimator"):
        compute_advantages(group("a", [1.0, 0.0], [1]), AlgorithmConfig(advantage_estimator="ppo"))
