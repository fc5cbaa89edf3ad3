"""AppWorld episode host: a pre-imported parent that never runs policy code, one sandboxed fork per episode.

Run by the AppWorld venv's python as a file (never imported by the trainer):

    python episode_host.py --port P --root R [--sandbox strict|available|off] [--probe]
    python episode_host.py --factory --root R ...   (forks warmed hosts on request: host/factory.py)

It speaks the env-server HTTP subset the trainer uses (`GET /`, `POST /initialize`, `/execute`,
`/task_completed`, `/evaluate`, `/close`, `/close_all`; replies `{"output": ...}`) on 127.0.0.1.

    /initialize  fork A -> A enters new user/net/pid/ipc namespaces and forks B (pid 1 there);
                 B opens the world WITHOUT ground truth, then sandboxes itself (Landlock, seccomp,
                 rlimits) and serves cells over a socketpair
    /execute     one cell in B, under AppWorld's own SIGALRM timeout and the host's hard deadline
                 (cell timeout + grace); a cell that overruns it, kills B, or sends garbage ends the
                 episode: `{"ended": "timeout" | "env_killed" | "output_too_large", ...}`
    /evaluate    B is killed first (its output DBs are final), then a fresh fork E of this clean host
                 runs AppWorld's own `evaluate_task` over the saved outputs, itself sandboxed
                 (read data and outputs, write only the evaluation folder, no network)
    /close       B (and with it every process of its pid namespace) is SIGKILLed

The host itself never loads a task's ground truth and never executes a cell.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from http.server import HTTPServer
from pathlib import Path

_REPO = str(Path(__file__).resolve().parents[3])
sys.path.insert(0, _REPO)
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
    parser.add_argument("--max-output-bytes", type=int, default=4_000_000)
    parser.add_argument("--grace-s", type=float, default=10.0)
    parser.add_argument("--evaluate-timeout-s", type=float, default=50.0)
    parser.add_argument("--initialize-timeout-s", type=float, default=80.0)
    parser.add_argument(
        "--score-experiment", default="", help="score this experiment's saved outputs and exit"
    )
    parser.add_argument("--tasks", default="[]", help="JSON list of task ids for --score-experiment")
    parser.add_argument(
        "--probe", action="store_true", help="print the sandbox line and exit (2 if strict fails)"
    )
    parser.add_argument(
        "--factory", action="store_true", help="warm up once, then fork one host per port read on stdin"
    )
    args = parser.parse_args()
    try:
        active, _, line = layers.choose(args.sandbox, layers.detect())
    except layers.SandboxUnavailable as error:
        print(error, file=sys.stderr, flush=True)
        sys.exit(2)
    print(line, flush=True)
    if args.probe:
        return
    settings = Settings(args, active)
    os.chdir(settings.root)
    if args.score_experiment:
        result = score_experiment(settings, args.score_experiment, json.loads(args.tasks))
        print("@@RESULT@@" + json.dumps(result, default=str), flush=True)
        return
    if args.warm_up_task:
        warm_up(settings, args.warm_up_task, f"factory_{os.getpid()}" if args.factory else str(args.port))

    def serve(port: int) -> None:
        HTTPServer((args.host, port), make_handler(Host(settings))).serve_forever()

    if args.factory:
        serve_factory(serve)
    else:
        serve(args.port)


if __name__ == "__main__":
    main()
