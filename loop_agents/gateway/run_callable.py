"""A callable agent program's process: `python -m loop_agents.gateway.run_callable module:function`.

Reads the episode from its environment (OPENAI_BASE_URL, OPENAI_API_KEY, LOOP_AGENTS_TOOLS_URL), fetches the task,
and calls `function(task=task, base_url=..., api_key=..., tools=[...])` (tool_functions.py). What the function
returns is not used: the episode's reward is the environment's score. An exception is the program's failure: its
traceback is printed and the process exits 1 (a counted, scored episode). The fork server (fork_server.py) runs
the same `play` in each forked episode process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from loop_agents.gateway.program import load_callable
from loop_agents.gateway.tool_functions import fetch_task, remote_tools


def play(function: Callable[..., Any]) -> None:
    """Call `function` on the episode this process's environment names."""
    base_url, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    tools_url = os.environ["LOOP_AGENTS_TOOLS_URL"]
    task = fetch_task(base_url.removesuffix("/v1"), key)
    function(task=task, base_url=base_url, api_key=key, tools=remote_tools(tools_url, key))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m loop_agents.gateway.run_callable module:function", file=sys.stderr)
        return 2
    play(load_callable(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
