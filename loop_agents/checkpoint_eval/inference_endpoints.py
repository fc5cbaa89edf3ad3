"""The vLLM server(s) an evaluation samples from: started from the placement plan, or a running one by URL."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx
from omegaconf import DictConfig

from loop_agents.checkpoint_eval.eval_target import PROG
from loop_agents.eval.cli_args import UsageError
from loop_agents.inference.actor import InferenceServer
from loop_agents.inference.api_key import ENV_NAME as API_KEY_ENV
from loop_agents.inference.api_key import auth_headers
from loop_agents.orchestration.inference_settings import inference_config
from loop_agents.orchestration.placement import plan


# ---------------------------------------------------------------------------------------- servers
class InferenceEndpoints:
    """Our own vLLM server(s) from `placement.plan`, or a running one by URL; loads the adapter."""

    def __init__(self, cfg: DictConfig, model_path: str, server_url: str | None, log_dir: Path) -> None:
        self.cfg, self.model_path, self.server_url, self.log_dir = cfg, model_path, server_url, log_dir
        self.servers: list[Any] = []
        self.urls: list[str] = []
        self._loaded: list[str] = []  # adapters loaded into a server given by URL, unloaded on close
        self.startup_s = 0.0

    def start(self) -> list[str]:
        if self.server_url is not None:
            url = self.server_url.rstrip("/")
            self._get(url, "/health")
            models = self._get(url, "/v1/models").json().get("data", [])
            roots = [m.get("root") for m in models if m.get("parent") is None and m.get("root")]
            if roots and Path(roots[0]).resolve() != Path(self.model_path).resolve():
                print(f"[{PROG}] warning: {url} serves {roots[0]}, but the episodes are tokenized with "
                      f"{self.model_path}; they must be the same model", flush=True)  # fmt: skip
            self.urls = [url]
            return self.urls

        began = time.monotonic()
        for index, server in enumerate(plan(self.cfg)["inference_servers"]):
            config = inference_config(self.cfg, self.model_path, server)
            config = dataclasses.replace(config, run_dir=str(self.log_dir))
            instance = InferenceServer(
                config, str(self.log_dir / f"vllm_{index}.log"), server.get("gpus", [])
            )
            self.servers.append(instance)
            self.urls.append(instance.start())
        self.startup_s = time.monotonic() - began
        return self.urls

    def load_adapter(self, adapter: Path, digest: str) -> str:
        """Serve `adapter` under a name derived from its content; returns the name."""
        name = f"eval-{digest[:12]}"
        if self.servers:
            for server in self.servers:
                server.load_adapter(str(adapter), name)
            return name

        models = self._get(self.urls[0], "/v1/models").json().get("data", [])
        if any(m.get("id") == name for m in models):
            return name  # loaded by an earlier invocation: same content, same name
        reply = httpx.post(
            f"{self.urls[0]}/v1/load_lora_adapter",
            json={"lora_name": name, "lora_path": str(adapter.resolve())},
            timeout=120,
            trust_env=False,
            headers=auth_headers(),
        )
        if reply.status_code != 200:
            raise UsageError(
                f"server_url={self.server_url}: loading the adapter failed (HTTP {reply.status_code}: "
                f"{reply.text[:200]}); the server needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora"
            )
        self._loaded.append(name)
        return name

    def close(self) -> None:
        if self.servers:
            for server in self.servers:
                server.shutdown()
        for name in self._loaded:
            try:
                httpx.post(f"{self.urls[0]}/v1/unload_lora_adapter", json={"lora_name": name},
                           timeout=30, trust_env=False, headers=auth_headers())  # fmt: skip
            except httpx.HTTPError:
                pass

    def _get(self, url: str, path: str):
        try:
            reply = httpx.get(f"{url}{path}", timeout=10, trust_env=False, headers=auth_headers())
        except httpx.HTTPError as exc:
            raise UsageError(
                f"server_url={url}: GET {path} failed ({type(exc).__name__}); is the server up?"
            ) from None
        if reply.status_code == 401:
            raise UsageError(
                f"server_url={url}: GET {path} answered HTTP 401; set {API_KEY_ENV} to the server's API key"
            )
        if reply.status_code != 200:
            raise UsageError(f"server_url={url}: GET {path} answered HTTP {reply.status_code}")
        return reply
