"""vLLM's `/v1/completions` replies -> `Completion`: a whole JSON reply, or a streamed one's server-sent events with
each chunk's ids handed over as they arrive. The sampled ids are the reply's `token_ids` (`return_token_ids`), else
its `logprobs.tokens` as `token_id:N` strings; an aborted choice is RequestAborted, anything malformed an
InferenceFailure."""

from __future__ import annotations

import json

import aiohttp

from loop_agents.inference.errors import RequestAborted
from loop_agents.inference.protocol import Completion, InferenceFailure, TokenSink

_TOKEN_PREFIX = "token_id:"


def _choice_tokens(choice: dict) -> tuple[list[int], list[float]]:
    """The sampled ids of a completion choice (or of one streamed chunk's) and their logprobs."""
    if choice.get("finish_reason") == "abort":
        raise RequestAborted("the server aborted the request")
    logprobs = choice.get("logprobs") or {}
    token_logprobs = logprobs.get("token_logprobs") or []
    token_ids = choice.get("token_ids")
    if token_ids is None:
        token_ids = [int(t.removeprefix(_TOKEN_PREFIX)) for t in logprobs.get("tokens") or []]
    if len(token_ids) != len(token_logprobs) or any(lp is None for lp in token_logprobs):
        raise InferenceFailure(
            f"malformed completion: {len(token_ids)} tokens but logprobs {token_logprobs[:8]}"
        )
    return list(token_ids), [float(lp) for lp in token_logprobs]


def _completion(token_ids, logprobs, finish: str | None, model: str | None, base_model: str) -> Completion:
    return Completion(
        token_ids=token_ids,
        logprobs=logprobs,
        finish_reason="stop" if finish == "stop" else "length",
        adapter=None if model == base_model else model,
    )


def parse_completion(payload: dict, base_model: str) -> Completion:
    choice = payload["choices"][0]
    token_ids, logprobs = _choice_tokens(choice)
    return _completion(token_ids, logprobs, choice.get("finish_reason"), payload.get("model"), base_model)


async def read_stream(reply: aiohttp.ClientResponse, on_tokens: TokenSink, base_model: str) -> Completion:
    """A streamed completion's server-sent events -> the Completion, each chunk's ids handed to `on_tokens`.
    Events are split by hand: the first chunk echoes the prompt's ids, a line longer than aiohttp's line limit."""
    token_ids: list[int] = []
    logprobs: list[float] = []
    finish = model = None
    buffer = b""
    async for data in reply.content.iter_any():
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            try:
                payload = json.loads(line[5:])
            except json.JSONDecodeError as err:
                raise InferenceFailure(f"malformed stream event: {err}") from None
            if "error" in payload:
                raise InferenceFailure(f"the server failed while streaming: {str(payload['error'])[:300]}")
            model = payload.get("model", model)
            for choice in payload.get("choices") or []:
                ids, lps = _choice_tokens(choice)
                finish = choice.get("finish_reason") or finish
                if ids:
                    token_ids += ids
                    logprobs += lps
                    await on_tokens(ids, lps)
    if finish is None:
        raise InferenceFailure(f"the stream ended after {len(token_ids)} ids without a finish reason")
    return _completion(token_ids, logprobs, finish, model, base_model)
