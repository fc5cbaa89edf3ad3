"""AgentGym's own client classes (re-implemented field for field in agentgym_reference_client.py) drive
our three servers: constructor, reset, observe, step to done, close, with the fields, types and
reward/score scales of docs/agentgym_conformance.md; plus every BabyAI level and sampled TextCraft and
SciWorld items reset without a 5xx, and options a game lacks are refused with the supported list."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest
from agentgym_reference_client import BabyAIEnvClient, SciworldEnvClient, TextCraftEnvClient
from textcraft_solver import plan

from loop_agents.envs.agentgym.config import AgentGymEnvConfig
from loop_agents.envs.agentgym.configured_source import ConfiguredAgentGymTaskSource

pytestmark = pytest.mark.slow


def react(action: str) -> str:
    """A model reply in the Thought/Action format AgentGym's prompts ask for."""
    return f"Thought:\nThis is the next step.\n\nAction:\n{action}"


def test_agentgym_babyai_client_plays_an_episode(babyai_server):
    from loop_agents.envs.agentgym.games.babyai import BabyAIGame

    local = BabyAIGame()  # the same item here: the length of the macro action's primitive path
    local.reset(1)
    path = local.actions["go to red ball 1"]
    max_steps = local.env.unwrapped.max_steps
    local.close()

    client = BabyAIEnvClient(babyai_server.url, data_len=4400)
    reply = client.reset(1)  # level GoToRedBall, seed 0
    assert {"observation", "reward", "score", "deleted", "done"} <= set(reply)
    assert (reply["reward"], reply["score"], reply["done"], reply["deleted"]) == (0, 0, False, False)
    first = client.observe()
    assert first.startswith(
        "Your goal: go to the red ball\nIn front of you in this room, you can see several objects: "
    )
    assert first.endswith('"go to red ball 1", "check available actions"]') and '"pickup red ball 1"' in first
    # the prompt's "pick up" spelling is not an action of AgentGym's server (it lists "pickup")
    out = client.step(react("pick up red ball 1"))
    assert out.state.startswith(
        "The action is not recognized. Please check valid actions.\nAvailable actions: ["
    )
    assert (out.reward, out.done) == (0, False)
    out = client.step(react("check available actions"))
    assert out.state.startswith(
        "You can take the following actions: turn left, turn right, move forward, pickup"
    )
    out = client.step(react("go to red ball 1"))
    expected = 1 - 0.9 * len(path) / max_steps  # minigrid's success reward, counted in primitive steps
    assert out.done and "The task is completed." in out.state
    assert out.reward == pytest.approx(expected) and client.info["reward"] == pytest.approx(expected)
    assert client.info["score"] == pytest.approx(0 + 0 + expected)  # running sum of the three replies' reward
    assert (
        httpx.post(f"{babyai_server.url}/step", json={"id": client.env_id, "action": "turn left"}).status_code
        == 409
    )
    assert client.close() == {"closed": True}


def test_agentgym_textcraft_client_plays_an_episode(textcraft_server):
    client = TextCraftEnvClient(textcraft_server.url, data_len=419)  # reads the first observation of /create
    assert client.observe().startswith("Crafting commands:\n") and "\n\nGoal: craft " in client.observe()
    reply = client.reset(13)
    assert {"id", "observation", "reward", "done"} <= set(reply) and (reply["reward"], reply["done"]) == (
        0,
        False,
    )
    two = client.step("Action: inventory\nAction: inventory")  # answered by the client itself
    assert two.state.startswith("Error: Only one 'Action'") and two.reward == 0
    actions = plan(client.observe())
    for action in actions:
        out = client.step(react(action))
        assert isinstance(out.reward, (int, float)) and out.reward in (0, 1)
    assert out.done and out.reward == 1 and client.info["reward"] == 1
    assert client.close() == {"closed": True}


def test_agentgym_sciworld_client_plays_an_episode(sciworld_server):
    from loop_agents.envs.agentgym.games.sciworld import SciWorldGame

    item = 3240  # find-non-living-thing, variation 4: a 5-action gold path
    local = SciWorldGame()
    try:
        gold = local.gold_actions(item)
    finally:
        local.close()
    client = SciworldEnvClient(sciworld_server.url, data_len=5000)
    reply = client.reset(item)
    assert (reply["task_name"], reply["var_num"]) == ("find-non-living-thing", 4)
    assert {"task_description", "observation", "reward", "score", "deleted", "done"} <= set(reply)
    assert client.observe() == reply["task_description"] + "\n" + reply["observation"]
    assert "non-living thing" in reply["task_description"] and "This room is called" in reply["observation"]
    scores, rewards = [reply["score"]], [reply["reward"]]
    for action in gold:
        out = client.step(react(action))
        scores.append(out.reward)  # AgentGym's client reports the server's `score`
        rewards.append(client.info["reward"])
        if out.done:
            break
    assert out.done and scores[-1] == 100  # ScienceWorld's 0-100 scale
    assert all(0 <= s <= 100 for s in scores) and scores == sorted(scores)
    assert sum(rewards) == scores[-1]  # `reward` is the per-step change of the score
    assert client.close() == {"closed": True}


