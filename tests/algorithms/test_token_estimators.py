"""REINFORCE++ and GAE against hand-computed values, incl. the AgentGym-RL masked-reward regression."""

from __future__ import annotations

import math

import pytest
import torch

from loop_agents.algorithms import AlgorithmConfig, compute_advantages
from loop_agents.algorithms.advantages.gae import gae_advantages
from loop_agents.algorithms.advantages.reinforce_pp import discounted_returns
from loop_agents.algorithms.token_placement import token_rewards, turn_ids
from tests.algorithms.helpers import make_trajectory

# prompt | act act | obs | act | final obs   (ends on an observation token)
MASK = [0, 1, 1, 0, 1, 0]


def test_reward_lands_on_last_trainable_token_not_on_final_observation():
    traj = make_trajectory("t", 1.0, MASK)
    assert token_rewards(traj).tolist() == [0, 0, 0, 0, 1.0, 0]


def test_turn_ids():
    assert turn_ids(torch.tensor([0, 1, 1, 0, 0, 1, 1, 0])).tolist() == [-1, 0, 0, -1, -1, 1, 1, -1]


def test_discounted_returns_skip_observations():
    rewards = torch.tensor([0, 0, 0, 0, 1.0, 0], dtype=torch.float64)
    mask = torch.tensor(MASK)
    assert discounted_returns(rewards, mask, 1.0).tolist() == [0, 1, 1, 0, 1, 0]
    # γ = 0.5: observations consume no discount: 1 at t=4, 0.5 at t=2, 0.25 at t=1
    assert discounted_returns(rewards, mask, 0.5).tolist() == [0, 0.25, 0.5, 0, 1, 0]


def test_reinforce_pp_whitens_over_the_batch_and_keeps_the_outcome_signal():
    trajs = [
        make_trajectory("a", 1.0, MASK, group_id="g", index=0),
        make_trajectory("a", 0.0, [0, 1, 0, 1, 1, 0], group_id="g", index=1),
    ]
    result = compute_advantages(trajs, AlgorithmConfig(advantage_estimator="reinforce_pp"))
    # trainable returns: [1, 1, 1] and [0, 0, 0]; mean 0.5, unbiased std sqrt(6 * 0.25 / 5)
    z = 0.5 / math.sqrt(0.3)
    assert result.token_advantages[0].tolist() == pytest.approx([0, z, z, 0, z, 0], abs=1e-5)
    assert result.token_advantages[1].tolist() == pytest.approx([0, -z, 0, -z, -z, 0], abs=1e-5)
    assert trajs[0].advantage == pytest.approx(z, abs=1e-5)


def test_agentgym_bug_regression_reward_on_masked_token_would_vanish():
    """If the reward sat on the final (masked) observation token, the returns would all be zero."""
    buggy = torch.tensor([0, 0, 0, 0, 0, 1.0], dtype=torch.float64)  # AgentGym-RL's placement
    assert discounted_returns(buggy, torch.tensor(MASK), 1.0).abs().sum() == 0
    ours = token_rewards(make_trajectory("t", 1.0, MASK)).double()
    assert discounted_returns(ours, torch.tensor(MASK), 1.0).abs().sum() == 3


def test_gae_gamma_lambda_one_is_reward_minus_value():
    rewards = torch.tensor([0, 0, 0, 0, 1.0, 0], dtype=torch.float64)
    values = torch.tensor([9, 0.2, 0.4, 9, 0.6, 9], dtype=torch.float64)  # 9 on masked tokens: never used
    adv, ret = gae_advantages(rewards, values, torch.tensor(MASK), 1.0, 1.0)
    assert adv.tolist() == pytest.approx([0, 0.8, 0.6, 0, 0.4, 0])
    assert ret.tolist() == pytest.approx([0, 1, 1, 0, 1, 0])


def test_gae_by_hand_gamma_09_lambda_05():
    rewards = torch.tensor([0, 0, 0, 0, 1.0, 0], dtype=torch.float64)
    values = torch.tensor([9, 0.2, 0.4, 9, 0.6, 9], dtype=torch.float64)
    adv, ret = gae_advantages(rewards, values, torch.tensor(MASK), 0.9, 0.5)
    # δ4 = 1 - 0.6 = 0.4; δ2 = 0.9*0.6 - 0.4 = 0.14, A2 = 0.14 + 0.45*0.4 = 0.32;
    # δ1 = 0.9*0.4 - 0.2 = 0.16, A1 = 0.16 + 0.45*0.32 = 0.304
    assert adv.tolist() == pytest.approx([0, 0.304, 0.32, 0, 0.4, 0])
    assert ret.tolist() == pytest.approx([0, 0.504, 0.72, 0, 1.0, 0])


def test_gae_through_compute_advantages_unwhitened():
    trajs = [make_trajectory("a", 1.0, MASK)]
    values = [torch.tensor([9, 0.2, 0.4, 9, 0.6, 9])]
    result = compute_advantages(
        trajs, AlgorithmConfig(advantage_estimator="gae", whiten_gae=False), values=values
    )
    assert result.token_advantages[0].tolist() == pytest.approx([0, 0.8, 0.6, 0, 0.4, 0], abs=1e-6)
    assert result.returns[0].tolist() == pytest.approx([0, 1, 1, 0, 1, 0], abs=1e-6)


def test_gae_requires_values():
    with pytest.raises(ValueError, match="value"):
        compute_advantages([make_trajectory("a", 1.0, MASK)], AlgorithmConfig(advantage_estimator="gae"))


def test_token_estimator_rejects_trajectory_without_trainable_token():
    trajs = [make_trajectory("no_actions_task", 1.0, [0, 0]), make_trajectory("b", 0.0, MASK)]
    with pytest.raises(ValueError, match="no_actions_task"):
        compute_advantages(trajs, AlgorithmConfig(advantage_estimator="reinforce_pp"))
