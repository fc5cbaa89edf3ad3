"""A TokenGenerator backed by a Hugging Face transformers model (CPU tests, small models, debugging).

Token-in/token-out like the vLLM client: prompt ids in; sampled ids (the stop token included when
one was sampled) and their log-probabilities out. Sampling is ancestral with a KV cache: temperature
(0 = greedy), then top-k, then top-p filtering, then a draw from the renormalised distribution.

Log-probabilities are those of the model's raw distribution, log softmax(logits), before temperature
and filtering: this is vLLM's default `logprobs_mode="raw_logprobs"`, so both backends report the
same quantity (the policy's log pi(token), which is what PPO needs at temperature 1).

Requests are served one at a time in a worker thread (the event loop stays free); a model shared by
many concurrent episodes therefore serialises them, which is fine for the tiny models it is meant for.
`generate_streaming` is the same sampling, each sampled id handed to the event loop as it is drawn.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from loop_agents.inference.protocol import Completion, InferenceFailure, SamplingParams, TokenSink


class HFTokenGenerator:
    """Sample continuations of token-id prompts with a transformers causal LM."""

    def __init__(self, model: Any, *, max_model_len: int | None = None, seed: int = 0) -> None:
        """`model` is a loaded `PreTrainedModel` or a model directory; `seed` seeds unseeded requests."""
        if isinstance(model, str | Path):
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32)
        self.model = model.eval()
        self.vocab_size = int(model.config.vocab_size)
        self.max_model_len = int(max_model_len or model.config.max_position_embeddings)
        self._rng = torch.Generator(device="cpu").manual_seed(seed)
        self._lock = threading.Lock()

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        prompt = list(prompt_ids)  # the caller may keep appending to its list while we sample
        return await asyncio.to_thread(self._generate_sync, prompt, params)

    async def generate_streaming(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink
    ) -> Completion:
        """`generate`, awaiting `on_tokens` with the ids drawn since its last call whenever the loop gets to it."""
        loop = asyncio.get_running_loop()
        drawn: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()  # None: sampling is over

        def hand_over(item: tuple[int, float] | None) -> None:  # in the worker thread
            try:
                loop.call_soon_threadsafe(drawn.put_nowait, item)
            except RuntimeError:  # the caller's loop is gone (it was cancelled): nobody is listening
                pass

        def sample() -> Completion:
            try:
                return self._generate_sync(prompt, params, lambda token, lp: hand_over((token, lp)))
            finally:
                hand_over(None)

        prompt = list(prompt_ids)
        work = asyncio.ensure_future(asyncio.to_thread(sample))
        try:
            over = False
            while not over:
                batch = [await drawn.get()]
                while not drawn.empty():
                    batch.append(drawn.get_nowait())
                over = batch[-1] is None
                ids = [item for item in batch if item is not None]
                if ids:
                    await on_tokens([token for token, _ in ids], [lp for _, lp in ids])
            return await work
        finally:
            work.cancel()  # a cancelled caller: the thread finishes its sample, nobody waits for it

    def _generate_sync(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        emit: Callable[[int, float], None] | None = None,
    ) -> Completion:
        self._check_request(prompt_ids, params)
        with self._lock:
            try:
                return self._sample(prompt_ids, params, emit)
            except RuntimeError as err:  # torch errors, out-of-memory included
                raise InferenceFailure(f"generation failed: {err}") from err

    def _check_request(self, prompt_ids: list[int], params: SamplingParams) -> None:
        if not prompt_ids:
            raise ValueError("empty prompt")
        bad = [t for t in prompt_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt has ids outside the vocabulary [0, {self.vocab_size}): {bad[:5]}")
        if params.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {params.max_tokens}")
        if len(prompt_ids) + params.max_tokens > self.max_model_len:
            raise ValueError(
                f"prompt ({len(prompt_ids)}) + max_tokens ({params.max_tokens}) exceeds "
                f"max_model_len ({self.max_model_len})"
            )
        if params.temperature < 0 or not 0 < params.top_p <= 1:
            raise ValueError(f"bad sampling params: temperature={params.temperature}, top_p={params.top_p}")

    @torch.inference_mode()
    def _sample(
        self, prompt_ids: list[int], params: SamplingParams, emit: Callable[[int, float], None] | None
    ) -> Completion:
        device = next(self.model.parameters()).device
        rng = self._rng if params.seed is None else torch.Generator(device="cpu").manual_seed(params.seed)
        stop = set(params.stop_token_ids)
        out = self.model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True)
        ids: list[int] = []
        logprobs: list[float] = []
        finish = "length"
        while True:
            logits = out.logits[0, -1].float().cpu()
            token = _draw(logits, params, rng)
            ids.append(token)
            logprobs.append(float(torch.log_softmax(logits, dim=-1)[token]))
            if emit is not None:
                emit(token, logprobs[-1])
            if token in stop:
                finish = "stop"
                break
            if len(ids) == params.max_tokens:
                break
            out = self.model(
                input_ids=torch.tensor([[token]], device=device),
                past_key_values=out.past_key_values,
                use_cache=True,
            )
        return Completion(token_ids=ids, logprobs=logprobs, finish_reason=finish)


def _draw(logits: torch.Tensor, params: SamplingParams, rng: torch.Generator) -> int:
    """One token from `logits` (1-D) under temperature / top-k / top-p; greedy at temperature 0."""
    if params.temperature == 0:
        return int(torch.argmax(logits))
    scaled = logits / params.temperature
    if 0 < params.top_k < scaled.numel():
        kth = torch.topk(scaled, params.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1:
        sorted_logits, order = torch.sort(scaled, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        drop_sorted = (
            sorted_probs.cumsum(-1) - sorted_probs >= params.top_p
        )  # mass before the token already >= p
        scaled = scaled.masked_fill(
            torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted), float("-inf")
        )
    probs = torch.softmax(scaled, dim=-1)
    return int(torch.multinomial(probs, 1, generator=rng))
