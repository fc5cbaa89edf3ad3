"""The Ray side of a run: inference server actor(s), the rollout worker, the evaluator.

Weights reach inference as LoRA adapter files: `publish` loads the checkpoint's adapter under a new
name on every server and switches the rollout worker to it (vLLM's runtime LoRA API, milliseconds).
With async one-step-off, the collection already in flight samples from the adapter being replaced,
so that one stays loaded until the collection returns.
The evaluator shares the servers under its own adapter name (`eval-<iteration>`), so evaluating never
blocks a publish. A dead evaluator is recreated and its evaluation is submitted again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.orchestration.placement import plan

MAX_EVAL_ATTEMPTS = 3  # evaluators one evaluation may use up before it is given up


def init_ray(cfg: DictConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    if cfg.ray.address:
        _use_ray_token_if_available()
        ray.init(address=cfg.ray.address, **kwargs)
    else:
        ray.init(num_cpus=cfg.ray.num_cpus or os.cpu_count(), **kwargs)


def _use_ray_token_if_available() -> None:
    """Joining a cluster: `ray start --head` turns Ray's token auth on, and `ray.init` turns it on by itself only for
    address="auto"; with an explicit address the driver uses the token Ray keeps ($RAY_AUTH_TOKEN or
    ~/.ray/auth_token) the same way, unless $RAY_AUTH_MODE says otherwise. The token is never read or printed here."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token auth
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


