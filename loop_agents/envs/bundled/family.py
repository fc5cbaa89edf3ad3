"""The gem hunt as an environment family: in-process episodes, a noisy scripted demonstrator, and the warm start's
held-out checks (teacher-forced probability of the solver's exact episode; the copy probe)."""

from __future__ import annotations

from typing import Any

from loop_agents.config.agent_kind import agent_kind
from loop_agents.envs.bundled.config import BundledEnvConfig
from loop_agents.envs.bundled.demonstrations import generate_demonstrations
from loop_agents.envs.bundled.env import BundledTaskSource
from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.envs.bundled.warm_checks import code_token_weights, warm_start_checks
from loop_agents.envs.family import EnvironmentFamily
from loop_agents.rollout.text_agent import TextActionAgent


class GemHuntFamily(EnvironmentFamily):
    name = "bundled"
    label = "gem hunt"
    settings_class = BundledEnvConfig

    def task_source(self, settings: BundledEnvConfig, cfg: Any) -> BundledTaskSource:
        return BundledTaskSource(settings, quoted=quoted_names(cfg, settings))

    def agent(self, cfg: Any) -> TextActionAgent:
        return TextActionAgent()

    def tools(self, settings: BundledEnvConfig):
        """`open(container)` and `answer(code)`: the game's two moves."""
        return list(GEM_HUNT_TOOLS)

    def demonstrations(self, cfg: Any, settings: BundledEnvConfig, chat: Any):
        """The noisy scripted solver's episodes on train tasks (`env.options.demo_count`, `demo_noise`)."""
        demos = generate_demonstrations(
            settings.demo_count,
            settings.demo_noise,
            seed=settings.demo_seed,
            split=cfg.env.train_split,
            spare_moves=settings.spare_moves,
            quoted=quoted_names(cfg, settings),
        )
        return list(demos)

    def demonstration_weights(self, cfg: Any, settings: BundledEnvConfig, chat: Any, demos):
        """With `env.options.demo_code_weight` != 1, the code symbols of each demonstration's final `answer <code>`
        count that many times (copying the gem's code is the skill whose absence stalls a warm start, issue 18); in tool
        form, scaled to keep the code's share of the loss (code_token_weights)."""
        if settings.demo_code_weight == 1.0:
            return None
        text_loss_tokens = None
        if (
            chat.demonstration_form is not None
        ):  # tool calls: the code keeps the share of the loss it has as text
            text_loss_tokens = [
                sum(len(chat.encode(m["content"])) + 1 for m in messages if m["role"] == "assistant")
                for _, messages in self.demonstrations(cfg, settings, chat)
            ]
        return code_token_weights(demos, chat, float(settings.demo_code_weight), text_loss_tokens)

    def warm_start_checks(self, cfg: Any, settings: BundledEnvConfig, chat: Any, training_task_ids: set[str]):
        return warm_start_checks(cfg, settings, chat, training_task_ids, quoted_names(cfg, settings))


def quoted_names(cfg: Any, settings: BundledEnvConfig) -> bool:
    """Whether the observations quote names and the code: `env.options.quoted_names`, or when unset, whether the
    agent calls the gem hunt's tools (their JSON arguments quote what the observations name) on this in-process
    gem hunt. A gem hunt served by another process (OpenEnv's `demonstrations_from=bundled`) writes its own
    observations, unquoted: the demonstrations lent for it must read as its episodes do."""
    if settings.quoted_names is not None:
        return settings.quoted_names
    return agent_kind(cfg) == "tools" and str(cfg.env.name) == "bundled"


FAMILY = GemHuntFamily()
