"""One of our families as an OpenEnv environment, served by OpenEnv's own code (runs in `.venv-openenv`).

`python -m loop_agents.envs.openenv serve <family>` starts this module with `.venv-openenv/bin/python` and a
socket to its family host (host.py, in the main venv). What it serves is OpenEnv's `create_fastapi_app` over
`FamilyMCPEnvironment`, a subclass of OpenEnv's `MCPEnvironment`:

- MCP at `/mcp` (`tools/list`, `tools/call`, JSON-RPC over HTTP POST and WebSocket): the family's declared tools
  (`EnvironmentFamily.tools`, loop_agents/tools/spec.py; the generic `act(action)` where a family declares none)
  with their JSON schemas, each a FastMCP tool whose call the host checks against the schema and steps;
- OpenEnv's WebSocket sessions at `/ws` (reset, step, state): in simulation mode a tool call is a step
  (`{"type": "call_tool", ...}`) whose reply carries the rubric's reward (rubric.py); the text action of the
  earlier protocol (`{"text": ...}`, `{"finish": true}`) is kept for clients of it;
- OpenEnv's Task API (`/<env_name>/splits`, `/tasks`, `/num_tasks`, `/task`, `/task_range`): every split of the
  family and its tasks, each task spec only `{"id", "index", "split"}`; `reset(split=, index=)` selects one
  (`reset(task_id=)` too); plus `GET /tasks/{split}` (the ids; what our `env=openenv` client reads).

Production mode (`--mode production`) is OpenEnv's: no `/reset`, `/step`, `/state` routes, and here no reward at
all (no rubric; the host refuses to score). Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import socket
import sys
import uuid
from typing import Any

from loop_agents.envs.openenv.version import installed_openenv, version_problem

_problem = version_problem(installed_openenv())
if _problem is not None and __name__ == "__main__":
    print(f"[openenv] {_problem}", file=sys.stderr, flush=True)
    sys.exit(2)

import uvicorn  # noqa: E402 - after the version check: an unsupported OpenEnv is one line, not an ImportError
from fastapi import HTTPException, Request  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from fastmcp import FastMCP  # noqa: E402
from fastmcp.tools import Tool  # noqa: E402
from fastmcp.tools.base import ToolResult  # noqa: E402
from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.mcp_environment import MCPEnvironment  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction  # noqa: E402
from openenv.core.env_server.types import EnvironmentMetadata  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

from loop_agents.envs.openenv.bridge import BridgeClient, BridgeError, open_channel  # noqa: E402
from loop_agents.envs.openenv.rubric import FamilyScore  # noqa: E402
from loop_agents.envs.openenv.wire import (  # noqa: E402
    LoopAction,
    LoopObservation,
    LoopState,
    LoopToolObservation,
)

TEXT_RESULT = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"],
               "x-fastmcp-wrap-result": True}  # fmt: skip


class UnknownSplit(LookupError):
    """A Task API request for a split the family does not have (answered 404)."""


class Host:
    """The family host as this server sees it: its description (fetched once) and its requests."""

    def __init__(
        self, bridge: BridgeClient, description: dict[str, Any], mode: str, tool_timeout_s: float
    ) -> None:
        self.bridge, self.description, self.mode = bridge, description, mode
        self.family: str = description["family"]
        self.tool_timeout_s = tool_timeout_s
        self._ids: dict[str, list[str]] = {}

    async def request(self, op: str, **args: Any) -> Any:
        return await self.bridge.request(op, **args)

    async def task_ids(self, split: str) -> list[str]:
        if split not in self._ids:
            try:
                self._ids[split] = await self.request("task_ids", split=split)
            except BridgeError as err:
                if err.failure:
                    raise
                raise UnknownSplit(str(err)) from None
        return self._ids[split]


class FamilyTool(Tool):
    """One declared tool of the family; a call goes to the host, which checks the arguments and steps."""

    _environment: Any = PrivateAttr(default=None)

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        reply = await self._environment.host_call(self.name, arguments)
        if reply.get("tool_error"):
            return ToolResult(content=reply["text"], is_error=True)
        return self.convert_result(reply["text"])


def family_tool(spec: dict[str, Any], environment: FamilyMCPEnvironment) -> FamilyTool:
    tool = FamilyTool(name=spec["name"], description=spec["description"], parameters=spec["parameters"],
                      output_schema=TEXT_RESULT)  # fmt: skip
    tool._environment = environment
    return tool


def task_spec(split: str, index: int, task_id: str) -> dict[str, Any]:
    """What the Task API says about a task: its id and place, nothing the policy could use."""
    return {"id": task_id, "index": index, "split": split}


class FamilyMCPEnvironment(MCPEnvironment):
    """One OpenEnv session over one host session: the family's tools over MCP, its tasks, its rubric."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, host: Host) -> None:
        mcp = FastMCP(f"loop_agents_{host.family}")
        for spec in host.description["tools"]:
            mcp.add_tool(family_tool(spec, self))
        super().__init__(mcp)
        self.host = host
        self.rubric = FamilyScore() if host.mode == "simulation" else None
        self.session = uuid.uuid4().hex
        self.loop: asyncio.AbstractEventLoop | None = None
        self._state = LoopState()
        self._reply: dict[str, Any] | None = None  # the host's reply to the tool call in progress
        self._failure: BaseException | None = None  # the environment failure of the tool call in progress

    # -- the Task API (OpenEnv's TaskProvider, served at /<env_name>/...) ------------------------------------
    async def list_splits(self) -> list[dict[str, Any]]:
        return [dict(split) for split in self.host.description["splits"]]

    async def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [task_spec(split, i, task) for i, task in enumerate(await self.host.task_ids(split))]

    async def num_tasks(self, split: str) -> int:
        return len(await self.host.task_ids(split))

    async def get_task(self, split: str, index: int) -> dict[str, Any]:
        ids = await self.host.task_ids(split)
        if not 0 <= index < len(ids):
            raise IndexError(index)
        return task_spec(split, index, ids[index])

    async def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict]:
        ids = await self.host.task_ids(split)
        indices = range(len(ids))[slice(start, stop)]
        return [task_spec(split, i, ids[i]) for i in indices]

    # -- episodes -------------------------------------------------------------------------------------------
    def reset(self, seed=None, episode_id=None, **kwargs) -> LoopObservation:  # noqa: D102 - async only
        raise RuntimeError("FamilyMCPEnvironment is asynchronous: the server calls reset_async")

    def _step_impl(self, action, timeout_s=None, **kwargs):  # noqa: D102 - async only
        raise RuntimeError("FamilyMCPEnvironment is asynchronous: the server calls step_async")

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> LoopObservation:
        """Start an episode: `task_id`, else task `index` of `split` (the train split by default; no index: the
        `seed`-th task modulo the split's size, no seed: a random one)."""
        self.loop = asyncio.get_running_loop()
        task = task_id or await self._pick(split, index, seed)
        await self._reset_rubric_async()
        reply = await self.host.request("reset", session=self.session, task_id=str(task))
        self._state = LoopState(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=reply["task_id"]
        )
        reward = 0.0 if self.rubric is not None else None
        return LoopObservation(
            text=reply["text"], task_id=reply["task_id"], info=reply["info"], reward=reward
        )

    async def _pick(self, split: str | None, index: int | None, seed: int | None) -> str:
        name = split or self.host.description["train_split"]
        try:
            ids = await self.host.task_ids(name)
        except UnknownSplit as err:
            raise ValueError(str(err)) from None
        if not ids:
            raise ValueError(f"split {name!r} of {self.host.family} has no tasks")
        if index is not None:
            if not 0 <= index < len(ids):
                raise ValueError(
                    f"index {index} is outside split {name!r} of {self.host.family} (0..{len(ids) - 1})"
                )
            return ids[index]
        return ids[seed % len(ids)] if seed is not None else random.choice(ids)

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if isinstance(action, ListToolsAction) or getattr(action, "type", "") == "list_tools":
            return await super().step_async(ListToolsAction())
        if not self._state.task_id:
            raise RuntimeError("reset the session before stepping it")
        if self._state.done:
            raise RuntimeError(f"the episode of task {self._state.task_id} has ended; reset the session")
        self._state.step_count += 1
        if isinstance(action, CallToolAction) or action.type == "call_tool":
            return await self._tool_step(action, timeout_s)
        if action.finish:
            return await self._finish(action, LoopObservation(text="", task_id=self._state.task_id))
        reply = await self.host.request("act", session=self.session, text=action.text)
        observation = LoopObservation(text=reply["text"], task_id=self._state.task_id)
        return (
            await self._finish(action, observation)
            if reply["done"]
            else await self._rewarded(action, observation)
        )

    async def _tool_step(self, action: Any, timeout_s: float | None) -> LoopToolObservation:
        call = CallToolAction(tool_name=action.tool_name, arguments=action.arguments)
        self._reply, self._failure = None, None
        result = await super().step_async(call, timeout_s=timeout_s or self.host.tool_timeout_s)
        if self._failure is not None:  # the environment broke: OpenEnv's error reply, not an observation
            raise RuntimeError(str(self._failure))
        reply = self._reply or {}
        text = reply.get("text") or (result.error.message if result.error else "")
        observation = LoopToolObservation(tool_name=result.tool_name, result=result.result, error=result.error,
                                          text=text, task_id=self._state.task_id)  # fmt: skip
        if reply.get("done"):
            return await self._finish(action, observation)
        return await self._rewarded(action, observation)

    async def host_call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool's call, on the host (FamilyTool.run): its reply, kept for the step that made the call."""
        if not self._state.task_id:
            return {"text": "Error: no episode; reset the environment first.", "tool_error": "no_episode"}
        try:
            reply = await self.host.request("call", session=self.session, tool=tool, arguments=arguments)
        except BaseException as err:
            self._failure = err
            raise
        self._reply = reply
        self._state.tool_errors = int(reply.get("tool_errors", self._state.tool_errors))
        if reply.get("done"):
            self._state.done = True
        return reply

    async def _rewarded(self, action: Any, observation: Any) -> Any:
        """A step's observation with the rubric's reward (0 before done) in simulation mode, none in production."""
        observation.reward = await self._apply_rubric_async(action, observation) if self.rubric else None
        return observation

    async def _finish(self, action: Any, observation: Any) -> Any:
        """The episode's last step: scored by the family in simulation mode (production: only `done`)."""
        self._state.done = True
        observation.done = True
        if self.rubric is not None:
            evaluation = await self.host.request("score", session=self.session)
            observation.success, observation.score = evaluation["success"], evaluation["score"]
            observation.details = evaluation["details"]
        return await self._rewarded(action, observation)

    @property
    def state(self) -> LoopState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=f"loop_agents/{self.host.family}",
            description=f"loop_agents environment family {self.host.family!r}: tools over MCP, Task API, "
            f"{self.host.mode} mode",
            version="2",
        )

    def close(self) -> None:
        """OpenEnv calls this (often from a worker thread) when the session ends: close the host's session."""
        loop, self.loop = self.loop, None
        super().close()
        if loop is None or loop.is_closed():
            return
        closing = self.host.request("close", session=self.session)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(closing)
        else:
            asyncio.run_coroutine_threadsafe(closing, loop)


