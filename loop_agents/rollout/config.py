"""Typed settings of one episode: generation, budgets, template options, retries.

The lead maps the Hydra tree onto these (llm.max_model_len -> max_context_tokens, llm.max_new_tokens ->
max_tokens_per_turn, env.observation_max_tokens, env.turn_schedule -> max_turns, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EpisodeConfig:
    temperature: float = 1.0  # sampling temperature (1.0 for training, so logprobs are the policy's)
    top_p: float = 1.0  # nucleus sampling (1.0 = off)
    top_k: int = -1  # top-k sampling (-1 = off)
    max_tokens_per_turn: int = 1500  # sampled tokens per assistant turn (ml-loop: 1500 Qwen2.5, 3200 Qwen3)
    max_turns: int = 40  # assistant turns per episode (ml-loop README: 40)
    max_context_tokens: int = (
        32768  # whole-episode length; equals the learner's max_seq_len: all tokens train
    )
    min_tokens_per_turn: int = 16  # a turn with less room than this ends the episode (context budget)
    observation_max_tokens: int = 3000  # observations are cut to this many tokens (ml-loop: 3000)
    stop_tokens: list[str] = field(default_factory=lambda: ["<|im_end|>", "<|endoftext|>"])  # stop tokens
    turn_end_token: str = "<|im_end|>"  # the template's end-of-turn token (appended, mask 0, after a cut)
    observation_role: str = "user"  # role observations are rendered with: user | tool
    tools: list[dict[str, Any]] | None = None  # OpenAI function schemas the template declares (agent=tools)
    enable_thinking: bool | None = None  # Qwen3 template option (None: not passed to the template)
    inference_retries: int = 2  # retries of a failed generation request before INFERENCE_ERROR
    inference_retry_backoff_s: float = 1.0  # first retry delay; doubles each retry
    generation_timeout_s: float | None = None  # per generation request (None: the client's own timeout)
    env_timeout_s: float | None = None  # per step/evaluate call (None: the environment's own timeout)
    env_reset_timeout_s: float | None = None  # per reset (None: the environment's own timeout)
    seed: int | None = None  # base sampling seed; per request f(seed, task, sample, turn) (None: unseeded)

    def validate(self) -> None:
        """Raise ValueError naming the first inconsistent field."""
        positive = ("max_tokens_per_turn", "max_turns", "max_context_tokens", "min_tokens_per_turn")
        for name in (*positive, "observation_max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"EpisodeConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.temperature < 0:
            raise ValueError(f"EpisodeConfig.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"EpisodeConfig.top_p must be in (0, 1], got {self.top_p}")
        if self.min_tokens_per_turn > self.max_tokens_per_turn:
            raise ValueError(
                f"EpisodeConfig.min_tokens_per_turn ({self.min_tokens_per_turn}) exceeds "
                f"max_tokens_per_turn ({self.max_tokens_per_turn})"
            )
        if not self.stop_tokens:
            raise ValueError("EpisodeConfig.stop_tokens is empty: turns would only end by max_tokens")
        if self.observation_role not in ("user", "tool"):
            raise ValueError(
                f"EpisodeConfig.observation_role must be user or tool, got {self.observation_role!r}"
            )
        if self.inference_retries < 0:
            raise ValueError(f"EpisodeConfig.inference_retries must be >= 0, got {self.inference_retries}")
