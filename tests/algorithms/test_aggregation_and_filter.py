"""Aggregation modes and the |A| filter with redistribution, against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from loop_agents.algorithms import aggregate, filter_by_advantage, preset, trajectory_weights
from tests.algorithms.helpers import group, make_trajectory

# trajectory 0: 2 tokens, losses 1 and 3 (sum 4); trajectory 1: 4 tokens of loss 1 (sum 4); C = 4, L = 10
LOSSES = [torch.tensor([1.0, 3.0]), torch.tensor([1.0, 1.0, 1.0, 1.0])]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("loop", 4 / (2 * 4) + 4 / (4 * 4)),  # 0.75: token mean per trajectory, divided by constant C
        ("grpo", (2 + 1) / 2),  # 1.5: mean over trajectories of token means
        ("token_mean", 8 / 6),  # all tokens together
        ("dr_grpo", 8 / (4 * 10)),  # constant C·L
    ],
)
def test_aggregation_by_hand(mode, expected):
    assert float(aggregate(LOSSES, mode, constant_divisor=4, length_constant=10)) == pytest.approx(expected)


def test_loop_weights_do_not_depend_on_minibatch_fill():
    """LOOP divides by the constant M even when filtering leaves a short last minibatch."""
    full = trajectory_weights(torch.tensor([2, 4, 3, 1]), "loop", 4)
    short = trajectory_weights(torch.tensor([2, 4]), "loop", 4)
    assert torch.equal(full[:2], short)
    assert trajectory_weights(torch.tensor([0, 2]), "loop", 4).tolist() == [0.0, 1 / 8]


def _with_advantages(values):
    trajs = []
    for i, a in enumerate(values):
        t = make_trajectory(f"task{i}", 0.0, [1])
        t.advantage = a
        trajs.append(t)
    return trajs


def test_filter_by_hand_with_redistribution():
    trajs = _with_advantages([0.5, -0.005, 0.0, 0.3, -0.2, 0.001])
    kept, stats = filter_by_advantage(trajs, threshold=0.01, multiple_of=2, seed=0)
    # 3 above threshold, rounded up to 4: the next largest |A| (-0.005) comes back
    assert sorted(t.advantage for t in kept) == [-0.2, -0.005, 0.3, 0.5]
    assert stats["filter/num_readded"] == 1
    assert stats["adv_filtered_fraction"] == pytest.approx(2 / 6)
    assert stats["empirical_adv_filter_threshold"] == pytest.approx(0.001)
    kept1, _ = filter_by_advantage(trajs, threshold=0.01, multiple_of=1)
    assert sorted(t.advantage for t in kept1) == [-0.2, 0.3, 0.5]


def test_filter_is_deterministic_and_permutes():
    trajs = _with_advantages([0.1 * (i + 1) for i in range(8)])
    a, _ = filter_by_advantage(trajs, seed=3)
    b, _ = filter_by_advantage(trajs, seed=3)
    assert [t.task_id for t in a] == [t.task_id for t in b]
    assert len(a) == 8


def test_filter_pos_adv_only_and_all_zero():
    trajs = _with_advantages([0.5, -0.4, 0.2, 0.0])
    kept, _ = filter_by_advantage(trajs, pos_adv_only=True)
    assert sorted(t.advantage for t in kept) == [0.2, 0.5]
    zeros = _with_advantages([0.0] * 4)
    kept, stats = filter_by_advantage(zeros, multiple_of=2)
    # nothing carries signal: nothing is trained (the reference would step on 2 zero-advantage rollouts)
    assert kept == [] and stats["filter/num_above_threshold"] == 0 and stats["adv_filtered_fraction"] == 1.0


def test_filter_rejects_missing_advantages():
    with pytest.raises(ValueError, match="task0"):
        filter_by_advantage([make_trajectory("task0", 1.0, [1])])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_filter_rejects_non_finite_advantages_naming_the_task(bad):
    """A NaN compares false both ways: sorted by -|A|, [.005, nan, .5] kept only .005 before this check."""
    trajs = _with_advantages([0.005, bad, 0.5])
    with pytest.raises(ValueError, match=r"non-finite advantage .* for task 'task1'"):
        filter_by_advantage(trajs, threshold=0.01)
    with pytest.raises(ValueError, match="task1"):
        filter_by_advantage(trajs, threshold=0.01, pos_adv_only=True)


def test_presets_validate():
    for name in [
        "loop",
        "loop_per_turn",
        "loop_per_trajectory",
        "rloo",
        "grpo",
        "dr_grpo",
        "gspo",
        "reinforce_pp",
        "ppo_gae",
        "sft",
    ]:
        preset(name).validate()
    with pytest.raises(ValueError, match="unknown algorithm preset"):
        preset("nope")


def test_the_loops_filter_reads_pos_adv_only_from_the_config():
    """The driver's step (advantages, then LOOP's filter) honours `algorithm.pos_adv_only`."""
    from loop_agents.config.load import compose
    from loop_agents.orchestration.components import advantages_and_filter

    rewards = [1.0, 0.0, 0.0]  # leave-one-out advantages +1, -0.5, -0.5
    both, _ = advantages_and_filter(group("task0", rewards, [0, 1, 1]), compose(["experiment=demo"]), 1)
    config = compose(["experiment=demo", "algorithm.pos_adv_only=true"])
    positive, _ = advantages_and_filter(group("task0", rewards, [0, 1, 1]), config, 1)
    assert sorted(t.advantage for t in both) == [-0.5, -0.5, 1.0]
    assert [t.advantage for t in positive] == [1.0]
