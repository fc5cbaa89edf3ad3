"""What an evaluation scores: a checkpoint (or the base model) resolved from the command line, and its config."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from loop_agents.config.load import CONF_DIR, _check_missing, compose, explain
from loop_agents.config.schema import RootConfig
from loop_agents.config.validate import ConfigError, validate
from loop_agents.eval.cli_args import UsageError
from loop_agents.orchestration.components import latest_checkpoint, resolve_model
from loop_agents.orchestration.held_out import START_ADAPTER
from loop_agents.orchestration.turn_schedule import make_turn_schedule

PROG = "evaluate"  # the prefix of the evaluation's messages
GROUPS = ("llm", "gpu_allocation", "algorithm", "env")


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
    """`<run>/checkpoints/<name>` or the run's iteration-0 copy `<run>/held_out_adapters/start` -> `<run>` when
    `<run>/config.yaml` exists (the start copy is the warm start's policy: compare= it to measure RL's gain)."""
    if checkpoint.parent.name == "checkpoints":
        run = checkpoint.parent.parent
    elif checkpoint.as_posix().endswith("/" + START_ADAPTER):
        run = checkpoint.parents[1]
    else:
        return None
    return run if (run / "config.yaml").is_file() else None


def resolve_checkpoint(spec: str) -> Target:
    """Turn `checkpoint=` into a Target; a UsageError names what is missing."""
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
    if run_config is None:
        return compose(overrides)
    try:
        return _config_from_run(run_config, overrides)
    except ConfigError:
        raise
    except Exception as exc:  # OmegaConf/Hydra raise many types; all become one readable line
        raise ConfigError(explain(exc)) from exc


def _config_from_run(run_config: Path, overrides: list[str]) -> DictConfig:
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
    return make_turn_schedule(cfg.env.turn_schedule).budget(max(int(cfg.run.iterations), 1))
