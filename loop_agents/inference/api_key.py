"""The vLLM servers' API key: every request we send carries it; without it a server answers 401 on every route.

A run makes one random key (`ensure_run_key`, before Ray starts) and keeps it in the environment variable
`LOOP_AGENTS_VLLM_API_KEY`, so every actor of a local Ray head (inference actors, rollout workers, the
evaluator) inherits it; a cluster that is joined gets it through the job's `runtime_env`. A server gets it as
`VLLM_API_KEY` in its environment, never on its command line (which any process can read in `ps`). The variable's
name holds KEY, so `redaction` keeps its value out of configs, logs and the environments of env servers.
To use your own vLLM server, set `LOOP_AGENTS_VLLM_API_KEY` to its key.

vLLM's own check (`--api-key`) guards only `/v1/*`; with VLLM_SERVER_DEV_MODE (which we need for `/sleep`,
`/reset_prefix_cache`) `/collective_rpc` and friends would stay open. The vLLM patch `patches/api_key_guard.py`
makes the middleware check every route except `/health` and `/ping`; `server_key_environment` arms it.
"""

from __future__ import annotations

import os
import secrets

from loop_agents.patches.api_key_guard import ENV as GUARD_ENV

ENV_NAME = "LOOP_AGENTS_VLLM_API_KEY"


def ensure_run_key() -> str:
    """This process's key: the one in the environment, else a new random one put there (inherited by children)."""
    key = os.environ.get(ENV_NAME)
    if not key:
        key = os.environ[ENV_NAME] = secrets.token_urlsafe(32)
    return key


def current_key() -> str | None:
    """The key in this process's environment, if any."""
    return os.environ.get(ENV_NAME) or None


def auth_headers() -> dict[str, str]:
    """`Authorization: Bearer <key>` when a key is set, else no header."""
    key = current_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def unauthorized_hint() -> str:
    """Why a server answered 401, for the error message (never the key itself)."""
    state = "has another" if current_key() else "has no"
    return (
        f"HTTP 401: the vLLM server wants the run's API key and this process {state} {ENV_NAME} "
        "(a run makes it before Ray starts; for your own server, set it to that server's key)"
    )


def server_key_environment() -> dict[str, str]:
    """What a vLLM server's environment needs for the key: VLLM_API_KEY and the all-routes guard."""
    return {"VLLM_API_KEY": ensure_run_key(), GUARD_ENV: "1"}
