"""The ablation (benchmarks/ablation.py, benchmarks/ablation_table.py): the table's maths on hand-made records
against hand-computed IQMs and probabilities of improvement, LOOP's row from the recorded demo runs, the runner's
plan, record and resume logic on hand-made run directories (no training started), its bad input, and the render."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import ablation, ablation_table, render
from benchmarks.run_records import append_run, load_runs

ROOT = Path(__file__).resolve().parents[1]


def _run(algorithm: str, seed: int, gain: float, best_gain: float | None = None, **extra) -> dict:
    """A finished run's record as benchmarks/ablation.py writes it (the fields the table reads)."""
    warm = 0.25
    return {"preset": "demo", "algorithm": algorithm, "seed": seed, "status": "ok", "metric": "success_rate",
            "warm_start": warm, "final": warm + gain, "best": warm + (gain if best_gain is None else best_gain),
            "seconds_per_iteration": 10.0, "zero_advantage_groups": 2, "groups": 16, "date": "2026-11-29 07:00 UTC",
            "iterations": 18, "samples": 1728, "warm_model": f"w{seed}", **extra}  # fmt: skip


def _failed(algorithm: str, seed: int) -> dict:
    return {"preset": "demo", "algorithm": algorithm, "seed": seed, "status": "failed", "error": "exit code 1",
            "date": "2026-11-29 07:30 UTC", "iterations": 18, "samples": 1728}  # fmt: skip


def _results(tmp_path: Path, runs: list[dict]) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    (results / "ablation_demo.json").write_text(json.dumps({"runs": runs}))
    return results


RUNS = [
    # LOOP: final gains 0.25, 0.375, 0.5, 0.75 -> IQM (25 % trimmed of 4: the middle two) = 0.4375;
    # best gains 0.375, 0.5, 0.5, 0.75 -> 0.5
    _run("loop", 0, 0.25, 0.375), _run("loop", 1, 0.375, 0.5), _run("loop", 2, 0.5), _run("loop", 3, 0.75),
    # GRPO: two finished (gains 0.125, 0.375: IQM of 2 trims nothing -> 0.25), one failed; 10 and 20 s an
    # iteration (mean 15); 3 + 5 zero-advantage groups of 16 + 16 (25 %)
    _run("grpo", 0, 0.125, seconds_per_iteration=10.0, zero_advantage_groups=3),
    _run("grpo", 1, 0.375, seconds_per_iteration=20.0, zero_advantage_groups=5),
    _failed("grpo", 2),
    # RLOO: three runs of gain 0.25 -> IQM 0.25 with a zero-width interval
    _run("rloo", 0, 0.25), _run("rloo", 1, 0.25), _run("rloo", 2, 0.25),
    _failed("dr_grpo", 0),
]  # fmt: skip


def test_the_table_maths_match_the_hand_computed_values(tmp_path: Path) -> None:
    runs = ablation_table.preset_runs(_results(tmp_path, RUNS), "demo")
    rows = {r["algorithm"]: r for r in ablation_table.table_rows(runs)}
    assert list(rows) == ["loop", "grpo", "rloo", "dr_grpo", "ppo_gae"]
    loop, grpo, rloo = rows["loop"], rows["grpo"], rows["rloo"]
    assert loop["final_gain"].mean == pytest.approx(0.4375) and loop["best_gain"].mean == pytest.approx(0.5)
    assert loop["final_gain"].low <= 0.4375 <= loop["final_gain"].high and loop["final_gain"].n == 4
    assert "p_loop_better" not in loop
    assert grpo["final_gain"].mean == pytest.approx(0.25) and (grpo["runs"], grpo["failed"]) == (3, 1)
    # P(LOOP > GRPO): of the 8 pairs, 0.25 beats 0.125 (1), 0.375 beats 0.125 and ties 0.375 (1.5), 0.5 and
    # 0.75 beat both (4): 6.5 / 8
    assert grpo["p_loop_better"].mean == pytest.approx(6.5 / 8)
    assert grpo["seconds_per_iteration"] == pytest.approx(15.0)
    assert grpo["zero_advantage_share"] == pytest.approx(8 / 32)
    # RLOO: 0.25 ties three runs (1.5), the other three LOOP runs beat all three (9): 10.5 / 12
    assert rloo["p_loop_better"].mean == pytest.approx(10.5 / 12)
    assert (rloo["final_gain"].low, rloo["final_gain"].high) == pytest.approx((0.25, 0.25))
    assert rows["dr_grpo"]["failed"] == 1 and "final_gain" not in rows["dr_grpo"]
    assert rows["ppo_gae"]["runs"] == 0


