"""Starting Ray for a run: a local head of this machine's CPUs, or joining `ray.address` with the run's vLLM API
key in the job's runtime environment and Ray's own token auth where the cluster uses it."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig

from loop_agents.inference.api_key import ENV_NAME as API_KEY_ENV
from loop_agents.inference.api_key import ensure_run_key
from loop_agents.patches.ray_token_auth import use_ray_token_if_available


def init_ray(cfg: DictConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not sys.stdout.isatty():  # a log file gets plain "(Actor pid=..)" prefixes, not ANSI colour codes
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    key = ensure_run_key()  # before the local head starts: its workers inherit it (inference/api_key.py)
    if cfg.ray.address:
        use_ray_token_if_available()  # a private Ray function, checked there
        ray.init(address=cfg.ray.address, runtime_env={"env_vars": {API_KEY_ENV: key}}, **kwargs)
    else:
        ray.init(num_cpus=cfg.ray.num_cpus or os.cpu_count(), **kwargs)
    if threading.current_thread() is threading.main_thread():
        exit_cleanly_on_sigterm()


_received_signal: int | None = None  # set by the handler below; read by sigterm_exit_code


def exit_cleanly_on_sigterm() -> None:
    """SIGTERM (a scheduler, `kill`, the supervisor passing one on) becomes SystemExit(143), so the driver's
    `finally` shuts the cluster down. ray.init replaces the handler (its core worker's failure handler prints
    "SIGTERM received" and aborts, exit 134), and killed that way the process left Ray's node agents running
    (they ignored a later SIGTERM and needed SIGKILL); so this is armed again after ray.init. Checkpoints are
    written atomically: leaving mid-write loses nothing."""

    def stop(signum: int, _frame) -> None:
        global _received_signal
        _received_signal = signum
        signal.signal(signum, signal.SIG_DFL)  # a second one kills at once
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


@contextmanager
def sigterm_exit_code() -> Iterator[None]:
    """Whatever ends the block after a SIGTERM leaves as SystemExit(128 + signal). Needed because a signal that
    lands while the main thread waits inside ray.get/ray.wait runs the handler in Ray's C++ signal check, which
    turns its SystemExit(143) into SystemExit(1) (measured: exit 1 in about 1 run of 3, with no line printed)."""
    try:
        yield
    except BaseException:
        if _received_signal is not None:
            raise SystemExit(128 + _received_signal) from None
        raise
