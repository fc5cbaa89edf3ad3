"""A SIGTERM whose SystemExit(143) is turned into another exit on its way out (Ray's signal check inside
ray.get/ray.wait turns it into SystemExit(1)) still leaves the training process with 143. Real signals, in a
child interpreter so this test's own handlers stay as they are."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import os, signal, sys
from loop_agents.orchestration.ray_session import exit_cleanly_on_sigterm, sigterm_exit_code
exit_cleanly_on_sigterm()
with sigterm_exit_code():
    if sys.argv[1] == "replaced":
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()
        except SystemExit:
            raise SystemExit(1)  # what Ray's core worker raises for it
    elif sys.argv[1] == "error":
        raise RuntimeError("no signal: an ordinary failure keeps its own exit")
    else:
        raise SystemExit(int(sys.argv[1]))
"""


@pytest.mark.parametrize(("how", "code"), [("replaced", 143), ("error", 1), ("0", 0), ("2", 2)])
def test_exit_code_after_sigterm(how: str, code: int) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert ("RuntimeError" in done.stderr) == (how == "error")
