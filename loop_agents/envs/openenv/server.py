"""`serve <family>`: one of our families served by OpenEnv's own server code, as OpenEnv expects it now.

Two processes, by what each holds:
- this one (the main venv): the family composed from `env=<family>` and overrides exactly as a run composes it,
  checked and prepared, its task source started (AppWorld's pool and sandbox as in training), and the family host
  (host.py) over it: the episodes, the tool declarations, the scoring;
- its child, OpenEnv's server (mcp_app.py) under `.venv-openenv/bin/python` (OpenEnv 0.10, which cannot share the
  main venv: docs/environments/openenv.md): MCP at /mcp, OpenEnv sessions at /ws, the Task API, the rubric, bound
  to 127.0.0.1. It reaches the host only through a socket pair made here (bridge.py), never a port.
The child prints `[openenv] serving <family> on <url> ...` once it listens (a launcher reads the URL from that
line); when either process ends, the other does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess

from loop_agents.child_process import die_with_parent
from loop_agents.config.load import compose
from loop_agents.envs.openenv.bridge import open_channel, serve_requests
from loop_agents.envs.openenv.host import MODES, FamilyHost, ServedFamily, is_environment_failure
from loop_agents.envs.openenv.version import INSTALL_HINT, REPO_ROOT, openenv_python
from loop_agents.envs.selected import (
    check_environment,
    close_task_source,
    make_task_source,
    prepare_environment,
    selected_family,
    start_task_source,
)
from loop_agents.envs.settings import env_settings
from loop_agents.errors import ConfigError
from loop_agents.redaction import child_environment
from loop_agents.tools.spec import tools_of


def served_family(family: str, overrides: list[str]) -> ServedFamily:
    """Compose `env=<family>` with `overrides` as a run would, check it, and make its task source and tools."""
    cfg = compose([f"env={family}", *overrides])
    check_environment(cfg)
    prepare_environment(cfg)
    tools = tools_of(selected_family(cfg), env_settings(cfg))
    return ServedFamily(
        family, make_task_source(cfg), tools, str(cfg.env.train_split), str(cfg.env.eval_split)
    )


def openenv_environment() -> dict[str, str]:
    """The environment of a process in `.venv-openenv`: ours without secrets, this checkout on its path (it imports
    loop_agents' standard-library-and-OpenEnv modules: mcp_app, bridge, wire, rubric, version)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return child_environment({"PYTHONPATH": path, "PYTHONUNBUFFERED": "1"})


def check_openenv_python() -> str:
    """The interpreter of OpenEnv's server, checked before anything starts: ConfigError (one line) when it is
    missing or its OpenEnv is not one we support (version.py, run by that interpreter)."""
    python = openenv_python()
    if not python.exists():
        raise ConfigError(f"no OpenEnv venv: {python} does not exist ({INSTALL_HINT}; or set "
                          "$LOOP_AGENTS_OPENENV_PYTHON)")  # fmt: skip
    probe = ("from loop_agents.envs.openenv.version import installed_openenv, version_problem; "
             "print(version_problem(installed_openenv()) or '')")  # fmt: skip
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120,
                           env=openenv_environment(), cwd=str(REPO_ROOT))  # fmt: skip
    if found.returncode != 0:
        raise ConfigError(f"{python} could not check its OpenEnv: {' '.join(found.stderr.split())[-300:]}")
    if found.stdout.strip():
        raise ConfigError(found.stdout.strip())
    return str(python)


def serve(served: ServedFamily, port: int = 0, max_sessions: int = 64, mode: str = "simulation") -> int:
    """Serve until stopped (SIGTERM, SIGINT) or until OpenEnv's server ends; returns its exit code."""
    if mode not in MODES:
        raise ConfigError(f"--mode {mode!r} must be one of {', '.join(MODES)}")
    python = check_openenv_python()
    return asyncio.run(_serve(served, python, port, max_sessions, mode))


async def _serve(served: ServedFamily, python: str, port: int, max_sessions: int, mode: str) -> int:
    host = FamilyHost(served, mode)
    await start_task_source(served.source)
    ours, theirs = socket.socketpair()
    try:
        child = await asyncio.create_subprocess_exec(
            python, "-m", "loop_agents.envs.openenv.mcp_app", "--bridge-fd", str(theirs.fileno()),
            "--port", str(port), "--mode", mode, "--max-sessions", str(max_sessions),
            pass_fds=(theirs.fileno(),), cwd=str(REPO_ROOT), preexec_fn=die_with_parent,
            env=openenv_environment(),
        )  # fmt: skip
        theirs.close()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: child.returncode is None and child.terminate())
        reader, writer = await open_channel(ours)
        answering = asyncio.ensure_future(serve_requests(reader, writer, host.handle, is_environment_failure))
        code = await child.wait()
        answering.cancel()
        return code
    finally:
        ours.close()
        await host.close_all()
        await close_task_source(served.source)


def exit_code(code: int) -> int:
    """This process's exit code for the child's: a signal that stopped it is a normal stop."""
    return 0 if code < 0 or code in (0, 128 + signal.SIGTERM) else code
