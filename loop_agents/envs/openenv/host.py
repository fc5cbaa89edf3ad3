"""Our side of a served family: its task source, its tools and its episode sessions, answering OpenEnv's server.

`serve` (server.py) composes `env=<family>` as a run does and answers the requests OpenEnv's server (mcp_app.py,
in `.venv-openenv`) sends over the bridge (bridge.py). What the host gives out, by request:

    describe          the family's name, its tools (name, description, JSON schema) and its splits with their sizes
    task_ids(split)   the split's task ids, in order (nothing else about a task)
    reset             a session's new episode: the observation and the reset's task facts (what the agent reads)
    call              one tool call: its arguments checked against the tool's schema (a mismatch is a tool error
                      message, counted, and no step), then the text action it stands for, stepped
    act               one text action, stepped (the text protocol of clients that send `{"text": ...}`); an action
                      the game raises on is an observation saying so, the episode going on (`action_error`)
    score             the episode's evaluation: the family's reward, success and scalar details (never per-test
                      results); refused in production mode, which has no reward
    close             the session's environment closed

Ground truth, tests and solutions stay in the family's own environments (AppWorld's in its sandboxed host); no
request returns them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from loop_agents.rollout.environment import EnvironmentFailure
from loop_agents.tools.dispatch import find_tool
from loop_agents.tools.errors import ToolCallError
from loop_agents.tools.parsers import ToolCall
from loop_agents.tools.spec import ToolSpec
from loop_agents.tools.validate import check_arguments

MODES = ("simulation", "production")
# split names tried on a task source that cannot list its splits (the configured train/eval splits come first)
COMMON_SPLITS = ("train", "dev", "validation", "test", "test_normal", "test_challenge")


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data (anything else becomes its str)."""
    return json.loads(json.dumps(value, default=str))


def scalar_details(details: dict[str, Any]) -> dict[str, Any]:
    """The evaluation details a client may see: numbers, booleans and short strings (no per-test results)."""
    kept = {}
    for key, value in details.items():
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 200):
            kept[key] = value
    return kept


def split_kind(name: str) -> str:
    """OpenEnv's split type of a split name: train, test or validation."""
    return "train" if name.startswith("train") else "test" if name.startswith("test") else "validation"


class HostRefusal(ValueError):
    """A request the host does not serve (unknown split or tool, no episode, production mode's score)."""


@dataclass
class ServedFamily:
    """One family as the host holds it: its task source (started by `serve`), tools and configured splits."""

    name: str
    source: Any
    tools: list[ToolSpec]
    train_split: str
    eval_split: str
    _ids: dict[str, list[str]] = field(default_factory=dict)

    def task_ids(self, split: str) -> list[str]:
        if split not in self._ids:
            try:
                self._ids[split] = [str(task) for task in self.source.task_ids(split)]
            except Exception as err:  # a family says why a split does not exist in its own words
                raise HostRefusal(f"no split {split!r} in {self.name}: {err}") from None
        return self._ids[split]

    def splits(self) -> list[str]:
        """Every split the family has: the task source's own list when it keeps one, else the configured and
        common names that have tasks."""
        listing = getattr(self.source, "splits", None)
        names = list(listing()) if callable(listing) else []
        for name in (self.train_split, self.eval_split, *COMMON_SPLITS):
            if name not in names:
                try:
                    if self.task_ids(name):
                        names.append(name)
                except HostRefusal:
                    pass
        return names


