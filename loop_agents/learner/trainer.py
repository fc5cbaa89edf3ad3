"""The algorithm-blind learner: PPO-style epochs over minibatches of trajectories, on LoRA weights.

Choices (compare loop_agents/reference.py, the readable oracle this must agree with):
- Every rank gets the same global trajectory list and derives the same plan (batching.py): a seeded
  epoch order (independent of the world size), minibatches of `minibatch_size` trajectories, each
  minibatch split over ranks by tokens, packed into micro-steps of <= `micro_token_budget` tokens.
  Ranks with fewer micro-steps run zero-weight dummy steps so FSDP collectives stay in lockstep.
- The loss of a minibatch is Σ_i w_i Σ_t ℓ_it with w_i from the configured aggregation over the
  GLOBAL minibatch, so sharding and gradient accumulation do not change it. FSDP averages gradients
  over ranks, so each rank's loss is scaled by W to make the reduction a sum.
- Old log-probs are recomputed with the current weights before the epochs (LOOP) or taken from the
  sampler. Off-policy (asynchronous LOOP) the recomputed π_old is the proximal policy and the configured loss
  weights each token by π_prox/π_behav from the sampler's log-probs (losses/policy.py, decoupled PPO). Recompute-vs-sampler differences are reported. With `sampler_logprobs_if_agree`
  the sampler's are used once a recompute agrees with them (old_logprobs.py), re-checked periodically.
  The first minibatch's π_old is its own step's forward, the rest recomputed by minibatch (first_step_old.py).
- A micro-batch whose trajectories share a prefix computes it once (prefix_sharing.py); the forward runs
  under bf16 autocast where `precision` asks for it and the device has it (precision.py).
- Gradient norm: reduced across ranks exactly once, then clipped (ml-loop reduces twice).
- AdamW over the trainable parameters (LoRA, value head); LR scheduler stepped once per iteration.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable

import torch

from loop_agents.algorithms.aggregation import trajectory_weights
from loop_agents.algorithms.config import AlgorithmConfig
from loop_agents.algorithms.losses.kl import k3_kl
from loop_agents.algorithms.losses.policy import decoupled_behaviour_weights, policy_token_losses
from loop_agents.algorithms.losses.value import value_losses
from loop_agents.learner.batching import epoch_order
from loop_agents.learner.config import LearnerConfig
from loop_agents.learner.distributed import (
    DistContext,
    apply_fsdp2,
    clip_grad_norm_once,
    make_context,
)
from loop_agents.learner.first_step_old import (
    first_epoch_minibatches,
    record_step_logprobs,
    share_over_ranks,
    training_forward_is_stochastic,
)
from loop_agents.learner.learner_checkpoint import LearnerCheckpointing
from loop_agents.learner.learner_forwards import LearnerForwards
from loop_agents.learner.model import load_policy
from loop_agents.learner.old_logprobs import SamplerLogprobTrust, old_logprobs
from loop_agents.learner.precision import autocast_dtype
from loop_agents.learner.scheduler import make_scheduler
from loop_agents.learner.step_metrics import mean_step_metrics
from loop_agents.learner.stress import stress_test
from loop_agents.learner.train_items import TrainItem, prepare_items
from loop_agents.rollout.trajectory import Trajectory

log = logging.getLogger(__name__)

# Accumulated per optimizer step, summed across ranks.
_SUMS = (
    "loss",
    "clipped",
    "tokens",
    "kl_old",
    "value_loss",
    "kl_ref",
    "packed_tokens",
    "entropy",
    "shared",
    "behaviour_weight",
    "behaviour_far",
)


class Learner(LearnerCheckpointing, LearnerForwards):
    """LoRA policy trainer; `train_iteration` is called on every rank with the same global list."""

    def __init__(self, cfg: LearnerConfig, algorithm: AlgorithmConfig | None = None):
        cfg.validate()
        self.cfg = cfg
        self.algorithm = algorithm or AlgorithmConfig()
        self.algorithm.validate()
        if self.algorithm.advantage_estimator == "gae" and not cfg.value_head_hidden:
            raise ValueError(
                "advantage_estimator='gae' needs learner.value_head_hidden (the critic MLP widths)"
            )
        self.ctx: DistContext = make_context(cfg.device)
        if self.ctx.enabled and self.ctx.world_size > 1 and not cfg.use_fsdp:
            raise ValueError("multi-process training needs learner.use_fsdp=True")
        self.policy = load_policy(cfg, self.ctx.device)
        self.fsdp = self.ctx.enabled and cfg.use_fsdp
        if self.fsdp:
            apply_fsdp2(self.policy, self.ctx, cfg.dtype)
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params,
            lr=cfg.lr,
            betas=tuple(cfg.adam_betas),
            eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay,
        )
        self.scheduler = make_scheduler(self.optimizer, cfg)
        self.iteration = 0
        self.global_step = 0
        self.step_history: list[dict[str, float]] = []
        self.share_mode = cfg.share_prefix
        if cfg.share_prefix == "auto" and cfg.activation_checkpointing:
            log.info(
                "learner.share_prefix=auto: off under activation checkpointing (the prefix cache is not recomputed)"
            )
            self.share_mode = "off"
        self.autocast = autocast_dtype(cfg.precision, self.ctx.device)
        self.sampler_trust = SamplerLogprobTrust(
            cfg.sampler_logprobs_tolerance, cfg.sampler_logprobs_recheck_every
        )
        self._logged_once: set[str] = set()

    def _log_once(self, key: str, message: str) -> None:
        if key not in self._logged_once and self.ctx.is_main:
            self._logged_once.add(key)
            log.info(message + " (logged once)")

    # ------------------------------------------------------------------ one optimizer step
    def _optimizer_step(
        self,
        items: list[TrainItem],
        minibatch: list[int],
        old: list[torch.Tensor],
        ref: list[torch.Tensor] | None,
        old_values: list[torch.Tensor] | None,
    ) -> dict[str, float]:
        alg, dev = self.algorithm, self.ctx.device
        counts = torch.tensor([items[i].num_trainable for i in minibatch])
        divisor = alg.loss_divisor or self.cfg.minibatch_size
        weights = trajectory_weights(
            counts, alg.aggregation, divisor, alg.dr_grpo_length_constant or self.cfg.max_seq_len
        )
        weight_of = dict(zip(minibatch, weights.tolist(), strict=True))
        with_values = alg.advantage_estimator == "gae"
        with_entropy = alg.entropy_coef > 0
        scale = float(self.ctx.world_size) if self.fsdp else 1.0
        sums = torch.zeros(len(_SUMS), dtype=torch.float64)
        plan, prefixes = self._rank_plan(items, minibatch)
        for k, prefix in enumerate(prefixes):
            if k >= len(plan):  # keep FSDP collectives in lockstep; contributes nothing
                logprobs, values, _ = self._run(
                    self._dummy_batch(prefix > 0), with_values, with_entropy, prefix
                )
                zero = logprobs.sum() * 0.0 + (values.sum() * 0.0 if values is not None else 0.0)
                zero.backward()
                continue
            mb = plan[k]
            batch = self._pack(items, mb)
            logprobs, values, entropy = self._run(batch, with_values, with_entropy, prefix)

            def cat(tensors: list[torch.Tensor], mb: list[int] = mb) -> torch.Tensor:
                return torch.cat([tensors[i] for i in mb]).to(dev)

            adv = torch.cat([items[i].advantages for i in mb]).to(dev)
            if old and any(old[i] is None for i in mb):  # the first step: π_old is the policy it runs
                record_step_logprobs(old, items, mb, logprobs)
            old_lp = cat(old) if old else torch.zeros_like(logprobs)
            w = torch.cat([torch.full((items[i].num_trainable,), weight_of[i]) for i in mb]).to(dev)
            behaviour = cat([it.sample_logprobs for it in items])
            token_loss, clipped = policy_token_losses(
                self.algorithm, logprobs, old_lp, adv, batch.item_of_token, len(mb), batch.turn_of_token,
                batch.num_turns, behaviour,
            )  # fmt: skip
            objective = (w * token_loss).sum()
            if entropy is not None:  # bonus: maximise the aggregated entropy (verl: pg_loss - c * H)
                objective = objective - alg.entropy_coef * (w * entropy).sum()
                sums[7] += float(entropy.detach().sum())
            if alg.kl_coef > 0 and ref is not None:
                kl_ref = k3_kl(cat(ref) - logprobs)
                objective = objective + alg.kl_coef * (w * kl_ref).sum()
                sums[5] += float((kl_ref.detach()).sum())
            if with_values:
                targets = torch.cat([items[i].value_targets for i in mb]).to(dev)
                prior = cat(old_values) if old_values is not None else None
                vloss = value_losses(values, targets, prior, alg.value_clip)
                value_term = (w * vloss).sum()
                objective = objective + alg.value_loss_coef * value_term
                sums[4] += float(value_term.detach())
            (objective * scale).backward()
            sums[0] += float((w * token_loss).sum().detach())
            sums[1] += float(clipped.sum())
            sums[2] += float(logprobs.numel())
            if old:
                sums[3] += float(k3_kl(logprobs.detach() - old_lp).sum())
            sums[6] += float(batch.num_tokens)
            sums[8] += float((len(mb) - 1) * prefix)
            if alg.behaviour_weight == "decoupled":
                applied, far = behaviour_weight_sums(old_lp, behaviour, alg)
                sums[9] += applied
                sums[10] += far
        self.ctx.all_reduce_sum(sums)
        grad_norm = clip_grad_norm_once(self.params, self.cfg.max_grad_norm, self.ctx)
        skipped = not math.isfinite(grad_norm)
        # KL(π_old ‖ π_θ) per trajectory of this minibatch before its step (Σ of per-token k3 / trajectories)
        kl_per_trajectory = float(sums[3]) / len(minibatch)
        high_kl = (
            bool(old) and alg.high_kl_threshold is not None and kl_per_trajectory > alg.high_kl_threshold
        )
        if not skipped and not high_kl:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        tokens = max(float(sums[2]), 1.0)
        step = {
            "loss": float(sums[0]),
            "grad_norm": grad_norm,
            "clip_fraction": float(sums[1]) / tokens,
            "kl_old_k3": float(sums[3]) / tokens,
            "value_loss": float(sums[4]),
            "kl_ref_k3": float(sums[5]) / tokens,
            "trained_tokens": float(sums[2]),
            "packed_tokens": float(sums[6]),
            "prefix_tokens_saved": float(sums[8]),  # token-forwards not run thanks to shared prefixes
            "skipped_nonfinite": float(skipped),
            "kl_old_per_trajectory": kl_per_trajectory,
            "high_kl": float(high_kl),
        }
        if with_entropy:  # only computed for the bonus (a softmax-wide pass per chunk)
            step["entropy"] = float(sums[7]) / tokens
        if alg.behaviour_weight == "decoupled":  # how far off-policy the samples were (asynchronous LOOP)
            step["behaviour_weight"] = float(sums[9]) / tokens
            step["behaviour_far_fraction"] = float(sums[10]) / tokens
        self.step_history.append(step)
        return step

    def _first_epoch_minibatches(self, num_items: int) -> list[list[int]]:
        return first_epoch_minibatches(num_items, self.cfg.seed, self.iteration, self.cfg.minibatch_size)

    def _first_step_items(self, num_items: int) -> frozenset[int]:
        """The first minibatch's items, whose π_old their own step gives (first_step_old.py); none under dropout."""
        minibatches = self._first_epoch_minibatches(num_items)
        config = getattr(self.policy.peft_model, "config", None)
        if not minibatches or training_forward_is_stochastic(self.policy, config):
            return frozenset()
        return frozenset(minibatches[0])

    # ------------------------------------------------------------------ public API
    def stress_test(self, seq_len: int | None = None) -> dict[str, float]:
        """One forward/backward at max_seq_len (no step) so OOM shows at start-up; see stress.py."""
        return stress_test(self, seq_len)

    def compute_values(self, trajectories: list[Trajectory]) -> list[torch.Tensor]:
        """Critic values per token ([T_i], 0 on masked tokens) for compute_advantages(..., values=...)."""
        if self.policy.value_head is None:
            raise ValueError("compute_values needs a value head (learner.value_head_hidden)")
        items, _ = prepare_items(trajectories, None, None, self.cfg, need_advantages=False)
        if len(items) != len(trajectories):
            raise ValueError(
                "compute_values: drop overlong/empty trajectories first (or use overlong_policy=truncate)"
            )
        _, values = self._forward_all(items, with_values=True)
        out = []
        for traj, item, v in zip(trajectories, items, values, strict=True):
            full = torch.zeros(len(traj.token_ids))
            mask = torch.tensor(item.loss_mask, dtype=torch.bool)
            full[: len(item.loss_mask)][mask] = v
            out.append(full)
        return out

    def train_iteration(
        self,
        trajectories: list[Trajectory],
        token_advantages: list[torch.Tensor] | None = None,
        value_targets: list[torch.Tensor] | None = None,
        on_step: Callable[[int, int], None] | None = None,
    ) -> dict[str, float]:
        """One iteration: (recompute old log-probs), E epochs of minibatch steps, scheduler step.

        Advantages come from `token_advantages` ([T_i] each, from compute_advantages) or, if None,
        from the scalar `Trajectory.advantage` broadcast to trainable tokens. `value_targets` ([T_i]
        returns) are needed for gae. `on_step(steps done, steps)` is called after every optimizer step
        (progress display). Returns iteration metrics (same values on every rank).
        """
        start = time.perf_counter()
        alg = self.algorithm
        is_sft = alg.loss == "sft"
        items, stats = prepare_items(
            trajectories, token_advantages, value_targets, self.cfg, need_advantages=not is_sft
        )
        if alg.advantage_estimator == "gae" and not is_sft and any(it.value_targets is None for it in items):
            raise ValueError("advantage_estimator='gae' needs value_targets (AdvantageResult.returns)")
        old: list[torch.Tensor] = []
        recompute = {}
        first_step: frozenset[int] = frozenset()
        if not is_sft:
            first_step = self._first_step_items(len(items))
            old, recompute = old_logprobs(
                items,
                lambda: self._forward_all(
                    items, skip=first_step, groups=self._first_epoch_minibatches(len(items))
                )[0],
                self.sampler_trust,
                recompute=self.cfg.recompute_old_logprobs,
                check_sampler=self.cfg.sampler_logprobs_if_agree,
                iteration=self.iteration,
                is_main=self.ctx.is_main,
            )
        ref = self._forward_all(items, base_model=True)[0] if alg.kl_coef > 0 and not is_sft else None
        old_values = None
        if alg.value_clip is not None and alg.advantage_estimator == "gae":
            old_values = self._forward_all(items, with_values=True)[1]
        self.policy.train()
        steps: list[dict[str, float]] = []
        total_steps = self.cfg.epochs * -(-len(items) // self.cfg.minibatch_size)
        train_start = time.perf_counter()
        from_first_step = sorted(i for i in first_step if old[i] is None) if old else []
        for epoch in range(self.cfg.epochs):
            order = epoch_order(len(items), self.cfg.seed, self.iteration, epoch)
            for first in range(0, len(order), self.cfg.minibatch_size):
                steps.append(
                    self._optimizer_step(
                        items, order[first : first + self.cfg.minibatch_size], old, ref, old_values
                    )
                )
                if len(steps) == 1 and from_first_step:
                    share_over_ranks(self.ctx, items, old, from_first_step)
                if on_step is not None:
                    on_step(len(steps), total_steps)
                if steps[-1]["high_kl"]:
                    break  # the policy ran too far from π_old: no more steps this iteration (ml-loop)
            if steps and steps[-1]["high_kl"]:
                break
        train_seconds = time.perf_counter() - train_start
        lr = self.optimizer.param_groups[0]["lr"]
        with warnings.catch_warnings():
            # an iteration whose only step was skipped (high KL, non-finite) still advances the schedule
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
            self.scheduler.step()
        self.iteration += 1
        return {
            "iteration": float(self.iteration),
            "global_step": float(self.global_step),
            "num_steps": float(len(steps)),
            "num_trajectories": float(len(items)),
            "lr": float(lr),
            "tokens_per_s": sum(s["packed_tokens"] for s in steps) / max(train_seconds, 1e-9),
            "prefix_tokens_saved": sum(s["prefix_tokens_saved"] for s in steps),  # training phase
            "iteration_seconds": time.perf_counter() - start,
            **stats,
            **recompute,
            **mean_step_metrics(steps),
        }


def behaviour_weight_sums(prox: torch.Tensor, behaviour: torch.Tensor, alg) -> tuple[float, float]:
    """(Σ of the applied w_t = min(π_prox/π_behav, cap), how many tokens have π_prox/π_behav outside [1/2, 2]):
    the decoupled objective's importance weights, summed for the step's token means."""
    raw = decoupled_behaviour_weights(prox, behaviour, None)
    applied = raw if alg.behaviour_weight_cap is None else torch.clamp(raw, max=alg.behaviour_weight_cap)
    return float(applied.sum()), float(((raw < 0.5) | (raw > 2.0)).sum())
