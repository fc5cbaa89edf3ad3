"""Start the cluster (Ray, vLLM server(s), rollout worker, evaluator) in a thread while the learner is built.

The two are independent: the servers need only the policy's base model path, the learner only its weights.
Starting vLLM is three Python processes importing one after the other (api_server, EngineCore, Worker); the
learner's set-up (torch + peft imports, model load, checkpoint load) runs beside it instead of after it.
Not with exclusive GPU time-sharing, where the learner and the server take turns on the same GPU's memory.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path

from omegaconf import DictConfig


def overlap_allowed(cfg: DictConfig) -> bool:
    from loop_agents.orchestration.placement import plan

    return bool(cfg.run.overlap_startup) and plan(cfg)["mode"] != "exclusive"


def start_cluster(cfg: DictConfig, model_path: str, run_dir: Path):
    """prepare_environment + Cluster: everything between the model path and the first rollout but the learner."""
    from loop_agents.orchestration.cluster import Cluster
    from loop_agents.orchestration.environments import prepare_environment

    prepare_environment(cfg)
    return Cluster(cfg, model_path, run_dir)


class _NoThreadWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


def _exit_on_sigterm(signum, _frame) -> None:
    sys.exit(signum)


class RayStart:
    """`ray.init` in a background thread from the run's first line: it needs nothing the run builds first
    (model, warm start, learner). ray.init installs its SIGTERM handler (`sys.exit`) only from the main thread,
    so the same handler is installed here, from the main thread."""

    def __init__(self, cfg: DictConfig):
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._init, args=(cfg,), name="ray-start", daemon=True)
        self._thread.start()

    def _init(self, cfg: DictConfig) -> None:
        from loop_agents.orchestration.cluster import init_ray

        logging.getLogger("ray._private.worker").addFilter(_NoThreadWarning())
        try:
            init_ray(cfg)
        except BaseException as exc:  # noqa: BLE001 - handed to wait()
            self.error = exc

    def wait(self) -> None:
        self._thread.join()
        if self.error is not None:
            raise self.error


class ClusterStart:
    """`start_cluster` in a background thread (after `ray_start`); `result()` waits for it (and re-raises its error)."""

    def __init__(self, cfg: DictConfig, model_path: str, run_dir: Path, ray_start: RayStart | None = None):
        self.began = time.monotonic()
        self.ready_after_s: float | None = None  # seconds from `began` until the cluster was up
        self._cluster = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start, args=(cfg, model_path, run_dir, ray_start), name="cluster-start", daemon=True
        )
        self._thread.start()

    def _start(self, cfg: DictConfig, model_path: str, run_dir: Path, ray_start: RayStart | None) -> None:
        try:
            if ray_start is not None:
                ray_start.wait()
            self._cluster = start_cluster(cfg, model_path, run_dir)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc
        self.ready_after_s = time.monotonic() - self.began

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._cluster

    def abandon(self) -> None:
        """The run failed before using the cluster: wait for the start to end, then shut it down."""
        self._thread.join()
        if self._cluster is not None:
            self._cluster.shutdown()
