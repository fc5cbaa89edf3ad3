"""The run page's labels and columns follow the environment family named in config.yaml: TGC/SGC and the code
behaviour columns for AppWorld only; the gem hunt and AgentGym show success."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loop_agents.view import build_site
from loop_agents.view.family import CODE_COLUMNS, UNKNOWN, run_family
from tests.view.dom import parse


def test_family_from_the_config():
    appworld, gem_hunt, textcraft = (run_family(text) for text in (
        "env:\n  name: appworld\n", "env:\n  name: bundled\n", "env: {name: textcraft}\n"))  # fmt: skip
    assert (appworld.name, appworld.goal_completion) == ("AppWorld", True)
    assert set(CODE_COLUMNS) <= set(appworld.behaviour_columns) and "eval/tgc" in appworld.charted
    assert (gem_hunt.name, gem_hunt.goal_completion) == ("gem hunt", False)
    assert (textcraft.name, textcraft.goal_completion) == ("AgentGym", False)
    assert not set(CODE_COLUMNS) & set(gem_hunt.behaviour_columns + textcraft.behaviour_columns)
    assert run_family("env: {name: no_such_family}\n") is UNKNOWN
    assert run_family("algorithm:\n  name: loop\n") is UNKNOWN
    assert run_family(None) is UNKNOWN and run_family("env: [unclosed") is UNKNOWN


def _index(run_dir: Path, tmp_path: Path, env: str):
    run = tmp_path / env
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("viewer"))
    (run / "config.yaml").write_text(f"env:\n  name: {env}\n")
    doc = parse(build_site(run, tmp_path / f"site_{env}").read_text())
    tables = doc.find_all("table")
    headers = [[th.text() for th in t.find_all("th")] for t in tables[:2]]
    chart_titles = " ".join(svg.text() for svg in doc.find_all("svg", cls="chart"))
    return doc, headers, chart_titles


@pytest.mark.parametrize("env", ["bundled", "babyai"])
def test_success_families_show_success_not_goal_completion(run_dir, tmp_path, env):
    doc, (rollout_headers, eval_headers), charts = _index(run_dir, tmp_path, env)
    assert eval_headers == [
        "split",
        "iteration",
        "episodes",
        "runs",
        "success",
        "reward",
        "turns",
        "gen tokens",
    ]
    assert rollout_headers[-2:] == ["turns", "gen tokens"] and "doc lookups" not in rollout_headers
    assert "TGC" not in charts and "SGC" not in charts and "tgc" not in charts
    assert "training: mean reward" in charts and "rollout/reward_mean" not in charts  # words, not keys
    row = [td.text() for td in doc.find_all("table")[1].find_all("tr")[1].find_all("td")]
    # alpha_1, alpha_2 succeed, beta_1 (reward 0.5) does not: success 2/3, reward (1 + 1 + 0.5) / 3
    assert row[:6] == ["dev", "2", "3", "1.000", "0.667", "0.833"]
    name = "gem hunt" if env == "bundled" else "AgentGym"
    assert doc.find_all("p", cls="family")[0].text() == f"environment: {name}"


def test_appworld_shows_goal_completion_and_code_behaviour(run_dir, tmp_path):
    doc, (rollout_headers, eval_headers), charts = _index(run_dir, tmp_path, "appworld")
    assert eval_headers[:6] == ["split", "iteration", "episodes", "runs", "TGC", "SGC"]
    assert "doc lookups" in eval_headers and "give-up" in rollout_headers
    assert "eval dev: TGC" in charts
