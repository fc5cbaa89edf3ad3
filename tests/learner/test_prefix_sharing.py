"""Shared-prefix learning is exact: same log-probs, LoRA gradients and LOOP updates as the unshared learner.

The oracle is loop_agents/reference.py (one full forward per trajectory, no sharing), on AppWorld-shaped
batches (make_shared_batch: one system prompt for all, one task prompt per group), in fp32 on 1 process
and on 2 FSDP2/gloo ranks, with test_oracle's tolerances (losses and grad norms rel 1e-4, weights 2e-4).
"""

from __future__ import annotations

import logging

import pytest
import torch

from loop_agents import reference as ref
from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from loop_agents.learner.batching import pack
from loop_agents.learner.prefix_sharing import (
    common_prefix_length,
    forward_cost,
    prefix_micro_batches,
    shareable_prefix,
)
from tests.learner.batch import (
    learner_config,
    loop_algorithm,
    make_batch,
    make_shared_batch,
    reference_config,
)
from tests.learner.test_oracle import _compare, run_torchrun


# ---------------------------------------------------------------- planning (hand-computed)
def test_common_prefix_and_shareable_length():
    assert common_prefix_length([[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 7]]) == 2
    assert common_prefix_length([[5, 6], [5, 6, 7]]) == 2
    assert common_prefix_length([[1], [2]]) == 0
    # P <= min L - 1: the shorter trajectory keeps one suffix token
    assert shareable_prefix([[5, 6], [5, 6, 7]], "on", 32) == 1
    assert shareable_prefix([[1, 2, 3, 4], [1, 2, 3, 9]], "on", 32) == 3
    assert shareable_prefix([[1, 2, 3, 4], [1, 2, 3, 9]], "auto", 3) == 3
    assert shareable_prefix([[1, 2, 3, 4], [1, 2, 3, 9]], "auto", 4) == 0  # below the auto threshold
    assert shareable_prefix([[1, 2, 3, 4], [1, 2, 3, 9]], "off", 1) == 0
    assert shareable_prefix([[1, 2, 3, 4]], "on", 1) == 0  # one trajectory: nothing to share
    # cost: 4 + 4 - (2 - 1) * 3 = 5 token-forwards
    assert forward_cost([[1, 2, 3, 4], [1, 2, 3, 9]], "on", 1) == 5


def test_prefix_micro_batches_group_common_prefixes_within_the_budget():
    token_ids = {
        0: [7, 7, 7, 1, 1],  # group A
        1: [9, 9, 9, 2],  # group B
        2: [7, 7, 7, 1, 2],  # group A
        3: [9, 9, 9, 3],  # group B
    }
    # sorted: 2? no: [7,7,7,1,1] (0) < [7,7,7,1,2] (2) < [9,9,9,2] (1) < [9,9,9,3] (3)
    # {0,2}: 5 + 5 - 4 = 6; adding 1 shares nothing: 6 + 4 = 14 > 10 → new batch; {1,3}: 4 + 4 - 3 = 5
    assert prefix_micro_batches([0, 1, 2, 3], token_ids, 10, "on", 1) == [[0, 2], [1, 3]]
    # a budget of 5 fits one A alone (5) but not both (6); both B (5) fit
    assert prefix_micro_batches([0, 1, 2, 3], token_ids, 5, "on", 1) == [[0], [2], [1, 3]]


# ---------------------------------------------------------------- one micro-batch: forward and gradients
def test_shared_forward_gives_the_unshared_logprobs_and_lora_gradients(tiny_model_dir):
    learner = Learner(learner_config(tiny_model_dir, share_prefix="off"), loop_algorithm())
    torch.manual_seed(3)
    for name, param in learner.policy.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0.0, 0.2)  # a non-zero adapter, so LoRA A gets gradients too
    batch = make_shared_batch(seed=5)[:3]  # one group: system + task prompt shared
    seqs, masks = [t.token_ids for t in batch], [t.loss_mask for t in batch]
    prefix = shareable_prefix(seqs, "on", 1)
    assert prefix >= 10
    packed = pack(seqs, masks, learner.ctx.device)
    weights = torch.randn(packed.targets.numel())
    results = []
    for shared_prefix in (0, prefix):
        learner.policy.zero_grad(set_to_none=True)
        out = learner._run(packed, with_values=False, shared_prefix=shared_prefix)
        (weights * out.logprobs).sum().backward()
        grads = {n: p.grad.clone() for n, p in learner.policy.named_parameters() if p.requires_grad}
        results.append((out.logprobs.detach(), grads))
    (lp_plain, g_plain), (lp_shared, g_shared) = results
    assert torch.allclose(lp_shared, lp_plain, atol=2e-6, rtol=0)
    scale = max(float(g.abs().max()) for g in g_plain.values())
    assert scale > 1e-3
    for name, grad in g_plain.items():
        assert torch.allclose(g_shared[name], grad, atol=1e-5 * scale, rtol=1e-4), name


