"""Overrides for tests that start `python -m loop_agents.train` on a bad input: a run directory of their own.

Without one, train uses `runs/<run.name>`, and in a checkout where the README's demo ran, `runs/demo` is a finished
run: train says "already finished" and exits 0 before the check the test is about."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

_RUN_DIRS = tempfile.TemporaryDirectory(
    prefix="train_cli_"
)  # removed when the test session's interpreter exits


def with_own_run_dir(overrides: Sequence[str]) -> tuple[str, ...]:
    """`overrides`, plus `run.dir=<a fresh temporary directory>/run` unless they name a run.dir."""
    if any(o.startswith("run.dir=") for o in overrides):
        return tuple(overrides)
    return (*overrides, f"run.dir={tempfile.mkdtemp(dir=_RUN_DIRS.name)}/run")
