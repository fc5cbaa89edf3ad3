"""What an OpenEnv server offers besides reset/step: its MCP tools (`tools/list` at `/mcp`) and its Task API.

OpenEnv's `/mcp` is its own JSON-RPC 2.0 over HTTP POST (`tools/list`, `tools/call`, `openenv/session/*`); it has no
MCP `initialize` handshake (OpenEnv 0.10 answers it "Method not found"), so the `mcp` package's client, which always
opens with `initialize`, cannot talk to it: we send the JSON-RPC ourselves with httpx.

The Task API (OpenEnv 0.10): `GET /list_environments` (one name), `GET /<name>/splits` (`[{"name", "type"}]`),
`POST /<name>/tasks {"split"}` (`{"tasks": [spec, ...]}`); a task is selected by `reset(split=, index=)`.

A server without one of them is not an error: `None` says so, with the reason, and the caller falls back (to the
text action, to `GET /tasks/<split>` or to seeds). Only a server that does not answer at all raises ConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from loop_agents.errors import ConfigError


@dataclass(frozen=True)
class Tools:
    """The server's MCP tools (`tools/list`), each `{"name", "description", "inputSchema"}`; or why there are none."""

    tools: tuple[dict[str, Any], ...]
    missing: str = ""  # why the server offers no tools (empty when it does)


@dataclass(frozen=True)
class TaskApi:
    """The server's Task API: its environment name and split names; or why it has none."""

    env_name: str = ""
    splits: tuple[str, ...] = ()
    missing: str = ""


def _post_json(url: str, body: dict[str, Any], timeout_s: float) -> tuple[int, Any]:
    try:
        response = httpx.post(url, json=body, timeout=timeout_s)
    except httpx.HTTPError as err:
        raise ConfigError(f"OpenEnv server {url}: no answer ({type(err).__name__}: {err})") from None
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


def list_tools(url: str, timeout_s: float) -> Tools:
    """The tools `tools/list` at `<url>/mcp` names, or `Tools((), missing=<why>)`."""
    status, body = _post_json(
        f"{url}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, timeout_s
    )
    if status != 200 or not isinstance(body, dict):
        return Tools((), f"POST /mcp answered {status}")
    if "error" in body:
        error = body["error"] if isinstance(body["error"], dict) else {}
        return Tools((), f"its /mcp tools/list answered an error: {error.get('message', body['error'])}")
    tools = (body.get("result") or {}).get("tools") if isinstance(body.get("result"), dict) else None
    if not isinstance(tools, list) or not tools:
        return Tools((), "its /mcp tools/list lists no tools")
    named = [tool for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]
    if len(named) != len(tools):
        return Tools((), "its /mcp tools/list has a tool without a name")
    return Tools(tuple(named))


def task_api(url: str, timeout_s: float) -> TaskApi:
    """The server's Task API (`/list_environments`, `/<name>/splits`), or `TaskApi(missing=<why>)`."""
    try:
        names = httpx.get(f"{url}/list_environments", timeout=timeout_s)
        listed = names.json() if names.status_code == 200 else None
        if not (isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], str)):
            return TaskApi(missing=f"GET /list_environments answered {names.status_code}")
        env_name = listed[0]
        splits = httpx.get(f"{url}/{env_name}/splits", timeout=timeout_s)
        body = splits.json() if splits.status_code == 200 else None
    except httpx.HTTPError as err:
        raise ConfigError(f"OpenEnv server {url}: no answer ({type(err).__name__}: {err})") from None
    except ValueError:
        return TaskApi(missing="its Task API answered something that is not JSON")
    if not isinstance(body, list):
        return TaskApi(missing=f"GET /{env_name}/splits answered {splits.status_code}")
    names_of = [split.get("name") if isinstance(split, dict) else split for split in body]
    if not names_of or not all(isinstance(name, str) for name in names_of):
        return TaskApi(missing=f"GET /{env_name}/splits lists no split names ({str(body)[:120]})")
    return TaskApi(env_name, tuple(names_of))


def task_specs(url: str, api: TaskApi, split: str, timeout_s: float) -> list[dict[str, Any]]:
    """The tasks of `split` (`POST /<name>/tasks`), each spec with its place (`index`); ConfigError (one line)
    naming the server's splits when it has no such split, or when its answer is not a task list."""
    if split not in api.splits:
        raise ConfigError(f"OpenEnv server {url}: its Task API has no split {split!r}; its splits: "
                          f"{', '.join(api.splits)} (env.train_split / env.eval_split name them)")  # fmt: skip
    status, body = _post_json(f"{url}/{api.env_name}/tasks", {"split": split}, timeout_s)
    tasks = body.get("tasks") if isinstance(body, dict) else None
    if status != 200 or not isinstance(tasks, list):
        raise ConfigError(f"OpenEnv server {url}: POST /{api.env_name}/tasks for split {split!r} answered "
                          f"{status}: {str(body)[:200]}; expected OpenEnv's {{'tasks': [...]}}")  # fmt: skip
    return [
        {**(spec if isinstance(spec, dict) else {"id": spec}), "index": index}
        for index, spec in enumerate(tasks)
    ]


def task_id_of(split: str, spec: dict[str, Any]) -> str:
    """A task's id: its spec's `id` (or `task_id`), else `<split>-<index>`."""
    for key in ("id", "task_id"):
        if isinstance(spec.get(key), str | int) and not isinstance(spec.get(key), bool):
            return str(spec[key])
    return f"{split}-{spec['index']}"
