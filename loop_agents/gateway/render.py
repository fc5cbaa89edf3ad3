"""A conversation -> the prompt ids the model is sampled on, with the model's own messages as their recorded ids.

The whole conversation is rendered once with the learner's chat template (`apply_chat_template`, `tools=` the
request's tools), each assistant message the gateway answered replaced by a placeholder. The text is cut at the
placeholders, each piece tokenized alone, and in place of each placeholder go the ids that call was prompted and
sampled with:

    piece_0  [generation prompt ids + sampled ids]_1  piece_1  ...  piece_n  generation prompt ids

The template's own assistant header before a placeholder (`<|im_start|>assistant\\n`) is dropped (the recorded
generation prompt stands for it: with Qwen3 thinking off it also holds the empty think block the template leaves
out of earlier turns), and so is its `<|im_end|>` after one when the model sampled it (a turn cut by max_tokens
keeps it, as context). Every piece starts right after a special token, so tokenizing it alone gives the ids it has
in the whole text (rollout/chat.py explains why); a piece of an earlier call is therefore the same ids again, and
a program that sends its history back unchanged gets a prompt that extends the previous one token for token.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from loop_agents.gateway.messages import RequestError
from loop_agents.rollout.chat import ChatFormat, ChatTemplateError

_PLACEHOLDER = "\u2063SPLICE{}\u2063"
PIECES_CACHED = 4096  # pieces whose ids are kept: a program sends its history back with every call


class ConversationRenderer:
    """Renders conversations for one tokenizer and chat template (build once per worker)."""

    def __init__(
        self, tokenizer: Any, *, turn_end_token: str = "<|im_end|>", enable_thinking: bool | None = None
    ) -> None:
        self.chat = ChatFormat(tokenizer, turn_end_token=turn_end_token, enable_thinking=enable_thinking)
        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        base_text = self._render(base, None)
        probe = _PLACEHOLDER.format(0)
        turn = self._render(
            [*base, {"role": "assistant", "content": probe}, {"role": "user", "content": "v"}], None
        )
        if not turn.startswith(base_text) or turn.count(probe) != 1:
            raise ChatTemplateError("the template does not render an assistant message as its content once")
        header, after = turn[len(base_text) :].split(probe)
        if not after.startswith(turn_end_token):
            raise ChatTemplateError(f"the template does not end assistant turns with {turn_end_token!r}")
        self.assistant_header = header  # e.g. "<|im_start|>assistant\n"
        # a piece's ids depend on its text only (it starts after a special token): each history piece is tokenized
        # once, not again at every call of the episode (4.5 encodes a call, 7 ms, before)
        self._piece_ids = functools.lru_cache(maxsize=PIECES_CACHED)(
            lambda text: tuple(self.chat.encode(text))
        )

    @property
    def generation_prompt_ids(self) -> list[int]:
        return self.chat.generation_prompt_ids

    def _render(self, messages: Sequence[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        kwargs = dict(self.chat.template_kwargs)
        if tools:
            kwargs["tools"] = tools
        return self.chat.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=False, **kwargs
        )

    def prompt_ids(
        self,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        spliced: dict[int, tuple[list[int], list[int]]],
    ) -> list[int]:
        """Prompt ids of `messages` (template form) ending in the generation prompt; `spliced` maps the index of
        an assistant message the model wrote to (its call's generation prompt ids, its sampled ids)."""
        if messages and messages[-1]["role"] == "assistant":
            raise RequestError(
                400, "the conversation ends with an assistant message; prefill is not supported"
            )
        shown = [
            {"role": "assistant", "content": _PLACEHOLDER.format(i)} if i in spliced else dict(m)
            for i, m in enumerate(messages)
        ]
        try:
            text = self._render(shown, tools)
        except (
            Exception
        ) as err:  # jinja raises what the template raises (a bad tool schema, a role it refuses)
            raise RequestError(400, f"the chat template cannot render these messages: {err}") from err
        ids: list[int] = []
        position = 0
        end_token = self.chat.turn_end_token
        for i in sorted(spliced):
            placeholder = self.assistant_header + _PLACEHOLDER.format(i)
            at = text.find(placeholder, position)
            if at < 0:
                raise ChatTemplateError(f"message {i} was not rendered as an assistant turn of its own")
            ids += self._piece_ids(text[position:at])
            generation_prompt, sampled = spliced[i]
            ids += generation_prompt + sampled
            position = at + len(placeholder)
            if not text.startswith(end_token, position):
                raise ChatTemplateError(
                    f"the template did not close assistant message {i} with {end_token!r}"
                )
            if sampled and sampled[-1] == self.chat.turn_end_id:
                position += len(end_token)  # the model sampled it; the template's copy would be a second one
        ids += self._piece_ids(text[position:])
        return ids + self.chat.generation_prompt_ids
