"""TRL trains on our environment through OpenEnv: GRPOTrainer(environment_factory=...) on the served gem hunt.

    bash benchmarks/trl_openenv/install.sh          # once: .venv-trl (trl_compare's) + openenv-core
    .venv/bin/python -m benchmarks.trl_openenv [--steps 3]

This process starts our OpenEnv server (`python -m loop_agents.envs.openenv serve bundled`, 127.0.0.1) and builds
the tiny model; `trl_openenv/trl_side.py` runs in the TRL venv: TRL 1.16's own environment path,
`GRPOTrainer(environment_factory=GemHuntOpenEnv)`, where each rollout's environment is a session of OpenEnv's own
client on that server (reset with the row's task id, the tool `act` steps it, `get_reward` scores the episode).
Reported, no goal: ratio = optimizer steps TRL completed / steps asked (1.0: it trained every step on our env), with
the seconds per step, TRL's own reward and tool-call logs, and how many OpenEnv sessions, resets and steps the
server saw from TRL.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from loop_agents.envs.bundled.env import BundledTaskSource
from loop_agents.envs.bundled.game import SYSTEM_PROMPT
from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings

ROOT = Path(__file__).resolve().parent.parent
TRL_PYTHON = Path(os.environ.get("TRL_VENV", ROOT / ".venv-trl")) / "bin" / "python"
TRL_SIDE = Path(__file__).resolve().parent / "trl_openenv" / "trl_side.py"
MARKER = "TRL_OPENENV_RESULT "


def run(
    steps: int = 3,
    group: int = 4,
    tasks_per_step: int = 2,
    warm_demos: int = 400,
    warm_epochs: int = 3,
    timeout_s: int = 2400,
) -> dict:
    from loop_agents.tiny_model import build_tiny_model

    if not TRL_PYTHON.exists():
        raise SystemExit(
            f"no TRL venv at {TRL_PYTHON.parent.parent}: run bash benchmarks/trl_openenv/install.sh"
        )
    tmp = Path(tempfile.mkdtemp(prefix="trl_openenv_"))
    model = build_tiny_model(tmp / "model")
    server = OpenEnvServerProcess(OpenEnvSettings(serve_family="bundled", start_timeout_s=600))
    url = server.start()
    try:
        spec = {
            "url": url,
            "model_dir": str(model),
            "output_dir": str(tmp / "out"),
            "task_ids": BundledTaskSource().task_ids("train")[: steps * tasks_per_step],
            "system_prompt": SYSTEM_PROMPT,
            "group": group,
            "batch": group * tasks_per_step,
            "steps": steps,
            "max_new_tokens": 256,  # the whole multi-turn completion (tool replies count)
            "max_turns": 4,
            "lr": 1e-4,
            "threads": 2,
            # the tool-call warm start: solver episodes on train tasks after GRPO's
            "warm_indices": list(range(5000, 5000 + warm_demos)),
            "warm_epochs": warm_epochs,
        }
        (tmp / "spec.json").write_text(json.dumps(spec))
        env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "PYTHONPATH": str(ROOT)}
        with open(tmp / "trl_side.log", "w") as log:  # progress lines: tail -f it while it runs
            print(f"[trl_openenv] TRL side log: {tmp / 'trl_side.log'}", flush=True)
            proc = subprocess.run([str(TRL_PYTHON), str(TRL_SIDE), str(tmp / "spec.json")], stdout=subprocess.PIPE,
                                  stderr=log, text=True, timeout=timeout_s, env=env, cwd=ROOT)  # fmt: skip
    finally:
        server.stop()
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        tail = (tmp / "trl_side.log").read_text()[-3000:]
        raise RuntimeError(f"TRL side failed (exit {proc.returncode}): {proc.stdout[-1000:]} {tail}")
    trl = json.loads(lines[-1][len(MARKER) :])
    step_logs = [log for log in trl["logs"] if "reward" in log]
    return {
        "ratio": trl["steps"] / steps,
        "steps_asked": steps,
        "trl": trl,
        "rewards": [log.get("reward") for log in step_logs],
        "tool_call_frequency": [log.get("tools/call_frequency") for log in step_logs],
        "setup": {
            k: spec[k]
            for k in (
                "group",
                "batch",
                "steps",
                "max_new_tokens",
                "max_turns",
                "lr",
                "threads",
                "warm_epochs",
            )
        },
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run trl_openenv` (needs the TRL venv: trl_openenv/install.sh)."""
    result = run(steps=2 if quick else 3)
    trl = result["trl"]
    seconds = trl["step_seconds"]
    return {
        **result,
        "ratio_definition": "optimizer steps TRL GRPOTrainer(environment_factory=...) completed on the gem hunt "
        "served by our OpenEnv server / steps asked (reported, no goal)",
        "summary": f"TRL 1.16 GRPOTrainer(environment_factory) trained {trl['steps']}/{result['steps_asked']} steps "
        f"on our OpenEnv gem hunt ({', '.join(f'{s:.0f}' for s in seconds)} s/step, load "
        f"{result['load_avg_1m']}); the server saw {trl['openenv_calls']['sessions']} sessions, "
        f"{trl['openenv_calls']['resets']} resets, {trl['openenv_calls']['steps']} tool steps, "
        f"{trl['openenv_calls']['finishes']} finishes; mean reward per step {result['rewards']}",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(run(steps=args.steps), indent=2, default=str))
