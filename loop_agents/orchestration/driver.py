"""The training loop. Rank 0 drives; every rank learns.

One iteration (synchronous LOOP, docs/reference-ml-loop.md §1.10):
    tasks      = sampler.sample(tasks_per_iteration)                 # seeded, resumable
    rollouts   = K episodes per task on the current adapter          # Ray rollout worker + vLLM
    advantages = estimator(groups)                                   # e.g. leave-one-out
    kept       = filter |A| < threshold, redistribute                # LOOP §2.4
    metrics    = learner.train_iteration(kept)                       # all ranks, FSDP2
    checkpoint = atomic save (adapter, optimizer, RNG, sampler, schedule)
    publish adapter to vLLM; log; every N iterations evaluate the checkpoint (non-blocking)
Asynchronous (`algorithm.max_staleness=k` > 0; the deprecated `rollout.async_one_step_off` is k = 1): the
collections of iterations i+1..i+k are in flight while i is learned, their episodes moving to each new adapter at
their next turn (partial rollouts); groups sampled more than k versions behind are dropped (staleness.py) and the
learner's decoupled objective weights each token by π_prox/π_behav (losses/policy.py).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.selected import prepare_environment
from loop_agents.orchestration import components as C
from loop_agents.orchestration.cluster import Cluster
from loop_agents.orchestration.cpu_pinning import learner_cpus, pin
from loop_agents.orchestration.distributed import Distributed
from loop_agents.orchestration.early_start import ClusterStart, overlap_allowed
from loop_agents.orchestration.held_out import START_ADAPTER, evaluate_held_out
from loop_agents.orchestration.lost_work import check_lost_work, lost_text
from loop_agents.orchestration.progress import PhaseProgress
from loop_agents.orchestration.resume import agreed_checkpoint, restore_metrics
from loop_agents.orchestration.run_eta import RunEta
from loop_agents.orchestration.run_log import RunLog
from loop_agents.orchestration.run_report import PhaseClock, best_record, finish, print_block, print_eval_line
from loop_agents.orchestration.staleness import (
    DEPRECATED_ASYNC,
    drop_stale_groups,
    max_staleness,
    resampled_in_flight,
)
from loop_agents.orchestration.task_sampler import SamplerState, TaskSampler
from loop_agents.orchestration.turn_schedule import make_turn_schedule
from loop_agents.orchestration.warm_model import (
    full_warm_start,
    policy_model_path,
    warm_start_cached,
    warm_start_demonstrations,
)
from loop_agents.redaction import redact, redacted_yaml


def run(cfg: DictConfig) -> None:
    """Entry point called by train.py on every rank."""
    dist = Distributed.from_environment(cfg.gpu_allocation.device)
    pin(learner_cpus(cfg), "learner")  # cpu_split: before Ray starts, whose processes inherit it
    run_dir = Path(cfg.run.dir)
    clock = PhaseClock()
    clock.mark("imports done")
    warm_cached = warm_start_cached(cfg, run_dir)
    overlap = dist.is_driver and overlap_allowed(cfg) and not cfg.run.dry_run
    began = time.perf_counter()
    model_path = dist.on_driver_first(lambda: policy_model_path(cfg, run_dir))
    if full_warm_start(cfg):
        clock.warm_start_cached = warm_cached
        clock.warm_start_s = None if warm_cached else time.perf_counter() - began
    clock.mark("model ready")
    early = None
    if overlap:
        print(
            "[driver] starting the vLLM server(s) and the rollout worker while the learner is built",
            flush=True,
        )
        early = ClusterStart(cfg, model_path, run_dir)
    try:
        learner = C.build_learner(cfg, model_path)
        checkpoint = agreed_checkpoint(dist, run_dir / "checkpoints")  # a damaged newest one is set aside
        state = learner.load_checkpoint(checkpoint) if checkpoint else {}
        if cfg.learner.stress_test and not checkpoint:
            learner.stress_test()
        clock.mark("learner ready")
    except BaseException:
        if early is not None:
            early.abandon()
        raise
    try:
        if dist.is_driver:
            try:
                Driver(
                    cfg, run_dir, model_path, learner, dist, state, checkpoint, early=early, clock=clock
                ).run()
            finally:
                dist.broadcast(("stop", None))
        else:
            _follow(cfg, learner, dist)
    finally:
        dist.shutdown()


def _follow(cfg: DictConfig, learner, dist: Distributed) -> None:
    """Non-driver ranks: execute the driver's learner commands in order."""
    while True:
        command, payload = dist.broadcast(None)
        if command == "stop":
            return
        if command == "train":
            C.learn(learner, payload)
        elif command == "sft":
            C.warm_start(learner, payload, cfg)
        elif command == "save":
            learner.save_checkpoint(*payload)


