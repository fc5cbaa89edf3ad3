"""`python -m loop_agents.envs.openenv serve <family> [--mode simulation|production] [--port N] [--max-sessions N]
[hydra overrides ...]`

Serves one of our environment families (bundled, babyai, textcraft, sciworld, appworld, or a plugin's) as an
OpenEnv environment on 127.0.0.1 with OpenEnv's own server code (server.py: its tools over MCP, the Task API, a
rubric). Overrides are those of a run (`env.options.spare_moves=2`, ...). A bad family or override, no
`.venv-openenv`, an OpenEnv version we do not support: one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys

from loop_agents.envs.openenv.host import MODES
from loop_agents.envs.openenv.server import check_openenv_python, exit_code, serve, served_family
from loop_agents.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loop_agents.envs.openenv", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="serve an environment family as OpenEnv on 127.0.0.1")
    serve_cmd.add_argument("family", help="env name: bundled, babyai, textcraft, sciworld, appworld, ...")
    serve_cmd.add_argument(
        "overrides", nargs="*", help="Hydra overrides of the family's config (env.options.x=y)"
    )
    serve_cmd.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one, printed)")
    serve_cmd.add_argument("--max-sessions", type=int, default=64, help="concurrent OpenEnv sessions")
    serve_cmd.add_argument("--mode", choices=MODES, default="simulation",
                           help="simulation: rewards through step (training); production: tools only, no reward")  # fmt: skip
    args = parser.parse_args(argv)

    try:
        check_openenv_python()
        served = served_family(args.family, args.overrides)
    except ConfigError as err:
        print(f"[openenv] {err}", file=sys.stderr)
        return 2
    return exit_code(serve(served, port=args.port, max_sessions=args.max_sessions, mode=args.mode))


if __name__ == "__main__":
    sys.exit(main())
