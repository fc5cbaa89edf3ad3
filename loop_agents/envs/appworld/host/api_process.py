"""The episode's API process: it holds the task's databases and never runs policy code.

Forked from the host when an episode starts. It sandboxes itself while single-threaded (no network, Landlock:
read the task's public inputs, write the episode's output folder; the seccomp deny list; rlimits), then opens
the world in AppWorld's local mode (databases in memory, the apps behind FastAPI's in-process client, the clock
frozen at the task's time), exactly as a world that runs cells would, but it runs none. Two channels:

    apis   from the policy process (policy_channel.py: non-blocking, bounded, read only while a cell runs): one
           app call per message, answered only if `RouteAllowList` allows it, with the same client call AppWorld's
           local requester makes (so the apps behave as in local mode); any frame gets a reply, never a crash
    admin  from the host: `cell_begin` / `cell_end` (the window in which policy requests are worked on; the end
           drops what the policy left and reports the verdict), `task_completed` (read from the databases here),
           `save` (AppWorld's own `_save_state` of the end state into the output folder: what the grader scores)

Every budget of the policy's calls is enforced here, before the work: AppWorld's per-cell call cap, the saved
state's size (state_budget.py: a call that takes it over the cap is undone from the saved state), and this
process's CPU, checked before each unit of work done for the policy (a read, a request, whatever the frame
holds), so it stops serving before its own RLIMIT_CPU: what it spends past `api_cpu_budget_s` is one unit's
work, the admin replies and the save (which may use the hard limit's seconds too). A budget reached or a channel the policy closed sets `verdict`: the
episode is over, as the policy's failure, and is scored on the state held here. Once a verdict is given this
end of the channel is closed (after the reply that says so has gone out), so nothing more the policy sends is
worked on.
"""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import traceback
from typing import Any

from loop_agents.envs.appworld.host.api_routes import RouteAllowList
from loop_agents.envs.appworld.host.common import MESSAGE_LIMIT, Settings, close_fds_except, now, sandbox_self
from loop_agents.envs.appworld.host.policy_channel import Malformed, PolicyChannel
from loop_agents.envs.appworld.host.state_budget import StateBudget
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


def _cpu_s() -> float:
    """This process's CPU seconds so far (getrusage: the world's frozen clock does not touch it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_limit_to_hard() -> None:
    """The save is the trusted side's own work on a state the budget kept under its cap: it gets the seconds up
    to the hard RLIMIT_CPU (SIGKILL) as well, not only what the policy's 90 % left before SIGXCPU."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))


