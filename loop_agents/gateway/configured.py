"""The gateway of a run (`agent.program`): built once per rollout worker from the run's config, or None."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.selected import selected_family
from loop_agents.envs.settings import env_settings
from loop_agents.gateway.episode import ProgramEpisodes
from loop_agents.gateway.forked_programs import ForkedPrograms
from loop_agents.gateway.program import parse_program
from loop_agents.gateway.render import ConversationRenderer
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.tools.parsers import parser_for
from loop_agents.tools.spec import tools_of


def program_episodes(cfg: DictConfig, tokenizer: Any, episode_cfg: EpisodeConfig) -> ProgramEpisodes | None:
    """How this run's episodes are played through the gateway; None when `agent.program` is empty."""
    program = parse_program(OmegaConf.select(cfg, "agent.program", default=""))
    if program is None:
        return None
    forked = None
    if program.kind == "callable" and OmegaConf.select(cfg, "agent.fork", default=True):
        forked = ForkedPrograms(program.value, OmegaConf.select(cfg, "agent.preload", default=None) or ())
    renderer = ConversationRenderer(
        tokenizer, turn_end_token=episode_cfg.turn_end_token, enable_thinking=episode_cfg.enable_thinking
    )
    return ProgramEpisodes(
        program=program,
        renderer=renderer,
        parser=parser_for(str(cfg.llm.chat_template)),
        tools=tuple(tools_of(selected_family(cfg), env_settings(cfg))),
        timeout_s=float(OmegaConf.select(cfg, "agent.timeout_s", default=300.0)),
        forked=forked,
    )
