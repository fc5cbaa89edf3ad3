"""The contract of an environment family: one object that owns everything family-specific.

A family is what `env=<name>` selects. The driver, the rollout workers, the evaluator, `scripts/evaluate.py`,
`parse_and_log` and the viewer ask the family (through `loop_agents.envs.registry`) and never name one.

Required (a family without them is refused at start-up, one line naming what is missing):
    name            the `env.name` value it answers
    settings_class  a dataclass typing `env.options` (unknown key, wrong type: one line naming `env.options.<key>`)
    task_source     typed settings + the run's config -> a `TaskSource` (task ids per split, one session per episode)
    agent           the run's config -> the `Agent` that turns observations into prompts and replies into actions

Optional (the defaults below are what a plain text environment scored by success wants):
    label, prompts, goal_completion, code_behaviour, env_config, settings_defaults, check, prepare, demonstrations,
    demonstration_weights, warm_start_checks, tools, scenario_of, behaviour_metrics, endpoint, manifest, official

Third-party packages add a family through the entry point group `loop_agents.environments`
(`docs/environments/add-an-environment.md`, `examples/`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

REQUIRED_PARTS = ("name", "settings_class", "task_source", "agent")
TaskMessages = tuple[str, list[dict[str, str]]]  # (task id, chat messages) of one demonstration


class EnvironmentFamily:
    """Base class of every family; subclasses set the required parts and override the optional ones they have."""

    name: str = ""
    settings_class: type | None = None
    label: str = ""  # what the viewer shows; `name` when empty
    prompts: tuple[str, ...] = ("full",)  # allowed `env.prompt` values; the first is the default
    goal_completion: bool = False  # headline numbers are TGC over tasks and SGC over scenarios (else success)
    code_behaviour: bool = False  # the agent writes code cells: behaviour rows and viewer columns for code
    # `env.*` defaults of `env=<name>` for a family without `conf/env/<name>.yaml` (a third-party one): splits,
    # turn_schedule, observation_max_tokens, reward, concurrency, options (the schema's defaults otherwise)
    env_config: dict[str, Any] = {}

    # -- required -------------------------------------------------------------------------------------------
    def task_source(self, settings: Any, cfg: Any) -> Any:
        """The `TaskSource` (rollout/environment.py); an async `start()`/`close()` on it is awaited when present."""
        raise NotImplementedError

    def agent(self, cfg: Any) -> Any:
        """The `Agent` (rollout/agent.py) that plays this family's episodes."""
        raise NotImplementedError

    # -- optional ---------------------------------------------------------------------------------------------
    def settings_defaults(self, env_cfg: Any, options: dict[str, Any]) -> dict[str, Any]:
        """`env.options` with defaults taken from other `env.*` keys filled in (raise ConfigError for a missing
        required one)."""
        return options

    def check(self, cfg: Any, settings: Any) -> None:
        """Start-up check of what the family needs on this machine (raise ConfigError, one line naming the key)."""

    def prepare(self, cfg: Any, settings: Any) -> None:
        """Driver side, once per run, before any worker starts (e.g. build data that is missing)."""

    def demonstrations(self, cfg: Any, settings: Any, chat: Any) -> list[TaskMessages] | None:
        """Warm-start demonstrations as (task id, messages), or None when the family has no demonstrator
        (`learner.sft_epochs` must then stay 0)."""
        return None

    def demonstration_weights(
        self, cfg: Any, settings: Any, chat: Any, demos: Sequence[Any]
    ) -> list[list[float]] | None:
        """Per-token loss weights of the demonstrations' trajectories, or None (every token alike)."""
        return None

    def warm_start_checks(
        self, cfg: Any, settings: Any, chat: Any, training_task_ids: set[str]
    ) -> tuple[Callable[[Any], float] | None, Callable[[Any], str | None] | None]:
        """(readiness, stall probe) of the warm start: `model -> float` and `model -> reason or None`."""
        return None, None

    def tools(self, settings: Any) -> list[Any] | None:
        """The tools (`loop_agents.tools.spec.ToolSpec`) a tool-calling agent gets; None: one generic `act` tool."""
        return None

    def scenario_of(self, task_id: str) -> str:
        """The scenario a task belongs to (SGC groups by it); each task is its own by default."""
        return task_id

    def behaviour_metrics(self, trajectories: Sequence[Any]) -> dict[str, float]:
        """Family-specific behaviour rows (`behaviour/...`) of a set of trajectories."""
        return {}

    def endpoint(self, settings: Any) -> str | None:
        """The URL of a server the family needs already running (checked reachable before start), or None."""
        return None

    def manifest(self, source: Any) -> dict[str, Any]:
        """Facts an evaluation records about its task source, under the family's name (with `official`: the
        `root` that holds `experiments/outputs/<experiment>`)."""
        return {}

    # A family whose engine scores named experiments itself (AppWorld's evaluator): an object with
    # `score(experiment, split, root, python="", trust_unsigned=False)` and `default_root(explicit)`. Evaluations
    # then name one experiment per run (the task source's `make_env(experiment_name=...)`) and report its scores.
    official: Any = None


def missing_parts(family: Any) -> list[str]:
    """The required parts `family` lacks (empty when it is complete)."""
    missing = [part for part in ("name", "settings_class") if not getattr(family, part, None)]
    for method in ("task_source", "agent"):
        implementation = getattr(type(family), method, None)
        if not callable(implementation) or implementation is getattr(EnvironmentFamily, method):
            missing.append(method)
    return missing
