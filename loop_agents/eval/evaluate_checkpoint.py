"""Evaluate a checkpoint (or the base model) on every task of a split, N runs per task; resumable.

    python scripts/evaluate.py checkpoint=<checkpoint dir | run dir | base> split=<name> [runs=N]
        [server_url=http://127.0.0.1:PORT] [out=<dir>] [max_tasks=N] [max_turns=N]
        [appworld_experiment=<name>] [official=true|false] [<hydra overrides> ...]
    loop-evaluate ...                       (the same, as a console script)

checkpoint   a checkpoint dir (`.../checkpoints/checkpoint-12`, `.../checkpoints/best`, or its `adapter/`),
             a run dir (uses `checkpoints/best`, else the newest complete `checkpoint-N`), or `base`
             (no adapter). With a run dir the run's `config.yaml` is the base config, so env, llm and
             context length match training; overrides apply on top (group overrides such as `env=appworld`
             replace that group). With `base` the config is composed from conf/ as for training.
split        default `eval.split`. runs: evaluations per task (the paper reports the mean of 5), default 1.
server_url   a running vLLM server (started by `loop_agents.inference`, runtime LoRA loading on) instead
             of starting one; it must serve the same base model.
out          default `<run dir>/evaluate/<checkpoint>/<split>` (`runs/evaluate/base-<llm>/<split>` for base).
max_turns    default: the turn budget of `env.turn_schedule` at the end of training.
appworld_experiment, official: AppWorld only. Run r keeps the engine's own outputs as experiment
             `<appworld_experiment>_run<r>` under `$APPWORLD_ROOT/experiments/outputs` (linked from
             `out/appworld/`); `official=true` (default) then scores each complete run with AppWorld's own
             evaluator (also available later: `scripts/parse_and_log.py experiment=<out>`).

Writes into `out/`: trajectories/run_<r>.jsonl (one Trajectory per finished episode, appended as it
finishes), metrics.json, config.yaml, evaluate_manifest.json. Rerunning the same command plays only the
(task, run) pairs that have no saved episode (episodes lost after retries are retried); it refuses an
`out/` that holds another checkpoint's or settings' episodes. Temperature is `llm.eval_temperature`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.config.validate import ConfigError
from loop_agents.eval.cli_args import UsageError, exit_with, parse_args
from loop_agents.redaction import redacted_yaml
from loop_agents.rollout.trajectory import FinishReason, Trajectory

PROG = "evaluate"
KEYS = {
    "checkpoint": str,
    "split": str,
    "runs": int,
    "server_url": str,
    "out": str,
    "max_tasks": int,
    "max_turns": int,
    "appworld_experiment": str,
    "official": bool,
}
GROUPS = ("llm", "gpu_allocation", "algorithm", "env")
MANIFEST = "evaluate_manifest.json"
FAILED = (FinishReason.ENV_ERROR, FinishReason.INFERENCE_ERROR)
# settings that must match between the invocations that fill one out/ directory
MANIFEST_KEYS = ("adapter_sha256", "model_path", "split", "env", "max_turns", "temperature", "max_context")


# ---------------------------------------------------------------------------------------- checkpoint
@dataclass(frozen=True)
class Target:
    """What to evaluate: an adapter (None = the base model) and the run it came from, if any."""

    spec: str
    label: str  # "base", "best", "checkpoint-12", or the adapter dir's name
    adapter: Path | None
    run_dir: Path | None

    @property
    def run_config(self) -> Path | None:
        return None if self.run_dir is None else self.run_dir / "config.yaml"


def _run_dir_of(checkpoint: Path) -> Path | None:
    """`<run>/checkpoints/<name>` -> `<run>` when `<run>/config.yaml` exists."""
    parent = checkpoint.parent
    if parent.name == "checkpoints" and (parent.parent / "config.yaml").is_file():
        return parent.parent
    return None


def resolve_checkpoint(spec: str) -> Target:
    """Turn `checkpoint=` into a Target; a UsageError names what is missing."""
    from loop_agents.orchestration.components import latest_checkpoint

    if spec == "base":
        return Target(spec, "base", None, None)
    path = Path(spec).expanduser().resolve()
    if not path.exists():
        raise UsageError(
            f"checkpoint={spec}: no such file or directory (give a checkpoint dir, a run dir or 'base')"
        )
    if (path / "adapter" / "adapter_config.json").is_file():
        return Target(spec, path.name, path / "adapter", _run_dir_of(path))
    if (path / "adapter_config.json").is_file():
        checkpoint = path.parent if path.name == "adapter" else path
        return Target(spec, checkpoint.name, path, _run_dir_of(checkpoint))
    if (path / "config.yaml").is_file():
        best = path / "checkpoints" / "best"
        if (best / "adapter" / "adapter_config.json").is_file():
            return Target(spec, "best", best / "adapter", path)
        latest = latest_checkpoint(path) if (path / "checkpoints").is_dir() else None
        if latest is None or not (latest / "adapter" / "adapter_config.json").is_file():
            raise UsageError(
                f"checkpoint={spec}: run dir has no checkpoints/best/adapter and no complete "
                "checkpoints/checkpoint-N/adapter"
            )
        return Target(spec, latest.name, latest / "adapter", path)
    raise UsageError(
        f"checkpoint={spec}: not a checkpoint dir (no adapter/adapter_config.json), an adapter dir, "
        "or a run dir (no config.yaml)"
    )


def adapter_sha256(adapter: Path | None) -> str | None:
    if adapter is None:
        return None
    digest = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"):
        file = adapter / name
        if file.is_file():
            with file.open("rb") as f:
                for block in iter(lambda f=f: f.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------- config
def load_config(run_config: Path | None, overrides: list[str]) -> DictConfig:
    """The run's config.yaml with the overrides on top (or conf/ composed with them); validated."""
    from loop_agents.config.load import compose, explain

    if run_config is None:
        return compose(overrides)
    try:
        return _config_from_run(run_config, overrides)
    except ConfigError:
        raise
    except Exception as exc:  # OmegaConf/Hydra raise many types; all become one readable line
        raise ConfigError(explain(exc)) from exc


