"""`benchmarks/appworld_demo_runs.py`: a run's speed and learning read from its directory, the exact permutation
test checked by hand, and `add` / `report` through the command line (bad directories refused, nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.appworld_demo_runs import permutation_p, sign_flip_p, summarize_run

ROOT = Path(__file__).resolve().parents[1]


def _write_run(run_dir: Path, success: list[float], dev: dict[int, float], total_s: float) -> Path:
    run_dir.mkdir(parents=True)
    rows = [{"iteration": 0, "sft/loss": 0.01}]
    for i, s in enumerate(success, start=1):
        rows.append({"iteration": i, "time/rollout": 100.0 if i == 1 else 10.0 * i, "time/learn": 2.0,
                     "rollout/success_rate": s})  # fmt: skip
    rows += [{"iteration": i, "eval/iteration": i, "eval/tgc": v} for i, v in dev.items()]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    (run_dir / "summary.json").write_text(json.dumps({"phases_s": {"total": total_s}}))
    return run_dir


def test_permutation_p_matches_the_hand_count() -> None:
    # pooled 1 2 3 4, b = {3, 4}: |diff| of the 6 relabellings 2 2 1 0 0 1 -> 2 of 6 reach the observed 2
    assert permutation_p([1.0, 2.0], [3.0, 4.0]) == pytest.approx(2 / 6)
    # pooled 0 1 1 9, b one run: |diff| 3.67 (b = 0), 2.33 twice (b = 1), 8.33 (b = 9, observed) -> 1 of 4
    assert permutation_p([0.0, 1.0, 1.0], [9.0]) == pytest.approx(1 / 4)
    assert permutation_p([0.5, 0.5], [0.5, 0.5]) == 1.0
    with pytest.raises(ValueError):
        permutation_p([], [1.0])


def test_sign_flip_p_matches_the_hand_count() -> None:
    # mean 2; of the 8 sign flips only + + + and - - - reach |mean| 2
    assert sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    assert sign_flip_p([1.0, -1.0]) == 1.0  # observed mean 0: every flip reaches it
    # mean 1.5: flips of 4 and -1 give |mean| 1.5 (+ +), 2.5 (+ -), 2.5 (- +), 1.5 (- -): all 4 reach it
    assert sign_flip_p([4.0, -1.0]) == 1.0
    with pytest.raises(ValueError):
        sign_flip_p([])


def test_a_run_is_summarized_from_its_metrics_and_summary(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "r", [0.25, 0.5, 0.75], {0: 0.4, 3: 0.6}, 321.0)
    got = summarize_run(run)
    assert got["iterations"] == 3 and got["command_s"] == 321.0
    assert got["rollout_s_first"] == 100.0 and got["rollout_s_mean"] == 25.0  # iterations 2 and 3: 20, 30
    assert got["train_success"] == 0.5 and got["train_success_last5"] == 0.5
    assert got["dev_tgc"] == {"0": 0.4, "3": 0.6} and got["dev_tgc_mean"] == 0.6  # the warm start is left out


def _cli(out: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "benchmarks.appworld_demo_runs", "--out", str(out), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_add_and_report_compare_labels_and_refuse_a_non_run(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    refused = _cli(out, "add", "--label", "a", "--seed", "0", "--commit", "abc", str(tmp_path / "missing"))
    assert refused.returncode == 2 and "has no metrics.jsonl: not a run directory" in refused.stderr
    assert not out.exists()
    for label, seed, success, total in [("a", 0, 0.2, 400.0), ("a", 1, 0.4, 400.0), ("b", 0, 0.6, 200.0),
                                        ("b", 1, 0.8, 200.0)]:  # fmt: skip
        run = _write_run(tmp_path / f"{label}{seed}", [success] * 3, {0: 0.5, 3: success}, total)
        done = _cli(out, "add", "--label", label, "--seed", str(seed), "--commit", "abc", str(run))
        assert done.returncode == 0, done.stderr
    assert len(json.loads(out.read_text())["runs"]) == 4
    again = _cli(out, "add", "--label", "a", "--seed", "0", "--commit", "abc", str(tmp_path / "a0"))
    assert again.returncode == 0 and len(json.loads(out.read_text())["runs"]) == 4  # replaced, not doubled
    longer = _write_run(tmp_path / "c0", [0.5] * 2, {0: 0.5}, 100.0)
    assert _cli(out, "add", "--label", "c", "--seed", "0", "--commit", "abc", str(longer)).returncode == 0
    shown = _cli(out, "report", "--baseline", "a")
    assert shown.returncode == 0, shown.stderr
    assert "| b | 1 | abc | 200 | 25.0 | 100 | 0.800 / 0.80 | 0.500 0.800 | 0.800 |" in shown.stdout
    # train success 0.7 - 0.3 = +0.4, the largest of the 6 relabellings together with its mirror: p = 2/6
    assert "- b vs a: command 2.00x faster; train_success +0.400 (p = 0.33)" in shown.stdout
    # seeds 0 and 1: differences +0.4 and +0.4, only + + and - - of the 4 flips reach 0.4
    assert "  - paired by seed (0, 1): train_success +0.400 (p = 0.50)" in shown.stdout
    no_dev_after_0 = "- c (1 runs): train_success 0.500, dev_tgc_mean -, command_s 100.000"
    assert no_dev_after_0 in shown.stdout
    assert "- c vs a: not compared (runs of 2, 3 iterations)" in shown.stdout
    # rliable over the four 3-iteration runs (dev 0.5 at the warm start, then 0.2 0.4 0.6 0.8): IQM of the middle
    # two; a resample's IQM is the lowest run's value when 3 or 4 of its 4 draws are that run (13/256 > 0.025),
    # so the interval's ends are the extreme runs. P(after > warm start): 8 of the 16 pairs beat 0.5.
    assert (
        "- all 4 runs of 3 iterations (rliable: IQM [95 % stratified bootstrap over runs]): dev TGC warm start "
        "0.500 [0.500, 0.500], mean after it 0.500 [0.200, 0.800], final 0.500 [0.200, 0.800]; gain after - warm "
        "start +0.000 [-0.300, +0.300]; P(after > warm start) 0.50 [" in shown.stdout
    )
    assert "runs of 2 iterations" not in shown.stdout  # c has no evaluation after the warm start
    # every b run beats every a run on both: 1 in every resample
    assert (
        "  - P(b > a) over runs (rliable): dev_tgc_mean 1.00 [1.00, 1.00]; train_success 1.00 [1.00, 1.00]"
        in (shown.stdout)
    )
