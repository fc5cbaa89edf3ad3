"""`python -m benchmarks run gateway_throughput_text`: benchmarks/gateway_throughput.py with `--form text`.

The text program the gateway's learning runs train (`benchmarks.gateway_programs:text_action_loop`, forked and
spawned) against the in-process text agent, from the demo's warm model of seed 0 (the ablation's cached one:
episodes that open and answer as trained; an untrained model's replies are no action, which the program answers
without spending a move and the in-process agent with one, so their episodes would differ in length).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.gateway_throughput import bench as gateway_bench


def bench(quick: bool = False) -> dict:
    return gateway_bench(quick, form="text", model=str(warm_model_of_seed(0)))


def warm_model_of_seed(seed: int) -> Path:
    """The cached demo warm model the ablation's runs of `seed` started from (benchmarks/results/ablation_demo.json,
    artifacts/warm_models)."""
    from benchmarks.ablation import WARM_CACHE, default_out
    from benchmarks.run_records import ROOT, load_runs

    keys = [
        r["warm_model"]
        for r in load_runs(default_out("demo"))
        if r.get("seed") == seed and r.get("warm_model")
    ]
    model = ROOT / WARM_CACHE / keys[0] if keys else None
    if model is None or not (model / "config.json").exists():
        raise SystemExit(
            f"no cached demo warm model of seed {seed} in {WARM_CACHE}: run `python -m benchmarks.ablation run "
            f"--preset demo --algorithms loop --seeds {seed}` first, or use benchmarks.gateway_throughput --model"
        )
    return model
