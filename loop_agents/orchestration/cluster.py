"""The Ray side of a run: inference server actor(s), the rollout worker, the evaluator.

Weights reach inference as LoRA adapter files: `publish` loads the checkpoint's adapter under a new
name on every server and switches the rollout worker to it (vLLM's runtime LoRA API, milliseconds).
The evaluator shares the servers under its own adapter name (`eval-<iteration>`), so evaluating never
blocks a publish. A dead evaluator is recreated and its evaluation is submitted again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.orchestration.placement import plan


def init_ray(cfg: DictConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    if cfg.ray.address:
        ray.init(address=cfg.ray.address, **kwargs)
    else:
        ray.init(num_cpus=cfg.ray.num_cpus or os.cpu_count(), **kwargs)


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
        self._evals: dict[int, Any] = {}  # iteration -> (ObjectRef, checkpoint path)

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
        ray.get([s.publish_adapter.remote(str(adapter_dir), name) for s in self.servers])
        self.adapter = name
        return name

    def task_ids(self, split: str) -> list[str]:
        import ray

        return ray.get(self.worker.task_ids.remote(split))

    def submit_collect(self, task_ids: list[str], k: int, max_turns: int, group_prefix: str, seed: int):
        """Start collecting K rollouts per task on the current adapter; returns a handle for `wait`."""
        return self.worker.collect.remote(
            task_ids, k, max_turns, self.adapter, group_prefix, seed, policy_version=self._version
        )

    def wait(self, handle) -> tuple[list, dict[str, float]]:
        import ray

        return ray.get(handle)

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
        ref = self.evaluator.evaluate.remote(
            self.cfg.eval.split, name, self.cfg.eval.max_tasks, self.cfg.eval.runs_per_task, max_turns
        )
        self._evals[iteration] = (ref, Path(checkpoint), max_turns)

    def finished_evals(self, wait: bool = False) -> list[tuple[int, dict[str, float]]]:
        """Evaluations that have finished (all of them if `wait`); a crashed evaluator is replaced and
        its evaluations resubmitted."""
        import ray

        done = []
        for iteration in sorted(self._evals):
            ref, checkpoint, max_turns = self._evals[iteration]
            ready, _ = ray.wait([ref], timeout=None if wait else 0)
            if not ready:
                continue
            del self._evals[iteration]
            try:
                trajectories, metrics = ray.get(ref)
            except ray.exceptions.RayActorError:
                self.evaluator = self._new_evaluator()
                self.submit_eval(checkpoint, iteration, max_turns)
                if wait:
                    done.extend(self.finished_evals(wait=True))
                continue
            from loop_agents.orchestration.run_log import RunLog

            RunLog(self.run_dir).save_rollouts(trajectories, iteration, name=f"eval/{self.cfg.eval.split}")
            metrics["eval/iteration"] = iteration
            self._record(checkpoint, iteration, metrics)
            self._unload(f"eval-{iteration}")
            done.append((iteration, metrics))
        return done

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
