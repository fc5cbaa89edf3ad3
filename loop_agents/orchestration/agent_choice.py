"""Which agent plays a run's episodes (`agent.kind`): the family's own text agent, or the tool-calling agent.

`agent=tools` wraps the family's agent in `ToolCallingAgent` with the family's declared tools
(`EnvironmentFamily.tools`, the generic `act` tool when it declares none) and the tool-call parser of the model
family (`llm.chat_template`); the chat format then declares the same tools (`episode_config`).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from loop_agents.config.agent_kind import agent_kind
from loop_agents.envs.selected import make_agent as family_agent
from loop_agents.envs.selected import selected_family
from loop_agents.envs.settings import env_settings
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.tool_agent import ToolCallingAgent, tool_schemas
from loop_agents.tools.demonstrations import tool_form
from loop_agents.tools.parsers import parser_for
from loop_agents.tools.spec import ToolSpec, tools_of


def agent_tools(cfg: DictConfig) -> list[ToolSpec] | None:
    """The selected family's tools when the agent calls tools, else None."""
    if agent_kind(cfg) != "tools":
        return None
    return tools_of(selected_family(cfg), env_settings(cfg))


def agent_tool_schemas(cfg: DictConfig) -> list[dict[str, Any]] | None:
    """The tools as the chat template declares them, or None for a text agent."""
    tools = agent_tools(cfg)
    return tool_schemas(tools) if tools is not None else None


def make_agent(cfg: DictConfig) -> Any:
    """The agent of the run: the family's, wrapped to act through its tools with `agent=tools`."""
    agent = family_agent(cfg)
    tools = agent_tools(cfg)
    if tools is None:
        return agent
    return ToolCallingAgent(agent, tuple(tools), parser_for(str(cfg.llm.chat_template)))


def demonstrations_in_agent_form(chat: ChatFormat, cfg: DictConfig) -> ChatFormat:
    """`chat`, set to write the family's (text-action) demonstrations in the form the run's agent acts in: with
    `agent=tools` each action becomes its tool call and each observation a tool message, for the warm start's
    demonstrations and its checks alike."""
    agent = make_agent(cfg)
    if isinstance(agent, ToolCallingAgent):
        chat.demonstration_form = lambda messages: tool_form(
            messages, agent.action_of, agent.tools, agent.parser
        )
    return chat
