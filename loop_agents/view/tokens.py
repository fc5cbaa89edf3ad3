"""Per-token display data: each token id decoded on its own, with its loss mask and sampling logprob."""

from __future__ import annotations

from typing import Any

from loop_agents.rollout.trajectory import Trajectory


class TokenDecoder:
    """Decodes single token ids with a Hugging Face tokenizer, caching each id's text."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[int, str] = {}

    @classmethod
    def from_path(cls, path: str) -> TokenDecoder:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path))

    def text(self, token_id: int) -> str:
        cached = self._cache.get(token_id)
        if cached is None:
            cached = self.tokenizer.decode([token_id], skip_special_tokens=False)
            self._cache[token_id] = cached
        return cached


def token_view_data(traj: Trajectory, decoder: TokenDecoder) -> dict[str, list]:
    """{"text", "id", "mask", "lp"}: parallel lists for the page's token view (logprobs to 4 decimals)."""
    return {
        "text": [decoder.text(t) for t in traj.token_ids],
        "id": list(traj.token_ids),
        "mask": list(traj.loss_mask),
        "lp": [round(lp, 4) for lp in traj.sample_logprobs],
    }


def span_logprob_stats(traj: Trajectory, start: int, end: int) -> dict[str, float] | None:
    """Mean and min sampling logprob of the trained tokens in [start, end), or None if there are none."""
    values = [
        traj.sample_logprobs[i] for i in range(start, min(end, len(traj.loss_mask))) if traj.loss_mask[i]
    ]
    if not values:
        return None
    return {"mean": sum(values) / len(values), "min": min(values), "count": float(len(values))}
