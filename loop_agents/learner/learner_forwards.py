"""Forward passes of the Learner (a mixin: the methods use its policy, config, context and autocast dtype).

`_run` is one forward of a packed micro-batch (shared prefix or not); `_rank_plan` says which micro-batches this
rank runs; `_forward_all` is the gathered no-grad pass over a batch (π_old, the reference, old values).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from loop_agents.learner.batching import PackedBatch, pack
from loop_agents.learner.model import TokenOutputs
from loop_agents.learner.rank_plan import rank_plan
from loop_agents.learner.train_items import TrainItem


class LearnerForwards:
    """`_run`, `_rank_plan` and `_forward_all` for `Learner` (which gives `_log_once`)."""

    def _pack(self, items: list[TrainItem], indices: list[int]) -> PackedBatch:
        return pack(
            [items[i].token_ids for i in indices],
            [items[i].loss_mask for i in indices],
            self.ctx.device,
            [items[i].segment_starts for i in indices],
        )

    def _dummy_batch(self, shared: bool = False) -> PackedBatch:
        """A zero-weight micro-step; `shared` runs it as a 1-token prefix + 2 suffixes (two decoder passes)."""
        if shared:
            return pack([[0, 0], [0, 0]], [[0, 1], [0, 1]], self.ctx.device)
        return pack([[0, 0]], [[0, 1]], self.ctx.device)

    def _run(
        self, batch: PackedBatch, with_values: bool, with_entropy: bool = False, shared_prefix: int = 0
    ) -> TokenOutputs:
        autocast = (
            torch.autocast(self.ctx.device.type, dtype=self.autocast)
            if self.autocast is not None
            else nullcontext()
        )
        with autocast:
            return self.policy(
                batch.input_ids,
                batch.position_ids,
                batch.gather_index,
                batch.targets,
                with_values=with_values,
                with_entropy=with_entropy,
                shared_prefix=shared_prefix,
            )

    def _rank_plan(self, items: list[TrainItem], indices: list[int]) -> tuple[list[list[int]], list[int]]:
        """This rank's micro-batches of `indices` and per micro-step the shared prefix (rank_plan.py)."""
        return rank_plan(
            [it.token_ids for it in items],
            indices,
            world_size=self.ctx.world_size,
            rank=self.ctx.rank,
            lockstep=self.fsdp and self.ctx.world_size > 1,
            # a trajectory of several segments cannot run its later ones on a shared prefix's cache
            mode="off" if any(items[i].segment_starts for i in indices) else self.share_mode,
            min_tokens=self.cfg.share_prefix_min_tokens,
            budget=self.cfg.micro_token_budget,
            log_once=self._log_once,
        )

    @torch.no_grad()
    def _forward_all(
        self,
        items: list[TrainItem],
        with_values: bool = False,
        base_model: bool = False,
        skip: frozenset[int] = frozenset(),
        groups: list[list[int]] | None = None,
    ) -> tuple[list[torch.Tensor | None], list[torch.Tensor] | None]:
        """Log-probs (and values) of every item's trained tokens, computed sharded, gathered on all ranks; None for
        the items in `skip` (not computed). `groups` (e.g. the epoch's minibatches) are planned into micro-batches
        one by one instead of all items at once."""
        sizes = [it.num_trainable for it in items]
        offsets = [0]
        for s in sizes:
            offsets.append(offsets[-1] + s)
        logprob_buf = torch.zeros(offsets[-1], dtype=torch.float32)
        value_buf = torch.zeros(offsets[-1], dtype=torch.float32)
        computed = [i for i in range(len(items)) if i not in skip]
        if not computed:
            return [None] * len(items), ([None] * len(items) if with_values else None)
        plan, prefixes = [], []
        for group in groups if groups is not None else [computed]:
            members = [i for i in group if i not in skip]
            if members:
                group_plan, group_prefixes = self._rank_plan(items, members)
                plan += group_plan + [[]] * (len(group_prefixes) - len(group_plan))  # [] = this rank's dummy
                prefixes += group_prefixes
        self.policy.eval()
        adapter_off = self.policy.peft_model.disable_adapter() if base_model else nullcontext()
        with adapter_off:
            for k, prefix in enumerate(prefixes):
                if not plan[k]:  # keep FSDP collectives in lockstep
                    self._run(self._dummy_batch(prefix > 0), with_values, shared_prefix=prefix)
                    continue
                logprobs, values, _ = self._run(self._pack(items, plan[k]), with_values, shared_prefix=prefix)
                parts = torch.split(logprobs.float().cpu(), [sizes[i] for i in plan[k]])
                vparts = (
                    torch.split(values.float().cpu(), [sizes[i] for i in plan[k]])
                    if values is not None
                    else None
                )
                for j, i in enumerate(plan[k]):
                    logprob_buf[offsets[i] : offsets[i + 1]] = parts[j]
                    if vparts is not None:
                        value_buf[offsets[i] : offsets[i + 1]] = vparts[j]
        self.policy.train()
        self.ctx.all_reduce_sum(logprob_buf)
        if with_values:
            self.ctx.all_reduce_sum(value_buf)

        def split(buf: torch.Tensor) -> list[torch.Tensor | None]:
            return [
                None if i in skip else buf[offsets[i] : offsets[i + 1]].clone() for i in range(len(items))
            ]

        return split(logprob_buf), (split(value_buf) if with_values else None)
