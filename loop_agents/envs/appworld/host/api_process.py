"""The episode's API process: it holds the task's databases and never runs policy code.

Forked from the host when an episode starts. It sandboxes itself while single-threaded (no network, Landlock:
read the task's public inputs, write the episode's output folder; the seccomp deny list; rlimits), then opens
the world in AppWorld's local mode (databases in memory, the apps behind FastAPI's in-process client, the clock
frozen at the task's time), exactly as a world that runs cells would, but it runs none. Two channels:

    apis   from the policy process: one app call per message, answered only if `RouteAllowList` allows it,
           with the same client call AppWorld's local requester makes (so the apps behave as in local mode)
    admin  from the host: `task_completed` (read from the databases here), `save` (AppWorld's own
           `_save_state` of the end state into the output folder: what the grader scores)
"""

from __future__ import annotations

import os
import select
import socket
import traceback
from typing import Any

from loop_agents.envs.appworld.host.api_routes import RouteAllowList
from loop_agents.envs.appworld.host.common import MESSAGE_LIMIT, Settings, close_fds_except, now, sandbox_self
from loop_agents.sandbox import framing, layers

_INIT_KEYS = ("max_interactions", "max_api_calls_per_interaction", "timeout_seconds")
REQUEST_LIMIT = 1024 * 1024  # one app call's arguments


def _forward(client: Any, method: str, path: str, payload: Any, headers: dict) -> Any:
    """The call AppWorld's local requester (`Requester._get` ... `_delete`) makes for this method and path."""
    url = path[1:]
    if method == "GET":
        return client.get(url, params=payload, headers=headers)
    if method == "POST":
        if "auth/token" in url:
            return client.post(url, data=payload, headers=headers)
        return client.post(url, json=payload, headers=headers)
    if method == "PUT":
        return client.put(url, json=payload, headers=headers)
    if method == "PATCH":
        return client.patch(url, json=payload, headers=headers)
    return client.delete(url, params=payload, headers=headers)


class ApiServer:
    def __init__(self, world: Any, max_calls: int) -> None:
        self.world = world
        self.client = world.requester.client
        self.routes = RouteAllowList(list(world.task.allowed_apps))
        self.calls_left = max_calls
        self.refused = 0

    def answer(self, message: Any) -> dict[str, Any]:
        if not isinstance(message, dict):
            return {"status": 400, "text": '{"message": "Malformed request."}'}
        method, path = str(message.get("method", "")).upper(), message.get("path")
        headers = message.get("headers") if isinstance(message.get("headers"), dict) else {}
        headers = {k: v for k, v in headers.items() if k.lower() == "authorization" and isinstance(v, str)}
        if not self.routes.allows(method, path):
            self.refused += 1
            return {
                "status": 403,
                "text": f'{{"message": "The route {method} {str(path)[:200]} is not an API of this task."}}',
            }
        if self.calls_left <= 0:
            return {"status": 429, "text": '{"message": "The episode has used all its API calls."}'}
        self.calls_left -= 1
        payload = message.get("payload")
        if payload is not None and not isinstance(payload, dict):
            return {"status": 400, "text": '{"message": "The data argument must be a dictionary."}'}
        response = _forward(self.client, method, path, payload, headers)
        return {"status": response.status_code, "text": response.text}

    def admin(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("op") == "task_completed":
            return {"output": bool(self.world.task_completed())}
        if message.get("op") == "save":
            began = now()
            self.world._save_state(self.world.output_db_home_path_on_disk)
            return {"output": {"save_s": now() - began, "refused_routes": self.refused}}
        return {"error": f"unknown op {message.get('op')!r}"}


def _serve(apis: socket.socket, admin: socket.socket, server: ApiServer) -> None:
    while True:
        ready, _, _ = select.select([admin, apis], [], [])
        if admin in ready:
            framing.send(admin, server.admin(framing.receive(admin, MESSAGE_LIMIT)))
        elif apis in ready:
            try:
                message = framing.receive(apis, REQUEST_LIMIT, now() + 10)
            except framing.ChannelError:
                apis.close()  # the policy closed, flooded or sent garbage: it gets no more answers
                _serve_admin_only(admin, server)
                return
            try:
                reply = server.answer(message)
            except Exception as error:  # noqa: BLE001 - an app error on the policy's arguments is its answer
                reply = {"status": 500, "text": f'{{"message": "{type(error).__name__}"}}'}
            framing.send(apis, reply)


def _serve_admin_only(admin: socket.socket, server: ApiServer) -> None:
    while True:
        framing.send(admin, server.admin(framing.receive(admin, MESSAGE_LIMIT)))


def api_main(apis: socket.socket, admin: socket.socket, request: dict[str, Any], settings: Settings) -> None:
    """In the forked child: sandbox, open the world, report the task's public facts, serve both channels."""
    from appworld.environment import AppWorld  # imported before the sandbox: some imports write temp files

    layers.die_with_parent()
    os.setsid()
    close_fds_except({apis.fileno(), admin.fileno()})
    task_id, experiment = request["task_id"], request["experiment_name"]
    out_dir = settings.output_dir(experiment, task_id)
    task_dir = settings.root / "data" / "tasks" / task_id
    if "namespaces" in settings.active:
        layers.enter_namespaces()
    layers.reopen_files_read_only([out_dir])
    public = [settings.root / "data" / "base_dbs", settings.root / "data" / "api_docs"]
    sandbox_s = sandbox_self(settings, [*public, task_dir / "specs.json", task_dir / "dbs"], [out_dir.parent])
    try:
        began = now()
        kwargs = {key: request[key] for key in _INIT_KEYS if key in request}
        world = AppWorld(task_id=task_id, experiment_name=experiment, load_ground_truth=False, **kwargs)
        task = world.task
        max_calls = int(request.get("max_interactions", 50)) * int(
            request.get("max_api_calls_per_interaction", 1000)
        )
        server = ApiServer(world, max_calls)
        framing.send(admin, {"output": {
            "task_id": task_id, "instruction": task.instruction, "supervisor": dict(task.supervisor),
            "datetime": task.datetime.isoformat(), "timing": {"api_init_s": now() - began, "api_sandbox_s": sandbox_s},
        }})  # fmt: skip
    except BaseException:  # noqa: BLE001 - reported to the host
        framing.send(admin, {"error": traceback.format_exc()[-3000:]})
        raise
    _serve(apis, admin, server)
