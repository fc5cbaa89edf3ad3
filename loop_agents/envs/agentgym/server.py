"""Our AgentGym-protocol env server (FastAPI), hosting one game kind: babyai, textcraft, sciworld, gemhunt.

    python -m loop_agents.envs.agentgym.server --env babyai --port 36001 [--host 127.0.0.1]

Routes, bodies and reply fields are AgentGym's (docs/agentgym_conformance.md has the table):
    POST /create  [{"commands", "goal"} TextCraft; ours: "action_set", "task_set"]
                  -> {"id"}; TextCraft also {"observation", "reward", "done"} of a first episode
    POST /reset  {"id", "data_idx"}  -> {"id", "observation", "reward", "score", "done", ...}
                  (SciWorld also "task_name", "var_num", "task_description"; BabyAI/SciWorld "deleted")
    POST /step   {"id", "action"}    -> {"observation", "reward", "score", "done"}
    GET  /observation?id=            -> the current observation (a JSON string)
    POST /close  {"id"}              -> {"closed": true}
Ours in addition: `success` in every reply, GET /available_actions?id=, /health, /info, /splits[?task_set=].
Errors are JSON {"error": "..."} as AgentGym's, but with an HTTP error status (400 bad request or
option, 404 unknown id, 409 finished episode, 422 malformed body) so that no client mistakes them for
an observation. Bad start-up input (unknown env, busy port, missing package or Java): one line, exit 2.

Closed instances are kept (up to `max_idle`) and handed to the next /create with the same options, so a
SciWorld episode does not pay a JVM start each time; `--warm N` starts N instances before serving.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from loop_agents.envs.agentgym.games import ENV_NAMES, game_factory, missing_requirement


class IdBody(BaseModel):
    id: int


class ResetBody(IdBody):
    data_idx: int = 0


class StepBody(IdBody):
    action: str


class CreateBody(BaseModel):
    """AgentGym's TextCraft create body (other AgentGym clients send none) plus our per-instance options."""

    commands: str | None = None
    goal: str | None = None
    minecraft_dir: str | None = None  # sent by AgentGym's TextCraft client; our recipes are the package's
    action_set: str | None = None
    task_set: str | None = None


OPTION_KEYS = ("action_set", "task_set")


class _Instance:
    def __init__(self, game: Any, options: dict[str, str]) -> None:
        self.game = game
        self.options_key = tuple(sorted(options.items()))
        self.lock = threading.Lock()
        self.observation = ""
        self.done = False
        self.reset_done = False
        self.last_payload: dict[str, Any] | None = (
            None  # the last reset/step reply (an action error keeps its score)
        )


