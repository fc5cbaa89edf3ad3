"""The benchmark runner and report on trivial benchmarks (no model, no server): subprocess isolation,
JSON records with metadata, goal checks, crash/time-out handling and the Markdown table."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap

import pytest

from benchmarks import runner
from benchmarks.runner import Benchmark, git_info


@pytest.fixture()
def trivial_module(tmp_path, monkeypatch):
    (tmp_path / "h4_trivial_bench.py").write_text(
        textwrap.dedent(
            """
            import sys, time

            def good(quick=False):
                print("noise on stdout")
                return {"ratio": 0.5 if quick else 0.95, "summary": "ours 95 vs raw 100", "raw": 100}

            def bad(quick=False):
                return {"ratio": 12.0, "summary": "128 turns 12x 16 turns"}

            def crash(quick=False):
                print("about to fail", file=sys.stderr)
                raise RuntimeError("boom")

            def slow(quick=False):
                time.sleep(30)
                return {"ratio": 1.0}

            def no_goal(quick=False):
                return {"ratio": 0.004, "ratio_definition": "a / b", "summary": "a | b"}
            """
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return "h4_trivial_bench"


def test_check_goal():
    assert runner.check_goal(0.95, ">= 0.9") is True
    assert runner.check_goal(0.85, ">= 0.9") is False
    assert runner.check_goal(10.0, "<= 10") is True
    assert runner.check_goal(0.03, "<= 0.02") is False
    assert runner.check_goal(1.0, None) is None
    assert runner.check_goal(None, ">= 0.9") is None
    with pytest.raises(ValueError):
        runner.check_goal(1.0, "about 1")


def test_run_records_and_report(tmp_path, trivial_module):
    results = tmp_path / "results"
    registry = [
        Benchmark("good", f"{trivial_module}:good", "ours vs raw", ">= 0.9"),
        Benchmark("bad", f"{trivial_module}:bad", "128 vs 16 turns", "<= 10"),
        Benchmark("crash", f"{trivial_module}:crash", "crashes", ">= 0.9"),
        Benchmark("slow", f"{trivial_module}:slow", "times out", ">= 0.9", timeout_s=3),
        Benchmark("no_goal", f"{trivial_module}:no_goal", "reported only", None),
    ]
    records = {b.name: runner.run_one(b, results_dir=results) for b in registry}

    good = json.loads((results / "good.json").read_text())
    assert good == records["good"]
    assert good["status"] == "ok" and good["ratio"] == 0.95 and good["passed"] is True
    assert good["details"] == {"raw": 100} and good["summary"] == "ours 95 vs raw 100"
    assert good["goal"] == ">= 0.9" and good["commit"] and good["date"]
    assert good["machine"]["cores"] >= 1 and good["machine"]["cpu"]
    assert records["bad"]["passed"] is False
    assert records["crash"]["status"] == "error" and records["crash"]["passed"] is None
    assert "boom" in records["crash"]["output_tail"] and records["crash"]["returncode"] != 0
    assert records["slow"]["status"] == "timeout" and records["slow"]["ratio"] is None
    assert records["no_goal"]["passed"] is None and records["no_goal"]["ratio_definition"] == "a / b"

    quick = runner.run_one(registry[0], quick=True, results_dir=results)
    assert quick["quick"] is True and quick["ratio"] == 0.5 and quick["passed"] is False
    history = list((results / "history" / "good").glob("*.json"))  # every run kept, the latest canonical
    assert sorted(json.loads(p.read_text())["ratio"] for p in history) == [0.5, 0.95]
    assert runner.history_name(good) in {p.name for p in history}  # the commit may move between runs

    (results / "unrelated.json").write_text(json.dumps({"device": "H100"}))  # not a runner record: skipped
    (results / "NOTES.md").write_text("Closing note: why `bad` misses.\n")
    path = runner.write_report(results, registry)
    table = path.read_text()
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in table.splitlines() if line.startswith("| `")]
    assert [r[0].strip() for r in rows] == ["`good`", "`bad`", "`crash`", "`slow`", "`no_goal`"]
    cells = {r[0].strip(): [c.strip() for c in r] for r in rows}
    assert cells["`good`"][3:6] == ["0.50", ">= 0.9", "**FAIL**"]  # the quick rerun replaced it
    assert "(quick sizes)" in cells["`good`"][2]
    assert cells["`bad`"][3:6] == ["12.00", "<= 10", "**FAIL**"]
    assert cells["`crash`"][5] == "error" and cells["`slow`"][5] == "timeout"
    assert cells["`no_goal`"][3:6] == ["0.004", "report", "report"]
    assert "a \\| b" in table  # pipes in summaries are escaped
    assert "- `no_goal`: a / b." in table and table.endswith("Closing note: why `bad` misses.\n")


def test_select_and_cli_list(capsys):
    names = [b.name for b in runner.select([])]
    assert "learner_throughput" in names and "appworld_env" not in names
    assert [b.name for b in runner.select(["appworld_env"])] == ["appworld_env"]
    assert all(b.kind == "cpu" for b in runner.select([], kinds=("cpu",)))
    with pytest.raises(SystemExit):
        runner.select(["nope"])
    assert runner.main(["list"]) == 0
    assert "trajectory_build" in capsys.readouterr().out
    for b in runner.BENCHMARKS:  # every registered entry point exists
        module, _, func = b.entry.partition(":")
        assert func == "bench" and module == f"benchmarks.{b.name}"


def test_git_info_marks_code_changes_dirty_but_not_recorded_results(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)  # fmt: skip

    (tmp_path / "loop_agents").mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "loop_agents" / "code.py").write_text("x = 1\n")
    (tmp_path / "benchmarks" / "results" / "runs.json").write_text("[]\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "start")
    assert git_info(tmp_path)["dirty"] is False
    (tmp_path / "benchmarks" / "results" / "runs.json").write_text('[{"run": 1}]\n')
    assert git_info(tmp_path)["dirty"] is False, "a recorded result is not a code change"
    (tmp_path / "loop_agents" / "code.py").write_text("x = 2\n")
    assert git_info(tmp_path)["dirty"] is True