def _config_from_run(run_config: Path, overrides: list[str]) -> DictConfig:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from loop_agents.config.load import CONF_DIR, _check_missing
    from loop_agents.config.schema import RootConfig
    from loop_agents.config.validate import validate

    schema = OmegaConf.structured(RootConfig)
    saved = OmegaConf.load(run_config)
    dropped = _drop_unknown(saved, schema)
    if dropped:
        print(f"[{PROG}] note: ignoring keys of {run_config} the config no longer has: {dropped}", flush=True)
    cfg = OmegaConf.merge(schema, saved)
    factories = {f.name: f.default_factory for f in dataclasses.fields(RootConfig)}
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.key_or_group
        if override.is_delete():
            raise ConfigError(f"~{key}: deleting keys is not supported on top of a run's config.yaml")
        if key == "experiment":
            raise ConfigError(
                "experiment=... presets cannot be applied on top of a run's config.yaml; "
                "pass their keys as overrides (or evaluate checkpoint=base with the preset)"
            )
        if key in GROUPS:
            preset = CONF_DIR / key / f"{override.value()}.yaml"
            if not preset.is_file():
                options = sorted(p.stem for p in (CONF_DIR / key).glob("*.yaml"))
                raise ConfigError(
                    f"unknown preset '{key}/{override.value()}'; available: {', '.join(options)}"
                )
            cfg[key] = OmegaConf.merge(OmegaConf.structured(factories[key]()), OmegaConf.load(preset))
            continue
        OmegaConf.update(cfg, key, override.value(), merge=False, force_add=override.is_add())
    OmegaConf.resolve(cfg)
    _check_missing(cfg)
    validate(cfg)
    return cfg


