"""From `env.*` to a task source (task ids + environment sessions), an agent, and demonstrations.

One mapping for every environment family, used by the rollout worker, the evaluator and the
standalone evaluation script:
    bundled                        in-process gem hunt (loop_agents/envs/bundled)
    appworld                       the real AppWorld engine, a pool of loopback servers
    babyai | textcraft | sciworld  our AgentGym-protocol server for that game, started on 127.0.0.1
    agentgym_http                  any AgentGym env server already running, by `env.options.url`
`env.options` holds the family's own typed settings (BundledEnvConfig, AppWorldConfig, AgentGymEnvConfig);
an unknown option fails with the family's name and the allowed keys.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from loop_agents.orchestration.demo_play_progress import played_demos_progress
from loop_agents.progress_lines import Heartbeat, ticked
from loop_agents.rollout.agent import Agent
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.trajectory import Trajectory

AGENTGYM_GAMES = ("babyai", "textcraft", "sciworld")
ENV_FAMILIES = ("bundled", "appworld", *AGENTGYM_GAMES, "agentgym_http")


def _options(cfg: DictConfig) -> dict[str, Any]:
    from loop_agents.config.env_options import raw_options

    return raw_options(cfg.env)


def bundled_config(cfg: DictConfig):
    from loop_agents.config.env_options import env_settings

    return env_settings(cfg)


def make_task_source(cfg: DictConfig) -> Any:
    """The TaskSource of `env.name`. AppWorld's must be `await start_task_source(...)`ed before use.

    The settings are typed and checked by `config/env_options.py` (the same check start-up runs)."""
    from loop_agents.config.env_options import env_settings

    name = cfg.env.name
    if name == "bundled":
        from loop_agents.envs.bundled.env import BundledTaskSource

        return BundledTaskSource(env_settings(cfg))
    if name == "appworld":
        from loop_agents.envs.appworld.task_source import AppWorldTaskSource

        config = env_settings(cfg)
        config.check_installed()
        return AppWorldTaskSource(config)
    if name in AGENTGYM_GAMES or name == "agentgym_http":
        from loop_agents.envs.agentgym.configured_source import ConfiguredAgentGymTaskSource

        return ConfiguredAgentGymTaskSource(env_settings(cfg))
    raise ValueError(f"env.name={name!r} is not an environment; choose one of {list(ENV_FAMILIES)}")


def prepare_environment(cfg: DictConfig) -> None:
    """Driver-side, once per run: AppWorld's self-made data is built if the default root has none.

    A user's own `env.options.root` / $APPWORLD_ROOT (e.g. the official data) is never written to.
    """
    if cfg.env.name != "appworld":
        return
    import os
    import subprocess
    import sys

    from loop_agents.envs.appworld.config import DEFAULT_ROOT, REPO_ROOT, AppWorldConfig

    config = AppWorldConfig(**{k: v for k, v in _options(cfg).items() if k in ("root", "python")})
    if (config.root_path / "data" / "tasks").is_dir():
        return
    if config.root or os.environ.get("APPWORLD_ROOT") or config.root_path != DEFAULT_ROOT.resolve():
        check_environment(cfg)  # the user's root: report, do not write
    print(
        f"[driver] building the offline AppWorld data into {config.root_path} (about a minute, once)",
        flush=True,
    )
    builder = REPO_ROOT / "scripts" / "build_appworld_data.py"
    with Heartbeat("driver", f"building the AppWorld data into {config.root_path}"):
        subprocess.run([sys.executable, str(builder), "--root", str(config.root_path)], check=True)


def check_environment(cfg: DictConfig) -> None:
    """Start-up check of what the environment needs on disk; raises ConfigError (one line, naming the key).

    AppWorld: its venv, and the data under a root the user chose (`env.options.root` or $APPWORLD_ROOT). The
    default root may be empty: `prepare_environment` builds the offline data there.
    """
    if cfg.env.name != "appworld":
        return
    import os

    from loop_agents.config.validate import ConfigError
    from loop_agents.envs.appworld.config import DEFAULT_ROOT, AppWorldConfig

    config = AppWorldConfig(**{k: v for k, v in _options(cfg).items() if k in ("root", "python")})
    if not config.python_path.exists():
        raise ConfigError(
            f"env.options.python: AppWorld venv python {config.python_path} not found; run "
            "scripts/install_appworld.sh (or set env.options.python / $APPWORLD_PYTHON)"
        )
    chosen = config.root or os.environ.get("APPWORLD_ROOT") or config.root_path != DEFAULT_ROOT.resolve()
    if chosen and not (config.root_path / "data" / "tasks").is_dir():
        source = "env.options.root" if config.root else "$APPWORLD_ROOT"
        raise ConfigError(
            f"{source}: no AppWorld data under {config.root_path / 'data' / 'tasks'}; point it at a root that "
            f"holds data/ (the official data, or `python scripts/build_appworld_data.py --root {config.root_path}`)"
        )


async def start_task_source(source: Any) -> None:
    """Start the task source's servers if it has any (AppWorld's pool); a no-op otherwise."""
    start = getattr(source, "start", None)
    if start is not None:
        await start()


async def close_task_source(source: Any) -> None:
    closer = getattr(source, "close", None)
    if closer is not None:
        result = closer()
        if hasattr(result, "__await__"):
            await result


def make_agent(cfg: DictConfig) -> Agent:
    """AppWorld gets the ReAct code agent; every text environment the generic text-action agent."""
    if cfg.env.name == "appworld":
        from loop_agents.rollout.appworld_agent import AppWorldAgent

        return AppWorldAgent(prompt=cfg.env.prompt)
    from loop_agents.rollout.text_agent import TextActionAgent

    return TextActionAgent()


def scenario_function(cfg: DictConfig):
    """task id -> scenario id for SGC: AppWorld's `<scenario>_<n>`; elsewhere each task is its own."""
    if cfg.env.name == "appworld":
        from loop_agents.eval.goal_completion import appworld_scenario_of

        return appworld_scenario_of
    return lambda task_id: task_id