class Cluster:
    """Owns the actors of one run; every method is called by the driver (rank 0)."""

    def __init__(self, cfg: DictConfig, model_path: str, run_dir: Path):
        import ray

        from loop_agents.inference.actor import InferenceServerActor
        from loop_agents.orchestration.inference_settings import inference_config
        from loop_agents.orchestration.rollout_worker import RolloutWorker

        init_ray(cfg)
        self.cfg, self.model_path, self.run_dir = cfg, model_path, run_dir
        self._cfg_container = OmegaConf.to_container(cfg, resolve=True)
        self._plan = plan(cfg)
        self._worker_cls = ray.remote(num_cpus=0)(RolloutWorker)
        self.servers = []
        for index, server in enumerate(self._plan["inference_servers"]):
            gpus = server.get("gpus", [])
            # GPUs are pinned by id (CUDA_VISIBLE_DEVICES of the server process), not through Ray's
            # accounting: the learner ranks use GPUs outside Ray too.
            actor = InferenceServerActor.options(num_cpus=0, num_gpus=0, max_concurrency=4).remote(
                inference_config(cfg, model_path, server), str(run_dir / "logs" / f"vllm_{index}.log"), gpus
            )
            self.servers.append(actor)
        self.urls = ray.get([s.start.remote() for s in self.servers])
        self.worker = self._worker_cls.remote(self._cfg_container, model_path, self.urls)
        self.evaluator = self._new_evaluator() if cfg.eval.enabled else None
        self.adapter: str | None = None
        self._version = 0
        self._collecting: dict[Any, str | None] = {}  # collection in flight -> the adapter it samples from
        self._retained: set[str] = set()  # replaced adapters kept loaded for a collection in flight
        self._prefixes: dict[Any, str] = {}  # collection in flight -> its group prefix (progress key)
        self._evals: dict[int, Any] = {}  # iteration -> (ref, evaluator, checkpoint, max_turns, attempt)
        self.evaluator_restarts = 0

    @property
    def time_shared(self) -> bool:
        """Exclusive mode: the servers give their GPUs to the learner while it steps."""
        return self._plan["mode"] == "exclusive"

    def pause_for_learning(self) -> None:
        """Exclusive mode only: stop (or sleep) the servers so the learner gets the GPU memory."""
        import ray

        if self.time_shared:
            ray.get([s.suspend.remote() for s in self.servers])

    def resume_after_learning(self) -> None:
        import ray

        if self.time_shared:
            ray.get([s.resume.remote() for s in self.servers])

    def _new_evaluator(self):
        return self._worker_cls.remote(self._cfg_container, self.model_path, self.urls, evaluation=True)

    def publish(self, adapter_dir: Path, version: int) -> str:
        """Load the adapter on every server as `policy-<version>` and route new requests to it."""
        import ray

        self._version = version
        name = f"policy-{version}"
        previous = self.adapter
        retain = previous is not None and previous in self._collecting.values()  # async: still sampled
        ray.get([s.publish_adapter.remote(str(adapter_dir), name, retain) for s in self.servers])
        if retain:
            self._retained.add(previous)
        self.adapter = name
        return name

    def task_ids(self, split: str) -> list[str]:
        import ray

        return ray.get(self.worker.task_ids.remote(split))

    def submit_collect(self, task_ids: list[str], k: int, max_turns: int, group_prefix: str, seed: int):
        """Start collecting K rollouts per task on the current adapter; returns a handle for `wait`."""
        handle = self.worker.collect.remote(
            task_ids, k, max_turns, self.adapter, group_prefix, seed, policy_version=self._version
        )
        self._collecting[handle] = self.adapter
        self._prefixes[handle] = group_prefix
        return handle

    def wait(self, handle, on_progress=None) -> tuple[list, dict[str, float]]:
        """The collection's (rollouts, metrics); then unloads a retained adapter no collection samples any more.

        `on_progress(episodes ended, episodes)` is called about twice a second while it runs."""
        import ray

        try:
            if on_progress is not None:
                prefix = self._prefixes[handle]
                while not ray.wait([handle], timeout=0.5)[0]:
                    progress = ray.get(self.worker.progress.remote(prefix))
                    if progress is not None:
                        on_progress(*progress)
            return ray.get(handle)
        finally:
            self._prefixes.pop(handle, None)
            self._collecting.pop(handle, None)
            for name in sorted(self._retained - set(self._collecting.values())):
                ray.get([s.unload_adapter.remote(name) for s in self.servers])
                self._retained.discard(name)

    def submit_eval(self, checkpoint: Path, iteration: int, max_turns: int) -> None:
        """Start evaluating `checkpoint`'s adapter in the background (served as `eval-<iteration>`).

        The adapter is copied aside first: checkpoint pruning may delete the checkpoint before the
        evaluation ends, and the copy becomes `checkpoints/best/` if it scores best.
        """
        import shutil

        import ray

        if self.evaluator is None:
            return
        name = f"eval-{iteration}"
        adapter = self.run_dir / "eval_adapters" / f"iter_{iteration:06d}"
        shutil.rmtree(adapter, ignore_errors=True)
        shutil.copytree(Path(checkpoint) / "adapter", adapter)
        ray.get([s.load_adapter.remote(str(adapter), name) for s in self.servers])
        self._start_eval(iteration, Path(checkpoint), max_turns, attempt=1)

    def _start_eval(self, iteration: int, checkpoint: Path, max_turns: int, attempt: int) -> None:
        """Run the evaluation of `eval-<iteration>` (its adapter is loaded on the servers) on the evaluator."""
        ref = self.evaluator.evaluate.remote(
            self.cfg.eval.split,
            f"eval-{iteration}",
            self.cfg.eval.max_tasks,
            self.cfg.eval.runs_per_task,
            max_turns,
        )
        self._evals[iteration] = (ref, self.evaluator, checkpoint, max_turns, attempt)

    def finished_evals(self, wait: bool = False) -> list[tuple[int, dict[str, float]]]:
        """Evaluations that have finished (all of them if `wait`); a crashed evaluator is replaced and
        its evaluations resubmitted."""
        import ray

        done = []
        while True:
            for iteration in sorted(self._evals):
                ref, evaluator, checkpoint, max_turns, attempt = self._evals[iteration]
                ready, _ = ray.wait([ref], timeout=None if wait else 0)
                if not ready:
                    continue
                del self._evals[iteration]
                try:
                    trajectories, metrics = ray.get(ref)
                except ray.exceptions.RayActorError as err:
                    self._evaluator_died(evaluator, iteration, checkpoint, max_turns, attempt, err)
                    continue
                from loop_agents.orchestration.run_log import RunLog

                RunLog(self.run_dir).save_rollouts(
                    trajectories, iteration, name=f"eval/{self.cfg.eval.split}"
                )
                metrics["eval/iteration"] = iteration
                metrics["eval/attempts"] = attempt
                self._record(checkpoint, iteration, metrics)
                self._unload(f"eval-{iteration}")
                done.append((iteration, metrics))
            if not wait or not self._evals:  # with `wait`, also the evaluations resubmitted above
                return done

    def _evaluator_died(
        self, evaluator, iteration: int, checkpoint: Path, max_turns: int, attempt: int, err: Exception
    ) -> None:
        """Replace a dead evaluator (once per death) and run its missed evaluations again on the new one.

        The adapter under evaluation stays loaded on the servers and its copy under `eval_adapters/`
        is kept, so the rerun works even if the checkpoint was pruned meanwhile. An evaluation that
        killed `MAX_EVAL_ATTEMPTS` evaluators is given up (logged), so training never loops on it.
        """
        if self.evaluator is evaluator:  # not yet replaced for an earlier evaluation of the same death
            self.evaluator = self._new_evaluator()
            self.evaluator_restarts += 1
        print(
            f"[cluster] evaluator died during the evaluation of iteration {iteration} (attempt {attempt}): "
            f"{type(err).__name__}; running it again on a new evaluator",
            flush=True,
        )
        if attempt >= MAX_EVAL_ATTEMPTS:
            print(
                f"[cluster] evaluation of iteration {iteration} given up after {attempt} attempts", flush=True
            )
            self._unload(f"eval-{iteration}")
            shutil.rmtree(self.run_dir / "eval_adapters" / f"iter_{iteration:06d}", ignore_errors=True)
            return
        self._start_eval(iteration, checkpoint, max_turns, attempt + 1)

    def _record(self, checkpoint: Path, iteration: int, metrics: dict[str, float]) -> None:
        """Write the scores beside the checkpoint and keep `checkpoints/best/` (adapter + eval.json)."""
        import json
        import shutil

        adapter = self.run_dir / "eval_adapters" / f"iter_{iteration:06d}"
        if checkpoint.exists():
            (checkpoint / "eval.json").write_text(json.dumps(metrics))
        key = f"eval/{self.cfg.eval.best_metric}"
        best_dir = self.run_dir / "checkpoints" / "best"
        best_file = best_dir / "eval.json"
        best = json.loads(best_file.read_text()) if best_file.exists() else None
        if key in metrics and (best is None or metrics[key] > best["value"]):
            temp = best_dir.parent / ".best.tmp"
            shutil.rmtree(temp, ignore_errors=True)
            shutil.copytree(adapter, temp / "adapter")
            record = {
                "iteration": iteration,
                "checkpoint": str(checkpoint),
                "metric": key,
                "value": metrics[key],
            }
            (temp / "eval.json").write_text(json.dumps({**record, "metrics": metrics}, indent=2))
            shutil.rmtree(best_dir, ignore_errors=True)
            temp.rename(best_dir)
        shutil.rmtree(adapter, ignore_errors=True)

    def _unload(self, name: str) -> None:
        import ray

        ray.get([s.unload_adapter.remote(name) for s in self.servers])

    def shutdown(self) -> None:
        import ray

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
