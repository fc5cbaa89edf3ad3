"""Our AgentGym-protocol env server (FastAPI), hosting one game kind: babyai, textcraft, sciworld, gemhunt.

    python -m loop_agents.envs.agentgym.server --env babyai --port 36001 [--host 127.0.0.1]

Endpoints (AgentGym's, reference-agentgym-rl.md §4.1; JSON bodies keyed by `id` as in its BabyAI,
TextCraft and SciWorld servers):
    POST /create                       -> {"id": int}
    POST /reset  {"id", "data_idx"}    -> {"observation", "reward", "score", "done", "success"}
    POST /step   {"id", "action"}      -> {"observation", "reward", "score", "done", "success"}
    GET  /observation?id=              -> the current observation (a JSON string)
    GET  /available_actions?id=        -> list of action strings (README-advertised; AgentGym lacks it)
    POST /close  {"id"}                -> {"closed": true}
Ours in addition: GET /health, GET /info (env name, system prompt, item count), GET /splits.
Errors are JSON {"error": "..."} as in AgentGym, but with an HTTP error status (400 bad request, 404
unknown id, 409 finished episode) so that no client mistakes them for an observation.
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel

from loop_agents.envs.agentgym.games import ENV_NAMES, game_factory


class IdBody(BaseModel):
    id: int


class ResetBody(IdBody):
    data_idx: int = 0


class StepBody(IdBody):
    action: str


class _Instance:
    def __init__(self, game: Any) -> None:
        self.game = game
        self.lock = threading.Lock()
        self.observation = ""
        self.done = False
        self.reset_done = False


def build_app(env_name: str):
    """The FastAPI app serving `env_name` (one game instance per /create)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    make_game = game_factory(env_name)
    app = FastAPI(title=f"AgentGym-protocol server: {env_name}")
    instances: dict[int, _Instance] = {}
    registry_lock = threading.Lock()
    counter = {"next": 0}
    probe: dict[str, Any] = {}

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

    def probe_game() -> Any:
        if "game" not in probe:
            probe["game"] = make_game()
        return probe["game"]

    @app.get("/")
    def hello() -> str:
        return f"This is environment {env_name} (loop_agents AgentGym-protocol server)."

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "env": env_name, "instances": len(instances)}

    @app.get("/info")
    def info() -> dict[str, Any]:
        game = probe_game()
        return {"env": env_name, "system_prompt": game.system_prompt,
                "splits": {k: len(v) for k, v in game.splits().items()}}  # fmt: skip

    @app.get("/splits")
    def splits() -> dict[str, list[int]]:
        with registry_lock:
            return probe_game().splits()

    @app.post("/create")
    def create() -> dict[str, int]:
        game = make_game()
        with registry_lock:
            env_id = counter["next"]
            counter["next"] += 1
            instances[env_id] = _Instance(game)
        return {"id": env_id}

    def payload(inst: _Instance, step) -> dict[str, Any]:
        inst.observation, inst.done = step.observation, step.done
        return asdict(step)

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
            return payload(inst, step)

    @app.post("/step")
    def step(body: StepBody) -> dict[str, Any]:
        inst = instance(body.id)
        with inst.lock:
            if not inst.reset_done:
                raise HTTPError(409, f"{env_name}: env {body.id} has not been reset; POST /reset first")
            if inst.done:
                raise HTTPError(409, f"{env_name}: the episode of env {body.id} is finished; reset it")
            return payload(inst, inst.game.step(body.action))

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
        with inst.lock:
            inst.game.close()
        return {"closed": True}

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="AgentGym-protocol env server")
    parser.add_argument("--env", required=True, choices=ENV_NAMES)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    import uvicorn

    uvicorn.run(build_app(args.env), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
