"""Bad input at server start: unknown env, busy port, missing Java for SciWorld: one line, exit 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from loop_agents.ports import free_port


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "loop_agents.envs.agentgym.server", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_unknown_env_name():
    line = _one_line(_start("--env", "webarena", "--port", str(free_port())))
    assert (
        line
        == "agentgym server: unknown env name 'webarena'; choose one of babyai, textcraft, sciworld, gemhunt"
    )


def test_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = _one_line(_start("--env", "gemhunt", "--port", str(port)))
    assert line.startswith(f"agentgym server: cannot listen on 127.0.0.1:{port}: Address already in use")


def test_sciworld_without_java():
    no_java = {**os.environ, "PATH": os.path.dirname(sys.executable)}  # the venv's bin only: no `java`
    line = _one_line(_start("--env", "sciworld", "--port", str(free_port()), env=no_java))
    assert "needs Java" in line and "no `java` on PATH" in line
