"""Evaluate a checkpoint (or the base model) on every task of a split, N runs per task; resumable.

    python scripts/evaluate.py checkpoint=<checkpoint dir | run dir | base> split=<name> [runs=N]
        [server_url=http://127.0.0.1:PORT] [out=<dir>] [max_tasks=N] [max_turns=N]
        [appworld_experiment=<name>] [official=true|false] [compare=<checkpoint>] [<hydra overrides> ...]
    loop-evaluate ...                       (the same, as a console script)

checkpoint   a checkpoint dir (`.../checkpoints/checkpoint-12`, `.../checkpoints/best`, or its `adapter/`),
             a run dir (uses `checkpoints/best`, else the newest complete `checkpoint-N`), or `base`
             (no adapter). With a run dir the run's `config.yaml` is the base config, so env, llm and
             context length match training; overrides apply on top (group overrides such as `env=appworld`
             replace that group). With `base` the config is composed from conf/ as for training.
split        default `eval.split`. runs: evaluations per task (the paper reports the mean of 5), default 1.
compare      a second checkpoint (same forms; an adapter of the same base model, a run of the same env and
             settings) played on the same tasks and runs by the same server (on GPU the same sampling seeds per
             task and run); prints `checkpoint - compare` per task, then its 95 % bootstrap interval over tasks.
             Its episodes go to its own default out/ (`<out>_compare` when out= is given).
server_url   a running vLLM server (started by `loop_agents.inference`, runtime LoRA loading on) instead
             of starting one; it must serve the same base model.
out          default `<run dir>/evaluate/<checkpoint>/<split>` (`runs/evaluate/base-<llm>/<split>` for base).
max_turns    default: the turn budget of `env.turn_schedule` at the end of training.
appworld_experiment, official: AppWorld only. Run r keeps the engine's own outputs as experiment
             `<appworld_experiment>_run<r>` under `$APPWORLD_ROOT/experiments/outputs` (linked from
             `out/appworld/`); `official=true` (default) then scores each complete run with AppWorld's own
             evaluator (also available later: `scripts/parse_and_log.py experiment=<out>`).

Writes into `out/`: trajectories/run_<r>.jsonl (one Trajectory per finished episode, appended as it
finishes), metrics.json, config.yaml, evaluate_manifest.json. metrics.json's `intervals` hold, per split and
difficulty, success (= TGC) and SGC with 95 % bootstrap intervals over tasks (scenarios), avg@k, pass@k and the
episodes behind them, over every saved episode (`task_intervals.py`); `compare` holds the paired difference. Rerunning the same command plays only the
(task, run) pairs that have no saved episode (episodes lost after retries are retried); it refuses an
`out/` that holds another checkpoint's or settings' episodes. Temperature is `llm.eval_temperature`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from loop_agents.checkpoint_eval.episode_store import FAILED, EpisodeStore
from loop_agents.checkpoint_eval.eval_target import (
    PROG,
    Target,
    adapter_sha256,
    default_max_turns,
    default_out,
    load_config,
    model_path_for,
    resolve_checkpoint,
)
from loop_agents.checkpoint_eval.inference_endpoints import InferenceEndpoints
from loop_agents.checkpoint_eval.official_outputs import link_experiment_outputs, official_scores
from loop_agents.checkpoint_eval.request import MANIFEST_KEYS, EvalRequest, Prepared
from loop_agents.envs.selected import make_task_source, scenario_function, selected_family
from loop_agents.eval.cli_args import UsageError
from loop_agents.eval.episode_metrics import evaluation_metrics
from loop_agents.eval.goal_completion import goal_completion_by_difficulty, task_results_from_trajectories
from loop_agents.eval.result_lines import evaluate_line
from loop_agents.eval.score_inputs import MANIFEST
from loop_agents.eval.tables import format_report, summarize_runs
from loop_agents.eval.task_intervals import interval_report
from loop_agents.learner.manifest import verify_adapter
from loop_agents.orchestration.agent_choice import make_agent
from loop_agents.orchestration.collector import collect_groups
from loop_agents.orchestration.components import episode_config, rollout_metrics
from loop_agents.orchestration.rollout_worker import RolloutWorker
from loop_agents.redaction import redacted_yaml
from loop_agents.rollout.runner import run_episode
from loop_agents.rollout.trajectory import Trajectory


def prepare(request: EvalRequest) -> Prepared:
    """Everything that can fail fast (checkpoint, config, split, out/ consistency) before any server starts."""
    if request.runs < 1:
        raise UsageError(f"runs={request.runs} must be >= 1")
    if request.max_tasks is not None and request.max_tasks < 1:
        raise UsageError(f"max_tasks={request.max_tasks} must be >= 1")
    target = resolve_checkpoint(request.checkpoint)
    if target.adapter is not None:
        try:
            verify_adapter(target.adapter)  # a truncated or changed file, named before a server starts
        except ValueError as error:
            raise UsageError(str(error)) from None
    cfg = load_config(target.run_config, request.overrides)
    split = request.split or str(cfg.eval.split)
    source = make_task_source(cfg)
    task_ids = sorted(source.task_ids(split))[: request.max_tasks or None]  # ValueError names the split
    difficulty = getattr(source, "difficulty", None)
    difficulties = {t: difficulty(t) for t in task_ids} if difficulty is not None else None
    out = Path(request.out).expanduser() if request.out else default_out(cfg, target, split)
    out = out.resolve()
    model_path = model_path_for(cfg, target, out)
    max_turns = request.max_turns or default_max_turns(cfg)
    if max_turns < 1:
        raise UsageError(f"max_turns={max_turns} must be >= 1")
    manifest = {
        "checkpoint": request.checkpoint,
        "adapter": None if target.adapter is None else str(target.adapter),
        "adapter_sha256": adapter_sha256(target.adapter),
        "run_dir": None if target.run_dir is None else str(target.run_dir),
        "model_path": str(Path(model_path).resolve()) if Path(model_path).exists() else model_path,
        "split": split,
        "env": str(cfg.env.name),
        "max_turns": max_turns,
        "temperature": float(cfg.llm.eval_temperature),
        "max_context": int(cfg.learner.max_seq_len),
    }
    experiments = None
    family = selected_family(cfg)
    key = family.name  # the manifest's section of a family that keeps named experiments (official scoring)
    if family.official is not None:
        base = request.appworld_experiment or _experiment_base(target, split, out)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", base):
            raise UsageError(f"appworld_experiment={base!r}: use letters, digits, '_', '-', '.' only")
        manifest[key] = {**family.manifest(source), "experiment_base": base}
    previous = out / MANIFEST
    if previous.is_file():
        old = json.loads(previous.read_text())
        for name in MANIFEST_KEYS:
            if old.get(name) != manifest.get(name):
                raise UsageError(
                    f"out={out} holds an evaluation with {name}={old.get(name)!r}, not {manifest.get(name)!r}; "
                    "pass another out= (or delete that directory)"
                )
        old_root = old.get(key, {}).get("root")
        if old_root and key in manifest and old_root != manifest[key]["root"]:
            raise UsageError(
                f"out={out} holds {family.label} episodes of root {old_root}, not {manifest[key]['root']}"
            )
        if key in old and request.appworld_experiment is None:
            manifest[key] = old[key]  # keep the experiment names of the first invocation
    if family.official is not None and key in manifest:
        base = manifest[key]["experiment_base"]
        experiments = {r: f"{base}_run{r}" for r in range(request.runs)}
        manifest[key]["experiments"] = [experiments[r] for r in range(request.runs)]
    return Prepared(
        cfg, target, split, out, model_path, task_ids, difficulties, max_turns, manifest, experiments
    )


def _experiment_base(target: Target, split: str, out: Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", f"{target.label}_{split}").strip("_")
    return f"eval_{slug}_{hashlib.sha1(str(out).encode()).hexdigest()[:6]}"


async def play(
    prep: Prepared, urls: list[str], adapter: str | None, pending: dict[int, list[str]], store: EpisodeStore
) -> dict[str, float]:
    """Plays the pending (task, run) pairs; each finished episode is appended to the store at once."""
    cfg = prep.cfg
    worker = RolloutWorker(cfg, prep.model_path, urls, evaluation=True)
    total = sum(len(t) for t in pending.values())
    counts = {"played": 0, "lost": 0, "retried": 0}
    every = max(1, total // 20)
    began = time.monotonic()
    env_startup_s = 0.0
    try:
        await worker._ensure_started()  # AppWorld: starts (and warms up) its server pool
        env_startup_s = time.monotonic() - began
        began = time.monotonic()
        episode_cfg = episode_config(cfg, max_turns=prep.max_turns, evaluation=True)
        generator = worker.client.for_adapter(adapter)
        for run in sorted(pending):
            experiment = prep.experiments[run] if prep.experiments else None

            async def episode(task_id: str, group_id: str, _: int, run: int = run, experiment=experiment):
                source = worker.task_source
                env = await (source.make_env(experiment_name=experiment) if experiment else source.make_env())
                # agent.program: the run's own agent program plays, through the worker's gateway
                play_episode = run_episode if worker.programs is None else worker.programs.play
                traj = await play_episode(
                    env, generator, make_agent(cfg), worker.chat, episode_cfg,
                    task_id=task_id, group_id=group_id, sample_index=run,
                )  # fmt: skip
                traj.metadata.update(adapter=adapter, checkpoint=prep.manifest["checkpoint"], eval_run=run)
                if experiment:
                    traj.metadata["appworld_experiment"] = experiment
                if traj.finish_reason not in FAILED:
                    store.append(traj, run)
                    counts["played"] += 1
                    if counts["played"] % every == 0 or counts["played"] == total:
                        print(
                            f"[{PROG}] {counts['played']}/{total} episodes "
                            f"({time.monotonic() - began:.0f} s)",
                            flush=True,
                        )
                return traj

            _, stats = await collect_groups(
                pending[run], 1, episode, concurrency=int(cfg.env.concurrency),
                retries=int(cfg.rollout.episode_retries), group_prefix="eval/",
                before_retry=worker._wait_for_servers,
            )  # fmt: skip
            counts["lost"] += stats.failed
            counts["retried"] += stats.retried
    finally:
        await worker.close()
        await worker.client.aclose()
    return {**counts, "seconds": time.monotonic() - began, "env_startup_s": env_startup_s}


def compute_metrics(prep: Prepared, saved: dict[int, dict[str, Trajectory]], runs: int) -> dict[str, Any]:
    """Success, reward, TGC/SGC (mean ± std over complete runs) and behaviour metrics of the saved episodes."""
    wanted = set(prep.task_ids)
    per_run = {r: [saved[r][t] for t in prep.task_ids if t in saved.get(r, {})] for r in range(runs)}
    trajectories = [t for r in range(runs) for t in per_run[r]]
    complete = [r for r in range(runs) if len(per_run[r]) == len(wanted)]
    scenario_of = scenario_function(prep.cfg)
    result: dict[str, Any] = {
        "complete_runs": complete,
        "missing": {r: sorted(wanted - set(saved.get(r, {}))) for r in range(runs) if r not in complete},
        "intervals": None,
        "metrics": {},
        "goal_completion": None,
    }
    if not trajectories:
        return result
    result["intervals"] = interval_report(trajectories, prep.task_ids, runs, scenario_of, prep.difficulties)

    def metrics_of(episodes: list[Trajectory]) -> dict[str, float]:
        metrics = rollout_metrics(episodes, prefix="eval")
        metrics.update(evaluation_metrics(episodes, scenario_of, prep.difficulties))
        metrics.update(selected_family(prep.cfg).behaviour_metrics(episodes))
        return metrics

    # Means only over complete runs: a mean over the tasks that happened to finish is not the split's score.
    complete_episodes = [t for r in complete for t in per_run[r]]
    result["metrics"] = metrics_of(complete_episodes) if complete_episodes else {}
    if len(complete) < runs:
        result["partial_metrics"] = metrics_of(trajectories)  # every saved episode, incomplete runs included
    if complete:
        result["goal_completion"] = summarize_runs(
            [
                goal_completion_by_difficulty(
                    task_results_from_trajectories(per_run[r], scenario_of, prep.difficulties)
                )
                for r in complete
            ]
        )
    return result


def evaluate(
    request: EvalRequest, prep: Prepared | None = None, endpoints: InferenceEndpoints | None = None
) -> dict[str, Any]:
    """Run (or resume) the evaluation; returns what metrics.json holds.

    `endpoints`: servers shared with another evaluation (started here if they are not yet, closed by the caller)."""
    began = time.monotonic()
    prep = prep or prepare(request)
    prep.out.mkdir(parents=True, exist_ok=True)
    (prep.out / MANIFEST).write_text(json.dumps(prep.manifest, indent=2))
    (prep.out / "config.yaml").write_text(redacted_yaml(prep.cfg))
    store = EpisodeStore(prep.out)
    saved = store.load()
    pending = {
        r: [t for t in prep.task_ids if t not in saved.get(r, {})]
        for r in range(request.runs)
        if any(t not in saved.get(r, {}) for t in prep.task_ids)
    }
    todo = sum(len(v) for v in pending.values())
    print(
        f"[{PROG}] {prep.target.label} ({prep.target.adapter or 'no adapter'}) on {prep.cfg.env.name}/{prep.split}: "
        f"{len(prep.task_ids)} tasks x {request.runs} runs, {len(prep.task_ids) * request.runs - todo} already "
        f"in {prep.out}, {todo} to play (max_turns {prep.max_turns}, temperature {prep.cfg.llm.eval_temperature})",
        flush=True,
    )
    played: dict[str, float] = {"played": 0, "lost": 0, "retried": 0, "seconds": 0.0, "env_startup_s": 0.0}
    startup_s = 0.0
    if todo:
        own = endpoints is None
        if endpoints is None:
            endpoints = InferenceEndpoints(prep.cfg, prep.model_path, request.server_url, prep.out / "logs")
        try:
            urls = endpoints.urls
            if not urls:
                urls = endpoints.start()
                startup_s = endpoints.startup_s
            name = None
            if prep.target.adapter is not None:
                name = endpoints.load_adapter(prep.target.adapter, prep.manifest["adapter_sha256"])
            played = asyncio.run(play(prep, urls, name, pending, store))
        finally:
            if own:
                endpoints.close()
        saved = store.load()
    link_experiment_outputs(prep)
    scores = compute_metrics(prep, saved, request.runs)
    official = None
    if request.official and scores["complete_runs"]:
        official = official_scores(prep, scores["complete_runs"], set(pending))
    timing = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "server_startup_s": startup_s,
        "env_startup_s": played["env_startup_s"],
        "play_s": played["seconds"],
        "episodes_played": played["played"],
        "episodes_lost": played["lost"],
        "episodes_retried": played["retried"],
        "seconds_per_episode": played["seconds"] / played["played"] if played["played"] else None,
        "official_eval_s": sum(r.get("seconds", 0.0) for r in official["runs"] if r["run"] in pending)
        if official
        else 0.0,
        "total_s": time.monotonic() - began,
    }
    previous = prep.out / "metrics.json"
    history = json.loads(previous.read_text()).get("invocations", []) if previous.is_file() else []
    report = {
        **prep.manifest,
        "out": str(prep.out),
        "runs": request.runs,
        "num_tasks": len(prep.task_ids),
        **scores,
        "official": official,
        "timing": timing,  # of this invocation; `invocations` lists every invocation's
        "invocations": [*history, timing],
    }
    (prep.out / "metrics.json").write_text(json.dumps(report, indent=2, default=str))
    print(format_report(report))
    print(evaluate_line(report), flush=True)
    return report
