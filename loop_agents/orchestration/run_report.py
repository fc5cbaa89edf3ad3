"""What the driver tells at the end of each evaluation and of the run: result lines, phase times, summary.json.

Phases (wall seconds of this process): warm start (building the full-weight warm model or the LoRA SFT;
`cached` when the run reused it), start-up (the rest of command → first rollout: imports, Ray, vLLM, learner,
checkpoint 0), rollout / learn / sync (sums of the iterations' `time/*`), eval (waiting for the last
evaluations plus the held-out evaluation after training; the evaluations during training run beside it).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from loop_agents.eval.result_lines import eval_line, run_summary


def process_start_time() -> float:
    """Epoch seconds when this process was created (the command's start, imports included)."""
    try:
        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - no /proc: count from the first import of this module
        return _IMPORTED_AT


_IMPORTED_AT = time.time()


@dataclass
class PhaseClock:
    """Wall-clock marks of one training process (epoch seconds / durations in seconds)."""

    process_start: float = field(default_factory=process_start_time)
    warm_start_s: float | None = None  # None: cached or not configured
    warm_start_cached: bool = False
    lora_sft_s: float = 0.0  # the LoRA warm start (learner.sft_target=lora), run by the driver
    first_rollout_at: float | None = None
    eval_wait_s: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)  # event -> seconds since process start (first time)

    def mark(self, event: str) -> None:
        """Remember when `event` first happened (the start-up benchmark reads these from summary.json)."""
        self.marks.setdefault(event, time.time() - self.process_start)

    def mark_first_rollout(self) -> None:
        if self.first_rollout_at is None:
            self.first_rollout_at = time.time()
            self.mark("first rollout")

    def phases(self, rows: list[dict[str, Any]], first_iteration: int) -> dict:
        """Phase -> seconds (None = cached) for the summary line; rows are metrics.jsonl rows."""
        mine = [r for r in rows if r.get("iteration", 0) >= first_iteration and "rollout/count" in r]
        phases: dict[str, float | None] = {}
        warm = (self.warm_start_s or 0.0) + self.lora_sft_s
        if self.warm_start_cached:
            phases["warm start"] = None
        elif warm > 0:
            phases["warm start"] = warm
        if self.first_rollout_at is not None:
            phases["start-up"] = max(self.first_rollout_at - self.process_start - warm, 0.0)
        for name in ("rollout", "learn", "sync"):
            phases[name] = sum(float(r.get(f"time/{name}") or 0.0) for r in mine)
        phases["eval"] = self.eval_wait_s
        phases["total"] = time.time() - self.process_start
        return phases


def best_record(run_dir: Path) -> tuple[int, float] | None:
    """(iteration, value) of `checkpoints/best/eval.json`, the checkpoint the evaluator picked."""
    path = run_dir / "checkpoints" / "best" / "eval.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return int(record["iteration"]), float(record["value"])


def print_eval_line(
    cfg, run_dir: Path, iteration: int, metrics: dict[str, Any], errors: dict[str, str] | None = None
) -> None:
    line = eval_line(iteration, str(cfg.eval.split), metrics, str(cfg.env.name), best_record(run_dir),
                     str(cfg.eval.best_metric))  # fmt: skip
    if not metrics.get("eval/num_tasks") and errors:  # every episode lost: say why
        cause, text = next(iter(errors.items()))
        line += f"; last {cause}: {text}"
    print(line, flush=True)


def print_block(lines: list[str]) -> None:
    """The result block, flushed at once."""
    print("\n".join(lines), flush=True)


def finish(cfg, run_dir: Path, rows: list[dict[str, Any]], clock: PhaseClock, first_iteration: int,
           held_out: dict[str, Any] | None, echo: bool = True) -> list[str]:  # fmt: skip
    """Print the run's closing lines (unless `echo` is False: the caller prints them last, after the libraries
    have said their goodbyes) and write them (with the numbers) to `<run_dir>/summary.json`."""
    metric = str(cfg.eval.best_metric)
    selection = sorted(
        (int(r["iteration"]), r) for r in rows if f"eval/{metric}" in r and "rollout/count" not in r
    )
    lost = sorted(
        (int(r["iteration"]), r) for r in rows
        if "eval/lost" in r and f"eval/{metric}" not in r and "rollout/count" not in r
    )  # fmt: skip
    phases = clock.phases(rows, first_iteration)
    best = best_record(run_dir)
    lines = run_summary(str(run_dir), str(cfg.eval.split), str(cfg.env.name), metric, selection, best, held_out,
                        phases, bool(cfg.logging.plots), lost, bool(cfg.eval.get("enabled", True)))  # fmt: skip
    if echo:
        print_block(lines)
    summary = {
        "lines": lines,
        "phases_s": phases,
        "marks_s": clock.marks,
        "process_start": clock.process_start,
        "best": None if best is None else {"iteration": best[0], "value": best[1], "metric": metric},
        "selection": [{"iteration": it, f"eval/{metric}": r.get(f"eval/{metric}")} for it, r in selection],
        "held_out": None if not held_out else held_out["row"],
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return lines
