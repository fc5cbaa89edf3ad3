"""Record a run of the demo with the tool-calling agent (`experiment=demo agent=tools`) beside the demo's seeds.

    python -m benchmarks.demo_tools_runs RUN_DIR [--note TEXT]

Reads what the run left (its `train.log` as written by `... > RUN_DIR.log`, `metrics.jsonl`, `summary.json`):
the overrides, the exit code when the log has one, the warm start's epochs (loss and P(optimal held-out episode)
from the log, so an unfinished run is recorded too), dev success per evaluation, held-out start/best/final, and
appends it with the commit, date and machine to `benchmarks/results/demo_tools_runs.json`. The demo's recorded
spread to compare with is `benchmarks/results/demo_seeds.json`.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from benchmarks.portable import portable_path
from benchmarks.run_records import append_run, dev_curve, metrics_rows, provenance, run_summary
from benchmarks.runner import RESULTS_DIR, machine_info

OUT = RESULTS_DIR / "demo_tools_runs.json"
_EPOCH = re.compile(r"\[warm start\] epoch (\d+)/\d+: loss ([\d.]+), P\(optimal held-out episode\) ([\d.]+)")
_ITER = re.compile(r"^\[iter (\d+)/(\d+)\] reward ([\d.]+) success ([\d.]+)")


def record(run_dir: Path, log: Path, note: str) -> dict:
    text = log.read_text(errors="replace") if log.exists() else ""
    config = (run_dir / "config.yaml").read_text() if (run_dir / "config.yaml").exists() else ""
    exit_code = re.findall(r"^rc=(-?\d+)$", text, re.MULTILINE)
    rows = metrics_rows(run_dir)
    summary = run_summary(run_dir)
    held = summary.get("held_out") or {}
    iterations = [m.groups() for m in map(_ITER.match, text.splitlines()) if m]
    tool_errors: dict[str, float] = {}
    for row in rows:
        for key, value in row.items():
            if key.startswith("tools/error/"):
                tool_errors[key] = tool_errors.get(key, 0.0) + value
    stamp = provenance()
    return {
        "run_dir": portable_path(run_dir),
        "agent_tools": "kind: tools" in config,
        "seed": int(m.group(1)) if (m := re.search(r"^  seed: (\d+)$", config, re.MULTILINE)) else None,
        "exit_code": int(exit_code[-1]) if exit_code else None,
        "finished": bool(summary),
        "warm_epochs": [
            {"epoch": int(e), "loss": float(loss), "p_optimal_held_out_episode": float(p)}
            for e, loss, p in _EPOCH.findall(text)
        ],
        "rl_iterations_done": int(iterations[-1][0]) if iterations else 0,
        "rollout_success_per_iteration": [float(s) for *_, s in iterations],
        "dev_success": dev_curve(rows),
        "held_out": {k: v for k, v in held.items() if k.endswith("success_rate") or k.endswith("num_tasks")},
        "tool_errors_total": tool_errors,
        "phases_s": summary.get("phases_s", {}),
        "note": note,
        "commit": stamp["commit"],
        "date": stamp["date"],
        "machine": machine_info(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--log", type=Path, help="the run's output (default: RUN_DIR.log)")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    entry = record(args.run_dir, args.log or args.run_dir.with_suffix(".log"), args.note)
    append_run(OUT, entry)
    print(json.dumps(entry, indent=1))
    print(f"-> {OUT.relative_to(RESULTS_DIR.parent.parent)}")


if __name__ == "__main__":
    main()