class Driver:
    """Rank 0: owns the cluster, the sampler and the logs; every learner call is broadcast first."""

    def __init__(
        self, cfg: DictConfig, run_dir: Path, model_path: str, learner, dist, state: dict, checkpoint,
        early: ClusterStart | None = None, clock: PhaseClock | None = None,
    ):  # fmt: skip
        self.cfg, self.run_dir, self.model_path = cfg, run_dir, model_path
        self.early, self.clock = early, clock or PhaseClock()
        self.sft_metrics: dict = {}
        self.start_checkpoint: Path | None = None
        self.learner, self.dist, self.checkpoint = learner, dist, checkpoint
        self.start_iteration = int(state.get("iteration", 0))
        self.checkpoint_metrics = state.get("metrics_row")
        self.sampler_state = SamplerState(**state.get("sampler", {}))
        self.log = RunLog(
            run_dir,
            cfg.logging.wandb_mode,
            cfg.logging.wandb_project,
            cfg.logging.wandb_entity,
            redact(OmegaConf.to_container(cfg, resolve=True)),
            run_id=state.get("wandb_run_id"),
        )
        self.schedule = make_turn_schedule(cfg.env.turn_schedule)
        self.bars = PhaseProgress(bool(cfg.logging.progress))

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        cfg = self.cfg
        if self.start_iteration == 0 and self.checkpoint is None:
            (self.run_dir / "config.yaml").write_text(redacted_yaml(cfg))
        restore_metrics(self.log, self.start_iteration, self.checkpoint_metrics)
        print(
            f"[driver] run dir {self.run_dir} | model {self.model_path} | "
            f"iterations {self.start_iteration + 1}..{cfg.run.iterations}",
            flush=True,
        )
        try:
            if self.checkpoint is None:  # iteration 0's work that needs no server, beside the cluster's start
                self.sft_metrics = self._lora_warm_start()
                self.start_checkpoint = self._save(0, dict(vars(self.sampler_state)))
                _keep_start_adapter(self.start_checkpoint / "adapter", self.run_dir)
            if self.early is not None:
                cluster = self.early.result()
            else:
                prepare_environment(cfg)
                cluster = Cluster(cfg, self.model_path, self.run_dir)
        except BaseException:
            if self.early is not None:
                self.early.abandon()
            self.log.finish()
            raise
        self.clock.mark("cluster ready")
        result: list[str] = []
        try:
            self._run(cluster)
            result = self._report(cluster)
        finally:
            cluster.shutdown()
            self.log.finish()
        print_block(result)  # the last thing printed: after Ray's and wandb's closing output

    def _run(self, cluster: Cluster) -> None:
        cfg = self.cfg
        sampler = TaskSampler(cluster.task_ids(cfg.env.train_split), cfg.run.seed, self.sampler_state)
        if self.checkpoint is not None:
            cluster.publish(Path(self.checkpoint) / "adapter", self.start_iteration)
            if self._eval_due(self.start_iteration) and not (Path(self.checkpoint) / "eval.json").exists():
                # its evaluation was in flight when the previous process died: run it now
                cluster.submit_eval(
                    Path(self.checkpoint), self.start_iteration, self.schedule.budget(self.start_iteration)
                )
        else:
            self._initial_policy(cluster)
        eta = RunEta(int(cfg.run.iterations), started=self.clock.process_start)
        bound = max_staleness(cfg)
        if cfg.rollout.async_one_step_off:
            print(DEPRECATED_ASYNC, flush=True)
        pending: dict[int, tuple] = {}  # iteration -> its collection in flight (at most bound + 1 of them)
        resumed = resampled_in_flight(self.start_iteration, bound, int(cfg.run.iterations), self.checkpoint)
        for iteration in range(self.start_iteration + 1, cfg.run.iterations + 1):
            t_iter = time.perf_counter()
            self.clock.mark_first_rollout()
            if iteration not in pending:
                pending[iteration] = self._submit(cluster, sampler, iteration)
            sampler_after, tasks, ref = pending.pop(iteration)
            with self.bars.phase(f"collect {iteration}/{cfg.run.iterations}", 1) as update:
                rollouts, collect_metrics = cluster.wait(ref, on_progress=update)
                if update is not None:
                    ended = sum(collect_metrics[f"collect/{k}"] for k in ("finished", "lost", "cancelled"))
                    update(int(ended), int(ended))
            t_rollout = time.perf_counter() - t_iter
            errors = collect_metrics.pop("collect/errors", {})
            planned = len(tasks) * int(cfg.algorithm.rollouts_per_task)
            check_lost_work(iteration, collect_metrics, errors, planned, float(cfg.collect.max_lost_fraction))
            for ahead in range(iteration + 1, min(iteration + bound, int(cfg.run.iterations)) + 1):
                if ahead not in pending:  # overlaps the learning below, sampled by adapter iteration-1
                    pending[ahead] = self._submit(cluster, sampler, ahead)

            t0 = time.perf_counter()
            fresh, async_metrics = drop_stale_groups(rollouts, iteration, bound)
            kept, adv_metrics = C.advantages_and_filter(fresh, cfg, self.dist.world_size)
            cluster.pause_for_learning()
            learn_metrics = {}
            if kept:  # followers learn only when told to: nothing is broadcast for an empty batch
                with self.bars.phase(f"learn   {iteration}/{cfg.run.iterations}", 1) as update:
                    trained = self.dist.broadcast(("train", kept))[1]
                    learn_metrics = C.learn(self.learner, trained, on_step=update)
            t_learn = time.perf_counter() - t0

            self.log.save_rollouts(rollouts, iteration)
            metrics = {
                **C.rollout_metrics(rollouts),
                **C.policy_lag(rollouts, iteration),
                **collect_metrics,
                **async_metrics,
                **adv_metrics,
                **learn_metrics,
                **cluster.restart_metrics(),
                **(resumed if iteration == self.start_iteration + 1 else {}),
                "tasks": len(tasks),
                "turn_budget": self.schedule.budget(iteration),
                "time/rollout": t_rollout,
                "time/learn": t_learn,
            }
            t0 = time.perf_counter()
            ckpt = self._save(iteration, sampler_after, metrics)
            cluster.resume_after_learning()
            cluster.publish(ckpt / "adapter", iteration)
            t_sync = time.perf_counter() - t0

            if self._eval_due(iteration):
                cluster.submit_eval(ckpt, iteration, self.schedule.budget(iteration))
            for eval_iteration, eval_metrics in cluster.finished_evals():
                self._log_eval(eval_metrics, eval_iteration)
            total = time.perf_counter() - t_iter
            metrics.update(
                {
                    "time/sync": t_sync,
                    "time/iteration": total,
                    "time/idle": max(total - t_rollout - t_learn - t_sync, 0.0),
                }
            )
            self.log.log(metrics, iteration)
            print(
                f"{C.format_progress(iteration, cfg.run.iterations, metrics)} | {lost_text(metrics)}",
                flush=True,
            )
            print(eta.line(iteration, total), flush=True)
            if cfg.logging.plots:
                self.log.plot()
        t_wait = time.perf_counter()
        for eval_iteration, eval_metrics in cluster.finished_evals(wait=True):
            self._log_eval(eval_metrics, eval_iteration)
        self.clock.eval_wait_s += time.perf_counter() - t_wait
        if cfg.logging.plots:
            self.log.plot()

    # ------------------------------------------------------------------ results
    def _log_eval(self, metrics: dict, iteration: int) -> None:
        """Log an evaluation and print its one result line (its lost episodes by cause, the last error when every
        one was lost)."""
        errors = metrics.pop("eval/errors", {})
        self.log.log(metrics, iteration)
        print_eval_line(self.cfg, self.run_dir, iteration, metrics, errors)

    def _report(self, cluster: Cluster) -> list[str]:
        """After training: the held-out evaluation of start/best/final, then the run's closing summary."""
        cfg, held_out = self.cfg, None
        if cfg.eval.enabled and cfg.run.iterations > self.start_iteration:
            began = time.perf_counter()
            best = best_record(self.run_dir)
            try:  # training is done and saved: a failure here costs the held-out numbers, not the run
                held_out = evaluate_held_out(
                    cluster, cfg, self.run_dir, int(cfg.run.iterations), best[0] if best else None,
                    self.schedule.budget(int(cfg.run.iterations)),
                )  # fmt: skip
            except Exception as exc:  # noqa: BLE001
                print(
                    f"[driver] held-out evaluation failed ({type(exc).__name__}: {exc}); no held-out numbers"
                )
            if held_out is not None:
                self.log.log(held_out["row"], int(cfg.run.iterations))
                if cfg.logging.plots:
                    self.log.plot()  # the success plot gains the held-out points
            self.clock.eval_wait_s += time.perf_counter() - began
        return finish(
            cfg, self.run_dir, self.log.rows(), self.clock, self.start_iteration + 1, held_out, echo=False
        )

    # ------------------------------------------------------------------ steps
    def _eval_due(self, iteration: int) -> bool:
        every, last = self.cfg.eval.every_n_iterations, self.cfg.run.iterations
        return bool(self.cfg.eval.enabled) and (iteration % every == 0 or iteration == last)

    def _submit(self, cluster: Cluster, sampler: TaskSampler, iteration: int):
        """Draw the iteration's tasks and start collecting; remembers the sampler state to checkpoint."""
        tasks = sampler.sample(self.cfg.algorithm.tasks_per_iteration)
        after = dict(vars(sampler.state))
        ref = cluster.submit_collect(
            tasks,
            self.cfg.algorithm.rollouts_per_task,
            max_turns=self.schedule.budget(iteration),
            group_prefix=f"it{iteration}/",
            seed=self.cfg.run.seed * 100_003 + iteration,
        )
        return after, tasks, ref

    def _save(self, iteration: int, sampler_state: dict, metrics: dict | None = None) -> Path:
        """Checkpoint with the driver's state; the iteration's metrics row travels inside it, so a
        crash between the checkpoint and the log write loses no row (the resumed run restores it)."""
        ckpt = C.checkpoint_dir(self.run_dir, iteration)
        extra = {"iteration": iteration, "sampler": sampler_state, "wandb_run_id": self.log.wandb_run_id,
                 "metrics_row": metrics}  # fmt: skip
        self.learner.save_checkpoint(*self.dist.broadcast(("save", (str(ckpt), extra)))[1])
        return ckpt

    def _initial_policy(self, cluster: Cluster) -> None:
        """Iteration 0: the policy RL starts from (after a LoRA warm start if configured), saved,
        published and evaluated, so every curve has its starting point."""
        t0 = time.perf_counter()
        metrics: dict = dict(self.sft_metrics)
        warm_report = Path(self.model_path) / "warm_start.json"
        if warm_report.exists():
            report = json.loads(warm_report.read_text())
            metrics.update({"sft/demonstrations": report["demonstrations"], "sft/loss": report["epoch_losses"][-1],
                            "time/sft": report["seconds"], "sft/epochs": len(report["epoch_losses"])})  # fmt: skip
            if report.get("epoch_checks"):
                metrics["sft/p_optimal_heldout"] = report["epoch_checks"][-1]["readiness"]
        ckpt = self.start_checkpoint or self._save(0, dict(vars(self.sampler_state)))
        cluster.publish(ckpt / "adapter", 0)
        if self.cfg.eval.enabled:
            cluster.submit_eval(ckpt, 0, self.schedule.budget(1))
        metrics.setdefault("time/sft", time.perf_counter() - t0 + self.clock.lora_sft_s)
        self.log.log(metrics, 0)

    def _lora_warm_start(self) -> dict:
        """The LoRA warm start (learner.sft_target=lora) on demonstrations; needs no server."""
        if not (self.cfg.learner.sft_epochs > 0 and self.cfg.learner.sft_target == "lora"):
            return {}
        t0 = time.perf_counter()
        _, demos = warm_start_demonstrations(self.cfg, self.model_path)
        sft = C.warm_start(self.learner, self.dist.broadcast(("sft", demos))[1], self.cfg)
        self.clock.lora_sft_s = time.perf_counter() - t0
        print(
            f"[driver] LoRA warm start on {len(demos)} demonstrations: loss {sft.get('loss', float('nan')):.3f}"
        )
        return {**{f"sft/{k}": v for k, v in sft.items()}, "sft/demonstrations": len(demos)}


def _keep_start_adapter(adapter: Path, run_dir: Path) -> None:
    """Copy iteration 0's adapter aside: the held-out evaluation scores it after checkpoint pruning."""
    target = run_dir / START_ADAPTER
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(adapter, target)
