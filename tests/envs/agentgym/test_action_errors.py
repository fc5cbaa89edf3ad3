"""An action the game raises on is the policy's: the server answers it as an observation the agent sees and the
episode goes on, never an HTTP error the client would retry and then drop (a policy that wrote actions the game
chokes on would otherwise make its own failing episodes disappear)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
import uvicorn

from loop_agents.envs.agentgym.client import AgentGymEnvClient
from loop_agents.envs.agentgym.games.gemhunt import GemHuntServerGame
from loop_agents.envs.agentgym.server import build_app


@pytest.fixture
def choking_server(monkeypatch):
    """Our real AgentGym server (uvicorn on 127.0.0.1) of the gem hunt, whose game raises on one action."""
    step = GemHuntServerGame.step

    def choke(self, action):
        if action.startswith("open the void"):
            raise KeyError("void")
        return step(self, action)

    monkeypatch.setattr(GemHuntServerGame, "step", choke)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build_app("gemhunt"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)


def test_an_action_the_game_raises_on_is_an_observation_and_the_episode_goes_on(choking_server):
    async def play():
        client = AgentGymEnvClient(choking_server, "gemhunt")
        try:
            await client.reset("gemhunt_0")
            honest = await client.step("open red box")
            choked = await client.step("open the void")
            after = await client.step("open blue box")
            return honest, choked, after, await client.evaluate()
        finally:
            await client.close()

    honest, choked, after, evaluation = asyncio.run(play())
    assert choked.observation.startswith("Error: the game could not carry out 'open the void' (KeyError")
    assert choked.done is False and choked.reward == 0.0
    assert choked.info["score"] == honest.info["score"]  # the score the episode had
    assert after.observation and not after.observation.startswith("Error")
    assert 0.0 <= evaluation.reward <= 1.0
