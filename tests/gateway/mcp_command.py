"""An agent program run as a command that reaches the episode's tools over MCP: the `mcp` package's client as its
docs write one (`streamable_http_client` + `ClientSession`: initialize, list_tools, call_tool; the key as a Bearer
header of the httpx2 client it is given) and the `openai` package's tool-calling loop as its docs write it, the MCP
tools handed to the model as functions. Configured only by its environment: OPENAI_BASE_URL and OPENAI_API_KEY
(`AsyncOpenAI()` reads them), LOOP_AGENTS_MCP_URL; the task is `GET /task` of the gateway."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openai import AsyncOpenAI


def fetch_task() -> dict:
    url = os.environ["OPENAI_BASE_URL"].removesuffix("/v1") + "/task"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


async def main() -> None:
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http_client,
        streamable_http_client(os.environ["LOOP_AGENTS_MCP_URL"], http_client=http_client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            for tool in listed.tools
        ]
        client = AsyncOpenAI()
        messages = list(fetch_task()["messages"])
        while True:
            completion = await client.chat.completions.create(model="policy", messages=messages, tools=tools)
            message = completion.choices[0].message
            messages.append(message)
            if not message.tool_calls:
                print(message.content)
                return
            for tool_call in message.tool_calls:
                arguments = json.loads(tool_call.function.arguments)
                result = await session.call_tool(tool_call.function.name, arguments)
                text = "".join(block.text for block in result.content if block.type == "text")
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": text})


if __name__ == "__main__":
    asyncio.run(main())
