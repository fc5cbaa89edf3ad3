"""A SIGKILLed owner leaves no vLLM process behind: neither the api_server nor its EngineCore.

vLLM's EngineCore has no parent-death watch: with SIGKILL as the api_server's parent-death signal, every killed
driver left an EngineCore spinning at ~40 % of a core. The server now gets SIGTERM, whose handler stops the engine.
What a SIGKILL of the server itself leaves is reaped by the next start (tests/test_child_process.py).
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
print(json.dumps(tree), flush=True)
time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_sigkill_of_the_owner_takes_the_whole_server_tree_down(tiny_model_dir, tmp_path):
    pytest.importorskip("vllm")
    root = Path(__file__).resolve().parents[2]
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, tiny_model_dir, str(tmp_path)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        line = owner.stdout.readline()
        assert line, f"the owner exited ({owner.wait()}) before its server was ready; see {tmp_path}"
        tree = json.loads(line)
        assert len(tree) >= 2, f"expected api_server and EngineCore, got {tree}"
        assert (tmp_path / "vllm_server.pids").exists()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 60
        while any(_alive(pid) for pid in tree):
            left = [psutil.Process(p).name() for p in tree if _alive(p)]
            assert time.monotonic() < deadline, f"still running 60 s after the owner died: {left}"
            time.sleep(0.5)
    finally:
        owner.kill()
        from loop_agents.child_process import reap_recorded_tree

        reap_recorded_tree(tmp_path / "vllm_server.pids")
