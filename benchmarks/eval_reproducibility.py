"""Does an evaluation inside training score an adapter as the standalone evaluation does?

    python -m benchmarks.eval_reproducibility [--iterations 6] [--seed 0] [--runs-dir runs/eval_repro]
        [--train-reruns 1] [--standalone-reruns 1] [--name eval_reproducibility] [overrides ...]

One demo run (`experiment=demo`, its evaluation every `eval.every_n_iterations` on `eval.max_tasks` dev tasks ×
`eval.runs_per_task`, beside the run's rollouts on the same vLLM server with the training adapter loaded), then
`scripts/evaluate.py` of each evaluated checkpoint on the same tasks and runs (its own server, nothing else
loaded). Per checkpoint: both success rates with their intervals, and how many of the episodes are the same token
for token (the requests of both carry the same seeds: run.seed, task, run, turn). Before the fix of 2026-11-28 the
in-run requests were unseeded. Writes `benchmarks/results/eval_reproducibility.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.portable import portable_path
from benchmarks.runner import ROOT, write_analysis
from loop_agents.checkpoint_eval.episode_store import EpisodeStore
from loop_agents.eval.stats import bootstrap_mean


def _run(command: list[str], log: Path) -> float:
    """Run `command` into `log`; its seconds, also kept beside the log (a later invocation reuses both)."""
    seconds_file = log.with_suffix(".seconds")
    if seconds_file.exists():
        return float(seconds_file.read_text())
    started = time.perf_counter()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "WANDB_MODE": "disabled"}
    with log.open("w") as out:
        code = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... exited {code}; see {log}")
    seconds = round(time.perf_counter() - started, 1)
    seconds_file.write_text(f"{seconds}\n")
    return seconds


def in_run_episodes(run_dir: Path, iteration: int) -> dict[tuple[str, int], tuple[list[int], float]]:
    path = run_dir / "eval" / "dev" / f"iter_{iteration:06d}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["task_id"], r["sample_index"]): (r["token_ids"], float(r["success"])) for r in rows}


def standalone_episodes(out: Path) -> dict[tuple[str, int], tuple[list[int], float]]:
    return {
        (task, run): (list(traj.token_ids), float(traj.success))
        for run, by_task in EpisodeStore(out).load().items()
        for task, traj in by_task.items()
    }


def compare(in_run: dict, standalone: dict) -> dict:
    shared = sorted(set(in_run) & set(standalone))
    same = sum(in_run[key][0] == standalone[key][0] for key in shared)
    score = {}
    for name, episodes in (("in_run", in_run), ("standalone", standalone)):
        interval = bootstrap_mean([episodes[key][1] for key in shared])
        score[name] = {"success": round(interval.mean, 4), "low": round(interval.low, 4),
                       "high": round(interval.high, 4)}  # fmt: skip
    return {"episodes": len(shared), "same_tokens": same, **score}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "eval_repro")
    parser.add_argument(
        "--train-reruns", type=int, default=1, help="identical training runs (in-run evaluations)"
    )
    parser.add_argument(
        "--standalone-reruns", type=int, default=1, help="standalone evaluations of each checkpoint"
    )
    parser.add_argument("--name", default="eval_reproducibility", help="the results file's name")
    # a training run or standalone evaluation finished by an earlier invocation (its .seconds file) is reused
    parser.add_argument(
        "overrides", nargs="*", help="more Hydra overrides of the run (e.g. learner.sft_epochs=0)"
    )
    args = parser.parse_args()
    runs, train_s = [], []
    for rerun in range(args.train_reruns):
        run_dir = args.runs_dir / f"s{args.seed}" / f"train_{rerun}"
        run_dir.mkdir(parents=True, exist_ok=True)
        train_s.append(_run([sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}",
                             f"run.seed={args.seed}", f"run.iterations={args.iterations}", "run.keep_checkpoints=100",
                             "eval.held_out_tasks=0", "logging.plots=false", *args.overrides],
                            run_dir.parent / f"train_{rerun}.log"))  # fmt: skip
        runs.append(run_dir)
    evaluated = sorted(int(p.stem.split("_")[1]) for p in (runs[0] / "eval" / "dev").glob("iter_*.jsonl"))
    rows = []
    for iteration in evaluated:
        if iteration == 0:
            continue  # the start policy: no checkpoint of its own
        checkpoint = runs[0] / "checkpoints" / f"checkpoint-{iteration}"
        standalone, seconds = [], []
        for rerun in range(args.standalone_reruns):
            out = runs[0].parent / f"standalone_{iteration}_{rerun}"
            seconds.append(_run([sys.executable, "scripts/evaluate.py", f"checkpoint={checkpoint}", "split=dev",
                                 "max_tasks=100", "runs=4", f"out={out}"], out.with_suffix(".log")))  # fmt: skip
            standalone.append(standalone_episodes(out))
        row = {
            "iteration": iteration,
            "standalone_s": seconds,
            # every in-run evaluation (one per training rerun) and every standalone rerun, against standalone 0
            "in_run": [compare(in_run_episodes(run, iteration), standalone[0]) for run in runs],
            "standalone": [compare(other, standalone[0]) for other in standalone[1:]],
            # how much the adapter changes: episodes equal to the start policy's (iteration 0, no adapter) on the
            # same seeds; far below all means a wrong or missing adapter could not pass for the right one
            "same_tokens_as_start_policy": compare(
                in_run_episodes(runs[0], iteration), in_run_episodes(runs[0], 0)
            )["same_tokens"],
            "adapters_identical": len(
                {_sha256(run / "checkpoints" / f"checkpoint-{iteration}") for run in runs}
            )
            == 1,
        }
        print(f"[eval_reproducibility] {row}", flush=True)
        rows.append(row)
    write_analysis(args.name, {
        "what": __doc__.split("\n\n")[0], "run_dirs": [portable_path(r) for r in runs], "seed": args.seed,
        "iterations": args.iterations, "overrides": args.overrides, "train_s": train_s, "checkpoints": rows,
    })  # fmt: skip


def _sha256(checkpoint: Path) -> str:
    """The adapter's weights' digest (the training reruns are deterministic only if these agree)."""
    digest = hashlib.sha256()
    for path in sorted(checkpoint.rglob("*.safetensors")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


if __name__ == "__main__":
    main()
