"""One `POST /v1/chat/completions` of an episode: budgets, prompt ids, sampling, tool calls, the OpenAI response.

What the gateway takes from the request and what it does not (docs/gateway.md):
- `messages`, `tools` (rendered by the learner's chat template), `max_tokens` / `max_completion_tokens` (capped
  by the run's `llm.max_new_tokens` and the context left), `n` (1 only), `stream` (streaming.py: content deltas
  as the sampler produces the ids, when the generator can stream; `stream_options.include_usage`),
  `tool_choice` (`none`: the reply's text is not parsed for calls; others parse it; sampling is never
  constrained, since the learner trains the policy's own distribution).
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
from loop_agents.gateway.streaming import ChunkSink, ContentStream, opens_thinking
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


async def _sample(
    session: EpisodeSession, prompt_ids: list[int], params: SamplingParams, stream: ContentStream | None
) -> Completion:
    """The generator's completion, retried as the in-process loop retries; INFERENCE_ERROR ends the episode. With
    `stream` and a generator that can stream (`generate_streaming`), the ids go to `stream` as they are sampled;
    once content was sent, a failed sample is not retried (the program has its text)."""
    cfg, errors = session.cfg, []
    streaming = getattr(session.generator, "generate_streaming", None)
    if stream is None or streaming is None:
        stream = streaming = None
    for attempt in range(cfg.inference_retries + 1):
        if attempt:
            await asyncio.sleep(cfg.inference_retry_backoff_s * 2 ** (attempt - 1))
        try:
            if stream is not None and streaming is not None:
                stream.restart()
                request = streaming(list(prompt_ids), params, stream.on_tokens)
            else:
                request = session.generator.generate(list(prompt_ids), params)
            timeout = cfg.generation_timeout_s
            completion = await (request if timeout is None else asyncio.wait_for(request, timeout))
            n = len(completion.token_ids)
            if n == 0 or n > params.max_tokens or len(completion.logprobs) != n:
                raise InferenceFailure(f"malformed completion: {n} ids, {len(completion.logprobs)} logprobs")
            if stream is not None and stream.token_ids != completion.token_ids:
                raise InferenceFailure("the streamed ids are not the completion's")
            return completion
        except (InferenceFailure, TimeoutError) as err:
            errors.append(f"{type(err).__name__}: {err}")
            if stream is not None and stream.sent:
                break
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


async def chat_completion(
    session: EpisodeSession, body: dict[str, Any], send_chunk: ChunkSink | None = None
) -> dict[str, Any]:
    """Answer one chat-completion request of the episode (RequestError for what the program sees as an error).
    With `send_chunk` (`stream: true`) the reply also goes out as `chat.completion.chunk`s, the content while it
    is sampled (streaming.py); the returned response is the same."""
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
        head = {
            "id": f"chatcmpl-{call_index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or "policy"),
        }
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
        stream = live = None
        if send_chunk is not None:
            call_tag = getattr(session.parser, "open_tag", None) if parse_calls else None
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chat = session.renderer.chat
            thinking = opens_thinking(chat.decode(session.renderer.generation_prompt_ids))
            stream = ContentStream(chat.decode, call_tag, head, send_chunk, include_usage, thinking)
            # a parser that names no call tag: where a call starts is known only at the end
            live = stream if call_tag is not None or not parse_calls else None
        started = time.perf_counter()
        completion = await _sample(session, prompt_ids, params, live)
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
    response = head | {
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(completion.token_ids),
            "total_tokens": len(prompt_ids) + len(completion.token_ids),
        },
    }
    if stream is not None:
        await stream.finish(response, lambda: session.count("gateway_stream", "diverged"))
    return response
