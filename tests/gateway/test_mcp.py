"""The episode's tools over MCP (`POST /mcp`, loop_agents/gateway/mcp.py): the `mcp` package's own client works
against the gateway unmodified, only with the episode's key, malformed frames get JSON-RPC errors and the episode
goes on, and a command program that reaches its tools over MCP plays a recorded, scored episode (real server, real
HTTP, the real tiny tokenizer and gem hunt; the model's turns are played back as fixed ids)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from transformers import AutoTokenizer

from loop_agents.envs.bundled.env import BundledEnvironment, BundledTaskSource
from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.gateway.episode import ProgramEpisodes
from loop_agents.gateway.program import parse_program
from loop_agents.gateway.render import ConversationRenderer
from loop_agents.gateway.server import GatewayServer
from loop_agents.gateway.session import EpisodeSession
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.parsers import parser_for
from tests.gateway.sessions import gem_hunt_session
from tests.rollout.scripted import ScriptedGenerator


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


async def _session(tokenizer, max_turns: int = 8) -> EpisodeSession:
    env = BundledEnvironment()
    reset = await env.reset("gemhunt_10000")
    return gem_hunt_session(
        tokenizer,
        ScriptedGenerator([[0]]),
        EpisodeConfig(max_turns=max_turns),
        task={"task_id": "gemhunt_10000", "messages": []},
        env=env,
        reset=reset,
        agent=TextActionAgent(),
    )


def _http_client(key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})


def test_the_mcp_packages_client_lists_and_calls_the_tools(tokenizer):
    async def scenario():
        server = GatewayServer()
        root = await server.start()
        session = await _session(tokenizer)
        server.open(session)
        try:
            async with (
                _http_client(session.key) as http_client,
                streamable_http_client(f"{root}/mcp", http_client=http_client) as (read, write),
                ClientSession(read, write) as mcp_session,
            ):
                initialized = await mcp_session.initialize()
                assert initialized.protocol_version == "2025-11-25"
                assert initialized.server_info.name == "loop_agents-gateway"
                assert initialized.capabilities.tools is not None
                await mcp_session.send_ping()
                listed = await mcp_session.list_tools()
                assert [(t.name, t.description, t.input_schema) for t in listed.tools] == [
                    (t.name, t.description, t.parameters) for t in GEM_HUNT_TOOLS
                ]
                opened = await mcp_session.call_tool("open", {"container": "red box"})
                assert not opened.is_error and opened.content[0].text
                refused = await mcp_session.call_tool("teleport", {"to": "the gem"})
                assert refused.is_error and refused.content[0].text.startswith("Error (unknown_tool)")
                wrong_type = await mcp_session.call_tool("open", {"container": 3})
                assert wrong_type.is_error
            # the package's high-level Client (mode "auto": it probes `server/discover` first, then initializes)
            async with (
                _http_client(session.key) as http_client,
                Client(streamable_http_client(f"{root}/mcp", http_client=http_client)) as client,
            ):
                assert [t.name for t in (await client.list_tools()).tools] == ["open", "answer"]
                again = await client.call_tool("open", {"container": "red box"})
                assert again.content[0].text == opened.content[0].text
        finally:
            await server.stop()
        return session

    session = asyncio.run(scenario())
    # the same path as POST /tools/{name}: every call counted against the budget, the refused ones by kind
    assert session.tool_calls == 4 and session.ended is None
    traj = session.recorder.trajectory
    assert traj.metadata["env_steps"] == 2
    assert traj.metadata["tool_errors"] == {"unknown_tool": 1, "wrong_type": 1}


def test_keys_and_malformed_frames(tokenizer):
    async def scenario():
        server = GatewayServer()
        root = await server.start()
        session = await _session(tokenizer, max_turns=2)
        other = await _session(tokenizer)
        server.open(session)
        server.open(other)
        auth = {"Authorization": f"Bearer {session.key}"}
        try:
            async with httpx.AsyncClient(base_url=root, timeout=60) as http:

                async def post(content, headers=auth):
                    return await http.post("/mcp", content=content, headers=headers)

                ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
                assert (await post(ping, {})).status_code == 401
                assert (await post(ping, {"Authorization": "Bearer guessed"})).status_code == 401
                # the mcp client with a wrong key gets no answer but the refusal (its MCPError for an HTTP error)
                with pytest.raises(BaseExceptionGroup) as refused:
                    async with (
                        _http_client("guessed") as http_client,
                        streamable_http_client(f"{root}/mcp", http_client=http_client) as (read, write),
                        ClientSession(read, write) as mcp_session,
                    ):
                        await mcp_session.initialize()
                assert refused.group_contains(MCPError, match="error response")
                assert (await http.get("/mcp", headers=auth)).status_code == 405
                assert (await post(ping)).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}

                def error_of(reply, status):
                    assert reply.status_code == status, reply.text
                    return reply.json()["error"]["code"]

                assert error_of(await post(b"{not json"), 400) == -32700
                assert error_of(await post(b"\xff\xfe"), 400) == -32700
                assert error_of(await post(b"[" + ping + b"]"), 400) == -32600
                assert error_of(await post(b'"ping"'), 400) == -32600
                assert error_of(await post(b'{"id": 2, "method": "ping"}'), 400) == -32600
                assert (
                    error_of(await post(b'{"jsonrpc": "2.0", "id": null, "method": "ping"}'), 400) == -32600
                )
                assert error_of(await post(b'{"jsonrpc": "2.0", "id": 3, "method": 7}'), 200) == -32600
                assert (
                    error_of(await post(b'{"jsonrpc": "2.0", "id": 4, "method": "resources/list"}'), 200)
                    == -32601
                )
                bad_params = (
                    b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {}}}'
                )
                assert error_of(await post(bad_params), 200) == -32602
                listed_params = b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": [1]}'
                assert error_of(await post(listed_params), 200) == -32602
                foreign = {**auth, "Origin": "http://evil.example"}
                assert error_of(await post(ping, foreign), 403) == -32600
                local = {**auth, "Origin": root}
                assert (await post(ping, local)).status_code == 200
                assert (
                    error_of(await post(ping, {**auth, "MCP-Protocol-Version": "1900-01-01"}), 400) == -32600
                )
                notification = await post(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
                assert notification.status_code == 202 and notification.content == b""
                # arguments that are not an object: a malformed call the program sees as an error result
                not_object = (
                    b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "open", '
                )
                not_object += b'"arguments": [1]}}'
                reply = (await post(not_object)).json()["result"]
                assert reply["isError"] and reply["content"][0]["text"].startswith("Error (malformed_call)")
                # the episode goes on: a good call steps the environment
                call = b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", '
                call += b'"params": {"name": "open", "arguments": {"container": "red box"}}}'
                reply = (await post(call)).json()["result"]
                assert reply["isError"] is False and reply["content"][0]["type"] == "text"
                assert session.ended is None and other.tool_calls == 0
                # the tool budget (max_turns=2) is spent: a JSON-RPC error; the episode ends as on the HTTP route
                over = (await post(call.replace(b'"id": 8', b'"id": 9'))).json()["error"]
                assert over["code"] == -32000 and over["data"] == {"status": 429, "code": "call_budget"}
                assert session.ended == FinishReason.TURN_BUDGET
                server.close(session)
                assert (await post(ping)).status_code == 401  # the key is revoked with its episode
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_a_command_program_plays_its_tools_over_mcp(tokenizer):
    """`tests/gateway/mcp_command.py` as `agent.program`: it knows only its environment (OPENAI_BASE_URL,
    OPENAI_API_KEY, LOOP_AGENTS_MCP_URL); the model's turns open the red box, then answer."""

    def turn(text: str) -> list[int]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids + [tokenizer.convert_tokens_to_ids("<|im_end|>")]

    open_call = '<tool_call>\n{"name": "open", "arguments": {"container": "red box"}}\n</tool_call>'
    answer_call = '<tool_call>\n{"name": "answer", "arguments": {"code": "4 7"}}\n</tool_call>'
    generator = ScriptedGenerator([turn(open_call), turn(answer_call)])
    runner = ProgramEpisodes(
        program=parse_program(f"{sys.executable} {Path(__file__).with_name('mcp_command.py')}"),
        renderer=ConversationRenderer(tokenizer),
        parser=parser_for("qwen2_5"),
        tools=tuple(GEM_HUNT_TOOLS),
        timeout_s=60,
    )
    cfg = EpisodeConfig(max_tokens_per_turn=64, max_turns=4, max_context_tokens=2048, seed=0)

    async def episode():
        try:
            env = await BundledTaskSource().make_env()
            return await runner.play(env, generator, TextActionAgent(), None, cfg, task_id="gemhunt_10000")
        finally:
            await runner.close()

    traj = asyncio.run(episode())
    assert traj.finish_reason == FinishReason.DONE, traj.metadata  # `answer` ended the game
    program = traj.metadata["program"]
    assert program["model_calls"] == 2 and program["tool_calls"] == 2 and traj.metadata["env_steps"] == 2
    assert [t.action_text for t in traj.turns] == [
        'open({"container": "red box"})',
        'answer({"code": "4 7"})',
    ]
    assert traj.metadata["assistant_messages"] == {"spliced": 1, "as_text": 0}
    assert traj.timings.get("evaluate_s") is not None
    assert sum(traj.loss_mask) == sum(t.gen_end - t.gen_start for t in traj.turns)
