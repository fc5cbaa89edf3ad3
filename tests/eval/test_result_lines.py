"""The one-line results: exact text for hand-made metrics (gem hunt and AppWorld)."""

from __future__ import annotations

from loop_agents.eval.result_lines import (
    eval_line,
    evaluate_line,
    parse_and_log_line,
    phase_line,
    run_summary,
)

GEM = {
    "eval/success_rate": 0.96,
    "eval/num_tasks": 100.0,
    "eval/num_runs": 1.0,
    "eval/tgc": 0.96,
    "eval/lost": 0.0,
}


def test_eval_line_gem_hunt_names_split_success_tasks_and_best():
    assert (
        eval_line(21, "dev", GEM, "bundled", (21, 0.96))
        == "[eval iter 21] dev success 0.96 (100 tasks) | best success 0.96 @21"
    )
    assert eval_line(3, "dev", {**GEM, "eval/success_rate": 0.255}, "bundled", None).endswith(
        "dev success 0.26 (100 tasks)"
    )


def test_eval_line_appworld_shows_tgc_sgc_runs_and_lost():
    metrics = {
        "eval/tgc": 0.4523,
        "eval/sgc": 0.3,
        "eval/num_tasks": 57.0,
        "eval/num_runs": 5.0,
        "eval/lost": 2.0,
    }
    line = eval_line(40, "test_normal", metrics, "appworld", (30, 0.5), best_metric="tgc")
    assert (
        line
        == "[eval iter 40] test_normal TGC 0.452 SGC 0.300 (57 tasks x 5 runs), 2 lost | best TGC 0.500 @30"
    )


def test_phase_line_minutes_seconds_and_cached():
    assert phase_line({"warm start": None, "start-up": 31.4, "rollout": 300.0, "learn": 119.6}) == (
        "time: warm start cached | start-up 31 s | rollout 5.0 min | learn 120 s"
    )


def test_run_summary_selection_held_out_and_where():
    selection = [(0, {"eval/success_rate": 0.26, "eval/num_tasks": 100.0}), (30, {"eval/success_rate": 0.84})]
    held_out = {"num_tasks": 400, "results": [("start", 0, {"eval/success_rate": 0.25}),
                                              ("best", 21, {"eval/success_rate": 0.8675})]}  # fmt: skip
    lines = run_summary("runs/demo", "dev", "bundled", "success_rate", selection, (21, 0.96), held_out,
                        {"start-up": 40.0, "total": 600.0}, plots=True)  # fmt: skip
    assert lines == [
        "== result of runs/demo",
        "selection (100 dev tasks, picks the best): dev success 0.26 (iter 0) → 0.84 (iter 30), best 0.96 @21",
        "held out (400 other dev tasks, unseen by the selection): start @0: success 0.25, best @21: success 0.87",
        "time: start-up 40 s | total 10.0 min",
        "plots runs/demo/plots/ | viewer: python -m loop_agents.view runs/demo | "
        "best checkpoint runs/demo/checkpoints/best (iteration 21)",
    ]


def test_run_summary_without_evaluations_says_so():
    lines = run_summary("r", "dev", "bundled", "success_rate", [], None, None, {"total": 5.0}, plots=False,
                        eval_enabled=False)  # fmt: skip
    assert (
        lines[1] == "no evaluation ran (eval.enabled=false)"
        and lines[-1] == "viewer: python -m loop_agents.view r"
    )
    lines = run_summary("r", "dev", "bundled", "success_rate", [], None, None, {"total": 5.0}, plots=False)
    assert lines[1] == "no evaluation finished"


def test_a_lost_evaluation_is_reported_as_lost():
    lost = {"eval/count": 0.0, "eval/num_tasks": 0.0, "eval/lost": 16.0, "eval/lost_env_error": 12.0,
            "eval/lost_env_capacity": 4.0}  # fmt: skip
    assert eval_line(3, "dev", lost, "bundled", None) == (
        "[eval iter 3] dev: no episode scored, 16 lost (12 env_error, 4 env_capacity)"
    )
    some = {"eval/count": 14.0, "eval/success_rate": 0.5, "eval/num_tasks": 8.0, "eval/lost": 2.0,
            "eval/lost_env_timeout": 2.0}  # fmt: skip
    assert eval_line(3, "dev", some, "bundled", None).endswith("(8 tasks), 2 lost (2 env_timeout)")
    lines = run_summary("r", "dev", "bundled", "success_rate", [], None, None, {"total": 5.0}, plots=False,
                        lost=[(0, lost), (3, lost)])  # fmt: skip
    assert lines[1] == (
        "selection: no evaluation scored, every episode was lost: @0 (12 env_error, 4 env_capacity), "
        "@3 (12 env_error, 4 env_capacity); no checkpoint picked"
    )
    assert "best checkpoint" not in lines[-1]


def test_evaluate_and_parse_and_log_lines():
    report = {"checkpoint": "runs/demo", "env": "bundled", "split": "dev", "num_tasks": 500, "runs": 1,
              "complete_runs": [0], "out": "runs/demo/evaluate/best/dev", "official": None,
              "metrics": {"eval/success_rate": 0.868, "eval/reward_mean": 0.95}}  # fmt: skip
    assert evaluate_line(report) == (
        "[evaluate] runs/demo on bundled/dev: success 0.87, reward 0.95 (500 tasks, 1 complete runs) "
        "-> runs/demo/evaluate/best/dev/metrics.json"
    )
    summary = {"aggregate": {"tgc": 0.875, "sgc": 0.75, "tgc_std": 0.177, "sgc_std": 0.354, "num_tasks": 4.0}}
    assert parse_and_log_line("exp", "dev", summary, 2, "r.jsonl") == (
        "[parse_and_log] exp on dev: TGC 0.875 SGC 0.750 (± 0.177 / 0.354 over 2 runs), 4 tasks -> r.jsonl"
    )


