"""What `agent.program` names: a Python callable (`module:function`) or a command line, and its start-up check.

A value shaped `package.module:function` is a callable: it runs in a process of its own
(`python -m loop_agents.gateway.run_callable module:function`), called as
`function(task=..., base_url=..., api_key=..., tools=[...])`. Anything else is a command line (split as a shell
would, not run by one), started with OPENAI_BASE_URL, OPENAI_API_KEY, LOOP_AGENTS_TOOLS_URL and LOOP_AGENTS_TASK_ID
in its environment. Either way the program is a process the episode can stop (time limit, budgets) without
touching the rollout worker.
"""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loop_agents.errors import ConfigError

_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class AgentProgram:
    """The program of a run: its kind ("callable" or "command"), what was configured, and the argv it runs as."""

    kind: str
    value: str
    argv: tuple[str, ...]


def parse_program(value: str | None) -> AgentProgram | None:
    """The program `agent.program` names, None when it is empty (the in-process agent plays)."""
    value = (value or "").strip()
    if not value:
        return None
    if _CALLABLE.match(value):
        return AgentProgram(
            "callable", value, (sys.executable, "-m", "loop_agents.gateway.run_callable", value)
        )
    try:
        argv = shlex.split(value)
    except ValueError as err:
        raise ConfigError(f"agent.program={value!r} is not a command line: {err}") from None
    return AgentProgram("command", value, tuple(argv))


def load_callable(spec: str) -> Callable[..., Any]:
    """The function `module:function` names (ValueError naming what failed)."""
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as err:  # an import error, or whatever the module raises while importing
        raise ValueError(f"module {module_name!r} does not import ({type(err).__name__}: {err})") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{spec} is not callable (a {type(target).__name__})")
    return target


def check_program(value: str | None) -> None:
    """Start-up check: a callable imports and is callable, a command's executable exists (ConfigError)."""
    program = parse_program(value)
    if program is None:
        return
    if program.kind == "callable":
        try:
            load_callable(program.value)
        except ValueError as err:
            raise ConfigError(f"agent.program={program.value!r}: {err}") from None
    elif not program.argv or shutil.which(program.argv[0]) is None:
        raise ConfigError(
            f"agent.program={program.value!r}: neither module:function nor a command whose executable "
            f"{(program.argv or ('',))[0]!r} is on PATH"
        )
