"""Chat templates applied turn by turn, in token ids (token-in/token-out).

`ChatFormat` learns, once, how a tokenizer's chat template renders the pieces of a multi-turn
conversation, then builds the sequence incrementally:

    initial_ids(messages)          system + few-shot + task, rendered once with the template
    generation_prompt_ids          e.g. `<|im_start|>assistant\\n` (Qwen3 thinking off adds an empty think block)
    <sampled ids, stored as sampled, never decoded and re-encoded>
    close_turn_ids(sampled ids)    `<|im_end|>` only if the turn did not end with it (cut by max_tokens),
                                   then the template's text after the end token (`\\n`)
    observation_ids(text)          the observation rendered in the template's turn format
                                   (`<|im_start|>user\\n…<|im_end|>\\n`), tokenized alone: O(new tokens); with
                                   observation_role "tool" Qwen wraps it in `<tool_response>\\n…\\n</tool_response>`
With `tools` (a tool-calling agent) every rendering passes them to the template, so the system turn declares them.

Why tokenizing a piece alone gives the same ids as tokenizing the whole rendered conversation:
every piece starts right after a special token and ends with one (or is the lone `\\n` between
`<|im_end|>` and `<|im_start|>`); a Hugging Face tokenizer splits the text on special tokens before
pre-tokenization and BPE, so no merge can cross a piece boundary. tests/rollout/test_chat.py checks
this against `apply_chat_template` on whole conversations.

Where the ids differ from the template applied to the whole conversation (by design: training uses
exactly the ids the model was prompted with and sampled; a conversation re-rendered by the template
would not be a prefix-extension of what was sampled):
- Qwen3, thinking on, observations as `user` messages: the template drops the `<think>…</think>`
  of assistant turns before the last user message; we keep them, since the model saw them when it
  sampled later turns (ml-loop does the same; docs/reference-ml-loop.md §3.5). With
  `observation_role="tool"` the template keeps them too, and the ids are equal.
- Qwen3, thinking off: the generation prompt carries an empty `<think>\\n\\n</think>\\n\\n` that the
  template omits when it re-renders earlier assistant turns; we keep it (it was in the prompt).
- A turn cut by max_tokens, or ended by a stop token other than the turn-end token
  (`<|endoftext|>`): the template would render text + `<|im_end|>`; we keep the sampled ids and append
  `<|im_end|>` as context (loss mask 0), so the model is never trained to emit a synthetic stop.
- Model-sampled text that does not re-tokenize to the same ids (non-canonical BPE): ours are the
  sampled ids; the template's would be the canonical ones.
Text that spells a special token (e.g. `<|im_end|>` inside an observation) is parsed as that special
token, exactly as `apply_chat_template` and vLLM's chat endpoint do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

_PROBE = "\u2063PROBE\u2063"  # invisible separators: cannot occur in a template's own text
_PROBE_CHECK = 'tricky "content" {{ x }} <b>\n\n  ü 🙂 \\n'


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot be applied turn by turn as assumed."""


