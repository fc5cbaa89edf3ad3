"""The gateway answers on 127.0.0.1 only and only with a running episode's key; one episode's key can neither read
nor extend another episode's calls (real server, real HTTP, the real tiny tokenizer)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from transformers import AutoTokenizer

from loop_agents.envs.bundled.env import BundledEnvironment
from loop_agents.gateway.server import GatewayServer
from loop_agents.gateway.session import EpisodeSession
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.text_agent import TextActionAgent
from tests.gateway.sessions import gem_hunt_session
from tests.gateway.test_recording import OPEN_CALL, OPENING, TOOLS, spelled
from tests.rollout.scripted import ScriptedGenerator


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


async def _session(tokenizer, task_id: str, turns) -> EpisodeSession:
    env = BundledEnvironment()
    reset = await env.reset(task_id)
    return gem_hunt_session(
        tokenizer,
        ScriptedGenerator(turns),
        EpisodeConfig(max_tokens_per_turn=120, max_turns=6, max_context_tokens=4096),
        task={"task_id": task_id, "messages": OPENING},
        env=env,
        reset=reset,
        agent=TextActionAgent(),
        group_id=task_id,
    )


def test_keys_isolate_episodes(tokenizer):
    sampled_a = spelled(tokenizer, OPEN_CALL)

    async def scenario():
        server = GatewayServer()
        root = await server.start()
        a = await _session(tokenizer, "gemhunt_10000", [sampled_a])
        b = await _session(tokenizer, "gemhunt_10001", [spelled(tokenizer, "my own turn")])
        server.open(a)
        server.open(b)
        try:
            async with httpx.AsyncClient(base_url=root, timeout=60) as client:

                def auth(session):
                    return {"Authorization": f"Bearer {session.key}"}

                assert server._runner is not None and [a[0] for a in server._runner.addresses] == [
                    "127.0.0.1"
                ]
                for path in ("/v1/models", "/task", "/tools"):
                    assert (await client.get(path)).status_code == 401
                    assert (
                        await client.get(path, headers={"Authorization": "Bearer guessed"})
                    ).status_code == 401
                assert (await client.get("/task", headers=auth(a))).json()["task_id"] == "gemhunt_10000"
                assert (await client.get("/task", headers=auth(b))).json()["task_id"] == "gemhunt_10001"
                reply = await client.post(
                    "/v1/chat/completions", headers=auth(a), json={"messages": OPENING, "tools": TOOLS}
                )
                message = reply.json()["choices"][0]["message"]
                a_ids = list(a.recorder.trajectory.token_ids)
                # B sends A's history, A's message included, with its own key: nothing of A's is spliced or touched
                history = [*OPENING, message, {"role": "tool", "content": "x"}]
                reply_b = await client.post(
                    "/v1/chat/completions", headers=auth(b), json={"messages": history, "tools": TOOLS}
                )
                assert reply_b.status_code == 200
                b_prompt = b.generator.prompts[0]
                assert not any(b_prompt[i : i + len(sampled_a)] == sampled_a for i in range(len(b_prompt)))
                assert a.recorder.trajectory.token_ids == a_ids and len(a.recorder.calls) == 1
                # B's tool call steps B's environment, not A's
                step = await client.post("/tools/open", headers=auth(b), json={"container": "red box"})
                assert step.status_code == 200 and b.tool_calls == 1 and a.tool_calls == 0
                server.close(a)  # A's episode ended: its key is revoked
                assert (await client.get("/task", headers=auth(a))).status_code == 401
                revoked = await client.post(
                    "/v1/chat/completions", headers=auth(a), json={"messages": OPENING}
                )
                assert revoked.status_code == 401 and len(a.recorder.calls) == 1
        finally:
            await server.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/mcp", "/tools/open"])
def test_a_program_hanging_up_mid_request_is_not_our_failure(tokenizer, path):
    """A client that sends half a request body and resets the connection (a program that crashes mid-send, is
    stopped at the episode's end, or does it on purpose) does not end its episode as the gateway's internal error
    (which would drop the episode, retried, never scored): the episode stays open and its key still works."""

    async def scenario():
        server = GatewayServer()
        root = await server.start()
        session = await _session(tokenizer, "gemhunt_10000", [spelled(tokenizer, OPEN_CALL)])
        server.open(session)
        try:
            host, port = root.split("//")[1].split("/")[0].split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
                + f"Authorization: Bearer {session.key}\r\nContent-Length: 5000\r\n\r\n".encode()
                + b'{"model": "policy", "messages": ['
            )
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.transport.abort()  # as the kernel closes a killed process's socket
            await asyncio.sleep(0.5)
            assert session.ended is None, session.end_error
            async with httpx.AsyncClient(base_url=root, timeout=60) as client:
                reply = await client.get("/v1/models", headers={"Authorization": f"Bearer {session.key}"})
                assert reply.status_code == 200
        finally:
            server.close(session)
            await server.stop()

    asyncio.run(scenario())
