"""`env.options` typed by the selected family's own settings class, checked at start-up.

`env.options` is a free dict in the root schema because each environment family has other settings; this
module types it against the family's dataclass (`EnvironmentFamily.settings_class`), so a misspelled key, a wrong
type or an out-of-range value is one line naming `env.options.<key>` before anything starts, and the rollout
workers receive the same typed values.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.registry import family
from loop_agents.errors import ConfigError


def raw_options(env: DictConfig) -> dict[str, Any]:
    """`env.options` as a plain dict (interpolations resolved)."""
    options = env.options
    return dict(OmegaConf.to_container(options, resolve=True)) if options is not None else {}


def typed(config_cls: type, options: dict[str, Any], family_name: str) -> Any:
    """Build `config_cls` from `options`, converting types; raises ConfigError naming `env.options.<key>`."""
    allowed = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(
            f"env.options.{unknown[0]}: not a setting of env {family_name!r} (check the spelling); "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    try:
        node = OmegaConf.merge(OmegaConf.structured(config_cls), options)
        return OmegaConf.to_object(node)
    except ValueError as exc:  # OmegaConf's ValidationError is a ValueError; so are the __post_init__ checks
        raise ConfigError(_one_line(exc)) from None


def _one_line(exc: Exception) -> str:
    text = str(exc)
    conversion = re.search(r"Value '([^']*)' of type '[^']+' could not be converted to (\w+)", text)
    key = re.search(r"full_key: (\S+)", text)
    if conversion and key:
        return f"env.options.{key.group(1)}={conversion.group(1)!r} has the wrong type; expected {conversion.group(2)}"
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return first if first.startswith("env.options") else f"env.options: {first}"


# typed settings by the `env` section they were built from: built once per process, then the same object
_BUILT: dict[str, Any] = {}


def env_settings(cfg: DictConfig) -> Any:
    """The typed settings of the selected environment (`cfg.env`), with the family's defaults filled in; one
    object per `env` section and process (the warm start, the task source and the agent share it: read it, never
    change it)."""
    env = cfg.env
    key = json.dumps(OmegaConf.to_container(env, resolve=True), sort_keys=True, default=str)
    if key not in _BUILT:
        selected = family(str(env.name))
        _BUILT[key] = typed(
            selected.settings_class, selected.settings_defaults(env, raw_options(env)), str(env.name)
        )
    return _BUILT[key]


def check_env_config(cfg: DictConfig) -> None:
    """Start-up check of `env.*` that only the family can judge: `env.prompt` and `env.options`."""
    selected = family(str(cfg.env.name))
    if cfg.env.prompt not in selected.prompts:
        raise ConfigError(
            f"env.prompt={cfg.env.prompt!r} is not a prompt of env={cfg.env.name!r}; choose one of: "
            f"{', '.join(selected.prompts)}"
        )
    env_settings(cfg)