class ChatFormat:
    """Turn-by-turn token builder for one tokenizer + chat template (+ template options)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        turn_end_token: str = "<|im_end|>",
        observation_role: str = "user",
        enable_thinking: bool | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        """Probe the template once.

        `observation_role` is the role observations are rendered with ("user" or "tool");
        `enable_thinking` is passed to the template when not None (Qwen3); `tools` (OpenAI function schemas) are
        passed to every rendering, so the system turn declares them (a tool-calling agent).
        """
        if getattr(tokenizer, "chat_template", None) is None:
            raise ChatTemplateError("the tokenizer has no chat_template")
        if observation_role not in ("user", "tool"):
            raise ChatTemplateError(f"observation_role must be 'user' or 'tool', got {observation_role!r}")
        self.tokenizer = tokenizer
        self.observation_role = observation_role
        self.template_kwargs: dict[str, Any] = {}
        if enable_thinking is not None:
            self.template_kwargs["enable_thinking"] = enable_thinking
        self.tools = [dict(tool) for tool in tools] if tools else []
        if self.tools:
            self.template_kwargs["tools"] = self.tools
        # demonstration messages -> the form this chat's agent writes them in (tool calls for a tool-calling
        # agent); set by whoever knows the agent (orchestration/agent_choice.py), None: as written
        self.demonstration_form: Callable[[list[dict[str, str]]], list[dict[str, str]]] | None = None
        self.turn_end_token = turn_end_token
        self.turn_end_id = self._special_id(turn_end_token)

        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        base_text = self.render(base)
        if self.tools:
            _check_renders_tools(base_text, self.tools)
        self.generation_prompt_text = _suffix_after(
            self.render(base, add_generation_prompt=True), base_text, "generation prompt"
        )
        self.generation_prompt_ids: list[int] = self.encode(self.generation_prompt_text)

        turn = _suffix_after(
            self.render([*base, {"role": observation_role, "content": _PROBE}]), base_text, "observation turn"
        )
        if turn.count(_PROBE) != 1:
            raise ChatTemplateError(
                f"the template renders an observation as {turn!r}; expected the content once"
            )
        self.observation_prefix, self.observation_suffix = turn.split(_PROBE)
        check = self.render([*base, {"role": observation_role, "content": _PROBE_CHECK}])
        if check != base_text + self.observation_prefix + _PROBE_CHECK + self.observation_suffix:
            raise ChatTemplateError(
                "the template changes observation content; it cannot be rendered turn by turn"
            )

        assistant = self.render([*base, {"role": "assistant", "content": "a"}])
        if turn_end_token not in assistant:
            raise ChatTemplateError(f"the template does not end assistant turns with {turn_end_token!r}")
        self.after_turn_end_text = assistant[assistant.rindex(turn_end_token) + len(turn_end_token) :]
        self.after_turn_end_ids: list[int] = self.encode(self.after_turn_end_text)

    def _special_id(self, token: str) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == getattr(self.tokenizer, "unk_token_id", None):
            raise ChatTemplateError(f"token {token!r} is not in the tokenizer's vocabulary")
        return int(token_id)

    def render(self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = False) -> str:
        """The template applied to `messages`, as text."""
        return self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        """Tokenize rendered template text (special-token text becomes special tokens)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def stop_token_ids(self, names: Sequence[str]) -> list[int]:
        """Ids of the named stop tokens (e.g. `<|im_end|>`, `<|endoftext|>`), validated."""
        return [self._special_id(name) for name in names]

    def initial_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """The opening messages (system, few-shot, task) rendered once, without generation prompt."""
        if not messages:
            raise ChatTemplateError("the initial conversation is empty")
        return self.encode(self.render(messages))

    def observation_ids(self, content: str) -> list[int]:
        """One observation message in the template's turn format; O(len(content))."""
        return self.encode(self.observation_prefix + content + self.observation_suffix)

    def close_turn_ids(self, sampled_ids: Sequence[int]) -> list[int]:
        """Context ids that close an assistant turn: the end token if it was not sampled, then `\\n`."""
        if sampled_ids and sampled_ids[-1] == self.turn_end_id:
            return list(self.after_turn_end_ids)
        return [self.turn_end_id, *self.after_turn_end_ids]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of sampled ids without special tokens (invalid UTF-8 pieces become U+FFFD)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)


def _check_renders_tools(rendered: str, tools: Sequence[dict[str, Any]]) -> None:
    """A template without a `tools` branch ignores them: the model would never see what it may call."""
    for tool in tools:
        name = tool.get("function", tool).get("name", "")
        if f'"{name}"' not in rendered:
            raise ChatTemplateError(
                f"the chat template does not render tools (no {name!r} in its system turn)"
            )


def _suffix_after(text: str, prefix: str, what: str) -> str:
    if not text.startswith(prefix):
        raise ChatTemplateError(
            f"the template's rendering of a longer conversation does not extend the shorter one ({what})"
        )
    return text[len(prefix) :]
