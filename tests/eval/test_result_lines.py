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
    lines = run_summary("r", "dev", "bundled", "success_rate", [], None, None, {"total": 5.0}, plots=False)
    assert lines[1].startswith("no evaluation ran") and lines[-1] == "viewer: python -m loop_agents.view r"


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
