"""Pad/pack helpers against hand-written tensors."""

from __future__ import annotations

import pytest
import torch

from loop_agents.rollout.batching import pack_trajectories, pad_trajectories
from loop_agents.rollout.trajectory import Trajectory


def two_trajectories() -> list[Trajectory]:
    a = Trajectory(task_id="a", group_id="g", advantage=0.5)
    a.append_context([10, 11])
    a.append_generation([12, 13], [-0.1, -0.2])
    a.append_context([14])
    b = Trajectory(task_id="b", group_id="g", sample_index=1, advantage=-1.0)
    b.append_context([20])
    b.append_generation([21], [-0.3])
    return [a, b]


def test_pad_right_pads_and_broadcasts_the_trajectory_advantage_on_the_mask():
    batch = pad_trajectories(two_trajectories(), pad_token_id=0)
    assert batch.input_ids.tolist() == [[10, 11, 12, 13, 14], [20, 21, 0, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4], [0, 1, 0, 0, 0]]
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1, 0], [0, 1, 0, 0, 0]]
    assert torch.allclose(batch.old_logprobs, torch.tensor([[0, 0, -0.1, -0.2, 0], [0, -0.3, 0, 0, 0]]))
    assert batch.advantages.tolist() == [[0, 0, 0.5, 0.5, 0], [0, -1.0, 0, 0, 0]]


def test_pack_concatenates_with_restarting_positions_and_cu_seqlens():
    trajs = two_trajectories()
    per_token = [[9, 9, 1, 2, 9], [9, 3]]  # off-mask values must be zeroed
    batch = pack_trajectories(trajs, token_advantages=per_token)
    assert batch.input_ids.tolist() == [[10, 11, 12, 13, 14, 20, 21]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 0, 1]]
    assert batch.cu_seqlens.tolist() == [0, 5, 7] and batch.cu_seqlens.dtype == torch.int32
    assert batch.max_seqlen == 5
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1, 0, 0, 1]]
    assert batch.advantages.tolist() == [[0, 0, 1, 2, 0, 0, 3]]
    assert torch.allclose(batch.old_logprobs, torch.tensor([[0, 0, -0.1, -0.2, 0, 0, -0.3]]))


def test_bad_inputs_name_the_problem():
    trajs = two_trajectories()
    trajs[1].advantage = None
    with pytest.raises(ValueError, match="b/1 has no advantage"):
        pad_trajectories(trajs, 0)
    with pytest.raises(ValueError, match="1 advantage sequences for 2"):
        pack_trajectories(trajs, token_advantages=[[0.0] * 5])
    with pytest.raises(ValueError, match="no trajectories"):
        pack_trajectories([])
