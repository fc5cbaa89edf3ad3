"""Trajectories -> learner tensors: right-padded [B, T] or packed [1, N] with cu_seqlens.

All tensors are aligned with token positions: `loss_mask[b, t]`, `old_logprobs[b, t]` and
`advantages[b, t]` describe token t, which the model predicts from the logits at t - 1 (so token 0
of a sequence is never trained). Per-token advantages come from `token_advantages` (one sequence per
trajectory, e.g. GAE) or else the trajectory's scalar `advantage` (LOOP/GRPO), and are zero off the
loss mask. (The trainer in loop_agents/learner packs straight from trajectories; these helpers serve
other consumers: evaluation scripts, diagnostics, external trainers.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from loop_agents.rollout.trajectory import Trajectory


@dataclass
class PaddedBatch:
    input_ids: torch.Tensor  # [B, T] long, right-padded with pad_token_id
    attention_mask: torch.Tensor  # [B, T] long, 1 on real tokens
    position_ids: torch.Tensor  # [B, T] long, 0..len-1 then 0 on padding
    loss_mask: torch.Tensor  # [B, T] float, 1 on sampled tokens
    old_logprobs: torch.Tensor  # [B, T] float, sampling logprobs on the mask, 0 elsewhere
    advantages: torch.Tensor  # [B, T] float, per-token advantage on the mask, 0 elsewhere


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # [1, N] long, trajectories back to back
    position_ids: torch.Tensor  # [1, N] long, restarting at 0 for every trajectory
    cu_seqlens: torch.Tensor  # [B + 1] int32, start offsets (flash-attention varlen convention)
    max_seqlen: int  # longest trajectory
    loss_mask: torch.Tensor  # [1, N] float
    old_logprobs: torch.Tensor  # [1, N] float
    advantages: torch.Tensor  # [1, N] float


def _columns(
    trajectories: Sequence[Trajectory], token_advantages: Sequence[Sequence[float]] | None
) -> list[tuple[list[int], list[float], list[float], list[float]]]:
    if not trajectories:
        raise ValueError("no trajectories to batch")
    if token_advantages is not None and len(token_advantages) != len(trajectories):
        raise ValueError(f"{len(token_advantages)} advantage sequences for {len(trajectories)} trajectories")
    rows = []
    for i, traj in enumerate(trajectories):
        traj.validate()
        n = traj.num_tokens
        if n == 0:
            raise ValueError(f"trajectory {traj.task_id}/{traj.sample_index} has no tokens")
        mask = [float(m) for m in traj.loss_mask]
        if token_advantages is not None:
            if len(token_advantages[i]) != n:
                raise ValueError(f"trajectory {i}: {len(token_advantages[i])} advantages for {n} tokens")
            adv = [a * m for a, m in zip(token_advantages[i], mask, strict=True)]
        elif traj.advantage is None:
            raise ValueError(
                f"trajectory {traj.task_id}/{traj.sample_index} has no advantage; compute it first"
            )
        else:
            adv = [traj.advantage * m for m in mask]
        logprobs = [lp * m for lp, m in zip(traj.sample_logprobs, mask, strict=True)]
        rows.append((traj.token_ids, mask, logprobs, adv))
    return rows


def pad_trajectories(
    trajectories: Sequence[Trajectory],
    pad_token_id: int,
    token_advantages: Sequence[Sequence[float]] | None = None,
) -> PaddedBatch:
    """Right-pad to the longest trajectory."""
    rows = _columns(trajectories, token_advantages)
    batch, length = len(rows), max(len(ids) for ids, *_ in rows)
    out = PaddedBatch(
        input_ids=torch.full((batch, length), pad_token_id, dtype=torch.long),
        attention_mask=torch.zeros(batch, length, dtype=torch.long),
        position_ids=torch.zeros(batch, length, dtype=torch.long),
        loss_mask=torch.zeros(batch, length),
        old_logprobs=torch.zeros(batch, length),
        advantages=torch.zeros(batch, length),
    )
    for b, (ids, mask, logprobs, adv) in enumerate(rows):
        n = len(ids)
        out.input_ids[b, :n] = torch.tensor(ids)
        out.attention_mask[b, :n] = 1
        out.position_ids[b, :n] = torch.arange(n)
        out.loss_mask[b, :n] = torch.tensor(mask)
        out.old_logprobs[b, :n] = torch.tensor(logprobs)
        out.advantages[b, :n] = torch.tensor(adv)
    return out


def pack_trajectories(
    trajectories: Sequence[Trajectory], token_advantages: Sequence[Sequence[float]] | None = None
) -> PackedBatch:
    """Concatenate into one row; attention must be restricted to each [cu_seqlens[i], cu_seqlens[i+1])."""
    rows = _columns(trajectories, token_advantages)
    lengths = [len(ids) for ids, *_ in rows]
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return PackedBatch(
        input_ids=torch.tensor([t for ids, *_ in rows for t in ids], dtype=torch.long)[None],
        position_ids=torch.cat([torch.arange(n) for n in lengths])[None],
        cu_seqlens=torch.tensor(offsets, dtype=torch.int32),
        max_seqlen=max(lengths),
        loss_mask=torch.tensor([m for _, mask, _, _ in rows for m in mask])[None],
        old_logprobs=torch.tensor([lp for _, _, lps, _ in rows for lp in lps])[None],
        advantages=torch.tensor([a for *_, adv in rows for a in adv])[None],
    )
