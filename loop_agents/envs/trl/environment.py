"""Our environment families as TRL environments: `GRPOTrainer(environment_factory=trl_environment("bundled"))`.

TRL's contract for `environment_factory` (GRPOTrainer, TRL >= 1.8; the pin of `benchmarks/trl_compare` is 1.16):
- a class TRL calls with no arguments, once per concurrent rollout, and reuses through `reset`;
- `reset(**row)` gets the dataset row's columns and returns text appended to the prompt's last user message: here
  the episode's first observation (the task). The row's `task_id` column picks the task; without one, the tasks of
  the split are played in order (TRL's dataset is then optional);
- every other public method is a tool the model calls by name, its JSON schema read by transformers'
  `get_json_schema` from the method's signature and its Google-style `Args:` docstring. The methods are built from
  the family's tool declarations (`EnvironmentFamily.tools`, `loop_agents.tools.spec`), the same ones our own
  tool-calling agent and the gateway use, so a call becomes exactly the text action our trainer's episodes take;
- `get_reward()` scores the episode from the environment's own state (the family's evaluation: AppWorld's TGC pass
  fraction, the games' success), so TRL needs no `reward_funcs`. An episode the model did not end is scored as it
  stands, as our turn budget scores it.

The environments are the ones our trainer plays (AppWorld's code still runs in its sandbox): the family's task
source is composed from `env=<family>` plus overrides as a run composes it, started once per process on a
background event loop, and each instance holds one episode session at a time. A dict of such classes routes a TRL
run over several families by the dataset's `environment` column (`trl_environments`).
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import itertools
import threading
from collections.abc import Coroutine, Sequence
from typing import Any

from loop_agents.config.load import compose
from loop_agents.envs.selected import (
    check_environment,
    close_task_source,
    make_task_source,
    prepare_environment,
    selected_family,
    start_task_source,
)
from loop_agents.envs.settings import env_settings
from loop_agents.rollout.environment import Environment
from loop_agents.tools.spec import ToolSpec, tools_of

JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                               "object": dict}  # fmt: skip
RESERVED = frozenset({"reset", "get_reward"})
CALL_TIMEOUT_S = 600.0  # one reset, step or evaluation (an AppWorld pool's first start included)


class _BackgroundLoop:
    """One event loop on a daemon thread, shared by every TRL environment of the process (TRL calls tools from its
    own threads and loops; our sessions belong to this loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="loop-agents-trl-envs", daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout_s: float | None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)


_LOOP: _BackgroundLoop | None = None
_LOOP_LOCK = threading.Lock()


def _background() -> _BackgroundLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = _BackgroundLoop()
        return _LOOP


class FamilyEpisodes:
    """A family's task source as TRL's environments share it: composed and checked like a run's, started once."""

    def __init__(self, family: str, overrides: Sequence[str] = (), split: str | None = None) -> None:
        self.cfg = compose([f"env={family}", *overrides])
        check_environment(self.cfg)
        prepare_environment(self.cfg)
        self.name = family
        self.split = split or str(self.cfg.env.train_split)
        self.tools = tools_of(selected_family(self.cfg), env_settings(self.cfg))
        clash = RESERVED.intersection(tool.name for tool in self.tools)
        if clash:
            raise ValueError(f"env={family}: a tool named {sorted(clash)} would shadow TRL's own method")
        self._source: Any = None
        self._task_ids: list[str] = []
        self._next_task = itertools.count()
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return _background().run(coro, CALL_TIMEOUT_S)

    def source(self) -> Any:
        """The started task source (made on first use; closed when the process exits)."""
        with self._lock:
            if self._source is None:
                source = make_task_source(self.cfg)
                self.run(start_task_source(source))
                self._task_ids = list(source.task_ids(self.split))
                self._source = source
                atexit.register(lambda: self.run(close_task_source(source)))
            return self._source

    def next_task(self) -> str:
        """The split's tasks in order, cycling (for rows without a `task_id`)."""
        self.source()
        if not self._task_ids:
            raise ValueError(f"split {self.split!r} of env={self.name} has no tasks")
        return self._task_ids[next(self._next_task) % len(self._task_ids)]


class FamilyEnvironmentBase:
    """What every generated class shares: one episode session at a time, its reward from the environment."""

    _episodes: FamilyEpisodes

    def __init__(self) -> None:
        self._env: Environment | None = None
        self._done = False
        self._task_id: str | None = None

    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start an episode of `task_id` (the row's column; else the split's next task); returns its task text."""
        episodes = self._episodes
        source = episodes.source()
        self._close()
        self._task_id = str(task_id) if task_id is not None else episodes.next_task()
        self._env = episodes.run(source.make_env())
        self._done = False
        return episodes.run(self._env.reset(self._task_id)).observation

    def get_reward(self) -> float:
        """The family's score of the episode's state (partial credit in [0, 1]); 0 before any reset."""
        if self._env is None:
            return 0.0
        evaluation = self._episodes.run(self._env.evaluate())
        self._done = True
        return float(evaluation.reward)

    def _step(self, tool: ToolSpec, arguments: dict[str, Any]) -> str:
        if self._env is None:
            raise ValueError("No episode: reset the environment first.")
        if self._done:
            raise ValueError("The episode is over.")
        result = self._episodes.run(self._env.step(tool.to_action(arguments)))
        self._done = bool(result.done)
        return result.observation + ("\nThe episode is over." if result.done else "")

    def _close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            self._episodes.run(env.close())


def _tool_method(tool: ToolSpec) -> Any:
    """A method TRL exposes as `tool`: its signature, annotations and `Args:` docstring from the JSON schema."""
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = [tool.description, "", "Args:"]
    for name, schema in sorted(properties.items(), key=lambda item: item[0] not in required):
        annotation = JSON_TYPES.get(schema.get("type", "string"), str)
        default = inspect.Parameter.empty if name in required else None
        parameters.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                            annotation=annotation))  # fmt: skip
        annotations[name] = annotation if name in required else annotation | None
        lines.append(f"    {name}: {schema.get('description', name)}")
    if not properties:
        lines = lines[:1]
    lines += ["", "Returns:", "    What the environment shows after the action."]

    def call(self: FamilyEnvironmentBase, *args: Any, **kwargs: Any) -> str:
        bound = method.__signature__.bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self" and v is not None}
        return self._step(tool, arguments)

    method = call
    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = "\n".join(lines)
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)
    method.__annotations__ = {**annotations, "return": str}
    return method


def trl_environment(family: str, overrides: Sequence[str] = (), split: str | None = None) -> type:
    """A class for TRL's `environment_factory` that plays `env=<family>` episodes (composed with `overrides`, as
    `python -m loop_agents.train env=<family> <overrides>` would); rows without `task_id` play `split` in order."""
    episodes = FamilyEpisodes(family, overrides, split)
    namespace: dict[str, Any] = {tool.name: _tool_method(tool) for tool in episodes.tools}
    namespace["_episodes"] = episodes
    namespace["__doc__"] = (
        f"loop_agents' {family!r} family as a TRL environment (tools: {', '.join(namespace)})."
    )
    class_name = "".join(part.capitalize() for part in family.replace("-", "_").split("_")) + "Environment"
    return type(class_name, (FamilyEnvironmentBase,), namespace)


def trl_environments(families: dict[str, Sequence[str]] | Sequence[str]) -> dict[str, type]:
    """TRL's multi-environment `environment_factory`: {family: class}, routed by the dataset's `environment`
    column. `families` is a list of names, or {name: overrides}."""
    if not isinstance(families, dict):
        families = {name: () for name in families}
    return {name: trl_environment(name, overrides) for name, overrides in families.items()}
