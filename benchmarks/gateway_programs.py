"""The agent program of the gateway's throughput benchmark (benchmarks/gateway_throughput.py).

`persistent_tool_loop` is the openai package's tool-calling loop (as tests/gateway/programs.py:openai_tool_loop)
that, like the in-process tool-calling agent, answers a reply without a tool call with a message asking for one
and goes on until the episode ends (the environment's done or the turn budget): with a model that seldom calls a
tool, both sides then make the same number of model calls an episode, so their rates compare.
"""

from __future__ import annotations

import json


def persistent_tool_loop(task, base_url, api_key, tools):
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    functions = {tool.__name__: tool for tool in tools}
    messages = list(task["messages"])
    while True:
        try:
            completion = client.chat.completions.create(
                model="policy", messages=messages, tools=[tool.schema for tool in tools]
            )
        except Exception:  # the episode ended (done or out of budget): the gateway refuses further calls
            return None
        message = completion.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            messages.append({"role": "user", "content": "Call one of the tools."})
            continue
        for tool_call in message.tool_calls:
            function = functions.get(tool_call.function.name)
            try:
                arguments = json.loads(tool_call.function.arguments)
                result = function(**arguments) if function else f"no tool {tool_call.function.name}"
            except Exception as err:
                result = f"Error: {err}"
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": str(result)})


def text_action_loop(task, base_url, api_key, tools):
    """A ReAct-style program that prompts without `tools=`: the model replies with a text action (`open red box`,
    `answer 4 7`), the program calls the matching tool and sends the result back as the next user message, as the
    family's text agent lays out its episodes (run it with `agent.program_prompts=text`). A reply that is neither is
    answered with the game's usage line (no move is spent on it)."""
    import re

    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    functions = {tool.__name__: tool for tool in tools}
    patterns = {
        "open": re.compile(r"^\s*open (.+?)\s*$", re.I),
        "answer": re.compile(r"^\s*answer (.+?)\s*$", re.I),
    }
    keys = {"open": "container", "answer": "code"}
    messages = list(task["messages"])
    while True:
        try:
            completion = client.chat.completions.create(model="policy", messages=messages)
        except Exception:  # the episode ended (done or out of budget): the gateway refuses further calls
            return None
        reply = completion.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": reply})
        result = "Unknown action. Use open <color> <thing> or answer <code>."
        for name, pattern in patterns.items():
            if match := pattern.match(reply):
                result = str(functions[name](**{keys[name]: match.group(1)}))
                break
        messages.append({"role": "user", "content": result})
