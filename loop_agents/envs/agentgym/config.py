"""Settings of an AgentGym-protocol environment (`env.options` for babyai / textcraft / sciworld /
agentgym_http)."""

from __future__ import annotations

from dataclasses import dataclass, field

from loop_agents.envs.agentgym.games import ENV_NAMES


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

    def __post_init__(self) -> None:
        if self.url is None and self.env not in ENV_NAMES:
            raise ValueError(
                f"env.options.env={self.env!r} is not a game we can serve; choose one of {ENV_NAMES}"
            )
        if self.request_timeout_s <= 0 or self.startup_timeout_s <= 0:
            raise ValueError("env.options.request_timeout_s and startup_timeout_s must be > 0")
        if self.retries < 0:
            raise ValueError(f"env.options.retries must be >= 0, got {self.retries}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"env.options.url={self.url!r} must start with http:// or https://")
