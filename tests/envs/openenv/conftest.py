"""Real OpenEnv servers for the tests of this folder, each started once per module and stopped after it."""

from __future__ import annotations

import pytest

from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings


def _server(**options):
    server = OpenEnvServerProcess(OpenEnvSettings(start_timeout_s=240, **options))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gem_hunt_server():
    """Our gem hunt served as OpenEnv (`python -m loop_agents.envs.openenv serve bundled`)."""
    yield from _server(serve_family="bundled")


@pytest.fixture(scope="module")
def guess_server():
    """The guess environment of guess_app.py, written with OpenEnv's own server code."""
    yield from _server(app="tests.envs.openenv.guess_app:app")
