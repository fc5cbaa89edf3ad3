"""An agent program run as a command (`agent.program="python tests/gateway/openai_command.py"`): the `openai`
package's tool-calling loop as its docs write it, configured only by its environment, as any program would be:
`OpenAI()` reads OPENAI_BASE_URL and OPENAI_API_KEY; the task and the tools come over plain HTTP from the gateway
(GET /task, GET and POST LOOP_AGENTS_TOOLS_URL, the same key as a Bearer token). Standard library besides openai."""

from __future__ import annotations

import json
import os
import urllib.request

from openai import OpenAI


def gateway(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
    )
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


def main() -> None:
    tools_url = os.environ["LOOP_AGENTS_TOOLS_URL"]
    task = gateway(os.environ["OPENAI_BASE_URL"].removesuffix("/v1") + "/task")
    tools = gateway(tools_url)["tools"]
    client = OpenAI()
    messages = list(task["messages"])
    while True:
        completion = client.chat.completions.create(model="policy", messages=messages, tools=tools)
        message = completion.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            print(message.content)
            return
        for tool_call in message.tool_calls:
            arguments = json.loads(tool_call.function.arguments)
            result = gateway(f"{tools_url}/{tool_call.function.name}", arguments)["content"]
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": result})


if __name__ == "__main__":
    main()
