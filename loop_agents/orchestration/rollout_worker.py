"""The rollout worker: a Ray actor that plays episodes against the vLLM server(s) and the environments.

One worker runs many episodes concurrently on its asyncio loop (environment sessions and HTTP requests
are async), so the learner process never runs rollout code (the reference ran it in learner threads,
under the GIL). The evaluator is the same class with evaluation settings (greedy, eval split).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.selected import (
    close_task_source,
    make_task_source,
    scenario_function,
    start_task_source,
)
from loop_agents.eval.episode_metrics import evaluation_metrics
from loop_agents.gateway.configured import program_episodes
from loop_agents.inference.client import VLLMClient
from loop_agents.orchestration.agent_choice import make_agent
from loop_agents.orchestration.collector import CollectionStats, collect_groups
from loop_agents.orchestration.components import episode_config, rollout_metrics
from loop_agents.orchestration.cpu_pinning import inference_cpus, pin
from loop_agents.progress_lines import Ticker, watch
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.trajectory import FinishReason, Trajectory


class RolloutWorker:
    """Plays groups of episodes; wrapped with `ray.remote` by the cluster."""

    def __init__(
        self,
        cfg: dict[str, Any] | DictConfig,
        model_path: str,
        server_urls: list[str],
        evaluation: bool = False,
    ):
        from transformers import AutoTokenizer

        self.cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
        pin(
            inference_cpus(self.cfg), "evaluator" if evaluation else "rollout worker"
        )  # cpu_split: the sampler's
        self.evaluation = evaluation
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.chat = chat_format(self.tokenizer, episode_config(self.cfg, max_turns=1))
        # agent.program: episodes are played by the user's program through the gateway (loop_agents/gateway)
        self.programs = program_episodes(self.cfg, self.tokenizer, episode_config(self.cfg, max_turns=1))
        self.server_urls = list(server_urls)
        self.client = VLLMClient(server_urls, request_timeout_s=self.cfg.rollout.request_timeout_s)
        self.task_source = make_task_source(self.cfg)
        self._started = False
        self._live: dict[str, tuple[CollectionStats, int]] = {}  # group_prefix -> (stats, episodes)
        self._policy: str | None = None  # the newest published policy adapter (partial rollouts follow it)
        self._versions: dict[str, int] = {}  # policy adapter name -> its policy version

    async def _ensure_started(self) -> None:
        if not self._started:
            await start_task_source(self.task_source)
            self._started = True

    def task_ids(self, split: str) -> list[str]:
        return self.task_source.task_ids(split)

    async def progress(self, group_prefix: str) -> tuple[int, int] | None:
        """(episodes ended, episodes) of the collection running under `group_prefix`; None when none is."""
        live = self._live.get(group_prefix)
        return (live[0].ended, live[1]) if live else None

    def set_policy(self, adapter: str, version: int) -> None:
        """A new policy adapter was published: episodes that follow the latest use it from their next turn."""
        self._policy = adapter
        self._versions[adapter] = version

    def set_servers(self, server_urls: list[str]) -> None:
        self.server_urls = list(server_urls)
        self.client.set_servers(server_urls)

    async def collect(
        self,
        task_ids: list[str],
        k: int,
        max_turns: int,
        adapter: str | None,
        group_prefix: str = "",
        seed: int | None = None,
        policy_version: int | None = None,
        follow_latest: bool = False,
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """K episodes per task with the given adapter; returns trajectories and collection metrics.

        `follow_latest` (asynchronous training): partial rollouts, each turn is sampled by the newest published
        policy adapter (`set_policy`), and tagged with its version (`Turn.policy_version`)."""
        await self._ensure_started()
        cfg = self.cfg
        episode_cfg = episode_config(cfg, max_turns=max_turns, evaluation=self.evaluation)
        if episode_cfg.seed is not None and seed is not None:
            # a training collection's own seed; evaluations pass none and keep run.seed, as scripts/evaluate.py
            # does, so an evaluation in the run and a standalone one of the same adapter draw the same samples
            # (they were unseeded: the same adapter scored 0.70-0.81 across reruns of one run's evaluation)
            episode_cfg.seed = seed
        if follow_latest:
            if adapter is not None and policy_version is not None:
                self._versions.setdefault(adapter, policy_version)
            generator = self.client.following(lambda: self._policy or adapter)
        else:
            generator = self.client.for_adapter(adapter)
        started = time.perf_counter()

        async def episode(task_id: str, group_id: str, sample_index: int) -> Trajectory:
            env = await self.task_source.make_env()
            play = run_episode if self.programs is None else self.programs.play
            traj = await play(
                env,
                generator,
                make_agent(cfg),
                self.chat,
                episode_cfg,
                task_id=task_id,
                group_id=group_id,
                sample_index=sample_index,
            )
            traj.policy_version = policy_version
            traj.metadata["adapter"] = adapter
            for turn in traj.turns:
                turn.policy_version = (
                    self._versions.get(turn.adapter, policy_version) if follow_latest else policy_version
                )
            if follow_latest:  # the trajectory's version is its oldest token's (the staleness bound's)
                traj.policy_version = traj.oldest_version()
            return traj

        stats = CollectionStats()
        self._live[group_prefix] = (stats, len(task_ids) * k)
        try:
            trajectories, stats = await collect_groups(
                task_ids,
                k,
                episode,
                concurrency=cfg.env.concurrency,
                retries=cfg.rollout.episode_retries,
                rollouts_fraction=1.0 if self.evaluation else cfg.rollout.rollouts_fraction,
                rollouts_per_task_fraction=1.0 if self.evaluation else cfg.rollout.rollouts_per_task_fraction,
                cut_policy=cfg.rollout.cut_policy,
                group_prefix=group_prefix,
                before_retry=self._wait_for_servers,
                stats=stats,
                retry_backoff_s=cfg.rollout.retry_backoff_s,
            )
        finally:
            self._live.pop(group_prefix, None)
        elapsed = time.perf_counter() - started
        generated = sum(t.num_generated_tokens for t in trajectories)
        metrics = {
            **stats.as_metrics(),
            "collect/errors": dict(stats.last_errors),  # cause -> last error text (the driver's lost line)
            "collect/seconds": elapsed,
            "collect/generated_tokens_per_s": generated / max(elapsed, 1e-9),
        }
        return trajectories, metrics

    async def _wait_for_servers(self, failed: Trajectory) -> None:
        """After an inference failure, wait until every server is healthy and serves the episode's adapter
        again (the watchdog is restarting a dead one: a vLLM start-up, then the adapter reload) so the retry
        does not fail the same way. A dead inference actor's replacement comes with a new URL (`set_servers`),
        which the client reads on every round. After an environment failure, a task source that can tell
        (`wait_until_healthy`, e.g. an OpenEnv server) is waited for likewise, bounded."""
        timeout = self.cfg.rollout.server_recovery_timeout_s
        if failed.finish_reason == FinishReason.ENV_ERROR:
            if hasattr(self.task_source, "wait_until_healthy"):
                await self.task_source.wait_until_healthy(timeout)
            return
        if failed.finish_reason != FinishReason.INFERENCE_ERROR:
            return
        await self.client.wait_until_serving(failed.metadata.get("adapter"), timeout, poll_s=2.0)

    def _ended(self, group_prefix: str) -> int:
        """Episodes of the collection `group_prefix` that have ended so far (0 when none runs)."""
        live = self._live.get(group_prefix)
        return live[0].ended if live else 0

    async def collect_with_progress(
        self, label: str, task_ids: list[str], k: int, max_turns: int, adapter: str | None, group_prefix: str
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """`collect` with a progress line at most every 10 s ('[<label>] 60/100 episodes (60 %), ... ETA 17 s'):
        evaluations run for minutes beside training and after it (the held-out ones)."""
        total = len(task_ids) * k
        ticker = Ticker(label, total, "episodes")
        progress = asyncio.ensure_future(watch(ticker, lambda: self._ended(group_prefix)))
        try:
            collected = await self.collect(task_ids, k, max_turns, adapter, group_prefix=group_prefix)
        finally:
            progress.cancel()
        ticker.update(total)
        return collected

    async def evaluate(
        self, split: str, adapter: str | None, max_tasks: int | None, runs_per_task: int, max_turns: int
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """Score an adapter on a split: success rate, reward, TGC/SGC where the env defines scenarios."""
        await self._ensure_started()
        task_ids = sorted(self.task_source.task_ids(split))[: max_tasks or None]
        trajectories, collect_metrics = await self.collect_with_progress(
            f"eval {adapter or 'base'} on {split}", task_ids, runs_per_task, max_turns, adapter, "eval/"
        )
        difficulty = getattr(self.task_source, "difficulty", None)
        difficulties = {t: difficulty(t) for t in task_ids} if difficulty is not None else None
        metrics = rollout_metrics(trajectories, prefix="eval")
        metrics.update(evaluation_metrics(trajectories, scenario_function(self.cfg), difficulties))
        metrics.update(
            {k.replace("collect/", "eval/", 1): v for k, v in collect_metrics.items() if "/lost" in k}
        )
        metrics["eval/errors"] = collect_metrics["collect/errors"]
        return trajectories, metrics

    async def close(self) -> None:
        if self.programs is not None:
            await self.programs.close()
        if self._started or not hasattr(self.task_source, "start"):
            await close_task_source(self.task_source)
