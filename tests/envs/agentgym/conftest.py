"""One real env server subprocess per game kind, shared by the tests of a module and stopped after it."""

from __future__ import annotations

import pytest

from loop_agents.envs.agentgym import EnvServerProcess


def _server(env_name: str):
    server = EnvServerProcess(env_name, startup_timeout_s=90)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gemhunt_server():
    yield from _server("gemhunt")


@pytest.fixture(scope="module")
def babyai_server():
    yield from _server("babyai")


@pytest.fixture(scope="module")
def textcraft_server():
    yield from _server("textcraft")


@pytest.fixture(scope="module")
def sciworld_server():
    yield from _server("sciworld")
