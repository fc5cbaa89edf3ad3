"""Words for the metric keys charted on the run's page (the key itself stays in the metrics table)."""

from __future__ import annotations

NAMES = {
    "rollout/reward_mean": "training: mean reward",
    "rollout/success_rate": "training: success rate",
    "eval/reward_mean": "evaluation: mean reward",
    "eval/success_rate": "evaluation: success rate",
    "eval/tgc": "evaluation: TGC (tasks)",
    "eval/sgc": "evaluation: SGC (scenarios)",
    "learn/loss": "policy loss",
    "learn/clip_fraction": "fraction of tokens clipped",
    "learn/kl_old_k3": "KL to the sampling policy",
    "learn/grad_norm": "gradient norm",
    "learn/behaviour_weight": "importance weight to the sampler (asynchronous)",
    "adv/kept_fraction": "episodes kept by the |A| filter",
    "rollout/turns_mean": "training: turns per episode",
    "rollout/tokens_mean": "training: tokens per episode",
}


def metric_name(key: str) -> str:
    """The words for `key`; an unknown key is shown as it is."""
    return NAMES.get(key, key)
