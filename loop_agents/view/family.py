"""Which environment family a run is, and so which labels and columns its pages show.

AppWorld is scored by goal completion (TGC over tasks, SGC over scenarios) and its agent writes code cells, so its
pages show TGC/SGC and the code-behaviour columns (multi-cell turns, failed cells, doc lookups, ...). The gem hunt
and the AgentGym games are scored by success: their pages show success, reward, turns and generated tokens, and
nothing that only means something for code. Decided once, from `env.name` in the run's config.yaml and what its family declares
(`goal_completion`, `code_behaviour`); a run without one (an old or hand-made directory) shows every column.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from loop_agents.envs.registry import family
from loop_agents.errors import ConfigError

GENERAL_COLUMNS = (("turns", "behaviour/turns_mean"), ("gen tokens", "behaviour/generated_tokens_mean"))
CODE_COLUMNS = (
    ("multi-cell turns", "behaviour/multi_code_cell_turn_rate"),
    ("no-code turns", "behaviour/no_code_turn_rate"),
    ("failed cells", "behaviour/failed_executions_per_traj"),
    ("doc lookups", "behaviour/api_doc_lookups_per_traj"),
    ("assum", "behaviour/assum_per_traj"),
    ("dummy", "behaviour/dummy_per_traj"),
    ("give-up", "behaviour/give_up_rate"),
)


@dataclass(frozen=True)
class Family:
    """What the viewer shows for one environment family."""

    name: str  # shown on the run's page
    goal_completion: bool  # TGC/SGC columns and charts
    behaviour_columns: tuple[tuple[str, str], ...]  # (label, summary key)
    charted: tuple[str, ...]  # metrics.jsonl keys charted on the run's page


_COMMON_CHARTS = (
    "rollout/reward_mean", "rollout/success_rate", "eval/reward_mean", "eval/success_rate",
    "learn/loss", "learn/clip_fraction", "learn/kl_old_k3", "learn/grad_norm", "adv/kept_fraction",
    "rollout/turns_mean", "rollout/tokens_mean",
)  # fmt: skip
_GOAL_CHARTS = ("eval/tgc", "eval/sgc")

UNKNOWN = Family(
    "environment not recorded", True, GENERAL_COLUMNS + CODE_COLUMNS,
    _COMMON_CHARTS[:4] + _GOAL_CHARTS + _COMMON_CHARTS[4:],
)  # fmt: skip


def family_view(name: str) -> Family:
    """What the viewer shows for the registered family `name` (its label, headline and behaviour columns)."""
    env = family(name)
    charted = (
        _COMMON_CHARTS[:4] + _GOAL_CHARTS + _COMMON_CHARTS[4:] if env.goal_completion else _COMMON_CHARTS
    )
    columns = GENERAL_COLUMNS + CODE_COLUMNS if env.code_behaviour else GENERAL_COLUMNS
    return Family(env.label or env.name, env.goal_completion, columns, charted)


def env_name(config_text: str | None) -> str | None:
    """`env.name` of a run's config.yaml (None when there is no config or it names none)."""
    if not config_text:
        return None
    try:
        config = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return None
    env = config.get("env") if isinstance(config, dict) else None
    name = env.get("name") if isinstance(env, dict) else None
    return str(name) if name else None


def run_family(config_text: str | None) -> Family:
    """The family of the run whose config.yaml reads `config_text` (every column when it names none or one no
    installed package provides)."""
    name = env_name(config_text)
    try:
        return family_view(name) if name else UNKNOWN
    except ConfigError:
        return UNKNOWN
