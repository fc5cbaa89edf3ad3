"""The episode's tools as Python functions, inside a callable program's process: each one HTTP call to the gateway.

`tool(**arguments)` returns the text the environment answered (or `Error (<kind>): ...` for a call the tools
refuse), as a tool message would carry it. Each function has its tool's name (`__name__`, `name`), description
(`__doc__`) and OpenAI schema (`schema`), so a program can hand `[t.schema for t in tools]` to the model and
look a call up by `tool_call.function.name`. Standard library only: a program's process imports nothing heavy.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def _request(url: str, key: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Authorization": f"Bearer {key}"})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=3600) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as err:  # the episode is over, or out of budget: the program should stop
        detail = json.loads(err.read() or b"{}").get("error", {}).get("message", "")
        raise RuntimeError(f"gateway answered HTTP {err.code}: {detail}") from None


class RemoteTool:
    """One tool of the episode, callable with its arguments as keywords."""

    def __init__(self, schema: dict[str, Any], tools_url: str, key: str) -> None:
        self.schema = schema
        self.name = self.__name__ = schema["function"]["name"]
        self.__doc__ = schema["function"].get("description", "")
        self._url, self._key = f"{tools_url}/{self.name}", key

    def __call__(self, **arguments: Any) -> str:
        return _request(self._url, self._key, arguments)["content"]

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


def remote_tools(tools_url: str, key: str) -> list[RemoteTool]:
    """The episode's tools (`GET /tools`) as functions."""
    return [RemoteTool(schema, tools_url, key) for schema in _request(tools_url, key)["tools"]]


def fetch_task(root_url: str, key: str) -> dict[str, Any]:
    """The episode's task (`GET /task`): task_id, sample_index (which of the task's K rollouts), messages, prompt."""
    return _request(f"{root_url}/task", key)
