"""`python -m loop_agents.envs.openenv serve bundled --port <port>`, whose gem hunt raises on one action ("open the
void"): the game bug an action of the policy can hit (as tests/envs/agentgym/test_action_errors.py makes the
AgentGym server's game raise). Run as `python -m tests.envs.openenv.choking_serve <port>` from the repository root."""

from __future__ import annotations

import sys

from loop_agents.envs.bundled.game import GemHuntGame
from loop_agents.envs.openenv.__main__ import main

VOID = "open the void"
_step = GemHuntGame.step


def _choke(self: GemHuntGame, action: str) -> tuple[str, float, bool]:
    if action.startswith(VOID):
        raise KeyError("void")
    return _step(self, action)


GemHuntGame.step = _choke

if __name__ == "__main__":
    sys.exit(main(["serve", "bundled", "--port", sys.argv[1], "--max-sessions", "4"]))