def build_app(env_name: str, warm: int = 0, max_idle: int = 64):
    """The FastAPI app serving `env_name` (one game instance per /create; closed ones are reused)."""
    make_game = game_factory(env_name)
    app = FastAPI(title=f"AgentGym-protocol server: {env_name}")
    instances: dict[int, _Instance] = {}
    registry_lock = threading.Lock()
    counter = {"next": 0}
    probes: dict[str, Any] = {}
    idle: dict[tuple, list[Any]] = {}  # options -> closed game instances ready for reuse
    idle_lock = threading.Lock()

    class HTTPError(Exception):
        def __init__(self, status: int, message: str) -> None:
            super().__init__(message)
            self.status = status

    @app.exception_handler(HTTPError)
    async def _http_error(_: Request, err: HTTPError) -> JSONResponse:
        return JSONResponse({"error": str(err)}, status_code=err.status)

    def instance(env_id: int) -> _Instance:
        found = instances.get(env_id)
        if found is None:
            raise HTTPError(404, f"{env_name}: env id {env_id} does not exist (closed or never created)")
        return found

    def construct(options: dict[str, str]) -> Any:
        try:
            return make_game(**options)
        except ValueError as err:  # an action or task set this game lacks: the message lists the supported
            raise HTTPError(400, f"{env_name}: {err}") from err
        except TypeError as err:
            raise HTTPError(400, f"{env_name} takes no options {sorted(options)}") from err

    def new_game(options: dict[str, str]) -> Any:
        """A closed instance with the same options if one is idle, else a new one."""
        with idle_lock:
            reusable = idle.get(tuple(sorted(options.items())))
            if reusable:
                return reusable.pop()
        return construct(options)

    def probe_game(task_set: str | None = None) -> Any:
        key = task_set or ""
        if key not in probes:
            probes[key] = construct({"task_set": task_set} if task_set else {})
        return probes[key]

    @app.get("/")
    def hello() -> str:
        return f"This is environment {env_name} (loop_agents AgentGym-protocol server)."

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "env": env_name, "instances": len(instances),
                "idle": sum(len(games) for games in idle.values())}  # fmt: skip

    @app.get("/info")
    def info() -> dict[str, Any]:
        game = probe_game()
        return {"env": env_name, "system_prompt": game.system_prompt,
                "score_scale": getattr(game, "score_scale", 1.0),
                "splits": {k: len(v) for k, v in game.splits().items()}}  # fmt: skip

    @app.get("/splits")
    def splits(task_set: str | None = None) -> dict[str, list[int]]:
        with registry_lock:
            return probe_game(task_set).splits()

    @app.post("/create")
    def create(body: CreateBody | None = None) -> dict[str, Any]:
        body = body or CreateBody()
        options = {key: getattr(body, key) for key in OPTION_KEYS if getattr(body, key) is not None}
        game = new_game(options)
        with registry_lock:
            env_id = counter["next"]
            counter["next"] += 1
            inst = _Instance(game, options)
            instances[env_id] = inst
        on_create = getattr(game, "on_create", None)
        first = on_create(env_id, body.model_dump()) if on_create else None
        if first is None:
            return {"id": env_id}
        with inst.lock:
            inst.observation, inst.done, inst.reset_done = first.observation, first.done, True
        return {"id": env_id, "observation": first.observation, "reward": first.reward, "done": first.done}

    def reply(inst: _Instance, step) -> dict[str, Any]:
        inst.observation, inst.done = step.observation, step.done
        inst.last_payload = step.payload()
        return inst.last_payload

    @app.post("/reset")
    def reset(body: ResetBody) -> dict[str, Any]:
        inst = instance(body.id)
        if body.data_idx < 0:
            raise HTTPError(400, f"{env_name}: data_idx must be >= 0, got {body.data_idx}")
        with inst.lock:
            try:
                step = inst.game.reset(body.data_idx)
            except ValueError as err:
                raise HTTPError(400, f"{env_name}: {err}") from err
            inst.reset_done = True
            return {"id": body.id, **reply(inst, step)}  # AgentGym's TextCraft sends the id back

    @app.post("/step")
    def step(body: StepBody) -> dict[str, Any]:
        inst = instance(body.id)
        with inst.lock:
            if not inst.reset_done:
                raise HTTPError(409, f"{env_name}: env {body.id} has not been reset; POST /reset first")
            if inst.done:
                raise HTTPError(409, f"{env_name}: the episode of env {body.id} is finished; reset it")
            try:
                result = inst.game.step(body.action)
            except Exception as err:  # noqa: BLE001 - the action is the policy's input: what it breaks is its own
                return action_error(inst, body.action, err)
            return reply(inst, result)

    def action_error(inst: _Instance, action: str, err: Exception) -> dict[str, Any]:
        """The reply to an action the game raised on: an observation the agent sees, the episode going on with
        the score it had (a client that got an error status would retry and then drop the episode, so a policy
        could make its own failing episodes disappear by writing actions the game chokes on)."""
        last = {"score": 0.0, "success": False, **(inst.last_payload or {})}
        return {**last, "observation": f"Error: the game could not carry out {action[:200]!r} "
                f"({type(err).__name__}: {str(err)[:300]}).", "reward": 0.0, "done": False,
                "action_error": True}  # fmt: skip

    @app.get("/observation")
    def observation(id: int) -> str:  # noqa: A002  (AgentGym's query parameter name)
        return instance(id).observation

    @app.get("/available_actions")
    def available_actions(id: int) -> list[str]:  # noqa: A002
        inst = instance(id)
        with inst.lock:
            return inst.game.available_actions()

    @app.post("/close")
    def close(body: IdBody) -> dict[str, bool]:
        with registry_lock:
            inst = instances.pop(body.id, None)
        if inst is None:
            raise HTTPError(404, f"{env_name}: env id {body.id} does not exist (closed or never created)")
        with inst.lock, idle_lock:
            keep = sum(len(games) for games in idle.values()) < max_idle
            if keep:  # the next /create resets it to its own item
                idle.setdefault(inst.options_key, []).append(inst.game)
        if not keep:
            inst.game.close()
        return {"closed": True}

    def prestart() -> None:
        games = [construct({}) for _ in range(warm)]
        with idle_lock:
            idle.setdefault((), []).extend(games)

    if warm > 0:
        threading.Thread(target=prestart, name="warm-instances", daemon=True).start()
    return app


def port_problem(host: str, port: int) -> str | None:
    """Why the server cannot listen on host:port (in use, not allowed), else None."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: TIME_WAIT is no conflict
        try:
            sock.bind((host, port))
        except OSError as err:
            return (
                f"cannot listen on {host}:{port}: {err.strerror or err} (is another server using the port?)"
            )
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="AgentGym-protocol env server")
    parser.add_argument("--env", required=True, help=f"one of {', '.join(ENV_NAMES)}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--warm", type=int, default=0, help="game instances to start before the first /create"
    )
    args = parser.parse_args(argv)
    problem = missing_requirement(args.env) or port_problem(args.host, args.port)
    if problem:
        print(f"agentgym server: {problem}", file=sys.stderr)
        raise SystemExit(2)

    uvicorn.run(build_app(args.env, warm=args.warm), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