def test_the_rendered_table_says_what_ran_and_what_did_not(tmp_path: Path) -> None:
    results = _results(tmp_path, RUNS)
    text = ablation_table.render_preset(results, "demo")
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "| 2 (1 failed) | 0, 1 | +0.25 [" in lines["GRPO"] and "| 0.81 [" in lines["GRPO"]
    assert "| 15.0 | 25 % |" in lines["GRPO"]
    assert "no finished run (1 failed)" in lines["Dr. GRPO"]
    assert "not run yet" in lines["PPO (GAE)"]
    assert "LOOP's row: the" not in text  # the ablation ran LOOP itself: no borrowed runs
    claim, value, date, raw = ablation_table.readme_row(results, "demo")
    assert (
        value.startswith("LOOP +0.44 [")
        and "PPO (GAE) not run yet" in value
        and "Dr. GRPO no finished run" in value
    )
    assert (date, raw) == ("2026-11-29", "ablation_demo.json") and "docs/ablation.md" in claim


def _demo_run(seed: int, date: str, start: float, end: float, **extra) -> dict:
    curve = {str(i): {"success": start + (end - start) * i / 18} for i in (0, 9, 18)}
    return {"seed": seed, "threads": 2, "overrides": [], "exit_code": 0, "date": date, "dev_curve": curve,
            "dev_start": start, "dev_end": end, "dev_best": end,
            "phases_s": {"rollout": 90.0, "learn": 45.0, "sync": 9.0}, **extra}  # fmt: skip


def test_loop_on_the_demo_is_the_comparable_recorded_demo_runs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    recorded = [
        _demo_run(0, "2026-11-25 10:00 UTC", 0.2, 0.7),
        _demo_run(0, "2026-11-28 10:00 UTC", 0.1, 0.6),  # the latest of seed 0 wins
        _demo_run(1, "2026-11-25 10:00 UTC", 0.2, 0.9, threads=1),  # not the preset's threads
        _demo_run(2, "2026-11-25 10:00 UTC", 0.2, 0.9, overrides=["run.iterations=9"]),
        _demo_run(3, "2026-11-25 10:00 UTC", 0.2, 0.9, exit_code=-9),
        {**_demo_run(4, "2026-11-25 10:00 UTC", 0.2, 0.9), "dev_curve": {"0": {}, "9": {}}},  # stopped at 9
    ]
    (results / "demo_seeds.json").write_text(json.dumps({"runs": recorded}))
    loop = ablation_table.recorded_demo_loop_runs(results)
    assert [(r["seed"], r["warm_start"], r["final"]) for r in loop] == [(0, 0.1, 0.6)]
    assert loop[0]["seconds_per_iteration"] == pytest.approx(144.0 / 18)
    runs = ablation_table.preset_runs(results, "demo")
    assert [r["algorithm"] for r in runs] == ["loop"]
    assert "LOOP's row: the 1 recorded demo runs" in ablation_table.render_preset(results, "demo")
    (results / "ablation_demo.json").write_text(json.dumps({"runs": [_run("loop", 0, 0.5)]}))
    own = ablation_table.preset_runs(results, "demo")
    assert [r.get("source") for r in own] == [None]  # its own LOOP run, none borrowed
    # runs of another setting (2 iterations) get their own table; the borrowed LOOP runs join only the preset's
    short = {**_run("grpo", 0, 0.0), "iterations": 2, "samples": 192}
    (results / "ablation_demo.json").write_text(json.dumps({"runs": [short]}))
    tables = ablation_table.settings(results, "demo")
    assert [[(r["algorithm"], r["iterations"]) for r in runs] for runs in tables] == [
        [("loop", 18)],
        [("grpo", 2)],
    ]
    text = ablation_table.render_preset(results, "demo")
    assert text.startswith(
        "18 iterations, 6 × 16 rollouts an iteration, 1728 samples a run, no extra overrides:"
    )
    assert "\n2 iterations, 192 samples a run, no extra overrides:" in text


