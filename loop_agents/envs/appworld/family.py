"""AppWorld as an environment family: the real engine in sandboxed per-episode processes, the ReAct code agent,
scripted warm-start demonstrations played through the engine, TGC/SGC scoring and AppWorld's own evaluator."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from typing import Any

from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.envs.appworld.config import DEFAULT_ROOT, REPO_ROOT, AppWorldConfig
from loop_agents.envs.appworld.demo_play_progress import played_demos_progress
from loop_agents.envs.appworld.demos.episodes import task_literals
from loop_agents.envs.appworld.demos.warm_start import appworld_demonstrations
from loop_agents.envs.appworld.literal_weights import literal_weights
from loop_agents.envs.appworld.official import AppWorldOfficialScores
from loop_agents.envs.appworld.splits import scenario_of
from loop_agents.envs.appworld.task_source import AppWorldTaskSource
from loop_agents.envs.family import EnvironmentFamily
from loop_agents.errors import ConfigError
from loop_agents.eval.behaviour import behaviour_metrics
from loop_agents.progress_lines import Heartbeat
from loop_agents.rollout.observation import truncate_observation
from loop_agents.tools.spec import ToolSpec

EXECUTE_TOOL = ToolSpec(
    name="execute",
    description="Run Python code in the task's environment (the `apis` object calls the apps); returns its output.",
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    },
    to_action=lambda arguments: arguments["code"],
    from_action=lambda action: {"code": action},
)

CELL_MARGIN_S = 30.0  # the host's kill, reply and round trip after a cell's own time-out and grace


class AppWorldFamily(EnvironmentFamily):
    name = "appworld"
    label = "AppWorld"
    settings_class = AppWorldConfig
    prompts = ("full", "compact")
    goal_completion = True
    code_behaviour = True
    official = AppWorldOfficialScores()

    def settings_defaults(self, env_cfg: Any, options: dict[str, Any]) -> dict[str, Any]:
        """The server pool is as large as the episodes in flight; the reward kind is `env.reward`'s."""
        return {"pool_size": int(env_cfg.concurrency), "reward": env_cfg.reward, **options}

    def task_source(self, settings: AppWorldConfig, cfg: Any) -> AppWorldTaskSource:
        settings.check_installed()
        return AppWorldTaskSource(settings)

    def agent(self, cfg: Any) -> AppWorldAgent:
        return AppWorldAgent(prompt=cfg.env.prompt)

    def check(self, cfg: Any, settings: AppWorldConfig) -> None:
        """Its venv, and the data under a root the user chose (`env.options.root` or $APPWORLD_ROOT). The default
        root may be empty: `prepare` builds the offline data there."""
        if not settings.python_path.exists():
            raise ConfigError(
                f"env.options.python: AppWorld venv python {settings.python_path} not found; run "
                "scripts/install_appworld.sh (or set env.options.python / $APPWORLD_PYTHON)"
            )
        step_timeout = cfg.rollout.get("env_timeout_s") if "rollout" in cfg else None
        cell_budget = settings.execute_timeout_s + settings.grace_s + CELL_MARGIN_S
        if step_timeout is not None and float(step_timeout) < cell_budget:
            raise ConfigError(
                f"rollout.env_timeout_s={step_timeout} is shorter than an AppWorld cell may run "
                f"(env.options.execute_timeout_s {settings.execute_timeout_s} + grace_s {settings.grace_s} + "
                f"{CELL_MARGIN_S:.0f} s for the host): the policy's slow cell would be lost as an environment timeout "
                f"instead of scored; raise rollout.env_timeout_s to at least {cell_budget:.0f} or lower "
                "env.options.execute_timeout_s"
            )
        if _user_root(settings) and not (settings.root_path / "data" / "tasks").is_dir():
            source = "env.options.root" if settings.root else "$APPWORLD_ROOT"
            raise ConfigError(
                f"{source}: no AppWorld data under {settings.root_path / 'data' / 'tasks'}; point it at a root that "
                f"holds data/ (the official data, or `python scripts/build_appworld_data.py --root "
                f"{settings.root_path}`)"
            )

    def prepare(self, cfg: Any, settings: AppWorldConfig) -> None:
        """The self-made data is built if the default root has none; a user's own root is never written to."""
        if (settings.root_path / "data" / "tasks").is_dir():
            return
        if _user_root(settings):
            self.check(cfg, settings)  # the user's root: report, do not write
        print(
            f"[driver] building the offline AppWorld data into {settings.root_path} (about a minute, once)",
            flush=True,
        )
        builder = REPO_ROOT / "scripts" / "build_appworld_data.py"
        with Heartbeat("driver", f"building the AppWorld data into {settings.root_path}"):
            subprocess.run([sys.executable, str(builder), "--root", str(settings.root_path)], check=True)

    def tools(self, settings: AppWorldConfig):
        """`execute(code)`: one code cell, run in the episode's sandbox as the text agent's ```python block is."""
        return [EXECUTE_TOOL]

    def demonstrations(self, cfg: Any, settings: AppWorldConfig, chat: Any):
        """Scripted solutions of the self-made train scenarios played through the real engine, with deliberate
        noise (`envs/appworld/demos`); one line says what was kept."""
        limit = int(cfg.env.observation_max_tokens)
        with played_demos_progress(settings.root_path):
            demo_set = appworld_demonstrations(
                settings, self.agent(cfg), cfg.env.train_split,
                lambda text: truncate_observation(text, chat.tokenizer, limit)[0],
            )  # fmt: skip
        print(
            f"[warm start] AppWorld: {len(demo_set.demonstrations)} demonstrations {dict(demo_set.kinds)} from "
            f"{demo_set.played} played episodes; dropped (clean that failed, noisy that passed): "
            f"{dict(demo_set.dropped)}; train tasks without a passing script: {len(demo_set.tasks_without_clean)}",
            flush=True,
        )
        return demo_set.demonstrations

    def demonstration_weights(self, cfg: Any, settings: AppWorldConfig, chat: Any, demos):
        """With `env.options.demo_literal_weight` != 1, the tokens spelling the task's own values in the cells
        (names, tags, dates, amounts, copied from the instruction) count that many times."""
        if settings.demo_literal_weight == 1.0:
            return None
        literals_of = partial(task_literals, settings.root_path)
        return literal_weights(demos, chat, literals_of, float(settings.demo_literal_weight))

    def scenario_of(self, task_id: str) -> str:
        return scenario_of(task_id)

    def behaviour_metrics(self, trajectories) -> dict[str, float]:
        return behaviour_metrics(trajectories)

    def manifest(self, source: AppWorldTaskSource) -> dict[str, Any]:
        return {"root": str(source.config.root_path)}


def _user_root(settings: AppWorldConfig) -> bool:
    return bool(
        settings.root or os.environ.get("APPWORLD_ROOT") or settings.root_path != DEFAULT_ROOT.resolve()
    )


FAMILY = AppWorldFamily()
