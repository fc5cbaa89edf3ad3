"""`env.options` of `env=openenv`: where the OpenEnv server is, how actions and observations map, how splits map.

Server: `url` of a running one, or one started here on 127.0.0.1 (and restarted when it dies): `serve_family` (one
of our families through `python -m loop_agents.envs.openenv serve`, with `serve_overrides`) or `app` (any OpenEnv
app as `module:attribute`, run by uvicorn).

Splits (`tasks`):
    server  the server lists them: OpenEnv's Task API (`/<env>/splits`, `POST /<env>/tasks`; a task's id is its
            spec's `id`, reset(split=<split>, index=<its place>)), else `GET <url>/tasks/<split>` (reset(task_id=))
    seeds   no listing: split `s` is the seeds `splits[s] = [first, count]`, task id `seed-<n>`; reset(seed=n)
    auto    the Task API when the server has one, else seeds (said once, at start-up)
Every reset also carries `reset_kwargs`.

Tools: with `agent=tools` and a server whose `/mcp` lists tools (`tools/list`), the agent calls those tools (their
names, descriptions and JSON schemas), each call an OpenEnv simulation-mode step (`call_tool`, rewarded); a server
without them falls back to the text action below as the one tool `act(action)` (said once, at start-up).
Actions: the agent's action text `a` is sent as `{action_field: action_template.format(action=a), **action_extra}`.
Observations: the field `observation_field` (empty: the one string field when there is exactly one, else the whole
observation as JSON) is the text the agent reads; a dict field `info_field` of the reset observation gives task facts
(`system_prompt`, else `system_prompt` below). Score: the sum (`score: sum`) or the last (`last`) of the step rewards;
success = the boolean observation field `success_field` at the end when there is one, else score >= success_threshold.
Warm start: `demonstrations_from` names one of our families (typed by `demonstration_options`) whose demonstrations
and warm-start checks stand for the served environment's (same task ids, same texts: e.g. the gem hunt served by
`serve_family=bundled`). An episode cut by the turn budget is ended with `{finish_field: true}` when the server's action schema has that field
(ours does: the family scores the episode as it stands), else scored from the rewards so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TASK_MODES = ("auto", "server", "seeds")
SCORES = ("sum", "last")


@dataclass
class OpenEnvSettings:
    url: str | None = (
        None  # a running OpenEnv server (http://127.0.0.1:PORT); else one of the two below is started
    )
    serve_family: str | None = None  # start `python -m loop_agents.envs.openenv serve <this>` on 127.0.0.1
    serve_overrides: list[str] = field(default_factory=list)  # its Hydra overrides
    app: str | None = None  # or start any OpenEnv app `module:attribute` with uvicorn on 127.0.0.1
    # the Python that runs `app` (its uvicorn): empty for this one, `openenv` for .venv-openenv's (OpenEnv 0.10), or
    # a path to an interpreter
    app_python: str = ""
    app_dir: str = (
        ""  # a folder put first on the app's import path (uvicorn --app-dir); empty: the working folder
    )
    max_sessions: int = 64  # concurrent sessions of a server started here
    tasks: str = "auto"  # how splits map: auto | server | seeds (see the module docstring)
    # tasks=seeds: split name -> [first seed, count]; its task ids are `seed-<n>`
    splits: dict[str, list[int]] = field(
        default_factory=lambda: {"train": [0, 1000], "dev": [1_000_000, 100], "test": [2_000_000, 100]}
    )
    reset_kwargs: dict[str, Any] = field(default_factory=dict)  # extra keyword arguments of every reset
    action_field: str = "text"  # the action's field that carries the agent's text
    action_template: str = "{action}"  # how the agent's text is written into action_field ({action} required)
    action_extra: dict[str, Any] = field(default_factory=dict)  # fixed fields sent with every action
    # the observation's field the agent reads; empty: its one string field, else the whole observation as JSON
    observation_field: str = ""
    info_field: str = "info"  # the reset observation's dict field of task facts (its `system_prompt`, if any)
    system_prompt: str | None = None  # the agent's system prompt when the reset gives none
    score: str = "sum"  # the episode's score from its step rewards: sum | last
    success_field: str = "success"  # a boolean observation field read at the end as success, when present
    success_threshold: float = 1.0  # else success = score >= this
    finish_field: str = "finish"  # an episode cut by the turn budget is ended with {this: true} when offered
    # warm start: the demonstrations (and warm-start checks) of one of our families whose tasks the server serves
    # under the same ids and texts (e.g. bundled, with serve_family=bundled), typed by that family's settings
    demonstrations_from: str | None = None
    demonstration_options: dict[str, Any] = field(default_factory=dict)  # that family's env.options
    connect_timeout_s: float = 30.0  # the WebSocket handshake (10 s timed out once at load 20 on 2 cores)
    message_timeout_s: float = 60.0  # one reset, step or /tasks reply; longer is a server failure
    start_timeout_s: float = 180.0  # a server started here: until it answers /health

    def __post_init__(self) -> None:
        sources = [key for key in ("url", "serve_family", "app") if getattr(self, key)]
        if len(sources) > 1:  # none at all is refused by the start-up check (the preset alone must compose)
            raise ValueError(
                "env.options: give exactly one of url (a running OpenEnv server), serve_family (one of ours, started "
                f"here) or app (module:attribute, started here); got {', '.join(sources) or 'none'}"
            )
        if self.url and not self.url.startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError(
                f"env.options.url={self.url!r} must start with http:// (or https://, ws://, wss://)"
            )
        if self.app and ":" not in self.app:
            raise ValueError(f"env.options.app={self.app!r} must be module:attribute (an OpenEnv app)")
        if self.tasks not in TASK_MODES:
            raise ValueError(f"env.options.tasks={self.tasks!r} must be one of {', '.join(TASK_MODES)}")
        if self.score not in SCORES:
            raise ValueError(f"env.options.score={self.score!r} must be one of {', '.join(SCORES)}")
        if "{action}" not in self.action_template:
            raise ValueError(f"env.options.action_template={self.action_template!r} must contain {{action}}")
        for split, pair in self.splits.items():
            if len(pair) != 2 or pair[1] < 1:
                raise ValueError(
                    f"env.options.splits.{split} must be [first seed, count >= 1], got {list(pair)}"
                )
        for key in ("connect_timeout_s", "message_timeout_s", "start_timeout_s"):
            if not getattr(self, key) > 0:
                raise ValueError(f"env.options.{key} must be > 0, got {getattr(self, key)}")
        if self.max_sessions < 1:
            raise ValueError(f"env.options.max_sessions must be >= 1, got {self.max_sessions}")