# ---------------------------------------------------------------------------------------------- the runner


def _plan(tmp_path: Path, extra: list[str]) -> list[dict]:
    return ablation.plan("demo", ["grpo", "rloo"], [0, 1], 18, 6, 16, extra, tmp_path / "runs", "cache")


def test_the_plan_gives_every_algorithm_of_a_seed_one_warm_start_and_the_same_samples(tmp_path: Path) -> None:
    runs = _plan(tmp_path, ["eval.max_tasks=4", "rloo:algorithm.epochs=1"])
    assert [(r["seed"], r["algorithm"]) for r in runs] == [(0, "grpo"), (0, "rloo"), (1, "grpo"), (1, "rloo")]
    for r in runs:
        seed = r["seed"]
        assert {f"run.seed={seed}", f"learner.sft_seed={seed}", "learner.sft_cache_dir=cache",
                "algorithm.rollouts_per_task=6", "algorithm.tasks_per_iteration=16", "run.iterations=18",
                "eval.max_tasks=4"} <= set(r["train_overrides"])  # fmt: skip
        assert r["samples"] == 6 * 16 * 18
    grpo, rloo = runs[0], runs[1]
    assert (
        "algorithm.epochs=1" in rloo["train_overrides"]
        and "algorithm.epochs=1" not in grpo["train_overrides"]
    )
    assert grpo["run_dir"].name != rloo["run_dir"].name.split("_")[0] and grpo["key"] != rloo["key"]
    assert _plan(tmp_path, [])[0]["run_dir"].name == "grpo_s0_it18"
    assert len({r["run_dir"] for r in runs}) == 4


