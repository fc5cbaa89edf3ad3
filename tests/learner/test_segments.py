"""Trajectories of several segments (an agent program that rewrote its history behind the gateway): the learner
restarts positions at each segment, so each runs as a sequence of its own, and trains them as one episode."""

from __future__ import annotations

import torch

from loop_agents import reference as ref
from loop_agents.learner import Learner
from loop_agents.learner.batching import pack
from loop_agents.learner.train_items import prepare_items
from loop_agents.rollout.trajectory import Trajectory
from tests.learner.batch import learner_config, loop_algorithm, make_shared_batch


def test_pack_restarts_positions_at_each_segment():
    # item 0: segment [5, 6, 7] then segment [8, 9, 10, 11] (sampled 6, 7 and 10, 11); item 1: one segment
    batch = pack(
        [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]],
        [[0, 1, 1, 0, 0, 1, 1], [0, 0, 1]],
        torch.device("cpu"),
        [(3,), ()],
    )
    assert batch.position_ids.tolist() == [[0, 1, 2, 0, 1, 2, 3, 0, 1, 2]]
    assert batch.gather_index.tolist() == [0, 1, 4, 5, 8]  # row t-1 predicts token t, within its segment
    assert batch.targets.tolist() == [6, 7, 10, 11, 14]
    assert batch.item_of_token.tolist() == [0, 0, 0, 0, 1]
    assert batch.turn_of_token.tolist() == [0, 0, 1, 1, 2] and batch.num_turns == 3
    assert pack([[1, 2, 3]], [[0, 1, 1]], torch.device("cpu"), [()]).position_ids.tolist() == [[0, 1, 2]]


def _two_segments(first: Trajectory, second: Trajectory) -> Trajectory:
    """One episode whose second call did not extend its first: `first`'s tokens, then `second`'s as segment 2."""
    return Trajectory(
        task_id=first.task_id,
        group_id=first.group_id,
        sample_index=first.sample_index,
        token_ids=first.token_ids + second.token_ids,
        loss_mask=first.loss_mask + second.loss_mask,
        sample_logprobs=first.sample_logprobs + second.sample_logprobs,
        segment_starts=[len(first.token_ids)],
        reward=first.reward,
    )


def test_each_segment_is_scored_as_a_sequence_of_its_own(tiny_model_dir):
    """The learner's log-probs of a two-segment episode are those of each segment run alone (no attention across
    the boundary, positions from 0), also where prefix sharing would otherwise share the batch's common prefix."""
    # a 40-token common prefix: prefix sharing would apply to this batch
    batch = make_shared_batch(seed=7, groups=1, k=3, system_len=40)
    joined = _two_segments(batch[0], batch[1])
    episodes = [joined, batch[2]]
    for share in ("auto", "on"):
        learner = Learner(
            learner_config(
                tiny_model_dir,
                micro_token_budget=10_000,
                share_prefix=share,
                share_prefix_min_tokens=8,
                activation_checkpointing=False,
            ),
            loop_algorithm(),
        )
        items, _ = prepare_items(episodes, None, None, learner.cfg, need_advantages=False)
        assert items[0].segment_starts == (len(batch[0].token_ids),) and items[1].segment_starts == ()
        computed, _ = learner._forward_all(items)
        model = learner.policy.peft_model
        with torch.no_grad():
            alone = [
                ref.token_logprobs(model, t.token_ids)[torch.tensor(t.loss_mask, dtype=torch.bool)]
                for t in (batch[0], batch[1], batch[2])
            ]
        torch.testing.assert_close(computed[0], torch.cat(alone[:2]), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(computed[1], alone[2], atol=1e-5, rtol=1e-5)
        # run as one sequence, the second segment's tokens would see the first: a different result
        with torch.no_grad():
            as_one = ref.token_logprobs(model, joined.token_ids)[
                torch.tensor(joined.loss_mask, dtype=torch.bool)
            ]
        assert not torch.allclose(as_one, computed[0], atol=1e-3)


def test_a_truncated_episode_keeps_the_segments_it_still_has():
    batch = make_shared_batch(seed=1, groups=1, k=2)
    joined = _two_segments(batch[0], batch[1])
    config = learner_config("unused", max_seq_len=len(batch[0].token_ids) + 2)
    items, _ = prepare_items([joined], None, None, config, need_advantages=False)
    assert (
        items[0].segment_starts == (len(batch[0].token_ids),)
        and len(items[0].token_ids) == config.max_seq_len
    )
    config = learner_config("unused", max_seq_len=len(batch[0].token_ids))
    items, _ = prepare_items([joined], None, None, config, need_advantages=False)
    assert items[0].segment_starts == ()