def test_intervals_follow_the_means_where_the_metrics_carry_them():
    gem = {**GEM, "eval/success_low": 0.914, "eval/success_high": 0.99}
    assert (
        eval_line(21, "dev", gem, "bundled", None)
        == "[eval iter 21] dev success 0.96 [0.91, 0.99] (100 tasks)"
    )
    aw = {"eval/tgc": 0.45, "eval/sgc": 0.3, "eval/success_low": 0.3, "eval/success_high": 0.6,
          "eval/sgc_low": 0.1, "eval/sgc_high": 0.5, "eval/num_tasks": 30.0}  # fmt: skip
    assert eval_line(3, "dev", aw, "appworld", None) == (
        "[eval iter 3] dev TGC 0.450 [0.300, 0.600] SGC 0.300 [0.100, 0.500] (30 tasks)"
    )
    selection = [(0, {**gem, "eval/success_rate": 0.26, "eval/success_low": 0.18, "eval/success_high": 0.35}),
                 (30, gem)]  # fmt: skip
    held_out = {"num_tasks": 400, "results": [("final", 30, gem)]}
    lines = run_summary("r", "dev", "bundled", "success_rate", selection, None, held_out, {}, plots=False)
    assert lines[1] == (
        "selection (100 dev tasks, picks the best): dev success 0.26 [0.18, 0.35] (iter 0) → 0.96 [0.91, 0.99] "
        "(iter 30)"
    )
    assert lines[2].endswith("final @30: success 0.96 [0.91, 0.99]")


def _summary(mean, low, high, episodes, missing, k=3, pass_k=0.9):
    interval = {"mean": mean, "low": low, "high": high, "n": 100}
    return {"success": interval, "sgc": interval, "runs": 3, "k": k, "avg@k": mean, "pass@k": pass_k,
            "episodes": episodes, "missing": missing}  # fmt: skip


def test_evaluate_line_prints_the_interval_pass_at_k_and_missing_episodes():
    report = {"checkpoint": "runs/demo", "env": "bundled", "split": "dev", "num_tasks": 100, "runs": 3,
              "complete_runs": [0, 1], "out": "o", "official": None, "metrics": {"eval/reward_mean": 0.95},
              "intervals": {"aggregate": _summary(0.62, 0.551, 0.70, 297, 3)}}  # fmt: skip
    assert evaluate_line(report) == (
        "[evaluate] runs/demo on bundled/dev: success 0.62 [0.55, 0.70], pass@3 0.90, reward 0.95 "
        "(100 tasks x 3 runs: 297 episodes, 3 missing, 2 complete runs) -> o/metrics.json"
    )


def test_compare_line_names_the_direction_and_each_difficulty():
    from loop_agents.eval.result_lines import compare_line

    difference = {"mean": 0.05, "low": -0.02, "high": 0.125, "n": 30}
    report = {"checkpoint": "A", "env": "appworld", "split": "dev", "compare": {
        "checkpoint": "B", "out": "o", "difference": "checkpoint - compare",
        "aggregate": {"tasks": 30, "pairs": 120, "difference": difference, "base": 0.5, "other": 0.55},
        "difficulty_1": {"tasks": 0, "pairs": 0}}}  # fmt: skip
    assert compare_line(report) == [
        "[compare] A - B on appworld/dev: TGC +0.050 [-0.020, +0.125] (30 tasks, 120 paired episodes; "
        "0.550 vs 0.500)",
        "  difficulty_1: no task played by both",
    ]


def test_format_report_has_the_interval_table_and_says_what_is_missing():
    from loop_agents.eval.tables import format_report

    report = {"checkpoint": "c", "env": "bundled", "split": "dev", "num_tasks": 100, "runs": 3, "out": "o",
              "complete_runs": [0, 1], "missing": {2: ["t"] * 3}, "goal_completion": None, "official": None,
              "metrics": {}, "timing": {"episodes_played": 0, "play_s": 0.0, "server_startup_s": 0.0,
                                        "env_startup_s": 0.0, "episodes_lost": 3, "total_s": 1.0},
              "intervals": {"aggregate": _summary(0.62, 0.551, 0.70, 297, 3),
                            "difficulty_1": _summary(0.5, 0.4, 0.6, 150, 0)}}  # fmt: skip
    text = format_report(report)
    assert (
        "95 % intervals (bootstrap over tasks; SGC over scenarios), every saved episode; 3 episodes missing:"
        in text
    )
    rows = text.splitlines()
    aggregate = next(r for r in rows if r.startswith("aggregate"))
    assert aggregate.split() == ["aggregate", "62.0", "[55.1,", "70.0]", "62.0", "[55.1,", "70.0]", "62.0", "90.0",
                                 "3", "297", "3"]  # fmt: skip
    assert next(r for r in rows if r.startswith("difficulty_1")).split()[-2:] == ["150", "0"]
