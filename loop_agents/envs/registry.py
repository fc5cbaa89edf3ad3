"""Which environment families exist: the built-in ones and those third-party packages declare.

A family is found by its `env.name` in one place. Built-in families are registered the way a plugin is, by a
`module:object` string imported on first use (so this module imports none of them: each family's heavy imports,
AppWorld's or a game's, happen only when that family is selected). Third-party packages declare entry points in
the group `loop_agents.environments` (name = `env.name`, value = `module:object`).
A family that fails to import or lacks a required part is one ConfigError line naming the package and what is
missing.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from loop_agents.envs.family import EnvironmentFamily, missing_parts
from loop_agents.errors import ConfigError

ENTRY_POINT_GROUP = "loop_agents.environments"
BUILT_IN: dict[str, str] = {
    "bundled": "loop_agents.envs.bundled.family:FAMILY",
    "appworld": "loop_agents.envs.appworld.family:FAMILY",
    "babyai": "loop_agents.envs.agentgym.family:BABYAI",
    "textcraft": "loop_agents.envs.agentgym.family:TEXTCRAFT",
    "sciworld": "loop_agents.envs.agentgym.family:SCIWORLD",
    "agentgym_http": "loop_agents.envs.agentgym.family:AGENTGYM_HTTP",
    "openenv": "loop_agents.envs.openenv.family:FAMILY",
}


@functools.cache
def declared() -> dict[str, tuple[str, str]]:
    """env name -> (`module:object`, the package that declares it): built-ins first, then entry points."""
    found = {name: (target, "loop_agents") for name, target in BUILT_IN.items()}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in found:
            raise ConfigError(
                f"entry point {ENTRY_POINT_GROUP}:{point.name} of {_package(point)} names an environment that "
                f"{found[point.name][1]} already provides; rename it"
            )
        found[point.name] = (point.value, _package(point))
    return found


def family_names() -> tuple[str, ...]:
    return tuple(declared())


@functools.cache
def family(name: str) -> EnvironmentFamily:
    """The family registered as `name`; ConfigError (one line) when there is none or it is incomplete."""
    known = declared()
    if name not in known:
        raise ConfigError(f"env.name={name!r} is not an environment; choose one of: {', '.join(known)}")
    target, package = known[name]
    module_name, _, attribute = target.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # an entry point's import may fail in any way; one line names it
        raise ConfigError(
            f"environment {name!r} of package {package}: {target} failed to import: {type(exc).__name__}: {exc}"
        ) from None
    missing = missing_parts(found)
    if missing:
        raise ConfigError(
            f"environment {name!r} of package {package}: {target} lacks {', '.join(missing)} "
            "(see docs/environments/add-an-environment.md)"
        )
    if found.name != name:
        raise ConfigError(f"environment {name!r} of package {package}: {target} calls itself {found.name!r}")
    return found


def _package(point) -> str:
    dist = getattr(point, "dist", None)
    return dist.name if dist is not None else point.value.partition(":")[0]


def reports_goal_completion(name: str | None) -> bool:
    """Whether runs of `name` report TGC and SGC as their headline (False for a name no family answers)."""
    try:
        return bool(name) and family(str(name)).goal_completion
    except ConfigError:
        return False
