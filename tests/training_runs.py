"""One finished `loop_agents.train` run in a subprocess, for the tests that read a shrunk run's files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}


def finished_run(command: list[str], timeout_s: float) -> str:
    """Run `command` from the repository root (Ray's and vLLM's usage reports off); assert it exits 0 (with the
    end of its output) and return the policy's base model path from its '| model <path> |' line."""
    done = subprocess.run(
        command, cwd=ROOT, env={**os.environ, **QUIET}, capture_output=True, text=True, timeout=timeout_s
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return re.search(r"\| model (\S+) \|", done.stdout).group(1)