def test_every_babyai_level_resets(babyai_server):
    client = BabyAIEnvClient(babyai_server.url, data_len=4400)
    for data_idx in range(40):  # one item per level, GoToObjS6 (idx 3) included
        assert client.reset(data_idx)["observation"].startswith("Your goal: ")
    last = client.reset(4399)  # the last item
    assert last["done"] is False
    url = babyai_server.url
    env_id = httpx.post(f"{url}/create", json={"action_set": "primitive"}).json()["id"]
    for data_idx in range(40, 80):
        reply = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": data_idx})
        assert reply.status_code == 200 and '"move forward"' in reply.json()["observation"]
    bad = httpx.post(f"{url}/create", json={"action_set": "macro"})
    assert bad.status_code == 400 and "supported: ['agentgym', 'primitive']" in bad.json()["error"]
    beyond = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": 4400})
    assert beyond.status_code == 400 and "4400 items" in beyond.json()["error"]


def test_textcraft_task_sets_and_custom_goal(textcraft_server):
    url = textcraft_server.url
    rng = random.Random(0)
    for task_set, count in (("ours", 419), ("agentgym", 544)):
        created = httpx.post(f"{url}/create", json={"task_set": task_set}).json()
        assert created["observation"].startswith("Crafting commands:")
        for data_idx in rng.sample(range(count), 25):
            reply = httpx.post(f"{url}/reset", json={"id": created["id"], "data_idx": data_idx})
            assert reply.status_code == 200 and "Goal: craft" in reply.json()["observation"]
        splits = httpx.get(f"{url}/splits", params={"task_set": task_set}).json()
        assert sum(len(v) for v in splits.values()) == count
    # AgentGym's order: shallowest first, so its item 0 is a one-step recipe
    env_id = httpx.post(f"{url}/create", json={"task_set": "agentgym"}).json()["id"]
    first = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": 0}).json()["observation"]
    again = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": 544}).json()["observation"]
    assert first == again  # modulo the item count, as AgentGym
    custom = httpx.post(
        f"{url}/create",
        json={"commands": "craft 4 oak planks using 1 oak logs", "goal": "minecraft:oak_planks"},
    ).json()
    assert (
        custom["observation"]
        == "Crafting commands:\ncraft 4 oak planks using 1 oak logs\n\nGoal: craft oak planks."
    )
    httpx.post(f"{url}/step", json={"id": custom["id"], "action": "get 1 oak logs"})
    done = httpx.post(
        f"{url}/step", json={"id": custom["id"], "action": "craft 4 oak planks using 1 oak logs"}
    ).json()
    assert (done["reward"], done["done"]) == (1, True)
    bad = httpx.post(f"{url}/create", json={"action_set": "primitive"})
    assert bad.status_code == 400 and "supported: ['agentgym']" in bad.json()["error"]


def test_sampled_sciworld_items_reset(sciworld_server):
    url = sciworld_server.url
    count = sum(httpx.get(f"{url}/info", timeout=120).json()["splits"].values())
    env_id = httpx.post(f"{url}/create", timeout=120).json()["id"]  # starts a JVM
    for data_idx in [0, count - 1, *random.Random(0).sample(range(count), 4)]:
        reply = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": data_idx}, timeout=120)
        assert reply.status_code == 200, reply.text
        assert reply.json()["task_description"] and reply.json()["score"] == 0
    beyond = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": count}, timeout=120)
    assert beyond.status_code == 400 and f"there are {count} items" in beyond.json()["error"]


def test_agentgym_http_source_with_options_against_our_server(textcraft_server):
    """env=agentgym_http: our client speaks AgentGym's protocol to a running server by URL; the
    task_set option reaches the server in the /create body and picks the splits of that task set."""
    source = ConfiguredAgentGymTaskSource(
        AgentGymEnvConfig(env="textcraft", url=textcraft_server.url, task_set="agentgym")
    )
    assert sum(len(source.task_ids(s)) for s in ("train", "dev", "test")) == 544

    async def run() -> None:
        env = await source.make_env()
        assert env.create_options == {"task_set": "agentgym"}
        reset = await env.reset("textcraft_544")
        assert "Goal: craft" in reset.observation
        step = await env.step("Thought: look first.\nAction: inventory")
        assert step.observation == "Could not execute Thought: look first.\nAction: inventory"  # raw format
        env.action_format = "react"
        step = await env.step("Thought: look first.\nAction: inventory")
        assert step.observation.startswith("Inventory: ")
        evaluation = await env.evaluate()
        assert evaluation.reward == 0.0 and not evaluation.success
        await env.close()

    asyncio.run(run())
