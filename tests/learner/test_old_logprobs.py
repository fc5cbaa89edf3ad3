"""π_old from the sampler once a recompute agrees with it (learner.sampler_logprobs_if_agree)."""

from __future__ import annotations

import logging

import pytest
import torch

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from loop_agents.learner.old_logprobs import SamplerLogprobTrust
from loop_agents.learner.train_items import prepare_items
from tests.learner.batch import learner_config, loop_algorithm, make_batch


def test_trust_follows_the_checks_and_rechecks_periodically(caplog):
    trust = SamplerLogprobTrust(tolerance=1e-3, recheck_every=2)
    assert trust.should_recompute()  # nothing checked yet
    assert trust.record_check(5e-4, iteration=0)
    assert not trust.should_recompute()
    trust.record_sampler_iteration()
    assert not trust.should_recompute()
    trust.record_sampler_iteration()
    assert trust.should_recompute()  # 2 iterations on the sampler's: re-check
    with caplog.at_level(logging.WARNING, logger="loop_agents.learner.old_logprobs"):
        assert not trust.record_check(2e-3, iteration=3)
    assert trust.should_recompute()
    assert len(caplog.records) == 1 and "max |diff| 0.002 > learner.sampler_logprobs_tolerance" in caplog.text


def _with_exact_sampler_logprobs(learner: Learner, seed: int):
    """A batch whose sampling log-probs are the learner's own recomputation (what vLLM gives in sync mode)."""
    batch = make_batch(seed=seed)
    compute_advantages(batch, loop_algorithm())
    items, _ = prepare_items(batch, None, None, learner.cfg, need_advantages=True)
    recomputed, _ = learner._forward_all(items)
    for traj, logprobs in zip(batch, recomputed, strict=True):
        full = torch.zeros(len(traj.token_ids))
        full[torch.tensor(traj.loss_mask, dtype=torch.bool)] = logprobs
        traj.sample_logprobs = full.tolist()
    return batch


def test_agreeing_sampler_logprobs_replace_the_recompute_with_the_same_update(tiny_model_dir):
    recompute = Learner(learner_config(tiny_model_dir), loop_algorithm())
    checked = Learner(
        learner_config(tiny_model_dir, sampler_logprobs_if_agree=True, sampler_logprobs_tolerance=1e-5),
        loop_algorithm(),
    )
    flags = []
    for iteration in range(2):
        batch = _with_exact_sampler_logprobs(recompute, seed=iteration)
        recompute.train_iteration(batch)
        flags.append(checked.train_iteration(batch)["old_logprobs/from_sampler"])
    assert flags == [0.0, 1.0]  # iteration 0 checks (and agrees), iteration 1 skips the forward
    for ours, theirs in zip(checked.step_history, recompute.step_history, strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-5, abs=1e-7)
    a, b = checked.trainable_state(), recompute.trainable_state()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_disagreeing_sampler_logprobs_keep_the_recompute_loudly(tiny_model_dir, caplog):
    learner = Learner(learner_config(tiny_model_dir, sampler_logprobs_if_agree=True), loop_algorithm())
    flags = []
    with caplog.at_level(logging.WARNING, logger="loop_agents.learner.old_logprobs"):
        for iteration in range(2):
            batch = make_batch(seed=iteration)  # sampling log-probs are a -1.0 placeholder
            compute_advantages(batch, loop_algorithm())
            flags.append(learner.train_iteration(batch)["old_logprobs/from_sampler"])
    assert flags == [0.0, 0.0]
    assert len(caplog.records) == 2 and "disagree" in caplog.records[0].getMessage()


def test_the_first_minibatch_takes_pi_old_from_its_own_step_with_the_same_update(tiny_model_dir, monkeypatch):
    """Before the first optimizer step the weights are π_old's: the recompute skips that minibatch's items and
    its step records their π_old from its own forward (then used by every later epoch). Same losses and weights
    as recomputing every item, over several epochs and iterations (fp32)."""
    reusing = Learner(learner_config(tiny_model_dir), loop_algorithm())
    recompute_all = Learner(learner_config(tiny_model_dir), loop_algorithm())
    monkeypatch.setattr(recompute_all, "_first_step_items", lambda num_items: frozenset())
    recomputed = []
    real_forward_all = reusing._forward_all

    def counting_forward_all(items, *args, skip=frozenset(), **kwargs):
        recomputed.append(len(items) - len(skip))
        return real_forward_all(items, *args, skip=skip, **kwargs)

    monkeypatch.setattr(reusing, "_forward_all", counting_forward_all)
    for iteration in range(2):
        batch = make_batch(seed=iteration)
        compute_advantages(batch, loop_algorithm())
        reusing.train_iteration(batch)
        recompute_all.train_iteration(batch)
        assert recomputed[-1] == len(batch) - min(reusing.cfg.minibatch_size, len(batch))
    assert reusing.cfg.epochs > 1 and len(reusing.step_history) == len(recompute_all.step_history) > 2
    for ours, theirs in zip(reusing.step_history, recompute_all.step_history, strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-5, abs=1e-7)
        assert ours["clip_fraction"] == theirs["clip_fraction"]
    # the two recomputes batch items differently (float summation order, ~1e-7 per log-prob); after 2 iterations
    # of Adam the LoRA weights (|w| <= 0.2) differ by up to 4e-6
    a, b = reusing.trainable_state(), recompute_all.trainable_state()
    assert all(torch.allclose(a[k], b[k], atol=2e-5) for k in a)


def test_dropout_keeps_the_full_recompute(tiny_model_dir):
    """With dropout active in train mode the first step's forward is not π_old's function: nothing is skipped."""
    learner = Learner(learner_config(tiny_model_dir, lora_dropout=0.1), loop_algorithm())
    assert learner._first_step_items(9) == frozenset()
    assert len(Learner(learner_config(tiny_model_dir), loop_algorithm())._first_step_items(9)) == min(
        learner.cfg.minibatch_size, 9
    )


def test_a_batch_of_one_minibatch_recomputes_nothing_and_is_no_sampler_check(tiny_model_dir):
    """All items in the first minibatch: nothing is recomputed, so nothing is compared with the sampler and the
    sampler's log-probs do not become trusted on an empty comparison."""
    learner = Learner(
        learner_config(tiny_model_dir, minibatch_size=64, sampler_logprobs_if_agree=True), loop_algorithm()
    )
    batch = make_batch(seed=0)  # sampling log-probs are a -1.0 placeholder: any comparison would disagree
    compute_advantages(batch, loop_algorithm())
    metrics = learner.train_iteration(batch)
    assert metrics["old_logprobs/from_sampler"] == 0.0 and "recompute/abs_logprob_diff_max" not in metrics
    assert not learner.sampler_trust.trusted
