"""loop_agents: RL for long-horizon LLM agents (LOOP and family)."""

__version__ = "0.1.0"