class ApiServer:
    """Answers the policy's app calls within the episode's budgets; `verdict` says why the policy's side is over."""

    def __init__(self, world: Any, calls_per_cell: int, state_cap_bytes: int, cpu_budget_s: float) -> None:
        self.world = world
        self.client = world.requester.client
        self.routes = RouteAllowList(list(world.task.allowed_apps))
        self.calls_per_cell = calls_per_cell
        self.cell_calls = 0
        self.cell_open = False
        self.state = StateBudget(
            [*world.task.allowed_apps, "admin", "supervisor"], world.models_to_db_home_path, state_cap_bytes
        )
        self.cpu_budget_s = cpu_budget_s
        self.verdict = ""  # "" while the policy may go on; else why its episode is over (its own doing)
        self.refused = 0
        self.dropped_bytes = 0

    def over(self) -> bool:
        """Whether the policy's side is over; sets the CPU verdict when the budget is spent."""
        if not self.verdict and _cpu_s() >= self.cpu_budget_s:
            self.verdict = "api_cpu_budget"
        return bool(self.verdict)

    def answer(self, message: Any) -> dict[str, Any]:
        """The reply to one request; never raises (an app error on the policy's arguments is its answer)."""
        if isinstance(message, Malformed):
            return message.reply
        reply_id = message.get("id") if isinstance(message, dict) else None
        try:
            reply = self._answer(message)
        except Exception as error:  # noqa: BLE001
            reply = {"status": 500, "text": json.dumps({"message": type(error).__name__})}
        if isinstance(reply_id, int):
            reply["id"] = reply_id
        return reply

    def _answer(self, message: Any) -> dict[str, Any]:
        if not isinstance(message, dict):
            return {"status": 400, "text": '{"message": "Malformed request."}'}
        method, path = str(message.get("method", "")).upper(), message.get("path")
        headers = message.get("headers") if isinstance(message.get("headers"), dict) else {}
        headers = {k: v for k, v in headers.items() if k.lower() == "authorization" and isinstance(v, str)}
        if not self.routes.allows(method, path):
            self.refused += 1
            return {
                "status": 403,
                "text": json.dumps(
                    {"message": f"The route {method} {str(path)[:200]} is not an API of this task."}
                ),
            }
        if self.verdict:
            return {"status": 429, "text": json.dumps({"message": "The episode is over."})}
        if self.cell_calls >= self.calls_per_cell:  # AppWorld's NumRequestsLimitError, enforced here too
            return {"status": 429, "text": json.dumps({"message": (
                f"Number of requests exceeded the limit of {self.calls_per_cell}. "
                "This potentially means that you have an infinite loop in your code.")})}  # fmt: skip
        self.cell_calls += 1
        payload = message.get("payload")
        if payload is not None and not isinstance(payload, dict):
            return {"status": 400, "text": '{"message": "The data argument must be a dictionary."}'}
        self.state.mark()
        response = _forward(self.client, method, path, payload, headers)
        if not self.state.charge():
            self.verdict = "state_too_large"
            return {"status": 507, "text": json.dumps({"message": "The apps' state is over its size cap."})}
        return {"status": response.status_code, "text": response.text}

    def admin(self, message: dict[str, Any], channel: PolicyChannel) -> dict[str, Any]:
        op = message.get("op")
        if op == "cell_begin":
            self.cell_open, self.cell_calls = True, 0
            return {"output": None}
        if op == "cell_end":  # the policy process is stopped or dead: nothing it left is worked on
            self.cell_open = False
            self.dropped_bytes += channel.end_cell()
            if channel.closed and not self.verdict:
                self.verdict = "api_channel_closed"
            return {
                "output": {"verdict": self.verdict, "calls": self.cell_calls, "state_bytes": self.state.size}
            }
        if op == "task_completed":
            return {"output": bool(self.world.task_completed())}
        if op == "save":
            self.cell_open = False
            _cpu_limit_to_hard()
            began = now()
            self.world._save_state(self.world.output_db_home_path_on_disk)
            return {"output": {
                "save_s": now() - began, "refused_routes": self.refused, "state_bytes": self.state.size,
                "dropped_request_bytes": self.dropped_bytes, "api_cpu_s": _cpu_s(),
            }}  # fmt: skip
        return {"error": f"unknown op {op!r}"}


def _serve(apis: socket.socket, admin: socket.socket, server: ApiServer) -> None:
    """The host's admin messages first; then at most one policy request per turn, only while a cell runs."""
    channel = PolicyChannel(apis, REQUEST_LIMIT)
    while True:
        if server.cell_open and not channel.closed and not channel.outbox and server.over():
            channel.close(f"the episode is over: {server.verdict}")
        serving = server.cell_open and not channel.closed
        readers: list[Any] = [admin] + ([channel] if serving and channel.wants_read() else [])
        writers = [channel] if serving and channel.wants_write() else []
        ready = serving and not channel.outbox and channel.next_frame() is not None
        readable, writable, _ = select.select(readers, writers, [], 0 if ready else None)
        if admin in readable:
            framing.send(admin, server.admin(framing.receive(admin, MESSAGE_LIMIT), channel))
            continue
        if writable:
            channel.flush()
        if channel in readable:
            channel.fill()
        if server.cell_open and not channel.closed and not channel.outbox:
            request = channel.take()
            if request is not None:
                channel.reply(server.answer(request))


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
        calls_per_cell = int(request.get("max_api_calls_per_interaction") or 1000)
        server = ApiServer(world, calls_per_cell, settings.state_cap_bytes, settings.api_cpu_budget_s)
        framing.send(admin, {"output": {
            "task_id": task_id, "instruction": task.instruction, "supervisor": dict(task.supervisor),
            "datetime": task.datetime.isoformat(), "timing": {"api_init_s": now() - began, "api_sandbox_s": sandbox_s},
        }})  # fmt: skip
    except BaseException:  # noqa: BLE001 - reported to the host
        framing.send(admin, {"error": traceback.format_exc()[-3000:]})
        raise
    _serve(apis, admin, server)
