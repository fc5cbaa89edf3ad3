"""What the learner trains on: trajectories cut to their trainable tokens, with advantages and sampling log-probs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from loop_agents.learner.config import LearnerConfig
from loop_agents.rollout.trajectory import Trajectory


@dataclass
class TrainItem:
    """One trajectory as trained: tokens, mask, and per-trained-token tensors."""

    token_ids: list[int]
    loss_mask: list[int]
    advantages: torch.Tensor  # [n] float32
    sample_logprobs: torch.Tensor  # [n] float32
    value_targets: torch.Tensor | None  # [n] float32 (gae only)
    # positions where a new sequence starts besides 0 (Trajectory.segment_starts within the kept tokens)
    segment_starts: tuple[int, ...] = ()

    @property
    def num_trainable(self) -> int:
        return int(self.advantages.numel())


def prepare_items(
    trajectories: list[Trajectory],
    token_advantages: list[torch.Tensor] | None,
    value_targets: list[torch.Tensor] | None,
    cfg: LearnerConfig,
    need_advantages: bool,
) -> tuple[list[TrainItem], dict[str, float]]:
    """Validate the trajectories and cut them to what is trained: overlong ones dropped or truncated to
    `cfg.max_seq_len` (`cfg.overlong_policy`), ones without a trainable token skipped; per-token advantages
    from `token_advantages` or the scalar `Trajectory.advantage`. Returns the items and the counts of each case."""
    if not trajectories:
        raise ValueError("train_iteration got no trajectories")
    for name, per_token in (("token_advantages", token_advantages), ("value_targets", value_targets)):
        if per_token is not None and len(per_token) != len(trajectories):
            raise ValueError(f"{name}: {len(per_token)} tensors for {len(trajectories)} trajectories")
    items: list[TrainItem] = []
    truncated = dropped = empty = 0
    for i, traj in enumerate(trajectories):
        traj.validate()
        if traj.loss_mask and traj.loss_mask[0]:
            raise ValueError(f"trajectory of task {traj.task_id!r}: token 0 is trainable but has no prefix")
        n = len(traj.token_ids)
        if n > cfg.max_seq_len:
            if cfg.overlong_policy == "drop":
                dropped += 1
                continue
            truncated += 1
            n = cfg.max_seq_len
        mask = torch.tensor(traj.loss_mask[:n], dtype=torch.bool)
        if not bool(mask.any()):
            empty += 1
            continue
        if token_advantages is not None:
            adv_full = token_advantages[i].float()
            if adv_full.numel() != len(traj.token_ids):
                raise ValueError(
                    f"task {traj.task_id!r}: {adv_full.numel()} advantages for {len(traj.token_ids)} tokens"
                )
            adv = adv_full[:n][mask]
        elif need_advantages:
            if traj.advantage is None:
                raise ValueError(
                    f"trajectory of task {traj.task_id!r} has no advantage (run compute_advantages)"
                )
            adv = torch.full((int(mask.sum()),), float(traj.advantage))
        else:
            adv = torch.zeros(int(mask.sum()))
        targets = value_targets[i].float()[:n][mask] if value_targets is not None else None
        sample = torch.tensor(traj.sample_logprobs[:n], dtype=torch.float32)[mask]
        starts = tuple(s for s in traj.segment_starts if s < n)
        items.append(
            TrainItem(list(traj.token_ids[:n]), list(traj.loss_mask[:n]), adv, sample, targets, starts)
        )
    stats = {
        "num_truncated": float(truncated),
        "num_dropped_overlong": float(dropped),
        "num_without_trainable": float(empty),
    }
    return items, stats
