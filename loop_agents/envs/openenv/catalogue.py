"""One OpenEnv server per process for a run's settings, and what it offers (tools, Task API), found once.

The family's tools are asked for by the driver, each rollout worker and the evaluator, for every episode
(`EnvironmentFamily.tools`, with the settings only), before and beside the task source that plays the episodes. So a
server started here (`serve_family`, `app`) is one per process, shared by `tools()` and the task source
(`shared_server`), and what it offers is asked once per process (`offers`): MCP `tools/list` and the Task API.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass

from loop_agents.envs.openenv.discovery import TaskApi, Tools, list_tools, task_api
from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.errors import ConfigError
from loop_agents.rollout.environment import EnvironmentFailure

_lock = threading.RLock()
_servers: dict[tuple, OpenEnvServerProcess] = {}
_offers: dict[tuple, Offers] = {}


@dataclass(frozen=True)
class Offers:
    """What the server offers besides reset/step."""

    tools: Tools
    tasks: TaskApi


def server_key(settings: OpenEnvSettings) -> tuple:
    s = settings
    return (s.url, s.serve_family, tuple(s.serve_overrides), s.app, s.app_python, s.app_dir, s.max_sessions)


def shared_server(settings: OpenEnvSettings) -> OpenEnvServerProcess:
    """This process's server for `settings` (`serve_family` or `app`), not started yet when new."""
    with _lock:
        return _servers.setdefault(server_key(settings), OpenEnvServerProcess(settings))


def server_url(settings: OpenEnvSettings) -> str:
    """The URL of the server: `url`, or the shared server's (started here when it is not running)."""
    if settings.url:
        return settings.url.rstrip("/")
    server = shared_server(settings)
    with _lock:
        if not server.alive():
            try:
                server.start()
            except (RuntimeError, TimeoutError) as err:
                raise EnvironmentFailure(str(err)) from None
        return str(server.url)


def offers(settings: OpenEnvSettings) -> Offers:
    """The server's MCP tools and Task API, asked once per process (ConfigError when it does not answer)."""
    key = server_key(settings)
    with _lock:
        if key not in _offers:
            try:
                url = server_url(settings)
            except EnvironmentFailure as err:
                raise ConfigError(str(err)) from None
            timeout = settings.connect_timeout_s
            _offers[key] = Offers(list_tools(url, timeout), task_api(url, timeout))
        return _offers[key]


@atexit.register
def stop_shared_servers() -> None:
    """Stop every server this process started for its settings (and forget what they offered)."""
    with _lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()
        _offers.clear()