def demonstrations(cfg: DictConfig, chat: ChatFormat) -> list[Trajectory]:
    """Warm-start demonstrations as token-exact trajectories (assistant turns trainable).

    bundled: the gem hunt's noisy scripted solver. appworld: scripted solutions of the self-made train
    scenarios played through the real engine, with deliberate noise (`envs/appworld/demos`). Other
    environments have no demonstrator (`learner.sft_epochs` must stay 0).
    """
    from loop_agents.orchestration.warm_start import demonstration_trajectory

    if cfg.env.name == "appworld":
        drawn = _appworld_demos(cfg, chat)
        return [
            demonstration_trajectory(chat, messages, task_id)
            for task_id, messages in ticked(drawn, "warm start", len(drawn), "demonstrations tokenized")
        ]
    if cfg.env.name != "bundled":
        raise ValueError(
            "learner.sft_epochs > 0 needs demonstrations, which only env=bundled and env=appworld generate "
            f"(env={cfg.env.name!r})"
        )
    from loop_agents.envs.bundled.demonstrations import generate_demonstrations

    options = bundled_config(cfg)
    demos = generate_demonstrations(
        options.demo_count,
        options.demo_noise,
        seed=options.demo_seed,
        split=cfg.env.train_split,
        spare_moves=options.spare_moves,
    )
    demos = ticked(demos, "warm start", len(demos), "demonstrations tokenized")
    return [demonstration_trajectory(chat, messages, task_id) for task_id, messages in demos]


def _appworld_demos(cfg: DictConfig, chat: ChatFormat) -> list[tuple[str, list[dict[str, str]]]]:
    """AppWorld's drawn demonstrations (task_id, messages), with one line on what was kept."""
    from loop_agents.config.env_options import env_settings
    from loop_agents.envs.appworld.demos.warm_start import appworld_demonstrations
    from loop_agents.rollout.observation import truncate_observation

    limit = int(cfg.env.observation_max_tokens)
    settings = env_settings(cfg)
    with played_demos_progress(settings.root_path):
        demo_set = appworld_demonstrations(
            settings, make_agent(cfg), cfg.env.train_split,
            lambda text: truncate_observation(text, chat.tokenizer, limit)[0],
        )  # fmt: skip
    print(
        f"[warm start] AppWorld: {len(demo_set.demonstrations)} demonstrations {dict(demo_set.kinds)} from "
        f"{demo_set.played} played episodes; dropped (clean that failed, noisy that passed): "
        f"{dict(demo_set.dropped)}; train tasks without a passing script: {len(demo_set.tasks_without_clean)}",
        flush=True,
    )
    return demo_set.demonstrations


