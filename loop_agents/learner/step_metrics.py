"""An iteration's metrics from its optimizer steps' metrics (Learner.train_iteration)."""

from __future__ import annotations


def mean_step_metrics(steps: list[dict[str, float]]) -> dict[str, float]:
    """Per-step metrics of an iteration: plain means, token-weighted means for per-token rates."""
    if not steps:
        return {}
    tokens = max(sum(s["trained_tokens"] for s in steps), 1.0)
    metrics = {key: sum(s[key] for s in steps) / len(steps) for key in ("loss", "grad_norm", "value_loss")}
    for key in (
        "clip_fraction",
        "kl_old_k3",
        "kl_ref_k3",
        "entropy",
        "behaviour_weight",
        "behaviour_far_fraction",
    ):
        if key in steps[0]:
            metrics[key] = sum(s[key] * s["trained_tokens"] for s in steps) / tokens
    metrics["grad_norm_max"] = max(s["grad_norm"] for s in steps)
    metrics["num_skipped_nonfinite"] = sum(s["skipped_nonfinite"] for s in steps)
    metrics["num_high_kl"] = sum(s["high_kl"] for s in steps)
    metrics["kl_old_per_trajectory_max"] = max(s["kl_old_per_trajectory"] for s in steps)
    return metrics
