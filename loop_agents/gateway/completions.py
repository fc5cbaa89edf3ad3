"""One `POST /v1/chat/completions` of an episode: budgets, prompt ids, sampling, tool calls, the OpenAI response.

What the gateway takes from the request and what it does not (docs/gateway.md):
- `messages`, `tools` (rendered by the learner's chat template), `max_tokens` / `max_completion_tokens` (capped
  by the run's `llm.max_new_tokens` and the context left), `n` (1 only), `stream`, `tool_choice` (`none`: the
  reply's text is not parsed for calls; others parse it; sampling is never constrained, since the learner trains
  the policy's own distribution).
- `temperature`, `top_p`, `seed`, `stop`, `model`: accepted, not applied: the run samples at its own temperature
  (the sampler's log-probs are then the policy's, which PPO's ratio needs) and seeds each call as the in-process
  loop does. A different temperature asked for is counted under `metadata["gateway_overrides"]`.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from typing import Any

from loop_agents.gateway.messages import RequestError, assistant_key, template_messages
from loop_agents.gateway.session import EpisodeSession
from loop_agents.inference.protocol import Completion, InferenceFailure, SamplingParams
from loop_agents.rollout.agent import answer_text
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.errors import ToolCallError, ToolErrorKind


def _request_tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list) or any(
        not isinstance(t, dict) or not isinstance((t.get("function") or {}).get("name"), str) for t in tools
    ):
        raise RequestError(400, 'tools must be a list of {"type": "function", "function": {"name": ...}}')
    return tools or None


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(400, f"max_tokens must be a whole number >= 1, got {value!r}")
    return value


def _seed(session: EpisodeSession, call: int) -> int | None:
    traj, seed = session.recorder.trajectory, session.cfg.seed
    if seed is None:
        return None
    return (
        seed * 1_000_003 + zlib.crc32(traj.task_id.encode()) * 7_919 + traj.sample_index * 104_729 + call
    ) % 2**31


async def _sample(session: EpisodeSession, prompt_ids: list[int], params: SamplingParams) -> Completion:
    """The generator's completion, retried as the in-process loop retries; INFERENCE_ERROR ends the episode."""
    cfg, errors = session.cfg, []
    for attempt in range(cfg.inference_retries + 1):
        if attempt:
            await asyncio.sleep(cfg.inference_retry_backoff_s * 2 ** (attempt - 1))
        try:
            request = session.generator.generate(list(prompt_ids), params)
            timeout = cfg.generation_timeout_s
            completion = await (request if timeout is None else asyncio.wait_for(request, timeout))
            n = len(completion.token_ids)
            if n == 0 or n > params.max_tokens or len(completion.logprobs) != n:
                raise InferenceFailure(f"malformed completion: {n} ids, {len(completion.logprobs)} logprobs")
            return completion
        except (InferenceFailure, TimeoutError) as err:
            errors.append(f"{type(err).__name__}: {err}")
        except Exception as err:  # a request the server rejects: retrying will not help
            errors.append(f"{type(err).__name__}: {err}")
            break
    session.end(FinishReason.INFERENCE_ERROR, f"{len(errors)} attempts failed; last: {errors[-1]}")
    raise RequestError(503, "the inference server failed; the episode is over", "inference_error")


def assistant_reply(
    session: EpisodeSession, text: str, parse_calls: bool
) -> tuple[str | None, list[Any], str]:
    """(content, calls, reasoning) of the sampled text; a malformed call is left as text and counted by kind."""
    answer = answer_text(text)
    reasoning = text.rsplit("</think>", 1)[0].split("<think>", 1)[-1].strip() if "</think>" in text else ""
    if answer is None:  # cut inside its thinking: no answer, nothing to call
        return text, [], ""
    if not parse_calls:
        return answer, [], reasoning
    try:
        parsed = session.parser.parse(answer)
    except ToolCallError as err:
        if err.kind != ToolErrorKind.NO_CALL:
            session.count("tool_errors", err.kind.value)
        return answer, [], reasoning
    return parsed.content or None, parsed.calls, reasoning


