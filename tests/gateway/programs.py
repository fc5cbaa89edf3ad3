"""Agent programs the gateway tests run (each in a process of its own, as `agent.program=tests.gateway.programs:<name>`).

`openai_tool_loop` is the `openai` package's tool-calling loop as its docs write it (a chat completion with
`tools`, the assistant message appended as returned, one `tool` message per call, until a reply calls no tool),
`openai_conversation` the openai docs' conversation state kept by hand, `smolagents_tool_calling` smolagents'
ToolCallingAgent (pinned in the dev extra) on the gateway as an OpenAI-compatible server; `docs_examples` splits a
task's rollouts over them. The others misbehave in one way each.
"""

from __future__ import annotations

import json
import os
import time

from loop_agents.gateway.tool_functions import RemoteTool


def openai_tool_loop(task, base_url, api_key, tools):
    """The openai client's tool-calling loop, as in the OpenAI function-calling guide."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key)
    functions = {tool.__name__: tool for tool in tools}
    messages = list(task["messages"])
    while True:
        completion = client.chat.completions.create(
            model="policy", messages=messages, tools=[tool.schema for tool in tools]
        )
        message = completion.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content
        for tool_call in message.tool_calls:
            function = functions.get(tool_call.function.name)
            arguments = json.loads(tool_call.function.arguments)
            result = function(**arguments) if function else f"no tool {tool_call.function.name}"
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": str(result)})


def openai_conversation(task, base_url, api_key, tools, window=None):
    """The openai docs' conversation state, managed by hand: each reply appended to the history with the next user
    message, the whole history sent again. `window`: keep only the first message and the last `window` (as
    programs that trim their history do; the gateway then opens a new segment)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key)
    history = list(task["messages"])
    for follow_up in ("Go on.", "And then?", None):
        sent = history if window is None else [history[0], *history[-window:]]
        response = client.chat.completions.create(model="policy", messages=sent)
        if follow_up is None:
            return response.choices[0].message.content
        history.append(response.choices[0].message)
        history.append({"role": "user", "content": follow_up})


def docs_examples(task, base_url, api_key, tools):
    """The K rollouts of a task split over programs written from their docs, by sample index: the openai tool loop
    (0), the openai docs' conversation kept by hand (1), the same with a trimmed history (2), smolagents'
    ToolCallingAgent (3). A barely trained model seldom writes a call the tool loop can run, so its episodes are
    one call; the others send the model's messages back on every call, and the trimmed one rewrites its history."""
    index = task["sample_index"] % 4
    if index == 0:
        return openai_tool_loop(task, base_url, api_key, tools)
    if index == 3:
        return smolagents_tool_calling(task, base_url, api_key, tools)
    return openai_conversation(task, base_url, api_key, tools, window=None if index == 1 else 2)


def openai_streaming_loop(task, base_url, api_key, tools):
    """One streamed call (`stream=True`), the deltas joined as the openai docs show."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key)
    stream = client.chat.completions.create(
        model="policy", messages=task["messages"], tools=[t.schema for t in tools], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    print(f"streamed {len(text)} characters")


def hangs(task, base_url, api_key, tools):
    time.sleep(3600)


def crashes(task, base_url, api_key, tools):
    raise RuntimeError("boom: the program's own bug")


def calls_unknown_tool(task, base_url, api_key, tools):
    """A tool the family does not declare (an error result, not a crash), then a real one."""
    teleport = RemoteTool({"function": {"name": "teleport"}}, os.environ["LOOP_AGENTS_TOOLS_URL"], api_key)
    result = teleport(to="the gem")
    assert result.startswith("Error (unknown_tool)"), result
    print(tools[0](container="red box"))


def floods(task, base_url, api_key, tools):
    """10,000 model calls, whatever the answers."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    for _ in range(10_000):
        try:
            client.chat.completions.create(model="policy", messages=task["messages"], max_tokens=4)
        except Exception:
            pass


def never_calls_the_model(task, base_url, api_key, tools):
    return "nothing"


def smolagents_tool_calling(task, base_url, api_key, tools):
    """smolagents' ToolCallingAgent on an OpenAI-compatible server, as its docs set one up
    (`OpenAIServerModel(model_id=..., api_base=..., api_key=...)`), with the episode's tools as smolagents Tools."""
    from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

    def as_tool(remote):
        properties = remote.schema["function"]["parameters"]["properties"]

        class GatewayTool(Tool):
            name = remote.__name__
            description = remote.__doc__
            inputs = {
                key: {"type": spec.get("type", "string"), "description": spec.get("description", key)}
                for key, spec in properties.items()
            }
            output_type = "string"
            skip_forward_signature_validation = True

            def forward(self, **arguments):
                return remote(**arguments)

        return GatewayTool()

    model = OpenAIServerModel(model_id="policy", api_base=base_url, api_key=api_key)
    agent = ToolCallingAgent(tools=[as_tool(tool) for tool in tools], model=model, max_steps=2)
    return agent.run(task["prompt"])


def leaves_a_grandchild(task, base_url, api_key, tools):
    """Starts a process of its own (in its group), writes its pid to $GRANDCHILD_PID_FILE, and hangs."""
    import subprocess

    grandchild = subprocess.Popen(["sleep", "600"])
    with open(os.environ["GRANDCHILD_PID_FILE"], "w") as out:
        out.write(f"{os.getpid()} {grandchild.pid}")
    time.sleep(3600)


def shows_its_environment(task, base_url, api_key, tools):
    """Exits with what its process holds of the episode and of the run's secrets as its last line."""
    import sys

    names = ("LOOP_AGENTS_TASK_ID", "OPENAI_API_KEY", "VLLM_API_KEY", "WANDB_API_KEY")
    seen = {name: os.environ.get(name) for name in names}
    sys.exit(json.dumps({**seen, "openai_imported": "openai" in sys.modules}))
