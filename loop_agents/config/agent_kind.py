"""Which kind of agent a config asks for (`agent.kind`), readable by every layer (the orchestration builds the
agent; an environment family may present its observations for it)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

AGENT_KINDS = ("text", "tools")


def agent_kind(cfg: DictConfig) -> str:
    """`agent.kind` (text when the config has no `agent`, as runs written before it); with an agent program
    (`agent.program`) the form it prompts the model in, `agent.program_prompts` (tools unless it says text): the
    warm start's demonstrations take that form."""
    if OmegaConf.select(cfg, "agent.program", default=""):
        return str(OmegaConf.select(cfg, "agent.program_prompts", default="tools"))
    return str(OmegaConf.select(cfg, "agent.kind", default="text"))
