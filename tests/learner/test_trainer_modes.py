"""Learner behaviours: bad input, overlong policy, SFT mode, KL-to-reference, GAE critic, stress test."""

from __future__ import annotations

import pytest
import torch

from loop_agents.algorithms import AlgorithmConfig, compute_advantages, preset
from loop_agents.learner import Learner
from loop_agents.learner.train_items import prepare_items
from tests.learner.batch import learner_config, loop_algorithm, make_batch


@pytest.fixture(scope="module")
def loop_learner(tiny_model_dir):
    return Learner(learner_config(tiny_model_dir, epochs=1), loop_algorithm())


def test_bad_input_is_named(loop_learner):
    with pytest.raises(ValueError, match="no trajectories"):
        loop_learner.train_iteration([])
    batch = make_batch(seed=0)
    with pytest.raises(ValueError, match="task0.*no advantage"):
        loop_learner.train_iteration(batch)
    compute_advantages(batch, loop_algorithm())
    batch[0].loss_mask[0] = 1
    with pytest.raises(ValueError, match="token 0 is trainable"):
        loop_learner.train_iteration(batch)


@pytest.mark.parametrize(
    ("policy", "truncated", "dropped", "count"), [("truncate", 3, 0, 9), ("drop", 0, 3, 6)]
)
def test_overlong_trajectories_are_counted(tiny_model_dir, policy, truncated, dropped, count):
    batch = make_batch(seed=0)
    compute_advantages(batch, loop_algorithm())
    limit = sorted(len(t.token_ids) for t in batch)[-4]  # the 3 longest are over the limit
    learner = Learner(
        learner_config(tiny_model_dir, epochs=1, max_seq_len=limit, overlong_policy=policy), loop_algorithm()
    )
    metrics = learner.train_iteration(batch)
    assert (metrics["num_truncated"], metrics["num_dropped_overlong"], metrics["num_trajectories"]) == (
        truncated,
        dropped,
        count,
    )


def test_config_errors_name_the_field(tiny_model_dir):
    with pytest.raises(ValueError, match="overlong_policy"):
        Learner(learner_config(tiny_model_dir, overlong_policy="ignore"))
    with pytest.raises(ValueError, match="value_head_hidden"):
        Learner(learner_config(tiny_model_dir), preset("ppo_gae"))


def test_sft_mode_is_token_nll_and_learns(tiny_model_dir):
    batch = make_batch(seed=0)
    learner = Learner(
        learner_config(tiny_model_dir, epochs=1, minibatch_size=9, max_grad_norm=10.0), preset("sft")
    )
    items, _ = prepare_items(batch, None, None, learner.cfg, need_advantages=False)
    logprobs, _ = learner._forward_all(items)
    expected = -float(torch.cat(logprobs).mean())  # token mean NLL over all trainable tokens
    first = learner.train_iteration(batch)
    assert first["loss"] == pytest.approx(expected, rel=1e-5)
    for _ in range(5):
        last = learner.train_iteration(batch)
    assert last["loss"] < first["loss"] - 0.05


def test_kl_to_reference_is_zero_at_start_and_grows(tiny_model_dir):
    algorithm = loop_algorithm()
    algorithm.kl_coef = 0.1
    learner = Learner(learner_config(tiny_model_dir, epochs=2), algorithm)
    batch = make_batch(seed=0)
    compute_advantages(batch, algorithm)
    metrics = learner.train_iteration(batch)
    assert learner.step_history[0]["kl_ref_k3"] == pytest.approx(0.0, abs=1e-7)  # B = 0: policy == base
    assert metrics["kl_ref_k3"] > 0


def test_ppo_gae_trains_the_critic(tiny_model_dir):
    algorithm = preset("ppo_gae")
    learner = Learner(
        learner_config(tiny_model_dir, epochs=1, value_head_hidden=[16], minibatch_size=9, lr=1e-2), algorithm
    )
    batch = make_batch(seed=0)
    losses = []
    for _ in range(4):
        values = learner.compute_values(batch)
        assert all(
            float(v[torch.tensor(t.loss_mask) == 0].abs().sum()) == 0
            for v, t in zip(values, batch, strict=True)
        )
        result = compute_advantages(batch, algorithm, values=values)
        metrics = learner.train_iteration(batch, result.token_advantages, result.returns)
        losses.append(metrics["value_loss"])
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    "name", ["loop_per_turn", "loop_per_trajectory", "gspo", "grpo", "dr_grpo", "reinforce_pp"]
)
def test_every_preset_runs_a_finite_step(tiny_model_dir, name):
    algorithm = preset(name)
    algorithm.abs_adv_threshold = 0.0
    learner = Learner(learner_config(tiny_model_dir, epochs=1), algorithm)
    batch = make_batch(seed=0)
    result = compute_advantages(batch, algorithm)
    metrics = learner.train_iteration(batch, result.token_advantages)
    assert metrics["num_steps"] == 3 and torch.isfinite(torch.tensor(metrics["loss"]))


def test_stress_test_runs_at_max_seq_len(tiny_model_dir):
    learner = Learner(
        learner_config(tiny_model_dir, max_seq_len=512, logprob_chunk_size=64), AlgorithmConfig()
    )
    report = learner.stress_test()
    assert report["stress/seq_len"] == 512 and report["stress/peak_memory_mb"] > 0
    assert all(p.grad is None for p in learner.params)


def test_activation_checkpointing_gives_the_same_step(tiny_model_dir):
    runs = []
    for checkpointing in (False, True):
        learner = Learner(
            learner_config(tiny_model_dir, epochs=1, activation_checkpointing=checkpointing), loop_algorithm()
        )
        batch = make_batch(seed=0)
        compute_advantages(batch, loop_algorithm())
        learner.train_iteration(batch)
        runs.append((learner.step_history, learner.trainable_state()))
    (steps_a, state_a), (steps_b, state_b) = runs
    assert [s["loss"] for s in steps_a] == pytest.approx([s["loss"] for s in steps_b], rel=1e-5)
    assert all(torch.allclose(state_a[k], state_b[k], atol=1e-6) for k in state_a)
