"""`env.options` typed by the selected environment's own settings class, checked at start-up.

`env.options` is a free dict in the root schema because each environment family has other settings; this
module types it against the family's dataclass (BundledEnvConfig, AppWorldConfig, AgentGymEnvConfig), so a
misspelled key, a wrong type or an out-of-range value is one line naming `env.options.<key>` before anything
starts, and the rollout workers receive the same typed values.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.config.validate import ConfigError

AGENTGYM_GAMES = ("babyai", "textcraft", "sciworld")


def settings_class(env_name: str) -> type:
    """The dataclass that types `env.options` of `env.name`."""
    if env_name == "bundled":
        from loop_agents.envs.bundled.config import BundledEnvConfig

        return BundledEnvConfig
    if env_name == "appworld":
        from loop_agents.envs.appworld.config import AppWorldConfig

        return AppWorldConfig
    if env_name in AGENTGYM_GAMES or env_name == "agentgym_http":
        from loop_agents.envs.agentgym.config import AgentGymEnvConfig

        return AgentGymEnvConfig
    raise ConfigError(f"env.name={env_name!r} is not an environment")


def raw_options(env: DictConfig) -> dict[str, Any]:
    """`env.options` as a plain dict (interpolations resolved)."""
    options = env.options
    return dict(OmegaConf.to_container(options, resolve=True)) if options is not None else {}


def family_defaults(env: DictConfig, options: dict[str, Any]) -> dict[str, Any]:
    """Options the family takes from other `env.*` keys unless set: AppWorld's pool size and reward, the
    AgentGym game served."""
    options = dict(options)
    if env.name == "appworld":
        options.setdefault("pool_size", int(env.concurrency))
        options.setdefault("reward", env.reward)
    elif env.name in AGENTGYM_GAMES:
        options.setdefault("env", env.name)
    elif env.name == "agentgym_http" and options.get("url") is None:
        raise ConfigError("env.options.url: agentgym_http needs the URL of a running AgentGym env server")
    return options


def typed(config_cls: type, options: dict[str, Any], family: str) -> Any:
    """Build `config_cls` from `options`, converting types; raises ConfigError naming `env.options.<key>`."""
    allowed = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(
            f"env.options.{unknown[0]}: not a setting of env {family!r} (check the spelling); "
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


def env_settings(cfg: DictConfig) -> Any:
    """The typed settings of the selected environment (`cfg.env`), with the family's defaults filled in."""
    env = cfg.env
    return typed(settings_class(env.name), family_defaults(env, raw_options(env)), env.name)
