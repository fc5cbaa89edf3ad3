"""`VLLMClient`: the TokenGenerator rollouts use: token ids in, sampled token ids and their logprobs out.

One `POST /v1/completions` per call with the prompt as token ids, `logprobs=0` (the sampled token's logprob only),
`return_token_ids` and a server started with `--return-tokens-as-token-ids`, so nothing is re-tokenised. A sampled
stop token (from `stop_token_ids` or EOS) is part of `token_ids` (vLLM 0.32 keeps stop *token ids* in the output;
`include_stop_str_in_output` only matters for stop strings). Differences from the reference client (study §1.2,
§8 items 11/16): every request has a timeout, failures are retried a bounded number of times with exponential
backoff, the adapter name is held locally instead of a `GET /v1/models` per request, and several servers are
balanced by in-flight count.

`generate_streaming` sends the same request with `stream: true` and hands over each chunk's sampled ids (vLLM's
streamed completion chunks carry their own `token_ids` and `logprobs`) as they arrive. Failures are retried as for
`generate` until the first id has been handed over; after that the request fails (the ids given out cannot be
taken back).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import aiohttp

from loop_agents.inference.api_key import auth_headers, unauthorized_hint
from loop_agents.inference.completion_reply import parse_completion, read_stream
from loop_agents.inference.config import ClientConfig
from loop_agents.inference.errors import InvalidInferenceRequest
from loop_agents.inference.protocol import (
    Completion,
    InferenceFailure,
    SamplingParams,
    TokenGenerator,
    TokenSink,
)


class VLLMClient:
    """Async client for one or more vLLM servers serving the same base model and adapter names."""

    def __init__(
        self,
        urls: Sequence[str],
        base_model: str | None = None,
        config: ClientConfig | None = None,
        adapter: str | None = None,
        max_model_len: int | None = None,
        request_timeout_s: float | None = None,
    ) -> None:
        """`base_model=None` reads the served base-model name from the first server on first use."""
        self.config = config or ClientConfig()
        if request_timeout_s is not None:
            self.config = replace(self.config, request_timeout_s=request_timeout_s)
        self.base_model = base_model
        self.max_model_len = max_model_len
        self._adapter = adapter
        self._tie_break = itertools.count()
        self.set_servers(urls)
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def set_servers(self, urls: Sequence[str]) -> None:
        """Replace the server list (e.g. after a server moved to another port)."""
        if not urls:
            raise ValueError("VLLMClient needs at least one server URL")
        self.urls = [u.rstrip("/") for u in urls]
        self._in_flight = {u: 0 for u in self.urls}
        self._cooldown_until = {u: 0.0 for u in self.urls}

    # ---------------------------------------------------------------- adapter
    @property
    def adapter(self) -> str | None:
        """The adapter name new requests use (None = the base model)."""
        return self._adapter

    def use_adapter(self, name: str | None) -> None:
        """Send every request from now on to adapter `name` (called by VLLMServer.publish_adapter or the driver)."""
        self._adapter = name

    async def refresh_adapter(self) -> str | None:
        """Adopt the most recently loaded adapter of the first reachable server (after our name was unloaded)."""
        loras = [m["id"] for m in await self._read_models() if m.get("parent") is not None]
        self._adapter = loras[-1] if loras else None
        return self._adapter

    async def wait_until_serving(self, adapter: str | None, timeout_s: float, poll_s: float = 1.0) -> bool:
        """Wait until every server answers `/health` and lists `adapter` (if not None) in `/v1/models`.

        A restarted server answers `/health` before its adapters are loaded again, and a request pinned to an
        adapter it does not list is rejected at once, so a retry must wait for both. Returns False on timeout.
        """
        deadline = time.monotonic() + timeout_s
        session = self._get_session()
        probe = aiohttp.ClientTimeout(total=5)
        while True:
            serving = True
            for url in list(self.urls):
                try:
                    async with session.get(f"{url}/health", timeout=probe) as reply:
                        serving = reply.status == 200
                    if serving and adapter is not None:
                        serving = adapter in [m["id"] for m in await self._models_of(url, probe) or []]
                except (TimeoutError, aiohttp.ClientError, ValueError, KeyError):
                    serving = False
                if not serving:
                    break
            if serving:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(poll_s)

    async def _read_models(self) -> list[dict]:
        """`GET /v1/models` of the first server that answers."""
        for url in self.urls:
            try:
                models = await self._models_of(url, aiohttp.ClientTimeout(total=10))
            except (TimeoutError, aiohttp.ClientError, ValueError):
                continue
            if models is not None:
                return models
        raise InferenceFailure(f"no server reachable to read /v1/models from {self.urls}")

    async def _models_of(self, url: str, timeout: aiohttp.ClientTimeout) -> list[dict] | None:
        """The `data` of `url`'s `GET /v1/models`, None when it answers otherwise; HTTP 401 raises (no retry
        can fix a missing key)."""
        async with self._get_session().get(f"{url}/v1/models", timeout=timeout) as reply:
            if reply.status == 401:
                raise InferenceFailure(f"{url}: {unauthorized_hint()}")
            if reply.status != 200:
                return None
            models = (await reply.json()).get("data")
            return models if isinstance(models, list) else None

    def for_adapter(self, name: str | None) -> TokenGenerator:
        """A TokenGenerator pinned to adapter `name` (None = base model); a request fails if it was unloaded."""
        return _PinnedAdapter(self, name)

    def following(self, current: Callable[[], str | None]) -> TokenGenerator:
        """A TokenGenerator that names adapter `current()` at each request (partial rollouts: an episode moves
        to a newly published adapter at its next turn); the adapter that served is the Completion's."""
        return _FollowingAdapter(self, current)

    def in_flight(self) -> dict[str, int]:
        """Requests currently outstanding per server URL."""
        return dict(self._in_flight)

    # ---------------------------------------------------------------- generation
    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        """Sample one continuation of `prompt_ids` with the current adapter (which follows publishes)."""
        return await self._generate(prompt_ids, params, pinned=None, follow_latest=True)

    async def generate_streaming(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink
    ) -> Completion:
        """`generate`, handing the sampled ids to `on_tokens` as the server streams them."""
        return await self._generate(prompt_ids, params, pinned=None, follow_latest=True, on_tokens=on_tokens)

    async def _generate(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        pinned: str | None,
        follow_latest: bool,
        on_tokens: TokenSink | None = None,
    ) -> Completion:
        """Retry loop; raises InferenceFailure after the retries are spent (or once a streamed id was handed
        over), InvalidInferenceRequest at once."""
        self._check_request(prompt_ids, params)
        if self.base_model is None:
            await self._discover_base_model()
        attempt, stale_refreshes = 0, 0
        last_error = ""
        handed_over = [0]
        sink = None
        if on_tokens is not None:

            async def sink(ids: list[int], logprobs: list[float]) -> None:
                handed_over[0] += len(ids)
                await on_tokens(ids, logprobs)

        while True:
            url = self._pick_server()
            model = (self._adapter if follow_latest else pinned) or self.base_model
            try:
                return await self._post_once(url, model, prompt_ids, params, sink)
            except _StaleAdapter:
                if not follow_latest:
                    raise InvalidInferenceRequest(f"adapter {model!r} is not loaded on {url}") from None
                if stale_refreshes >= 3:
                    raise InferenceFailure(f"adapter {model!r} keeps disappearing on {url}") from None
                stale_refreshes += 1
                if self._adapter == model:  # nobody switched us meanwhile: ask the server
                    await self.refresh_adapter()
                continue
            except InferenceFailure as exc:
                last_error = str(exc)
                self._cooldown_until[url] = time.monotonic() + self.config.server_cooldown_s
                if handed_over[0]:
                    raise InferenceFailure(
                        f"the stream failed after {handed_over[0]} ids were handed over: {last_error}"
                    ) from None
            if attempt >= self.config.max_retries:
                raise InferenceFailure(
                    f"request failed after {attempt + 1} attempts; last error: {last_error}"
                )
            await asyncio.sleep(min(self.config.backoff_max_s, self.config.backoff_base_s * 2**attempt))
            attempt += 1

    async def _post_once(
        self,
        url: str,
        model: str,
        prompt_ids: list[int],
        params: SamplingParams,
        on_tokens: TokenSink | None = None,
    ) -> Completion:
        body = {
            "model": model,
            "prompt": prompt_ids,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
            "stop_token_ids": list(params.stop_token_ids),
            "ignore_eos": params.ignore_eos,
            "logprobs": 0,
            "n": 1,
            "return_token_ids": True,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if on_tokens is not None:
            body["stream"] = True
        session = self._get_session()
        self._in_flight[url] += 1
        try:
            timeout = aiohttp.ClientTimeout(total=self.config.request_timeout_s)
            async with session.post(f"{url}/v1/completions", json=body, timeout=timeout) as reply:
                if reply.status == 200 and on_tokens is not None:
                    return await read_stream(reply, on_tokens, self.base_model)
                if reply.status == 200:
                    return parse_completion(await reply.json(), self.base_model)
                text = (await reply.text())[:500]
        except TimeoutError as exc:
            raise InferenceFailure(f"{url} did not answer within {self.config.request_timeout_s} s") from exc
        except aiohttp.ClientError as exc:
            raise InferenceFailure(f"{url}: {exc!r}") from exc
        finally:
            self._in_flight[url] -= 1
        if reply.status == 404 and model != self.base_model and "does not exist" in text:
            raise _StaleAdapter
        if reply.status == 401:
            raise InvalidInferenceRequest(f"{url}: {unauthorized_hint()}")
        if 400 <= reply.status < 500:
            raise InvalidInferenceRequest(f"{url} rejected the request (HTTP {reply.status}): {text}")
        raise InferenceFailure(f"{url} answered HTTP {reply.status}: {text}")

    async def _discover_base_model(self) -> None:
        self.base_model = next(m["id"] for m in await self._read_models() if m.get("parent") is None)

    def _check_request(self, prompt_ids: list[int], params: SamplingParams) -> None:
        if not prompt_ids:
            raise InvalidInferenceRequest("prompt_ids is empty")
        if self.max_model_len is not None and len(prompt_ids) >= self.max_model_len:
            raise InvalidInferenceRequest(
                f"prompt of {len(prompt_ids)} tokens leaves no room to generate within max_model_len "
                f"{self.max_model_len}"
            )
        if params.max_tokens < 1:
            raise InvalidInferenceRequest(f"max_tokens must be >= 1, got {params.max_tokens}")
        if params.temperature < 0:
            raise InvalidInferenceRequest(f"temperature must be >= 0, got {params.temperature}")

    def _pick_server(self) -> str:
        """The least-loaded server among those not cooling down after a failure (all of them if none is up)."""
        now = time.monotonic()
        up = [u for u in self.urls if self._cooldown_until[u] <= now] or self.urls
        tie = next(self._tie_break)
        return min(up, key=lambda u: (self._in_flight[u], (self.urls.index(u) - tie) % len(self.urls)))

    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            connector = aiohttp.TCPConnector(limit=self.config.max_connections)
            self._session = aiohttp.ClientSession(connector=connector, headers=auth_headers())
            self._session_loop = loop
        return self._session

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


class _PinnedAdapter:
    """TokenGenerator view of a VLLMClient that always names one adapter."""

    def __init__(self, client: VLLMClient, adapter: str | None) -> None:
        self.client, self.adapter = client, adapter

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        """Sample with the pinned adapter; same retries and errors as VLLMClient.generate."""
        return await self.client._generate(prompt_ids, params, pinned=self.adapter, follow_latest=False)

    async def generate_streaming(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink
    ) -> Completion:
        """`generate`, handing the sampled ids to `on_tokens` as the server streams them."""
        return await self.client._generate(
            prompt_ids, params, pinned=self.adapter, follow_latest=False, on_tokens=on_tokens
        )


class _FollowingAdapter:
    """TokenGenerator view of a VLLMClient that names whichever adapter `current()` gives at each request."""

    def __init__(self, client: VLLMClient, current: Callable[[], str | None]) -> None:
        self.client, self.current = client, current

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        """Sample with the current adapter; if it was unloaded between reading its name and the request (a
        publish in between), ask again with the name `current()` gives then."""
        return await self._generate(prompt_ids, params, None)

    async def generate_streaming(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink
    ) -> Completion:
        """`generate`, handing the sampled ids to `on_tokens` as the server streams them."""
        return await self._generate(prompt_ids, params, on_tokens)

    async def _generate(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink | None
    ) -> Completion:
        for _ in range(3):
            name = self.current()
            try:
                return await self.client._generate(
                    prompt_ids, params, pinned=name, follow_latest=False, on_tokens=on_tokens
                )
            except InvalidInferenceRequest:  # refused before any id was streamed
                if self.current() == name:
                    raise
        return await self.client._generate(
            prompt_ids, params, pinned=self.current(), follow_latest=False, on_tokens=on_tokens
        )


class _StaleAdapter(Exception):
    """The adapter named in the request was unloaded (a publish happened); re-read the name and retry."""