# ---------------------------------------------------------------- whole LOOP iteration vs the reference
@pytest.fixture(scope="module")
def shared_reference_result(tiny_model_dir):
    cfg = reference_config()
    model = ref.load_lora_policy(tiny_model_dir, cfg)
    optimizer = ref.make_optimizer(model, cfg)
    rollouts = [
        ref.Rollout(t.group_id, t.token_ids, t.loss_mask, t.reward) for t in make_shared_batch(seed=0)
    ]
    history = ref.loop_iteration(model, optimizer, rollouts, cfg)
    return {"peft_model." + k: v for k, v in ref.lora_state(model).items()}, history


def test_shared_prefix_learner_matches_reference_single_process(tiny_model_dir, shared_reference_result):
    batch = make_shared_batch(seed=0)
    compute_advantages(batch, loop_algorithm())
    learner = Learner(
        learner_config(tiny_model_dir, share_prefix="on", micro_token_budget=200), loop_algorithm()
    )
    learner.train_iteration(batch)
    _compare(learner.trainable_state(), learner.step_history, shared_reference_result)
    # sharing really ran: minibatches of 4, 4 and 1 trajectories per epoch (one alone shares nothing)
    assert [step["prefix_tokens_saved"] > 0 for step in learner.step_history] == [True, True, False] * 2


def test_shared_prefix_learner_matches_reference_two_processes_fsdp2_gloo(
    tiny_model_dir, shared_reference_result, tmp_path
):
    out = tmp_path / "out.pt"
    run_torchrun(["oracle", tiny_model_dir, str(out)], extra_env={"LOOP_TEST_SHARED": "1"})
    result = torch.load(out, weights_only=False)
    _compare(result["state"], result["steps"], shared_reference_result)
    assert sum(step["prefix_tokens_saved"] for step in result["steps"]) > 0


# ---------------------------------------------------------------- fallback
def test_trajectories_without_a_common_prefix_fall_back_with_one_logged_line(tiny_model_dir, caplog):
    batch = make_batch(seed=0)  # a random prompt per trajectory: nothing shared
    compute_advantages(batch, loop_algorithm())
    learner = Learner(
        learner_config(tiny_model_dir, share_prefix="on", micro_token_budget=200), loop_algorithm()
    )
    with caplog.at_level(logging.INFO, logger="loop_agents.learner.trainer"):
        learner.train_iteration(batch)
    lines = [r.getMessage() for r in caplog.records if "computed unshared" in r.getMessage()]
    assert len(lines) == 1 and "share_prefix=on" in lines[0]
    assert all(step["prefix_tokens_saved"] == 0 for step in learner.step_history)


def test_share_prefix_on_with_activation_checkpointing_is_rejected(tiny_model_dir):
    with pytest.raises(ValueError, match="share_prefix=on needs activation_checkpointing=false"):
        learner_config(tiny_model_dir, share_prefix="on", activation_checkpointing=True).validate()
    with pytest.raises(ValueError, match="learner.share_prefix='sometimes'"):
        learner_config(tiny_model_dir, share_prefix="sometimes").validate()


def test_critic_reference_and_entropy_paths_are_unchanged_by_sharing(tiny_model_dir):
    """PPO with a critic (gae, value clip), a KL reference (adapter off) and the entropy bonus: the value,
    reference and entropy outputs come after the decoder, so sharing must leave every metric unchanged."""
    from loop_agents.algorithms import preset

    algorithm = preset("ppo_gae")
    algorithm.kl_coef, algorithm.entropy_coef = 0.05, 0.01
    runs = []
    for mode in ("off", "on"):
        learner = Learner(
            learner_config(
                tiny_model_dir,
                epochs=1,
                value_head_hidden=[16],
                minibatch_size=9,
                micro_token_budget=400,
                share_prefix=mode,
            ),
            algorithm,
        )
        batch = make_shared_batch(seed=1)
        values = learner.compute_values(batch)
        result = compute_advantages(batch, algorithm, values=values)
        metrics = learner.train_iteration(batch, result.token_advantages, result.returns)
        runs.append((values, metrics, learner.trainable_state()))
    (values_off, off, state_off), (values_on, on, state_on) = runs
    assert on["prefix_tokens_saved"] > 0 and off["prefix_tokens_saved"] == 0
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(values_off, values_on, strict=True))
    for key in ("loss", "value_loss", "kl_ref_k3", "entropy", "grad_norm"):
        assert on[key] == pytest.approx(off[key], rel=1e-4, abs=1e-6), key
    assert all(torch.allclose(state_on[k], state_off[k], atol=2e-5) for k in state_off)
