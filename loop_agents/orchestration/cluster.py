"""The Ray side of a run: inference server actor(s), the rollout worker, the evaluator.

Weights reach inference as LoRA adapter files: `publish` loads the checkpoint's adapter under a new
name on every server and switches the rollout worker to it (vLLM's runtime LoRA API, milliseconds).
Asynchronous (`algorithm.max_staleness` > 0), collections are in flight during a publish: their episodes move to
the new adapter at their next turn (partial rollouts, `RolloutWorker.set_policy`), and a replaced adapter stays
loaded until no collection submitted before the publish is in flight (a request may still be sampling from it).
The evaluator shares the servers under its own adapter name (`eval-<iteration>`), so evaluating never
blocks a publish.

Every actor comes back when it dies (`kill -9`, OOM, a segfault), up to `run.max_actor_restarts` times per
launch (one log line each, counted in `cluster/actor_restarts`): a dead rollout worker is recreated and
the collections it ran are submitted again with the same arguments (same tasks, groups and seed: the
iteration keeps its number of groups; nothing it half-did reached the disk, the driver writes rollouts and
metrics); a dead inference actor is recreated (its vLLM tree dies with it, the new one reaps what is
left), the adapters the cluster knows are loaded again under the same names (policy, retained, evaluation)
and the workers switch to its URL, so their failed requests are retried there; a dead evaluator is
recreated and its evaluation submitted again. Each actor's pid is kept in `logs/actors.json`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf

from loop_agents.inference.actor import InferenceServerActor
from loop_agents.orchestration.actor_pids import ActorPids
from loop_agents.orchestration.cluster_evaluations import ClusterEvaluations
from loop_agents.orchestration.inference_settings import inference_config
from loop_agents.orchestration.placement import plan
from loop_agents.orchestration.ray_session import init_ray
from loop_agents.orchestration.rollout_worker import RolloutWorker
from loop_agents.orchestration.staleness import max_staleness


class ActorRestartsExhausted(RuntimeError):
    """More actors died in this launch than `run.max_actor_restarts` allows."""


class RayNodeLost(RuntimeError):
    """Ray has no live node (its raylet or GCS died): no actor can be recreated in this process."""


@dataclass(eq=False)  # identity: a dict key while in flight
class Collection:
    """A collection in flight: what `wait` returns for, resubmittable on a new rollout worker."""

    args: tuple  # RolloutWorker.collect's positional arguments
    version: int  # policy version of the adapter it samples from
    ref: Any  # the ObjectRef of the current submission


class Cluster(ClusterEvaluations):
    """Owns the actors of one run; every method is called by the driver (rank 0)."""

    def __init__(self, cfg: DictConfig, model_path: str, run_dir: Path):
        init_ray(cfg)
        self.cfg, self.model_path, self.run_dir = cfg, model_path, run_dir
        self._cfg_container = OmegaConf.to_container(cfg, resolve=True)
        self._plan = plan(cfg)
        self._worker_cls = ray.remote(num_cpus=0)(RolloutWorker)
        self._server_cls = InferenceServerActor.options(num_cpus=0, num_gpus=0, max_concurrency=4)
        # GPUs are pinned by id (CUDA_VISIBLE_DEVICES of the server process), not through Ray's
        # accounting: the learner ranks use GPUs outside Ray too.
        self._server_args = [
            (inference_config(cfg, model_path, server), str(run_dir / "logs" / f"vllm_{index}.log"),
             server.get("gpus", []))
            for index, server in enumerate(self._plan["inference_servers"])
        ]  # fmt: skip
        self.max_actor_restarts = int(cfg.run.max_actor_restarts)
        self.restarts = {"rollout_worker": 0, "inference": 0, "evaluator": 0}
        self.pids = ActorPids(run_dir)
        self.servers = [self._server_cls.remote(*args) for args in self._server_args]
        self.urls = ray.get([s.start.remote() for s in self.servers])
        for index, server in enumerate(self.servers):
            self.pids.note(f"inference_{index}", server)
        self.worker = self._new_worker(note_pid=False)  # both start at once; their pids are noted below
        self.evaluator = self._new_evaluator() if cfg.eval.enabled else None
        self.pids.note("rollout_worker", self.worker)
        if self.evaluator is not None:
            self.pids.note("evaluator", self.evaluator)
        self.adapter: str | None = None
        self._adapter_path: str | None = None
        self._version = 0
        self._collecting: dict[Collection, str | None] = {}  # collection in flight -> its adapter
        self._quiet = False  # the servers' health probes do not sample while the learner computes
        self._retained: dict[str, str] = {}  # replaced adapter still sampled by a collection -> its path
        self._retained_versions: dict[str, int] = {}  # retained adapter -> its policy version
        self.follow_latest = max_staleness(cfg) > 0  # partial rollouts: episodes move to each new adapter
        self._extras: dict[str, str] = {}  # evaluation adapters loaded on the servers -> path
        self._evals: dict[int, Any] = {}  # iteration -> (ref, evaluator, checkpoint, max_turns, attempt)

    @property
    def time_shared(self) -> bool:
        """Exclusive mode: the servers give their GPUs to the learner while it steps."""
        return self._plan["mode"] == "exclusive"

    @property
    def evaluator_restarts(self) -> int:
        return self.restarts["evaluator"]

    def restart_metrics(self) -> dict[str, int]:
        """Actor restarts so far in this launch (metrics row keys)."""
        counts = {f"cluster/restarts_{role}": n for role, n in self.restarts.items()}
        return {"cluster/actor_restarts": sum(self.restarts.values()), **counts}

    def pause_for_learning(self) -> None:
        """Exclusive mode: stop (or sleep) the servers so the learner gets the GPU memory. On CPU with no collection
        in flight (synchronous): the servers' health probes stop sampling, so that the learner has the cores the
        servers share with it (VLLMServer.set_quiet)."""
        if self.time_shared:
            self._on_servers(lambda s: s.suspend.remote())
        elif self.cfg.gpu_allocation.device == "cpu" and not self._collecting:
            self._quiet = True
            self._on_servers(lambda s: s.set_quiet.remote(True))

    def resume_after_learning(self) -> None:
        if self.time_shared:
            self._on_servers(lambda s: s.resume.remote())
        elif self._quiet:
            self._quiet = False
            self._on_servers(lambda s: s.set_quiet.remote(False))

    # ------------------------------------------------------------------ actor restarts
    def _new_worker(self, note_pid: bool = True):
        worker = self._worker_cls.remote(self._cfg_container, self.model_path, self.urls)
        if note_pid:
            self.pids.note("rollout_worker", worker)
        return worker

    def _new_evaluator(self):
        """A new evaluator actor; its caller notes the pid (at start-up once the worker's is noted, after a
        death without waiting for the construction)."""
        return self._worker_cls.remote(self._cfg_container, self.model_path, self.urls, evaluation=True)

    def _spend_restart(self, role: str, what: str, err: Exception) -> int:
        """Count one restart of `role`; raise ActorRestartsExhausted past `run.max_actor_restarts`."""
        used = sum(self.restarts.values()) + 1
        if used > self.max_actor_restarts:
            raise ActorRestartsExhausted(
                f"{what} died ({type(err).__name__}) and this launch already restarted {used - 1} actors "
                f"(run.max_actor_restarts={self.max_actor_restarts})"
            ) from err
        self.restarts[role] += 1
        return used

    def _restart(self, role: str, what: str, err: Exception) -> int:
        """`_spend_restart`, after checking that a Ray node is alive (else a new actor would wait forever
        for one): RayNodeLost ends this process, and the supervisor reruns the run on a new Ray head."""
        if not any(node.get("Alive") for node in ray.nodes()):
            raise RayNodeLost(
                f"{what} died ({type(err).__name__}) with its Ray node (raylet or GCS gone); the same "
                "command on a new Ray head resumes"
            ) from err
        return self._spend_restart(role, what, err)

    def _log_restart(self, what: str, err: Exception, used: int, action: str, started: float) -> None:
        print(
            f"[cluster] {what} died ({type(err).__name__}); restart {used} of "
            f"run.max_actor_restarts={self.max_actor_restarts}: {action} ({time.monotonic() - started:.1f} s)",
            flush=True,
        )

    def _replace_worker(self, dead, err: Exception) -> None:
        """Recreate the rollout worker (unless already replaced) and resubmit its collections in flight."""
        if self.worker is not dead:
            return
        started = time.monotonic()
        used = self._restart("rollout_worker", "rollout worker", err)
        self.worker = self._new_worker()
        if self.adapter is not None:
            ray.get(self.worker.set_policy.remote(self.adapter, self._version))
        for collection in self._collecting:
            collection.ref = self._submit(collection)
        prefixes = ", ".join(c.args[4] for c in self._collecting) or "none"
        self._log_restart(
            "rollout worker", err, used, f"new worker, collections resubmitted: {prefixes}", started
        )

    def _on_worker(self, call: Callable[[Any], Any]):
        """ray.get(call(worker)); a dead worker is replaced and the call repeated on the new one."""
        while True:
            worker = self.worker
            try:
                return ray.get(call(worker))
            except ray.exceptions.RayActorError as err:
                self._replace_worker(worker, err)

    def _on_servers(self, call: Callable[[Any], Any]) -> list:
        """ray.get(call(server)) for every server; a dead server is replaced (restored to the adapters the
        cluster knows) and the call repeated on the new one."""
        refs = [call(server) for server in self.servers]
        results = []
        for index, ref in enumerate(refs):
            while True:
                try:
                    results.append(ray.get(ref))
                    break
                except ray.exceptions.RayActorError as err:
                    self._replace_server(index, err)
                    ref = call(self.servers[index])
        return results

    def _replace_server(self, index: int, err: Exception) -> None:
        """Start a new inference actor in place of server `index` with the policy, retained and evaluation
        adapters loaded under their names, then point the workers at its URL."""
        while True:
            started = time.monotonic()
            used = self._restart("inference", f"inference actor {index}", err)
            server = self._server_cls.remote(*self._server_args[index])
            try:
                url = ray.get(server.start.remote())
                if self.adapter is not None and self._adapter_path is not None:
                    ray.get(server.publish_adapter.remote(self._adapter_path, self.adapter, False))
                for name, path in {**self._retained, **self._extras}.items():
                    if Path(path).exists():  # a retained checkpoint may have been pruned meanwhile
                        ray.get(server.load_adapter.remote(path, name))
                break
            except ray.exceptions.RayActorError as again:  # died again while starting
                err = again
        self.servers[index], self.urls[index] = server, url
        self.pids.note(f"inference_{index}", server)
        for actor in (self.worker, self.evaluator):
            if actor is not None:
                try:
                    ray.get(actor.set_servers.remote(self.urls))
                except ray.exceptions.RayActorError:
                    pass  # replaced when its own death is seen; the new one gets self.urls
        self._log_restart(
            f"inference actor {index}", err, used, f"new server at {url}, adapters reloaded", started
        )

    def check_servers(self) -> None:
        """Replace inference actors that died since the last call."""
        self._on_servers(lambda s: s.url.remote())

    def publish(self, adapter_dir: Path, version: int) -> str:
        """Load the adapter on every server as `policy-<version>` and route new requests to it."""
        previous, previous_path, previous_version = self.adapter, self._adapter_path, self._version
        self._version = version
        name = f"policy-{version}"
        retain = previous is not None and bool(self._collecting)  # async: still sampled by a collection
        path = str(adapter_dir)
        self._on_servers(lambda s: s.publish_adapter.remote(path, name, retain))
        if retain:
            self._retained[previous] = previous_path
            self._retained_versions[previous] = previous_version
        self.adapter, self._adapter_path = name, path
        if self.follow_latest:
            self._on_worker(lambda w: w.set_policy.remote(name, version))
        return name

    def task_ids(self, split: str) -> list[str]:
        return self._on_worker(lambda w: w.task_ids.remote(split))

    def submit_collect(self, task_ids: list[str], k: int, max_turns: int, group_prefix: str, seed: int):
        """Start collecting K rollouts per task on the current adapter; returns a handle for `wait`."""
        args = (task_ids, k, max_turns, self.adapter, group_prefix, seed)
        collection = Collection(args, self._version, None)
        collection.ref = self._submit(collection)
        self._collecting[collection] = self.adapter
        return collection

    def _submit(self, collection: Collection):
        return self.worker.collect.remote(
            *collection.args, policy_version=collection.version, follow_latest=self.follow_latest
        )

    def wait(self, collection: Collection, on_progress=None) -> tuple[list, dict[str, float]]:
        """The collection's (rollouts, metrics); then unloads a retained adapter no collection samples any more.

        `on_progress(episodes ended, episodes)` is called about twice a second while it runs. A rollout
        worker or inference actor that dies meanwhile is replaced (the collection resubmitted or its
        failed requests retried on the new server), so this returns the collection's full result."""
        prefix = collection.args[4]
        try:
            while True:
                if ray.wait([collection.ref], timeout=0.5)[0]:
                    worker = self.worker
                    try:
                        return ray.get(collection.ref)
                    except ray.exceptions.RayActorError as err:
                        self._replace_worker(worker, err)
                        continue
                self.check_servers()
                if on_progress is not None:
                    try:
                        progress = ray.get(self.worker.progress.remote(prefix))
                    except ray.exceptions.RayActorError:
                        continue  # the collection's ref reports the death on the next round
                    if progress is not None:
                        on_progress(*progress)
        finally:
            self._collecting.pop(collection, None)
            # a collection submitted at version v samples adapters v and newer: older retained ones are idle
            oldest = min((c.version for c in self._collecting), default=self._version + 1)
            for name in sorted(n for n, v in self._retained_versions.items() if v < oldest):
                self._on_servers(lambda s, name=name: s.unload_adapter.remote(name))
                del self._retained[name], self._retained_versions[name]

    def shutdown(self) -> None:
        for actor in [self.worker, self.evaluator]:
            if actor is not None:
                try:
                    ray.get(actor.close.remote(), timeout=30)
                except Exception:  # noqa: BLE001 - shutting down regardless
                    pass
        for server in self.servers:
            try:
                ray.get(server.shutdown.remote(), timeout=60)
            except Exception:  # noqa: BLE001
                pass
        ray.shutdown()