def _drop_unknown(saved: DictConfig, schema: DictConfig, prefix: str = "") -> list[str]:
    """Remove keys of an older config.yaml that the schema dropped since (dataclass nodes only)."""
    dropped = []
    for key in list(saved.keys()):
        spec = schema._get_node(key)
        if spec is None:
            dropped.append(prefix + str(key))
            del saved[key]
            continue
        node = saved._get_node(key)
        if isinstance(node, DictConfig) and isinstance(spec, DictConfig):
            if dataclasses.is_dataclass(OmegaConf.get_type(spec)):
                dropped += _drop_unknown(node, spec, f"{prefix}{key}.")
    return dropped


def model_path_for(cfg: DictConfig, target: Target, out: Path) -> str:
    """The base model the adapter belongs to: the run's warm_model/ (full SFT warm start), its
    tiny_model/, or `llm.model_path`."""
    from loop_agents.orchestration.components import resolve_model

    if target.run_dir is not None and cfg.learner.sft_epochs > 0 and cfg.learner.sft_target == "full":
        warm = target.run_dir / "warm_model"
        if not (warm / "config.json").is_file():
            raise UsageError(
                f"run {target.run_dir} trained on its warm_model/ (learner.sft_target=full) but {warm} is missing"
            )
        return str(warm)
    return resolve_model(cfg, target.run_dir or out)


def default_out(cfg: DictConfig, target: Target, split: str) -> Path:
    if target.run_dir is not None:
        return target.run_dir / "evaluate" / target.label / split
    if target.adapter is not None:
        checkpoint = target.adapter.parent if target.adapter.name == "adapter" else target.adapter
        return checkpoint / "evaluate" / split
    return Path("runs") / "evaluate" / f"base-{cfg.llm.name}" / split


def default_max_turns(cfg: DictConfig) -> int:
    from loop_agents.orchestration.turn_schedule import make_turn_schedule

    return make_turn_schedule(cfg.env.turn_schedule).budget(max(int(cfg.run.iterations), 1))


