"""OpenEnv's current client classes against a server: run in `.venv-openenv` (openenv 0.10), never by pytest itself.

    .venv-openenv/bin/python tests/envs/openenv/current_openenv.py < request.json   # prints one JSON line

The request is `{"command": ..., "url": ..., ...}`:
- `tasks`: OpenEnv's Task API over HTTP with OpenEnv's own request models (`/list_environments`, `/<env>/splits`,
  `/num_tasks`, `/task_range`, `/task`, `/tasks`; OpenEnv 0.10 ships no generic client class for these routes);
- `episodes`: every episode at once, each a session of OpenEnv's `GenericEnvClient`: `reset(split=, index=)`,
  `step(ListToolsAction())`, then `step(CallToolAction(...))` per call, and `{"finish": true}` when the calls did
  not end it; each step's reward, done and text come back;
- `production`: OpenEnv's `MCPToolClient` (production mode: tools over HTTP `/mcp`, reset over `/ws` attached to
  the same session): reset, list_tools, call_tool per call; a `GenericEnvClient` session ended with `finish`; and
  what the simulation routes answer.
Tests drive it from the main venv (tests/envs/openenv/test_openenv_current_client.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

import httpx
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.env_server.types import (
    GetTaskRangeRequest,
    GetTaskRequest,
    ListTasksRequest,
    NumTasksRequest,
)
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient


def tasks(url: str, per_split: int = 3) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=120) as http:
        (env,) = http.get("/list_environments").raise_for_status().json()
        splits = http.get(f"/{env}/splits").raise_for_status().json()
        found: dict[str, Any] = {}
        for split in (s["name"] for s in splits):
            count = http.post(f"/{env}/num_tasks", json=NumTasksRequest(split=split).model_dump()).json()
            first = http.post(f"/{env}/task_range", json=GetTaskRangeRequest(split=split, start=0, stop=per_split).model_dump()).json()  # fmt: skip
            second = http.post(f"/{env}/task", json=GetTaskRequest(split=split, index=1).model_dump()).json()
            listed = http.post(f"/{env}/tasks", json=ListTasksRequest(split=split).model_dump()).json()
            found[split] = {"num_tasks": count["num_tasks"], "first": first["tasks"], "second": second["task"],
                            "listed": len(listed["tasks"]), "listed_ids": [t["id"] for t in listed["tasks"]]}  # fmt: skip
        outside = http.post(
            f"/{env}/task", json=GetTaskRequest(split=splits[0]["name"], index=10**9).model_dump()
        )
        unknown = http.post(f"/{env}/num_tasks", json=NumTasksRequest(split="no_such_split").model_dump())
    return {"env_name": env, "splits": splits, "tasks": found, "outside_status": outside.status_code,
            "unknown_split": [unknown.status_code, unknown.json()]}  # fmt: skip


async def episode(url: str, spec: dict[str, Any]) -> dict[str, Any]:
    steps = []
    async with GenericEnvClient(base_url=url, message_timeout_s=600) as env:
        reset = await env.reset(split=spec["split"], index=spec["index"])
        tools = await env.step(ListToolsAction())
        done = reset.done
        for name, arguments in spec["calls"]:
            if done:
                break
            result = await env.step(CallToolAction(tool_name=name, arguments=arguments))
            steps.append(_step(result))
            done = result.done
        if not done and spec.get("finish", True):
            steps.append(_step(await env.step({"finish": True})))
        state = await env.state()
    return {"task_id": reset.observation["task_id"], "reset_text": reset.observation["text"],
            "reset_reward": reset.reward, "tools": [t["name"] for t in tools.observation["tools"]], "steps": steps,
            "state": state if isinstance(state, dict) else state.model_dump()}  # fmt: skip


def _step(result: Any) -> dict[str, Any]:
    observation = result.observation
    return {"text": observation.get("text"), "reward": result.reward, "done": result.done,
            "error": observation.get("error"), "success": observation.get("success"),
            "score": observation.get("score"), "details": observation.get("details")}  # fmt: skip


async def episodes(url: str, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(episode(url, spec) for spec in specs)))


async def production(url: str, spec: dict[str, Any]) -> dict[str, Any]:
    calls = []
    async with MCPToolClient(base_url=url, message_timeout_s=600) as env:
        reset = await env.reset(split=spec["split"], index=spec["index"])
        tools = await env.list_tools()
        for name, arguments in spec["calls"]:
            try:
                calls.append({"result": await env.call_tool(name, **arguments)})
            except RuntimeError as err:  # OpenEnv's client raises a tool's error
                calls.append({"error": str(err)})
        state = await env.state()
    async with GenericEnvClient(base_url=url) as env:  # the OpenEnv session's own way to end an episode
        await env.reset(split=spec["split"], index=spec["index"])
        finished = _step(await env.step({"finish": True}))
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        routes = {
            "POST /reset": (await http.post("/reset", json={})).status_code,
            "POST /step": (await http.post("/step", json={"action": {"text": "look"}})).status_code,
            "GET /state": (await http.get("/state")).status_code,
        }
    return {"reset_reward": reset.reward, "reset_observation": reset.observation.model_dump(),
            "tools": [t.name for t in tools], "schemas": {t.name: t.input_schema for t in tools}, "calls": calls,
            "state": state.model_dump(), "routes": routes, "finished": finished}  # fmt: skip


def main() -> None:
    request = json.load(sys.stdin)
    url = request["url"]
    if request["command"] == "tasks":
        out: Any = tasks(url)
    elif request["command"] == "episodes":
        out = asyncio.run(episodes(url, request["episodes"]))
    elif request["command"] == "production":
        out = asyncio.run(production(url, request["episode"]))
    else:
        raise SystemExit(f"unknown command {request['command']!r}")
    print(json.dumps({"openenv": version("openenv"), "result": out}, default=str))


if __name__ == "__main__":
    main()