@dataclass
class Session:
    env: Any = None
    task_id: str | None = None
    done: bool = False
    tool_errors: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class FamilyHost:
    """Answers OpenEnv's server for one served family (see the module docstring)."""

    def __init__(self, served: ServedFamily, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} must be one of {', '.join(MODES)}")
        self.served, self.mode = served, mode
        self.sessions: dict[str, Session] = {}

    async def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "describe":
            return self.describe()
        if op == "task_ids":
            return self.served.task_ids(str(args["split"]))
        if op not in ("reset", "call", "act", "score", "close"):
            raise HostRefusal(f"unknown request {op!r}")
        session_id = str(args["session"])
        if op == "close":
            return await self.close(session_id)
        session = self.sessions.setdefault(session_id, Session())
        async with session.lock:
            if op == "reset":
                return await self.reset(session, str(args["task_id"]))
            if session.env is None:
                raise HostRefusal("no episode in this session: reset it first")
            if op == "score":
                return await self.score(session)
            if session.done:
                return {"text": "The episode is over.", "done": True, "tool_error": "episode_over",
                        "tool_errors": session.tool_errors}  # fmt: skip
            if op == "call":
                return await self.call(session, str(args["tool"]), args.get("arguments"))
            return await self.step(session, str(args["text"]))

    def describe(self) -> dict[str, Any]:
        served = self.served
        return {
            "family": served.name,
            "mode": self.mode,
            "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in served.tools],
            "splits": [{"name": s, "type": split_kind(s), "num_tasks": len(served.task_ids(s))} for s in served.splits()],
            "train_split": served.train_split,
            "eval_split": served.eval_split,
        }  # fmt: skip

    async def reset(self, session: Session, task_id: str) -> dict[str, Any]:
        await self._close_env(session)
        session.env = await self.served.source.make_env()
        result = await session.env.reset(task_id)
        session.task_id, session.done, session.tool_errors = task_id, False, 0
        return {"text": result.observation, "info": jsonable(result.info), "task_id": task_id}

    async def call(self, session: Session, tool_name: str, arguments: Any) -> dict[str, Any]:
        """One tool call: checked against its schema (a mismatch is a counted tool error, nothing stepped)."""
        try:
            if not isinstance(arguments, dict):
                raise HostRefusal(f"the arguments of {tool_name} must be a JSON object")
            tool = find_tool(ToolCall(name=tool_name, arguments=arguments), self.served.tools)
            check_arguments(tool.name, arguments, tool.parameters)
            action = tool.to_action(arguments)
        except (ToolCallError, HostRefusal) as err:
            session.tool_errors += 1
            kind = err.kind.value if isinstance(err, ToolCallError) else "wrong_type"
            text = err.feedback() if isinstance(err, ToolCallError) else f"Error (wrong_type): {err}"
            return {"text": text, "done": False, "tool_error": kind, "tool_errors": session.tool_errors}
        return await self.step(session, action)

    async def step(self, session: Session, action: str) -> dict[str, Any]:
        try:
            result = await session.env.step(action)
        except EnvironmentFailure:
            raise
        except Exception as err:  # noqa: BLE001 - the action is the policy's input: what it breaks is its own
            return action_error(session, action, err)
        session.done = bool(result.done)
        return {"text": result.observation, "done": session.done, "tool_errors": session.tool_errors}

    async def score(self, session: Session) -> dict[str, Any]:
        if self.mode != "simulation":
            raise HostRefusal("production mode has no reward: episodes are not scored")
        evaluation = await session.env.evaluate()
        session.done = True
        details = evaluation.details or {}
        return {
            "score": float(evaluation.reward),
            "success": bool(evaluation.success),
            "details": jsonable(scalar_details({**details, "tool_errors": session.tool_errors})),
        }

    async def close(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            async with session.lock:
                await self._close_env(session)

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)

    @staticmethod
    async def _close_env(session: Session) -> None:
        env, session.env = session.env, None
        if env is not None:
            await env.close()


def action_error(session: Session, action: str, err: Exception) -> dict[str, Any]:
    """The reply to an action the game raised on: an observation the agent sees, the episode going on (an error
    reply would reach the client as a server failure, retried and then dropped, so a policy could make its own
    failing episodes disappear by writing actions the game chokes on). Only `EnvironmentFailure`, which a family
    raises for its own trusted side, stays an error. The score is the family's, of the game as it is."""
    text = (f"Error: the game could not carry out {action[:200]!r} "
            f"({type(err).__name__}: {' '.join(str(err).split())[:300]}).")  # fmt: skip
    return {"text": text, "done": False, "tool_errors": session.tool_errors, "action_error": True}


def is_environment_failure(err: BaseException) -> bool:
    """Whether an error of a request is the environment's own failure (else a refusal of the request)."""
    return isinstance(err, EnvironmentFailure) or not isinstance(err, HostRefusal | KeyError | ValueError)
