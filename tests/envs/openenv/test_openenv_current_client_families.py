"""OpenEnv's current client (openenv 0.10, `.venv-openenv`) on an AgentGym game and on AppWorld served by
`serve <family>`: tool episodes get the rewards of our in-process episodes of the same actions (TextCraft: success
score; AppWorld: TGC's pass fraction, its code still run in the sandbox of our task source), and no route of the
served AppWorld answers anything the policy could use: every route is asked, and none holds a solution line, a
test's requirement or an answer of the tasks it lists."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from loop_agents.config.load import compose
from loop_agents.envs.appworld.config import DEFAULT_PYTHON as APPWORLD_PYTHON
from loop_agents.envs.appworld.config import REPO_ROOT
from loop_agents.envs.selected import close_task_source, make_task_source, start_task_source
from tests.envs.agentgym.textcraft_solver import plan
from tests.envs.openenv.current_client import current_openenv, play_in_process, started

pytestmark = pytest.mark.slow
APPWORLD_OVERRIDES = [
    "env.options.pool_size=2",
    "env.options.execute_timeout_s=10",
    "env.options.max_interactions=6",
]


async def in_process(overrides: list[str], episodes: list[tuple[str, list[str]]]):
    """Our own episodes (the family's task source as a run composes it) of (task id, actions)."""
    source = make_task_source(compose(overrides))
    await start_task_source(source)
    try:
        return [await play_in_process(source, task_id, actions) for task_id, actions in episodes]
    finally:
        await close_task_source(source)


def test_textcraft_tool_episodes_score_as_in_process():
    overrides = ["env=textcraft"]
    source = make_task_source(compose(overrides))
    split = next(s for s in ("train", "test") if "textcraft_13" in source.task_ids(s))
    ids = source.task_ids(split)
    indices = [
        ids.index("textcraft_13"),
        ids.index("textcraft_15"),
    ]  # the solver's plan solves 13 (agentgym tests)
    first = asyncio.run(in_process(overrides, [(ids[i], []) for i in indices]))
    solved, half = plan(first[0][0][0]), plan(first[1][0][0])
    half = half[: max(1, len(half) // 2)]
    local = asyncio.run(in_process(overrides, [(ids[indices[0]], solved), (ids[indices[1]], half)]))
    specs = [{"split": split, "index": i, "calls": [["act", {"action": a}] for a in actions]}
             for i, actions in zip(indices, (solved, half), strict=True)]  # fmt: skip
    with started("textcraft") as served:
        played = current_openenv({"command": "episodes", "url": served.url, "episodes": specs})
    for episode, (texts, evaluation) in zip(played, local, strict=True):
        assert episode["tools"] == ["act"]
        # TextCraft lists its crafting commands in a new order at every reset; the goal and the moves' replies agree
        assert episode["reset_text"].splitlines()[-1] == texts[0].splitlines()[-1]
        assert [s["text"] for s in episode["steps"] if s["text"]] == texts[1:]
        last = episode["steps"][-1]
        assert last["done"] and (last["reward"], last["success"]) == (evaluation.reward, evaluation.success)
    assert played[0]["steps"][-1]["reward"] == 1.0 and played[1]["steps"][-1]["success"] is False


@pytest.fixture(scope="module")
def appworld_root(tmp_path_factory) -> Path:
    if not APPWORLD_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    root = tmp_path_factory.mktemp("appworld_root")
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "build_appworld_data.py"), "--root", str(root),
                    "--seed", "0", "--scenarios", "train=2,dev=1,test_normal=1,test_challenge=1"],
                   check=True, timeout=600, capture_output=True)  # fmt: skip
    return root


@pytest.fixture(scope="module")
def served_appworld(appworld_root):
    with started("appworld", [f"env.options.root={appworld_root}", *APPWORLD_OVERRIDES]) as server:
        yield server


def ground_truth(root: Path, task_id: str) -> tuple[str, list[str]]:
    """A task's solution code, and the strings the policy must never get: solution lines, test requirements,
    the answer."""
    truth = root / "data" / "tasks" / task_id / "ground_truth"
    solution = (truth / "solution.py").read_text()
    secrets = [line.strip() for line in solution.splitlines() if len(line.strip()) >= 30]
    secrets += re.findall(r'test\("""(.+?)"""', (truth / "evaluation.py").read_text(), flags=re.S)
    answer = json.loads((truth / "answer.json").read_text())
    if answer not in (None, ""):
        secrets.append(json.dumps(answer))
    return solution, secrets


