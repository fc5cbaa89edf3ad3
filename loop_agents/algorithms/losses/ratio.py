"""Importance log-ratios at token, turn or trajectory level (LOOP paper §4, Table 1 ablation).

With per-token log-probs of the current (θ) and behaviour (old) policy and a segment id per token
(its turn or its trajectory), the log-ratio broadcast to every token of segment s is

    token:       log r_t = log π_θ(a_t) - log π_old(a_t)
    turn/traj:   log r_s = Σ_{t∈s} (log π_θ(a_t) - log π_old(a_t))        (product of token ratios)
    mean:        log r_s = (1/|s|) Σ_{t∈s} (...)                           (GSPO, length-normalised)
"""

from __future__ import annotations

import torch


def segment_log_ratio(
    log_ratio: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, mean: bool = False
) -> torch.Tensor:
    """[N] per-token log-ratio replaced by its segment's sum (or mean); segment_ids in [0, num_segments)."""
    if log_ratio.shape != segment_ids.shape:
        raise ValueError(f"log_ratio {tuple(log_ratio.shape)} vs segment_ids {tuple(segment_ids.shape)}")
    totals = torch.zeros(num_segments, dtype=log_ratio.dtype, device=log_ratio.device)
    totals = totals.index_add(0, segment_ids, log_ratio)
    if mean:
        counts = torch.zeros(num_segments, dtype=log_ratio.dtype, device=log_ratio.device)
        counts = counts.index_add(0, segment_ids, torch.ones_like(log_ratio))
        totals = totals / counts.clamp(min=1)
    return totals[segment_ids]
