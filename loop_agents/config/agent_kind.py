"""Which kind of agent a config asks for (`agent.kind`), readable by every layer (the orchestration builds the
agent; an environment family may present its observations for it)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

AGENT_KINDS = ("text", "tools")


def agent_kind(cfg: DictConfig) -> str:
    """`agent.kind` (text when the config has no `agent`, as runs written before it); `tools` with an agent program
    (`agent.program`: it acts through the family's tools, so the warm start's demonstrations take that form)."""
    if OmegaConf.select(cfg, "agent.program", default=""):
        return "tools"
    return str(OmegaConf.select(cfg, "agent.kind", default="text"))
