"""PPO clip (token/turn/trajectory ratio), GSPO, k3 KL, value and SFT losses against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from loop_agents.algorithms import loop_clip_range
from loop_agents.algorithms.losses.gspo import gspo_losses
from loop_agents.algorithms.losses.kl import k3_kl
from loop_agents.algorithms.losses.ppo_clip import ppo_clip_losses
from loop_agents.algorithms.losses.ratio import segment_log_ratio
from loop_agents.algorithms.losses.sft import sft_losses
from loop_agents.algorithms.losses.value import value_losses

LO, HI = loop_clip_range(0.1)  # [1/1.1, 1.1]


def test_loop_clip_range():
    assert (LO, HI) == pytest.approx((0.9090909, 1.1))


def test_ppo_clip_by_hand():
    ratios = torch.tensor([1.2, 0.8, 1.05, 0.5], dtype=torch.float64)
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    loss, clipped = ppo_clip_losses(ratios.log(), adv, LO, HI)
    # 1.2·1 → capped at 1.1; 0.8·1 → 0.8 (lower clip inactive for A>0); 1.05·-1 → -1.05;
    # 0.5·-1 → capped at -1/1.1 (for A<0 the lower bound binds)
    assert loss.tolist() == pytest.approx([-1.1, -0.8, 1.05, 1 / 1.1])
    assert clipped.tolist() == [True, False, False, True]


def test_ppo_clip_equals_loop_g_form():
    """ml-loop writes min(r·A, g(A)), g(A) = (1+ε)A if A >= 0 else A/(1+ε); same values and gradients."""
    eps = 0.1
    gen = torch.Generator().manual_seed(0)
    log_ratio = (torch.randn(200, generator=gen, dtype=torch.float64) * 0.2).requires_grad_()
    adv = torch.randn(200, generator=gen, dtype=torch.float64)
    ours, _ = ppo_clip_losses(log_ratio, adv, *loop_clip_range(eps))
    g = torch.where(adv >= 0, (1 + eps) * adv, adv / (1 + eps))
    theirs = -torch.minimum(log_ratio.exp() * adv, g)
    assert torch.allclose(ours, theirs)
    (grad_ours,) = torch.autograd.grad(ours.sum(), log_ratio)
    (grad_theirs,) = torch.autograd.grad(theirs.sum(), log_ratio)
    assert torch.allclose(grad_ours, grad_theirs)


def test_clipped_tokens_get_no_gradient():
    log_ratio = torch.tensor([math.log(1.2), math.log(0.95)], requires_grad=True)
    loss, clipped = ppo_clip_losses(log_ratio, torch.tensor([1.0, 1.0]), LO, HI)
    loss.sum().backward()
    assert clipped.tolist() == [True, False]
    assert log_ratio.grad.tolist() == pytest.approx([0.0, -0.95])


def test_unclipped_is_importance_weighted_pg():
    loss, clipped = ppo_clip_losses(
        torch.tensor([math.log(2.0)]), torch.tensor([3.0]), LO, HI, clip_enabled=False
    )
    assert loss.tolist() == pytest.approx([-6.0]) and not clipped.any()


def test_segment_log_ratio_sum_and_mean():
    lr = torch.tensor([0.1, 0.2, 0.3, -0.1])
    seg = torch.tensor([0, 0, 1, 1])
    assert segment_log_ratio(lr, seg, 2).tolist() == pytest.approx([0.3, 0.3, 0.2, 0.2])
    assert segment_log_ratio(lr, seg, 2, mean=True).tolist() == pytest.approx([0.15, 0.15, 0.1, 0.1])


def test_turn_level_ratio_clips_the_whole_turn():
    # turn 0: log ratios 0.05 + 0.06 → r = e^0.11 = 1.116 > 1.1 → both tokens clipped at A = 1
    # turn 1: log ratio 0.02 → r = e^0.02, inside the range
    lr = segment_log_ratio(torch.tensor([0.05, 0.06, 0.02]), torch.tensor([0, 0, 1]), 2)
    loss, clipped = ppo_clip_losses(lr, torch.ones(3), LO, HI)
    assert loss.tolist() == pytest.approx([-1.1, -1.1, -math.exp(0.02)])
    assert clipped.tolist() == [True, True, False]


def test_gspo_by_hand():
    logprobs = torch.tensor([0.1, 0.2, 0.3, -0.1])
    old = torch.zeros(4)
    adv = torch.tensor([2.0, 2.0, -1.0, -1.0])
    loss, clipped = gspo_losses(logprobs, old, adv, torch.tensor([0, 0, 1, 1]), 2, 1 - 3e-4, 1 + 4e-4)
    # seq 0: s = e^0.15 = 1.1618 → capped at 1.0004 (A > 0); seq 1: s = e^0.1 = 1.10517, A < 0 → unclipped
    assert loss.tolist() == pytest.approx([-2.0008, -2.0008, math.exp(0.1), math.exp(0.1)], rel=1e-6)
    assert clipped.tolist() == [True, True, False, False]


def test_k3_by_hand():
    values = k3_kl(torch.tensor([0.0, math.log(2.0), -math.log(2.0)], dtype=torch.float64))
    assert values.tolist() == pytest.approx([0.0, 1 - math.log(2.0), -0.5 + math.log(2.0)])


def test_value_loss_by_hand():
    assert value_losses(torch.tensor([1.0, 2.0]), torch.zeros(2)).tolist() == pytest.approx([0.5, 2.0])
    # v = 1 moved from old 0 towards R = 1, clip 0.2 → clipped v = 0.2 → 0.5 · 0.64
    clipped = value_losses(torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([0.0]), clip=0.2)
    assert clipped.tolist() == pytest.approx([0.32])


def test_sft_is_nll():
    assert sft_losses(torch.tensor([-0.5, -2.0])).tolist() == [0.5, 2.0]
