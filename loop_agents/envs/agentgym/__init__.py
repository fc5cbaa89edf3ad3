"""AgentGym-style environments: the env-server protocol (client), our servers for BabyAI, TextCraft,
SciWorld and the bundled gem hunt, and the task source that ties them to the Environment protocol.

Item ids, splits and rewards per game are documented in games/<name>.py; the protocol in server.py, and
beside AgentGym's, field for field, in docs/agentgym_conformance.md.
"""

from loop_agents.envs.agentgym.client import AgentGymEnvClient, AgentGymRequestError, parse_item_id
from loop_agents.envs.agentgym.config import AgentGymEnvConfig
from loop_agents.envs.agentgym.games import ENV_NAMES
from loop_agents.envs.agentgym.launcher import EnvServerProcess
from loop_agents.envs.agentgym.task_source import AgentGymTaskSource

__all__ = [
    "ENV_NAMES",
    "AgentGymEnvClient",
    "AgentGymEnvConfig",
    "AgentGymRequestError",
    "AgentGymTaskSource",
    "EnvServerProcess",
    "parse_item_id",
]
