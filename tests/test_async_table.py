"""The asynchronous-LOOP table (benchmarks/async_table.py) and its series runner's bookkeeping
(benchmarks/async_staleness.py): ratios paired by seed, hand-computed; the goal line; restarts skip finished runs."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import async_staleness, async_table


def run(
    k: int, seed: int, samples_per_s: float, time_to: float | None, held: float, exit_code: int = 0
) -> dict:
    return {
        "max_staleness": k, "seed": seed, "exit_code": exit_code, "iterations": 18, "extra": [],
        "load_before": 1.0 + k, "load_after": 2.0 + k, "samples_per_s": samples_per_s,
        "time_to_success_0.6_s": time_to, "dev_success": {"0": 0.1, "9": 0.5, "18": 0.7},
        "held_out": {"held_out/final/success_rate": held},
        "staleness_tokens": {"0": 60.0, "1": 40.0} if k else {"0": 100.0},
        "mixed_version_share_mean": 0.1 * k, "dropped_groups": 0.0,
    }  # fmt: skip


RUNS = [
    run(0, 0, 2.0, 400.0, 0.70), run(0, 1, 1.0, 600.0, 0.74), run(0, 2, 4.0, None, 0.60),
    run(1, 0, 3.0, 200.0, 0.72), run(1, 1, 2.0, 500.0, 0.70), run(1, 2, 4.0, 300.0, 0.66),
    run(2, 0, 2.0, 100.0, 0.10, exit_code=1),
]  # fmt: skip


def test_ratios_are_paired_by_seed_and_match_the_hand_computed_values() -> None:
    sync = {r["seed"]: r for r in RUNS if r["max_staleness"] == 0}
    row = async_table.summarize([r for r in RUNS if r["max_staleness"] == 1], sync)
    assert row["seeds"] == [0, 1, 2] and row["failed"] == 0
    assert row["samples_per_s"] == 3.0  # (3 + 2 + 4) / 3
    assert row["samples_ratio"] == 1.5  # median of 3/2, 2/1, 4/4
    # time ratios: sync / async where both reached 0.6: 400/200 = 2.0, 600/500 = 1.2 (seed 2's sync never did)
    assert row["time_ratio"] == 1.6 and row["time_ratios_n"] == 2
    assert row["times"] == [200.0, 500.0, 300.0]
    assert row["staleness"] == "60 / 40 %"
    assert abs(row["dev_final"] - 0.7) < 1e-12  # the last evaluation of each run
    failed = async_table.summarize([r for r in RUNS if r["max_staleness"] == 2], sync)
    assert failed["failed"] == 1 and failed["samples_per_s"] is None


def test_the_block_renders_every_setting_and_checks_the_goals_on_the_fastest(tmp_path: Path) -> None:
    (tmp_path / f"{async_table.NAME}.json").write_text(json.dumps({"runs": RUNS}))
    block = async_table.render_block(tmp_path)
    assert block.startswith(async_table.BEGIN) and block.endswith(async_table.END)
    lines = [line for line in block.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in lines[1:]] == ["0", "1", "2"]
    assert "| 1.50x |" in lines[2] and "not reached" in lines[1] and "- (1)" in lines[3]
    goal = block.splitlines()[-2]
    # k=1: 1.5x and 1.6x meet the ratios; its held-out IQM 0.69 lies inside k=0's interval around 0.68
    assert "max_staleness=1: samples/s 1.50x (met), time to 0.6 1.60x (met), held-out inside" in goal
    assert goal.endswith("met by max_staleness=1.") and "max_staleness=2" not in goal  # failed: no ratio


def test_nothing_recorded_says_so(tmp_path: Path) -> None:
    assert "No run recorded yet" in async_table.render_block(tmp_path)


def test_a_restarted_series_skips_only_finished_runs_of_the_same_setting() -> None:
    finished = run(1, 0, 3.0, 200.0, 0.7)
    assert async_staleness.is_finished(finished, "demo", 1, 0, 18, [])
    assert not async_staleness.is_finished(finished, "demo", 1, 0, 12, [])  # other iterations
    assert not async_staleness.is_finished(
        finished, "demo", 1, 0, 18, ["algorithm.lr=0.001"]
    )  # other overrides
    assert not async_staleness.is_finished(finished, "demo", 2, 0, 18, [])
    assert not async_staleness.is_finished({**finished, "exit_code": 1}, "demo", 1, 0, 18, [])
    assert not async_staleness.is_finished(finished, "appworld_demo", 1, 0, 18, [])  # another preset


def test_the_readme_row_gives_each_setting_against_the_synchronous_loop(tmp_path: Path) -> None:
    (tmp_path / f"{async_table.NAME}.json").write_text(
        json.dumps({"runs": RUNS, "date": "2026-11-29T11:00:00"})
    )
    [(claim, value, date, name)] = async_table.readme_rows(tmp_path)
    assert "median of 3 seeds" in claim and date == "2026-11-29" and name == f"{async_table.NAME}.json"
    # IQM of 3 runs trims nothing: the means (0.70 + 0.74 + 0.60) / 3 and (0.72 + 0.70 + 0.66) / 3
    assert value.startswith("k=0: held-out 0.68 [")
    assert "k=1: samples/s 1.50x, time to 0.6 1.60x (n=2), held-out 0.69 [" in value
    assert "k=2: samples/s -, time to 0.6 - (n=0), held-out -" in value  # its one run failed
    (tmp_path / f"{async_table.NAME}.json").write_text(json.dumps({"runs": RUNS[:3], "date": "2026-11-29"}))
    assert async_table.readme_rows(tmp_path) == []  # no asynchronous run: no row


def test_time_to_target_reads_the_presets_selection_metric(tmp_path: Path) -> None:
    """An AppWorld run picks `best` by TGC: time to 0.6 is the loop's seconds up to the first dev TGC >= 0.6
    (iteration 6: 10 + 12 + ... = 6 iterations of 10 s = 60 s), not the first success >= 0.6 (iteration 3, 30 s);
    the held-out final is read on TGC too."""
    rows = [{"iteration": i, "rollout/count": 8, "time/iteration": 10.0, "time/learn": 6.0, "time/rollout": 4.0}
            for i in range(1, 10)]  # fmt: skip
    rows += [
        {"eval/iteration": 3, "eval/success_rate": 0.65, "eval/tgc": 0.4},
        {"eval/iteration": 6, "eval/success_rate": 0.70, "eval/tgc": 0.62},
        {"eval/iteration": 9, "eval/success_rate": 0.75, "eval/tgc": 0.7},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "summary.json").write_text(json.dumps({"best": {"metric": "tgc", "iteration": 9}}))
    summary = async_staleness.summarize(tmp_path)
    assert summary["metric"] == "tgc" and summary["dev_success"] == {3: 0.4, 6: 0.62, 9: 0.7}
    assert summary["time_to_success_0.6_s"] == 60.0 and summary["iteration_reaching_0.6"] == 6
    assert summary["samples_per_s"] == 0.8  # 72 samples / 90 s
    record = {**summary, "held_out": {"held_out/final/tgc": 0.55, "held_out/final/success_rate": 0.9}}
    assert async_table.held_out_final(record) == 0.55