def build_app(host: Host, max_sessions: int) -> Any:
    """OpenEnv's FastAPI app over the family (see the module docstring)."""
    app = create_fastapi_app(
        functools.partial(FamilyMCPEnvironment, host),
        LoopAction,
        LoopObservation,
        max_sessions,
        env_name=f"loop_agents_{host.family}",
        state_cls=LoopState,
        mode=host.mode,
    )

    async def unknown_split(request: Request, err: UnknownSplit) -> JSONResponse:
        return JSONResponse(status_code=404, content={"detail": str(err)})

    app.add_exception_handler(UnknownSplit, unknown_split)

    @app.get("/tasks/{split}", tags=["Task API"])
    async def task_ids(split: str) -> dict[str, Any]:
        try:
            ids = await host.task_ids(split)
        except UnknownSplit as err:
            raise HTTPException(status_code=404, detail=str(err)) from None
        return {"family": host.family, "split": split, "task_ids": ids}

    return app


async def run(args: argparse.Namespace) -> int:
    reader, writer = await open_channel(socket.socket(fileno=args.bridge_fd))
    bridge = BridgeClient(reader, writer)
    host = Host(bridge, await bridge.request("describe"), args.mode, args.tool_timeout_s)
    app = build_app(host, args.max_sessions)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=64 * 1024 * 1024))

    async def announce() -> None:
        print(f"[openenv] serving {host.family} on {url} ({args.mode} mode; OpenEnv sessions at {url}/ws, MCP tools "
              f"at {url}/mcp, Task API at {url}/loop_agents_{host.family}/splits)", flush=True)  # fmt: skip

    app.router.on_startup.append(announce)
    bridge.closed.add_done_callback(lambda _: setattr(server, "should_exit", True))  # the host is gone: stop
    await server.serve(sockets=[listener])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="OpenEnv's server over a loop_agents family host (serve starts it)"
    )
    parser.add_argument("--bridge-fd", type=int, required=True, help="the socket to the family host")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--mode", choices=("simulation", "production"), default="simulation")
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--tool-timeout-s", type=float, default=900.0, help="one tool call, stepped")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