# ---------------------------------------------------------------------------------------- episodes
class EpisodeStore:
    """`out/trajectories/run_<r>.jsonl`: one finished episode per line, appended as it finishes."""

    def __init__(self, out: Path) -> None:
        self.dir = out / "trajectories"

    def path(self, run: int) -> Path:
        return self.dir / f"run_{run}.jsonl"

    def load(self) -> dict[int, dict[str, Trajectory]]:
        """run -> task id -> trajectory. A torn last line (a crash mid-write) is dropped from the file."""
        runs: dict[int, dict[str, Trajectory]] = defaultdict(dict)
        for path in sorted(self.dir.glob("run_*.jsonl")):
            match = re.fullmatch(r"run_(\d+)\.jsonl", path.name)
            if match is None:
                continue
            good, torn = [], False
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                try:
                    traj = Trajectory.from_dict(json.loads(line))
                except (json.JSONDecodeError, TypeError, ValueError):
                    torn = True
                    continue
                good.append(line)
                runs[int(match[1])][traj.task_id] = traj
            if torn:
                print(
                    f"[{PROG}] dropped unreadable lines of {path}; those episodes are played again",
                    flush=True,
                )
                tmp = path.with_suffix(".jsonl.tmp")
                tmp.write_text("".join(line + "\n" for line in good))
                tmp.replace(path)
        return runs

    def append(self, traj: Trajectory, run: int) -> None:
        import os

        self.dir.mkdir(parents=True, exist_ok=True)
        with self.path(run).open("a") as f:
            f.write(json.dumps(traj.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())


# ---------------------------------------------------------------------------------------- servers
class InferenceEndpoints:
    """Our own vLLM server(s) from `placement.plan`, or a running one by URL; loads the adapter."""

    def __init__(self, cfg: DictConfig, model_path: str, server_url: str | None, log_dir: Path) -> None:
        self.cfg, self.model_path, self.server_url, self.log_dir = cfg, model_path, server_url, log_dir
        self.servers: list[Any] = []
        self.urls: list[str] = []
        self._loaded: str | None = None
        self.startup_s = 0.0

    def start(self) -> list[str]:
        if self.server_url is not None:
            url = self.server_url.rstrip("/")
            self._get(url, "/health")
            models = self._get(url, "/v1/models").json().get("data", [])
            roots = [m.get("root") for m in models if m.get("parent") is None and m.get("root")]
            if roots and Path(roots[0]).resolve() != Path(self.model_path).resolve():
                print(f"[{PROG}] warning: {url} serves {roots[0]}, but the episodes are tokenized with "
                      f"{self.model_path}; they must be the same model", flush=True)  # fmt: skip
            self.urls = [url]
            return self.urls
        from loop_agents.inference.actor import InferenceServer
        from loop_agents.orchestration.inference_settings import inference_config
        from loop_agents.orchestration.placement import plan

        began = time.monotonic()
        for index, server in enumerate(plan(self.cfg)["inference_servers"]):
            config = inference_config(self.cfg, self.model_path, server)
            config = dataclasses.replace(config, run_dir=str(self.log_dir))
            instance = InferenceServer(
                config, str(self.log_dir / f"vllm_{index}.log"), server.get("gpus", [])
            )
            self.servers.append(instance)
            self.urls.append(instance.start())
        self.startup_s = time.monotonic() - began
        return self.urls

    def load_adapter(self, adapter: Path, digest: str) -> str:
        """Serve `adapter` under a name derived from its content; returns the name."""
        name = f"eval-{digest[:12]}"
        if self.servers:
            for server in self.servers:
                server.load_adapter(str(adapter), name)
            self._loaded = name
            return name
        import httpx

        models = self._get(self.urls[0], "/v1/models").json().get("data", [])
        if any(m.get("id") == name for m in models):
            return name  # loaded by an earlier invocation: same content, same name
        reply = httpx.post(
            f"{self.urls[0]}/v1/load_lora_adapter",
            json={"lora_name": name, "lora_path": str(adapter.resolve())},
            timeout=120,
            trust_env=False,
        )
        if reply.status_code != 200:
            raise UsageError(
                f"server_url={self.server_url}: loading the adapter failed (HTTP {reply.status_code}: "
                f"{reply.text[:200]}); the server needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora"
            )
        self._loaded = name
        return name

    def close(self) -> None:
        if self.servers:
            for server in self.servers:
                server.shutdown()
        elif self._loaded is not None:
            import httpx

            try:
                httpx.post(f"{self.urls[0]}/v1/unload_lora_adapter", json={"lora_name": self._loaded},
                           timeout=30, trust_env=False)  # fmt: skip
            except httpx.HTTPError:
                pass

    def _get(self, url: str, path: str):
        import httpx

        try:
            reply = httpx.get(f"{url}{path}", timeout=10, trust_env=False)
        except httpx.HTTPError as exc:
            raise UsageError(
                f"server_url={url}: GET {path} failed ({type(exc).__name__}); is the server up?"
            ) from None
        if reply.status_code != 200:
            raise UsageError(f"server_url={url}: GET {path} answered HTTP {reply.status_code}")
        return reply


# ---------------------------------------------------------------------------------------- evaluation
@dataclass
class EvalRequest:
    checkpoint: str = "base"
    split: str | None = None
    runs: int = 1
    server_url: str | None = None
    out: str | None = None
    max_tasks: int | None = None
    max_turns: int | None = None
    appworld_experiment: str | None = None
    official: bool = True
    overrides: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    cfg: DictConfig
    target: Target
    split: str
    out: Path
    model_path: str
    task_ids: list[str]
    difficulties: dict[str, int] | None
    max_turns: int
    manifest: dict[str, Any]
    experiments: dict[int, str] | None  # AppWorld: run -> experiment name


def prepare(request: EvalRequest) -> Prepared:
    """Everything that can fail fast (checkpoint, config, split, out/ consistency) before any server starts."""
    from loop_agents.orchestration.environments import make_task_source

    if request.runs < 1:
        raise UsageError(f"runs={request.runs} must be >= 1")
    if request.max_tasks is not None and request.max_tasks < 1:
        raise UsageError(f"max_tasks={request.max_tasks} must be >= 1")
    target = resolve_checkpoint(request.checkpoint)
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
    if cfg.env.name == "appworld":
        base = request.appworld_experiment or _experiment_base(target, split, out)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", base):
            raise UsageError(f"appworld_experiment={base!r}: use letters, digits, '_', '-', '.' only")
        manifest["appworld"] = {"root": str(source.config.root_path), "experiment_base": base}
    previous = out / MANIFEST
    if previous.is_file():
        old = json.loads(previous.read_text())
        for key in MANIFEST_KEYS:
            if old.get(key) != manifest.get(key):
                raise UsageError(
                    f"out={out} holds an evaluation with {key}={old.get(key)!r}, not {manifest.get(key)!r}; "
                    "pass another out= (or delete that directory)"
                )
        old_root = old.get("appworld", {}).get("root")
        if old_root and "appworld" in manifest and old_root != manifest["appworld"]["root"]:
            raise UsageError(
                f"out={out} holds AppWorld episodes of root {old_root}, not {manifest['appworld']['root']}"
            )
        if "appworld" in old and request.appworld_experiment is None:
            manifest["appworld"] = old["appworld"]  # keep the experiment names of the first invocation
    if "appworld" in manifest:
        base = manifest["appworld"]["experiment_base"]
        experiments = {r: f"{base}_run{r}" for r in range(request.runs)}
        manifest["appworld"]["experiments"] = [experiments[r] for r in range(request.runs)]
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
    from loop_agents.orchestration.collector import collect_groups
    from loop_agents.orchestration.components import episode_config
    from loop_agents.orchestration.environments import make_agent
    from loop_agents.orchestration.rollout_worker import RolloutWorker
    from loop_agents.rollout.runner import run_episode

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
                traj = await run_episode(
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
    from loop_agents.eval.behaviour import behaviour_metrics
    from loop_agents.eval.episode_metrics import evaluation_metrics
    from loop_agents.eval.goal_completion import goal_completion_by_difficulty, task_results_from_trajectories
    from loop_agents.eval.tables import summarize_runs
    from loop_agents.orchestration.components import rollout_metrics
    from loop_agents.orchestration.environments import scenario_function

    wanted = set(prep.task_ids)
    per_run = {r: [saved[r][t] for t in prep.task_ids if t in saved.get(r, {})] for r in range(runs)}
    trajectories = [t for r in range(runs) for t in per_run[r]]
    complete = [r for r in range(runs) if len(per_run[r]) == len(wanted)]
    scenario_of = scenario_function(prep.cfg)
    result: dict[str, Any] = {
        "complete_runs": complete,
        "missing": {r: sorted(wanted - set(saved.get(r, {}))) for r in range(runs) if r not in complete},
        "metrics": {},
        "goal_completion": None,
    }
    if not trajectories:
        return result
    metrics = rollout_metrics(trajectories, prefix="eval")
    metrics.update(evaluation_metrics(trajectories, scenario_of, prep.difficulties))
    metrics.update(behaviour_metrics(trajectories))
    result["metrics"] = metrics
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


def official_scores(prep: Prepared, complete_runs: list[int], played_runs: set[int]) -> dict[str, Any] | None:
    """AppWorld's own evaluator over each complete run's experiment outputs (cached per run in out/)."""
    from loop_agents.envs.appworld.official_eval import run_official_evaluation
    from loop_agents.eval.goal_completion import goal_completion_by_difficulty, task_results_from_official
    from loop_agents.eval.tables import summarize_runs
    from loop_agents.orchestration.environments import make_task_source

    if prep.experiments is None:
        return None
    source = make_task_source(prep.cfg)
    if len(prep.task_ids) != len(source.task_ids(prep.split)):
        print(
            f"[{PROG}] official AppWorld scores skipped: max_tasks covers part of {prep.split!r} only",
            flush=True,
        )
        return None
    config = source.config
    per_run = []
    for run in complete_runs:
        cache = prep.out / "official" / f"run_{run}.json"
        if cache.is_file() and run not in played_runs:
            per_run.append(json.loads(cache.read_text()))
            continue
        began = time.monotonic()
        result = run_official_evaluation(prep.experiments[run], prep.split, config)
        record = {
            "run": run,
            "experiment": result.experiment_name,
            "appworld_aggregate": result.appworld_aggregate,
            "per_task": result.per_task,
            "seconds": time.monotonic() - began,
        }
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(record, indent=2))
        per_run.append(record)
    if not per_run:
        return None
    summary = summarize_runs(
        [goal_completion_by_difficulty(task_results_from_official(r["per_task"])) for r in per_run]
    )
    return {"goal_completion": summary, "runs": per_run}


def link_appworld_outputs(prep: Prepared) -> None:
    """`out/appworld/<experiment>` -> the engine's experiment outputs (kept where AppWorld wrote them)."""
    if prep.experiments is None:
        return
    outputs = Path(prep.manifest["appworld"]["root"]) / "experiments" / "outputs"
    links = prep.out / "appworld"
    links.mkdir(parents=True, exist_ok=True)
    for name in prep.experiments.values():
        link = links / name
        if (outputs / name).is_dir() and not link.is_symlink():
            link.symlink_to(outputs / name, target_is_directory=True)


def evaluate(request: EvalRequest, prep: Prepared | None = None) -> dict[str, Any]:
    """Run (or resume) the evaluation; returns what metrics.json holds."""
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
        endpoints = InferenceEndpoints(prep.cfg, prep.model_path, request.server_url, prep.out / "logs")
        try:
            urls = endpoints.start()
            startup_s = endpoints.startup_s
            name = None
            if prep.target.adapter is not None:
                name = endpoints.load_adapter(prep.target.adapter, prep.manifest["adapter_sha256"])
            played = asyncio.run(play(prep, urls, name, pending, store))
        finally:
            endpoints.close()
        saved = store.load()
    link_appworld_outputs(prep)
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
    return report


def format_report(report: dict[str, Any]) -> str:
    from loop_agents.eval.tables import goal_completion_table, metrics_lines

    lines = [f"== {report['checkpoint']} on {report['env']}/{report['split']}: {report['num_tasks']} tasks x "
             f"{report['runs']} runs ({len(report['complete_runs'])} complete) -> {report['out']}"]  # fmt: skip
    for run, missing in report["missing"].items():
        lines.append(
            f"run {run}: {len(missing)} tasks have no episode (lost or not played); rerun to play them"
        )
    if report["goal_completion"]:
        lines += [
            "goal completion (from the episodes' rewards):",
            goal_completion_table(report["goal_completion"]),
        ]
    if report["official"]:
        lines += [
            "AppWorld's official evaluation:",
            goal_completion_table(report["official"]["goal_completion"]),
        ]
    metrics = report["metrics"]
    if metrics:
        lines.append(metrics_lines(metrics, ("eval/success_rate", "eval/reward_mean", "eval/turns_mean",
                                             "eval/tokens_mean", "eval/finish_")))  # fmt: skip
        lines.append(metrics_lines({k.removeprefix("behaviour/"): v for k, v in metrics.items()
                                    if k.startswith("behaviour/")}, ("",)))  # fmt: skip
    timing = report["timing"]
    lines.append(
        f"played {timing['episodes_played']} episodes in {timing['play_s']:.1f} s "
        f"(server start {timing['server_startup_s']:.1f} s, env start {timing['env_startup_s']:.1f} s, "
        f"lost {timing['episodes_lost']}); "
        f"total {timing['total_s']:.1f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    try:
        values, overrides = parse_args(sys.argv[1:] if argv is None else argv, KEYS, __doc__)
        request = EvalRequest(**values, overrides=overrides)
        prep = prepare(request)
    except (UsageError, ConfigError, ValueError, FileNotFoundError) as exc:
        # bad arguments, config, checkpoint, split, env options or missing AppWorld data: one line
        exit_with(PROG, str(exc))
    try:
        evaluate(request, prep)
    except UsageError as exc:  # server_url problems
        exit_with(PROG, str(exc))


if __name__ == "__main__":
    main()
