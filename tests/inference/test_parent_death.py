"""A SIGKILLed owner or api_server leaves no vLLM process behind: neither the api_server nor its EngineCore.

vLLM's EngineCore has no parent-death watch of its own: every killed driver left one spinning at ~40 % of a core.
The api_server gets SIGTERM when its owner dies (its handler stops the engine), and every other Python process of
the tree gets a parent-death SIGKILL from `inference/server_site`, so a SIGKILLed api_server (what Ray does
to the children of a dead worker) takes EngineCore and its Worker with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

OWNER = """
import json, sys, time
from loop_agents.inference.server import VLLMServer
from tests.inference.conftest import tiny_inference_config
server = VLLMServer(tiny_inference_config(sys.argv[1], sys.argv[2], enable_lora=False))
server.start()
tree = [server.pid, *(p.pid for p in __import__("psutil").Process(server.pid).children(recursive=True))]
print("TREE " + json.dumps(tree), flush=True)
time.sleep(3600)
"""


def _start_owner(model_dir: str, tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """A process that owns a real server and prints the server's tree (api_server first)."""
    root = Path(__file__).resolve().parents[2]
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, model_dir, str(tmp_path)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    line = ""
    while not line.startswith("TREE "):  # the server's start-up progress lines come first
        line = owner.stdout.readline()
        assert line, f"the owner exited ({owner.wait()}) before its server was ready; see {tmp_path}"
    tree = json.loads(line.removeprefix("TREE "))
    assert len(tree) >= 2, f"expected api_server and EngineCore, got {tree}"
    return owner, tree


def _wait_all_gone(tree: list[int], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while any(_alive(pid) for pid in tree):
        left = [psutil.Process(p).name() for p in tree if _alive(p)]
        assert time.monotonic() < deadline, f"still running {within_s:.0f} s after {what}: {left}"
        time.sleep(0.5)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_sigkill_of_the_owner_takes_the_whole_server_tree_down(tiny_model_dir, tmp_path):
    pytest.importorskip("vllm")
    owner = None
    try:
        owner, tree = _start_owner(tiny_model_dir, tmp_path)
        assert (tmp_path / "vllm_server.pids").exists()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        _wait_all_gone(tree, 60, "the owner died")
    finally:
        _cleanup(owner, tmp_path)


@pytest.mark.slow
def test_sigkill_of_the_api_server_takes_engine_core_down(tiny_model_dir, tmp_path):
    """What Ray does when the driver dies: the dead worker's child (our api_server) gets SIGKILL, no handler runs."""
    pytest.importorskip("vllm")
    owner = None
    try:
        owner, tree = _start_owner(tiny_model_dir, tmp_path)
        engine = [psutil.Process(p).name() for p in tree[1:]]
        assert any("EngineCore" in name for name in engine), engine
        os.kill(tree[0], signal.SIGKILL)
        _wait_all_gone(tree, 15, "the api_server was SIGKILLed")
        assert owner.poll() is None  # the owner itself is untouched
    finally:
        _cleanup(owner, tmp_path)


def _cleanup(owner: subprocess.Popen | None, tmp_path: Path) -> None:
    if owner is not None:
        owner.kill()
    from loop_agents.child_process import reap_recorded_tree

    reap_recorded_tree(tmp_path / "vllm_server.pids")
