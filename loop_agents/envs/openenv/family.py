"""`env=openenv`: LOOP on any OpenEnv environment server (settings.py says what maps to what).

The agent is the generic text-action agent (the system prompt from the reset's `info`, else
`env.options.system_prompt`); with `agent=tools` it calls the server's MCP tools (`tools/list` at `/mcp`), or, on a
server without them, its text action as the one tool `act(action)`, which the start-up check says in one line (as it
says that a server without OpenEnv's Task API has its splits from seeds under `tasks=auto`). Demonstrations and warm-start checks are borrowed from one of our families when
`env.options.demonstrations_from` names one (the gem hunt served by `serve_family=bundled` is the gem hunt).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from omegaconf import OmegaConf

from loop_agents.envs.family import EnvironmentFamily
from loop_agents.envs.openenv.catalogue import offers
from loop_agents.envs.openenv.client import OpenEnvTaskSource, probe
from loop_agents.envs.openenv.session import session_limit
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.openenv.tool_calls import tool_specs
from loop_agents.envs.registry import family, family_names
from loop_agents.envs.settings import env_settings, typed
from loop_agents.errors import ConfigError
from loop_agents.rollout.text_agent import DEFAULT_SYSTEM_PROMPT, TextActionAgent
from loop_agents.tools.spec import generic_action_tool, tools_of


def calls_tools(cfg: Any) -> bool:
    """Whether the run's agent calls tools (`agent=tools`, or an agent program, which acts through them)."""
    program = OmegaConf.select(cfg, "agent.program", default="") if cfg is not None else ""
    kind = OmegaConf.select(cfg, "agent.kind", default="text") if cfg is not None else "text"
    return bool(program) or kind == "tools"


