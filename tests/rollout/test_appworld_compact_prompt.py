"""`env.prompt=compact`: the switch reaches the agent, bad values are one line naming the key, the prompt is
a fraction of the full one in tiny-tokenizer tokens, and every API signature it lists is the engine's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from loop_agents.config.load import compose
from loop_agents.config.validate import ConfigError
from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.envs.appworld.compact_prompt import API_SIGNATURES, build_compact_messages
from loop_agents.envs.appworld.config import DEFAULT_PYTHON
from loop_agents.envs.appworld.prompt import build_messages
from loop_agents.envs.selected import make_agent
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.environment import ResetResult

ROOT = Path(__file__).resolve().parents[2]
INFO = {
    "instruction": "Send $12.50 to my friend Chen Xu on Venmo with the note 'groceries'.",
    "supervisor": {"first_name": "Olga", "last_name": "Petrov", "email": "olga.petrov@proton.me",
                   "phone_number": "2125550123"},
    "datetime": "2023-05-13T12:00:00",
}  # fmt: skip


def test_switch_reaches_the_agent_and_full_stays_the_default() -> None:
    assert make_agent(compose(["env=appworld"])).prompt == "full"
    agent = make_agent(compose(["env=appworld", "env.prompt=compact"]))
    assert agent.prompt == "compact"
    reset = ResetResult(observation=INFO["instruction"], info=INFO)
    system, user = agent.initial_messages(reset)
    assert system["role"] == "system" and user["role"] == "user"
    assert user["content"].endswith(f"Task: {INFO['instruction']}")
    assert "olga.petrov@proton.me" in user["content"] and "apis.venmo.create_transaction(" in user["content"]
    assert "Joyce Weaver" not in user["content"]  # no worked example
    # the compact episode never restates the task; the full one does
    assert agent.format_observation("42", reset) == "Output:\n```\n42\n```"
    assert "As a reminder" in AppWorldAgent().format_observation("42", reset)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["env=appworld", "env.prompt=short"],
            "env.prompt='short' is not a prompt of env='appworld'; choose one of: full, compact",
        ),
        (
            ["env=bundled", "env.prompt=compact"],
            "env.prompt='compact' is not a prompt of env='bundled'; choose one of: full",
        ),
    ],
)
def test_bad_prompt_is_one_line_naming_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_prompt_stops_train_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", "experiment=debug", "env.prompt=tiny"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "config error: env.prompt='tiny' is not a prompt of env='appworld'; choose one of: full, compact"
    ]


def test_agent_refuses_an_unknown_prompt() -> None:
    with pytest.raises(ValueError, match="env.prompt='short'"):
        AppWorldAgent(prompt="short")


def test_compact_prompt_is_a_quarter_of_the_full_one_in_tiny_tokens(tiny_model_dir: str) -> None:
    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    compact = len(chat.initial_ids(build_compact_messages(INFO)))
    full = len(chat.initial_ids(build_messages(INFO)))
    print(f"[prompt tokens, tiny tokenizer] compact {compact}, full {full}")
    assert compact < 1000 and full > 3000 and compact * 4 < full


_ENGINE_DOCS = """
import json, sys
from appworld.api_docs import prepare_api_docs
wanted = json.loads(sys.argv[1])
docs = {}
for app in wanted:
    for doc in prepare_api_docs(app, include_private_apis=False):
        docs[app + "." + doc["api_name"]] = [[p["name"], p["required"], p.get("default")] for p in doc["parameters"]]
print(json.dumps(docs))
"""


def test_every_listed_signature_is_the_engines_own() -> None:
    """Names, order, optional-ness and defaults of the parameters shown, against AppWorld's own API docs."""
    if not DEFAULT_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    apps = sorted({app for app, *_ in API_SIGNATURES})
    proc = subprocess.run(
        [str(DEFAULT_PYTHON), "-c", _ENGINE_DOCS, json.dumps(apps)], capture_output=True, text=True, timeout=300,
        env={"APPWORLD_ROOT": "/nonexistent", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    engine = json.loads(proc.stdout.strip().splitlines()[-1])
    for app, api, params, _ in API_SIGNATURES:
        real = engine.get(f"{app}.{api}")
        assert real is not None, f"{app}.{api} is not an API of the engine"
        names = [name for name, _, _ in real]
        shown = [p.strip() for p in params.split(",") if p.strip()]
        positions = []
        for param in shown:
            name, _, default = param.partition("=")
            assert name in names, f"{app}.{api} has no parameter {name!r}: {names}"
            _, required, real_default = real[names.index(name)]
            assert required == (not default), f"{app}.{api}({name}) required={required}"
            if default:
                assert eval(default) == real_default, f"{app}.{api}({name}) default is {real_default!r}"  # noqa: S307
            positions.append(names.index(name))
        assert positions == sorted(positions), f"{app}.{api}: parameters out of the engine's order"
        required_names = [name for name, required, _ in real if required]
        assert set(required_names) <= {p.partition("=")[0] for p in shown}, (
            f"{app}.{api} hides a required one"
        )
