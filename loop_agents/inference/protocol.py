"""What rollouts need from inference: token ids in, sampled token ids and logprobs out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol


class InferenceFailure(RuntimeError):
    """The inference server failed or timed out; the caller may retry the request."""


@dataclass
class SamplingParams:
    """Per-request sampling settings (vLLM `/v1/completions` semantics)."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None
    # vLLM stops at the model's EOS unless this is set (stop_token_ids still stop); HFGenerator stops only at
    # stop_token_ids, as if it were always set
    ignore_eos: bool = False


@dataclass
class Completion:
    """One sampled continuation, token-exact."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (a stop token was sampled, and is included) or "length"
    adapter: str | None = None  # the LoRA adapter name that served the request


class TokenGenerator(Protocol):
    """Anything that samples continuations of token-id prompts (the vLLM client implements it)."""

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion: ...


# new sampled ids and their log-probs, in order, as the sampler produces them
TokenSink = Callable[[list[int], list[float]], Awaitable[None]]


class StreamingTokenGenerator(TokenGenerator, Protocol):
    """A TokenGenerator that can also hand over the sampled ids while it samples (the gateway's `stream: true`)."""

    async def generate_streaming(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink
    ) -> Completion:
        """`generate`'s Completion (the same sample for the same request and seed); before returning it, awaits
        `on_tokens(ids, logprobs)` for the ids as they are sampled, which concatenated are its `token_ids`."""
        ...
