"""The entropy bonus against a hand computation on full logits, and the high-KL guard (ml-loop's, with k3)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from loop_agents.algorithms import compute_advantages
from loop_agents.algorithms.aggregation import trajectory_weights
from loop_agents.learner import Learner
from loop_agents.learner.logprobs import chunked_token_logprobs, chunked_token_logprobs_and_entropy
from loop_agents.learner.model import load_policy
from tests.learner.batch import learner_config, loop_algorithm, make_batch

ENTROPY_COEF = 0.05


def test_chunked_entropy_is_the_softmax_entropy_at_the_temperature() -> None:
    generator = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(11, 16, generator=generator), torch.randn(50, 16, generator=generator)
    targets = torch.randint(0, 50, (11,), generator=generator)
    logprobs, entropy = chunked_token_logprobs_and_entropy(
        hidden, weight, targets, chunk_size=4, temperature=0.7
    )
    logp = F.log_softmax((hidden @ weight.t()) / 0.7, dim=-1)
    assert torch.allclose(entropy, -(logp.exp() * logp).sum(-1), atol=1e-5)
    assert torch.allclose(logprobs, chunked_token_logprobs(hidden, weight, targets, 4, 0.7))


def _first_step(model_dir: str, entropy_coef: float, batch) -> tuple[dict[str, torch.Tensor], dict, Learner]:
    """Gradients of the first optimizer step (one minibatch of all 9 trajectories, no clipping)."""
    algorithm = loop_algorithm()
    algorithm.entropy_coef = entropy_coef
    learner = Learner(learner_config(model_dir, epochs=1, minibatch_size=9, max_grad_norm=1e9), algorithm)
    grads: dict[str, torch.Tensor] = {}

    def keep_grads(optimizer, args, kwargs) -> None:
        if not grads:
            grads.update({n: p.grad.detach().clone() for n, p in learner.policy.named_trainable().items()})

    learner.optimizer.register_step_pre_hook(keep_grads)
    metrics = learner.train_iteration(batch)
    return grads, metrics, learner


def test_entropy_bonus_gradient_matches_a_hand_computation(tiny_model_dir) -> None:
    """With every advantage 0 the clipped surrogate's gradient is exactly 0, so the step's gradient is the
    bonus's alone (subtracting a with-bonus from a without-bonus run instead cancels ~1e-3 gradients down
    to ~1e-6, and float32 summation order then decides the comparison)."""
    batch = make_batch(seed=0)
    for traj in batch:
        traj.advantage = 0.0
    plain, _, _ = _first_step(tiny_model_dir, 0.0, batch)
    assert all(float(g.abs().max()) == 0.0 for g in plain.values())
    with_bonus, metrics, learner = _first_step(tiny_model_dir, ENTROPY_COEF, batch)

    # by hand: one plain HF forward per trajectory over the full vocabulary, H at every trained position,
    # aggregated with the loss's own trajectory weights (loop: 1 / (|O_i| * minibatch size))
    policy = load_policy(learner.cfg, torch.device("cpu"))  # the same seeded initial LoRA
    counts = torch.tensor([sum(t.loss_mask[1:]) for t in batch])
    weights = trajectory_weights(counts, "loop", learner.cfg.minibatch_size, learner.cfg.max_seq_len)
    bonus, entropies = 0.0, []
    for traj, weight in zip(batch, weights.tolist(), strict=True):
        logits = policy.peft_model(torch.tensor([traj.token_ids])).logits[0, :-1].float()
        logp = F.log_softmax(logits / learner.cfg.temperature, dim=-1)
        trained = torch.tensor(traj.loss_mask[1:], dtype=torch.bool)
        entropy = -(logp.exp() * logp).sum(-1)[trained]
        entropies.append(entropy.detach())
        bonus = bonus + weight * entropy.sum()
    (-ENTROPY_COEF * bonus).backward()
    expected = {n: p.grad for n, p in policy.named_trainable().items()}

    assert set(expected) == set(with_bonus)
    assert max(float(with_bonus[n].abs().max()) for n in expected) > 1e-6  # the bonus has a gradient at all
    for name, grad in expected.items():
        assert torch.allclose(with_bonus[name], grad, rtol=1e-4, atol=1e-9), name
    assert learner.step_history[0]["entropy"] == pytest.approx(float(torch.cat(entropies).mean()), rel=1e-5)
    assert metrics["entropy"] > 0


def test_high_kl_skips_the_step_and_ends_the_iteration(tiny_model_dir) -> None:
    batch = make_batch(seed=0)  # sample log-probs are -1.0, far from the tiny model's (~ -log V)
    compute_advantages(batch, loop_algorithm())
    algorithm = loop_algorithm()  # threshold 20 nats per trajectory (ml-loop's default)
    learner = Learner(learner_config(tiny_model_dir, recompute_old_logprobs=False), algorithm)
    before = {n: p.detach().clone() for n, p in learner.policy.named_trainable().items()}
    metrics = learner.train_iteration(batch)
    assert metrics["num_steps"] == 1 and metrics["num_high_kl"] == 1
    assert metrics["kl_old_per_trajectory_max"] > 20
    assert all(torch.equal(p, before[n]) for n, p in learner.policy.named_trainable().items())  # no step

    algorithm.high_kl_threshold = None  # off: every step of both epochs runs
    learner = Learner(learner_config(tiny_model_dir, recompute_old_logprobs=False), algorithm)
    metrics = learner.train_iteration(batch)
    assert metrics["num_steps"] == 6 and metrics["num_high_kl"] == 0


def test_the_guard_stops_once_the_policy_has_moved(tiny_model_dir) -> None:
    """With recomputed π_old the first step sees KL ~ 0 and runs; the second sees the first one's update."""
    batch = make_batch(seed=0)
    compute_advantages(batch, loop_algorithm())
    algorithm = loop_algorithm()
    algorithm.high_kl_threshold = 1e-6
    metrics = Learner(learner_config(tiny_model_dir), algorithm).train_iteration(batch)
    assert (metrics["num_steps"], metrics["num_high_kl"]) == (2, 1)
