"""AppWorld episode host: a pre-imported parent that never runs policy code, one sandboxed fork per episode.

Run by the AppWorld venv's python as a file (never imported by the trainer):

    python episode_host.py --port P --root R [--sandbox strict|available|off] [--probe]
    python episode_host.py --factory --root R ...   (forks warmed hosts on request: host/factory.py)

It speaks the env-server HTTP subset the trainer uses (`GET /`, `POST /initialize`, `/execute`,
`/task_completed`, `/evaluate`, `/close`, `/close_all`; replies `{"output": ...}`) on 127.0.0.1.

    /initialize  the API process (a fork of this host: the task's databases, no policy code) and the policy
                 process (a fork of the zygote, confined: host/policy_process.py) start; E, the evaluator
                 fork, loads the ground truth; see host/episode.py for the channels between them
    /execute     one cell in the policy process, under AppWorld's own SIGALRM timeout and the host's hard
                 deadline (cell timeout + grace); a cell that overruns it, kills its process, or sends
                 garbage ends the episode: `{"ended": "timeout" | "env_killed" | "output_too_large", ...}`
    /evaluate    the policy process is killed, the API process saves the end state (AppWorld's own format)
                 into the output folder, the host signs it (host/provenance.py), E runs AppWorld's own
                 `evaluate_task` over it, itself sandboxed
    /close       every process of the episode is SIGKILLed

The host itself never loads a task's ground truth and never executes a cell.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from http.server import HTTPServer
from pathlib import Path

_REPO = str(Path(__file__).resolve().parents[3])
sys.path.insert(0, _REPO)
from loop_agents.envs.appworld.host import zygote  # noqa: E402
from loop_agents.envs.appworld.host.common import Settings  # noqa: E402
from loop_agents.envs.appworld.host.evaluation import score_experiment  # noqa: E402
from loop_agents.envs.appworld.host.factory import serve_factory  # noqa: E402
from loop_agents.envs.appworld.host.service import Host, make_handler, warm_up  # noqa: E402
from loop_agents.sandbox import layers  # noqa: E402

sys.path.remove(_REPO)  # later imports (the policy's included) never see the checkout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--root", default=".")
    parser.add_argument("--sandbox", default="available", choices=layers.MODES)
    parser.add_argument("--warm-up-task", default="")
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--file-size-mb", type=int, default=256)
    parser.add_argument("--cpu-s", type=int, default=600)
    parser.add_argument("--open-files", type=int, default=256)
    parser.add_argument("--scratch-mb", type=int, default=64, help="the policy process's tmpfs size")
    parser.add_argument("--scratch-inodes", type=int, default=4096, help="the policy process's tmpfs inodes")
    parser.add_argument("--max-output-bytes", type=int, default=4_000_000)
    parser.add_argument("--grace-s", type=float, default=10.0)
    parser.add_argument("--evaluate-timeout-s", type=float, default=50.0)
    parser.add_argument("--initialize-timeout-s", type=float, default=80.0)
    parser.add_argument(
        "--score-experiment", default="", help="score this experiment's saved outputs and exit"
    )
    parser.add_argument("--tasks", default="[]", help="JSON list of task ids for --score-experiment")
    parser.add_argument(
        "--trust-unsigned", action="store_true", help="--score-experiment also scores outputs no host signed"
    )
    parser.add_argument(
        "--probe", action="store_true", help="print the sandbox line and exit (2 if strict fails)"
    )
    parser.add_argument(
        "--factory", action="store_true", help="warm up once, then fork one host per port read on stdin"
    )
    args = parser.parse_args()
    offered = layers.detect()
    try:
        active, _, line = layers.choose(args.sandbox, offered)
    except layers.SandboxUnavailable as error:
        print(error, file=sys.stderr, flush=True)
        sys.exit(2)
    print(line, flush=True)
    if args.probe:
        return
    settings = Settings(args, active, layers.landlock_abi(offered))
    os.chdir(settings.root)
    if args.score_experiment:
        result = score_experiment(
            settings, args.score_experiment, json.loads(args.tasks), args.trust_unsigned
        )
        print("@@RESULT@@" + json.dumps(result, default=str), flush=True)
        return
    # forked first, while this process holds only code: every policy process is a fork of this image
    registrar = zygote.start()
    if args.warm_up_task:
        warm_up(settings, args.warm_up_task, f"factory_{os.getpid()}" if args.factory else str(args.port))

    def serve(port: int, client: socket.socket) -> None:
        HTTPServer((args.host, port), make_handler(Host(settings, client))).serve_forever()

    if args.factory:
        serve_factory(serve, registrar)
    else:
        serve(args.port, zygote.connect(registrar))


if __name__ == "__main__":
    main()
