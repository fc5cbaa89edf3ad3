"""Start the cluster (Ray, vLLM server(s), rollout worker, evaluator) in a thread while the learner is built.

The two are independent: the servers need only the policy's base model path, the learner only its weights.
Starting vLLM is three Python processes importing one after the other (api_server, EngineCore, Worker); the
learner's set-up (torch + peft imports, model load, checkpoint load) runs beside it instead of after it.
Not with exclusive GPU time-sharing, where the learner and the server take turns on the same GPU's memory.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from omegaconf import DictConfig

from loop_agents.envs.selected import prepare_environment
from loop_agents.orchestration.cluster import Cluster
from loop_agents.orchestration.placement import plan
from loop_agents.orchestration.ray_session import init_ray


def overlap_allowed(cfg: DictConfig) -> bool:
    return bool(cfg.run.overlap_startup) and plan(cfg)["mode"] != "exclusive"


def start_cluster(cfg: DictConfig, model_path: str, run_dir: Path):
    """prepare_environment + Cluster: everything between the model path and the first rollout but the learner."""
    prepare_environment(cfg)
    return Cluster(cfg, model_path, run_dir)


class ClusterStart:
    """`start_cluster` in a background thread; `result()` waits for it (and re-raises its error).

    Ray itself starts first, in the calling (main) thread: ray.init gives its GCS and raylet a parent-death
    SIGKILL, which Linux sends when the *thread* that started them ends, so a helper thread would kill them."""

    def __init__(self, cfg: DictConfig, model_path: str, run_dir: Path):
        self.began = time.monotonic()
        init_ray(cfg)
        self.ready_after_s: float | None = None  # seconds from `began` until the cluster was up
        self._cluster = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start, args=(cfg, model_path, run_dir), name="cluster-start", daemon=True
        )
        self._thread.start()

    def _start(self, cfg: DictConfig, model_path: str, run_dir: Path) -> None:
        try:
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
