"""Memory stress test: one forward/backward at `max_seq_len` before training starts, so an OOM
shows up in the first minute rather than at hour 30 (ml-loop `stress_test_iters`, reference §2.12).

The sequence is the worst case the learner accepts: max_seq_len tokens, the last 90% trainable,
through the real packing, chunked log-probs and PPO loss; gradients are discarded, no step is taken.
"""

from __future__ import annotations

import resource
import time
from typing import Any

import torch

from loop_agents.algorithms.losses.ppo_clip import ppo_clip_losses
from loop_agents.learner.batching import pack


def peak_memory_mb(device: torch.device) -> float:
    """Peak allocated CUDA memory, or the process's peak RSS on CPU (never reset)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stress_test(learner: Any, seq_len: int | None = None) -> dict[str, float]:
    """Run one worst-case forward/backward (collective under FSDP); return peak memory and time."""
    seq_len = seq_len or learner.cfg.max_seq_len
    device = learner.ctx.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    vocab = learner.policy.causal_lm.config.vocab_size
    generator = torch.Generator().manual_seed(learner.cfg.seed)
    ids = torch.randint(0, vocab, (seq_len,), generator=generator).tolist()
    prompt = max(1, seq_len // 10)
    mask = [0] * prompt + [1] * (seq_len - prompt)
    start = time.perf_counter()
    learner.policy.train()
    batch = pack([ids], [mask], device)
    logprobs = learner._run(
        batch, with_values=False, with_entropy=learner.algorithm.entropy_coef > 0
    ).logprobs
    advantages = torch.randn(logprobs.shape, generator=generator).to(device)
    loss, _ = ppo_clip_losses(logprobs - logprobs.detach(), advantages, 0.8, 1.2)
    loss.mean().backward()
    learner.optimizer.zero_grad(set_to_none=True)
    learner.ctx.barrier()
    return {
        "stress/seq_len": float(seq_len),
        "stress/seconds": time.perf_counter() - start,
        "stress/peak_memory_mb": peak_memory_mb(device),
    }