def _write_run_dir(run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    rows = [
        {"iteration": 0, "eval/iteration": 0, "eval/tgc": 0.2},
        {"iteration": 1, "time/iteration": 10.0, "adv/num_groups": 4.0, "adv/zero_variance_groups": 1.0},
        {"iteration": 1, "eval/iteration": 1, "eval/tgc": 0.6},
        {"iteration": 2, "time/iteration": 20.0, "adv/num_groups": 4.0, "adv/zero_variance_groups": 3.0},
        {"iteration": 2, "eval/iteration": 2, "eval/tgc": 0.5},
        {"iteration": 2, "eval/iteration": 2, "eval/tgc": 0.4},  # the last row of an evaluation wins
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    held = {
        "held_out/start/tgc": 0.1,
        "held_out/final/tgc": 0.3,
        "held_out/num_tasks": 30,
        "held_out/start/num_tasks": 30,  # a run's summary has these too: they must not replace the scores
        "held_out/final/num_tasks": 30,
        "held_out/start/sgc": 0,
    }
    (run_dir / "summary.json").write_text(json.dumps({"best": {"metric": "tgc"}, "held_out": held}))


def test_a_run_directory_becomes_one_record_and_a_recorded_run_is_not_run_again(tmp_path: Path) -> None:
    entry = ablation.plan("demo", ["grpo"], [0], 2, 2, 2, [], tmp_path / "runs", "cache")[0]
    _write_run_dir(entry["run_dir"])
    log = "[warm start] reused the cached warm model /work/main/artifacts/warm_models/0123abcd\n"
    record = ablation.build_record(entry, 0, 61.04, 1.5, 2.25, log, resumed=False)
    assert record["status"] == "ok" and record["warm_model"] == "0123abcd"
    assert record["dev_curve"] == {"0": 0.2, "1": 0.6, "2": 0.4}
    assert (record["warm_start"], record["final"], record["best"]) == (0.2, 0.4, 0.6)
    assert record["seconds_per_iteration"] == 15.0 and record["zero_advantage_share"] == 0.5
    assert record["held_out"] == {"start": 0.1, "final": 0.3, "num_tasks": 30}
    assert (record["wall_s"], record["load_before"], record["load_after"]) == (61.0, 1.5, 2.25)
    assert ablation.record_key(record) == entry["key"]

    out = tmp_path / "ablation_demo.json"
    append_run(out, record)
    planned = ablation.plan("demo", ["grpo", "rloo"], [0], 2, 2, 2, [], tmp_path / "runs", "cache")
    assert [p["algorithm"] for p in ablation.pending(planned, load_runs(out))] == ["rloo"]
    other_samples = ablation.plan("demo", ["grpo"], [0], 2, 2, 4, [], tmp_path / "runs", "cache")
    assert ablation.pending(other_samples, load_runs(out)) == other_samples  # another run, not this one


def test_a_failed_run_is_recorded_with_its_reason_and_retried_only_when_asked(tmp_path: Path) -> None:
    entry = ablation.plan("demo", ["ppo_gae"], [1], 2, 2, 2, [], tmp_path / "runs", "cache")[0]
    log = "Traceback ...\nFileNotFoundError: /work/main/runs/ablation/x/warm_model and /tmp/scratch/runs/y\n"
    record = ablation.build_record(entry, 1, 5.0, 0.0, 0.0, log, resumed=True)  # the run dir never came to be
    assert record["status"] == "failed" and record["resumed"] is True
    assert record["error"] == "exit code 1; no evaluation at the warm start and after it"
    assert "/work/" not in record["log_tail"] and "/tmp/" not in record["log_tail"]
    assert "runs/ablation/x/warm_model" in record["log_tail"] and "runs/y" in record["log_tail"]
    assert ablation.pending([entry], [record]) == []
    assert ablation.pending([entry], [record], retry_failed=True) == [entry]
    assert ablation.pending([entry], [record, {**record, "status": "ok"}], retry_failed=True) == []
    _write_run_dir(entry["run_dir"])  # killed after 2 of 3 iterations, exit 0 or not
    short = ablation.build_record({**entry, "iterations": 3}, 0, 5.0, 0.0, 0.0, "", resumed=False)
    assert short["status"] == "failed" and short["error"] == "2 of 3 iterations"


def test_a_bad_algorithm_is_one_config_error_line_and_nothing_runs(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.ablation", "run", "--preset", "demo", "--algorithms", "grpo", "gpo",
         "--seeds", "0", "--out", str(out), "--runs-dir", str(tmp_path / "runs")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "config error: experiment=demo algorithm=gpo: unknown preset 'algorithm/gpo'; available: dr_grpo, grpo, "
        "gspo, loop, ppo_gae, reinforce_pp, rloo"
    ]
    assert not out.exists() and not (tmp_path / "runs").exists()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.ablation", "run", "--preset", "dmeo", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("config error: experiment=dmeo: unknown preset 'experiment/dmeo'")
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- the render


def test_the_docs_table_is_rendered_from_the_files_and_checked(tmp_path: Path) -> None:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for path in (ROOT / "benchmarks" / "results").iterdir():
        if path.is_file():
            shutil.copy(path, results / path.name)
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "ablation.md", tmp_path / "docs" / "ablation.md")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (results / "ablation_demo.json").write_text(json.dumps({"runs": RUNS[4:7]}))  # GRPO's runs arrive
    problems = render.check(tmp_path)
    assert len(problems) == 2 and {p.split(":")[0] for p in problems} == {"README.md", "docs/ablation.md"}
    render.write(tmp_path)
    assert render.check(tmp_path) == []
    page = (tmp_path / "docs" / "ablation.md").read_text()
    assert "| GRPO | 2 (1 failed) | 0, 1 | +0.25 [" in page


def test_final_within_the_best_interval_counts_held_out_declines(tmp_path: Path) -> None:
    """Held-out 0.76 over 400 tasks: Wilson's 95 % interval is [0.7158, 0.7993], so a final of 0.72 is within it and
    0.645 (GRPO seed 1 of the demo) is not; a run without held-out scores is not counted."""
    runs = [
        _run("loop", 0, 0.5, held_out={"start": 0.2, "best": 0.76, "final": 0.72, "num_tasks": 400}),
        _run("loop", 1, 0.5, held_out={"start": 0.2, "best": 0.76, "final": 0.645, "num_tasks": 400}),
        _run("loop", 2, 0.5, held_out={"start": 0.2, "best": 0.76, "final": 0.7157, "num_tasks": 400}),
        _run("loop", 3, 0.5),
    ]
    rows = {r["algorithm"]: r for r in ablation_table.table_rows(runs)}
    assert rows["loop"]["final_within_best"] == (1, 3)  # 0.7157 lies just under the lower end 0.71580
    text = ablation_table.render_preset(_results(tmp_path, runs), "demo")
    assert "| 1 of 3 |" in next(line for line in text.splitlines() if line.startswith("| LOOP"))
