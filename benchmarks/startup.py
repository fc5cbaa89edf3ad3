"""Command → first rollout of `python -m loop_agents.train`, split into phases; before vs after the start-up cuts,
and a bare vLLM API server of the same model (command → first completion), side by side in one run.

Sides (each a fresh process and run directory, the tiny model, no warm start, 1 iteration, no evaluation):
- before: the start-up as it was (`run.overlap_startup=false`): one step after the other: model, learner,
  checkpoint 0, then Ray, vLLM and the rollout worker;
- after:  the defaults: Ray, vLLM and the rollout worker start as soon as the model path is known, beside the
  learner's build and checkpoint 0's save;
- bare:   `python -m vllm.entrypoints.openai.api_server --model <same dir>` with vLLM's defaults (but a 1 GiB KV
  cache, `VLLM_CPU_KVCACHE_SPACE=1`: the default 92 % of RAM does not fit a shared machine), then one completion;
  the floor for any wrapper.
Phases come from the driver's marks (summary.json `marks_s`, seconds since the process started) and the
vLLM log (the first line of the APIServer, EngineCore and Worker processes, `Loading weights took`, the
engine's `init engine ... took`; vLLM stamps whole seconds). The rounds alternate the sides.

Usage: .venv/bin/python -m benchmarks.startup [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TRAIN_ARGS = [
    "experiment=demo", "run.iterations=1", "learner.sft_epochs=0", "algorithm.tasks_per_iteration=2",
    "algorithm.rollouts_per_task=2", "algorithm.minibatch_size=4", "llm.max_new_tokens=8",
    "env.turn_schedule.max_turns=2", "eval.enabled=false", "logging.wandb_mode=disabled", "logging.plots=false",
    "logging.progress=false", "learner.stress_test=false",
]  # fmt: skip
_STAMP = re.compile(r"^\((\w+) pid=\d+\) \w+ (\d\d-\d\d \d\d:\d\d:\d\d) ")
_MARKERS = {
    "APIServer": "vLLM api_server's first log line",
    "EngineCore": "EngineCore's first line",
    "Worker": "Worker's first line",
}


def vllm_phases(log: Path, t0: float) -> dict[str, float]:
    """Seconds after `t0` (epoch) of each vLLM process's first log line, the weight load and engine init end."""
    year = dt.datetime.fromtimestamp(t0).year
    found: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        match = _STAMP.match(line)
        if not match:
            continue
        process = "Worker" if "Worker" in match.group(1) else match.group(1)
        when = dt.datetime.strptime(f"{year}-{match.group(2)}", "%Y-%m-%d %H:%M:%S").timestamp() - t0
        if process in _MARKERS:
            found.setdefault(_MARKERS[process], when)
        if "Loading weights took" in line:
            found.setdefault("model weights loaded", when)
        if "init engine" in line and "took" in line:
            found.setdefault("engine initialised (KV cache, warm-up)", when)
    return {k: round(v, 1) for k, v in sorted(found.items(), key=lambda kv: kv[1])}


def train_once(side: str, base: Path) -> dict:
    """One training process to its first rollout (and its end); phases in seconds after the command."""
    run_dir = base / f"{side}_{int(time.time() * 1000)}"
    args = list(TRAIN_ARGS) + [f"run.dir={run_dir}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    if side == "before":
        args.append("run.overlap_startup=false")
    load = os.getloadavg()[0]
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "loop_agents.train", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    total = time.time() - t0
    if done.returncode != 0:
        raise RuntimeError(
            f"{side}: training exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
        )
    summary = json.loads((run_dir / "summary.json").read_text())
    offset = summary["process_start"] - t0  # the process starts a few ms after the command
    marks = {k: round(v + offset, 1) for k, v in summary["marks_s"].items()}
    phases = {**marks, **vllm_phases(run_dir / "logs" / "vllm_0.log", t0)}
    return {
        "side": side,
        "load_avg_1m": round(load, 2),
        "first_rollout_s": marks["first rollout"],
        "total_s": round(total, 1),
        "phases_s": dict(sorted(phases.items(), key=lambda kv: kv[1])),
    }


def bare_once(model: Path, base: Path) -> dict:
    """`python -m vllm.entrypoints.openai.api_server --model <model>` (vLLM's defaults) to its first completion."""
    from loop_agents.ports import free_port

    port = free_port()
    log = base / f"bare_{int(time.time() * 1000)}.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host",
           "127.0.0.1", "--port", str(port), "--max-model-len", "2048"]  # fmt: skip
    load = os.getloadavg()[0]
    t0 = time.time()
    # vllm-cpu's default KV cache wants 92 % of RAM and refuses to start on a small shared machine
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"bare vLLM exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        ready = time.time() - t0
        reply = httpx.post(f"{url}/v1/completions", json={"model": str(model), "prompt": "hello", "max_tokens": 8},
                           timeout=120)  # fmt: skip
        reply.raise_for_status()
        first = time.time() - t0
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
    phases = {
        **vllm_phases(log, t0),
        "server ready (/v1/models)": round(ready, 1),
        "first completion": round(first, 1),
    }
    return {"side": "bare", "load_avg_1m": round(load, 2), "first_rollout_s": round(first, 1),
            "phases_s": dict(sorted(phases.items(), key=lambda kv: kv[1]))}  # fmt: skip


def run(rounds: int = 1, verbose: bool = True) -> list[dict]:
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    base = Path(tempfile.mkdtemp(prefix="startup_"))
    model = build_tiny_model(base / "tiny", TinyModelSpec(hidden_size=128, num_layers=2, num_heads=4,
                                                          num_kv_heads=2, intermediate_size=384))  # fmt: skip
    rows = []
    for _ in range(rounds):
        for side in ("before", "after", "bare"):
            row = bare_once(model, base) if side == "bare" else train_once(side, base)
            rows.append(row)
            if verbose:
                print(json.dumps(row), flush=True)
    return rows


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run startup`: after / before, command → first rollout (best of rounds)."""
    rows = run(rounds=1 if quick else 2)
    best = {
        side: min(r["first_rollout_s"] for r in rows if r["side"] == side)
        for side in ("before", "after", "bare")
    }
    loads = [r["load_avg_1m"] for r in rows]
    return {
        "ratio": round(best["after"] / best["before"], 3),
        "ratio_definition": "command → first rollout, after / before the start-up cuts (best of the rounds, "
        "sides alternated in one run); bare vLLM's command → first completion beside",
        "summary": f"command → first rollout: after {best['after']:.0f} s vs before {best['before']:.0f} s; "
        f"bare vLLM server → first completion {best['bare']:.0f} s (after/bare {best['after'] / best['bare']:.2f}); "
        f"load {min(loads):.1f}-{max(loads):.1f}",
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(bench(quick=args.rounds == 1), indent=1))


if __name__ == "__main__":
    main()
