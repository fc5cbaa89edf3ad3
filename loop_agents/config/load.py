"""Compose the Hydra config from `conf/` and turn any mistake into one line that names the key."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from loop_agents.config.schema import register_schema
from loop_agents.config.validate import ConfigError, validate
from loop_agents.envs.registry import declared, family

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose `conf/<config_name>.yaml` with Hydra overrides, then validate; raises ConfigError."""
    register_schema()
    register_plugin_env_groups(overrides or [])
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=[_env_option(o) for o in overrides or []])
    except Exception as exc:  # Hydra/OmegaConf raise many types; all become one readable line
        raise ConfigError(explain(exc)) from exc
    try:
        OmegaConf.resolve(cfg)
        _check_missing(cfg)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(explain(exc)) from exc
    validate(cfg)
    return cfg


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
    return "++" + override if override.startswith("env.options.") else override


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
    try:
        return compose(overrides, config_name)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