async def chat_completion(session: EpisodeSession, body: dict[str, Any]) -> dict[str, Any]:
    """Answer one chat-completion request of the episode (RequestError for what the program sees as an error)."""
    if body.get("n", 1) != 1:
        raise RequestError(400, "n must be 1: every sample is one call of the episode")
    messages = template_messages(body.get("messages"))
    tools = _request_tools(body)
    requested_max = _max_tokens(body)
    parse_calls = body.get("tool_choice", "auto") != "none"
    async with session.model_lock:
        session.check_open()
        session.model_calls += 1
        call_index = session.model_calls - 1
        if session.model_calls > session.call_budget:
            session.end(FinishReason.TURN_BUDGET, f"more than {session.call_budget} model calls")
            raise RequestError(
                429, f"the episode's budget of {session.call_budget} model calls is spent", "call_budget"
            )
        temperature = body.get("temperature")
        if temperature is not None and temperature != session.cfg.temperature:
            session.count("gateway_overrides", "temperature")
        recorder, cfg = session.recorder, session.cfg
        splices = recorder.splices(messages)
        sent_back = sum(m["role"] == "assistant" for m in messages)
        if sent_back:  # the model's own messages as their recorded ids; others (the program's text) as text
            counts = recorder.trajectory.metadata.setdefault("assistant_messages", {})
            counts["spliced"] = counts.get("spliced", 0) + len(splices)
            counts["as_text"] = counts.get("as_text", 0) + sent_back - len(splices)
        prompt_ids = session.renderer.prompt_ids(messages, tools, splices)
        _, added = recorder.new_context(prompt_ids)
        close_reserve = 1 + len(session.renderer.chat.after_turn_end_ids)
        room = cfg.max_context_tokens - recorder.trajectory.num_tokens - added - close_reserve
        if room < cfg.min_tokens_per_turn:
            session.end(
                FinishReason.CONTEXT_BUDGET, f"the call would leave {room} tokens of the episode's context"
            )
            raise RequestError(400, "the episode's context budget is spent", "context_length_exceeded")
        last = messages[-1]
        recorder.place_prompt(prompt_ids, observation_text=last["content"] if last["role"] == "tool" else "")
        params = SamplingParams(
            max_tokens=min(cfg.max_tokens_per_turn, room, requested_max or cfg.max_tokens_per_turn),
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            stop_token_ids=session.renderer.chat.stop_token_ids(cfg.stop_tokens),
            seed=_seed(session, call_index),
        )
        started = time.perf_counter()
        completion = await _sample(session, prompt_ids, params)
        text = session.renderer.chat.decode(completion.token_ids)
        content, calls, reasoning = assistant_reply(session, text, parse_calls)
        key = assistant_key(content or "", [(c.name, c.arguments) for c in calls])
        action = "; ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in calls)
        recorder.record(
            session.renderer.generation_prompt_ids,
            completion,
            key,
            action or (content or ""),
            time.perf_counter() - started,
        )
        recorder.trajectory.messages = [*messages, {"role": "assistant", "content": text}]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{call_index}_{j}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
            }
            for j, call in enumerate(calls)
        ]
    if reasoning:
        message["reasoning_content"] = reasoning
    finish = "tool_calls" if calls else ("length" if completion.finish_reason == "length" else "stop")
    return {
        "id": f"chatcmpl-{call_index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "policy"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(completion.token_ids),
            "total_tokens": len(prompt_ids) + len(completion.token_ids),
        },
    }


def stream_chunks(response: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The response as `chat.completion.chunk` events (whole content in one delta; one delta per call)."""
    choice = response["choices"][0]
    message = choice["message"]
    base = {k: response[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    chunks = [chunk({"role": "assistant", "content": message["content"] or ""})]
    for j, call in enumerate(message.get("tool_calls", [])):
        chunks.append(chunk({"tool_calls": [{"index": j, **call}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append(base | {"choices": [], "usage": response["usage"]})
    return chunks