class OpenEnvFamily(EnvironmentFamily):
    name = "openenv"
    label = "OpenEnv"
    settings_class = OpenEnvSettings

    def task_source(self, settings: OpenEnvSettings, cfg: Any) -> OpenEnvTaskSource:
        if not (settings.url or settings.serve_family or settings.app):
            self.check(cfg, settings)  # one line naming the three ways to give a server
        return OpenEnvTaskSource(settings, use_tools=calls_tools(cfg), tools=lambda: self.tools(settings))

    def agent(self, cfg: Any) -> TextActionAgent:

        prompt = env_settings(cfg).system_prompt
        return TextActionAgent(system_prompt=prompt or DEFAULT_SYSTEM_PROMPT)

    def check(self, cfg: Any, settings: OpenEnvSettings) -> None:
        """A running server (`url`) answers with a schema that fits; a family to serve or borrow from exists."""

        if not (settings.url or settings.serve_family or settings.app):
            raise ConfigError(
                "env.options: env=openenv needs a server: env.options.url=http://127.0.0.1:PORT (running), "
                "env.options.serve_family=<one of our families> or env.options.app=module:attribute (started here)"
            )
        for key in ("serve_family", "demonstrations_from"):
            value = getattr(settings, key)
            if value and (value == self.name or value not in family_names()):
                raise ConfigError(f"env.options.{key}={value!r} is not one of our families; choose one of: "
                                  f"{', '.join(n for n in family_names() if n != self.name)}")  # fmt: skip
        epochs = int(OmegaConf.select(cfg, "learner.sft_epochs", default=0) or 0)
        if epochs > 0 and not settings.demonstrations_from:
            raise ConfigError(f"learner.sft_epochs={epochs} needs warm-start demonstrations: env=openenv "
                              "borrows them from one of our families (env.options.demonstrations_from, e.g. bundled "
                              "with serve_family=bundled); else set learner.sft_epochs=0")  # fmt: skip
        if settings.demonstrations_from:
            self._lender(settings)
        if (
            settings.url
        ):  # answers, and is OpenEnv (one line each), before its MCP tools and Task API are asked
            probe(settings.url.rstrip("/"), settings, tool_calls=True)
        self._say_fallbacks(cfg, settings)
        if settings.url:
            tool_calls = calls_tools(cfg) and bool(offers(settings).tools.tools)
            probe(settings.url.rstrip("/"), settings, tool_calls=tool_calls)
        self._check_sessions(cfg, settings)

    def tools(self, settings: OpenEnvSettings):
        """The server's MCP tools (`tools/list` at `/mcp`, asked once per process); on a server without them its
        text action as one tool, `act(action)`."""
        listed = offers(settings).tools.tools
        if not listed:
            return [generic_action_tool("Take one action in the environment, as text.")]
        lender = family(str(settings.demonstrations_from)) if settings.demonstrations_from else None
        lent = tools_of(lender, self._lender(settings)[1]) if lender is not None else []
        return tool_specs(listed, lent)

    def _say_fallbacks(self, cfg: Any, settings: OpenEnvSettings) -> None:
        """At start-up (once a run, in the driver): one line for each fallback the server makes the run take."""
        if not (settings.url or settings.serve_family or settings.app):
            return
        found = offers(settings)
        where = settings.url or settings.serve_family or settings.app
        if calls_tools(cfg) and not found.tools.tools:
            print(f"[openenv] {where}: no MCP tools ({found.tools.missing}); agent=tools acts through its text "
                  f"action instead, the one tool act(action) (env.options.action_field={settings.action_field})",
                  flush=True)  # fmt: skip
        if settings.tasks == "auto" and not found.tasks.env_name:
            print(f"[openenv] {where}: no Task API ({found.tasks.missing}); its splits are seeds instead "
                  f"(env.options.splits: {dict(settings.splits)})", flush=True)  # fmt: skip

    def _check_sessions(self, cfg: Any, settings: OpenEnvSettings) -> None:
        """The server's session limit against the sessions the run opens at once: the rollouts' episodes plus the
        evaluator's (each `env.concurrency`). A server started here has `max_sessions`; one given by `url` is asked
        by opening that many sessions (a refusal names its limit). One line when it is too small."""
        needed = int(cfg.env.concurrency) * (2 if cfg.eval.enabled else 1)
        opens = f"env.concurrency={cfg.env.concurrency} episodes at once" + (
            " for the rollouts and as many for the evaluator" if cfg.eval.enabled else ""
        )
        if settings.serve_family and settings.max_sessions < needed:
            raise ConfigError(f"env.options.max_sessions={settings.max_sessions} is fewer than the {needed} OpenEnv "
                              f"sessions the run opens ({opens}); raise it or lower env.concurrency")  # fmt: skip
        if not settings.url:
            return
        url = settings.url.rstrip("/")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop: callers may run one
            limit = pool.submit(asyncio.run, session_limit(url, settings, needed)).result()
        if limit is not None:
            fits = max(limit // 2, 1) if cfg.eval.enabled else limit
            raise ConfigError(f"OpenEnv server {url} allows {limit} concurrent sessions, fewer than the {needed} the "
                              f"run opens ({opens}); lower env.concurrency to {fits} or start the server with more "
                              "(OpenEnv's max_concurrent_envs)")  # fmt: skip

    def endpoint(self, settings: OpenEnvSettings) -> str | None:
        return settings.url

    def _lender(self, settings: OpenEnvSettings) -> tuple[EnvironmentFamily, Any]:
        """The family whose demonstrations stand for the served environment's, and its typed settings."""

        lender = family(str(settings.demonstrations_from))
        options = dict(settings.demonstration_options)
        return lender, typed(lender.settings_class, options, lender.name)

    def demonstrations(self, cfg: Any, settings: OpenEnvSettings, chat: Any):
        if not settings.demonstrations_from:
            return None
        lender, lent = self._lender(settings)
        return lender.demonstrations(cfg, lent, chat)

    def demonstration_weights(self, cfg: Any, settings: OpenEnvSettings, chat: Any, demos):
        if not settings.demonstrations_from:
            return None
        lender, lent = self._lender(settings)
        return lender.demonstration_weights(cfg, lent, chat, demos)

    def warm_start_checks(self, cfg: Any, settings: OpenEnvSettings, chat: Any, training_task_ids: set[str]):
        if not settings.demonstrations_from:
            return None, None
        lender, lent = self._lender(settings)
        return lender.warm_start_checks(cfg, lent, chat, training_task_ids)


FAMILY = OpenEnvFamily()
