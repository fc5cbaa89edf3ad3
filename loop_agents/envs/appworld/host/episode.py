"""One episode's processes: A enters fresh user/net/pid/ipc namespaces and forks B, pid 1 there, which opens
the world without ground truth, sandboxes itself and runs the cells; `Episode` is the host's handle on them."""

from __future__ import annotations

import os
import signal
import socket
import time
import traceback
from typing import Any

from loop_agents.envs.appworld.host.common import MESSAGE_LIMIT, Settings, close_fds_except, now, sandbox_self
from loop_agents.sandbox import framing, layers

_INIT_KEYS = (
    "max_interactions",
    "max_api_calls_per_interaction",
    "timeout_seconds",
    "raise_on_unsafe_syntax",
)


def _episode_main(channel: socket.socket, request: dict[str, Any], settings: Settings) -> None:
    from appworld.environment import AppWorld

    task_id, experiment = request["task_id"], request["experiment_name"]
    began = now()
    kwargs = {key: request[key] for key in _INIT_KEYS if key in request}
    world = AppWorld(task_id=task_id, experiment_name=experiment, load_ground_truth=False, **kwargs)
    init_s = now() - began
    out_dir = settings.output_dir(experiment, task_id)
    task_dir = settings.root / "data" / "tasks" / task_id
    public = [settings.root / "data" / "base_dbs", settings.root / "data" / "api_docs"]
    layers.reopen_files_read_only([out_dir])
    sandbox_s = sandbox_self(settings, [*public, task_dir / "specs.json", task_dir / "dbs"], [out_dir])
    os.chdir(out_dir)
    task = world.task
    framing.send(
        channel,
        {
            "output": {
                "task_id": task_id,
                "instruction": task.instruction,
                "supervisor": dict(task.supervisor),
                "datetime": task.datetime.isoformat(),
                "timing": {"init_s": init_s, "sandbox_s": sandbox_s},
            }
        },
    )
    while True:
        message = framing.receive(channel, MESSAGE_LIMIT)
        if message["op"] == "execute":
            framing.send(channel, {"output": world.execute(message["code"])})
        elif message["op"] == "task_completed":
            framing.send(channel, {"output": bool(world.task_completed())})


def _episode_outer(
    channel: socket.socket, pid_pipe: int, request: dict[str, Any], settings: Settings
) -> None:
    """Child A: enters the namespaces, forks B, reports B's pid, waits for it."""
    layers.die_with_parent()
    close_fds_except({channel.fileno(), pid_pipe})
    if "namespaces" in settings.active:
        layers.enter_namespaces(pid=True)
    inner = os.fork()
    if inner == 0:
        os.close(pid_pipe)
        layers.die_with_parent()
        os.setsid()  # else kill(0, sig) would reach the host through the shared process group
        try:
            _episode_main(channel, request, settings)
        except BaseException:  # noqa: BLE001 - reported to the host, which answers the trainer
            try:
                framing.send(channel, {"error": traceback.format_exc()[-3000:]})
            except OSError:
                pass
        os._exit(1)
    os.write(pid_pipe, str(inner).encode())
    os.close(pid_pipe)
    channel.close()
    _, status = os.waitpid(inner, 0)
    os._exit(0)


class Episode:
    """The host's handle on one running episode (B and its namespace)."""

    def __init__(self, request: dict[str, Any], settings: Settings) -> None:
        self.settings = settings
        self.task_id = request["task_id"]
        self.experiment = request["experiment_name"]
        self.cell_timeout_s = float(request.get("timeout_seconds") or 20)
        self.ended: str | None = None
        self.evaluation: dict[str, Any] | None = None
        self.channel, child_channel = socket.socketpair()
        read_end, write_end = os.pipe()
        began = now()
        self.outer = os.fork()
        if self.outer == 0:
            os.close(read_end)
            self.channel.close()
            try:
                _episode_outer(child_channel, write_end, request, settings)
            finally:
                os._exit(1)
        child_channel.close()
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            text = pipe.read().decode() or "0"
        self.inner = int(text)
        self.fork_s = now() - began

    def receive(self, timeout_s: float) -> dict[str, Any]:
        return framing.receive(
            self.channel, self.settings.max_output_bytes + 4096, time.monotonic() + timeout_s
        )

    def ask(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """B's reply, or `{"ended": why}` after killing B (deadline, death, flood or garbage)."""
        if self.ended:
            return {"ended": self.ended}
        try:
            framing.send(self.channel, message)
            reply = self.receive(timeout_s)
            if not isinstance(reply, dict) or "output" not in reply:
                raise framing.ChannelError(f"unexpected reply {str(reply)[:200]!r}")
            return reply
        except framing.ChannelTimeout:
            self.ended = "timeout"
        except framing.ChannelTooLarge as error:
            self.ended = "output_too_large"
            self.kill()
            return {"ended": self.ended, "size": error.size}
        except (framing.ChannelError, OSError):
            self.ended = "env_killed"
        self.kill()
        return {"ended": self.ended}

    def kill(self) -> None:
        """SIGKILL B (the pid namespace dies with it) and A; reap A."""
        if self.outer > 0:
            # A exits only after reaping B, so once A is gone B's pid may be reused: never signal it then.
            # (the WNOHANG wait reaps an exited A, so its pid is not signalled either).
            if os.waitpid(self.outer, os.WNOHANG)[0] == 0:
                for pid in (self.inner, self.outer):
                    if pid > 0:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                os.waitpid(self.outer, 0)
        self.inner = self.outer = 0
        self.channel.close()
