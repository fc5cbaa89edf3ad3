"""Fixtures of this folder: a small real data root (built once) and a pool of 4 real AppWorld servers, stopped
when the folder's tests are done (idle servers would slow every later test on a 2-core machine)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON, REPO_ROOT, AppWorldConfig
from loop_agents.envs.appworld.task_source import AppWorldTaskSource

# 8 train scenarios cover the 7 normal templates; 2 challenge scenarios cover the held-out ones.
SMALL_SIZES = "train=8,dev=1,test_normal=1,test_challenge=2"
TIMINGS: dict[str, float] = {}


def build_root(root: Path, seed: int, sizes: str) -> float:
    began = time.monotonic()
    subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "build_appworld_data.py"),
         "--root", str(root), "--seed", str(seed), "--scenarios", sizes],
        check=True, timeout=600,
    )  # fmt: skip
    return time.monotonic() - began


@pytest.fixture(scope="package")
def appworld_root(tmp_path_factory) -> Path:
    if not DEFAULT_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    root = tmp_path_factory.mktemp("appworld_root")
    TIMINGS["data_build_s"] = build_root(root, seed=0, sizes=SMALL_SIZES)
    return root


@pytest.fixture(scope="package")
def event_loop_session():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="package")
def task_source(appworld_root, event_loop_session):
    """4 real episode hosts on 127.0.0.1 (short cell timeout and grace so the hang tests are quick; small
    memory and file-size limits so the limit tests need no real gigabytes)."""
    config = AppWorldConfig(
        root=str(appworld_root),
        pool_size=4,
        execute_timeout_s=3,
        grace_s=4.0,
        max_interactions=8,
        memory_limit_mb=1024,
        file_size_limit_mb=16,
    )
    source = AppWorldTaskSource(config)
    TIMINGS["pool_start_4_s"] = event_loop_session.run_until_complete(source.start())
    yield source
    event_loop_session.run_until_complete(source.close())
    print(f"\n[appworld timings] {TIMINGS}")


@pytest.fixture
def run(event_loop_session):
    return event_loop_session.run_until_complete
