"""Any of our environment families served as an OpenEnv environment, with OpenEnv's own server code.

`FamilyEnvironment` is an OpenEnv `Environment` (its base class) over one of our `Environment` sessions; the app is
OpenEnv's `create_app` (its WebSocket `/ws` sessions, one `FamilyEnvironment` per session, and its HTTP
`/reset`, `/step`, `/state`, `/schema`, `/health`), plus one route of ours: `GET /tasks/{split}` lists the task ids
of a split. Reset takes `task_id` (a task of the family) or `split` + `seed` (the seed-th task of the split, modulo
its size; no seed: a random one). The reward of a step is 0 until `done`, then the family's evaluation reward (so
the sum over an episode is the family's score); `success` comes with the last observation. The family's async
environment runs on the server's event loop (`reset_async`/`step_async`), so sessions are concurrent.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import uuid
from typing import Any

import uvicorn
from fastapi import HTTPException
from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from loop_agents.config.load import compose
from loop_agents.envs.openenv.wire import LoopAction, LoopObservation, LoopState
from loop_agents.envs.protocol import Evaluation
from loop_agents.envs.selected import (
    check_environment,
    close_task_source,
    make_task_source,
    prepare_environment,
    start_task_source,
)


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data (anything else becomes its str)."""
    return json.loads(json.dumps(value, default=str))


class ServedFamily:
    """One family's task source as the server holds it: task ids per split, and environment sessions."""

    def __init__(self, name: str, source: Any, train_split: str, eval_split: str) -> None:
        self.name, self.source = name, source
        self.train_split, self.eval_split = train_split, eval_split
        self._ids: dict[str, list[str]] = {}

    def task_ids(self, split: str) -> list[str]:
        if split not in self._ids:
            self._ids[split] = list(self.source.task_ids(split))
        return self._ids[split]

    def pick(self, task_id: str | None, split: str | None, seed: int | None) -> str:
        """The task a reset asks for: `task_id` itself, else the `seed`-th of `split` (train by default)."""
        if task_id:
            return str(task_id)
        ids = self.task_ids(split or self.train_split)
        if not ids:
            raise ValueError(f"split {split or self.train_split!r} of {self.name} has no tasks")
        return ids[seed % len(ids)] if seed is not None else random.choice(ids)


class FamilyEnvironment(Environment[LoopAction, LoopObservation, LoopState]):
    """One OpenEnv session: one of our environment sessions, reset to a task by id or by split and seed."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: ServedFamily) -> None:
        super().__init__()
        self.served = served
        self.env: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._state = LoopState()

    def reset(self, seed=None, episode_id=None, **kwargs) -> LoopObservation:  # noqa: D102 - async only
        raise RuntimeError("FamilyEnvironment is asynchronous: the server calls reset_async")

    def step(self, action, timeout_s=None, **kwargs) -> LoopObservation:  # noqa: D102 - async only
        raise RuntimeError("FamilyEnvironment is asynchronous: the server calls step_async")

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        split: str | None = None,
        **kwargs: Any,
    ) -> LoopObservation:
        await self._close_env()
        task = self.served.pick(task_id, split, seed)
        self.loop = asyncio.get_running_loop()
        self.env = await self.served.source.make_env()
        result = await self.env.reset(task)
        self._state = LoopState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=task)
        return LoopObservation(text=result.observation, task_id=task, info=jsonable(result.info), reward=0.0)

    async def step_async(
        self, action: LoopAction, timeout_s: float | None = None, **kwargs: Any
    ) -> LoopObservation:
        if self.env is None:
            raise RuntimeError("reset the session before stepping it")
        if self._state.done:
            raise RuntimeError(f"the episode of task {self._state.task_id} has ended; reset the session")
        self._state.step_count += 1
        if action.finish:
            return self._final("", await self.env.evaluate())
        result = await self.env.step(action.text)
        if result.done:
            return self._final(result.observation, await self.env.evaluate())
        return LoopObservation(text=result.observation, task_id=self._state.task_id, reward=0.0)

    def _final(self, text: str, evaluation: Evaluation) -> LoopObservation:
        self._state.done = True
        return LoopObservation(
            text=text,
            task_id=self._state.task_id,
            done=True,
            reward=float(evaluation.reward),
            success=bool(evaluation.success),
            details=jsonable(evaluation.details),
        )

    @property
    def state(self) -> LoopState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=f"loop_agents/{self.served.name}",
            description=f"loop_agents environment family {self.served.name!r} (text actions; reward at done)",
            version="1",
        )

    async def _close_env(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            await env.close()

    def close(self) -> None:
        """OpenEnv calls this from a worker thread when the session ends: close our session on the server's loop."""
        if self.env is None or self.loop is None or self.loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.loop.create_task(self._close_env())
        else:
            asyncio.run_coroutine_threadsafe(self._close_env(), self.loop)


def build_app(served: ServedFamily, max_sessions: int = 64) -> Any:
    """OpenEnv's app over `served` (its task source started at start-up, closed at shutdown) plus `/tasks/{split}`."""

    app = create_app(
        lambda: FamilyEnvironment(served),
        LoopAction,
        LoopObservation,
        env_name=f"loop_agents_{served.name}",
        max_concurrent_envs=max_sessions,
    )

    @app.get("/tasks/{split}")
    def tasks(split: str) -> dict[str, Any]:
        try:
            ids = served.task_ids(split)
        except Exception as err:  # a family says why a split does not exist in its own words
            raise HTTPException(status_code=404, detail=f"{type(err).__name__}: {err}") from None
        return {"family": served.name, "split": split, "task_ids": ids}

    async def start() -> None:
        await start_task_source(served.source)

    async def stop() -> None:
        await close_task_source(served.source)

    app.router.on_startup.insert(0, start)
    app.router.on_shutdown.append(stop)
    return app


def served_family(family: str, overrides: list[str]) -> ServedFamily:
    """Compose `env=<family>` with `overrides` as a run would, check it, and make its task source."""

    cfg = compose([f"env={family}", *overrides])
    check_environment(cfg)
    prepare_environment(cfg)
    return ServedFamily(family, make_task_source(cfg), str(cfg.env.train_split), str(cfg.env.eval_split))


def serve(served: ServedFamily, port: int = 0, max_sessions: int = 64) -> None:
    """Serve on 127.0.0.1:`port` (0: a free one) until stopped; prints `[openenv] serving <family> on <url>` once
    the task source has started (a launcher reads the URL from that line)."""

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = build_app(served, max_sessions)

    async def announce() -> None:
        print(
            f"[openenv] serving {served.name} on {url} (OpenEnv WebSocket sessions at {url}/ws)", flush=True
        )

    app.router.on_startup.append(announce)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=64 * 1024 * 1024))
    asyncio.run(server.serve(sockets=[sock]))
