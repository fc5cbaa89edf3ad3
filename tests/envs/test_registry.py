"""The registry finds families by `env.name`: built-ins, and packages' entry points (group
`loop_agents.environments`). A declared family that fails to import or lacks a required part is one line naming the
package and what is missing, exit 2, before anything starts.

The packages here are real distributions found by `importlib.metadata` (a `.dist-info` with `entry_points.txt` on
`sys.path`, what pip writes), started in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loop_agents.envs.family import EnvironmentFamily, missing_parts
from loop_agents.envs.registry import BUILT_IN, family, family_names
from loop_agents.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _distribution(site: Path, name: str, entry: str, module_source: str | None = None) -> None:
    """A distribution `name` declaring `entry` (`env = module:object`), with its module if given."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[loop_agents.environments]\n{entry}\n")
    if module_source is not None:
        module = entry.split("=", 1)[1].strip().split(":")[0]
        (site / f"{module}.py").write_text(textwrap.dedent(module_source))


def _train(site: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "loop_agents.train", *overrides, "--cfg", "job"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_every_built_in_family_is_complete_and_answers_its_name():
    assert set(BUILT_IN) <= set(family_names())
    for name in BUILT_IN:
        if name == "openenv" and not _importable("loop_agents.envs.openenv.family"):
            continue  # its module lands with the OpenEnv client
        assert family(name).name == name and missing_parts(family(name)) == []


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def test_an_unknown_name_lists_the_families():
    with pytest.raises(
        ConfigError, match=r"env.name='nope' is not an environment; choose one of: bundled, appworld"
    ):
        family("nope")


def test_missing_parts_are_named():
    class Half(EnvironmentFamily):
        name = "half"

        def agent(self, cfg):
            return None

    assert missing_parts(Half()) == ["settings_class", "task_source"]


def test_a_family_that_fails_to_import_is_one_line_naming_the_package(tmp_path):
    _distribution(
        tmp_path, "broken_env_pkg", "broken_env = broken_env_module:FAMILY", "import no_such_dependency\n"
    )
    done = _train(tmp_path, "env=broken_env")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "config error: environment 'broken_env' of package broken_env_pkg: broken_env_module:FAMILY failed to "
        "import: ModuleNotFoundError: No module named 'no_such_dependency'"
    ]


def test_a_family_without_an_agent_is_one_line_naming_what_is_missing(tmp_path):
    source = """
        from dataclasses import dataclass
        from loop_agents.envs.family import EnvironmentFamily

        @dataclass
        class Settings:
            size: int = 3

        class NoAgent(EnvironmentFamily):
            name = "no_agent"
            settings_class = Settings

            def task_source(self, settings, cfg):
                return None

        FAMILY = NoAgent()
    """
    _distribution(tmp_path, "no_agent_pkg", "no_agent = no_agent_module:FAMILY", source)
    done = _train(tmp_path, "env=no_agent")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "config error: environment 'no_agent' of package no_agent_pkg: no_agent_module:FAMILY lacks agent "
        "(see docs/environments/add-an-environment.md)"
    ]


def test_a_package_may_not_take_a_built_in_name(tmp_path):
    _distribution(tmp_path, "squatter_pkg", "bundled = squatter_module:FAMILY", "FAMILY = None\n")
    done = _train(tmp_path, "env=bundled")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "squatter_pkg names an environment that loop_agents already provides" in done.stderr
