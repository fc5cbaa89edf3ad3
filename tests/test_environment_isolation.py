"""A library that writes to os.environ on import does not reach the servers and runs of later tests
(tests/conftest.py restores the environment after each test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_BEFORE = os.environ.get("VLLM_LOGGING_LEVEL")


def test_a_test_that_imports_trl_changes_the_environment():
    pytest.importorskip("trl")
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_LEVEL"}
    code = "import os, trl; print(os.environ.get('VLLM_LOGGING_LEVEL'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    # trl/_compat.py's patch: every later vLLM server would log no INFO line
    assert out.stdout.strip() == "ERROR"
    os.environ["VLLM_LOGGING_LEVEL"] = "ERROR"  # what that import does in the test process (once per session)


def test_the_next_test_has_the_sessions_environment():
    assert os.environ.get("VLLM_LOGGING_LEVEL") == _BEFORE
