"""`scripts/demo_seeds.py record`: a demo run made outside `run` (a fresh clone's `bash scripts/demo.sh`, a run
stopped part-way) joins the robustness table with its held-out dev curve and gain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _record(run_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "scripts" / "demo_seeds.py"), "record", str(run_dir), "--seed", "3",
               "--threads", "1", "--exit-code", "0", "--wall-s", "1200", "--load-before", "0.5", "--out", str(out),
               *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_a_recorded_run_joins_the_table_with_its_curve_and_gain(tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "demo_seeds.json"
    run_dir.mkdir()
    rows = [{"iteration": 1, "rollout/count": 96}]
    rows += [
        {"iteration": i, "eval/iteration": i, "eval/success_rate": s, "eval/reward_mean": 0.5 + s / 2}
        for i, s in [(0, 0.2), (3, 0.35), (6, 0.6)]
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    done = _record(run_dir, out, "--note", "fresh clone")
    assert done.returncode == 0, done.stderr
    assert "seed 3 threads 1: exit 0, 1200 s, dev 0.20 -> 0.60 (+40 points)" in done.stdout
    (run,) = json.loads(out.read_text())["runs"]
    assert run["gain_points"] == 40.0 and run["note"] == "fresh clone" and run["warm"] == {}
    assert list(run["dev_curve"]) == ["0", "3", "6"]
    assert (
        "| 3 | 1 | not built | 0.20@0 → 0.60@6 | **+40** (fresh clone) | — | 20.0 min (load 0.5)"
        in done.stdout
    )


def test_a_directory_without_metrics_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "demo_seeds.json"
    done = _record(tmp_path / "missing", out)
    assert done.returncode == 2 and "has no metrics.jsonl: not a run directory" in done.stderr
    assert not out.exists()


def test_phase_times_and_held_out_success_come_from_the_runs_summary(tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "demo_seeds.json"
    run_dir.mkdir()
    rows = [{"iteration": i, "eval/iteration": i, "eval/success_rate": s} for i, s in [(0, 0.16), (18, 0.84)]]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {
        "phases_s": {"warm start": 331.28, "rollout": 88.2, "total": 573.4},
        "held_out": {"held_out/num_tasks": 400.0, "held_out/start/success_rate": 0.2025,
                     "held_out/best/success_rate": 0.83, "held_out/final/success_rate": 0.8325},
    }  # fmt: skip
    (run_dir / "summary.json").write_text(json.dumps(summary))
    done = _record(run_dir, out)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["phases_s"]["warm start"] == 331.3
    assert run["held_out"] == {"tasks": 400, "start": 0.2025, "best": 0.83, "final": 0.8325}
    assert "| **+68** | 0.20 → 0.83 (400 tasks) | 20.0 min (warm start 5.5 min; load 0.5) |" in done.stdout


def test_the_table_ends_with_rliable_aggregates_over_the_evaluated_runs(tmp_path: Path) -> None:
    """Gains +40 +50 +60 +70: the IQM drops one run at each end, (50 + 60) / 2 = +55. A resample's IQM is +40 when
    3 or 4 of its 4 draws are that run: chance 13/256 = 0.051 > 0.025, so +40 is the interval's low end (+70 the
    high). Every final beats every start: P(final > warm start) is 1 in every resample. A run without an
    evaluation is left out of the aggregate, not of the JSON."""
    out = tmp_path / "demo_seeds.json"
    for i, end in enumerate([0.6, 0.7, 0.8, 0.9]):
        run_dir = tmp_path / f"run{i}"
        run_dir.mkdir()
        rows = [
            {"iteration": it, "eval/iteration": it, "eval/success_rate": s} for it, s in [(0, 0.2), (9, end)]
        ]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert _record(run_dir, out).returncode == 0
    (tmp_path / "dead").mkdir()
    (tmp_path / "dead" / "metrics.jsonl").write_text("")
    done = _record(tmp_path / "dead", out)
    assert done.returncode == 0, done.stderr
    assert (
        "Aggregate over the 4 evaluated runs (rliable: IQM, 95 % stratified-bootstrap interval over runs): "
        "dev gain +55 [+40, +70] points, final dev success 0.75 [0.60, 0.90]; P(final > warm start) "
        "1.00 [1.00, 1.00]." in done.stdout
    )
    assert len(json.loads(out.read_text())["runs"]) == 5  # the per-run list is kept, the dead run included


def test_a_tool_calling_runs_warm_model_is_measured_on_tool_calls(
    tmp_path: Path, tiny_model_dir: str
) -> None:
    """`warm_quality` reads the run's config: under `agent=tools` it scores the solver's dev episodes as tool calls
    with quoted observations (the form the warm start trained in), not as text actions."""
    import shutil

    import torch
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM

    from loop_agents.config.load import compose
    from loop_agents.envs.bundled.warm_start_quality import optimal_episode_probabilities
    from loop_agents.orchestration.warm_model import warm_chat_format

    sys.path.insert(0, str(ROOT / "scripts"))
    import demo_seeds

    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run_dir / "warm_model")
    (run_dir / "warm_model" / "warm_start.json").write_text(
        json.dumps({"epoch_losses": [0.5], "epochs_run": 1})
    )
    cfg = compose(["experiment=demo", "agent=tools"])
    OmegaConf.save(cfg, run_dir / "config.yaml")
    measured = demo_seeds.warm_quality(run_dir, 1)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    tools = optimal_episode_probabilities(model, warm_chat_format(cfg, tiny_model_dir), 100, quoted=True)
    text_cfg = compose(["experiment=demo"])
    text = optimal_episode_probabilities(model, warm_chat_format(text_cfg, tiny_model_dir), 100)
    assert measured["p_answer"] == tools["p_answer"] != text["p_answer"]
