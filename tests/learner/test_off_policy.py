"""The off-policy (asynchronous LOOP) objective: reference.py's decoupled form on hand-computed values, and the
real learner against it on the tiny model (same batch, same seed → same losses, grad norms and LoRA weights, the
tolerances of test_oracle.py).

Hand-computed case (ε = 0.1, A = 0.5, g(A) = 0.55; three trainable tokens after one prompt token):
    log π_θ    = [0, -0.9, -2.3, -0.5]      log π_prox = [0, -1.0, -2.0, -0.5]     log π_behav = [0, -1.2, -1.5, -0.5]
    r_t        = e^{0.1} = 1.105171, e^{-0.3} = 0.740818, 1
    min(rA, g) = 0.55 (clipped: 0.552585 > 0.55), 0.370409, 0.5
    w_t        = e^{0.2} = 1.221403, e^{-0.5} = 0.606531, 1
    L          = -(0.55·1.221403 + 0.370409·0.606531 + 0.5·1) / 3 = -(0.671772 + 0.224665 + 0.5) / 3 = -0.465479
    cap 1.0:   w_1 = 1 → L = -(0.55 + 0.224665 + 0.5) / 3 = -0.424888
    ∂L/∂log π_θ = [0, 0 (clipped), -w·r·A/3 = -0.074888, -0.166667]
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from loop_agents import reference as ref
from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from tests.learner.batch import learner_config, loop_algorithm, make_batch, reference_config

MASK = torch.tensor([False, True, True, True])
PROX = torch.tensor([0.0, -1.0, -2.0, -0.5])
BEHAV = torch.tensor([0.0, -1.2, -1.5, -0.5])
CAP = (
    1.3  # the learner test's cap: about a sixth of its tokens have π_prox/π_behav above it (e^{0.4·U(-1,1)})
)


def _theta() -> torch.Tensor:
    return torch.tensor([0.0, -0.9, -2.3, -0.5], requires_grad=True)


def test_decoupled_loss_on_hand_computed_values() -> None:
    theta = _theta()
    loss, clipped = ref.rollout_loss(theta, PROX, MASK, 0.5, 0.1, BEHAV)
    assert float(loss.detach()) == pytest.approx(-0.465479, abs=1e-6)
    assert int(clipped) == 1
    loss.backward()
    assert theta.grad.tolist() == pytest.approx([0.0, 0.0, -0.074888, -0.166667], abs=1e-6)
    capped, _ = ref.rollout_loss(_theta(), PROX, MASK, 0.5, 0.1, BEHAV, behaviour_weight_cap=1.0)
    assert float(capped) == pytest.approx(-0.424888, abs=1e-6)


def test_decoupled_loss_is_ppo_when_the_sampler_was_the_proximal_policy() -> None:
    on_policy, _ = ref.rollout_loss(_theta(), PROX, MASK, -0.7, 0.1)
    decoupled, _ = ref.rollout_loss(_theta(), PROX, MASK, -0.7, 0.1, PROX.clone())
    assert float(decoupled) == pytest.approx(float(on_policy), abs=1e-7)
    # by hand, A = -0.7: g = -0.7/1.1 = -0.636364; min(r·A, g) = -0.773620, -0.636364, -0.7 → L = 0.703328
    assert float(on_policy) == pytest.approx(0.703328, abs=1e-6)


def test_behaviour_weight_has_no_gradient() -> None:
    prox = PROX.clone().requires_grad_(True)
    weights = ref.behaviour_weights(prox, BEHAV, None)
    assert not weights.requires_grad
    assert weights[1:].tolist() == pytest.approx([math.exp(0.2), math.exp(-0.5), 1.0], abs=1e-6)


def _off_policy_batch(model_dir: str):
    """make_batch(seed=0) with behaviour log-probs = the start policy's own ± up to 0.4 nats per token (seeded):
    the sampler of an older adapter, so π_prox/π_behav moves around 1 and the cap bites on some tokens."""
    batch = make_batch(seed=0)
    base = ref.load_lora_policy(model_dir, reference_config())  # LoRA B = 0: the start policy
    rng = random.Random(7)
    with torch.no_grad():
        for traj in batch:
            own = ref.token_logprobs(base, traj.token_ids).tolist()
            traj.sample_logprobs = [
                lp + rng.uniform(-0.4, 0.4) if m else 0.0 for lp, m in zip(own, traj.loss_mask, strict=True)
            ]
    return batch


@pytest.fixture(scope="module")
def off_policy_reference(tiny_model_dir):
    cfg = reference_config()
    cfg.behaviour_weight_cap = CAP
    batch = _off_policy_batch(tiny_model_dir)
    model = ref.load_lora_policy(tiny_model_dir, cfg)
    optimizer = ref.make_optimizer(model, cfg)
    rollouts = [ref.Rollout(t.group_id, t.token_ids, t.loss_mask, t.reward, t.sample_logprobs) for t in batch]
    history = ref.loop_iteration(model, optimizer, rollouts, cfg)
    return batch, {"peft_model." + k: v for k, v in ref.lora_state(model).items()}, history


def test_learner_matches_the_off_policy_reference(tiny_model_dir, off_policy_reference) -> None:
    batch, ref_state, ref_history = off_policy_reference
    algorithm = loop_algorithm()
    algorithm.behaviour_weight, algorithm.behaviour_weight_cap = "decoupled", CAP
    compute_advantages(batch, algorithm)
    learner = Learner(learner_config(tiny_model_dir), algorithm)
    learner.train_iteration(batch)
    assert len(learner.step_history) == len(ref_history) == 6
    for ours, theirs in zip(learner.step_history, ref_history, strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-4, abs=1e-6)
        assert ours["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=1e-4)
        assert ours["clip_fraction"] == pytest.approx(theirs["clip_fraction"])
        # the token mean of the applied w_t = min(π_prox/π_behav, cap): the samples' ±0.4 nats move it off 1
        assert ours["behaviour_weight"] == pytest.approx(theirs["behaviour_weight"], rel=1e-4)
        assert ours["behaviour_weight"] != pytest.approx(1.0, abs=1e-3)
        assert 0.0 <= ours["behaviour_far_fraction"] <= 1.0
    state = learner.trainable_state()
    for name, tensor in ref_state.items():
        assert torch.allclose(state[name], tensor, atol=2e-4, rtol=0), name


def test_off_policy_reference_differs_from_the_on_policy_one(tiny_model_dir, off_policy_reference) -> None:
    """The behaviour weights change the update (so the comparison above could fail on a learner ignoring them)."""
    batch, _, off_history = off_policy_reference
    cfg = reference_config()
    model = ref.load_lora_policy(tiny_model_dir, cfg)
    rollouts = [ref.Rollout(t.group_id, t.token_ids, t.loss_mask, t.reward) for t in batch]
    on_history = ref.loop_iteration(model, ref.make_optimizer(model, cfg), rollouts, cfg)
    assert abs(on_history[0]["loss"] - off_history[0]["loss"]) > 1e-3 * abs(on_history[0]["loss"])
