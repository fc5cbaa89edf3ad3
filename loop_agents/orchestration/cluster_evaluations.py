"""The evaluation half of `Cluster`: checkpoints scored on dev in the background by the evaluator actor.

Each evaluation's adapter is copied aside and loaded on the servers as `eval-<iteration>`, so evaluating never
blocks a publish and survives checkpoint pruning; an evaluator that dies is replaced and its evaluations run
again, up to `MAX_EVAL_ATTEMPTS` each. A mixin, not a separate object, because it shares the cluster's
servers, restart budget and actor bookkeeping (`_on_servers`, `check_servers`, `_restart`, `_new_evaluator`,
`pids`, `evaluator`, `_extras`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from loop_agents.orchestration.best_checkpoint import record_evaluation
from loop_agents.orchestration.run_log import RunLog

MAX_EVAL_ATTEMPTS = 3  # evaluators one evaluation may use up before it is given up


class ClusterEvaluations:
    """`submit_eval` / `finished_evals` of the cluster (see the module doc)."""

    _evals: dict[int, Any]  # iteration -> (ref, evaluator, checkpoint, max_turns, attempt)

    def submit_eval(self, checkpoint: Path, iteration: int, max_turns: int) -> None:
        """Start evaluating `checkpoint`'s adapter in the background (served as `eval-<iteration>`).

        The adapter is copied aside first: checkpoint pruning may delete the checkpoint before the
        evaluation ends, and the copy becomes `checkpoints/best/` if it scores best.
        """
        if self.evaluator is None:
            return
        name = f"eval-{iteration}"
        adapter = self.run_dir / "eval_adapters" / f"iter_{iteration:06d}"
        shutil.rmtree(adapter, ignore_errors=True)
        shutil.copytree(Path(checkpoint) / "adapter", adapter)
        self._on_servers(lambda s: s.load_adapter.remote(str(adapter), name))
        self._extras[name] = str(adapter)
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
        self.pids.note_started()
        while True:
            if self._evals:
                self.check_servers()  # a dead server is replaced, so evaluation episodes retry on the new one
            for iteration in sorted(self._evals):
                ref, evaluator, checkpoint, max_turns, attempt = self._evals[iteration]
                ready, _ = ray.wait([ref], timeout=0.5 if wait else 0)
                if not ready:
                    continue
                del self._evals[iteration]
                try:
                    trajectories, metrics = ray.get(ref)
                except ray.exceptions.RayActorError as err:
                    self._evaluator_died(evaluator, iteration, checkpoint, max_turns, attempt, err)
                    continue

                RunLog(self.run_dir).save_rollouts(
                    trajectories, iteration, name=f"eval/{self.cfg.eval.split}"
                )
                metrics["eval/iteration"] = iteration
                metrics["eval/attempts"] = attempt
                record_evaluation(self.run_dir, checkpoint, iteration, metrics, self.cfg.eval.best_metric)
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
        restart = ""
        if self.evaluator is evaluator:  # not yet replaced for an earlier evaluation of the same death
            used = self._restart("evaluator", "evaluator", err)
            self.evaluator = self._new_evaluator()
            self.pids.note("evaluator", self.evaluator, wait=False)
            restart = f"restart {used} of run.max_actor_restarts={self.max_actor_restarts}: "
        print(
            f"[cluster] evaluator died during the evaluation of iteration {iteration} (attempt {attempt}): "
            f"{type(err).__name__}; {restart}running it again on a new evaluator",
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

    def _unload(self, name: str) -> None:
        self._extras.pop(name, None)
        self._on_servers(lambda s: s.unload_adapter.remote(name))
