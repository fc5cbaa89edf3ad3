"""`serve <family>` runs on the OpenEnv we support (openenv 0.10 in `.venv-openenv`): any other, or none, is one
line naming what was found and the supported range, exit 2, before anything is served."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from loop_agents.envs.openenv.version import REPO_ROOT, installed_openenv, version_problem


def test_only_the_openenv_distribution_in_the_supported_range_passes():
    assert version_problem(("openenv", "0.10.0")) is None and version_problem(("openenv", "0.10.3")) is None
    for found in (
        ("openenv", "0.9.0"),
        ("openenv", "0.11.0"),
        ("openenv-core", "0.3.0"),
        ("openenv", "not.a"),
    ):
        problem = version_problem(found)
        assert problem.startswith(f"OpenEnv {found[0]} {found[1]} found in ") and ">=0.10,<0.11" in problem
        assert "\n" not in problem
    nothing = version_problem(None)
    assert nothing.startswith("no OpenEnv installed") and "bash scripts/install_openenv.sh" in nothing
    assert installed_openenv() == ("openenv-core", "0.3.0")  # the main venv's (its client side), not servable


def serve(python: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "LOOP_AGENTS_OPENENV_PYTHON": python}
    return subprocess.run([sys.executable, "-m", "loop_agents.envs.openenv", "serve", "bundled"], env=environ,
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)  # fmt: skip


@pytest.mark.slow
def test_serve_on_an_unsupported_openenv_is_one_line_exit_2():
    run = serve(sys.executable)  # the main venv: openenv-core 0.3.0
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    assert lines[0] == (f"[openenv] OpenEnv openenv-core 0.3.0 found in {sys.prefix}; loop_agents' OpenEnv server "
                        "supports openenv >=0.10,<0.11 (bash scripts/install_openenv.sh makes .venv-openenv with "
                        "openenv 0.10.0)")  # fmt: skip
    assert "serving" not in run.stdout


@pytest.mark.slow
def test_serve_without_the_openenv_venv_is_one_line_exit_2(tmp_path):
    missing = tmp_path / "no-venv" / "bin" / "python"
    run = serve(str(missing))
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    assert lines[0].startswith(
        f"[openenv] no OpenEnv venv: {missing} does not exist (bash scripts/install_openenv.sh"
    )
