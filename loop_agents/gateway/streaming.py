"""`stream: true` as the sampler produces it: sampled ids as they arrive -> content deltas sent while sampling.

A reply's content is made when the call ends (completions.assistant_reply): the answer after any thinking, without
its tool calls, which are parsed from the whole text. While sampling, a delta is sent only for text the final
content will start with whatever comes next:

- nothing while the text is inside thinking (`<think>` seen, or opened by the generation prompt, and `</think>`
  not yet); after `</think>`, only what
  follows it (the reasoning is sent once, at the end, as `reasoning_content`);
- when calls are parsed, nothing from the call tag (`<tool_call>`) on: the calls are sent parsed at the end;
- held back until more text comes: trailing whitespace (the content of a reply with calls is stripped), a tail that
  could be the start of one of those tags, and a character whose bytes are not all sampled yet (U+FFFD).

When the call ends the rest of the final content is sent, so the deltas join to it. One case cannot be known in
time: a reply that writes text, then calls a tool, has its content stripped, but leading whitespace already sent
stays sent (the gateway matches messages sent back by their stripped text, so splicing is unaffected). A joined
text that is not the final content (that, or thinking opened after text was sent) is counted under
`metadata["gateway_stream"]["diverged"]`.

The sampled ids and log-probs are recorded exactly as for a call that is not streamed: the stream only reads them.
A sink (the HTTP response) that fails stops the deltas, never the sampling or its recording.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

ChunkSink = Callable[[dict[str, Any]], Awaitable[None]]  # sends one `chat.completion.chunk` to the program


def _hold_tag_start(text: str, tags: tuple[str, ...]) -> str:
    """`text` without a tail that could grow into one of `tags`."""
    cut = len(text)
    for tag in tags:
        for size in range(min(len(tag) - 1, len(text)), 0, -1):
            if text.endswith(tag[:size]):
                cut = min(cut, len(text) - size)
                break
    return text[:cut]


def opens_thinking(prompt_text: str) -> bool:
    """Whether a generation prompt leaves the model inside `<think>` (templates that open it for the model)."""
    return THINK_OPEN in prompt_text and THINK_CLOSE not in prompt_text.rsplit(THINK_OPEN, 1)[1]


def certain_content(text: str, call_tag: str | None, thinking: bool = False) -> str:
    """The part of the reply's final content that the sampled `text` so far already fixes (`thinking`: the
    generation prompt opened the thinking)."""
    if THINK_CLOSE in text:
        text = text.rsplit(THINK_CLOSE, 1)[1]
    elif THINK_OPEN in text or thinking:
        return ""
    if call_tag is not None and call_tag in text:
        text = text[: text.index(call_tag)]
    tags = (THINK_OPEN, THINK_CLOSE) + ((call_tag,) if call_tag else ())
    return _hold_tag_start(text.rstrip("\ufffd"), tags).rstrip()


class IncrementalText:
    """The text of ids that keep coming, decoded a few ids at a time (a whole decode per id would cost quadratic
    time on a long reply): each step decodes the ids since the previous step's start and appends what they add,
    once no character is left half sampled (vLLM's incremental detokenizing; exact for byte-level tokenizers)."""

    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self._decode = decode
        self.ids: list[int] = []
        self.text = ""
        self._prefix = self._read = (
            0  # the window: ids[_prefix:_read] were decoded last time, ids[_read:] are new
        )

    def extend(self, ids: list[int]) -> str:
        self.ids += ids
        before = self._decode(self.ids[self._prefix : self._read])
        now = self._decode(self.ids[self._prefix :])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self.text += now[len(before) :]
            self._prefix, self._read = self._read, len(self.ids)
        return self.text


class ContentStream:
    """One streamed call: takes the sampled ids as they come and sends `chat.completion.chunk`s: the content
    deltas they make certain, then (`finish`) the rest of the reply."""

    def __init__(
        self,
        decode: Callable[[list[int]], str],
        call_tag: str | None,
        head: dict[str, Any],
        send_chunk: ChunkSink,
        include_usage: bool,
        thinking: bool = False,
    ) -> None:
        self._decode, self._call_tag, self._send_chunk = decode, call_tag, send_chunk
        self._thinking = thinking
        self._base = {"id": head["id"], "object": "chat.completion.chunk", "created": head["created"]}
        self._base["model"] = head["model"]
        self._include_usage = include_usage
        self._text = IncrementalText(decode)
        self.sent = ""  # the content sent so far
        self._started = self._broken = False

    @property
    def token_ids(self) -> list[int]:
        """The ids handed over so far."""
        return self._text.ids

    async def on_tokens(self, ids: list[int], logprobs: list[float]) -> None:
        """The generator's TokenSink: more sampled ids."""
        certain = certain_content(self._text.extend(ids), self._call_tag, self._thinking)
        if len(certain) > len(self.sent) and certain.startswith(self.sent):
            delta = certain[len(self.sent) :]
            self.sent = certain
            await self._send({"content": delta})

    def restart(self) -> None:
        """A retried sample (allowed only while no content was sent): forget the failed one's ids."""
        self._text = IncrementalText(self._decode)

    async def finish(self, response: dict[str, Any], diverged: Callable[[], None]) -> None:
        """The rest of `response` (the whole reply): its content not yet sent, its calls, its reasoning, its
        finish reason, and the usage if asked for. `diverged()` when the content sent is not the reply's start."""
        choice = response["choices"][0]
        message = choice["message"]
        content = message["content"] or ""
        if content.startswith(self.sent):
            rest = content[len(self.sent) :]
        else:
            diverged()
            stripped = self.sent.lstrip()
            rest = content[len(stripped) :] if content.startswith(stripped) else ""
        if rest or not self._started:
            await self._send({"content": rest})
        for j, call in enumerate(message.get("tool_calls", [])):
            await self._send({"tool_calls": [{"index": j, **call}]})
        if message.get("reasoning_content"):
            await self._send({"reasoning_content": message["reasoning_content"]})
        await self._send({}, choice["finish_reason"])
        if self._include_usage:
            await self._write(self._base | {"choices": [], "usage": response["usage"]})

    async def _send(self, delta: dict[str, Any], finish: str | None = None) -> None:
        if not self._started:
            delta = {"role": "assistant", **delta}
            self._started = True
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        await self._write(self._base | {"choices": [choice]})

    async def _write(self, chunk: dict[str, Any]) -> None:
        if self._broken:
            return
        try:
            await self._send_chunk(chunk)
        except Exception as err:  # the program went away: its call is still sampled and recorded
            self._broken = True
            log.info("a streamed reply could not be sent on: %s", err)
