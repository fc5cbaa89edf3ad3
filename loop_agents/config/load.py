"""Compose the Hydra config from `conf/` and turn any mistake into one line that names the key."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf, open_dict

from loop_agents.config.schema import RootConfig, register_schema
from loop_agents.config.validate import ConfigError, validate
from loop_agents.envs.registry import declared, family
from loop_agents.supervisor import SUPERVISED_ENV

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose `conf/<config_name>.yaml` with Hydra overrides, then validate; raises ConfigError."""
    register_schema()
    register_plugin_env_groups(overrides or [])
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=[_env_option(o) for o in overrides or []])
            _keep_preset_family_keys_to_their_family(cfg, overrides or [], config_name)
    except ConfigError:
        raise
    except Exception as exc:  # Hydra/OmegaConf raise many types; all become one readable line
        raise ConfigError(explain(exc)) from exc
    try:
        OmegaConf.resolve(cfg)
        _check_missing(cfg)
        _check_unknown_keys(cfg, OmegaConf.structured(RootConfig))
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(explain(exc)) from exc
    validate(cfg)
    return cfg


NOTES: list[str] = []  # what composition changed and a person should know (print_notes prints them)
# `env.*` keys whose values only one family reads
FAMILY_KEYS = ("options", "prompt", "train_split", "eval_split")


def _keep_preset_family_keys_to_their_family(cfg: DictConfig, overrides: list[str], config_name: str) -> None:
    """`experiment=<preset> env=<another family>`: the preset's family-specific `env.*` keys (its env.options, prompt,
    splits) were written for the family it selects; they are replaced by the chosen family's own (with the command
    line's `env.*` overrides), and one line says so. Generic keys (concurrency, turn budget, ...) still apply."""
    chosen = dict(o.lstrip("+").split("=", 1) for o in overrides if "=" in o and not o.startswith("~"))
    preset_name, env_name = chosen.get("experiment"), chosen.get("env")
    if not preset_name or not env_name:
        return
    preset_env, preset_keys = _preset_family(preset_name)
    if preset_env is None or preset_env == env_name or not preset_keys:
        return
    own = hydra_compose(config_name=config_name, overrides=[_env_option(o) for o in overrides
                                                            if not o.lstrip("+").startswith("experiment=")])  # fmt: skip
    with open_dict(cfg.env):
        for key in preset_keys:
            cfg.env[key] = own.env[key]
    NOTES.append(f"[config] experiment={preset_name} sets env.{', env.'.join(preset_keys)} for env={preset_env}; "
                 f"env={env_name} keeps its own")  # fmt: skip


def _preset_family(name: str) -> tuple[str | None, list[str]]:
    """The family `conf/experiment/<name>.yaml` selects (`override /env`) and the FAMILY_KEYS it sets, following the
    presets it builds on (`defaults: [appworld_demo, _self_]`)."""
    path = CONF_DIR / "experiment" / f"{name}.yaml"
    if not path.is_file():
        return None, []
    preset = OmegaConf.load(path)
    env, keys = None, [k for k in FAMILY_KEYS if k in (preset.get("env") or {})]
    for entry in preset.get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            base_env, base_keys = _preset_family(entry)
            env, keys = env or base_env, keys + [k for k in base_keys if k not in keys]
        elif isinstance(entry, DictConfig) and "override /env" in entry:
            env = str(entry["override /env"])
    return env, keys


def _check_unknown_keys(cfg: DictConfig, schema: DictConfig, prefix: str = "") -> None:
    """A key the schema does not have: `+key=value` adds one that Hydra does not check (a `+` typo would otherwise
    sit unused beside the real key). Free dicts (`env.options`, typed by the family later) take any key."""
    for key in cfg:
        full = f"{prefix}{key}"
        if schema._get_node(key) is None:  # (`in` says False for a field whose default is MISSING)
            name = OmegaConf.get_type(schema).__name__
            raise ConfigError(f"unknown key '{full}' (not a field of {name}; check the spelling)")
        child, schema_child = cfg._get_node(key), schema._get_node(key)
        if isinstance(child, DictConfig) and isinstance(schema_child, DictConfig):
            if OmegaConf.get_type(schema_child) not in (dict, None):
                _check_unknown_keys(child, schema_child, full + ".")


def register_plugin_env_groups(overrides: list[str]) -> None:
    """`env=<name>` of a family a package declares (no `conf/env/<name>.yaml` here): its `env_config` becomes the
    `env` group option `<name>` in Hydra's ConfigStore, so the override composes like a built-in one."""
    for override in overrides:
        group, _, name = override.partition("=")
        if group.lstrip("+~") != "env" or not name or (CONF_DIR / "env" / f"{name}.yaml").is_file():
            continue
        if name not in declared():
            continue  # Hydra names the unknown preset and lists the available ones
        selected = family(name)
        ConfigStore.instance().store(group="env", name=name, node={**selected.env_config, "name": name})


def _env_option(override: str) -> str:
    """`env.options.<key>=v` sets or adds the key (`++`): presets list only some options, and the typed check
    (envs/settings.py) names a key that is not a setting of the environment."""
    return "++" + override.lstrip("+") if override.lstrip("+").startswith("env.options.") else override


def _check_missing(cfg: DictConfig, prefix: str = "") -> None:
    for key in cfg:
        full = f"{prefix}{key}"
        if OmegaConf.is_missing(cfg, key):
            raise ConfigError(f"{full} is required but not set (pick a preset or pass {full}=...)")
        value = cfg[key]
        if isinstance(value, DictConfig):
            _check_missing(value, full + ".")


def explain(exc: BaseException) -> str:
    """Condense a Hydra/OmegaConf exception into one line naming the key and, if known, the options."""
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    full_text = text + ("\n" + str(cause) if cause else "")
    missing_group = re.search(r"Could not find '([^']+)'", full_text)
    if missing_group:
        options = re.findall(r"^\t(\S+)$", full_text, flags=re.M)
        group = missing_group.group(1)
        hint = f"; available: {', '.join(options)}" if options else ""
        return f"unknown preset '{group}'{hint}"
    key_not_in = re.search(r"Key '([^']+)' not in '([^']+)'", full_text)
    full_key = re.search(r"full_key: (\S+)", full_text)
    if key_not_in:
        key = full_key.group(1) if full_key else key_not_in.group(1)
        return f"unknown key '{key}' (not a field of {key_not_in.group(2)}; check the spelling)"
    conversion = re.search(r"Value '([^']*)' of type '([^']+)' could not be converted to (\w+)", full_text)
    if conversion:
        key = full_key.group(1) if full_key else "?"
        return f"{key}={conversion.group(1)!r} has the wrong type; expected {conversion.group(3)}"
    first = next((line for line in full_text.splitlines() if line.strip()), type(exc).__name__)
    return f"{first}" + (f" (key: {full_key.group(1)})" if full_key else "")


def compose_or_exit(overrides: list[str], config_name: str = "config") -> DictConfig:
    """CLI helper: compose and validate; on error print `config error: ...` and exit with status 2."""
    NOTES.clear()
    try:
        return compose(overrides, config_name)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def print_notes() -> None:
    """The last composition's notes, on stdout (not in a supervised child: its parent printed them)."""
    if os.environ.get(SUPERVISED_ENV) != "1":
        for note in NOTES:
            print(note, flush=True)
