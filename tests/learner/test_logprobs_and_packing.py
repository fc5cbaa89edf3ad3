"""Chunked log-probs equal the full log-softmax (values and gradients); packing equals one-by-one."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from loop_agents import reference as ref
from loop_agents.learner import Learner
from loop_agents.learner.batching import balanced_assignment, micro_batches, pack
from loop_agents.learner.logprobs import chunked_token_logprobs
from loop_agents.learner.model import padded_is_cheaper
from loop_agents.learner.train_items import prepare_items
from tests.learner.batch import learner_config, loop_algorithm, make_batch


def test_chunked_logprobs_match_full_softmax_and_gradients():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(23, 8, generator=gen, requires_grad=True)
    weight = torch.randn(50, 8, generator=gen, requires_grad=True)
    targets = torch.randint(0, 50, (23,), generator=gen)
    full = torch.gather(F.log_softmax(hidden @ weight.t() / 0.7, dim=-1), 1, targets[:, None])[:, 0]
    chunked = chunked_token_logprobs(hidden, weight, targets, chunk_size=5, temperature=0.7)
    assert torch.allclose(full, chunked, atol=1e-6)
    g_full = torch.autograd.grad(full.sum(), [hidden, weight])
    g_chunk = torch.autograd.grad(chunked.sum(), [hidden, weight])
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g_full, g_chunk, strict=True))


def test_pack_positions_and_targets():
    batch = pack([[5, 6, 7], [8, 9]], [[0, 1, 1], [0, 1]], torch.device("cpu"))
    assert batch.position_ids.tolist() == [[0, 1, 2, 0, 1]]
    assert batch.gather_index.tolist() == [0, 1, 3]  # row t-1 predicts token t
    assert batch.targets.tolist() == [6, 7, 9]
    assert batch.item_of_token.tolist() == [0, 0, 1]
    assert batch.turn_of_token.tolist() == [0, 0, 1] and batch.num_turns == 2


def test_rank_assignment_and_micro_batches():
    lengths = [10, 40, 30, 20]
    assert balanced_assignment([0, 1, 2, 3], lengths, 2) == [[0, 1], [2, 3]]
    assert micro_batches([0, 1, 2, 3], lengths, 50) == [[0, 1], [2, 3]]
    assert micro_batches([1], lengths, 5) == [[1]]  # longer than the budget: alone


def test_packed_logprobs_equal_one_by_one_reference(tiny_model_dir):
    """Block-diagonal attention from restarting position_ids: no leakage between packed trajectories."""
    learner = Learner(learner_config(tiny_model_dir, micro_token_budget=10_000), loop_algorithm())
    batch = make_batch(seed=3)
    items, _ = prepare_items(batch, None, None, learner.cfg, need_advantages=False)
    packed, _ = learner._forward_all(items)
    model = learner.policy.peft_model
    for traj, lp in zip(batch, packed, strict=True):
        with torch.no_grad():
            single = ref.token_logprobs(model, traj.token_ids)[torch.tensor(traj.loss_mask, dtype=torch.bool)]
        assert torch.allclose(lp, single, atol=1e-5)


def test_padded_layout_only_when_cheaper():
    assert padded_is_cheaper([10, 10, 10])  # 300 < 900
    assert not padded_is_cheaper([100, 1, 1])  # 30000 > 10404: one long row with two short ones stays packed
    assert not padded_is_cheaper([50])


def test_padded_and_packed_layouts_give_the_same_hidden_states(tiny_model_dir):
    learner = Learner(learner_config(tiny_model_dir, micro_token_budget=10_000), loop_algorithm())
    batch = make_batch(seed=5)
    assert padded_is_cheaper([len(t.token_ids) for t in batch])
    packed = pack([t.token_ids for t in batch], [t.loss_mask for t in batch], torch.device("cpu"))
    policy = learner.policy
    with torch.no_grad():
        padded_hidden = policy._decoder_hidden(packed.input_ids, packed.position_ids)
        packed_hidden = policy.causal_lm.model(
            input_ids=packed.input_ids, position_ids=packed.position_ids, use_cache=False
        ).last_hidden_state[0]
    assert (
        padded_hidden.shape == packed_hidden.shape == (packed.num_tokens, policy.causal_lm.config.hidden_size)
    )
    torch.testing.assert_close(padded_hidden, packed_hidden, atol=1e-5, rtol=1e-5)
