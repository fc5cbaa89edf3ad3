"""Settings of an AgentGym-protocol environment (`env.options` for babyai / textcraft / sciworld /
agentgym_http)."""

from __future__ import annotations

from dataclasses import dataclass, field

from loop_agents.envs.agentgym.games import ACTION_SETS, ENV_NAMES, TASK_SETS


@dataclass
class AgentGymEnvConfig:
    env: str = "babyai"  # game kind served (babyai | textcraft | sciworld | gemhunt); also the item id prefix
    url: str | None = None  # an AgentGym env server already running; None = start ours on 127.0.0.1
    request_timeout_s: float = 60.0  # per HTTP request (SciWorld resets take seconds)
    retries: int = 2  # retries of create/reset on connection errors (step is never retried)
    retry_backoff_s: float = 0.5  # first retry delay, doubled each retry
    startup_timeout_s: float = 120.0  # our server must answer /health within this
    system_prompt: str | None = None  # overrides the server's (needed for servers without /info)
    reward_scale: float = (
        1.0  # servers without a normalised `score`: partial credit = reward / this (SciWorld: 100)
    )
    splits: dict[str, list[int]] = field(
        default_factory=dict
    )  # item indices per split, for servers without /splits
    action_set: str | None = (
        None  # our servers: babyai agentgym (default: AgentGym's text actions) | primitive
    )
    task_set: str | None = (
        None  # our servers: ours (default) | agentgym (AgentGym's item selection; TextCraft)
    )
    action_format: str = "raw"  # raw: the model's reply is the action | react: AgentGym's "Action:" parsing
    score_scale: float | None = (
        None  # `score` of a solved item; None: the server's /info, else SciWorld 100, 1
    )

    def __post_init__(self) -> None:
        if self.url is None and self.env not in ENV_NAMES:
            raise ValueError(
                f"env.options.env={self.env!r} is not a game we can serve; choose one of {ENV_NAMES}"
            )
        if self.request_timeout_s <= 0 or self.startup_timeout_s <= 0:
            raise ValueError("env.options.request_timeout_s and startup_timeout_s must be > 0")
        if self.retries < 0:
            raise ValueError(f"env.options.retries must be >= 0, got {self.retries}")
        if self.action_set is not None and self.action_set not in ACTION_SETS.get(
            self.env, (self.action_set,)
        ):
            raise ValueError(
                f"env.options.action_set={self.action_set!r}: {self.env} supports {list(ACTION_SETS[self.env])}"
            )
        if self.task_set is not None and self.task_set not in TASK_SETS.get(self.env, (self.task_set,)):
            raise ValueError(
                f"env.options.task_set={self.task_set!r}: {self.env} supports {list(TASK_SETS[self.env])}"
            )
        if self.action_format not in ("raw", "react"):
            raise ValueError(f"env.options.action_format={self.action_format!r}: choose raw or react")
        if self.score_scale is not None and self.score_scale <= 0:
            raise ValueError(f"env.options.score_scale must be > 0, got {self.score_scale}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"env.options.url={self.url!r} must start with http:// or https://")