def demonstration_weights(
    cfg: DictConfig, chat: ChatFormat, demos: list[Trajectory]
) -> list[list[float]] | None:
    """Per-token loss weights of the warm start's demonstrations, or None (every token alike).

    bundled with `env.options.demo_code_weight` != 1: the code symbols of each demonstration's final
    `answer <code>` count that many times. Copying the gem's code from the last observation is the skill
    whose absence stalls a warm start (README "The demo"); weighing it 4x, the orders that had stalled at
    chance after 3 epochs copied the code at 0.55-0.60 after one (issue 18).
    appworld with `env.options.demo_literal_weight` != 1: the tokens spelling the task's own values in the
    cells (names, tags, dates, amounts, copied from the instruction) count that many times
    (`literal_weights`).
    """
    if cfg.env.name == "appworld":
        return _appworld_literal_weights(cfg, chat, demos)
    if cfg.env.name != "bundled" or bundled_config(cfg).demo_code_weight == 1.0:
        return None
    from loop_agents.orchestration.warm_start_quality import code_token_positions

    weight = float(bundled_config(cfg).demo_code_weight)
    weights = []
    for traj in demos:
        row = [1.0] * len(traj.token_ids)
        last_action = next(m["content"] for m in reversed(traj.messages) if m["role"] == "assistant")
        if last_action.startswith("answer "):  # a noisy demonstration may run out of moves first
            for position in code_token_positions(traj, chat):
                row[position] = weight
        weights.append(row)
    return weights


def _appworld_literal_weights(
    cfg: DictConfig, chat: ChatFormat, demos: list[Trajectory]
) -> list[list[float]] | None:
    from loop_agents.config.env_options import env_settings

    settings = env_settings(cfg)
    if settings.demo_literal_weight == 1.0:
        return None
    from functools import partial

    from loop_agents.envs.appworld.demos.episodes import task_literals
    from loop_agents.orchestration.literal_weights import literal_weights

    literals_of = partial(task_literals, settings.root_path)
    return literal_weights(demos, chat, literals_of, float(settings.demo_literal_weight))


class GemHuntWarmChecks:
    """The gem hunt warm start's held-out check: `learner.sft_check_episodes` noise-free demonstrations on train
    tasks the warm start does not train on (dev stays held out), scored teacher-forced once per model state and
    shared by the readiness rule and the stall probe (both read the same epoch's factors)."""

    def __init__(self, cfg: DictConfig, chat: ChatFormat, training_task_ids: set[str]) -> None:
        from loop_agents.envs.bundled.demonstrations import heldout_clean_demonstrations

        options = bundled_config(cfg)
        self.chat = chat
        self.episodes = heldout_clean_demonstrations(
            int(cfg.learner.sft_check_episodes), training_task_ids, cfg.env.train_split, options.spare_moves
        )
        self._last: tuple[tuple[int, int], dict[str, float]] | None = None

    def factors(self, model) -> dict[str, float]:
        """`episode_probabilities` of the check episodes; computed again only after the weights changed (an
        optimizer step bumps the parameters' in-place version counter)."""
        from loop_agents.orchestration.warm_start_quality import episode_probabilities

        state = (id(model), next(model.parameters())._version)
        if self._last is None or self._last[0] != state:
            self._last = (state, episode_probabilities(model, self.chat, self.episodes))
        return self._last[1]

    def readiness(self, model) -> float:
        return self.factors(model)["p_optimal_dev_episode"]


def warm_start_checks(cfg: DictConfig, chat: ChatFormat, training_task_ids: set[str]):
    """(readiness, stall probe) of the warm start; (None, None) outside the bundled environment.

    readiness: `model -> P(optimal held-out episode)`, the teacher-forced probability of the scripted
    solver's exact episode on the held-out checks. RL takes off on the demo once it is around 0.05 (README
    "The demo").
    stall probe: `model -> reason or None`: the warm start has stalled when it copies the gem's code no
    better than `learner.sft_stall_copy` (teacher-forced P(code symbol), averaged over both symbols and the
    checks; chance is 0.1). None (the readiness rule decides) unless that key is set."""
    if cfg.env.name != "bundled":
        return None, None
    checks = GemHuntWarmChecks(cfg, chat, training_task_ids)
    threshold = cfg.learner.get("sft_stall_copy")
    if threshold is None:
        return checks.readiness, None

    def probe(model) -> str | None:
        factors = checks.factors(model)
        copy = (factors["p_code_1"] + factors["p_code_2"]) / 2
        return f"code copied at P {copy:.2f} < {threshold:g}" if copy < threshold else None

    return checks.readiness, probe