def test_appworld_tool_episodes_score_as_in_process(served_appworld, appworld_root):
    overrides = ["env=appworld", f"env.options.root={appworld_root}", *APPWORLD_OVERRIDES]
    task_id = make_task_source(compose(overrides)).task_ids("dev")[0]
    solution, _ = ground_truth(appworld_root, task_id)
    cells = {"solved": [solution], "no-op": ["print(1 + 1)", "apis.supervisor.complete_task()"]}
    local = asyncio.run(in_process(overrides, [(task_id, cells["solved"]), (task_id, cells["no-op"])]))
    specs = [
        {"split": "dev", "index": 0, "calls": [["execute", {"code": c}] for c in codes]}
        for codes in cells.values()
    ]
    played = current_openenv({"command": "episodes", "url": served_appworld.url, "episodes": specs})
    for episode, (_, evaluation) in zip(played, local, strict=True):
        assert episode["task_id"] == task_id and episode["tools"] == ["execute"]
        last = episode["steps"][-1]
        assert last["done"] and (last["reward"], last["success"]) == (evaluation.reward, evaluation.success)
        assert last["details"]["pass_fraction"] == evaluation.details["pass_fraction"] == evaluation.reward
    rewards = [episode["steps"][-1]["reward"] for episode in played]
    assert rewards[0] == 1.0 and 0.0 <= rewards[1] < 1.0, rewards


def test_no_appworld_route_answers_ground_truth(served_appworld, appworld_root):
    url, env = served_appworld.url, "loop_agents_appworld"
    http = httpx.Client(base_url=url, timeout=300)
    splits = [split["name"] for split in http.get(f"/{env}/splits").json()]
    assert set(splits) == {"train", "dev", "test_normal", "test_challenge"}
    answers: dict[str, str] = {}
    asked: set[str] = set()

    def ask(method: str, path: str, route: str, **body) -> None:
        response = http.request(method, path, **body)
        answers[f"{method} {path} {json.dumps(body)}"] = response.text
        asked.add(f"{method} {route}")

    for route, path in (("/health", "/health"), ("/metadata", "/metadata"), ("/schema", "/schema"),
                        ("/state", "/state"), ("/list_environments", "/list_environments"), ("/docs", "/docs"),
                        ("/redoc", "/redoc"), ("/openapi.json", "/openapi.json"),
                        ("/{env_name}/splits", f"/{env}/splits")):  # fmt: skip
        ask("GET", path, route)
    for split in splits:
        ask("GET", f"/tasks/{split}", "/tasks/{split}")
        for name, body in (("tasks", {}), ("num_tasks", {}), ("task", {"index": 0}),
                           ("task_range", {"start": 0, "stop": 100})):  # fmt: skip
            ask("POST", f"/{env}/{name}", "/{env_name}/" + name, json={"split": split, **body})
    ask("POST", "/reset", "/reset", json={"split": "dev", "index": 0})
    ask("POST", "/step", "/step", json={"action": {"type": "call_tool", "tool_name": "execute",
                                                   "arguments": {"code": "print(1)"}}})  # fmt: skip
    for method in ("tools/list", "tools/call"):
        ask("POST", "/mcp", "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                          "params": {"name": "execute", "arguments": {"code": "print(1)"}}})  # fmt: skip
    routes = {f"{method.upper()} {path}" for path, item in http.get("/openapi.json").json()["paths"].items()
              for method in item}  # fmt: skip
    assert routes <= asked, f"not asked: {sorted(routes - asked)}"  # every route the server has (/ws: below)
    # an episode through the session (/ws) too: its reset, a cell, and its scored end (the tests all fail)
    (episode,) = current_openenv({"command": "episodes", "url": url, "episodes": [
        {"split": "dev", "index": 0, "calls": [["execute", {"code": "print(1)"}]]}]})  # fmt: skip
    answers["/ws episode"] = json.dumps(episode)
    assert episode["steps"][-1]["details"]["num_passed"] < episode["steps"][-1]["details"]["num_tests"]
    task_ids = [task for split in splits for task in http.get(f"/tasks/{split}").json()["task_ids"]]
    leaks = []
    for task_id in task_ids:
        _, secrets = ground_truth(appworld_root, task_id)
        for secret in secrets:  # as written, and as JSON writes it inside a string
            forms = {secret, json.dumps(secret)[1:-1]}
            leaks += [(where, secret) for where, text in answers.items() if any(f in text for f in forms)]
    assert not leaks, leaks[:5]
